//! MinAtar (Young & Tian 2019): miniature Atari games on a 10×10 grid,
//! matching the `minatar` 1.0.15 package step for step.
//!
//! Each game is a [`Game`]; [`MinAtar`] wraps it the way the package's
//! `minatar.Environment` and its Gymnasium wrapper `minatar.gym.BaseEnv` do,
//! with the settings of the `MinAtar/<Game>-v1` registrations:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, C], uint8)`, binary (0.0 or 1.0, kept as bytes 0 and 255 in batches and replay): `env.state()` flattened row-major, index `(row * 10 + col) * C + channel` |
//! | action | `Discrete(n)`: the game's minimal action set (`use_minimal_action_set=True`), mapped to MinAtar's 6 actions `n l u r d f` |
//! | sticky actions | before every step, with probability 0.1 (`rand() < 0.1`) the previous step's action is repeated instead |
//! | difficulty ramping | on (the package default); Space Invaders, Asterix and Seaquest ramp |
//! | reward, termination | as the game (see [`asterix`], [`breakout`], [`freeway`], [`seaquest`], [`space_invaders`]) |
//! | truncation | none: the package registers no `max_episode_steps` |
//! | reset | `reset(Some(seed))` seeds NumPy's `RandomState(seed)`; `reset(None)` continues the stream |
//!
//! Randomness comes from [`mt19937::Mt19937`], a bit-exact copy of NumPy's
//! legacy `RandomState`, so a seeded episode reproduces the package's own
//! (`gymnasium.make("MinAtar/Breakout-v1").reset(seed=s)`) exactly. As in the
//! package, one generator serves both the sticky actions and the game, and
//! the "previous action" of the sticky actions is *not* cleared by a reset
//! (it starts as action 0, no-op). Before the first seeded reset the
//! generator is seeded with 0 (the package would use fresh OS entropy).
//! Seeds of 2³² and above, which NumPy rejects, are handled as
//! [`Mt19937::from_u64_seed`] says.

pub mod asterix;
pub mod breakout;
pub mod freeway;
pub mod mt19937;
pub mod seaquest;
pub mod space_invaders;

pub use asterix::AsterixGame;
pub use breakout::BreakoutGame;
pub use freeway::FreewayGame;
pub use mt19937::Mt19937;
pub use seaquest::SeaquestGame;
pub use space_invaders::SpaceInvadersGame;

use rlx::env::{decode_state, encode_state, invalid_action, EnvState};
use rlx::video::{Canvas, Frame};
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

/// Side of MinAtar's square grid.
pub const GRID: usize = 10;

/// The probability of repeating the previous action (the package default).
pub const DEFAULT_STICKY_ACTION_PROB: f64 = 0.1;

/// MinAtar's full action set, by index: no-op, left, up, right, down, fire.
pub const ACTION_NAMES: [char; 6] = ['n', 'l', 'u', 'r', 'd', 'f'];

/// MinAtar's full action index of "left".
pub(crate) const LEFT: usize = 1;
/// MinAtar's full action index of "right".
pub(crate) const RIGHT: usize = 3;
/// MinAtar's full action index of "fire".
pub(crate) const FIRE: usize = 5;

/// The dynamics of one MinAtar game, without sticky actions: what the
/// package's `minatar.environments.<game>.Env` does. A game's serde form
/// is its whole state: [`MinAtar`] saves and restores it in checkpoints.
pub trait Game: Send + Serialize + DeserializeOwned + Debug {
    /// The registered name, e.g. `"MinAtar/Breakout-v1"`.
    const NAME: &'static str;
    /// Number of observation channels C.
    const CHANNELS: usize;
    /// The minimal action set: full action indices (0..6, see
    /// [`ACTION_NAMES`]) in the order of the `Discrete` action space.
    const MINIMAL_ACTIONS: &'static [usize];

    /// A game in its start state; `difficulty_ramping` is the package's
    /// `ramping` argument (ignored by games that do not ramp). Draws no
    /// random numbers: [`Game::reset`] must be called before acting.
    fn new(difficulty_ramping: bool) -> Self;

