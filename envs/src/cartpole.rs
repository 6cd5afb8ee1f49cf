//! CartPole-v1, matching Gymnasium 1.0's `CartPoleEnv` step for step.
//!
//! Barto, Sutton & Anderson (1983): push a cart left or right to keep a pole
//! upright. The state is kept in `f64` and every operation is done in the
//! same order as Gymnasium's Python code, so observations (the state cast to
//! `f32`) agree to the last bit in practice; the fixture test holds them to
//! 1e-5.
//!
//! | | |
//! |---|---|
//! | observation | `Box(4)`: cart position, cart velocity, pole angle, pole angular velocity |
//! | action | `Discrete(2)`: 0 pushes left, 1 pushes right |
//! | reward | +1 for every step, including the terminating one |
//! | termination | \|x\| > 2.4 or \|θ\| > 12° |
//! | truncation | 500 steps (the `TimeLimit` of `CartPole-v1`) |
//! | reset | each state variable uniform in [−0.05, 0.05] |
//!
//! The reset draws come from rlx's own seeded generator (ChaCha8), not
//! NumPy's PCG64: the distribution is the same, the numbers differ.

use crate::snapshot::Snapshot;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::env::{invalid_action, EnvState};
use rlx::{Action, Env, EnvError, Space, Step, TimeLimit};

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
const LENGTH: f64 = 0.5; // half the pole's length
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02;
const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_THRESHOLD: f64 = 2.4;

/// The cart-pole dynamics without a time limit (Gymnasium's `CartPoleEnv`).
/// [`cartpole_v1`] adds the 500-step limit.
pub struct CartPole {
    state: [f64; 4],
    rng: ChaCha8Rng,
    done: bool,
    observation_space: Space,
    action_space: Space,
}

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPole {
    /// A cart-pole at rest; call `reset` before stepping.
    pub fn new() -> Self {
        let high = [X_THRESHOLD as f32 * 2.0, f32::MAX, THETA_THRESHOLD as f32 * 2.0, f32::MAX];
        let observation_space = Space::bounded(high.iter().map(|h| -h).collect(), high.to_vec(), vec![4])
            .expect("CartPole bounds are consistent");
        Self {
            state: [0.0; 4],
            rng: ChaCha8Rng::seed_from_u64(0),
            done: true,
            observation_space,
            action_space: Space::discrete(2),
        }
    }

    /// The full `f64` state `(x, x_dot, theta, theta_dot)`.
    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    /// Puts the system in `state` and starts an episode from it (used to
    /// replay reference trajectories from their exact initial state).
    pub fn set_state(&mut self, state: [f64; 4], obs: &mut [f32]) {
        self.state = state;
        self.done = false;
        self.write_obs(obs);
    }

    fn write_obs(&self, obs: &mut [f32]) {
        for (o, s) in obs.iter_mut().zip(self.state) {
            *o = s as f32;
        }
    }
}

impl Env for CartPole {
    fn name(&self) -> &str {
        "CartPole-v1"
    }

    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        for s in &mut self.state {
            *s = self.rng.gen_range(-0.05..0.05);
        }
        self.done = false;
        self.write_obs(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let push_right = match action {
            Action::Discrete(1) => true,
            Action::Discrete(0) => false,
            other => return Err(invalid_action(self, other)),
        };
        if self.done {
            return Err(EnvError::NeedsReset { env: self.name().into() });
        }
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if push_right { FORCE_MAG } else { -FORCE_MAG };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        // Explicit Euler, Gymnasium's default integrator.
        self.state = [x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot, theta_dot + TAU * thetaacc];
        let [x, _, theta, _] = self.state;
        let terminated = x < -X_THRESHOLD || x > X_THRESHOLD || theta < -THETA_THRESHOLD || theta > THETA_THRESHOLD;
        self.done = terminated;
        self.write_obs(obs);
        Ok(Step { reward: 1.0, terminated, truncated: false })
    }

    /// The `f64` state, the `done` flag and the generator, so that a run
    /// resumed from a checkpoint continues its episodes bit for bit.
    fn save_state(&self) -> Option<EnvState> {
        Some(Snapshot::save(self.name(), self.state, self.done, &self.rng))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let s = Snapshot::load(self.name(), state)?;
        (self.state, self.done, self.rng) = (s.state, s.done, s.rng);
        Ok(())
    }

    /// The track from −2.4 to 2.4 with the cart leaning like its pole
    /// (`/`, `|` or `\`), then the position and the pole's angle.
    fn render(&self) -> Option<String> {
        let [x, _, theta, _] = self.state;
        let lean = match theta.to_degrees() {
            d if d > 2.0 => '/',
            d if d < -2.0 => '\\',
            _ => '|',
        };
        let mut track = vec!['-'; 41];
        let at = ((x + X_THRESHOLD) / (2.0 * X_THRESHOLD) * 40.0).round().clamp(0.0, 40.0) as usize;
        track[at] = lean;
        let track: String = track.into_iter().collect();
        Some(format!("[{track}] x={x:+.3} θ={:+.1}°", theta.to_degrees()))
    }
}

/// `CartPole-v1`: [`CartPole`] with Gymnasium's 500-step time limit.
pub fn cartpole_v1() -> TimeLimit<CartPole> {
    TimeLimit::new(CartPole::new(), 500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_is_seeded_and_in_range() {
        let mut env = CartPole::new();
        let mut a = [0.0f32; 4];
        let mut b = [0.0f32; 4];
        env.reset(Some(3), &mut a).unwrap();
        env.reset(Some(3), &mut b).unwrap();
        assert_eq!(a, b);
        let mut means = [0.0f64; 4];
        for _ in 0..4000 {
            env.reset(None, &mut a).unwrap();
            for i in 0..4 {
                assert!((-0.05..0.05).contains(&(a[i] as f64)), "{a:?}");
                means[i] += a[i] as f64 / 4000.0;
            }
        }
        assert!(means.iter().all(|m| m.abs() < 0.003), "reset mean should be ~0: {means:?}");
    }

    #[test]
    fn bad_actions_are_errors_naming_env_and_space() {
        let mut env = cartpole_v1();
        let mut obs = [0.0f32; 4];
        env.reset(Some(0), &mut obs).unwrap();
        let err = env.step(Action::Discrete(2), &mut obs).unwrap_err().to_string();
        assert!(err.contains("CartPole-v1") && err.contains('2') && err.contains("Discrete(2)"), "{err}");
        assert!(env.step(Action::Continuous(&[0.5]), &mut obs).is_err());
    }

    #[test]
    fn stepping_after_termination_needs_reset() {
        let mut env = CartPole::new();
        let mut obs = [0.0f32; 4];
        env.reset(Some(0), &mut obs).unwrap();
        let mut steps = 0;
        while !env.step(Action::Discrete(1), &mut obs).unwrap().terminated {
            steps += 1;
        }
        assert!(steps < 100);
        assert!(matches!(env.step(Action::Discrete(1), &mut obs), Err(EnvError::NeedsReset { .. })));
    }
}
