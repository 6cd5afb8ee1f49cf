//! # Using rlx from your own crate
//!
//! This crate depends on the `rlx` framework and nothing else from the rlx
//! repository. It brings its own implementation of each of rlx's three
//! traits and trains with them on two actor evaluators:
//!
//! 1. [`env`](mod@env): an [`rlx::Env`], the chain walk: walk right to the goal;
//! 2. [`policy`]: an [`rlx::PolicyGraph`], a linear softmax policy trained
//!    by REINFORCE, written with plain vectors;
//! 3. [`optimizer`]: an [`rlx::PolicyOptimizer`], gather–learn–broadcast,
//!    written with `rlx::operators`;
//!
//! and, in this file, the glue: an [`EvaluatorFactory`] that builds an
//! evaluator (a vector env plus a policy) for the driver and for each
//! worker, and [`build_trainer`], which spawns the workers as supervised
//! actors and hands the optimizer to an [`rlx::Trainer`]. `src/main.rs`
//! trains and prints one line per iteration; `tests/learns.rs` checks that
//! training beats the untrained (uniformly random) policy.
//!
//! Then rlx's built-in algorithms on envs of shapes nothing bundled with
//! rlx has ([`builtin`]): [`ring`] (7 observations, 5 actions) with PPO
//! and DQN, [`reach`] (3-d continuous actions) with PPO and SAC, and PPO
//! with a network of our own ([`network`]); `tests/builtin.rs` checks that
//! each learns.

pub mod builtin;
pub mod env;
pub mod network;
pub mod optimizer;
pub mod policy;
pub mod reach;
pub mod ring;

use env::ChainWalk;
use optimizer::GatherLearnBroadcast;
use policy::{LinearSoftmaxPolicy, PolicyConfig};
use rlx::evaluator::evaluator_seed;
use rlx::{
    fields, EpisodeSummary, EvaluatorError, EvaluatorFactory, Evaluators, HandleError, PolicyError, PolicyEvaluator,
    PolicyGraph, RestartPolicy, SampleBatch, Trainer, VectorEnv,
};
use std::sync::Arc;

/// Everything that defines a run. The defaults train in well under a
/// second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Cells of the chain walk; the agent starts in the middle one.
    pub cells: usize,
    /// Probability that a move goes the wrong way.
    pub slip: f64,
    /// The time limit: episodes are truncated after this many steps.
    pub max_episode_steps: usize,
    /// Worker evaluators, each a supervised actor sampling in parallel.
    pub num_workers: usize,
    /// Env copies each evaluator steps together.
    pub num_envs_per_worker: usize,
    /// Env steps each worker samples per iteration (all copies together).
    pub rollout_steps: usize,
    /// Discount factor of the returns.
    pub gamma: f32,
    /// Learning rate.
    pub lr: f32,
    /// The run's seed; every evaluator derives its own from it.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            cells: 9,
            slip: 0.1,
            max_episode_steps: 20,
            num_workers: 2,
            num_envs_per_worker: 2,
            rollout_steps: 200,
            gamma: 0.99,
            lr: 0.5,
            seed: 0,
        }
    }
}

/// Builds evaluator `index` for its `generation`-th start: `num_envs_per_worker`
/// time-limited chain walks in a [`VectorEnv`], and a fresh policy. Index 0
/// is the driver's evaluator, whose policy learns; workers count from 1.
///
/// Workers are built *inside* their actors by calling this factory, and built
/// again from it if one crashes and its supervisor restarts it, so the
/// factory is an `Arc<dyn Fn>` that captures only the (copyable) config.
/// The seed depends on index and generation, so no two evaluators, and no
/// restarted one, replay the same episodes.
pub fn evaluator_factory(config: Config) -> EvaluatorFactory {
    Arc::new(move |index, generation| {
        let seed = evaluator_seed(config.seed, index, generation);
        let envs = (0..config.num_envs_per_worker)
            .map(|_| ChainWalk::with_time_limit(config.cells, config.slip, config.max_episode_steps))
            .collect::<Result<Vec<_>, _>>()?;
        let env = VectorEnv::new(envs)?;
        let policy_config = PolicyConfig { gamma: config.gamma, lr: config.lr, seed };
        let policy =
            LinearSoftmaxPolicy::new(env.observation_space().clone(), env.action_space().clone(), policy_config)?;
        // Resets copy i of the env with `seed + i`.
        PolicyEvaluator::new(Box::new(policy), env, config.rollout_steps, seed)
    })
}