    /// Starts a new episode, drawing from `rng` exactly as the package does.
    fn reset(&mut self, rng: &mut Mt19937);

    /// Applies a full action (0..6) and returns the reward and whether the
    /// game is over, as the package's `act`.
    fn act(&mut self, action: usize, rng: &mut Mt19937) -> (f64, bool);

    /// Sets the ones of the state (the package's `state()`) into `obs`, a
    /// zeroed row of `10 * 10 * CHANNELS` values laid out `(row, col, channel)`.
    fn write_state(&self, obs: &mut [f32]);

    /// The current level of the difficulty ramp, for games that ramp.
    fn difficulty_ramp(&self) -> Option<u32> {
        None
    }

    /// For [`Env::render`]: the character that shows each channel, by
    /// priority (a cell shows the first listed channel set in it, a space
    /// if none). Empty (the default): the game does not render.
    const GLYPHS: &'static [(usize, char)] = &[];

    /// Whether `act` and `write_state` can run on this state as the
    /// package's would (a restored snapshot is refused otherwise).
    fn valid(&self) -> bool;

    /// What restoring `saved` over this game gives: `saved` itself unless
    /// the game has settings that are configuration, not state (difficulty
    /// ramping), which it keeps.
    fn restored(&self, saved: Self) -> Self {
        saved
    }
}

/// Index of `(row, col, channel)` in a flat observation with `channels` channels.
#[inline]
pub(crate) fn cell(row: usize, col: usize, channel: usize, channels: usize) -> usize {
    (row * GRID + col) * channels + channel
}

/// Decodes a snapshot of a game's serde form, refusing one that
/// [`Game::valid`] rejects (a state the package's `act` could not run on).
///
/// # Errors
/// [`EnvError::Other`] naming the game if the bytes do not decode or the
/// state is invalid.
fn decode_game<G: Game>(state: &EnvState) -> Result<G, EnvError> {
    let game: G = decode_state(G::NAME, state)?;
    if !game.valid() {
        return Err(EnvError::Other { env: G::NAME.into(), message: format!("invalid saved state {game:?}") });
    }
    Ok(game)
}

/// What [`MinAtar::save_state`](Env::save_state) saves: the generator (it
/// drives both the sticky actions and the game), the previous action, the
/// `done` flag and the game's own snapshot, tagged with the env's name so
/// that another env's snapshot is refused.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    env: String,
    rng: Mt19937,
    last_action: usize,
    done: bool,
    game: Vec<u8>,
}

/// A MinAtar game as an rlx [`Env`]: sticky actions, the minimal action set
/// and binary observations, as the package's Gymnasium `-v1` envs.
pub struct MinAtar<G: Game> {
    game: G,
    rng: Mt19937,
    sticky_action_prob: f64,
    last_action: usize,
    done: bool,
    signature: EnvSignature,
}

impl<G: Game> Default for MinAtar<G> {
    fn default() -> Self {
        Self::new()
    }
}

impl<G: Game> MinAtar<G> {
    /// The package's defaults: sticky-action probability 0.1, difficulty
    /// ramping on. Call `reset` before stepping.
    pub fn new() -> Self {
        Self::build(DEFAULT_STICKY_ACTION_PROB, true)
    }

