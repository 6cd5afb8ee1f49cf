//! # APPO: asynchronous PPO
//!
//! IMPALA's architecture ([`crate::policy_gradient::impala`]: asynchronous workers, learner
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

use crate::common::build_context::BuildContext;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::policy_gradient::actor_critic::{
    column, weighted_sum, ActorCriticLoss, Forward, LearnerSettings, LossOutput,
};
use crate::policy_gradient::impala::{build_async, ImpalaConfig};
use dfdx::prelude::*;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{fields, LearnerStats, PolicyError, SampleBatch, Trainer};
use serde::{Deserialize, Serialize};

/// APPO's configuration: IMPALA's keys plus the clip and the epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct AppoConfig {
    /// IMPALA's keys, meaning the same.
    #[serde(flatten)]
    pub impala: ImpalaConfig,
    /// Passes over each train batch.
    pub num_sgd_iter: usize,
    /// Clip range ε of the ratio against the behaviour policy.
    pub clip_param: f64,
}

impl Default for AppoConfig {
    fn default() -> Self {
        Self { impala: ImpalaConfig::default(), num_sgd_iter: 2, clip_param: 0.3 }
    }
}

impl Validate for AppoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.impala.validate()?;
        check("num_sgd_iter", self.num_sgd_iter, self.num_sgd_iter >= 1, "must be >= 1")?;
        check("clip_param", self.clip_param, self.clip_param > 0.0, "must be > 0")
    }
}

impl ActorCriticLoss for AppoConfig {
    const NEEDS_NEXT_VALUES: bool = true;

    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        self.impala.sections()
    }

    /// IMPALA's, with `num_sgd_iter` passes.
    fn learner(&self) -> LearnerSettings {
        LearnerSettings { num_sgd_iter: self.num_sgd_iter, ..self.impala.learner() }
    }

    /// Nothing: V-trace needs the learner's current weights.
    fn postprocess(&self, _traj: &mut SampleBatch, _bootstrap: f32) -> Result<(), PolicyError> {
        Ok(())
    }

    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let (vs, advantages) = self.impala.vtrace_targets(&fwd, mb, dev)?;
        let Forward { logp, entropy, values, rows, .. } = fwd;
        // r = π(a|x) / μ(a|x) against the behaviour policy.
        let behaviour = column(dev, mb, fields::ACTION_LOGP)?;
        let ratio = (logp - behaviour).exp();
        let eps = self.clip_param as f32;
        let ratios = ratio.as_vec();
        let surr1 = ratio.with_empty_tape() * advantages.clone();
        let surr2 = ratio.clamp(1.0 - eps, 1.0 + eps) * advantages;
        let policy_loss = rows.mean(surr1.minimum(surr2)).negate();
        let vf_loss = rows.mean((values - vs).square()) * 0.5;
        let mut stats = LearnerStats::default();
        let total = weighted_sum(&self.impala.actor_critic, policy_loss, vf_loss, rows.mean(entropy), &mut stats);
        stats.set("mean_rho", rows.host_mean(ratios.iter().map(|&r| r as f64)));
        stats.set("clip_frac", rows.host_mean(ratios.iter().map(|&r| if (r - 1.0).abs() > eps { 1.0 } else { 0.0 })));
        Ok((total, stats))
    }
}

algorithm_name!(AppoConfig, "APPO");

/// The execution plan: IMPALA's asynchronous sampling into a learner thread.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// or aggregation actor fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: AppoConfig) -> Result<Trainer, BuildError> {
    let (sampling, optimizer) = (cfg.impala.sampling_settings(), cfg.impala.optimizer());
    build_async(&ctx, AppoConfig::NAME, make_env, cfg, sampling, optimizer).await
}
