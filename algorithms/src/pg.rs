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
//! ([`policy_gradient_loss`]). Execution: [`SyncSamplesOptimizer`].
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `grad_norm`,
//! `total_loss`, `vf_explained_var`.

use crate::actor_critic::{policy_gradient_loss, ActorCriticLoss, Forward, LearnerSettings, Loss};
use crate::device::DeviceSpec;
use crate::device::NetDevice;
use crate::execution::{check_learning, check_sync_sampling, sync_trainer, SamplingSettings};
use crate::model::{ModelConfig, ModelSupport};
use crate::{BuildError, EnvMaker};
use rlx::config::{ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, EnvShards, LearnerStats, PolicyError, RestartPolicy, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// PG's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct PgConfig {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Env steps per training iteration (one gradient step each).
    pub train_batch_size: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Weight of the baseline's value loss.
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

impl Default for PgConfig {
    fn default() -> Self {
        Self {
            num_workers: 0,
            num_envs_per_worker: 8,
            train_batch_size: 2048,
            lr: 4e-3,
            gamma: 0.99,
            vf_loss_coeff: 0.5,
            entropy_coeff: 0.0,
            grad_clip: Some(1.0),
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

impl Validate for PgConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.device.check_available()?;
        self.model.validate(ModelSupport { algorithm: "PG", conv: true, lstm: true, custom: true })?;
        check_sync_sampling(
            self.num_envs_per_worker,
            &self.env_shards,
            self.train_batch_size,
            self.min_sample_fraction,
            self.observation_filter,
        )?;
        check_learning(self.lr, self.gamma, self.vf_loss_coeff, self.entropy_coeff, self.grad_clip, &self.restart)
    }
}

impl ActorCriticLoss for PgConfig {
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

    /// Discounted returns `G_t`; advantages `G_t − V(s_t)`.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        compute_advantages(traj, bootstrap, AdvantageEstimator::DiscountedReturns { gamma: self.gamma as f32 })?;
        let baseline = traj.f32(fields::VF_PREDS)?.to_vec();
        for (a, v) in traj.f32_mut(fields::ADVANTAGES)?.iter_mut().zip(baseline) {
            *a -= v;
        }
        Ok(())
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

/// The execution plan: synchronous sampling, one gradient step per batch.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(make_env: EnvMaker, cfg: PgConfig) -> Result<Trainer, BuildError> {
    let sampling = SamplingSettings::synchronous(
        cfg.num_workers,
        cfg.num_envs_per_worker,
        cfg.train_batch_size,
        cfg.observation_filter,
        cfg.seed,
        cfg.restart,
    )
    .with_env_shards(cfg.env_shards);
    let min_sample_fraction = cfg.min_sample_fraction;
    sync_trainer("PG", make_env, cfg, sampling, min_sample_fraction).await
}