/// Spawns the driver's evaluator and `config.num_workers` worker actors, and
/// wraps them in our optimizer and an [`rlx::Trainer`]. Needs a Tokio runtime
/// (the workers are ractor actors).
///
/// # Errors
/// If an evaluator cannot be built; the error names which.
pub async fn build_trainer(config: Config) -> Result<Trainer, HandleError> {
    let evaluators = Evaluators::spawn(evaluator_factory(config), config.num_workers, RestartPolicy::default()).await?;
    Ok(Trainer::new(evaluators, Box::new(GatherLearnBroadcast)))
}

/// Plays at least `min_episodes` episodes on a fresh evaluator, sampling as
/// training does, with `weights`, or with none the untrained policy (all
/// weights zero: uniformly random), and returns the finished episodes.
///
/// # Errors
/// Weights of the wrong length, or a failing env or policy.
pub fn play(
    config: Config,
    weights: Option<&[f32]>,
    min_episodes: usize,
) -> Result<Vec<EpisodeSummary>, EvaluatorError> {
    // A seed apart from the training run's evaluators'.
    let mut evaluator = evaluator_factory(Config { seed: config.seed ^ 0xE7A1, ..config })(0, 0)?;
    if let Some(weights) = weights {
        evaluator.set_weights(weights)?;
    }
    let mut episodes = Vec::new();
    while episodes.len() < min_episodes {
        episodes.extend(evaluator.sample()?.episodes);
    }
    Ok(episodes)
}

/// Mean return of some episodes.
pub fn mean_return(episodes: &[EpisodeSummary]) -> f64 {
    episodes.iter().map(|e| e.episode_return).sum::<f64>() / episodes.len().max(1) as f64
}

/// The learner's policy as our own type, to look inside it.
///
/// The trainer holds it as a `dyn PolicyGraph`, which cannot be downcast
/// back to [`LinearSoftmaxPolicy`]; but the flat weights are the whole
/// policy, so a fresh copy with the same spaces and weights is the same
/// policy.
///
/// # Errors
/// The policy's error (none for a trainer from [`build_trainer`]).
pub fn learned_policy(trainer: &Trainer) -> Result<LinearSoftmaxPolicy, PolicyError> {
    let local = trainer.evaluators().local();
    let learner = local.policy();
    // Only for acting: the learning rate and discount are never used.
    let config = PolicyConfig { gamma: 0.0, lr: 0.0, seed: 0 };
    let mut policy =
        LinearSoftmaxPolicy::new(learner.observation_space().clone(), learner.action_space().clone(), config)?;
    policy.set_weights(&learner.get_weights())?;
    Ok(policy)
}

/// The policy's greedy action in each cell of the chain walk, drawn as
/// arrows, e.g. `→→→→→→→→G`. Asks through the `PolicyGraph` trait with
/// `explore = false`, one one-hot row per cell.
///
/// # Errors
/// The policy's error.
pub fn greedy_actions(policy: &mut LinearSoftmaxPolicy, cells: usize) -> Result<String, PolicyError> {
    let obs: Vec<f32> = (0..cells).flat_map(|cell| env::one_hot(cells, cell)).collect();
    let mut out = SampleBatch::new();
    policy.compute_actions(&obs, false, &mut out)?;
    let actions = out.i64(fields::ACTIONS)?;
    // The goal cell is never acted in: the episode ends on arrival.
    Ok(actions[..cells - 1].iter().map(|&a| if a == env::RIGHT { '→' } else { '←' }).chain(['G']).collect())
}
