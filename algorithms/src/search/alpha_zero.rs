//! # AlphaZero: self-play with tree search and a learned network
//!
//! Silver et al., "A general reinforcement learning algorithm that masters
//! chess, shogi, and Go through self-play", Science 2018 (and AlphaGo
//! Zero, Nature 2017). One network `f(s) = (p, v)` gives a prior over
//! moves and the value of the position for the player to move. Every move
//! of self-play is chosen by a tree search ([`super::mcts`]) guided by the
//! network; the search's visit counts `π` are a better policy than `p`,
//! and the game's outcome `z` a better value than `v`, so the network
//! learns both from the positions of finished games:
//!
//! ```text
//! L = −E[Σ_a π(a|s) · log p(a|s)]  +  c_v · E[(v(s) − z)²]
//! ```
//!
//! (`c_v` is `vf_loss_coeff`; the paper's L2 term is left to `lr` and the
//! network's size.)
//!
//! **Execution.** Self-play evaluators ([`super::self_play`]) are
//! ordinary supervised evaluators whose sampling is self-play, so they
//! run wherever a deployment puts evaluators: actors in this process,
//! actix threads (`"backend": "actix"`) or worker nodes (`"nodes"`). Each
//! iteration the driver sends them the current weights and each plays its
//! share of `games_per_iteration` games; an evaluator keeps
//! `games_in_flight` games going, their search leaves evaluated together,
//! and may split its games between its own thread and more search threads
//! (`num_search_workers` in all), each with a copy of the network (the
//! search's parallelism nested inside the evaluator). The positions go to
//! a replay of `replay_capacity` rows; the learner then takes
//! `num_sgd_steps` gradient steps on minibatches drawn from it. Every
//! `arena_interval` iterations the arena ([`super::arena`]) plays the
//! learner against fixed opponents and the results go to
//! `evaluation.arena`.
//!
//! The network is the actor-critic network of the policy-gradient family,
//! built from the `model` section for the game's observations (an MLP for
//! TicTacToe's 18 values, a CNN for ConnectFour's 6×7×2 board).
//!
//! Learner metrics: `policy_loss` (the cross-entropy with `π`), `vf_loss`,
//! `total_loss`, `grad_norm`, `replay_rows`, `self_play_s`,
//! `self_play_games_per_s`, `learn_s`, `mean_game_length`.

use super::arena::{self, Opponent};
use super::mcts::SearchSettings;
use super::self_play::{SelfPlaySampler, SelfPlaySettings, SelfPlayer};
use crate::common::build_context::BuildContext;
use crate::common::nested_worker::shares;
use crate::common::sections::{limits, ActorCriticLearner, Learning, OptimizerChoice, Sampling};
use crate::error::BuildError;
use crate::model::device::{DeviceSpec, NetDevice};
use crate::model::{ModelConfig, ModelSupport};
use crate::policy_gradient::actor_critic::{self, column, ActorCriticLoss, Forward, LossOutput};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, check_count, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::evaluation::EvaluationResult;
use rlx::evaluator::{evaluator_seed, EvaluatorFactory};
use rlx::game::Game;
use rlx::operators::{broadcast_weights, concat_rollouts, parallel_rollouts};
use rlx::optimizer::{OptimizerError, PolicyOptimizer, StepStats};
use rlx::replay::ReplayBuffer;
use rlx::{fields, Column, EnvShards, EpisodeSummary, Evaluators, HandleError, LearnerStats, PolicyError};
use rlx::{PolicyEvaluator, Rollout};
use rlx::{PolicyGraph, RestartPolicy, SampleBatch, Space, Trainer, VectorEnv};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

pub use super::self_play::SEARCH_POLICY;