    /// With the package's `sticky_action_prob` and `difficulty_ramping`
    /// arguments.
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] if `sticky_action_prob` is not in `[0, 1]`.
    pub fn with_options(sticky_action_prob: f64, difficulty_ramping: bool) -> Result<Self, EnvError> {
        if !(0.0..=1.0).contains(&sticky_action_prob) {
            return Err(EnvError::BadArgument {
                env: G::NAME.to_string(),
                message: format!("sticky_action_prob must be in [0, 1], got {sticky_action_prob}"),
            });
        }
        Ok(Self::build(sticky_action_prob, difficulty_ramping))
    }

    fn build(sticky_action_prob: f64, difficulty_ramping: bool) -> Self {
        Self {
            game: G::new(difficulty_ramping),
            rng: Mt19937::new(0),
            sticky_action_prob,
            last_action: 0,
            done: true,
            signature: EnvSignature::new(
                G::NAME,
                // Each cell of a channel is on or off: bytes 0 and 255, so
                // batches and replay keep one byte per value.
                Space::bytes(Self::state_shape().to_vec()),
                Space::discrete(G::MINIMAL_ACTIONS.len() as i64),
            ),
        }
    }

    /// The observation's shape `[10, 10, C]`.
    pub fn state_shape() -> [usize; 3] {
        [GRID, GRID, G::CHANNELS]
    }

    /// The game's state.
    pub fn game(&self) -> &G {
        &self.game
    }

    /// The current level of the difficulty ramp (Space Invaders only).
    pub fn difficulty_ramp(&self) -> Option<u32> {
        self.game.difficulty_ramp()
    }

    /// The full action (0..6) that the last step actually applied, after
    /// sticky actions; 0 before the first step.
    pub fn last_action(&self) -> usize {
        self.last_action
    }

    fn write_obs(&self, obs: &mut [f32]) -> Result<(), EnvError> {
        let want = GRID * GRID * G::CHANNELS;
        if obs.len() != want {
            return Err(EnvError::Other {
                env: G::NAME.to_string(),
                message: format!("observation buffer has {} values, expected {want}", obs.len()),
            });
        }
        obs.fill(0.0);
        self.game.write_state(obs);
        Ok(())
    }
}

impl<G: Game> Env for MinAtar<G> {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let Some(seed) = seed {
            self.rng = Mt19937::from_u64_seed(seed);
        }
        self.game.reset(&mut self.rng);
        self.done = false;
        self.write_obs(obs)
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut full = match action {
            Action::Discrete(a) if (0..G::MINIMAL_ACTIONS.len() as i64).contains(&a) => G::MINIMAL_ACTIONS[a as usize],
            other => return Err(invalid_action(self, other)),
        };
        if self.done {
            return Err(EnvError::NeedsReset { env: G::NAME.to_string() });
        }
        if self.rng.random_sample() < self.sticky_action_prob {
            full = self.last_action;
        }
        self.last_action = full;
        let (reward, terminated) = self.game.act(full, &mut self.rng);
        self.done = terminated;
        self.write_obs(obs)?;
        Ok(Step { reward, terminated, truncated: false })
    }

    /// The generator (it drives both the sticky actions and the game), the
    /// previous action, the `done` flag and the game's own snapshot, so that
    /// a run resumed from a checkpoint continues its episodes bit for bit.
    fn save_state(&self) -> Option<EnvState> {
        let game = encode_state(&self.game);
        let (rng, last_action, done) = (self.rng.clone(), self.last_action, self.done);
        Some(encode_state(&Snapshot { env: G::NAME.to_string(), rng, last_action, done, game }))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let s: Snapshot = decode_state(G::NAME, state)?;
        if s.env != G::NAME || s.last_action >= ACTION_NAMES.len() {
            let message = format!("got a saved state of {} with previous action {}", s.env, s.last_action);
            return Err(EnvError::Other { env: G::NAME.to_string(), message });
        }
        let saved = decode_game::<G>(&s.game)?;
        self.game = self.game.restored(saved);
        (self.rng, self.last_action, self.done) = (s.rng, s.last_action, s.done);
        Ok(())
    }

    /// The 10×10 grid, one character per cell (see [`Game::GLYPHS`]), rows
    /// top to bottom joined with newlines.
    fn render(&self) -> Option<String> {
        if G::GLYPHS.is_empty() {
            return None;
        }
        let mut obs = vec![0.0; GRID * GRID * G::CHANNELS];
        self.game.write_state(&mut obs);
        let glyph = |r, c| {
            let set = G::GLYPHS.iter().find(|&&(channel, _)| obs[cell(r, c, channel, G::CHANNELS)] == 1.0);
            set.map_or(' ', |&(_, g)| g)
        };
        let rows: Vec<String> = (0..GRID).map(|r| (0..GRID).map(|c| glyph(r, c)).collect()).collect();
        Some(rows.join("\n"))
    }

    /// The grid as the MinAtar package shows it: each cell in the colour of
    /// its highest-numbered channel that is set (see [`CHANNEL_COLORS`]),
    /// black where none is; 20 pixels a cell.
    fn render_rgb(&mut self) -> Result<Option<Frame>, EnvError> {
        let mut obs = vec![0.0; GRID * GRID * G::CHANNELS];
        self.game.write_state(&mut obs);
        let side = (GRID * CELL_PIXELS) as u32;
        let mut canvas = Canvas::new(side, side, [0, 0, 0]);
        for r in 0..GRID {
            for c in 0..GRID {
                let Some(channel) = (0..G::CHANNELS).rev().find(|&k| obs[cell(r, c, k, G::CHANNELS)] != 0.0) else {
                    continue;
                };
                let (x, y) = ((c * CELL_PIXELS) as f64, (r * CELL_PIXELS) as f64);
                let size = CELL_PIXELS as f64;
                canvas.fill_rect((x, y), (x + size, y + size), CHANNEL_COLORS[channel % CHANNEL_COLORS.len()]);
            }
        }
        Ok(Some(canvas.into_frame()))
    }
}

