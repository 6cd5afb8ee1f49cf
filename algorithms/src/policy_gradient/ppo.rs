//! # Proximal Policy Optimization (PPO)
//!
//! Schulman, Wolski, Dhariwal, Radford & Klimov, "Proximal Policy
//! Optimization Algorithms", 2017 (arXiv:1707.06347): the clipped surrogate
//! objective, optimized for several epochs of minibatch SGD on each batch of
//! on-policy samples.
//!
//! The implementation details that matter (see Huang et al., "The 37
//! Implementation Details of PPO", ICLR blog track 2022):
//! - GAE(γ, λ) advantages, bootstrapping from `V(s_T)` when an episode is cut
//!   by the time limit or the rollout ends mid-episode (never at termination);
//! - advantages standardized over the whole train batch;
//! - `num_sgd_iter` epochs of shuffled minibatches, Adam with ε = 1e-5;
//! - global gradient-norm clipping (`grad_clip`);
//! - separate 2×64 tanh networks for the policy and the value function
//!   ([`crate::policy_gradient::actor_critic`]);
//! - an optionally clipped value loss (`vf_clip_param`).
//!
//! Execution: bulk-synchronous, the framework's `SyncSamplesOptimizer`
//! ([`build`] at the end of this file): all evaluators sample with the
//! current weights, the driver learns, weights are broadcast.
//!
//! Learner metrics (`learner.*` in `result.json`): `policy_loss`, `vf_loss`,
//! `entropy`, `kl` (the approximate KL `E[(r − 1) − log r]` between the
//! behaviour policy and the policy just before each minibatch step, averaged
//! over the iteration's minibatches), `clip_frac` (share of samples whose
//! ratio was clipped), `grad_norm` (before clipping), `total_loss`,
//! `vf_explained_var` (of the behaviour policy's value predictions).

use crate::common::build_context::BuildContext;
use crate::common::sections::{ActorCriticLearner, Learning, Sampling, SyncBatch};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::ModelSupport;
use crate::policy_gradient::actor_critic::{
    self, column, weighted_sum, ActorCriticLoss, Forward, LearnerSettings, LossOutput,
};
use dfdx::prelude::*;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;

use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space, Trainer};
use serde::{Deserialize, Serialize};

/// PPO's configuration: the sampling, batch, actor-critic and learning
/// sections plus PPO's own keys. Every key is optional in `--config`;
/// unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct PpoConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// The train batch, observation filter, stragglers.
    #[serde(flatten)]
    pub batch: SyncBatch,
    /// Rows per SGD minibatch.
    pub sgd_minibatch_size: usize,
    /// Epochs over each train batch.
    pub num_sgd_iter: usize,
    /// Learning rate and loss weights.
    #[serde(flatten)]
    pub actor_critic: ActorCriticLearner,
    /// GAE λ.
    pub lambda: f64,
    /// Clip range ε of the probability ratio.
    pub clip_param: f64,
    /// Clip range of the value update around the old prediction; `null`
    /// disables value clipping.
    pub vf_clip_param: Option<f64>,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
    /// Policy replicas the SGD runs on in parallel, each minibatch split
    /// across them with gradients averaged (the multi-device learner); on
    /// the CPU each replica is a thread, on CUDA devices `device`,
    /// `device + 1`, … 1 learns on the driver's policy alone.
    pub num_devices: usize,
}

impl Default for PpoConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_envs_per_worker: 8, ..Sampling::default() },
            batch: SyncBatch { train_batch_size: 1024, ..SyncBatch::default() },
            sgd_minibatch_size: 256,
            num_sgd_iter: 10,
            actor_critic: ActorCriticLearner::default(),
            lambda: 0.95,
            clip_param: 0.2,
            vf_clip_param: None,
            learning: Learning { grad_clip: Some(0.5), ..Learning::default() },
            num_devices: 1,
        }
    }
}

impl Validate for PpoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport::all(Self::NAME))?;
        self.sampling.validate()?;
        self.sampling.refuse_input(Self::NAME)?;
        self.batch.validate()?;
        let size = self.sgd_minibatch_size;
        check(
            "sgd_minibatch_size",
            size,
            (1..=self.batch.train_batch_size).contains(&size),
            "must be in [1, train_batch_size]",
        )?;
        check("num_sgd_iter", self.num_sgd_iter, self.num_sgd_iter >= 1, "must be >= 1")?;
        let n = self.num_devices;
        check("num_devices", n, n >= 1 && n <= size, "must be in [1, sgd_minibatch_size]")?;
        // The devices split a minibatch by rows, which would cut sequences.
        check("num_devices", n, n == 1 || !self.learning.model.use_lstm, "must be 1 with model.use_lstm")?;
        check("lambda", self.lambda, (0.0..=1.0).contains(&self.lambda), "must be in [0, 1]")?;
        check("clip_param", self.clip_param, self.clip_param > 0.0, "must be > 0")?;
        if let Some(c) = self.vf_clip_param {
            check("vf_clip_param", c, c > 0.0, "must be > 0 or null")?;
        }
        self.actor_critic.validate()
    }
}