/// AlphaZero's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct AlphaZeroConfig {
    /// Self-play evaluators; 0 plays in the driver.
    pub num_workers: usize,
    /// Threads each evaluator splits its games over, its own and more,
    /// each with a copy of the network (the search's nested parallelism);
    /// 0 or 1 plays them in the evaluator's own thread.
    pub num_search_workers: usize,
    /// Games each self-player keeps going at once: their leaves share one
    /// forward pass of the network.
    pub games_in_flight: usize,
    /// Whole self-play games per training iteration, over all evaluators.
    pub games_per_iteration: usize,
    /// Simulations of the search per move (self-play and arena).
    pub num_simulations: usize,
    /// `c_puct`: how strongly the prior and the visit counts steer the search.
    pub c_puct: f64,
    /// α of the Dirichlet noise on the root's prior in self-play (about
    /// 10 / the typical number of legal moves: 0.3 for chess in the paper).
    pub dirichlet_alpha: f64,
    /// ε, the noise's share of the root's prior (0: no noise).
    pub dirichlet_fraction: f64,
    /// Leaves each game's search selects, with virtual loss, per forward pass.
    pub leaf_batch: usize,
    /// τ of the first `temperature_moves` moves of a self-play game (moves
    /// drawn in proportion to `visits^(1/τ)`).
    pub temperature: f64,
    /// Moves of each self-play game played at `temperature`; later moves
    /// take the most visited.
    pub temperature_moves: usize,
    /// Positions the replay holds; the oldest leave first.
    pub replay_capacity: usize,
    /// Positions per gradient step, drawn uniformly from the replay.
    pub train_batch_size: usize,
    /// Gradient steps per iteration.
    pub num_sgd_steps: usize,
    /// Learning rate (Adam).
    pub lr: f64,
    /// Weight of the value loss.
    pub vf_loss_coeff: f64,
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// The network: `fcnet_hiddens`, `conv_filters`, `vf_share_layers`...
    /// (no LSTM: a position is the whole state).
    pub model: ModelConfig,
    /// Where the network lives: `"cpu"`, or `"cuda"` / `"cuda:N"`.
    pub device: DeviceSpec,
    /// Iterations between arena evaluations; 0: none.
    pub arena_interval: usize,
    /// Games against each opponent per arena evaluation, half in each seat.
    pub arena_games: usize,
    /// The arena's opponents: `random`, `mcts_<simulations>` (pure MCTS
    /// with random play-outs) and `minimax` (perfect play, for small games).
    pub arena_opponents: Vec<String>,
    /// Keyword arguments for the game (see `rlx list`).
    pub env_config: serde_json::Value,
    /// Seed of the network's initialization, self-play and the arena.
    pub seed: u64,
    /// How self-play evaluators are restarted after a failure (a search
    /// thread's failure is its evaluator's).
    pub restart: RestartPolicy,
}