/// Pixels per grid cell in [`MinAtar`]'s frames.
const CELL_PIXELS: usize = 20;

/// The colour of each channel in [`MinAtar`]'s frames, by channel number
/// (no game has more than ten).
pub const CHANNEL_COLORS: [[u8; 3]; 10] = [
    [86, 180, 233],
    [230, 159, 0],
    [0, 158, 115],
    [240, 228, 66],
    [213, 94, 0],
    [204, 121, 167],
    [255, 255, 255],
    [0, 114, 178],
    [150, 150, 150],
    [255, 80, 80],
];

/// `MinAtar/Asterix-v1`.
pub type Asterix = MinAtar<AsterixGame>;

/// `MinAtar/Breakout-v1`.
pub type Breakout = MinAtar<BreakoutGame>;

/// `MinAtar/Freeway-v1`.
pub type Freeway = MinAtar<FreewayGame>;

/// `MinAtar/Seaquest-v1`.
pub type Seaquest = MinAtar<SeaquestGame>;

/// `MinAtar/SpaceInvaders-v1`.
pub type SpaceInvaders = MinAtar<SpaceInvadersGame>;

/// `MinAtar/Breakout-v1` with the package's defaults.
pub fn breakout_v1() -> Breakout {
    Breakout::new()
}

/// `MinAtar/SpaceInvaders-v1` with the package's defaults.
pub fn space_invaders_v1() -> SpaceInvaders {
    SpaceInvaders::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_common<G: Game>() {
        let mut env = MinAtar::<G>::new();
        let dim = env.observation_space().flat_dim();
        assert_eq!(dim, 100 * G::CHANNELS);
        assert_eq!(env.observation_space().to_string(), format!("Box(0, 1, [10, 10, {}], uint8)", G::CHANNELS));
        let mut obs = vec![0.0f32; dim];

        // Stepping before any reset needs one.
        assert!(matches!(env.step(Action::Discrete(0), &mut obs), Err(EnvError::NeedsReset { .. })));

        // Invalid actions name env, action and space.
        env.reset(Some(0), &mut obs).unwrap();
        let n = G::MINIMAL_ACTIONS.len() as i64;
        for bad in [n, -1, 6] {
            let err = env.step(Action::Discrete(bad), &mut obs).unwrap_err();
            assert!(matches!(err, EnvError::InvalidAction { .. }));
            let msg = err.to_string();
            assert!(
                msg.contains(G::NAME) && msg.contains(&bad.to_string()) && msg.contains(&format!("Discrete({n})")),
                "{msg}"
            );
        }
        assert!(env.step(Action::Continuous(&[0.0]), &mut obs).is_err());

        // A wrong buffer is an error, not a panic.
        assert!(env.reset(Some(0), &mut vec![0.0; dim - 1]).is_err());

        // Seeded resets reproduce the trajectory; observations are binary and in the space.
        let run = |seed: u64| {
            let mut env = MinAtar::<G>::new();
            let mut obs = vec![0.0f32; dim];
            let mut out = Vec::new();
            let mut actions = Mt19937::new(99);
            env.reset(Some(seed), &mut obs).unwrap();
            for _ in 0..3000 {
                assert!(obs.iter().all(|&v| v == 0.0 || v == 1.0));
                assert!(env.observation_space().contains_row(&obs));
                out.extend_from_slice(&obs);
                let a = actions.randint(0, n).unwrap();
                let step = env.step(Action::Discrete(a), &mut obs).unwrap();
                assert!(!step.truncated && step.reward >= 0.0);
                out.push(step.reward as f32);
                if step.terminated {
                    assert!(matches!(env.step(Action::Discrete(0), &mut obs), Err(EnvError::NeedsReset { .. })));
                    env.reset(None, &mut obs).unwrap();
                }
            }
            out
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    /// A snapshot brings back the game, the generator, the previous action
    /// (sticky actions repeat it) and the `done` flag.
    fn check_snapshot<G: Game + std::fmt::Debug>() {
        let mut env = MinAtar::<G>::new();
        let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
        env.reset(Some(3), &mut obs).unwrap();
        let mut actions = Mt19937::new(1);
        let n = G::MINIMAL_ACTIONS.len() as i64;
        while env.last_action() == 0 {
            env.step(Action::Discrete(actions.randint(0, n).unwrap()), &mut obs).unwrap();
        }
        let snapshot = env.save_state().unwrap();
        let mut restored = MinAtar::<G>::new();
        restored.reset(Some(4), &mut obs).unwrap();
        restored.load_state(&snapshot).unwrap();
        assert_eq!(restored.last_action(), env.last_action());
        assert_eq!(format!("{:?}", restored.game()), format!("{:?}", env.game()));
        assert!((0..100).all(|_| restored.rng.next_u32() == env.rng.next_u32()));
        env.done = true;
        restored.load_state(&env.save_state().unwrap()).unwrap();
        assert!(matches!(restored.step(Action::Discrete(0), &mut obs), Err(EnvError::NeedsReset { .. })));
    }

    #[test]
    fn snapshots_restore_everything() {
        check_snapshot::<AsterixGame>();
        check_snapshot::<BreakoutGame>();
        check_snapshot::<FreewayGame>();
        check_snapshot::<SeaquestGame>();
        check_snapshot::<SpaceInvadersGame>();
    }

    #[test]
    fn every_game_keeps_the_env_contract() {
        check_common::<AsterixGame>();
        check_common::<BreakoutGame>();
        check_common::<FreewayGame>();
        check_common::<SeaquestGame>();
        check_common::<SpaceInvadersGame>();
    }

    #[test]
    fn bad_sticky_probability_is_an_error() {
        assert!(matches!(Breakout::with_options(1.5, true), Err(EnvError::BadArgument { .. })));
        assert!(matches!(SpaceInvaders::with_options(f64::NAN, true), Err(EnvError::BadArgument { .. })));
        assert!(SpaceInvaders::with_options(0.0, false).is_ok());
    }

    #[test]
    fn sticky_actions_repeat_the_previous_action() {
        // With probability 1 every step repeats the initial no-op.
        let mut env = Breakout::with_options(1.0, true).unwrap();
        let mut obs = vec![0.0f32; 400];
        env.reset(Some(1), &mut obs).unwrap();
        for _ in 0..3 {
            env.step(Action::Discrete(2), &mut obs).unwrap();
            assert_eq!(env.last_action(), 0);
        }
        // With probability 0 the action is always taken.
        let mut env = Breakout::with_options(0.0, true).unwrap();
        env.reset(Some(1), &mut obs).unwrap();
        env.step(Action::Discrete(2), &mut obs).unwrap();
        assert_eq!(env.last_action(), RIGHT);
    }
}