impl ActorCriticLoss for PpoConfig {
    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.actor_critic, &self.learning, &self.sampling)
    }

    /// `num_sgd_iter` epochs of shuffled minibatches.
    fn learner(&self) -> LearnerSettings {
        let (actor_critic, learning, sampling) = self.sections();
        LearnerSettings {
            num_sgd_iter: self.num_sgd_iter,
            sgd_minibatch_size: Some(self.sgd_minibatch_size),
            ..LearnerSettings::new(actor_critic, learning, sampling.seed)
        }
    }

    /// GAE(γ, λ) advantages and value targets.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError> {
        let estimator = AdvantageEstimator::Gae { gamma: self.learning.gamma as f32, lambda: self.lambda as f32 };
        Ok(compute_advantages(traj, bootstrap, estimator)?)
    }

    /// The clipped surrogate objective with value loss and entropy bonus.
    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let (old_logp, advantages) = (column(dev, mb, fields::ACTION_LOGP)?, column(dev, mb, fields::ADVANTAGES)?);
        let (old_values, value_targets) = (column(dev, mb, fields::VF_PREDS)?, column(dev, mb, fields::VALUE_TARGETS)?);
        let Forward { logp, entropy, values, rows, .. } = fwd;

        // ratio r = π(a|s) / π_old(a|s), computed in log space.
        let logratio = logp - old_logp;
        let logratio_values = logratio.as_vec();
        let ratio = logratio.exp();

        // Clipped surrogate: L = −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)].
        let eps = self.clip_param as f32;
        let surr1 = ratio.with_empty_tape() * advantages.clone();
        let surr2 = ratio.clamp(1.0 - eps, 1.0 + eps) * advantages;
        let policy_loss = rows.mean(surr1.minimum(surr2)).negate();

        // Value loss ½·E[(V(s) − V_target)²], or with the update clipped around
        // the old prediction: ½·E[max((V − V_t)², (V_old + clip(V − V_old, −c, c) − V_t)²)].
        let vf_loss = match self.vf_clip_param {
            None => rows.mean((values - value_targets).square()) * 0.5,
            Some(c) => {
                let c = c as f32;
                let vf_loss_unclipped = (values.with_empty_tape() - value_targets.clone()).square();
                let vf_clipped = (values - old_values.clone()).clamp(-c, c) + old_values;
                let vf_loss_clipped = (vf_clipped - value_targets).square();
                rows.mean(vf_loss_unclipped.maximum(vf_loss_clipped)) * 0.5
            }
        };

        let mut stats = LearnerStats::default();
        let total = weighted_sum(&self.actor_critic, policy_loss, vf_loss, rows.mean(entropy), &mut stats);
        stats.set("kl", rows.host_mean(logratio_values.iter().map(|&lr| (lr.exp() - 1.0 - lr) as f64)));
        let clipped = logratio_values.iter().map(|&lr| if (lr.exp() - 1.0).abs() > eps { 1.0 } else { 0.0 });
        stats.set("clip_frac", rows.host_mean(clipped));
        Ok((total, stats))
    }
}

/// A PPO policy for the given spaces.
///
/// # Errors
/// [`BuildError::Unsupported`] for spaces without a compiled network.
pub fn make_policy(
    cfg: &PpoConfig,
    obs: &Space,
    act: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    actor_critic::make_policy(PpoConfig::NAME, cfg, obs, act, rng_seed)
}

algorithm_name!(PpoConfig, "PPO");