impl Default for AlphaZeroConfig {
    fn default() -> Self {
        Self {
            num_workers: 2,
            num_search_workers: 0,
            games_in_flight: 16,
            games_per_iteration: 32,
            num_simulations: 100,
            c_puct: 1.5,
            dirichlet_alpha: 1.0,
            dirichlet_fraction: 0.25,
            leaf_batch: 8,
            temperature: 1.0,
            temperature_moves: 10,
            replay_capacity: 100_000,
            train_batch_size: 256,
            num_sgd_steps: 8,
            lr: 1e-3,
            vf_loss_coeff: 1.0,
            grad_clip: None,
            model: ModelConfig::default(),
            device: DeviceSpec::Cpu,
            arena_interval: 10,
            arena_games: 20,
            arena_opponents: vec!["random".into(), "mcts_100".into()],
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

/// The most simulations a move may take.
pub const MAX_SIMULATIONS: usize = 1_000_000;

impl Validate for AlphaZeroConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        check_count("num_workers", self.num_workers, 0, limits::MAX_WORKERS)?;
        check_count("num_search_workers", self.num_search_workers, 0, limits::MAX_WORKERS)?;
        check_count("games_in_flight", self.games_in_flight, 1, 1 << 16)?;
        check_count("games_per_iteration", self.games_per_iteration, 1, 1 << 20)?;
        check_count("num_simulations", self.num_simulations, 1, MAX_SIMULATIONS)?;
        check("c_puct", self.c_puct, self.c_puct > 0.0 && self.c_puct.is_finite(), "must be > 0")?;
        let alpha = self.dirichlet_alpha;
        check("dirichlet_alpha", alpha, alpha > 0.0 && alpha.is_finite(), "must be > 0")?;
        let eps = self.dirichlet_fraction;
        check("dirichlet_fraction", eps, (0.0..=1.0).contains(&eps), "must be in [0, 1]")?;
        check_count("leaf_batch", self.leaf_batch, 1, 1 << 16)?;
        let tau = self.temperature;
        check("temperature", tau, tau >= 0.0 && tau.is_finite(), "must be >= 0")?;
        check_count("replay_capacity", self.replay_capacity, 1, limits::MAX_BUFFER_SIZE)?;
        check_count("train_batch_size", self.train_batch_size, 1, limits::MAX_BATCH_ROWS)?;
        check_count("num_sgd_steps", self.num_sgd_steps, 0, 1 << 20)?;
        check("lr", self.lr, self.lr > 0.0 && self.lr.is_finite(), "must be > 0")?;
        check("vf_loss_coeff", self.vf_loss_coeff, self.vf_loss_coeff >= 0.0, "must be >= 0")?;
        if let Some(clip) = self.grad_clip {
            check("grad_clip", clip, clip > 0.0, "must be > 0 (or null)")?;
        }
        self.device.check_available()?;
        self.model.validate(ModelSupport { lstm: false, ..ModelSupport::all(Self::NAME) })?;
        check_count("arena_games", self.arena_games, 1, 1 << 20)?;
        for name in &self.arena_opponents {
            Opponent::parse(name).map_err(|message| ConfigError::Invalid { key: "arena_opponents".into(), message })?;
        }
        Ok(())
    }
}

algorithm_name!(AlphaZeroConfig, "AlphaZero");

impl AlphaZeroConfig {
    /// The search of self-play moves.
    pub fn search(&self) -> SearchSettings {
        SearchSettings {
            num_simulations: self.num_simulations,
            c_puct: self.c_puct as f32,
            dirichlet_alpha: self.dirichlet_alpha as f32,
            dirichlet_fraction: self.dirichlet_fraction as f32,
            leaf_batch: self.leaf_batch,
        }
    }

    fn self_play(&self) -> SelfPlaySettings {
        SelfPlaySettings {
            search: self.search(),
            temperature: self.temperature as f32,
            temperature_moves: self.temperature_moves,
            games_in_flight: self.games_in_flight,
        }
    }

    fn opponents(&self) -> Vec<Opponent> {
        self.arena_opponents.iter().filter_map(|n| Opponent::parse(n).ok()).collect()
    }
}

// ---------------------------------------------------------------- loss

/// AlphaZero's loss on the actor-critic network (see the module docs).
#[derive(Clone, Debug)]
pub struct AlphaZeroLoss {
    actor_critic: ActorCriticLearner,
    learning: Learning,
    sampling: Sampling,
}

impl AlphaZeroLoss {
    /// The loss and learner of `cfg`.
    pub fn new(cfg: &AlphaZeroConfig) -> Self {
        Self {
            actor_critic: ActorCriticLearner {
                lr: cfg.lr,
                vf_loss_coeff: cfg.vf_loss_coeff,
                entropy_coeff: 0.0,
                optimizer: OptimizerChoice::Adam,
            },
            learning: Learning { gamma: 1.0, grad_clip: cfg.grad_clip, model: cfg.model.clone(), device: cfg.device },
            sampling: Sampling { seed: cfg.seed, ..Sampling::default() },
        }
    }
}

impl ActorCriticLoss for AlphaZeroLoss {
    const NEEDS_LOG_PROBS: bool = true;
    const STANDARDIZES_ADVANTAGES: bool = false;

    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling) {
        (&self.actor_critic, &self.learning, &self.sampling)
    }

    /// Self-play rows arrive complete (`π` and `z`): nothing to add.
    fn postprocess(&self, _: &mut SampleBatch, _: f32) -> Result<(), PolicyError> {
        Ok(())
    }

