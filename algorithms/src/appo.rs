//! # APPO: asynchronous PPO
//!
//! IMPALA's architecture ([`crate::impala`]: asynchronous workers, learner
//! thread, V-trace) with PPO's clipped surrogate objective (Schulman et al.
//! 2017), as in RLlib's APPO. The importance ratio `r = π(a|x) / μ(a|x)` is
//! taken against the behaviour policy μ that sampled the batch, so the clip
//! also bounds how far stale samples can push the policy; advantages and
//! value targets come from V-trace:
//!
//! ```text
//! policy loss  −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)],   Â = ρ_t (r_t + γ v_{t+1} − V(x_t))
//! value loss   ½·E[(V(x_t) − v_t)²]
//! ```
//!
//! Each train batch gets `num_sgd_iter` passes, in order.
//!
//! Learner metrics: IMPALA's plus `clip_frac`.

use crate::actor_critic::{ActorCriticLoss, Forward, LearnerSettings, Loss};
use crate::device::DeviceSpec;
use crate::device::NetDevice;
use crate::impala::{build_async, plan, vtrace_batch, ImpalaConfig};
use crate::model::ModelConfig;
use crate::{BuildError, EnvMaker};
use dfdx::prelude::*;
use rlx::config::{check, ConfigError, Validate};
use rlx::optimizer::AsyncSamplesConfig;
use rlx::{fields, EnvShards, LearnerStats, PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// APPO's configuration: IMPALA's keys plus the clip and the epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct AppoConfig {
    /// Evaluator actors sampling asynchronously; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Steps of every env copy per batch a worker sends.
    pub rollout_fragment_length: usize,
    /// Rows per learner update.
    pub train_batch_size: usize,
    /// Env steps sampled per training iteration (reporting granularity).
    pub timesteps_per_iteration: usize,
    /// Passes over each train batch.
    pub num_sgd_iter: usize,
    /// Clip range ε of the ratio against the behaviour policy.
    pub clip_param: f64,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// ρ̄ of V-trace.
    pub vtrace_clip_rho_threshold: f64,
    /// c̄ of V-trace.
    pub vtrace_clip_c_threshold: f64,
    /// Weight of the value loss.
    pub vf_loss_coeff: f64,
    /// Weight of the entropy bonus.
    pub entropy_coeff: f64,
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// Batches that may queue for the learner before sampling waits.
    pub learner_queue_size: usize,
    /// A worker gets the learner's weights every this many of its batches.
    pub broadcast_interval: usize,
    /// Aggregation actors concatenating batches before the learner.
    pub num_aggregation_workers: usize,
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
    pub restart: rlx::RestartPolicy,
    /// Splits each sampling evaluator's env copies over this many
    /// supervised child actors that step them in parallel, for slow envs
    /// (`{"num_shards": 0}`, the default, steps them in the evaluator);
    /// `restart` is the shards' own restart policy. See the book's "Env
    /// shards" section.
    pub env_shards: EnvShards,
}

impl Default for AppoConfig {
    fn default() -> Self {
        let i = ImpalaConfig::default();
        Self {
            num_workers: i.num_workers,
            num_envs_per_worker: i.num_envs_per_worker,
            rollout_fragment_length: i.rollout_fragment_length,
            train_batch_size: i.train_batch_size,
            timesteps_per_iteration: i.timesteps_per_iteration,
            num_sgd_iter: 2,
            clip_param: 0.3,
            lr: i.lr,
            gamma: i.gamma,
            vtrace_clip_rho_threshold: i.vtrace_clip_rho_threshold,
            vtrace_clip_c_threshold: i.vtrace_clip_c_threshold,
            vf_loss_coeff: i.vf_loss_coeff,
            entropy_coeff: i.entropy_coeff,
            grad_clip: i.grad_clip,
            learner_queue_size: i.learner_queue_size,
            broadcast_interval: i.broadcast_interval,
            num_aggregation_workers: i.num_aggregation_workers,
            model: i.model,
            env_config: i.env_config,
            seed: i.seed,
            device: i.device,
            restart: i.restart,
            env_shards: i.env_shards,
        }
    }
}

