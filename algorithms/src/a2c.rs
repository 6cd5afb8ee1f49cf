//! # Advantage actor-critic (A2C)
//!
//! The synchronous variant of Mnih et al., "Asynchronous Methods for Deep
//! Reinforcement Learning", ICML 2016, as OpenAI Baselines popularized it:
//! all evaluators sample short fragments with the same weights, the driver
//! takes one gradient step on the concatenation, and the new weights are
//! broadcast. Advantages are GAE(γ, λ) (λ = 1 gives the paper's n-step
//! returns), standardized over the batch; the loss is the vanilla
//! actor-critic loss with an entropy bonus ([`policy_gradient_loss`]).
//! Execution: [`SyncSamplesOptimizer`].
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `grad_norm`,
//! `total_loss`, `vf_explained_var`.

use crate::actor_critic::{policy_gradient_loss, ActorCriticLoss, Forward, LearnerSettings, Loss};
use crate::device::DeviceSpec;
use crate::device::NetDevice;
use crate::execution::{check_learning, check_sync_sampling, sync_trainer, SamplingSettings};
use crate::model::{ModelConfig, ModelSupport};
use crate::{BuildError, EnvMaker};
use rlx::config::{check, ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{EnvShards, LearnerStats, PolicyError, RestartPolicy, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// A2C's configuration (A3C uses the same keys plus its own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct A2cConfig {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Env steps per gradient step, split evenly across evaluators.
    pub train_batch_size: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// GAE λ (1.0: n-step returns as in the paper).
    pub lambda: f64,
    /// Weight of the value loss.
    pub vf_loss_coeff: f64,
    /// Weight of the entropy bonus.
    pub entropy_coeff: f64,
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// `"NoFilter"` or `"MeanStdFilter"`.
    pub observation_filter: ObservationFilter,
    /// The network: hidden layers, convolutions, LSTM (RLlib's `model`
    /// keys; see the book's "Models" page).
    pub model: ModelConfig,
    /// Keyword arguments for the env.
    pub env_config: serde_json::Value,
    /// Seed for network initialization, exploration and env resets.
    pub seed: u64,
    /// Where the policy's tensors live: `"cpu"`, or `"cuda"` / `"cuda:N"`
    /// in a build with the `cuda` feature.
    pub device: DeviceSpec,
    /// How evaluator actors are restarted after a failure.
    pub restart: RestartPolicy,
    /// Splits each sampling evaluator's env copies over this many
    /// supervised child actors that step them in parallel, for slow envs
    /// (`{"num_shards": 0}`, the default, steps them in the evaluator);
    /// `restart` is the shards' own restart policy. See the book's "Env
    /// shards" section.
    pub env_shards: EnvShards,
    /// Straggler mitigation: learn once this fraction of the evaluators has
    /// returned (the late batches are dropped and counted as
    /// `straggler_batches_dropped`); 1.0 waits for all.
    pub min_sample_fraction: f64,
}

impl Default for A2cConfig {
    fn default() -> Self {
        Self {
            num_workers: 1,
            num_envs_per_worker: 16,
            train_batch_size: 256,
            lr: 1e-3,
            gamma: 0.99,
            lambda: 0.95,
            vf_loss_coeff: 0.5,
            entropy_coeff: 0.0,
            grad_clip: Some(0.5),
            observation_filter: ObservationFilter::NoFilter,
            model: ModelConfig::default(),
            env_config: serde_json::Value::Null,
            seed: 0,
            device: DeviceSpec::Cpu,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
            min_sample_fraction: 1.0,
        }
    }
}

impl Validate for A2cConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.device.check_available()?;
        self.model.validate(ModelSupport { algorithm: "A2C", conv: true, lstm: true, custom: true })?;
        check_sync_sampling(
            self.num_envs_per_worker,
            &self.env_shards,
            self.train_batch_size,
            self.min_sample_fraction,
            self.observation_filter,
        )?;
        check("lambda", self.lambda, (0.0..=1.0).contains(&self.lambda), "must be in [0, 1]")?;
        check_learning(self.lr, self.gamma, self.vf_loss_coeff, self.entropy_coeff, self.grad_clip, &self.restart)
    }
}

impl ActorCriticLoss for A2cConfig {
    fn learner(&self) -> LearnerSettings {
        LearnerSettings {
            lr: self.lr,
            num_sgd_iter: 1,
            sgd_minibatch_size: None,
            grad_clip: self.grad_clip,
            seed: self.seed,
            device: self.device,
        }
    }

    fn model(&self) -> &ModelConfig {
        &self.model
    }

    /// GAE(γ, λ) advantages and value targets.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        let estimator = AdvantageEstimator::Gae { gamma: self.gamma as f32, lambda: self.lambda as f32 };
        Ok(compute_advantages(traj, bootstrap, estimator)?)
    }

    fn loss<D: NetDevice>(
        &self,
        fwd: Forward<D>,
        mb: &SampleBatch,
        dev: &D,
    ) -> Result<(Loss<D>, LearnerStats), PolicyError> {
        policy_gradient_loss(fwd, mb, dev, self.vf_loss_coeff, self.entropy_coeff)
    }
}

impl A2cConfig {
    /// How this config's evaluators sample.
    pub fn sampling(&self) -> SamplingSettings {
        SamplingSettings::synchronous(
            self.num_workers,
            self.num_envs_per_worker,
            self.train_batch_size,
            self.observation_filter,
            self.seed,
            self.restart,
        )
        .with_env_shards(self.env_shards)
    }
}

/// The execution plan: synchronous sampling, one gradient step per batch.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(make_env: EnvMaker, cfg: A2cConfig) -> Result<Trainer, BuildError> {
    let (sampling, min_sample_fraction) = (cfg.sampling(), cfg.min_sample_fraction);
    sync_trainer("A2C", make_env, cfg, sampling, min_sample_fraction).await
}
