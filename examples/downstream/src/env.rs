//! Step 1: our own environment, the **chain walk**.
//!
//! ```text
//!  cell:   0   1   2   3   4   5   6   7   8
//!         |   |   |   |   | A |   |   |   | G |
//!         wall            start           goal
//! ```
//!
//! The agent starts in the middle cell and moves one cell left (action 0) or
//! right (action 1). Reaching the rightmost cell ends the episode with
//! reward +1; every other step costs a little ([`STEP_REWARD`]), so the best
//! policy walks straight right. The leftmost cell is a wall: stepping left
//! there stays put. With probability `slip` a move goes the opposite way,
//! which makes the env stochastic, so the seed matters.
//!
//! What makes this an rlx env (see the `rlx::Env` docs and the book's
//! "The three traits" page):
//! - a signature, built once: the name, a `Box` observation space (a
//!   one-hot row of the agent's cell) and a `Discrete(2)` action space;
//! - caller-owned buffers: `reset` and `step` write the observation into
//!   `obs` and do not allocate;
//! - errors instead of panics: an action outside the space is
//!   `EnvError::InvalidAction`, stepping a finished episode `NeedsReset`;
//! - seeding as in Gymnasium ([`reseed`]): `reset(Some(seed))` replaces the
//!   random generator, `reset(None)` continues its stream, so a given seed
//!   always gives the same episodes;
//! - the episode *terminates* at the goal; the time limit, which *truncates*
//!   it, comes from rlx's [`TimeLimit`] wrapper, not from the env itself.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::env::invalid_action;
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step, TimeLimit};

/// Action 0: one cell to the left.
pub const LEFT: i64 = 0;
/// Action 1: one cell to the right.
pub const RIGHT: i64 = 1;
/// Reward for the step that reaches the goal.
pub const GOAL_REWARD: f64 = 1.0;
/// Reward for every other step: small and negative, so shorter is better.
pub const STEP_REWARD: f64 = -0.05;

/// The observation of cell `cell` in a chain walk of `cells` cells: a
/// one-hot row.
pub fn one_hot(cells: usize, cell: usize) -> Vec<f32> {
    let mut row = vec![0.0; cells];
    row[cell] = 1.0;
    row
}

/// Seeds `rng` as Gymnasium's `reset(seed=...)` does: `Some(seed)` starts a
/// new random stream from that seed, `None` continues the current one.
/// Returns the generator, to draw the new episode from. Every env of this
/// crate seeds its `reset` with it.
pub fn reseed(rng: &mut ChaCha8Rng, seed: Option<u64>) -> &mut ChaCha8Rng {
    if let Some(seed) = seed {
        *rng = ChaCha8Rng::seed_from_u64(seed);
    }
    rng
}

/// A 1-D corridor of `cells` cells with the goal at the right end.
pub struct ChainWalk {
    cells: usize,
    slip: f64,
    pos: usize,
    /// The episode reached the goal; `step` refuses to go on until `reset`.
    terminated: bool,
    rng: ChaCha8Rng,
    /// The name and spaces.
    signature: EnvSignature,
}

impl ChainWalk {
    /// A corridor of `cells` cells (at least 3, so that start and goal
    /// differ) whose moves go the wrong way with probability `slip`.
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] for fewer than 3 cells or a `slip` outside
    /// `[0, 1)`.
    pub fn new(cells: usize, slip: f64) -> Result<Self, EnvError> {
        let bad = |message: String| EnvError::BadArgument { env: "ChainWalk".into(), message };
        if cells < 3 {
            return Err(bad(format!("needs at least 3 cells, got {cells}")));
        }
        if !(0.0..1.0).contains(&slip) {
            return Err(bad(format!("slip must lie in [0, 1), got {slip}")));
        }
        Ok(Self {
            cells,
            slip,
            pos: 0,
            terminated: false,
            // Replaced by the first `reset(Some(seed))`; evaluators always
            // reset with a seed before stepping.
            rng: ChaCha8Rng::seed_from_u64(0),
            signature: EnvSignature::new(
                "ChainWalk",
                // One-hot rows: each element is 0 or 1.
                Space::uniform_box(0.0, 1.0, vec![cells]).expect("0 <= 1 and the shape matches"),
                Space::discrete(2),
            ),
        })
    }

    /// The chain walk cut off after `max_episode_steps` steps, boxed as the
    /// `dyn Env` that `rlx::VectorEnv` holds.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_time_limit(cells: usize, slip: f64, max_episode_steps: usize) -> Result<Box<dyn Env>, EnvError> {
        Ok(Box::new(TimeLimit::new(Self::new(cells, slip)?, max_episode_steps)))
    }

    /// The cell every episode starts in: the middle one.
    pub fn start(&self) -> usize {
        (self.cells - 1) / 2
    }

    /// The goal: the rightmost cell.
    pub fn goal(&self) -> usize {
        self.cells - 1
    }

    /// The agent's cell.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Writes the one-hot row of the agent's cell.
    fn observe(&self, obs: &mut [f32]) {
        obs.fill(0.0);
        obs[self.pos] = 1.0;
    }
}

