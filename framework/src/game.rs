//! Perfect-information games for tree search: the [`Game`] trait (and
//! [`crate::game_env::GameEnv`], which makes any game a multi-agent env).
//!
//! A tree search (AlphaZero's MCTS) needs what an env does not give: a
//! state it can copy and play forward without touching the episode, the
//! legal moves, whose turn it is, and each player's value at the end. A
//! [`Game`] is that state. The same type is an env for every other
//! algorithm through `GameEnv` (one agent per player, turns, the legal
//! moves as the action mask), so a board game is written once and serves
//! PPO's self-play and AlphaZero alike.
//!
//! Games here have no chance moves and no hidden information: a state
//! and a move give the next state.
//!
//! ```
//! use rlx::game::{Game, GameError};
//! use rlx::{GameEnv, MultiAgentEnv, Space};
//!
//! /// Nim with one heap of 5: take 1 or 2; whoever takes the last wins.
//! #[derive(Clone)]
//! struct Nim { left: u32, to_move: usize, space: Space }
//!
//! impl Game for Nim {
//!     fn name(&self) -> &str { "Nim" }
//!     fn num_actions(&self) -> usize { 2 }
//!     fn observation_space(&self) -> &Space { &self.space }
//!     fn observe(&self, _: usize, out: &mut [f32]) { out[0] = self.left as f32 / 5.0 }
//!     fn reset(&mut self) { (self.left, self.to_move) = (5, 0) }
//!     fn to_move(&self) -> usize { self.to_move }
//!     fn is_legal(&self, a: usize) -> bool { a < 2 && (a as u32) < self.left }
//!     fn play(&mut self, a: usize) -> Result<(), GameError> {
//!         if !self.is_legal(a) {
//!             return Err(rlx::game::illegal(self, a, "more than is left"));
//!         }
//!         self.left -= a as u32 + 1;
//!         if self.left > 0 { self.to_move = 1 - self.to_move }
//!         Ok(())
//!     }
//!     fn terminal_value(&self, player: usize) -> Option<f32> {
//!         (self.left == 0).then(|| if player == self.to_move { 1.0 } else { -1.0 })
//!     }
//!     fn boxed_clone(&self) -> Box<dyn Game> { Box::new(self.clone()) }
//!     fn render(&self) -> String { format!("{} left", self.left) }
//! }
//!
//! let nim = Nim { left: 5, to_move: 0, space: Space::uniform_box(0.0, 1.0, vec![1]).unwrap() };
//! let mut env = GameEnv::new(nim);
//! assert_eq!(env.agent_ids(), ["player_0", "player_1"]);
//! let mut obs = vec![vec![0.0]; 2];
//! env.reset(None, &mut obs).unwrap();
//! assert!(env.acting(0) && !env.acting(1));
//! assert!(env.game().is_some(), "a game env hands its game to a tree search");
//! ```

use crate::space::Space;

