//! What evolution strategies ([`es`]) and augmented random search
//! ([`ars`]) share: the noise table, a policy on flat weights,
//! perturbation workers that may nest, and the optimizer that drives them.
//! Each algorithm adds only its update rule ([`UpdateRule`]).
//!
//! One iteration:
//! 1. The driver draws `num_perturbations` tasks: a noise-table offset and
//!    an env seed each.
//! 2. Each worker gets the current weights θ, the observation statistics
//!    and its share of the tasks. For each task it runs one episode with
//!    θ + σε and one with θ − σε (antithetic pair, same env seed), where ε
//!    is the noise table's slice at the task's offset.
//! 3. Workers return `(offset, return⁺, return⁻)` per task plus what their
//!    observations added to the statistics: a few dozen bytes per task, no
//!    matter how large the network. The noise itself never travels: every
//!    process generates the same table from the seed ([`NoiseTable`]).
//! 4. The driver merges the statistics in task order and asks the update
//!    rule for the new θ.
//!
//! **Nesting.** A [`PerturbationWorker`] with `num_children > 0` splits its
//! tasks over child workers it supervises itself (an
//! [`ActorPool`](rlx::pool::ActorPool)), so one worker can be a whole
//! node's worth of cores. Every task is evaluated the same way wherever it
//! runs (its own env seed, the driver's frozen statistics) and results are
//! merged in task order, so nesting changes where work runs, not what is
//! computed: the weights are bit for bit those of the flat run (a test
//! checks it).
//!
//! Where each part lives: [`NoiseTable`] (`noise.rs`), [`FlatPolicy`]
//! (`flat_policy.rs`), [`Perturber`] and [`PerturbationWorker`]
//! (`workers.rs`), [`UpdateRule`] and what ES's and ARS's rules share
//! (`update_rule.rs`), [`EvolutionOptimizer`] (`optimizer.rs`); the config
//! keys both algorithms take, [`Perturbations`], are here.

pub mod ars;
pub mod es;
mod flat_policy;
mod noise;
mod optimizer;
mod update_rule;
mod workers;

pub use flat_policy::{hiddens, FlatPolicy};
pub use noise::NoiseTable;
pub use optimizer::{trainer, EvolutionOptimizer, EvolutionSettings};
pub use update_rule::{centered_ranks, weighted_noise_sum, UpdateRule};
pub use workers::{
    EvalRequest, PairResult, PerturbationWorker, Perturber, PerturberSpec, Task, WorkerArgs, WorkerMsg, WorkerState,
};

use crate::common::sections::limits;
use crate::error::BuildError;
use crate::model::{ModelConfig, ModelSupport};
use rlx::config::{check, check_count, ConfigError};
use rlx::env::EnvMaker;
use rlx::filter::ObservationFilter;
use rlx::{PolicyGraph, RestartPolicy, Space};
use serde::{Deserialize, Serialize};

/// The config keys ES and ARS share: workers, perturbations, the noise
/// table, the flat policy and its observation filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct Perturbations {
    /// Worker actors evaluating perturbations in parallel; 0 evaluates in the driver.
    pub num_workers: usize,
    /// Child actors per worker that share its perturbations (nesting); 0: none.
    pub num_children_per_worker: usize,
    /// Antithetic pairs (two episodes each) per iteration: ARS's
    /// directions N.
    pub num_perturbations: usize,
    /// σ (ARS's ν), the perturbations' standard deviation.
    pub noise_stdev: f64,
    /// The step size: Adam's for ES, α for ARS.
    pub stepsize: f64,
    /// The policy network's hidden layers: `fcnet_hiddens` (`[]` is a
    /// linear policy) and `fcnet_activation`; the other `model` keys do not
    /// apply.
    pub model: ModelConfig,
    /// `"MeanStdFilter"` (normalize observations; ARS V2) or `"NoFilter"`
    /// (ARS V1).
    pub observation_filter: ObservationFilter,
    /// Length of the shared noise table (values; 4 bytes each, generated once per process).
    pub noise_size: usize,
    /// Seed of the noise table.
    pub noise_seed: u64,
    /// Keyword arguments for the env.
    pub env_config: serde_json::Value,
    /// Seed of the network's initialization (a linear policy starts at
    /// zero) and of the perturbation draws.
    pub seed: u64,
    /// How worker (and child) actors are restarted after a failure.
    pub restart: RestartPolicy,
}

impl Default for Perturbations {
    fn default() -> Self {
        Self {
            num_workers: 2,
            num_children_per_worker: 0,
            num_perturbations: 32,
            noise_stdev: 0.02,
            stepsize: 0.01,
            model: hiddens(&[32, 32]),
            observation_filter: ObservationFilter::MeanStdFilter,
            // The paper's table holds 250M values (1 GB); 10M is plenty for
            // networks of a few thousand weights.
            noise_size: 10_000_000,
            noise_seed: 123,
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

impl Perturbations {
    /// Range checks, with `algorithm` named in a model error.
    ///
    /// # Errors
    /// The first bad key, by name.
    pub fn validate(&self, algorithm: &'static str) -> Result<(), ConfigError> {
        check_count("num_workers", self.num_workers, 0, limits::MAX_WORKERS)?;
        check_count("num_perturbations", self.num_perturbations, 1, limits::MAX_BATCH_ROWS)?;
        let nested = self.num_children_per_worker;
        check(
            "num_children_per_worker",
            nested,
            nested == 0 || self.num_workers > 0,
            "needs num_workers > 0 (children belong to workers)",
        )?;
        let sigma = self.noise_stdev;
        check("noise_stdev", sigma, sigma > 0.0 && sigma.is_finite(), "must be positive")?;
        // The shared noise table: 4 bytes a value, in every process.
        check_count("noise_size", self.noise_size, 1, limits::MAX_BUFFER_SIZE * 8)?;
        check("stepsize", self.stepsize, self.stepsize > 0.0 && self.stepsize.is_finite(), "must be positive")?;
        self.restart.validate("restart")?;
        self.model.validate(ModelSupport::mlp(algorithm))
    }

    fn normalize(&self) -> bool {
        self.observation_filter == ObservationFilter::MeanStdFilter
    }

    /// The flat policy for these spaces (what `rlx rollout` loads weights
    /// into).
    ///
    /// # Errors
    /// Unsupported spaces, with `algorithm` named.
    pub fn policy(
        &self,
        algorithm: &str,
        obs: &Space,
        act: &Space,
        seed: u64,
    ) -> Result<Box<dyn PolicyGraph>, BuildError> {
        let policy = FlatPolicy::new(obs, act, &self.model, self.normalize(), seed);
        Ok(Box::new(policy.map_err(|e| BuildError::Unsupported(format!("{algorithm} {e}")))?))
    }

    /// The optimizer's settings, with envs from `make_env`.
    pub fn settings(&self, make_env: EnvMaker) -> EvolutionSettings {
        EvolutionSettings {
            num_workers: self.num_workers,
            num_children_per_worker: self.num_children_per_worker,
            num_perturbations: self.num_perturbations,
            noise_stdev: self.noise_stdev as f32,
            seed: self.seed,
            restart: self.restart,
            spec: PerturberSpec {
                make_env,
                model: self.model.clone(),
                normalize: self.normalize(),
                noise_seed: self.noise_seed,
                noise_size: self.noise_size,
            },
        }
    }
}
