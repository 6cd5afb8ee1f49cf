//! Config sections: keys several algorithms share, declared, documented
//! and range-checked once here.
//!
//! An algorithm's config holds the sections it uses as
//! `#[serde(flatten)]` fields and adds only its own keys, so users still
//! write flat RLlib-style keys (`{"num_workers": 2, "lr": 3e-4}`) and
//! `result.json` keeps them flat. A section's defaults are the common
//! ones; an algorithm whose defaults differ sets them in its `Default`.
//!
//! | section          | keys                                                    | used by |
//! |------------------|---------------------------------------------------------|---------|
//! | [`Sampling`]     | evaluators, env copies, env kwargs, seed, restarts, env shards | every algorithm with policy evaluators |
//! | [`Learning`]     | γ, gradient clip, network, device                       | the same |
//! | [`ActorCriticLearner`] | learning rate and loss weights                          | PG, A2C, A3C, PPO, IMPALA, APPO |
//! | [`SyncBatch`]    | train batch, observation filter, stragglers             | PG, A2C, A3C, PPO |
//! | [`Replay`]       | fragments, buffer, minibatches, n-step                  | DQN, Ape-X, DDPG, TD3, SAC |
//! | [`PrioritizedReplay`] | α, β and its schedule, ε                           | DQN, Ape-X |
//!
//! Sections that belong to one family live with it (`QLearning` in
//! `q_learning/dqn.rs` for DQN and Ape-X, `ContinuousLearning` in
//! `off_policy/core.rs` for DDPG, TD3 and SAC, `Perturbations` in
//! `evolution/` for ES and ARS); the registry tells [`key_docs`] their
//! keys. APPO holds all of IMPALA's config.

use crate::common::sampling::SamplingSettings;
use crate::model::device::DeviceSpec;
use crate::model::{ModelConfig, ModelSupport};
use documented::DocumentedFields;
use rlx::config::{check, check_count, ConfigError};
use rlx::experience::{Compression, InputSpec, OutputFormat, OutputSettings};
use rlx::filter::ObservationFilter;
use rlx::optimizer::SyncReplayConfig;
use rlx::replay::PrioritizedReplayConfig;
use rlx::{EnvShards, RestartPolicy};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Evaluators and their envs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct Sampling {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Keyword arguments for the env, e.g. `{"max_episode_steps": 1000}`
    /// (see `rlx list` for each env's).
    pub env_config: serde_json::Value,
    /// Seed for network initialization, exploration, replay and env resets.
    pub seed: u64,
    /// How evaluator actors are restarted after a failure.
    pub restart: RestartPolicy,
    /// Splits each sampling evaluator's env copies over this many
    /// supervised child actors that step them in parallel, for slow envs
    /// (`{"num_shards": 0}`, the default, steps them in the evaluator);
    /// `restart` is the shards' own restart policy. See the book's "Env
    /// shards" section.
    pub env_shards: EnvShards,
    /// A directory to write every episode the run samples to, for `input`
    /// or other tools later (see the book's "Offline RL" page); `null`, the
    /// default, writes nothing. Observations are written as the policy saw
    /// them (filtered if an `observation_filter` is on).
    pub output: Option<PathBuf>,
    /// How `output` lays episodes out: `json` (the default; one episode per
    /// line, RLlib's old-stack shape) or `parquet` (one step per row, RLlib's
    /// new-stack column names; read by pandas, polars and Ray Data).
    pub output_format: OutputFormat,
    /// How `output` files are compressed: `lz4` (the default; a JSON file
    /// in LZ4's frame format, Parquet pages in `LZ4_RAW`), `gzip` or `none`.
    pub output_compression: Compression,
    /// Bytes on disk after which an `output` file is finished and the next
    /// begun (RLlib's default, 64 MiB).
    pub output_max_file_size: u64,
    /// Learn from files instead of stepping the env: a dataset directory
    /// written by `output` (JSON lines or Parquet) or a Minari dataset's,
    /// a glob of episode files, or a list of these; or sources by weight,
    /// as `{"sampler": 0.5, "data/run1": 0.5}` (each batch comes from the
    /// env, `sampler`, or a dataset, drawn with those odds)
    /// (DQN, Ape-X, DDPG, TD3 and SAC; the env still gives the spaces and
    /// plays evaluation episodes). Each sampling evaluator reads its share
    /// of the files, over and over; `null`, the default, samples the env.
    pub input: Option<InputSpec>,
    /// Rows read ahead from `input` and shuffled together before they are
    /// handed out (at most 256 MiB of them: a window of image rows stops
    /// there).
    pub input_shuffle_window: usize,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            num_workers: 1,
            num_envs_per_worker: 1,
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
            output: None,
            output_format: OutputFormat::default(),
            output_compression: Compression::default(),
            output_max_file_size: 64 << 20,
            input: None,
            input_shuffle_window: 10_000,
        }
    }
}

