//! Self-play with search: a [`SelfPlayer`] plays whole games against
//! itself, many at once, searching every move with the network as the
//! leaf evaluator (the leaves of all its games in one forward pass), and
//! records each position with the search's policy and, once the game is
//! over, its outcome for the player who was to move.
//!
//! A [`SelfPlayWorker`] actor (a [`NestedWorker`]) runs one, or splits its
//! games over child workers it supervises: the search's parallelism nested inside the
//! self-play evaluator (the seed paper's example of a worker delegating
//! to sub-workers).

use super::mcts::{search, NetworkPrior, SearchSettings, Tree};
use crate::common::nested_worker::{shares, NestedWorker, Work};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::evaluator::EvaluatorError;
use rlx::game::Game;
use rlx::{EpisodeSummary, PolicyError, PolicyGraph};
use std::sync::Arc;

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
    policy: Box<dyn PolicyGraph>,
    game: Box<dyn Game>,
    settings: SelfPlaySettings,
}

impl SelfPlayer {
    /// Plays `game` (from its opening) with `policy`'s network.
    pub fn new(policy: Box<dyn PolicyGraph>, game: Box<dyn Game>, settings: SelfPlaySettings) -> Self {
        Self { policy, game, settings }
    }

    /// Plays `games` whole games with `weights`, drawing from `seed`.
    ///
    /// # Errors
    /// Weights of the wrong length, or the network's error.
    pub fn play(&mut self, weights: &[f32], games: usize, seed: u64) -> Result<Positions, EvaluatorError> {
        self.policy.set_weights(weights)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (game, search_settings) = (self.game.as_ref(), self.settings.search);
        let mut out = Positions::default();
        let mut started = games.min(self.settings.games_in_flight.max(1));
        let mut playing: Vec<Playing> = (0..started).map(|_| Playing::new(game, search_settings)).collect();
        let mut obs = vec![0.0; game.observation_space().flat_dim()];
        while !playing.is_empty() {
            let mut trees: Vec<&mut Tree> = playing.iter_mut().map(|p| &mut p.tree).collect();
            search(&mut trees, &mut NetworkPrior::new(self.policy.as_mut()), &mut rng)?;
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

/// Builds a [`SelfPlayer`]'s network and game (in the actor that owns them).
pub type SelfPlayerMaker = Arc<dyn Fn() -> Result<SelfPlayer, EvaluatorError> + Send + Sync>;

/// A request to a self-play worker: games to play with these weights.
#[derive(Clone, Debug)]
pub struct PlayRequest {
    /// The network's weights.
    pub weights: Arc<Vec<f32>>,
    /// Whole games to play.
    pub games: usize,
    /// Seeds the search's noise and the moves drawn.
    pub seed: u64,
}

impl Work for SelfPlayer {
    type Spec = SelfPlayerMaker;
    type Request = PlayRequest;
    type Answer = Positions;
    const CHILD: &'static str = "AlphaZero search worker";

    fn build(make: &SelfPlayerMaker) -> Result<Self, EvaluatorError> {
        make()
    }

    fn run(&mut self, r: &PlayRequest) -> Result<Positions, EvaluatorError> {
        self.play(&r.weights, r.games, r.seed)
    }

    /// Shares of the games that differ by at most one, each with a seed
    /// drawn from the request's.
    fn split(r: &PlayRequest, n: usize) -> Vec<PlayRequest> {
        let mut rng = ChaCha8Rng::seed_from_u64(r.seed);
        let shares = shares(r.games, n);
        shares
            .into_iter()
            .map(|s| PlayRequest { weights: r.weights.clone(), games: s.len(), seed: rng.gen() })
            .collect()
    }

    fn join(answers: Vec<Positions>) -> Positions {
        let mut out = Positions::default();
        answers.into_iter().for_each(|a| out.append(a));
        out
    }
}

/// A self-play actor: plays itself, or splits its games over children
/// (a [`NestedWorker`]).
pub type SelfPlayWorker = NestedWorker<SelfPlayer>;
