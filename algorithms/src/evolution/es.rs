//! # Evolution strategies (ES)
//!
//! Salimans, Ho, Chen, Sidor and Sutskever, "Evolution Strategies as a
//! Scalable Alternative to Reinforcement Learning", 2017. No gradients
//! through the network: each iteration evaluates `num_perturbations`
//! antithetic pairs θ ± σε of the policy's weights, one episode each, and
//! moves θ along the ε whose returns ranked highest.
//!
//! Details that matter:
//! - **Antithetic pairs** (mirrored sampling) and **centered-rank fitness
//!   shaping** ([`centered_ranks`]): the update sees only the order of the
//!   2n returns, so reward scale and outliers do not matter.
//! - The estimate g = Σᵢ (rank⁺ᵢ − rank⁻ᵢ) εᵢ / 2n is followed by **Adam**
//!   with L2 weight decay (`l2_coeff`), as in the paper's experiments.
//!   (σ is left out of g: Adam's step is invariant to its scale.)
//! - The **noise table** is generated from `noise_seed` in every process
//!   and never sent; workers return (noise offset, returns) pairs.
//! - **Observation normalization** (`"MeanStdFilter"`): statistics are
//!   frozen during an iteration, every worker's observations are merged by
//!   the driver in task order afterwards.
//! - `num_children_per_worker > 0` makes every worker a supervisor of child
//!   workers that share its tasks (see [`evolution`](crate::evolution)).
//!
//! Execution: [`EvolutionOptimizer`]. Learner metrics:
//! `mean_perturbed_return`, `max_perturbed_return`, `grad_norm`,
//! `update_norm`, `weights_norm`, `num_perturbations`, `obs_stat_count`,
//! `worker_restarts` (top-level workers; restarts inside a worker's
//! children are retried there and logged).

use crate::common::build_context::BuildContext;
use crate::error::BuildError;
use crate::evolution::{
    centered_ranks, weighted_noise_sum, EvolutionOptimizer, NoiseTable, PairResult, Perturbations, UpdateRule,
};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{Evaluators, LearnerStats, PolicyGraph, Space, Trainer};
use serde::{Deserialize, Serialize};

/// ES's configuration: the keys ES and ARS share, and L2 weight decay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct EsConfig {
    /// Workers, perturbations, noise table, network, filter, seeds.
    #[serde(flatten)]
    pub perturbations: Perturbations,
    /// L2 weight decay added to the update.
    pub l2_coeff: f64,
}

impl Default for EsConfig {
    fn default() -> Self {
        Self { perturbations: Perturbations::default(), l2_coeff: 0.005 }
    }
}

impl Validate for EsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.perturbations.validate(Self::NAME)?;
        check("l2_coeff", self.l2_coeff, self.l2_coeff >= 0.0 && self.l2_coeff.is_finite(), "must be non-negative")
    }
}

/// ES's update: centered ranks, then Adam.
pub struct EsUpdate {
    stepsize: f64,
    l2_coeff: f64,
    adam: Adam,
}

impl UpdateRule for EsUpdate {
    fn update(&mut self, theta: &[f32], results: &[PairResult], noise: &NoiseTable) -> (Vec<f32>, LearnerStats) {
        let n = results.len();
        let returns: Vec<f64> = results.iter().flat_map(|r| [r.pos.episode_return, r.neg.episode_return]).collect();
        let ranks = centered_ranks(&returns);
        let weights: Vec<f64> = (0..n).map(|i| ranks[2 * i] - ranks[2 * i + 1]).collect();
        let g = weighted_noise_sum(results, &weights, noise, theta.len());
        // Adam minimizes, so it gets the negated ascent direction plus the decay.
        let grad: Vec<f64> =
            g.iter().zip(theta).map(|(&g, &w)| -g / (2 * n) as f64 + self.l2_coeff * w as f64).collect();
        let new_theta = self.adam.step(theta, &grad, self.stepsize);
        let mut stats = LearnerStats::default();
        stats.set("mean_perturbed_return", returns.iter().sum::<f64>() / returns.len() as f64);
        stats.set("max_perturbed_return", returns.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        stats.set("grad_norm", grad.iter().map(|g| g * g).sum::<f64>().sqrt());
        (new_theta, stats)
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec!["ES's Adam moments are not saved; a restored run restarts them".into()]
    }
}

/// Adam (Kingma and Ba 2015) on a flat vector, in f64.
#[derive(Default)]
pub struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    /// Zero moments for `dim` parameters.
    pub fn new(dim: usize) -> Self {
        Self { m: vec![0.0; dim], v: vec![0.0; dim], t: 0 }
    }

