//! # IMPALA: importance-weighted actor-learner architecture
//!
//! Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
//! Weighted Actor-Learner Architectures", ICML 2018. Workers sample
//! continuously with weights that may lag the learner's by a few updates
//! ([`AsyncSamplesOptimizer`]: learner thread, bounded queue, weights every
//! `broadcast_interval` batches, optional aggregation actors). The loss
//! corrects for the lag with V-trace ([`rlx::postprocessing::vtrace`]),
//! computed in the learner with the current weights, over each trajectory
//! fragment in order (so batches are never shuffled):
//!
//! ```text
//! policy loss  −E[ρ_t · (r_t + γ v_{t+1} − V(x_t)) · log π(a_t|x_t)]
//! value loss   ½·E[(V(x_t) − v_t)²]
//! entropy      −c_e·H[π(·|x_t)]
//! ```
//!
//! Learner metrics: `policy_loss`, `vf_loss`, `entropy`, `mean_rho` (mean
//! importance ratio π/μ before clipping), `grad_norm`, `total_loss`,
//! `policy_lag_mean`, `policy_lag_max`.

use crate::common::build_context::BuildContext;
use crate::common::sampling::{spawn_evaluators, SamplingSettings};
use crate::common::sections::{limits, ActorCriticLearner, Learning, Sampling};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::ModelSupport;
use crate::policy_gradient::actor_critic::{
    actor_critic_policies, weighted_sum, ActorCriticLoss, Column, Forward, LossOutput, TRAJ_ENDS,
};
use rlx::config::{check, check_count, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::optimizer::{AsyncSamplesConfig, AsyncSamplesOptimizer};
use rlx::postprocessing::vtrace;
use rlx::{fields, LearnerStats, PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// IMPALA's configuration (APPO's, plus APPO's own keys): the sampling,
/// actor-critic and learning sections and the asynchronous pipeline's keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct ImpalaConfig {
    /// Evaluators (sampling asynchronously) and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Steps of every env copy per batch a worker sends.
    pub rollout_fragment_length: usize,
    /// Rows per learner update.
    pub train_batch_size: usize,
    /// Env steps sampled per training iteration (reporting granularity).
    pub timesteps_per_iteration: usize,
    /// Learning rate and loss weights.
    #[serde(flatten)]
    pub actor_critic: ActorCriticLearner,
    /// ρ̄: clip of the importance ratio in the V-trace targets and advantages.
    pub vtrace_clip_rho_threshold: f64,
    /// c̄: clip of the trace-cutting coefficients.
    pub vtrace_clip_c_threshold: f64,
    /// Batches that may queue for the learner before sampling waits.
    pub learner_queue_size: usize,
    /// A worker gets the learner's weights every this many of its batches.
    pub broadcast_interval: usize,
    /// Aggregation actors concatenating batches before the learner.
    pub num_aggregation_workers: usize,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for ImpalaConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 2, num_envs_per_worker: 8, ..Sampling::default() },
            rollout_fragment_length: 32,
            train_batch_size: 512,
            timesteps_per_iteration: 4096,
            actor_critic: ActorCriticLearner { entropy_coeff: 0.01, ..ActorCriticLearner::default() },
            vtrace_clip_rho_threshold: 1.0,
            vtrace_clip_c_threshold: 1.0,
            learner_queue_size: 4,
            broadcast_interval: 1,
            num_aggregation_workers: 0,
            learning: Learning { grad_clip: Some(1.0), ..Learning::default() },
        }
    }
}

impl Validate for ImpalaConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport::all(Self::NAME))?;
        self.sampling.validate()?;
        self.sampling.refuse_input(Self::NAME)?;
        check_count("rollout_fragment_length", self.rollout_fragment_length, 1, limits::MAX_BATCH_ROWS)?;
        check_count("train_batch_size", self.train_batch_size, 1, limits::MAX_BATCH_ROWS)?;
        check_count("learner_queue_size", self.learner_queue_size, 1, limits::MAX_QUEUED_BATCHES)?;
        for (key, v) in
            [("timesteps_per_iteration", self.timesteps_per_iteration), ("broadcast_interval", self.broadcast_interval)]
        {
            check(key, v, v >= 1, "must be >= 1")?;
        }
        let (rho, c) = (self.vtrace_clip_rho_threshold, self.vtrace_clip_c_threshold);
        check("vtrace_clip_rho_threshold", rho, rho > 0.0, "must be > 0")?;
        check("vtrace_clip_c_threshold", c, c > 0.0, "must be > 0")?;
        self.actor_critic.validate()
    }
}