impl AppoConfig {
    /// The IMPALA config with the same shared keys (for its checks).
    fn as_impala(&self) -> ImpalaConfig {
        ImpalaConfig {
            num_workers: self.num_workers,
            num_envs_per_worker: self.num_envs_per_worker,
            rollout_fragment_length: self.rollout_fragment_length,
            train_batch_size: self.train_batch_size,
            timesteps_per_iteration: self.timesteps_per_iteration,
            lr: self.lr,
            gamma: self.gamma,
            vtrace_clip_rho_threshold: self.vtrace_clip_rho_threshold,
            vtrace_clip_c_threshold: self.vtrace_clip_c_threshold,
            vf_loss_coeff: self.vf_loss_coeff,
            entropy_coeff: self.entropy_coeff,
            grad_clip: self.grad_clip,
            learner_queue_size: self.learner_queue_size,
            broadcast_interval: self.broadcast_interval,
            num_aggregation_workers: self.num_aggregation_workers,
            model: self.model.clone(),
            env_config: self.env_config.clone(),
            seed: self.seed,
            device: self.device,
            restart: self.restart,
            env_shards: self.env_shards,
        }
    }
}

impl Validate for AppoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.as_impala().validate()?;
        check("num_sgd_iter", self.num_sgd_iter, self.num_sgd_iter >= 1, "must be >= 1")?;
        check("clip_param", self.clip_param, self.clip_param > 0.0, "must be > 0")
    }
}

impl ActorCriticLoss for AppoConfig {
    const NEEDS_NEXT_VALUES: bool = true;

    fn learner(&self) -> LearnerSettings {
        LearnerSettings { num_sgd_iter: self.num_sgd_iter, ..self.as_impala().learner() }
    }

    fn model(&self) -> &ModelConfig {
        &self.model
    }

    /// Nothing: V-trace needs the learner's current weights.
    fn postprocess(&self, _traj: &mut SampleBatch, _bootstrap: f32) -> Result<(), PolicyError> {
        Ok(())
    }

    fn loss<D: NetDevice>(
        &self,
        fwd: Forward<D>,
        mb: &SampleBatch,
        dev: &D,
    ) -> Result<(Loss<D>, LearnerStats), PolicyError> {
        let n = mb.len();
        let Forward { logp, entropy, values, next_values, rows } = fwd;
        let next_values = next_values.expect("NEEDS_NEXT_VALUES is set");
        let target_logp = logp.as_vec();
        let (vs, adv) = vtrace_batch(
            mb,
            &target_logp,
            &values.as_vec(),
            &next_values,
            self.gamma,
            self.vtrace_clip_rho_threshold,
            self.vtrace_clip_c_threshold,
        )?;
        let advantages = dev.tensor_from_vec(adv, (n,));
        // r = π(a|x) / μ(a|x) against the behaviour policy.
        let behaviour = dev.tensor_from_vec(mb.f32(fields::ACTION_LOGP)?.to_vec(), (n,));
        let ratio = (logp - behaviour).exp();
        let eps = self.clip_param as f32;
        let ratios = ratio.as_vec();
        let surr1 = ratio.with_empty_tape() * advantages.clone();
        let surr2 = ratio.clamp(1.0 - eps, 1.0 + eps) * advantages;
        let policy_loss = rows.mean(surr1.minimum(surr2)).negate();
        let vf_loss = rows.mean((values - dev.tensor_from_vec(vs, (n,))).square()) * 0.5;
        let entropy = rows.mean(entropy);
        let mut stats = LearnerStats::default();
        stats.set("policy_loss", policy_loss.as_vec()[0] as f64);
        stats.set("vf_loss", vf_loss.as_vec()[0] as f64);
        stats.set("entropy", entropy.as_vec()[0] as f64);
        stats.set("mean_rho", rows.host_mean(ratios.iter().map(|&r| r as f64)));
        stats.set("clip_frac", rows.host_mean(ratios.iter().map(|&r| if (r - 1.0).abs() > eps { 1.0 } else { 0.0 })));
        Ok((policy_loss + vf_loss * self.vf_loss_coeff as f32 - entropy * self.entropy_coeff as f32, stats))
    }
}

/// The execution plan: IMPALA's asynchronous sampling into a learner thread.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// or aggregation actor fails to start.
pub async fn build(make_env: EnvMaker, cfg: AppoConfig) -> Result<Trainer, BuildError> {
    let sampling = plan(&cfg.as_impala());
    let optimizer = AsyncSamplesConfig {
        train_batch_size: cfg.train_batch_size,
        learner_queue_size: cfg.learner_queue_size,
        broadcast_interval: cfg.broadcast_interval,
        steps_per_iteration: cfg.timesteps_per_iteration,
        num_aggregation_workers: cfg.num_aggregation_workers,
    };
    build_async("APPO", make_env, cfg, sampling, optimizer).await
}
