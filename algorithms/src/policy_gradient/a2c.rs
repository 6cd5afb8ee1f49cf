//! # Advantage actor-critic (A2C)
//!
//! The synchronous variant of Mnih et al., "Asynchronous Methods for Deep
//! Reinforcement Learning", ICML 2016, as OpenAI Baselines popularized it:
//! all evaluators sample short fragments with the same weights, the driver
//! takes one gradient step on the concatenation, and the new weights are
//! broadcast. Advantages are GAE(γ, λ) (λ = 1 gives the paper's n-step
//! returns), standardized over the batch; the loss is the vanilla
//! actor-critic loss with an entropy bonus ([`actor_critic::policy_gradient_loss`]).
//! Execution: the framework's `SyncSamplesOptimizer`, built at the end of
//! this file.
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `grad_norm`,
//! `total_loss`, `vf_explained_var`.

use crate::common::build_context::BuildContext;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::error::BuildError;
use crate::model::ModelSupport;
use crate::policy_gradient::actor_critic::{self, ActorCriticLoss};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// A2C's configuration (A3C's too): the sampling, batch, actor-critic and
/// learning sections plus GAE's λ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct A2cConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// The batch per gradient step, observation filter, stragglers.
    #[serde(flatten)]
    pub batch: SyncBatch,
    /// Learning rate and loss weights.
    #[serde(flatten)]
    pub actor_critic: ActorCriticLearner,
    /// GAE λ (1.0: n-step returns as in the paper).
    pub lambda: f64,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for A2cConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_envs_per_worker: 16, ..Sampling::default() },
            batch: SyncBatch { train_batch_size: 256, ..SyncBatch::default() },
            actor_critic: ActorCriticLearner::default(),
            lambda: 0.95,
            learning: Learning { grad_clip: Some(0.5), ..Learning::default() },
        }
    }
}

impl Validate for A2cConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport::all(Self::NAME))?;
        self.sampling.validate()?;
        self.sampling.refuse_input(Self::NAME)?;
        self.batch.validate()?;
        check("lambda", self.lambda, (0.0..=1.0).contains(&self.lambda), "must be in [0, 1]")?;
        self.actor_critic.validate()
    }
}

impl ActorCriticLoss for A2cConfig {
    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.actor_critic, &self.learning, &self.sampling)
    }

    /// GAE(γ, λ) advantages and value targets.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        let estimator = AdvantageEstimator::Gae { gamma: self.learning.gamma as f32, lambda: self.lambda as f32 };
        Ok(compute_advantages(traj, bootstrap, estimator)?)
    }
}

algorithm_name!(A2cConfig, "A2C");

/// The execution plan: evaluators from `make_env` running the framework's
/// `SyncSamplesOptimizer` (sample, standardize advantages, one gradient
/// step on the whole batch, broadcast; [`actor_critic::sync_trainer`]).
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: A2cConfig) -> Result<Trainer, BuildError> {
    let batch = cfg.batch.clone();
    actor_critic::sync_trainer(&ctx, A2cConfig::NAME, make_env, cfg, &batch, 1).await
}