    /// The cross-entropy of `p` with the search's `π`, plus the value's
    /// squared error against the outcome `z`.
    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        let Forward { values, rows, log_probs, .. } = fwd;
        let log_probs = log_probs.ok_or_else(|| PolicyError::Other("AlphaZero's loss needs log π(·|s)".into()))?;
        let pi = mb.f32(SEARCH_POLICY)?;
        let n = mb.len();
        let target = dev.tensor_from_vec(pi.to_vec(), (n, pi.len() / n.max(1)));
        let policy_loss = rows.mean((log_probs * target).sum::<(usize,), Axis<1>>()).negate();
        let z = column(dev, mb, fields::VALUE_TARGETS)?;
        let vf_loss = rows.mean((values - z).square());
        let mut stats = LearnerStats::default();
        stats.set("policy_loss", f64::from(policy_loss.as_vec()[0]));
        stats.set("vf_loss", f64::from(vf_loss.as_vec()[0]));
        Ok((policy_loss + vf_loss * self.actor_critic.vf_loss_coeff as f32, stats))
    }
}

/// An AlphaZero network for a game's spaces: the actor-critic network.
///
/// # Errors
/// A model that does not fit the spaces, or an action space that is not
/// one discrete choice.
pub fn make_policy(
    cfg: &AlphaZeroConfig,
    obs: &Space,
    act: &Space,
    seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    if !matches!(act, Space::Discrete { .. }) {
        return Err(BuildError::Unsupported(format!("AlphaZero's moves are one discrete choice, not {act}")));
    }
    actor_critic::make_policy(AlphaZeroConfig::NAME, &AlphaZeroLoss::new(cfg), obs, act, seed)
}

// ------------------------------------------------------- training step

/// The game `make_env` plays, for a tree search.
///
/// # Errors
/// An env that cannot be built, is not a game, or has other than two players.
pub fn game_of(make_env: &EnvMaker) -> Result<Box<dyn Game>, BuildError> {
    let env = make_env()?;
    let game = env.game().ok_or_else(|| {
        BuildError::Unsupported(format!(
            "AlphaZero searches games it can copy and play forward (rlx::game::Game, e.g. TicTacToe or \
             ConnectFour): `{}` is not one",
            env.name()
        ))
    })?;
    if game.num_players() != 2 {
        return Err(BuildError::Unsupported(format!(
            "AlphaZero plays two-player zero-sum games; {} has {} players",
            game.name(),
            game.num_players()
        )));
    }
    Ok(game)
}

/// Self-play, replay, learning and the arena (see the module docs).
pub struct AlphaZeroOptimizer {
    cfg: AlphaZeroConfig,
    game: Box<dyn Game>,
    replay: ReplayBuffer,
    rng: ChaCha8Rng,
    iterations: u64,
    evaluation: Option<EvaluationResult>,
}

impl AlphaZeroOptimizer {
    /// Self-play of this iteration's games with the learner's weights, on
    /// the self-play evaluators wherever they run (the driver's own when
    /// there are none): their positions, and one summary per game.
    async fn self_play(&self, evaluators: &Evaluators) -> Result<(SampleBatch, Vec<EpisodeSummary>), OptimizerError> {
        broadcast_weights(evaluators).await?;
        let rollouts = parallel_rollouts(evaluators).await?;
        let first = usize::from(evaluators.num_workers() > 0);
        for (i, (rollout, share)) in
            rollouts.iter().zip(shares(self.cfg.games_per_iteration, rollouts.len())).enumerate()
        {
            self.check(rollout, share.len()).map_err(|message| HandleError::Failed {
                index: first + i,
                source: rlx::EvaluatorError::Config(format!("its self-play: {message}")),
            })?;
        }
        Ok(concat_rollouts(rollouts)?)
    }

    /// What a self-play evaluator sent (from a node: untrusted): its share
    /// of the games, one row a move, and the search's policy and the
    /// outcome in the game's widths (the driver's checks of any reply
    /// cover the observations, the moves and finite numbers).
    fn check(&self, rollout: &Rollout, games: usize) -> Result<(), String> {
        if rollout.episodes.len() != games {
            return Err(format!("{} games where its share is {games}", rollout.episodes.len()));
        }
        let moves: u64 = rollout.episodes.iter().map(|e| e.length).sum();
        if moves != rollout.batch.len() as u64 {
            return Err(format!("{} rows for games of {moves} moves", rollout.batch.len()));
        }
        for (field, width) in [(SEARCH_POLICY, self.game.num_actions()), (fields::VALUE_TARGETS, 1)] {
            if !matches!(rollout.batch.get(field), Some(Column::F32 { width: w, .. }) if *w == width) {
                return Err(format!("`{field}` is not a column of {width} numbers a row"));
            }
        }
        Ok(())
    }

