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
//! Execution: [`EvolutionOptimizer`]. Learner metrics:
//! `mean_perturbed_return`, `max_perturbed_return`, `reward_std`,
//! `update_norm`, `weights_norm`, `num_perturbations`, `obs_stat_count`,
//! `worker_restarts`.

use crate::evolution::{
    check_model, check_settings, hiddens, weighted_noise_sum, EvolutionOptimizer, EvolutionSettings, FlatPolicy,
    NoiseTable, PairResult, PerturberSpec, UpdateRule,
};
use crate::model::ModelConfig;
use crate::{BuildError, EnvMaker};
use rlx::config::{check, ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::{LearnerStats, PolicyGraph, RestartPolicy, Space, Trainer};
use serde::{Deserialize, Serialize};

/// ARS's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct ArsConfig {
    /// Worker actors evaluating perturbations in parallel; 0 evaluates in the driver.
    pub num_workers: usize,
    /// Child actors per worker that share its perturbations (nesting); 0: none.
    pub num_children_per_worker: usize,
    /// Directions N (antithetic pairs, two episodes each) per iteration.
    pub num_perturbations: usize,
    /// b: the best directions that enter the update (≤ `num_perturbations`).
    pub top_directions: usize,
    /// ν, the perturbations' standard deviation.
    pub noise_stdev: f64,
    /// α, the step size.
    pub stepsize: f64,
    /// The policy network's hidden layers: `fcnet_hiddens` (`[]` is a
    /// linear policy) and `fcnet_activation`; the other `model` keys do not
    /// apply.
    pub model: ModelConfig,
    /// `"MeanStdFilter"` (V2: normalize states) or `"NoFilter"` (V1).
    pub observation_filter: ObservationFilter,
    /// Length of the shared noise table (values; 4 bytes each, generated once per process).
    pub noise_size: usize,
    /// Seed of the noise table.
    pub noise_seed: u64,
    /// Keyword arguments for the env.
    pub env_config: serde_json::Value,
    /// Seed of the perturbation draws (a linear policy starts at zero).
    pub seed: u64,
    /// How worker (and child) actors are restarted after a failure.
    pub restart: RestartPolicy,
}

impl Default for ArsConfig {
    fn default() -> Self {
        Self {
            num_workers: 2,
            num_children_per_worker: 0,
            num_perturbations: 16,
            top_directions: 8,
            noise_stdev: 0.03,
            stepsize: 0.02,
            model: hiddens(&[]),
            observation_filter: ObservationFilter::MeanStdFilter,
            noise_size: 10_000_000,
            noise_seed: 123,
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

impl Validate for ArsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        check_settings(
            self.num_workers,
            self.num_children_per_worker,
            self.num_perturbations,
            self.noise_stdev,
            self.noise_size,
            &self.restart,
        )?;
        let b = self.top_directions;
        check("top_directions", b, b > 0 && b <= self.num_perturbations, "must be in 1..=num_perturbations")?;
        check("stepsize", self.stepsize, self.stepsize > 0.0 && self.stepsize.is_finite(), "must be positive")?;
        check_model(&self.model, "ARS")
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
    let normalize = cfg.observation_filter == ObservationFilter::MeanStdFilter;
    let policy = FlatPolicy::new(obs, act, &cfg.model, normalize, seed);
    Ok(Box::new(policy.map_err(|e| BuildError::Unsupported(format!("ARS {e}")))?))
}

/// The execution plan: perturbation workers and the ARS update.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or a worker fails
/// to start.
pub async fn build(make_env: EnvMaker, cfg: ArsConfig) -> Result<Trainer, BuildError> {
    let settings = EvolutionSettings {
        num_workers: cfg.num_workers,
        num_children_per_worker: cfg.num_children_per_worker,
        num_perturbations: cfg.num_perturbations,
        noise_stdev: cfg.noise_stdev as f32,
        seed: cfg.seed,
        restart: cfg.restart,
        spec: PerturberSpec {
            make_env,
            model: cfg.model.clone(),
            normalize: cfg.observation_filter == ObservationFilter::MeanStdFilter,
            noise_seed: cfg.noise_seed,
            noise_size: cfg.noise_size,
        },
    };
    let rule = ArsUpdate { top: cfg.top_directions, stepsize: cfg.stepsize };
    Ok(Trainer::new(Box::new(EvolutionOptimizer::new(settings, Box::new(rule)).await?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolution::PairResult;

    #[test]
    fn only_the_top_directions_move_the_weights_scaled_by_their_reward_std() {
        let table = NoiseTable::new(1, 100);
        let ep = |r| rlx::EpisodeSummary { episode_return: r, length: 1, truncated: false };
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
        let ep = rlx::EpisodeSummary { episode_return: 9.0, length: 9, truncated: false };
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