/// Upper bounds on the config values that size memory. They sit far above
/// what a run on one machine or a small cluster uses, and low enough that
/// a typo such as `1e8` is refused at once, naming the key and the bound,
/// instead of allocating for minutes.
pub mod limits {
    /// `num_workers`, `num_replay_shards`.
    pub const MAX_WORKERS: usize = 4_096;
    /// `num_envs_per_worker`.
    pub const MAX_ENVS_PER_WORKER: usize = 16_384;
    /// Rows of one batch: `train_batch_size`, `rollout_fragment_length`.
    pub const MAX_BATCH_ROWS: usize = 1 << 24;
    /// Transitions a replay buffer holds: `buffer_size`.
    pub const MAX_BUFFER_SIZE: usize = 1 << 27;
    /// Batches queued for a learner thread: `learner_queue_size`.
    pub const MAX_QUEUED_BATCHES: usize = 4_096;
}

impl Sampling {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_count("num_workers", self.num_workers, 0, limits::MAX_WORKERS)?;
        let n = self.num_envs_per_worker;
        check_count("num_envs_per_worker", n, 1, limits::MAX_ENVS_PER_WORKER)?;
        self.env_shards.validate(n)?;
        let size = self.output_max_file_size;
        check("output_max_file_size", size, size >= 1024, "must be at least 1024 bytes")?;
        check_count("input_shuffle_window", self.input_shuffle_window, 1, limits::MAX_BATCH_ROWS)?;
        if let Some(spec) = &self.input {
            spec.sources().map_err(|message| ConfigError::Invalid { key: "input".into(), message })?;
        }
        if self.input.is_some() && self.output.is_some() {
            let message = "a run from `input` samples no episodes to write: drop `output` or `input`".to_string();
            return Err(ConfigError::Invalid { key: "output".into(), message });
        }
        self.restart.validate("restart")
    }

    /// How the evaluators sample: `sample_size` rows per `sample()` call,
    /// observations through `observation_filter`.
    pub fn settings(&self, sample_size: usize, observation_filter: ObservationFilter) -> SamplingSettings {
        SamplingSettings {
            num_workers: self.num_workers,
            num_envs_per_worker: self.num_envs_per_worker,
            sample_size,
            observation_filter,
            reward_scaling: None,
            seed: self.seed,
            restart: self.restart,
            env_shards: self.env_shards,
            output: self.output.clone().map(|dir| OutputSettings {
                dir,
                format: self.output_format,
                compression: self.output_compression,
                max_file_size: self.output_max_file_size,
            }),
            input: self.input.clone().map(|spec| (spec, self.input_shuffle_window)),
        }
    }

    /// Refuses `input` for an algorithm that learns only from its current
    /// policy's own samples.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `input` and the algorithms that take it.
    pub fn refuse_input(&self, algorithm: &str) -> Result<(), ConfigError> {
        match &self.input {
            None => Ok(()),
            Some(_) => Err(ConfigError::Invalid {
                key: "input".into(),
                message: format!(
                    "{algorithm} learns on-policy, from its current policy's own samples; \
                     DQN, APEX, DDPG, TD3 and SAC learn from files"
                ),
            }),
        }
    }

    /// How the evaluators sample when each `sample()` returns one fragment
    /// of `rollout_fragment_length` steps of every env copy, unfiltered
    /// (the replay and asynchronous algorithms).
    pub fn fragments(&self, rollout_fragment_length: usize) -> SamplingSettings {
        self.settings(rollout_fragment_length * self.num_envs_per_worker, ObservationFilter::NoFilter)
    }

    /// Evaluators that sample: the workers, or the driver when there are
    /// none.
    pub fn samplers(&self) -> usize {
        self.num_workers.max(1)
    }
}

