//! # Ape-X DQN
//!
//! Horgan et al., "Distributed Prioritized Experience Replay", ICLR 2018:
//! [DQN](crate::dqn)'s policy (double Q, dueling head, n-step returns,
//! Huber loss, target network) with acting and learning decoupled:
//! - many evaluators act, each with its **own fixed ε**: evaluator `i` of
//!   `N` uses `ε_i = base^(1 + alpha · (i − 1)/(N − 1))` (the paper's
//!   base 0.4, alpha 7), so a few explore hard while most act nearly
//!   greedily; one evaluator uses `base`;
//! - evaluators compute the **initial priority** of every transition they
//!   sample (its TD error under their weights), so the learner never
//!   spends time prioritizing new data;
//! - transitions live in **replay shards**, supervised actors each holding
//!   a prioritized buffer of `buffer_size / num_replay_shards`;
//! - one **learner thread** learns on minibatches replayed from the shards
//!   and sends the updated priorities back; an evaluator gets the latest
//!   weights after every `max_weight_sync_delay` of its env steps.
//!
//! The reported episode returns mix all evaluators, the exploring ones
//! included (RLlib reports only its least-exploring third); the greedy
//! policy does better than the mean.
//!
//! Execution: [`AsyncReplayOptimizer`]. Learner metrics (`learner.*`): as
//! DQN's (`loss`, `mean_q`, `mean_td_error`, `grad_norm`,
//! `num_target_updates`, `num_updates`), plus `replay_buffer_size` (all
//! shards), `replay_shard_restarts`, `replay_lost_transitions` (what died
//! with restarted shards: never hidden) and `learner_queue`.

use crate::device::DeviceSpec;
use crate::dqn::{self, DqnConfig};
use crate::execution::{spawn_evaluators, SamplingSettings};
use crate::model::ModelConfig;
use crate::{BuildError, EnvMaker};
use rlx::config::{check, ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::optimizer::{AsyncReplayConfig, AsyncReplayOptimizer};
use rlx::replay::{LinearSchedule, PrioritizedReplayConfig};
use rlx::{EnvShards, RestartPolicy, RestartStrategy, Space, Trainer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Ape-X DQN's configuration. Every key is optional in `--config`; unknown
/// keys are errors. Keys shared with DQN mean the same as there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct ApexConfig {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Env steps per batch an evaluator sends to a replay shard.
    pub rollout_fragment_length: usize,
    /// Env steps sampled per training iteration (one line of results).
    pub timesteps_per_iteration: usize,
    /// Replay shard actors.
    pub num_replay_shards: usize,
    /// Transitions all replay shards hold together.
    pub buffer_size: usize,
    /// Transitions stored (all shards) before learning starts.
    pub learning_starts: usize,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// At most this many replayed rows per sampled env step; `null` lets the
    /// learner learn as fast as it can (the paper's setting), which makes
    /// results depend on the machine.
    pub training_intensity: Option<f64>,
    /// An evaluator gets the learner's weights after this many of its env
    /// steps.
    pub max_weight_sync_delay: usize,
    /// Replayed minibatches queued for the learner thread.
    pub learner_queue_size: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Rewards summed into each transition's return before bootstrapping.
    pub n_step: usize,
    /// Double Q-learning.
    pub double_q: bool,
    /// The dueling head.
    pub dueling: bool,
    /// Gradient updates between target network copies.
    pub target_update_interval: u64,
    /// ε of the most exploring evaluator (the paper's 0.4).
    pub per_worker_exploration_base: f64,
    /// How fast ε falls across evaluators (the paper's 7).
    pub per_worker_exploration_alpha: f64,
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
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// The Q-network's layers before its heads (as DQN's `model`).
    pub model: ModelConfig,
    /// Keyword arguments for the env (see `rlx list`).
    pub env_config: serde_json::Value,
    /// Seed for network initialization, exploration, replay and env resets.
    pub seed: u64,
    /// Where the networks live: `"cpu"`, or `"cuda"` / `"cuda:N"` in a
    /// build with the `cuda` feature.
    pub device: DeviceSpec,
    /// How evaluator actors are restarted after a failure.
    pub restart: RestartPolicy,
    /// Splits each sampling evaluator's env copies over this many
    /// supervised child actors that step them in parallel, for slow envs
    /// (`{"num_shards": 0}`, the default, steps them in the evaluator);
    /// `restart` is the shards' own restart policy. See the book's "Env
    /// shards" section.
    pub env_shards: EnvShards,
    /// How replay shard actors are restarted after a failure (a restarted
    /// shard starts empty; its transitions are counted as lost).
    pub shard_restart: RestartPolicy,
}

impl Default for ApexConfig {
    fn default() -> Self {
        Self {
            num_workers: 2,
            num_envs_per_worker: 1,
            rollout_fragment_length: 50,
            timesteps_per_iteration: 1000,
            num_replay_shards: 2,
            buffer_size: 50_000,
            learning_starts: 1000,
            train_batch_size: 64,
            training_intensity: Some(16.0),
            max_weight_sync_delay: 400,
            learner_queue_size: 4,
            lr: 1e-3,
            gamma: 0.99,
            n_step: 3,
            double_q: true,
            dueling: true,
            target_update_interval: 250,
            per_worker_exploration_base: 0.4,
            per_worker_exploration_alpha: 7.0,
            prioritized_replay: true,
            prioritized_replay_alpha: 0.6,
            prioritized_replay_beta: 0.4,
            final_prioritized_replay_beta: 1.0,
            prioritized_replay_beta_annealing_timesteps: 20_000,
            prioritized_replay_eps: 1e-6,
            grad_clip: Some(10.0),
            model: ModelConfig::relu(),
            env_config: serde_json::Value::Null,
            seed: 0,
            device: DeviceSpec::Cpu,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
            shard_restart: RestartPolicy::default(),
        }
    }
}

impl Validate for ApexConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let base = self.per_worker_exploration_base;
        check("per_worker_exploration_base", base, (0.0..=1.0).contains(&base), "must be in [0, 1]")?;
        let alpha = self.per_worker_exploration_alpha;
        check("per_worker_exploration_alpha", alpha, alpha >= 0.0 && alpha.is_finite(), "must be >= 0")?;
        // The keys shared with DQN are checked as DQN checks them.
        self.policy_config(0).validate()?;
        let positive = |key: &str, v: usize| check(key, v, v >= 1, "must be >= 1");
        positive("num_replay_shards", self.num_replay_shards)?;
        positive("max_weight_sync_delay", self.max_weight_sync_delay)?;
        positive("learner_queue_size", self.learner_queue_size)?;
        let (shards, size) = (self.num_replay_shards, self.buffer_size);
        check("buffer_size", size, size >= shards, "must hold at least one transition per replay shard")?;
        let room = size / shards * shards;
        let ls = self.learning_starts;
        check("learning_starts", ls, ls <= room, "must fit in the shards (buffer_size / num_replay_shards each)")?;
        if let Some(ti) = self.training_intensity {
            check("training_intensity", ti, ti > 0.0 && ti.is_finite(), "must be > 0 or null")?;
        }
        let strategy = self.shard_restart.strategy;
        let independent = strategy == RestartStrategy::OneForOne;
        check(
            "shard_restart.strategy",
            format!("{strategy:?}"),
            independent,
            "must be one_for_one (shards are independent)",
        )?;
        self.shard_restart.validate("shard_restart")
    }
}