/// V-trace targets `v_t` and policy-gradient advantages over a batch of
/// concatenated trajectory fragments (boundaries from `traj_ends`), given the
/// current policy's `target_logp` and `values` and `next_values = V(x_{t+1})`.
///
/// # Errors
/// A missing field.
pub fn vtrace_batch(
    mb: &SampleBatch,
    target_logp: &[f32],
    values: &[f32],
    next_values: &[f32],
    gamma: f64,
    clip_rho: f64,
    clip_c: f64,
) -> Result<(Vec<f32>, Vec<f32>), PolicyError> {
    let (behaviour, rewards) = (mb.f32(fields::ACTION_LOGP)?, mb.f32(fields::REWARDS)?);
    let (terminated, ends) = (mb.f32(fields::TERMINATEDS)?, mb.f32(TRAJ_ENDS)?);
    let n = mb.len();
    let log_rhos: Vec<f32> = target_logp.iter().zip(behaviour).map(|(t, b)| t - b).collect();
    let discounts: Vec<f32> = terminated.iter().map(|&d| gamma as f32 * (1.0 - d)).collect();
    let (mut vs, mut adv) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut start = 0;
    for t in 0..n {
        if ends[t] == 0.0 && t + 1 < n {
            continue;
        }
        let r = start..t + 1;
        let (v, a) = vtrace(
            &log_rhos[r.clone()],
            &rewards[r.clone()],
            &discounts[r.clone()],
            &values[r],
            next_values[t],
            clip_rho as f32,
            clip_c as f32,
        );
        vs.extend(v);
        adv.extend(a);
        start = t + 1;
    }
    Ok((vs, adv))
}

impl ActorCriticLoss for ImpalaConfig {
    const NEEDS_NEXT_VALUES: bool = true;

    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.actor_critic, &self.learning, &self.sampling)
    }

    /// Nothing: V-trace needs the learner's current weights.
    fn postprocess(&self, _traj: &mut SampleBatch, _bootstrap: f32) -> Result<(), PolicyError> {
        Ok(())
    }

    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let (vs, pg_adv) = self.vtrace_targets(&fwd, mb, dev)?;
        let Forward { logp, entropy, values, rows, .. } = fwd;
        let target_logp = logp.as_vec();
        let policy_loss = rows.mean(logp * pg_adv).negate();
        let vf_loss = rows.mean((values - vs).square()) * 0.5;
        let mut stats = LearnerStats::default();
        let total = weighted_sum(&self.actor_critic, policy_loss, vf_loss, rows.mean(entropy), &mut stats);
        let behaviour = mb.f32(fields::ACTION_LOGP)?;
        stats.set("mean_rho", rows.host_mean(target_logp.iter().zip(behaviour).map(|(t, b)| ((t - b) as f64).exp())));
        Ok((total, stats))
    }
}

impl ImpalaConfig {
    /// V-trace on one forward pass: the value targets `v_t` and the
    /// policy-gradient advantages `ρ_t (r_t + γ v_{t+1} − V(x_t))`, as
    /// tensors on `dev` (IMPALA's and APPO's losses start here).
    pub(crate) fn vtrace_targets<D: NetDevice>(
        &self,
        fwd: &Forward<D>,
        mb: &SampleBatch,
        dev: &D,
    ) -> Result<(Column<D>, Column<D>), PolicyError> {
        let next_values = fwd.next_values.as_deref().expect("NEEDS_NEXT_VALUES is set");
        let (rho, c) = (self.vtrace_clip_rho_threshold, self.vtrace_clip_c_threshold);
        let (logp, values) = (fwd.logp.as_vec(), fwd.values.as_vec());
        let (vs, adv) = vtrace_batch(mb, &logp, &values, next_values, self.learning.gamma, rho, c)?;
        Ok((dev.tensor_from_vec(vs, (mb.len(),)), dev.tensor_from_vec(adv, (mb.len(),))))
    }

    /// How the evaluators sample: one fragment of every env copy per batch.
    pub(crate) fn sampling_settings(&self) -> SamplingSettings {
        self.sampling.fragments(self.rollout_fragment_length)
    }

    /// The asynchronous pipeline's settings.
    pub(crate) fn optimizer(&self) -> AsyncSamplesConfig {
        AsyncSamplesConfig {
            train_batch_size: self.train_batch_size,
            learner_queue_size: self.learner_queue_size,
            broadcast_interval: self.broadcast_interval,
            steps_per_iteration: self.timesteps_per_iteration,
            num_aggregation_workers: self.num_aggregation_workers,
        }
    }
}

/// Starts evaluators and a learner for an asynchronous-samples algorithm.
pub(crate) async fn build_async<L: ActorCriticLoss>(
    ctx: &BuildContext,
    name: &'static str,
    make_env: EnvMaker,
    loss: L,
    sampling: SamplingSettings,
    optimizer: AsyncSamplesConfig,
) -> Result<Trainer, BuildError> {
    let seed = sampling.seed;
    let evaluators = spawn_evaluators(ctx, make_env, actor_critic_policies(name, loss.clone()), sampling).await?;
    // The learner's copy, for the spaces the evaluators were built with.
    let (obs, act) = evaluators.local().spaces();
    let learner = ctx.learner_policies(actor_critic_policies(name, loss))(&obs, &act, seed, 0)?;
    let optimizer = AsyncSamplesOptimizer::new(learner, optimizer).await?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

algorithm_name!(ImpalaConfig, "IMPALA");

/// The execution plan: asynchronous sampling into a learner thread.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// or aggregation actor fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: ImpalaConfig) -> Result<Trainer, BuildError> {
    let (sampling, optimizer) = (cfg.sampling_settings(), cfg.optimizer());
    build_async(&ctx, ImpalaConfig::NAME, make_env, cfg, sampling, optimizer).await
}