/// What every learner has: the discount, the gradient clip, the network
/// and where it lives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct Learning {
    /// Discount γ.
    pub gamma: f64,
    /// Maximum global gradient norm (of each network, where there are
    /// several); `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// The network: hidden layers, convolutions, LSTM (RLlib's `model`
    /// keys; see the book's "Models" page). An algorithm refuses the parts
    /// it cannot use, naming them.
    pub model: ModelConfig,
    /// Where the networks live: `"cpu"`, or `"cuda"` / `"cuda:N"` in a
    /// build with the `cuda` feature.
    pub device: DeviceSpec,
}

impl Default for Learning {
    fn default() -> Self {
        Self { gamma: 0.99, grad_clip: None, model: ModelConfig::default(), device: DeviceSpec::Cpu }
    }
}

impl Learning {
    /// Range checks, and the `model` parts the algorithm builds
    /// (`support`).
    ///
    /// # Errors
    /// The first out-of-range key, a `model` part the algorithm cannot
    /// build, or a device this build cannot open.
    pub fn validate(&self, support: ModelSupport) -> Result<(), ConfigError> {
        self.device.check_available()?;
        self.model.validate(support)?;
        check("gamma", self.gamma, (0.0..=1.0).contains(&self.gamma), "must be in [0, 1]")?;
        if let Some(c) = self.grad_clip {
            check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
        }
        Ok(())
    }
}

/// The actor-critic learner: the optimizer and its learning rate, the
/// value-loss and entropy weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct ActorCriticLearner {
    /// Learning rate.
    pub lr: f64,
    /// Weight of the value loss.
    pub vf_loss_coeff: f64,
    /// Weight of the entropy bonus.
    pub entropy_coeff: f64,
    /// `adam` (eps 1e-5), or `rmsprop` (α 0.99, eps 1e-5, no momentum:
    /// Stable-Baselines3's A2C optimizer).
    pub optimizer: OptimizerChoice,
}

/// Which update rule an actor-critic learner uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerChoice {
    /// Adam (Kingma & Ba 2015).
    #[default]
    Adam,
    /// RMSprop as `torch.optim.RMSprop`.
    Rmsprop,
}

impl Default for ActorCriticLearner {
    fn default() -> Self {
        Self { lr: 1e-3, vf_loss_coeff: 0.5, entropy_coeff: 0.0, optimizer: OptimizerChoice::Adam }
    }
}

impl ActorCriticLearner {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("lr", self.lr, self.lr > 0.0 && self.lr.is_finite(), "must be > 0")?;
        check("vf_loss_coeff", self.vf_loss_coeff, self.vf_loss_coeff >= 0.0, "must be >= 0")?;
        check("entropy_coeff", self.entropy_coeff, self.entropy_coeff >= 0.0, "must be >= 0")
    }
}

/// Synchronous sampling: every sampler returns its share of one train
/// batch with the same weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct SyncBatch {
    /// Env steps per training iteration, split evenly across the samplers.
    pub train_batch_size: usize,
    /// `"NoFilter"` or `"MeanStdFilter"` (running observation normalization,
    /// synchronized across evaluators each iteration).
    pub observation_filter: ObservationFilter,
    /// Straggler mitigation: learn once this fraction of the evaluators has
    /// returned (the late batches are dropped and counted as
    /// `straggler_batches_dropped`); 1.0 waits for all.
    pub min_sample_fraction: f64,
    /// Divide the rewards the learner sees by the running std of the
    /// discounted return (with `gamma`), clipped to ±10: Stable-Baselines3's
    /// `VecNormalize` reward normalization, which rl-baselines3-zoo uses
    /// for MuJoCo. Each evaluator keeps its own statistics; reported
    /// episode returns are unscaled.
    pub normalize_rewards: bool,
}

impl Default for SyncBatch {
    fn default() -> Self {
        Self {
            train_batch_size: 1024,
            observation_filter: ObservationFilter::NoFilter,
            min_sample_fraction: 1.0,
            normalize_rewards: false,
        }
    }
}