    /// `num_sgd_steps` gradient steps of the driver's network on
    /// minibatches drawn from the replay, once it holds a minibatch.
    fn learn(&mut self, evaluators: &mut Evaluators) -> Result<Vec<LearnerStats>, OptimizerError> {
        let mut all = Vec::with_capacity(self.cfg.num_sgd_steps);
        if self.replay.len() < self.cfg.train_batch_size.min(self.replay.capacity()) {
            return Ok(all);
        }
        let mut local = evaluators.local_mut();
        for _ in 0..self.cfg.num_sgd_steps {
            let minibatch = self.replay.sample(self.cfg.train_batch_size, &mut self.rng)?;
            all.push(local.policy_mut().learn_on_batch(&minibatch).map_err(rlx::EvaluatorError::Policy)?);
        }
        Ok(all)
    }

    /// The arena's evaluation of the driver's network.
    fn arena(&mut self, evaluators: &mut Evaluators) -> Result<EvaluationResult, OptimizerError> {
        let mut local = evaluators.local_mut();
        let mut rng = ChaCha8Rng::seed_from_u64(self.rng.gen());
        let (opponents, games) = (self.cfg.opponents(), self.cfg.arena_games);
        arena::evaluate(local.policy_mut(), self.game.as_ref(), &opponents, self.cfg.search(), games, &mut rng)
            .map_err(|e| rlx::EvaluatorError::Policy(e).into())
    }
}

#[rlx::async_trait]
impl PolicyOptimizer for AlphaZeroOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        self.iterations += 1;
        let t0 = Instant::now();
        let (positions, games) = self.self_play(evaluators).await?;
        let self_play_s = t0.elapsed().as_secs_f64();
        let moves = positions.len();
        self.replay.add(&positions)?;
        let t1 = Instant::now();
        let updates = self.learn(evaluators)?;
        let mut learner = LearnerStats::mean(&updates);
        learner.set("num_sgd_steps", updates.len() as f64);
        learner.set("replay_rows", self.replay.len() as f64);
        learner.set("self_play_s", self_play_s);
        learner.set("self_play_games_per_s", games.len() as f64 / self_play_s.max(1e-9));
        learner.set("learn_s", t1.elapsed().as_secs_f64());
        learner.set("mean_game_length", moves as f64 / games.len().max(1) as f64);
        if self.cfg.arena_interval > 0 && self.iterations.is_multiple_of(self.cfg.arena_interval as u64) {
            self.evaluation = Some(self.arena(evaluators)?);
        }
        let trained = (updates.len() * self.cfg.train_batch_size) as u64;
        Ok(StepStats { steps_sampled: moves as u64, steps_trained: trained, episodes: games, learner })
    }

    fn take_evaluation(&mut self) -> Option<EvaluationResult> {
        self.evaluation.take()
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec![
            "the replay of self-play positions is not saved: a restored run refills it".into(),
            "the self-play evaluators' random streams restart from their seeds and row counts".into(),
            "the arena's and the minibatches' random stream starts again from the seed".into(),
        ]
    }
}

/// AlphaZero's trainer: the driver's evaluator holds the learner's network
/// (for checkpoints, `rlx play` and the arena), and self-play runs on
/// `num_workers` evaluators wherever the context places them (actors in
/// this process, actix threads, worker nodes), or in the driver.
///
/// # Errors
/// An env that is not a two-player game, a model that does not fit it, or
/// an evaluator that fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: AlphaZeroConfig) -> Result<Trainer, BuildError> {
    let (evaluators, optimizer) = optimizer(&ctx, make_env, cfg).await?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

