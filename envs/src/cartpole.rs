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
//! Resets draw from NumPy's PCG64 seeded as Gymnasium seeds it
//! ([`crate::pcg64`]): `reset(Some(s))` gives Gymnasium's `reset(seed=s)`
//! start state exactly, checked for 20 seeds by `tests/resets.rs`.

use crate::classic::{write_f32, ClassicControl, Dynamics};
use crate::pcg64::Pcg64;
use rlx::video::{Canvas, Frame};
use rlx::{Action, Space, TimeLimit};

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
pub type CartPole = ClassicControl<CartPoleDynamics>;

/// `CartPole-v1`: [`CartPole`] with Gymnasium's 500-step time limit.
pub fn cartpole_v1() -> TimeLimit<CartPole> {
    TimeLimit::new(CartPole::new(), 500)
}

/// The physics of [`CartPole`], whose state is
/// `(x, x_dot, theta, theta_dot)`; it has no arguments.
#[derive(Default)]
pub struct CartPoleDynamics;

impl Dynamics for CartPoleDynamics {
    const NAME: &'static str = "CartPole-v1";
    type State = [f64; 4];
    /// Whether to push right.
    type Action = bool;

    fn observation_space() -> Space {
        let high = [X_THRESHOLD as f32 * 2.0, f32::MAX, THETA_THRESHOLD as f32 * 2.0, f32::MAX];
        Space::bounded(high.iter().map(|h| -h).collect(), high.to_vec(), vec![4])
            .expect("CartPole bounds are consistent")
    }

    fn action_space() -> Space {
        Space::discrete(2)
    }

    fn reset(rng: &mut Pcg64) -> [f64; 4] {
        std::array::from_fn(|_| rng.uniform(-0.05, 0.05))
    }

    fn action(action: Action<'_>) -> Option<bool> {
        match action {
            Action::Discrete(1) => Some(true),
            Action::Discrete(0) => Some(false),
            _ => None,
        }
    }

    fn step(&self, state: &mut [f64; 4], push_right: bool, _: &mut Pcg64) -> (f64, bool) {
        let [x, x_dot, theta, theta_dot] = *state;
        let force = if push_right { FORCE_MAG } else { -FORCE_MAG };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        // Explicit Euler, Gymnasium's default integrator.
        *state = [x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot, theta_dot + TAU * thetaacc];
        let [x, _, theta, _] = *state;
        let terminated = x < -X_THRESHOLD || x > X_THRESHOLD || theta < -THETA_THRESHOLD || theta > THETA_THRESHOLD;
        (1.0, terminated)
    }

    fn observe(state: &[f64; 4], obs: &mut [f32]) {
        write_f32(obs, *state);
    }

    /// 600×400 pixels as Gymnasium draws it: the frame spans the track's
    /// ±2.4 m, the pole (twice `LENGTH`) is 10 px wide, the cart 50×30 px.
    fn draw(&[x, _, theta, _]: &[f64; 4]) -> Frame {
        let scale = 600.0 / (2.0 * X_THRESHOLD);
        let mut canvas = Canvas::new(600, 400, [255, 255, 255]);
        let track_y = 300.0;
        canvas.line((0.0, track_y), (600.0, track_y), 1.0, [0, 0, 0]);
        let cart_x = 300.0 + x * scale;
        canvas.fill_rect((cart_x - 25.0, track_y - 15.0), (cart_x + 25.0, track_y + 15.0), [0, 0, 0]);
        let axle = (cart_x, track_y - 7.5);
        let length = scale * 2.0 * LENGTH;
        let tip = (axle.0 + length * theta.sin(), axle.1 - length * theta.cos());
        canvas.line(axle, tip, 10.0, [202, 152, 101]);
        canvas.fill_circle(axle, 5.0, [129, 132, 203]);
        canvas.into_frame()
    }

    /// The track from −2.4 to 2.4 with the cart leaning like its pole
    /// (`/`, `|` or `\`), then the position and the pole's angle.
    fn render(state: &[f64; 4]) -> String {
        let [x, _, theta, _] = *state;
        let lean = match theta.to_degrees() {
            d if d > 2.0 => '/',
            d if d < -2.0 => '\\',
            _ => '|',
        };
        let mut track = vec!['-'; 41];
        let at = ((x + X_THRESHOLD) / (2.0 * X_THRESHOLD) * 40.0).round().clamp(0.0, 40.0) as usize;
        track[at] = lean;
        let track: String = track.into_iter().collect();
        format!("[{track}] x={x:+.3} θ={:+.1}°", theta.to_degrees())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::tests::{check_rejects, check_resets};
    use rlx::{Env, EnvError};

    #[test]
    fn reset_is_seeded_and_in_range() {
        let mut means = [0.0f64; 4];
        check_resets(&mut CartPole::new(), |_, a: &[f32; 4]| {
            for i in 0..4 {
                assert!((-0.05..0.05).contains(&(a[i] as f64)), "{a:?}");
                means[i] += a[i] as f64 / 4000.0;
            }
        });
        assert!(means.iter().all(|m| m.abs() < 0.003), "reset mean should be ~0: {means:?}");
    }

    #[test]
    fn bad_actions_are_errors_naming_env_and_space() {
        let bad = [Action::Discrete(2), Action::Discrete(-1), Action::Continuous(&[0.5])];
        check_rejects(&mut cartpole_v1(), "Discrete(2)", &bad);
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