impl Env for ChainWalk {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        reseed(&mut self.rng, seed);
        self.pos = self.start();
        self.terminated = false;
        self.observe(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        // `VectorEnv` checks actions against the action space before calling
        // us, but an env used on its own must still reject bad ones.
        let Action::Discrete(a @ (LEFT | RIGHT)) = action else {
            return Err(invalid_action(self, action));
        };
        if self.terminated {
            return Err(EnvError::NeedsReset { env: self.name().into() });
        }
        // Draw on every step, slippery or not, so the random stream (and thus
        // the episodes) do not depend on the slip probability being zero.
        let slipped = self.rng.gen_bool(self.slip);
        let right = (a == RIGHT) != slipped;
        self.pos = if right { self.pos + 1 } else { self.pos.saturating_sub(1) };
        self.observe(obs);
        self.terminated = self.pos == self.goal();
        let reward = if self.terminated { GOAL_REWARD } else { STEP_REWARD };
        Ok(Step { reward, terminated: self.terminated, truncated: false })
    }

    fn render(&self) -> Option<String> {
        Some(
            (0..self.cells)
                .map(|c| {
                    if c == self.pos {
                        'A'
                    } else if c == self.goal() {
                        'G'
                    } else {
                        '.'
                    }
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(env: &mut dyn Env, a: i64, obs: &mut [f32]) -> Step {
        env.step(Action::Discrete(a), obs).unwrap()
    }

    #[test]
    fn walking_right_reaches_the_goal() {
        let mut env = ChainWalk::new(9, 0.0).unwrap();
        let mut obs = vec![0.0; 9];
        env.reset(Some(0), &mut obs).unwrap();
        assert_eq!(env.position(), 4);
        assert_eq!(obs, [0., 0., 0., 0., 1., 0., 0., 0., 0.]);
        assert_eq!(env.render().unwrap(), "....A...G");
        for pos in 5..8 {
            let s = step(&mut env, RIGHT, &mut obs);
            assert_eq!((env.position(), s.reward, s.done()), (pos, STEP_REWARD, false));
            assert_eq!(obs.iter().position(|&x| x == 1.0), Some(pos));
        }
        let s = step(&mut env, RIGHT, &mut obs);
        assert_eq!(s, Step { reward: GOAL_REWARD, terminated: true, truncated: false });
        assert!(matches!(env.step(Action::Discrete(RIGHT), &mut obs), Err(EnvError::NeedsReset { .. })));
        env.reset(None, &mut obs).unwrap();
        assert_eq!(env.position(), 4);
    }

    #[test]
    fn the_left_end_is_a_wall() {
        let mut env = ChainWalk::new(5, 0.0).unwrap();
        let mut obs = vec![0.0; 5];
        env.reset(Some(0), &mut obs).unwrap();
        for _ in 0..5 {
            let s = step(&mut env, LEFT, &mut obs);
            assert_eq!((s.reward, s.done()), (STEP_REWARD, false));
        }
        assert_eq!(env.position(), 0);
        assert_eq!(obs, [1., 0., 0., 0., 0.]);
    }

    #[test]
    fn bad_actions_and_arguments_are_errors() {
        let mut env = ChainWalk::new(5, 0.0).unwrap();
        let mut obs = vec![0.0; 5];
        env.reset(Some(0), &mut obs).unwrap();
        for bad in [Action::Discrete(2), Action::Discrete(-1), Action::Continuous(&[1.0])] {
            assert!(matches!(env.step(bad, &mut obs), Err(EnvError::InvalidAction { .. })), "{bad}");
        }
        assert!(ChainWalk::new(2, 0.0).is_err());
        assert!(ChainWalk::new(5, 1.0).is_err());
    }

    /// The positions visited by always stepping right for 30 steps.
    fn trajectory(seed: u64) -> Vec<usize> {
        let mut env = ChainWalk::new(9, 0.3).unwrap();
        let mut obs = vec![0.0; 9];
        env.reset(Some(seed), &mut obs).unwrap();
        let mut visited = Vec::new();
        for _ in 0..30 {
            if step(&mut env, RIGHT, &mut obs).done() {
                env.reset(None, &mut obs).unwrap();
            }
            visited.push(env.position());
        }
        visited
    }

    #[test]
    fn slipping_is_deterministic_given_the_seed() {
        assert_eq!(trajectory(7), trajectory(7));
        assert_ne!(trajectory(7), trajectory(8));
        // Slips happened: some step went left even though we always went right.
        assert!(trajectory(7).windows(2).any(|w| w[1] + 1 == w[0]));
    }

    #[test]
    fn the_time_limit_truncates() {
        let mut env = ChainWalk::with_time_limit(9, 0.0, 3).unwrap();
        let mut obs = vec![0.0; 9];
        env.reset(Some(0), &mut obs).unwrap();
        assert!(!step(&mut *env, LEFT, &mut obs).done());
        assert!(!step(&mut *env, LEFT, &mut obs).done());
        let s = step(&mut *env, LEFT, &mut obs);
        assert!(s.truncated && !s.terminated, "{s:?}");
    }
}
