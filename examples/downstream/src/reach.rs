//! A continuous env of a shape nothing bundled with rlx has: **reach**, a
//! point moved by a 3-dimensional action.
//!
//! A point and a goal are drawn uniformly in the cube `[−1, 1]³` each
//! episode. The action is a velocity in `[−1, 1]³`: the point moves by 0.2
//! times it (and stays in the cube). The reward is the negative distance
//! to the goal after the move; episodes last 30 steps. The observation is
//! the point and the offset to the goal, 6 values.
//!
//! Heading straight for the goal scores about −3 (the first few steps'
//! distances); a policy that does not move, or moves at random, about −40
//! (−41.8 for random actions over 50 episodes, see `tests/builtin.rs`).

use crate::env::reseed;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::env::{invalid_action, EnvState};
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};

/// Steps per episode.
pub const LIMIT: u32 = 30;
/// How far a full-strength action moves the point along each axis.
pub const SPEED: f32 = 0.2;

/// The reach task; see the module docs.
pub struct Reach {
    point: [f32; 3],
    goal: [f32; 3],
    steps: u32,
    rng: ChaCha8Rng,
    signature: EnvSignature,
}

impl Default for Reach {
    fn default() -> Self {
        Self::new()
    }
}

impl Reach {
    /// A reach task; call `reset` before stepping.
    pub fn new() -> Self {
        Self {
            point: [0.0; 3],
            goal: [0.0; 3],
            steps: LIMIT,
            rng: ChaCha8Rng::seed_from_u64(0),
            signature: EnvSignature::new(
                "Reach",
                Space::uniform_box(-2.0, 2.0, vec![6]).expect("bounds are consistent"),
                Space::uniform_box(-1.0, 1.0, vec![3]).expect("bounds are consistent"),
            ),
        }
    }

    fn observe(&self, obs: &mut [f32]) {
        for i in 0..3 {
            obs[i] = self.point[i];
            obs[3 + i] = self.goal[i] - self.point[i];
        }
    }

    fn distance(&self) -> f32 {
        self.point.iter().zip(&self.goal).map(|(p, g)| (g - p) * (g - p)).sum::<f32>().sqrt()
    }
}

impl Env for Reach {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        let rng = reseed(&mut self.rng, seed);
        for i in 0..3 {
            self.point[i] = rng.gen_range(-1.0..1.0);
            self.goal[i] = rng.gen_range(-1.0..1.0);
        }
        self.steps = 0;
        self.observe(obs);
        Ok(())
    }

    /// Rejects actions outside `[−1, 1]³` (rlx's evaluators clip a
    /// policy's actions to the bounds before they get here).
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        if !self.action_space().contains(action) {
            return Err(invalid_action(self, action));
        }
        let Action::Continuous(v) = action else { unreachable!("contains() checked the kind") };
        if self.steps == LIMIT {
            return Err(EnvError::NeedsReset { env: self.name().to_string() });
        }
        for i in 0..3 {
            self.point[i] = (self.point[i] + SPEED * v[i]).clamp(-1.0, 1.0);
        }
        self.steps += 1;
        self.observe(obs);
        Ok(Step { reward: -(self.distance() as f64), terminated: false, truncated: self.steps == LIMIT })
    }

    fn save_state(&self) -> Option<EnvState> {
        Some(rlx::env::encode_state(&(self.point, self.goal, self.steps, &self.rng)))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let (point, goal, steps, rng): ([f32; 3], [f32; 3], u32, ChaCha8Rng) =
            rlx::env::decode_state(self.name(), state)?;
        (self.point, self.goal, self.steps, self.rng) = (point, goal, steps, rng);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_for_the_goal_beats_standing_still() {
        let mut env = Reach::new();
        let mut obs = [0.0f32; 6];
        let (mut still, mut heading) = (0.0, 0.0);
        for episode in 0..20 {
            env.reset(Some(episode), &mut obs).unwrap();
            for _ in 0..LIMIT {
                still += env.step(Action::Continuous(&[0.0; 3]), &mut obs).unwrap().reward;
            }
            env.reset(Some(episode), &mut obs).unwrap();
            for _ in 0..LIMIT {
                let v: Vec<f32> = obs[3..].iter().map(|d| (d / SPEED).clamp(-1.0, 1.0)).collect();
                heading += env.step(Action::Continuous(&v), &mut obs).unwrap().reward;
            }
        }
        let (still, heading) = (still / 20.0, heading / 20.0);
        assert!(still < -20.0 && heading > -5.0, "still {still}, heading {heading}");
        assert!(env.step(Action::Continuous(&[2.0, 0.0, 0.0]), &mut obs).is_err(), "out of bounds");
    }
}
