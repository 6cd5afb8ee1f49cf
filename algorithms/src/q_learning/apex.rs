//! # Ape-X DQN
//!
//! Horgan et al., "Distributed Prioritized Experience Replay", ICLR 2018:
//! [DQN](crate::q_learning::dqn)'s policy (double Q, dueling head, n-step returns,
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

use crate::common::build_context::BuildContext;
use crate::common::sampling::spawn_evaluators;
use crate::common::sections::{limits, Learning, PrioritizedReplay, Replay, Sampling};
use crate::error::BuildError;
use crate::q_learning::dqn::{self, DqnConfig, QLearning};
use rlx::config::{check, check_count, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::optimizer::{AsyncReplayConfig, AsyncReplayOptimizer};
use rlx::replay::FrameLayout;
use rlx::{RestartPolicy, RestartStrategy, Space, Trainer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Ape-X DQN's configuration: DQN's sampling, replay, prioritized-replay
/// and Q-learning keys (the same sections, meaning the same), with a fixed
/// ε per evaluator instead of DQN's schedule, and the replay shards and
/// learner thread's own keys. Every key is optional in `--config`; unknown
/// keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct ApexConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Fragments (per batch sent to a shard), buffer (all shards together),
    /// minibatches, n-step returns.
    #[serde(flatten)]
    pub replay: Replay,
    /// Replay shard actors.
    pub num_replay_shards: usize,
    /// An evaluator gets the learner's weights after this many of its env
    /// steps.
    pub max_weight_sync_delay: usize,
    /// Replayed minibatches queued for the learner thread.
    pub learner_queue_size: usize,
    /// Prioritized replay (priorities computed by the evaluators).
    #[serde(flatten)]
    pub prioritized: PrioritizedReplay,
    /// The learning rate, double Q, dueling head and target network.
    #[serde(flatten)]
    pub q_learning: QLearning,
    /// ε of the most exploring evaluator (the paper's 0.4).
    pub per_worker_exploration_base: f64,
    /// How fast ε falls across evaluators (the paper's 7).
    pub per_worker_exploration_alpha: f64,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
    /// How replay shard actors are restarted after a failure (a restarted
    /// shard starts empty; its transitions are counted as lost).
    pub shard_restart: RestartPolicy,
}

impl Default for ApexConfig {
    fn default() -> Self {
        let dqn = DqnConfig::default();
        Self {
            sampling: Sampling { num_workers: 2, ..dqn.sampling },
            replay: Replay { rollout_fragment_length: 50, ..dqn.replay },
            num_replay_shards: 2,
            max_weight_sync_delay: 400,
            learner_queue_size: 4,
            prioritized: dqn.prioritized,
            q_learning: dqn.q_learning,
            per_worker_exploration_base: 0.4,
            per_worker_exploration_alpha: 7.0,
            learning: dqn.learning,
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
        check_count("num_replay_shards", self.num_replay_shards, 1, limits::MAX_WORKERS)?;
        positive("max_weight_sync_delay", self.max_weight_sync_delay)?;
        check_count("learner_queue_size", self.learner_queue_size, 1, limits::MAX_QUEUED_BATCHES)?;
        let (shards, size) = (self.num_replay_shards, self.replay.buffer_size);
        check("buffer_size", size, size >= shards, "must hold at least one transition per replay shard")?;
        let room = size / shards * shards;
        let ls = self.replay.learning_starts;
        check("learning_starts", ls, ls <= room, "must fit in the shards (buffer_size / num_replay_shards each)")?;
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
        let n = self.sampling.num_workers;
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
            sampling: self.sampling.clone(),
            replay: self.replay.clone(),
            prioritized: self.prioritized.clone(),
            q_learning: self.q_learning.clone(),
            exploration_initial_eps: eps,
            exploration_final_eps: eps,
            exploration_timesteps: DqnConfig::default().exploration_timesteps,
            worker_side_prioritization: self.prioritized.prioritized_replay,
            min_q_weight: 0.0,
            learning: self.learning.clone(),
        }
    }

    /// The optimizer's settings, with frame sharing of `frames`.
    fn replay(&self, frames: Option<FrameLayout>) -> AsyncReplayConfig {
        AsyncReplayConfig {
            num_replay_shards: self.num_replay_shards,
            buffer_size: self.replay.buffer_size,
            prioritized: self.prioritized.config(),
            learning_starts: self.replay.learning_starts,
            train_batch_size: self.replay.train_batch_size,
            training_intensity: self.replay.training_intensity,
            max_weight_sync_delay: self.max_weight_sync_delay,
            learner_queue_size: self.learner_queue_size,
            timesteps_per_iteration: self.replay.timesteps_per_iteration,
            shard_restart: self.shard_restart,
            seed: self.sampling.seed,
            frames,
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

algorithm_name!(ApexConfig, "APEX");

/// The execution plan: evaluators with their own ε sampling
/// `rollout_fragment_length` steps per batch, replay shards, and a learner
/// thread, driven by [`AsyncReplayOptimizer`].
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// or replay shard fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: ApexConfig) -> Result<Trainer, BuildError> {
    let sampling = cfg.replay.settings(&cfg.sampling);
    let policy_cfg = cfg.clone();
    let make = Arc::new(move |o: &Space, a: &Space, seed, index| make_policy(&policy_cfg, o, a, seed, index));
    let evaluators = spawn_evaluators(&ctx, make_env, make, sampling).await?;
    // Initial weights depend only on the seed, so the learner starts where
    // the evaluators do.
    let (obs, act) = evaluators.local().spaces();
    let learner = make_policy(&cfg, &obs, &act, 0, 0)?;
    let replay = cfg.replay(dqn::frame_layout(&evaluators.local()));
    let optimizer =
        AsyncReplayOptimizer::new(learner, replay).await.map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_evaluator_has_its_own_epsilon() {
        let cfg = ApexConfig { sampling: Sampling { num_workers: 8, ..Sampling::default() }, ..ApexConfig::default() };
        // The paper's schedule: 0.4 for the first, 0.4^8 for the last.
        assert!((cfg.epsilon(1) - 0.4).abs() < 1e-12);
        assert!((cfg.epsilon(8) - 0.4f64.powi(8)).abs() < 1e-12);
        let eps: Vec<f64> = (1..=8).map(|i| cfg.epsilon(i)).collect();
        assert!(eps.windows(2).all(|w| w[1] < w[0]), "{eps:?}");
        // ε is fixed per evaluator (no annealing) and TD errors are computed where it samples.
        let p = cfg.policy_config(8);
        assert_eq!(p.exploration_initial_eps, p.exploration_final_eps);
        assert!(p.worker_side_prioritization);
        let one = ApexConfig { sampling: Sampling { num_workers: 1, ..Sampling::default() }, ..ApexConfig::default() };
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