impl SyncBatch {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_count("train_batch_size", self.train_batch_size, 1, limits::MAX_BATCH_ROWS)?;
        let f = self.min_sample_fraction;
        check("min_sample_fraction", f, f > 0.0 && f <= 1.0, "must be in (0, 1]")?;
        // Filter statistics are synchronized with every worker each step,
        // which would wait for the straggler after all.
        let filtered = self.observation_filter != ObservationFilter::NoFilter;
        check("min_sample_fraction", f, f == 1.0 || !filtered, "must be 1.0 when an observation_filter is set")
    }

    /// How `sampling`'s evaluators sample: each returns its share of the
    /// train batch, its rewards scaled with discount `gamma` if
    /// `normalize_rewards`.
    pub fn settings(&self, sampling: &Sampling, gamma: f64) -> SamplingSettings {
        let settings = sampling.settings(self.train_batch_size.div_ceil(sampling.samplers()), self.observation_filter);
        SamplingSettings { reward_scaling: self.normalize_rewards.then_some(gamma), ..settings }
    }
}

/// Off-policy sampling into a replay buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct Replay {
    /// Env steps of every env copy each evaluator samples per round (or
    /// per batch it sends, with asynchronous replay).
    pub rollout_fragment_length: usize,
    /// Env steps sampled per training iteration (one line of results).
    pub timesteps_per_iteration: usize,
    /// Transitions the replay buffer holds (all shards together, with
    /// several).
    pub buffer_size: usize,
    /// Transitions stored before learning starts.
    pub learning_starts: usize,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// Replayed rows trained on per sampled env step. `null`: one update
    /// per env step (`train_batch_size` rows) for DQN, DDPG, TD3 and SAC;
    /// Ape-X's learner learns as fast as it can (the paper's setting, which
    /// makes results depend on the machine).
    pub training_intensity: Option<f64>,
    /// Rewards summed into each transition's return before bootstrapping.
    pub n_step: usize,
}

impl Default for Replay {
    fn default() -> Self {
        Self {
            rollout_fragment_length: 1,
            timesteps_per_iteration: 1000,
            buffer_size: 50_000,
            learning_starts: 1000,
            train_batch_size: 64,
            training_intensity: None,
            n_step: 1,
        }
    }
}

impl Replay {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = |key: &str, v: usize| check(key, v, v >= 1, "must be >= 1");
        check_count("rollout_fragment_length", self.rollout_fragment_length, 1, limits::MAX_BATCH_ROWS)?;
        positive("timesteps_per_iteration", self.timesteps_per_iteration)?;
        check_count("buffer_size", self.buffer_size, 1, limits::MAX_BUFFER_SIZE)?;
        let ls = self.learning_starts;
        check("learning_starts", ls, ls <= self.buffer_size, "must be <= buffer_size (or learning never starts)")?;
        check_count("train_batch_size", self.train_batch_size, 1, limits::MAX_BATCH_ROWS)?;
        positive("n_step", self.n_step)?;
        // Returns are summed within a sampled fragment, so a longer n would
        // silently be cut to the fragment.
        let (n, len) = (self.n_step, self.rollout_fragment_length);
        check("n_step", n, n <= len, "must be <= rollout_fragment_length (n-step returns stay within a fragment)")?;
        if let Some(ti) = self.training_intensity {
            check("training_intensity", ti, ti > 0.0 && ti.is_finite(), "must be > 0 or null")?;
        }
        Ok(())
    }

    /// Replayed rows per sampled env step, `train_batch_size` for `null`.
    pub fn rows_per_step(&self) -> f64 {
        self.training_intensity.unwrap_or(self.train_batch_size as f64)
    }

    /// The replay optimizer's settings.
    pub fn optimizer(&self, seed: u64, prioritized: Option<PrioritizedReplayConfig>) -> SyncReplayConfig {
        SyncReplayConfig {
            buffer_size: self.buffer_size,
            prioritized,
            learning_starts: self.learning_starts,
            train_batch_size: self.train_batch_size,
            training_intensity: self.rows_per_step(),
            timesteps_per_iteration: self.timesteps_per_iteration,
            seed,
        }
    }

    /// How `sampling`'s evaluators sample: one fragment of every env copy.
    pub fn settings(&self, sampling: &Sampling) -> SamplingSettings {
        sampling.fragments(self.rollout_fragment_length)
    }
}