/// The execution plan: evaluators from `make_env` running the framework's
/// `SyncSamplesOptimizer` ([`actor_critic::sync_trainer`]): all evaluators
/// sample with the current weights, advantages are standardized over the
/// whole train batch before it is cut into minibatches, the driver's
/// policy runs `num_sgd_iter` epochs on the clipped surrogate ([`PpoConfig::loss`]),
/// or splits each minibatch over `num_devices` replicas, and the new
/// weights are broadcast.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, a device cannot be
/// opened, or an evaluator fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: PpoConfig) -> Result<Trainer, BuildError> {
    let (batch, devices) = (cfg.batch.clone(), cfg.num_devices);
    actor_critic::sync_trainer(&ctx, PpoConfig::NAME, make_env, cfg, &batch, devices).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Box<dyn PolicyGraph> {
        let obs = Space::uniform_box(-1.0, 1.0, vec![4]).unwrap();
        make_policy(&PpoConfig::default(), &obs, &Space::discrete(2), 0).unwrap()
    }

    fn minibatch(p: &mut dyn PolicyGraph) -> SampleBatch {
        let obs: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut mb = SampleBatch::new();
        p.compute_actions(&obs, true, &mut mb).unwrap();
        mb.insert_f32(fields::OBS, obs, 4).unwrap();
        mb.insert_f32(fields::ADVANTAGES, (0..8).map(|i| i as f32 - 3.5).collect(), 1).unwrap();
        mb.insert_f32(fields::VALUE_TARGETS, vec![1.0; 8], 1).unwrap();
        mb
    }

    /// Off-policy estimates weigh logged continuous actions by the
    /// distribution the policy reports: it must be the one it samples.
    #[test]
    fn a_box_policy_s_distribution_gives_the_log_probabilities_it_acts_with() {
        let obs_space = Space::uniform_box(-1.0, 1.0, vec![4]).unwrap();
        let actions = Space::uniform_box(-2.0, 2.0, vec![2]).unwrap();
        let mut p = make_policy(&PpoConfig::default(), &obs_space, &actions, 0).unwrap();
        let obs: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut mb = SampleBatch::new();
        p.compute_actions(&obs, true, &mut mb).unwrap();
        let logp = p.action_distribution(&obs).unwrap().log_density(mb.f32(fields::ACTIONS).unwrap()).unwrap();
        let acted = mb.f32(fields::ACTION_LOGP).unwrap();
        assert_eq!(logp.len(), 8);
        for (ours, theirs) in logp.iter().zip(acted) {
            assert!((ours - theirs).abs() < 1e-4, "{logp:?} against {acted:?}");
        }
        let err = policy().action_distribution(&obs).unwrap_err().to_string();
        assert!(err.contains("Box"), "{err}");
    }

    #[test]
    fn same_seed_same_initial_weights() {
        assert_eq!(policy().get_weights(), policy().get_weights());
    }

    #[test]
    fn on_policy_ratio_is_one() {
        // With old_logp from the same weights the ratio is exactly 1: no clipping, KL 0.
        let mut p = policy();
        let mb = minibatch(p.as_mut());
        let (_, stats) = p.compute_gradients(&mb).unwrap();
        assert!(stats.get("kl").unwrap().abs() < 1e-6, "{stats:?}");
        assert_eq!(stats.get("clip_frac"), Some(0.0));
        // The entropy of two actions lies in [0, ln 2].
        let h = stats.get("entropy").unwrap();
        assert!(h > 0.0 && h <= std::f64::consts::LN_2 + 1e-6, "{h}");
    }

    #[test]
    fn acting_follows_the_weights_after_every_change() {
        // On the CPU the policy acts through a copy of its layers on the
        // host; the copy is taken again after an update and after
        // set_weights, so the log-probabilities recorded while acting are
        // the learner's (KL 0) each time, and the value predictions (the
        // same observations each time) moved with the weights.
        let mut p = policy();
        let mut mb = minibatch(p.as_mut());
        let mut moved = Vec::new();
        for change in 0..2 {
            let before = mb.f32(fields::VF_PREDS).unwrap().to_vec();
            if change == 0 {
                for _ in 0..5 {
                    let (g, _) = p.compute_gradients(&mb).unwrap();
                    p.apply_gradients(&g).unwrap();
                }
            } else {
                let w: Vec<f32> = p.get_weights().iter().map(|w| w * 1.5).collect();
                p.set_weights(&w).unwrap();
            }
            mb = minibatch(p.as_mut());
            let (_, stats) = p.compute_gradients(&mb).unwrap();
            assert!(stats.get("kl").unwrap().abs() < 1e-6, "after change {change}: {stats:?}");
            let after = mb.f32(fields::VF_PREDS).unwrap();
            moved.push(before.iter().zip(after).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max));
        }
        assert!(moved.iter().all(|&m| m > 1e-3), "the policy did not move: {moved:?}");
    }

    #[test]
    fn gradient_split_equals_learn_step() {
        // compute_gradients + apply_gradients on one minibatch == one SGD step.
        let mut a = policy();
        let mut b = policy();
        let mb = minibatch(a.as_mut());
        let (g, _) = a.compute_gradients(&mb).unwrap();
        b.apply_gradients(&g).unwrap();
        let full = PpoConfig {
            num_sgd_iter: 1,
            sgd_minibatch_size: 8,
            batch: SyncBatch { train_batch_size: 8, ..SyncBatch::default() },
            ..PpoConfig::default()
        };
        let mut c =
            make_policy(&full, &Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), &Space::discrete(2), 0).unwrap();
        c.learn_on_batch(&mb).unwrap();
        let (wb, wc) = (b.get_weights(), c.get_weights());
        assert!(wb.iter().zip(&wc).all(|(x, y)| (x - y).abs() < 1e-6));
        assert_ne!(wb, policy().get_weights());
        assert!(b.apply_gradients(&g[1..]).is_err());
    }

    #[test]
    fn config_rejects_out_of_range() {
        let err = rlx::config::merge_json(&PpoConfig::default(), &serde_json::json!({"gamma": 1.5})).unwrap_err();
        assert!(err.to_string().contains("gamma"), "{err}");
        let err = rlx::config::merge_json(&PpoConfig::default(), &serde_json::json!({"sgd_minibatch_size": 99999}))
            .unwrap_err();
        assert!(err.to_string().contains("sgd_minibatch_size"), "{err}");
    }
}