    /// `theta` after one step against `grad` (β₁ 0.9, β₂ 0.999, ε 1e-8);
    /// the moments start at zero on the first step of a new length.
    pub fn step(&mut self, theta: &[f32], grad: &[f64], lr: f64) -> Vec<f32> {
        const B1: f64 = 0.9;
        const B2: f64 = 0.999;
        if self.m.len() != theta.len() {
            *self = Self::new(theta.len());
        }
        self.t += 1;
        let a = lr * (1.0 - B2.powi(self.t)).sqrt() / (1.0 - B1.powi(self.t));
        theta
            .iter()
            .zip(grad)
            .zip(self.m.iter_mut().zip(&mut self.v))
            .map(|((&w, &g), (m, v))| {
                *m = B1 * *m + (1.0 - B1) * g;
                *v = B2 * *v + (1.0 - B2) * g * g;
                (w as f64 - a * *m / (v.sqrt() + 1e-8)) as f32
            })
            .collect()
    }
}

/// ES's policy for these spaces (what `rlx rollout` loads weights into).
///
/// # Errors
/// Unsupported spaces.
pub fn make_policy(cfg: &EsConfig, obs: &Space, act: &Space, seed: u64) -> Result<Box<dyn PolicyGraph>, BuildError> {
    cfg.perturbations.policy(EsConfig::NAME, obs, act, seed)
}

algorithm_name!(EsConfig, "ES");

/// The execution plan: perturbation workers and the ES update.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or a worker fails
/// to start.
/// ES places no workers through `ctx`: its perturbation workers are its
/// own actors (see [`crate::evolution`]).
pub async fn build(_ctx: BuildContext, make_env: EnvMaker, cfg: EsConfig) -> Result<Trainer, BuildError> {
    let (evaluators, optimizer) = optimizer(make_env, cfg).await?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

/// The driver's evaluator and the optimizer that [`build`] wraps, for a
/// caller that wants to reach the workers (a fault test kills one).
///
/// # Errors
/// As [`build`].
pub async fn optimizer(make_env: EnvMaker, cfg: EsConfig) -> Result<(Evaluators, EvolutionOptimizer), BuildError> {
    let settings = cfg.perturbations.settings(make_env);
    let rule = EsUpdate { stepsize: cfg.perturbations.stepsize, l2_coeff: cfg.l2_coeff, adam: Adam::default() };
    EvolutionOptimizer::new(settings, Box::new(rule)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_moves_against_the_gradient_by_about_the_step_size() {
        let mut adam = Adam::new(2);
        let theta = adam.step(&[1.0, 1.0], &[0.5, -2.0], 0.01);
        // The first bias-corrected step is lr · sign(g).
        assert!((theta[0] - 0.99).abs() < 1e-6 && (theta[1] - 1.01).abs() < 1e-6, "{theta:?}");
    }

    #[test]
    fn the_update_follows_the_better_half_of_each_pair() {
        // Two pairs; the + side of the first wins, the − side of the second.
        let table = NoiseTable::new(1, 100);
        let ep = |r| rlx::EpisodeSummary { episode_return: r, length: 1, truncated: false, agent: None };
        let stat = rlx::filter::RunningStat::new(1);
        let results = vec![
            PairResult { noise_offset: 0, pos: ep(10.0), neg: ep(1.0), obs: stat.clone() },
            PairResult { noise_offset: 50, pos: ep(2.0), neg: ep(5.0), obs: stat },
        ];
        let mut rule = EsUpdate { stepsize: 0.01, l2_coeff: 0.0, adam: Adam::default() };
        let theta = [0.0f32; 3];
        let (new, stats) = rule.update(&theta, &results, &table);
        // Ranks: 10 → .5, 1 → −.5, 2 → −1/6, 5 → 1/6: g ∝ 1·ε₀ − ⅓·ε₅₀.
        let g: Vec<f64> = (0..3).map(|j| table.get(0, 3)[j] as f64 - table.get(50, 3)[j] as f64 / 3.0).collect();
        for j in 0..3 {
            assert_eq!(new[j] > 0.0, g[j] > 0.0, "coordinate {j}: {new:?} vs {g:?}");
        }
        assert_eq!(stats.get("max_perturbed_return"), Some(10.0));
    }

    #[test]
    fn bad_keys_are_named() {
        let bad = |v: serde_json::Value| {
            rlx::config::merge_json::<EsConfig>(&EsConfig::default(), &v).unwrap_err().to_string()
        };
        assert!(bad(serde_json::json!({"noise_stdev": 0.0})).contains("noise_stdev"));
        assert!(bad(serde_json::json!({"num_perturbations": 0})).contains("num_perturbations"));
        assert!(bad(serde_json::json!({"model": {"fcnet_hiddens": [32, 0]}})).contains("model.fcnet_hiddens"));
        let lstm = bad(serde_json::json!({"model": {"use_lstm": true}}));
        assert!(lstm.contains("model.use_lstm") && lstm.contains("ES has no recurrent policy"), "{lstm}");
        assert!(bad(serde_json::json!({"sigma": 0.1})).contains("sigma"));
    }
}