/// The evaluators and the optimizer [`build`] wraps.
///
/// # Errors
/// As [`build`].
pub async fn optimizer(
    ctx: &BuildContext,
    make_env: EnvMaker,
    cfg: AlphaZeroConfig,
) -> Result<(Evaluators, AlphaZeroOptimizer), BuildError> {
    let game = game_of(&make_env)?;
    let (obs, act) = (game.observation_space().clone(), Space::discrete(game.num_actions() as i64));
    make_policy(&cfg, &obs, &act, cfg.seed)?;
    let factory = self_play_evaluators(make_env, &cfg);
    let evaluators = Evaluators::spawn_placed(factory, cfg.num_workers, cfg.restart, ctx.placement.clone()).await?;
    let replay = ReplayBuffer::new(cfg.replay_capacity).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    let rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xA1FA_2E80);
    let optimizer = AlphaZeroOptimizer { cfg, game, replay, rng, iterations: 0, evaluation: None };
    Ok((evaluators, optimizer))
}

/// Builds evaluator `index` of the run: the network on a one-copy env of
/// the game, and, for the evaluators that sample (the workers, or the
/// driver's when there are none), self-play of its share of
/// `games_per_iteration` ([`SelfPlaySampler`]) over `num_search_workers`
/// search threads, seeded by its index and start.
fn self_play_evaluators(make_env: EnvMaker, cfg: &AlphaZeroConfig) -> EvaluatorFactory {
    let cfg = cfg.clone();
    let shares = shares(cfg.games_per_iteration, cfg.num_workers.max(1));
    let build_error = |e: BuildError| rlx::EvaluatorError::Config(e.to_string());
    Arc::new(move |index, generation| {
        let game = game_of(&make_env).map_err(build_error)?;
        let (obs, act) = (game.observation_space().clone(), Space::discrete(game.num_actions() as i64));
        let network = || make_policy(&cfg, &obs, &act, cfg.seed).map_err(build_error);
        let env = VectorEnv::build(make_env.clone(), 1, &EnvShards::default(), false)?;
        let seed = evaluator_seed(cfg.seed, index, generation);
        let evaluator = PolicyEvaluator::new(network()?, env, 1, seed)?;
        if index == 0 && cfg.num_workers > 0 {
            return Ok(evaluator);
        }
        let searchers = (1..cfg.num_search_workers).map(|_| network()).collect::<Result<_, _>>()?;
        let games = shares[index.saturating_sub(1)].len();
        let player = SelfPlayer::new(game, cfg.self_play());
        Ok(evaluator.with_sampler(Box::new(SelfPlaySampler::new(player, searchers, games, seed ^ 0x5E1F_B1A7))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::self_play::Positions;
    use rlx_envs::TicTacToe;

    /// One finished TicTacToe game of 5 moves as a self-play evaluator
    /// would send it.
    fn rollout() -> Rollout {
        let positions = Positions {
            obs: vec![0.0; 5 * 18],
            policy: vec![1.0 / 9.0; 5 * 9],
            actions: vec![0, 3, 1, 4, 2],
            outcomes: vec![1.0, -1.0, 1.0, -1.0, 1.0],
            games: Vec::new(),
        };
        let episodes = vec![EpisodeSummary { episode_return: 1.0, length: 5, truncated: false, agent: None }];
        Rollout { batch: positions.into_batch(&TicTacToe::new()).unwrap(), episodes, ..Rollout::default() }
    }

    #[test]
    fn a_self_play_reply_is_checked_against_its_share_and_the_games_widths() {
        let cfg = AlphaZeroConfig::default();
        let optimizer = AlphaZeroOptimizer {
            game: Box::new(TicTacToe::new()),
            replay: ReplayBuffer::new(10).unwrap(),
            rng: ChaCha8Rng::seed_from_u64(0),
            iterations: 0,
            evaluation: None,
            cfg,
        };
        assert_eq!(optimizer.check(&rollout(), 1), Ok(()));
        let err = optimizer.check(&rollout(), 2).unwrap_err();
        assert!(err.contains("1 games where its share is 2"), "{err}");
        let mut short = rollout();
        short.episodes[0].length = 7;
        assert!(optimizer.check(&short, 1).unwrap_err().contains("5 rows for games of 7 moves"));
        let mut wide = rollout();
        wide.batch.insert_f32(SEARCH_POLICY, vec![0.1; 5 * 10], 10).unwrap();
        let err = optimizer.check(&wide, 1).unwrap_err();
        assert!(err.contains("`search_policy` is not a column of 9 numbers a row"), "{err}");
    }
}
