//! # Policy gradient (REINFORCE with a learned baseline)
//!
//! Williams, "Simple statistical gradient-following algorithms for
//! connectionist reinforcement learning", Machine Learning 1992; the
//! baseline as in Sutton & Barto (2018) §13.4.
//!
//! Each iteration samples a batch with the current policy, computes the
//! discounted return `G_t` of every step (bootstrapping from `V(s_T)` only
//! where an episode was cut, never at termination), subtracts the value
//! estimate as a baseline, `Â_t = G_t − V(s_t)`, standardizes `Â` over the
//! batch, and takes one gradient step on the vanilla actor-critic loss
//! ([`actor_critic::policy_gradient_loss`]). Execution: A2C's, the framework's
//! `SyncSamplesOptimizer` ([`actor_critic::sync_trainer`]).
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `grad_norm`,
//! `total_loss`, `vf_explained_var`.

use crate::common::build_context::BuildContext;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::error::BuildError;
use crate::model::ModelSupport;
use crate::policy_gradient::actor_critic::{self, ActorCriticLoss};
use rlx::config::{ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// PG's configuration: the sampling, batch, actor-critic and learning
/// sections.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct PgConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// The batch per gradient step, observation filter, stragglers.
    #[serde(flatten)]
    pub batch: SyncBatch,
    /// Learning rate and loss weights (`vf_loss_coeff` weighs the
    /// baseline's value loss).
    #[serde(flatten)]
    pub actor_critic: ActorCriticLearner,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for PgConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, num_envs_per_worker: 8, ..Sampling::default() },
            batch: SyncBatch { train_batch_size: 2048, ..SyncBatch::default() },
            actor_critic: ActorCriticLearner { lr: 4e-3, ..ActorCriticLearner::default() },
            learning: Learning { grad_clip: Some(1.0), ..Learning::default() },
        }
    }
}

impl Validate for PgConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport::all(Self::NAME))?;
        self.sampling.validate()?;
        self.sampling.refuse_input(Self::NAME)?;
        self.batch.validate()?;
        self.actor_critic.validate()
    }
}

impl ActorCriticLoss for PgConfig {
    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.actor_critic, &self.learning, &self.sampling)
    }

    /// Discounted returns `G_t`; advantages `G_t − V(s_t)`.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        let returns = AdvantageEstimator::DiscountedReturns { gamma: self.learning.gamma as f32 };
        compute_advantages(traj, bootstrap, returns)?;
        let baseline = traj.f32(fields::VF_PREDS)?.to_vec();
        for (a, v) in traj.f32_mut(fields::ADVANTAGES)?.iter_mut().zip(baseline) {
            *a -= v;
        }
        Ok(())
    }
}

algorithm_name!(PgConfig, "PG");

/// The execution plan: evaluators from `make_env` running the framework's
/// `SyncSamplesOptimizer` (sample, standardize advantages, one gradient
/// step, broadcast; [`actor_critic::sync_trainer`]).
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: PgConfig) -> Result<Trainer, BuildError> {
    let batch = cfg.batch.clone();
    actor_critic::sync_trainer(&ctx, PgConfig::NAME, make_env, cfg, &batch, 1).await
}
