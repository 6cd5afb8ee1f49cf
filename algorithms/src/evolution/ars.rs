//! # Augmented random search (ARS)
//!
//! Mania, Guy and Recht, "Simple random search of static linear policies
//! is competitive for reinforcement learning", NeurIPS 2018: the V2-t
//! variant. The policy is linear in normalized observations (`model: {fcnet_hiddens: []}`);
//! each iteration evaluates `num_perturbations` directions δ as antithetic
//! pairs M ± νδ and steps along the best ones.
//!
//! Details that matter (the paper's three augmentations of basic random
//! search):
//! - **Reward-std scaling**: the step is divided by σ_R, the standard
//!   deviation of the 2b returns used, so the step size needs no retuning
//!   as returns grow.
//! - **State normalization** (V2, `"MeanStdFilter"`): statistics of every
//!   state seen so far, merged across workers, frozen within an iteration.
//! - **Top-b directions** (-t): only the b directions with the highest
//!   max(r⁺, r⁻) enter the update; the others are mostly noise.
//!
//! The update: M ← M + α / (b σ_R) · Σ_{k ∈ top b} (r⁺ₖ − r⁻ₖ) δₖ.
//! Noise table, workers and nesting are shared with ES
//! ([`evolution`](crate::evolution)).
//!
//! Execution: [`EvolutionOptimizer`](crate::evolution::EvolutionOptimizer). Learner metrics:
//! `mean_perturbed_return`, `max_perturbed_return`, `reward_std`,
//! `update_norm`, `weights_norm`, `num_perturbations`, `obs_stat_count`,
//! `worker_restarts`.

use crate::common::build_context::BuildContext;
use crate::error::BuildError;
use crate::evolution::{hiddens, trainer, weighted_noise_sum, NoiseTable, PairResult, Perturbations, UpdateRule};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{LearnerStats, PolicyGraph, Space, Trainer};
use serde::{Deserialize, Serialize};

/// ARS's configuration: the keys ES and ARS share, and how many of the
/// best directions enter the update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct ArsConfig {
    /// Workers, directions, noise table, network, filter, seeds.
    #[serde(flatten)]
    pub perturbations: Perturbations,
    /// b: the best directions that enter the update (≤ `num_perturbations`).
    pub top_directions: usize,
}

impl Default for ArsConfig {
    fn default() -> Self {
        let perturbations = Perturbations {
            num_perturbations: 16,
            noise_stdev: 0.03,
            stepsize: 0.02,
            model: hiddens(&[]),
            ..Perturbations::default()
        };
        Self { perturbations, top_directions: 8 }
    }
}

impl Validate for ArsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.perturbations.validate(Self::NAME)?;
        let b = self.top_directions;
        let n = self.perturbations.num_perturbations;
        check("top_directions", b, b > 0 && b <= n, "must be in 1..=num_perturbations")
    }
}

/// ARS's update: top-b directions, scaled by the reward std.
pub struct ArsUpdate {
    top: usize,
    stepsize: f64,
}

