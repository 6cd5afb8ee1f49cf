//! A discrete env of a shape nothing bundled with rlx has: **the ring**,
//! 7 observations and 5 actions.
//!
//! The agent stands on one of 12 cells arranged in a circle and must reach
//! a goal cell drawn anew each episode. Its 5 actions move it 0, +1, −1,
//! +3 or −3 cells. Every step costs 0.05; reaching the goal pays 1 and
//! ends the episode; episodes are cut after 20 steps. The observation is
//! where the agent and the goal are, as angles:
//! `[cos a, sin a, cos g, sin g, cos(g − a), sin(g − a), steps left / 20]`.
//!
//! Acting well means choosing the right mix of long and short moves: from
//! any cell the goal is at most 3 moves away, a return of at least 0.9.
//! Uniformly random actions often run out of time (0.19 on average over
//! 50 episodes, see `tests/builtin.rs`).

use crate::env::reseed;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::env::{invalid_action, EnvState};
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};

/// Cells on the ring.
pub const CELLS: i64 = 12;
/// The moves of actions 0 to 4.
pub const MOVES: [i64; 5] = [0, 1, -1, 3, -3];
/// Steps before the episode is cut.
pub const LIMIT: u32 = 20;

/// The ring; see the module docs.
pub struct Ring {
    agent: i64,
    goal: i64,
    steps: u32,
    done: bool,
    rng: ChaCha8Rng,
    signature: EnvSignature,
}

impl Default for Ring {
    fn default() -> Self {
        Self::new()
    }
}

impl Ring {
    /// A ring; call `reset` before stepping.
    pub fn new() -> Self {
        Self {
            agent: 0,
            goal: 0,
            steps: 0,
            done: true,
            rng: ChaCha8Rng::seed_from_u64(0),
            signature: EnvSignature::new(
                "Ring",
                Space::uniform_box(-1.0, 1.0, vec![7]).expect("bounds are consistent"),
                Space::discrete(MOVES.len() as i64),
            ),
        }
    }

    fn observe(&self, obs: &mut [f32]) {
        let angle = |cell: i64| cell as f32 * std::f32::consts::TAU / CELLS as f32;
        let (a, g) = (angle(self.agent), angle(self.goal));
        let left = (LIMIT - self.steps) as f32 / LIMIT as f32;
        obs.copy_from_slice(&[a.cos(), a.sin(), g.cos(), g.sin(), (g - a).cos(), (g - a).sin(), left]);
    }
}

impl Env for Ring {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        let rng = reseed(&mut self.rng, seed);
        self.agent = rng.gen_range(0..CELLS);
        self.goal = (self.agent + rng.gen_range(1..CELLS)) % CELLS;
        (self.steps, self.done) = (0, false);
        self.observe(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Action::Discrete(a @ 0..=4) = action else {
            return Err(invalid_action(self, action));
        };
        if self.done {
            return Err(EnvError::NeedsReset { env: self.name().to_string() });
        }
        self.agent = (self.agent + MOVES[a as usize]).rem_euclid(CELLS);
        self.steps += 1;
        let terminated = self.agent == self.goal;
        let truncated = !terminated && self.steps == LIMIT;
        self.done = terminated || truncated;
        self.observe(obs);
        Ok(Step { reward: if terminated { 1.0 } else { -0.05 }, terminated, truncated })
    }

    fn save_state(&self) -> Option<EnvState> {
        Some(rlx::env::encode_state(&(self.agent, self.goal, self.steps, self.done, &self.rng)))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let (agent, goal, steps, done, rng): (i64, i64, u32, bool, ChaCha8Rng) =
            rlx::env::decode_state(self.name(), state)?;
        (self.agent, self.goal, self.steps, self.done, self.rng) = (agent, goal, steps, done, rng);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_wrap_around_and_the_goal_ends_the_episode() {
        let mut env = Ring::new();
        let mut obs = [0.0f32; 7];
        env.reset(Some(3), &mut obs).unwrap();
        let (start, goal) = (env.agent, env.goal);
        assert_ne!(start, goal);
        // Walk +1 until the goal: at most 11 steps, each costing 0.05.
        let mut ret = 0.0;
        loop {
            let step = env.step(Action::Discrete(1), &mut obs).unwrap();
            ret += step.reward;
            if step.done() {
                assert!(step.terminated);
                break;
            }
        }
        let k = (goal - start).rem_euclid(CELLS) as f64;
        assert!((ret - (1.0 - 0.05 * (k - 1.0))).abs() < 1e-9);
        assert!((obs[4] - 1.0).abs() < 1e-6, "at the goal the angle between agent and goal is 0");
        assert!(env.step(Action::Discrete(5), &mut obs).is_err());
    }
}
