//! Self-play with search: a [`SelfPlayer`] plays whole games against
//! itself, many at once, searching every move with the network as the
//! leaf evaluator (the leaves of all its games in one forward pass), and
//! records each position with the search's policy and, once the game is
//! over, its outcome for the player who was to move.
//!
//! A [`SelfPlaySampler`] makes self-play an evaluator's way of sampling
//! ([`rlx::evaluator::Sampler`]), so self-play evaluators are placed,
//! supervised, sent weights and restored like any other evaluator: in
//! this process, as actix threads or on worker nodes. Each evaluator plays
//! its games itself or splits them over search threads of its own, each
//! with a copy of the network: the search's parallelism nested inside the
//! self-play evaluator (the seed paper's example of a worker delegating
//! to sub-workers).

use super::mcts::{search, NetworkPrior, SearchSettings, Tree};
use crate::common::nested_worker::shares;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::evaluator::{EvaluatorError, Sampler};
use rlx::game::Game;
use rlx::sample_batch::BatchError;
use rlx::{fields, Column, EpisodeSummary, PolicyError, PolicyGraph, Rollout, SampleBatch};

/// The column of the search's policy `π` in training batches.
pub const SEARCH_POLICY: &str = "search_policy";

/// How self-play games are played.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelfPlaySettings {
    /// The search of every move (with root noise).
    pub search: SearchSettings,
    /// τ of the first [`temperature_moves`](Self::temperature_moves) moves
    /// of a game: moves are drawn in proportion to `N^(1/τ)`.
    pub temperature: f32,
    /// Moves played at `temperature`; the rest take the most visited.
    pub temperature_moves: usize,
    /// Games each player keeps going at once (their leaves share a forward
    /// pass).
    pub games_in_flight: usize,
}

/// Positions from finished games: the training rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Positions {
    /// The position as the player to move saw it, row after row.
    pub obs: Vec<f32>,
    /// The search's policy (visit counts normalized), `num_actions` a row.
    pub policy: Vec<f32>,
    /// The move played.
    pub actions: Vec<i64>,
    /// The game's outcome for the player to move: +1, 0 or −1.
    pub outcomes: Vec<f32>,
    /// One summary per game: its return for `player_0` and its length.
    pub games: Vec<EpisodeSummary>,
}

impl Positions {
    /// Rows held.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The rows as a training batch: `obs`, the search's policy
    /// ([`SEARCH_POLICY`]), `actions` and the outcomes (`value_targets`),
    /// with the widths of `game`'s observations and moves.
    ///
    /// # Errors
    /// Rows of other widths.
    pub fn into_batch(self, game: &dyn Game) -> Result<SampleBatch, BatchError> {
        let mut batch = SampleBatch::new();
        batch.insert_f32(fields::OBS, self.obs, game.observation_space().flat_dim())?;
        batch.insert_f32(SEARCH_POLICY, self.policy, game.num_actions())?;
        batch.insert(fields::ACTIONS, Column::I64 { data: self.actions, width: 1 })?;
        batch.insert_f32(fields::VALUE_TARGETS, self.outcomes, 1)?;
        Ok(batch)
    }

    /// Appends `other`'s rows and games.
    pub fn append(&mut self, other: Positions) {
        self.obs.extend(other.obs);
        self.policy.extend(other.policy);
        self.actions.extend(other.actions);
        self.outcomes.extend(other.outcomes);
        self.games.extend(other.games);
    }
}

/// A game in progress and its rows so far.
struct Playing {
    tree: Tree,
    moves: usize,
    rows: Positions,
    /// The player to move at each row.
    players: Vec<usize>,
}

impl Playing {
    fn new(game: &dyn Game, settings: SearchSettings) -> Self {
        Self {
            tree: Tree::new(game.boxed_clone(), settings),
            moves: 0,
            rows: Positions::default(),
            players: Vec::new(),
        }
    }

    /// Records the searched position (as its player to move sees it, in
    /// `obs`) with the search's policy, then plays a move drawn at `tau`.
    /// Returns whether that ended the game.
    fn record_and_move(&mut self, tau: f32, obs: &mut [f32], rng: &mut impl Rng) -> Result<bool, EvaluatorError> {
        let position = self.tree.position();
        let player = position.to_move();
        position.observe(player, obs);
        let action = self.tree.choose(tau, rng);
        self.rows.obs.extend_from_slice(obs);
        self.rows.policy.extend(self.tree.policy());
        self.rows.actions.push(action as i64);
        self.players.push(player);
        self.tree.play(action, rng).map_err(|e| EvaluatorError::Policy(PolicyError::Other(e.to_string())))?;
        self.moves += 1;
        Ok(self.tree.position().is_terminal())
    }

    /// The rows of a finished game, each with the outcome for its player
    /// to move, and the game's summary.
    fn finish(mut self) -> Positions {
        let end = self.tree.position();
        let value = |player: usize| end.terminal_value(player).unwrap_or(0.0);
        self.rows.outcomes = self.players.iter().map(|&p| value(p)).collect();
        self.rows.games.push(EpisodeSummary {
            episode_return: f64::from(value(0)),
            length: self.moves as u64,
            truncated: false,
            agent: None,
        });
        self.rows
    }
}