impl ApexConfig {
    /// The fixed ε of evaluator `index` (1-based among `num_workers`; 0 is
    /// the driver's, which samples only when there are no workers).
    pub fn epsilon(&self, index: usize) -> f64 {
        let n = self.num_workers;
        if n <= 1 || index == 0 {
            return self.per_worker_exploration_base;
        }
        let exponent = 1.0 + self.per_worker_exploration_alpha * (index - 1) as f64 / (n - 1) as f64;
        self.per_worker_exploration_base.powf(exponent)
    }

    /// The DQN policy settings of evaluator `index`: its own constant ε,
    /// and TD errors computed where it samples.
    fn policy_config(&self, index: usize) -> DqnConfig {
        let eps = self.epsilon(index);
        DqnConfig {
            num_workers: self.num_workers,
            num_envs_per_worker: self.num_envs_per_worker,
            rollout_fragment_length: self.rollout_fragment_length,
            timesteps_per_iteration: self.timesteps_per_iteration,
            buffer_size: self.buffer_size,
            learning_starts: self.learning_starts,
            train_batch_size: self.train_batch_size,
            lr: self.lr,
            gamma: self.gamma,
            n_step: self.n_step,
            double_q: self.double_q,
            dueling: self.dueling,
            target_update_interval: self.target_update_interval,
            exploration_initial_eps: eps,
            exploration_final_eps: eps,
            prioritized_replay: self.prioritized_replay,
            prioritized_replay_alpha: self.prioritized_replay_alpha,
            prioritized_replay_beta: self.prioritized_replay_beta,
            final_prioritized_replay_beta: self.final_prioritized_replay_beta,
            prioritized_replay_beta_annealing_timesteps: self.prioritized_replay_beta_annealing_timesteps,
            prioritized_replay_eps: self.prioritized_replay_eps,
            worker_side_prioritization: self.prioritized_replay,
            grad_clip: self.grad_clip,
            model: self.model.clone(),
            env_config: self.env_config.clone(),
            seed: self.seed,
            device: self.device,
            restart: self.restart,
            env_shards: self.env_shards,
            ..DqnConfig::default()
        }
    }

