//! # Asynchronous advantage actor-critic (A3C)
//!
//! Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", ICML
//! 2016. The math is A2C's ([`crate::policy_gradient::a2c`]: GAE advantages, the vanilla
//! actor-critic loss); only the execution differs: each worker computes a
//! gradient on its own fresh samples, the driver applies gradients as they
//! arrive and refreshes only the sender's weights
//! ([`AsyncGradientsOptimizer`]). Gradients can be computed on weights a few
//! updates old; the lag is reported as `policy_lag_mean` / `policy_lag_max`.
//!
//! The config has A2C's keys, with A3C's defaults, plus nothing else: each
//! iteration applies `10 × max(num_workers, 1)` gradients. Advantages are
//! standardized per gradient (per worker batch), since no batch is ever
//! gathered in one place.

use crate::common::build_context::BuildContext;
use crate::common::sampling::spawn_evaluators;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::sequences::SEQ_MASK;
use crate::policy_gradient::a2c::A2cConfig;
use crate::policy_gradient::actor_critic::{
    actor_critic_policies, policy_gradient_loss, ActorCriticLoss, Forward, LossOutput,
};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::filter::ObservationFilter;
use rlx::optimizer::{AsyncGradientsConfig, AsyncGradientsOptimizer};
use rlx::sample_batch::standardize_masked;
use rlx::{fields, PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// A3C's configuration: A2C's keys with A3C's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct A3cConfig(pub A2cConfig);

impl Default for A3cConfig {
    fn default() -> Self {
        let a2c = A2cConfig::default();
        let sampling = Sampling { num_workers: 2, num_envs_per_worker: 8, ..a2c.sampling };
        Self(A2cConfig { sampling, batch: SyncBatch { train_batch_size: 256, ..a2c.batch }, ..a2c })
    }
}

impl Validate for A3cConfig {
    /// A2C's checks, and A2C keys that the asynchronous optimizer cannot
    /// honour are rejected rather than ignored.
    fn validate(&self) -> Result<(), ConfigError> {
        self.0.validate()?;
        let f = self.0.batch.min_sample_fraction;
        check("min_sample_fraction", f, f == 1.0, "must be 1.0 for A3C (no worker is ever waited for)")?;
        let filter = self.0.batch.observation_filter;
        check(
            "observation_filter",
            format!("{filter:?}"),
            filter == ObservationFilter::NoFilter,
            "must be NoFilter for A3C (filters are not synchronized asynchronously yet)",
        )
    }
}

impl ActorCriticLoss for A3cConfig {
    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        self.0.sections()
    }

    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        self.0.postprocess(traj, bootstrap)
    }

    /// A2C's loss, with advantages standardized over this worker's batch.
    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let mut mb = mb.clone();
        // Over padded sequences (an LSTM), with the real rows' statistics.
        let mask = mb.get(SEQ_MASK).map(|_| mb.f32(SEQ_MASK).map(<[f32]>::to_vec)).transpose()?;
        standardize_masked(mb.f32_mut(fields::ADVANTAGES)?, mask.as_deref());
        policy_gradient_loss(fwd, &mb, dev, &self.0.actor_critic)
    }
}

algorithm_name!(A3cConfig, "A3C");

/// The execution plan: asynchronous gradients.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: A3cConfig) -> Result<Trainer, BuildError> {
    let evaluators = spawn_evaluators(
        &ctx,
        make_env,
        actor_critic_policies(A3cConfig::NAME, cfg.clone()),
        cfg.0.batch.settings(&cfg.0.sampling, cfg.0.learning.gamma),
    )
    .await?;
    let plan = AsyncGradientsConfig { grads_per_step: 10 * cfg.0.sampling.samplers() };
    Ok(Trainer::new(evaluators, Box::new(AsyncGradientsOptimizer::new(plan))))
}