/// Plays self-play games with a network and a search (see the module docs).
pub struct SelfPlayer {
    game: Box<dyn Game>,
    settings: SelfPlaySettings,
}

impl SelfPlayer {
    /// Plays `game` from its opening.
    pub fn new(game: Box<dyn Game>, settings: SelfPlaySettings) -> Self {
        Self { game, settings }
    }

    /// Plays `games` whole games with `policy`'s network as the search's
    /// leaf evaluator, drawing from `seed`.
    ///
    /// # Errors
    /// The network's error.
    pub fn play(&self, policy: &mut dyn PolicyGraph, games: usize, seed: u64) -> Result<Positions, EvaluatorError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (game, search_settings) = (self.game.as_ref(), self.settings.search);
        let mut out = Positions::default();
        let mut started = games.min(self.settings.games_in_flight.max(1));
        let mut playing: Vec<Playing> = (0..started).map(|_| Playing::new(game, search_settings)).collect();
        let mut obs = vec![0.0; game.observation_space().flat_dim()];
        while !playing.is_empty() {
            let mut trees: Vec<&mut Tree> = playing.iter_mut().map(|p| &mut p.tree).collect();
            search(&mut trees, &mut NetworkPrior::new(policy), &mut rng)?;
            let mut i = 0;
            while i < playing.len() {
                let p = &mut playing[i];
                let tau = if p.moves < self.settings.temperature_moves { self.settings.temperature } else { 0.0 };
                if !p.record_and_move(tau, &mut obs, &mut rng)? {
                    i += 1;
                    continue;
                }
                out.append(playing.swap_remove(i).finish());
                if started < games {
                    playing.push(Playing::new(game, search_settings));
                    started += 1;
                }
            }
        }
        Ok(out)
    }
}

/// Self-play as an evaluator's sampling ([`Sampler`]): each call plays the
/// evaluator's share of an iteration's games with the evaluator's network,
/// in the evaluator's own thread or split between it and more search
/// threads, each with its own copy of the network (the search's
/// parallelism nested inside the evaluator).
pub struct SelfPlaySampler {
    player: SelfPlayer,
    /// The copies of the network of the search threads beside the
    /// evaluator's own; none: the evaluator searches alone.
    searchers: Vec<Box<dyn PolicyGraph>>,
    /// Whole games per call.
    games: usize,
    seed: u64,
    rng: ChaCha8Rng,
}

impl SelfPlaySampler {
    /// Plays `games` games a call with `player`, split between the
    /// evaluator's thread and one more thread per network in `searchers`
    /// (copies that get the evaluator's weights before each call), drawing
    /// from `seed`.
    pub fn new(player: SelfPlayer, searchers: Vec<Box<dyn PolicyGraph>>, games: usize, seed: u64) -> Self {
        Self { player, searchers, games, seed, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// The games split over the evaluator's thread (with its own network)
    /// and the search threads in shares that differ by at most one, each
    /// share with a seed drawn from `seed`, joined in that order (so the
    /// rows do not depend on which thread finishes first). A thread that
    /// panics panics the evaluator, whose supervisor restarts it.
    fn play_split(&mut self, policy: &mut dyn PolicyGraph, seed: u64) -> Result<Positions, EvaluatorError> {
        let weights = policy.get_weights();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let parts: Vec<(usize, u64)> =
            shares(self.games, self.searchers.len() + 1).into_iter().map(|s| (s.len(), rng.gen())).collect();
        let (player, weights) = (&self.player, &weights);
        let (own, answers) = std::thread::scope(|scope| {
            let running: Vec<_> = self
                .searchers
                .iter_mut()
                .zip(parts[1..].iter().copied())
                .map(|(network, (games, seed))| {
                    scope.spawn(move || {
                        network.set_weights(weights)?;
                        player.play(network.as_mut(), games, seed)
                    })
                })
                .collect();
            let own = player.play(policy, parts[0].0, parts[0].1);
            let answers: Vec<Result<Positions, EvaluatorError>> = running
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect();
            (own, answers)
        });
        let mut out = own?;
        for answer in answers {
            out.append(answer?);
        }
        Ok(out)
    }
}

impl Sampler for SelfPlaySampler {
    /// This call's games, as rows (see [`Positions::into_batch`]) and one
    /// episode per game.
    fn sample(&mut self, policy: &mut dyn PolicyGraph) -> Result<Rollout, EvaluatorError> {
        let seed = self.rng.gen();
        let mut positions = if self.searchers.is_empty() {
            self.player.play(policy, self.games, seed)?
        } else {
            self.play_split(policy, seed)?
        };
        let episodes = std::mem::take(&mut positions.games);
        let batch = positions.into_batch(self.player.game.as_ref()).map_err(|e| EvaluatorError::Policy(e.into()))?;
        Ok(Rollout { batch, episodes, ..Rollout::default() })
    }

    /// A new stream for the draws after the snapshot, from the rows
    /// sampled before it.
    fn restored(&mut self, steps_sampled: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(self.seed ^ steps_sampled);
    }
}
