//! # Advantage actor-critic (A2C)
//!
//! The synchronous variant of Mnih et al., "Asynchronous Methods for Deep
//! Reinforcement Learning", ICML 2016, as OpenAI Baselines popularized it:
//! all evaluators sample short fragments with the same weights, the driver
//! takes one gradient step on the concatenation, and the new weights are
//! broadcast. Advantages are GAE(γ, λ) (λ = 1 gives the paper's n-step
//! returns), standardized over the batch; the loss is the vanilla
//! actor-critic loss with an entropy bonus ([`policy_gradient_loss`]).
//! Execution: [`A2cStep`] at the end of this file.
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `grad_norm`,
//! `total_loss`, `vf_explained_var`.

use crate::actor_critic::{policy_gradient_loss, ActorCriticLoss, Forward, LossOutput};
use crate::device::NetDevice;
use crate::execution::{actor_critic_policies, spawn_evaluators};
use crate::model::ModelSupport;
use crate::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::{BuildError, EnvMaker};
use async_trait::async_trait;
use rlx::config::{check, ConfigError, Validate};
use rlx::optimizer::{publish_round, sample_round, OptimizerError, StepStats};
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, Evaluators, PolicyError, PolicyOptimizer, SampleBatch, Trainer};
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
        self.learning.validate(ModelSupport::all("A2C"))?;
        self.sampling.validate()?;
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

    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        policy_gradient_loss(fwd, mb, dev, &self.actor_critic)
    }
}

/// The execution plan: evaluators from `make_env` running [`A2cStep`].
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(make_env: EnvMaker, cfg: A2cConfig) -> Result<Trainer, BuildError> {
    let (batch, sampling) = (cfg.batch.clone(), cfg.sampling.clone());
    let gamma = cfg.learning.gamma;
    A2cStep::trainer("A2C", make_env, cfg, &batch, &sampling, gamma).await
}

/// A2C's training step, once per iteration (PG's too): sample, standardize
/// advantages, one gradient step on the whole batch, broadcast.
pub struct A2cStep {
    /// Learn once this fraction of the samplers has returned.
    pub min_sample_fraction: f64,
}

impl A2cStep {
    /// Evaluators from `make_env` with `loss`'s policies (`name`'s),
    /// sampling as `batch` and `sampling` say (`gamma` discounts the
    /// returns of reward scaling), running this step.
    pub(crate) async fn trainer<L: ActorCriticLoss>(
        name: &'static str,
        make_env: EnvMaker,
        loss: L,
        batch: &SyncBatch,
        sampling: &Sampling,
        gamma: f64,
    ) -> Result<Trainer, BuildError> {
        let step = Self { min_sample_fraction: batch.min_sample_fraction };
        let evaluators =
            spawn_evaluators(make_env, actor_critic_policies(name, loss), batch.settings(sampling, gamma)).await?;
        Ok(Trainer::new(evaluators, Box::new(step)))
    }
}

#[async_trait]
impl PolicyOptimizer for A2cStep {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        // Every evaluator samples its share of `train_batch_size` with the
        // current weights; its rows come with advantages (`postprocess`).
        let mut round = sample_round(evaluators, self.min_sample_fraction).await?;
        // Advantages standardized over the whole train batch.
        round.batch.standardize(fields::ADVANTAGES)?;
        // One gradient step of `loss` on the whole batch, in the driver.
        let learner = evaluators.learn_on_batch(&round.batch)?;
        // The new weights to every evaluator: the next round is on-policy.
        publish_round(evaluators, round, learner).await
    }
}