/// Replay in proportion to TD error (Schaul et al., "Prioritized
/// Experience Replay", ICLR 2016).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default)]
pub struct PrioritizedReplay {
    /// Replay in proportion to TD error (prioritized replay).
    pub prioritized_replay: bool,
    /// Priority exponent α.
    pub prioritized_replay_alpha: f64,
    /// Importance-weight exponent β at the start.
    pub prioritized_replay_beta: f64,
    /// β after `prioritized_replay_beta_annealing_timesteps` env steps.
    pub final_prioritized_replay_beta: f64,
    /// Env steps over which β anneals linearly.
    pub prioritized_replay_beta_annealing_timesteps: u64,
    /// Added to every |TD error| so every transition can be replayed.
    pub prioritized_replay_eps: f64,
}

impl Default for PrioritizedReplay {
    fn default() -> Self {
        Self {
            prioritized_replay: true,
            prioritized_replay_alpha: 0.6,
            prioritized_replay_beta: 0.4,
            final_prioritized_replay_beta: 1.0,
            prioritized_replay_beta_annealing_timesteps: 20_000,
            prioritized_replay_eps: 1e-6,
        }
    }
}

impl PrioritizedReplay {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let alpha = self.prioritized_replay_alpha;
        check("prioritized_replay_alpha", alpha, alpha >= 0.0 && alpha.is_finite(), "must be >= 0")?;
        for (key, beta) in [
            ("prioritized_replay_beta", self.prioritized_replay_beta),
            ("final_prioritized_replay_beta", self.final_prioritized_replay_beta),
        ] {
            check(key, beta, (0.0..=1.0).contains(&beta), "must be in [0, 1]")?;
        }
        let eps = self.prioritized_replay_eps;
        check("prioritized_replay_eps", eps, eps >= 0.0 && eps.is_finite(), "must be >= 0")
    }

    /// The replay buffer's settings, `None` when prioritized replay is off.
    pub fn config(&self) -> Option<PrioritizedReplayConfig> {
        self.prioritized_replay.then_some(PrioritizedReplayConfig {
            alpha: self.prioritized_replay_alpha,
            beta: rlx::replay::LinearSchedule {
                start: self.prioritized_replay_beta,
                end: self.final_prioritized_replay_beta,
                steps: self.prioritized_replay_beta_annealing_timesteps,
            },
            eps: self.prioritized_replay_eps,
        })
    }
}

/// Each key of config `C` with its doc, in declaration order, a section's
/// field replaced by the section's keys: what `rlx config ALG` prints.
/// `family` gives the keys of the sections a family declares for itself
/// (`None` for a field that is not one), after this module's own.
pub fn key_docs<C: DocumentedFields>(family: fn(&str) -> Option<Docs>) -> Docs {
    let mut docs = Vec::new();
    for (&name, &doc) in C::FIELD_NAMES.iter().zip(C::FIELD_DOCS.iter()) {
        match section_docs(name).or_else(|| family(name)) {
            Some(section) => docs.extend(section),
            None => docs.push((name, doc)),
        }
    }
    docs
}

/// Config keys with their docs, in declaration order.
pub type Docs = Vec<(&'static str, &'static str)>;

/// The keys of the section that configs hold in a field called `field`.
/// Sections are always held under these names (the registry's test
/// `config_docs_cover_every_key` fails otherwise).
fn section_docs(field: &str) -> Option<Docs> {
    Some(match field {
        "sampling" => key_docs::<Sampling>(no_family),
        "learning" => key_docs::<Learning>(no_family),
        "actor_critic" => key_docs::<ActorCriticLearner>(no_family),
        "batch" => key_docs::<SyncBatch>(no_family),
        "replay" => key_docs::<Replay>(no_family),
        "prioritized" => key_docs::<PrioritizedReplay>(no_family),
        _ => return None,
    })
}

/// No family sections (a config made of this module's sections alone).
pub fn no_family(_: &str) -> Option<Docs> {
    None
}