    /// The optimizer's settings.
    fn replay(&self) -> AsyncReplayConfig {
        let prioritized = self.prioritized_replay.then_some(PrioritizedReplayConfig {
            alpha: self.prioritized_replay_alpha,
            beta: LinearSchedule {
                start: self.prioritized_replay_beta,
                end: self.final_prioritized_replay_beta,
                steps: self.prioritized_replay_beta_annealing_timesteps,
            },
            eps: self.prioritized_replay_eps,
        });
        AsyncReplayConfig {
            num_replay_shards: self.num_replay_shards,
            buffer_size: self.buffer_size,
            prioritized,
            learning_starts: self.learning_starts,
            train_batch_size: self.train_batch_size,
            training_intensity: self.training_intensity,
            max_weight_sync_delay: self.max_weight_sync_delay,
            learner_queue_size: self.learner_queue_size,
            timesteps_per_iteration: self.timesteps_per_iteration,
            shard_restart: self.shard_restart,
            seed: self.seed,
        }
    }
}

/// The DQN policy of evaluator `index` for the given spaces.
///
/// # Errors
/// As [`dqn::make_policy`].
pub fn make_policy(
    cfg: &ApexConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
    index: usize,
) -> Result<Box<dyn rlx::PolicyGraph>, BuildError> {
    dqn::make_policy(&cfg.policy_config(index), observation_space, action_space, rng_seed)
}

/// The execution plan: evaluators with their own ε sampling
/// `rollout_fragment_length` steps per batch, replay shards, and a learner
/// thread, driven by [`AsyncReplayOptimizer`].
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// or replay shard fails to start.
pub async fn build(make_env: EnvMaker, cfg: ApexConfig) -> Result<Trainer, BuildError> {
    let sampling = SamplingSettings {
        num_workers: cfg.num_workers,
        num_envs_per_worker: cfg.num_envs_per_worker,
        sample_size: cfg.rollout_fragment_length * cfg.num_envs_per_worker,
        observation_filter: ObservationFilter::NoFilter,
        seed: cfg.seed,
        restart: cfg.restart,
        env_shards: cfg.env_shards,
    };
    let policy_cfg = cfg.clone();
    let make = Arc::new(move |o: &Space, a: &Space, seed, index| make_policy(&policy_cfg, o, a, seed, index));
    let evaluators = spawn_evaluators(make_env, make, sampling).await?;
    // Initial weights depend only on the seed, so the learner starts where
    // the evaluators do.
    let local = evaluators.local().policy();
    let learner = make_policy(&cfg, &local.observation_space().clone(), &local.action_space().clone(), 0, 0)?;
    let optimizer = AsyncReplayOptimizer::new(evaluators, learner, cfg.replay())
        .await
        .map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(Box::new(optimizer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_evaluator_has_its_own_epsilon() {
        let cfg = ApexConfig { num_workers: 8, ..ApexConfig::default() };
        // The paper's schedule: 0.4 for the first, 0.4^8 for the last.
        assert!((cfg.epsilon(1) - 0.4).abs() < 1e-12);
        assert!((cfg.epsilon(8) - 0.4f64.powi(8)).abs() < 1e-12);
        let eps: Vec<f64> = (1..=8).map(|i| cfg.epsilon(i)).collect();
        assert!(eps.windows(2).all(|w| w[1] < w[0]), "{eps:?}");
        // ε is fixed per evaluator (no annealing) and TD errors are computed where it samples.
        let p = cfg.policy_config(8);
        assert_eq!(p.exploration_initial_eps, p.exploration_final_eps);
        assert!(p.worker_side_prioritization);
        let one = ApexConfig { num_workers: 1, ..ApexConfig::default() };
        assert_eq!(one.epsilon(1), 0.4);
    }

    #[test]
    fn bad_settings_name_the_key() {
        for (overrides, key) in [
            (serde_json::json!({"num_replay_shards": 0}), "num_replay_shards"),
            (serde_json::json!({"buffer_size": 1, "num_replay_shards": 2, "learning_starts": 1}), "buffer_size"),
            (serde_json::json!({"training_intensity": -1.0}), "training_intensity"),
            (serde_json::json!({"per_worker_exploration_base": 1.5}), "per_worker_exploration_base"),
            (serde_json::json!({"lr": 0.0}), "lr"),
            (serde_json::json!({"buffer_size": 5, "num_replay_shards": 2, "learning_starts": 5}), "learning_starts"),
            (
                serde_json::json!({"shard_restart": {"strategy": "one_for_all", "max_restarts": 1, "window_s": 1.0}}),
                "strategy",
            ),
        ] {
            let err = rlx::config::merge_json(&ApexConfig::default(), &overrides).map(|c: ApexConfig| c.validate());
            let msg = match err {
                Ok(Ok(())) => panic!("{overrides} was accepted"),
                Ok(Err(e)) | Err(e) => e.to_string(),
            };
            assert!(msg.contains(key), "{overrides}: {msg}");
        }
    }
}