impl UpdateRule for ArsUpdate {
    fn update(&mut self, theta: &[f32], results: &[PairResult], noise: &NoiseTable) -> (Vec<f32>, LearnerStats) {
        let score = |r: &PairResult| r.pos.episode_return.max(r.neg.episode_return);
        let mut order: Vec<usize> = (0..results.len()).collect();
        // Stable, so ties keep task order and a run stays one seed's.
        order.sort_by(|&a, &b| score(&results[b]).total_cmp(&score(&results[a])));
        let top: Vec<PairResult> = order.iter().take(self.top).map(|&i| results[i].clone()).collect();
        let used: Vec<f64> = top.iter().flat_map(|r| [r.pos.episode_return, r.neg.episode_return]).collect();
        let mean = used.iter().sum::<f64>() / used.len() as f64;
        let reward_std = (used.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / used.len() as f64).sqrt();
        let mut stats = LearnerStats::default();
        let all: Vec<f64> = results.iter().flat_map(|r| [r.pos.episode_return, r.neg.episode_return]).collect();
        stats.set("mean_perturbed_return", all.iter().sum::<f64>() / all.len() as f64);
        stats.set("max_perturbed_return", all.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        stats.set("reward_std", reward_std);
        // All 2b returns equal: no direction is better than another.
        if reward_std < 1e-12 {
            return (theta.to_vec(), stats);
        }
        let diffs: Vec<f64> = top.iter().map(|r| r.pos.episode_return - r.neg.episode_return).collect();
        let step = weighted_noise_sum(&top, &diffs, noise, theta.len());
        let scale = self.stepsize / (top.len() as f64 * reward_std);
        let new_theta = theta.iter().zip(&step).map(|(&w, &s)| (w as f64 + scale * s) as f32).collect();
        (new_theta, stats)
    }
}

/// ARS's policy for these spaces (what `rlx rollout` loads weights into).
///
/// # Errors
/// Unsupported spaces.
pub fn make_policy(cfg: &ArsConfig, obs: &Space, act: &Space, seed: u64) -> Result<Box<dyn PolicyGraph>, BuildError> {
    cfg.perturbations.policy(ArsConfig::NAME, obs, act, seed)
}

algorithm_name!(ArsConfig, "ARS");

/// The execution plan: perturbation workers and the ARS update.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or a worker fails
/// to start.
/// ARS places no workers through `ctx`: its perturbation workers are its
/// own actors (see [`crate::evolution`]).
pub async fn build(_ctx: BuildContext, make_env: EnvMaker, cfg: ArsConfig) -> Result<Trainer, BuildError> {
    let settings = cfg.perturbations.settings(make_env);
    let rule = ArsUpdate { top: cfg.top_directions, stepsize: cfg.perturbations.stepsize };
    trainer(settings, Box::new(rule)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolution::PairResult;

    #[test]
    fn only_the_top_directions_move_the_weights_scaled_by_their_reward_std() {
        let table = NoiseTable::new(1, 100);
        let ep = |r| rlx::EpisodeSummary { episode_return: r, length: 1, truncated: false, agent: None };
        let stat = rlx::filter::RunningStat::new(1);
        let pair = |offset, p, n| PairResult { noise_offset: offset, pos: ep(p), neg: ep(n), obs: stat.clone() };
        // Direction at 0 scores 10, at 50 scores 3 (dropped with b = 1).
        let results = vec![pair(0, 10.0, 6.0), pair(50, 3.0, 1.0)];
        let mut rule = ArsUpdate { top: 1, stepsize: 0.5 };
        let (new, stats) = rule.update(&[0.0; 4], &results, &table);
        // σ_R of {10, 6} is 2: M = 0.5 / (1 · 2) · (10 − 6) · δ₀ = δ₀.
        assert_eq!(stats.get("reward_std"), Some(2.0));
        for (w, e) in new.iter().zip(table.get(0, 4)) {
            assert!((w - e).abs() < 1e-6, "{new:?}");
        }
    }

    #[test]
    fn equal_returns_leave_the_weights_alone() {
        let table = NoiseTable::new(1, 100);
        let ep = rlx::EpisodeSummary { episode_return: 9.0, length: 9, truncated: false, agent: None };
        let r = PairResult { noise_offset: 3, pos: ep, neg: ep, obs: rlx::filter::RunningStat::new(1) };
        let (new, _) = ArsUpdate { top: 1, stepsize: 0.5 }.update(&[0.25; 4], &[r], &table);
        assert_eq!(new, vec![0.25; 4]);
    }

    #[test]
    fn bad_keys_are_named() {
        let bad = |v: serde_json::Value| {
            rlx::config::merge_json::<ArsConfig>(&ArsConfig::default(), &v).unwrap_err().to_string()
        };
        assert!(bad(serde_json::json!({"top_directions": 17})).contains("top_directions"));
        assert!(bad(serde_json::json!({"stepsize": -1.0})).contains("stepsize"));
    }
}