/// Why a game refused a move or a saved position.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GameError {
    /// The move is not legal in the position.
    #[error("{game}: move {action} by player_{player} is illegal here ({why})")]
    Illegal {
        /// The game's name.
        game: String,
        /// The move, as a person types it.
        action: String,
        /// The player to move.
        player: usize,
        /// Why (e.g. "the column is full").
        why: String,
    },
    /// The game is over: no move is legal.
    #[error("{game}: the game is over; reset it first")]
    Over {
        /// The game's name.
        game: String,
    },
    /// A saved position that is not one of this game's.
    #[error("{game}: not a saved position: {why}")]
    BadState {
        /// The game's name.
        game: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A state of a turn-based, perfect-information game without chance
/// moves (see the module docs). Players are numbered `0..num_players()`;
/// moves are `0..num_actions()`, of which [`is_legal`](Game::is_legal)
/// says which are allowed now.
pub trait Game: Send + Sync + 'static {
    /// The game's name, for messages.
    fn name(&self) -> &str;

    /// How many players take turns (2 by default).
    fn num_players(&self) -> usize {
        2
    }

    /// How many moves there are in all, legal or not.
    fn num_actions(&self) -> usize;

    /// What [`observe`](Game::observe) writes: the same for every player.
    fn observation_space(&self) -> &Space;

    /// The state as `player` sees it, into `out` (the observation space's
    /// flat size): for a network, usually the board from that player's
    /// side, its own pieces first.
    fn observe(&self, player: usize, out: &mut [f32]);

    /// Back to the opening position.
    fn reset(&mut self);

    /// The player whose move it is (the last mover once the game is over).
    fn to_move(&self) -> usize;

    /// Whether `action` is a legal move now (never once the game is over).
    fn is_legal(&self, action: usize) -> bool;

    /// The legal moves now, ascending.
    fn legal_actions(&self) -> Vec<usize> {
        (0..self.num_actions()).filter(|&a| self.is_legal(a)).collect()
    }

    /// Plays `action` for the player to move.
    ///
    /// # Errors
    /// [`GameError::Illegal`] (see [`illegal`]) for a move that is not
    /// legal now, saying why, or [`GameError::Over`]; the state is
    /// unchanged.
    fn play(&mut self, action: usize) -> Result<(), GameError>;

    /// `player`'s value of the finished game (+1 a win, −1 a loss, 0 a
    /// draw for the games here), or `None` while it goes on.
    fn terminal_value(&self, player: usize) -> Option<f32>;

    /// Whether the game is over.
    fn is_terminal(&self) -> bool {
        self.terminal_value(0).is_some()
    }

    /// A copy of this state, to search from.
    fn boxed_clone(&self) -> Box<dyn Game>;

    /// The position as text, for a person (`rlx play`).
    fn render(&self) -> String;

    /// The position as a picture, for videos (see
    /// [`Env::render_rgb`](crate::Env::render_rgb)), or `None` (the
    /// default).
    fn render_rgb(&self) -> Option<crate::video::Frame> {
        None
    }

    /// What a person types for `action` (by default its number).
    fn action_name(&self, action: usize) -> String {
        action.to_string()
    }

    /// The move a person typed, if it names one (by default a number).
    fn parse_action(&self, text: &str) -> Option<usize> {
        text.trim().parse().ok().filter(|&a| a < self.num_actions())
    }

    /// A snapshot of the position (for checkpoints that resume exactly, and
    /// as the key of a table of positions), or `None` (the default).
    fn save_state(&self) -> Option<Vec<u8>> {
        None
    }

    /// Restores what [`save_state`](Game::save_state) saved.
    ///
    /// # Errors
    /// A snapshot of another game; the default refuses every one.
    fn load_state(&mut self, state: &[u8]) -> Result<(), GameError> {
        let _ = state;
        Err(GameError::BadState { game: self.name().into(), why: "this game cannot restore one".into() })
    }
}

/// How a two-player game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// This player won.
    Win(usize),
    /// Nobody did.
    Draw,
}

impl Ending {
    /// `player`'s value of it: +1 for the winner, −1 for the loser, 0 for
    /// a draw (what [`Game::terminal_value`] answers).
    pub fn value(self, player: usize) -> f32 {
        match self {
            Self::Draw => 0.0,
            Self::Win(w) if w == player => 1.0,
            Self::Win(_) => -1.0,
        }
    }

    /// The ending after `mover`'s move: a win if it `won`, a draw if the
    /// board is `full`, else none (the game goes on).
    pub fn after_move(mover: usize, won: bool, full: bool) -> Option<Self> {
        match (won, full) {
            (true, _) => Some(Self::Win(mover)),
            (false, true) => Some(Self::Draw),
            (false, false) => None,
        }
    }
}

/// The error for an illegal `action` in `game`, saying `why`.
pub fn illegal(game: &(impl Game + ?Sized), action: usize, why: &str) -> GameError {
    GameError::Illegal {
        game: game.name().into(),
        action: game.action_name(action),
        player: game.to_move(),
        why: why.into(),
    }
}
