//! Acrobot-v1, matching Gymnasium 1.0's `AcrobotEnv` step for step.
//!
//! Sutton (1996): a two-link chain hangs from a fixed joint; only the joint
//! between the links is actuated, and the free end must be swung above a
//! target height. The dynamics are the book's (`book_or_nips = "book"`),
//! integrated over each 0.2 s step with one classic Runge–Kutta (RK4) step,
//! with the same operations in the same order as Gymnasium's `rk4` and
//! `_dsdt`, so the `f64` state agrees to the last bit in practice; the
//! fixture test holds observations to 1e-5.
//!
//! | | |
//! |---|---|
//! | observation | `Box([-1, -1, -1, -1, -4π, -9π], [1, 1, 1, 1, 4π, 9π])` (float32 bounds): cos θ₁, sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂ |
//! | action | `Discrete(3)`: torque −1, 0 or +1 on the joint between the links |
//! | dynamics | RK4 over 0.2 s; then θ₁, θ₂ wrapped into [−π, π], θ̇₁ clipped to ±4π, θ̇₂ to ±9π |
//! | reward | −1 for every step that does not reach the goal, 0 for the one that does |
//! | termination | −cos θ₁ − cos(θ₂ + θ₁) > 1 (the free end is above the target height) |
//! | truncation | 500 steps (the `TimeLimit` of `Acrobot-v1`) |
//! | reset | θ₁, θ₂, θ̇₁, θ̇₂ each uniform in [−0.1, 0.1], rounded to float32 |
//!
//! θ₁ is the angle of the first link from hanging straight down, θ₂ the
//! angle of the second link relative to the first.
//!
//! Torque noise (Gymnasium's `torque_noise_max`) is 0 by default, as in
//! Gymnasium; [`Acrobot::with_torque_noise`] turns it on.
//!
//! As in Gymnasium, the state is float32 right after a reset (kept here as
//! the widened `f64` values) and float64 after every step. Squares are taken
//! with the C library's `pow`, as NumPy's `x**2` does (it differs from `x*x`
//! in the last bit for about one value in a thousand).
//!
//! Resets draw from NumPy's PCG64 seeded as Gymnasium seeds it
//! ([`crate::pcg64`]): `reset(Some(s))` gives Gymnasium's `reset(seed=s)`
//! start state exactly, checked for 20 seeds by `tests/resets.rs`. The
//! observation right after a reset is computed in `f64` and rounded, while
//! NumPy computes the cosines and sines of the float32 reset state with its
//! own float32 routines; the two can differ by one float32 ulp in that one
//! observation (the state itself, and so everything after it, is identical).

use std::f64::consts::PI;

use crate::classic::{check_argument, write_f32, ClassicControl, Dynamics};
use crate::pcg64::Pcg64;
use rlx::video::{Canvas, Frame};
use rlx::{Action, EnvError, Space, TimeLimit};

const DT: f64 = 0.2;
const LINK_LENGTH_1: f64 = 1.0;
/// Used only in the picture: the dynamics never need the second length.
const LINK_LENGTH_2: f64 = 1.0;
const LINK_MASS_1: f64 = 1.0;
const LINK_MASS_2: f64 = 1.0;
const LINK_COM_POS_1: f64 = 0.5;
const LINK_COM_POS_2: f64 = 0.5;
const LINK_MOI: f64 = 1.0;
const MAX_VEL_1: f64 = 4.0 * PI;
const MAX_VEL_2: f64 = 9.0 * PI;
const AVAIL_TORQUE: [f64; 3] = [-1.0, 0.0, 1.0];
const G: f64 = 9.8;
const RESET_BOUND: f64 = 0.1;

/// `x**2` as NumPy computes it for a float64: the C library's `pow(x, 2)`.
/// The exponent is hidden from the optimizer, which would otherwise turn
/// the call into `x * x`.
fn square(x: f64) -> f64 {
    x.powf(std::hint::black_box(2.0))
}

/// Gymnasium's `wrap`: shifts `x` by whole turns until it lies in `[m, big_m]`.
///
/// Unlike Gymnasium, which would loop forever, an infinite `x` is returned
/// as is, and an `x` more than a million away (unreachable from a reset,
/// only from [`Acrobot::set_state`]) is first reduced with `rem_euclid`.
fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    if !x.is_finite() {
        return x;
    }
    if x.abs() > 1e6 {
        x = m + (x - m).rem_euclid(diff);
    }
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

/// Gymnasium's `bound`: `min(max(x, m), big_m)` with Python's `min`/`max`.
fn bound(x: f64, m: f64, big_m: f64) -> f64 {
    let x = if m > x { m } else { x };
    if big_m < x {
        big_m
    } else {
        x
    }
}

/// The time derivative of `(θ₁, θ₂, θ̇₁, θ̇₂, torque)` (the book's
/// equations; the torque is constant over the step).
fn dsdt(s: &[f64; 5]) -> [f64; 5] {
    let (m1, m2, l1, lc1, lc2) = (LINK_MASS_1, LINK_MASS_2, LINK_LENGTH_1, LINK_COM_POS_1, LINK_COM_POS_2);
    let (i1, i2) = (LINK_MOI, LINK_MOI);
    let [theta1, theta2, dtheta1, dtheta2, a] = *s;
    let d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
    let d2 = m2 * (lc2 * lc2 + l1 * lc2 * theta2.cos()) + i2;
    let phi2 = m2 * lc2 * G * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * square(dtheta2) * theta2.sin() - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
        + (m1 * lc1 + m2 * l1) * G * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * square(dtheta1) * theta2.sin() - phi2)
        / (m2 * (lc2 * lc2) + i2 - square(d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

/// One classic Runge–Kutta step of length [`DT`] from `y0`, as Gymnasium's
/// `rk4(derivs, y0, [0, dt])`.
fn rk4(y0: &[f64; 5]) -> [f64; 5] {
    let dt = DT - 0.0;
    let dt2 = dt / 2.0;
    let axpy = |y: &[f64; 5], h: f64, k: &[f64; 5]| -> [f64; 5] { std::array::from_fn(|i| y[i] + h * k[i]) };
    let k1 = dsdt(y0);
    let k2 = dsdt(&axpy(y0, dt2, &k1));
    let k3 = dsdt(&axpy(y0, dt2, &k2));
    let k4 = dsdt(&axpy(y0, dt, &k3));
    std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]))
}

/// The acrobot without a time limit (Gymnasium's `AcrobotEnv`).
/// [`acrobot_v1`] adds the 500-step limit.
pub type Acrobot = ClassicControl<AcrobotDynamics>;

/// `Acrobot-v1`: [`Acrobot`] with Gymnasium's 500-step time limit.
pub fn acrobot_v1() -> TimeLimit<Acrobot> {
    TimeLimit::new(Acrobot::new(), 500)
}

/// The physics of [`Acrobot`], whose state is `(θ₁, θ₂, θ̇₁, θ̇₂)`;
/// `Default` has no torque noise.
#[derive(Default)]
pub struct AcrobotDynamics {
    torque_noise_max: f64,
}

impl Acrobot {
    /// The same env with Gymnasium's `torque_noise_max`: every step adds
    /// noise uniform in `[-max, max]` (drawn from the env's generator) to
    /// the torque.
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] if `max` is negative or not finite.
    pub fn with_torque_noise(max: f64) -> Result<Self, EnvError> {
        let valid = max.is_finite() && max >= 0.0;
        check_argument::<AcrobotDynamics>(valid, || format!("torque_noise_max must be finite and >= 0, got {max}"))?;
        Ok(Self::with_dynamics(AcrobotDynamics { torque_noise_max: max }))
    }
}

impl Dynamics for AcrobotDynamics {
    const NAME: &'static str = "Acrobot-v1";
    type State = [f64; 4];
    /// The torque, before noise.
    type Action = f64;

    fn observation_space() -> Space {
        let high = [1.0, 1.0, 1.0, 1.0, MAX_VEL_1 as f32, MAX_VEL_2 as f32];
        Space::bounded(high.iter().map(|h| -h).collect(), high.to_vec(), vec![6])
            .expect("Acrobot bounds are consistent")
    }

    fn action_space() -> Space {
        Space::discrete(3)
    }

    fn reset(rng: &mut Pcg64) -> [f64; 4] {
        std::array::from_fn(|_| rng.uniform(-RESET_BOUND, RESET_BOUND) as f32 as f64)
    }

    fn action(action: Action<'_>) -> Option<f64> {
        match action {
            Action::Discrete(a @ 0..=2) => Some(AVAIL_TORQUE[a as usize]),
            _ => None,
        }
    }

    fn step(&self, state: &mut [f64; 4], mut torque: f64, rng: &mut Pcg64) -> (f64, bool) {
        if self.torque_noise_max > 0.0 {
            torque += rng.uniform(-self.torque_noise_max, self.torque_noise_max);
        }
        let [theta1, theta2, dtheta1, dtheta2] = *state;
        let ns = rk4(&[theta1, theta2, dtheta1, dtheta2, torque]);
        *state = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            bound(ns[2], -MAX_VEL_1, MAX_VEL_1),
            bound(ns[3], -MAX_VEL_2, MAX_VEL_2),
        ];
        let [theta1, theta2, ..] = *state;
        let terminated = -theta1.cos() - (theta2 + theta1).cos() > 1.0;
        (if terminated { 0.0 } else { -1.0 }, terminated)
    }

    fn observe(&[theta1, theta2, dtheta1, dtheta2]: &[f64; 4], obs: &mut [f32]) {
        write_f32(obs, [theta1.cos(), theta1.sin(), theta2.cos(), theta2.sin(), dtheta1, dtheta2]);
    }

    /// 500×500 pixels as Gymnasium draws it: the frame spans ±2.2 m around
    /// the pivot, both links hang down at 0 rad, and the goal line is 1 m
    /// above the pivot.
    fn draw(&[theta1, theta2, _, _]: &[f64; 4]) -> Frame {
        let scale = 500.0 / (2.0 * (LINK_LENGTH_1 + LINK_LENGTH_2 + 0.2));
        let mut canvas = Canvas::new(500, 500, [255, 255, 255]);
        let pivot = (250.0, 250.0);
        canvas.line((0.0, pivot.1 - scale), (500.0, pivot.1 - scale), 1.0, [0, 0, 0]);
        let joint = (pivot.0 + scale * LINK_LENGTH_1 * theta1.sin(), pivot.1 + scale * LINK_LENGTH_1 * theta1.cos());
        let end = (
            joint.0 + scale * LINK_LENGTH_2 * (theta1 + theta2).sin(),
            joint.1 + scale * LINK_LENGTH_2 * (theta1 + theta2).cos(),
        );
        for (a, b) in [(pivot, joint), (joint, end)] {
            canvas.line(a, b, 0.2 * scale, [0, 204, 204]);
            canvas.fill_circle(a, 0.1 * scale, [204, 204, 0]);
        }
        canvas.into_frame()
    }

    /// The joint angles in degrees (0 hangs straight down), the angular
    /// velocities, and the height of the free end (the goal is above 1).
    fn render(&[theta1, theta2, dtheta1, dtheta2]: &[f64; 4]) -> String {
        let height = -theta1.cos() - (theta2 + theta1).cos();
        format!(
            "θ₁={:+6.1}° θ₂={:+6.1}° θ̇₁={dtheta1:+.2} θ̇₂={dtheta2:+.2} tip height={height:+.2} (goal > 1)",
            theta1.to_degrees(),
            theta2.to_degrees()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::tests::{check_registered, check_rejects, check_resets};
    use rlx::{Env, Step};

    #[test]
    fn registered_like_gymnasium() {
        check_registered("Acrobot-v1", Some(-100.0), &Acrobot::new());
    }

    #[test]
    fn reset_is_seeded_and_in_range() {
        let mut means = [0.0f64; 4];
        check_resets(&mut Acrobot::new(), |env, a: &[f32; 6]| {
            let state = env.state();
            for i in 0..4 {
                assert!(state[i].abs() <= RESET_BOUND as f32 as f64, "{state:?}");
                assert_eq!(state[i], state[i] as f32 as f64, "the reset state is float32");
                means[i] += state[i] / 4000.0;
            }
            assert!(env.observation_space().contains_row(a));
            assert_eq!(a[4..], [state[2] as f32, state[3] as f32]);
        });
        assert!(means.iter().all(|m| m.abs() < 0.006), "reset mean should be ~0: {means:?}");
    }

    #[test]
    fn spaces_match_gymnasium() {
        let env = Acrobot::new();
        let high = vec![1.0f32, 1.0, 1.0, 1.0, 12.566371, 28.274334];
        let low = high.iter().map(|h| -h).collect();
        assert_eq!(env.observation_space(), &Space::bounded(low, high, vec![6]).unwrap());
        assert_eq!(env.action_space(), &Space::discrete(3));
    }

    #[test]
    fn bad_actions_are_errors_naming_env_and_space() {
        let mut env = acrobot_v1();
        let bad = [Action::Discrete(3), Action::Discrete(-1), Action::Continuous(&[1.0])];
        check_rejects(&mut env, "Discrete(3)", &bad);
        assert!(env.step(Action::Discrete(2), &mut [0.0f32; 6]).is_ok());
    }

    #[test]
    fn wrap_and_bound_like_gymnasium() {
        assert_eq!(wrap(3.0 * PI / 2.0, -PI, PI), 3.0 * PI / 2.0 - 2.0 * PI);
        assert_eq!(wrap(-7.0, -PI, PI), -7.0 + 2.0 * PI);
        assert_eq!(wrap(-13.0, -PI, PI), -13.0 + 2.0 * PI + 2.0 * PI);
        assert_eq!(wrap(PI, -PI, PI), PI);
        assert_eq!(wrap(f64::INFINITY, -PI, PI), f64::INFINITY);
        assert!(wrap(f64::NAN, -PI, PI).is_nan());
        assert!((-PI..=PI).contains(&wrap(-1e300, -PI, PI)));
        assert_eq!(bound(20.0, -MAX_VEL_1, MAX_VEL_1), MAX_VEL_1);
        assert_eq!(bound(-20.0, -MAX_VEL_1, MAX_VEL_1), -MAX_VEL_1);
        assert_eq!(bound(0.5, -1.0, 1.0), 0.5);
    }

    #[test]
    fn at_rest_hanging_down_stays_put() {
        let mut env = Acrobot::new();
        let mut obs = [0.0f32; 6];
        env.set_state([0.0; 4], &mut obs);
        assert_eq!(obs, [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
        let step = env.step(Action::Discrete(1), &mut obs).unwrap();
        // Only cos(-π/2) ≈ 6e-17 moves it.
        assert!(env.state().iter().all(|s| s.abs() < 1e-14), "{:?}", env.state());
        assert_eq!(step, Step { reward: -1.0, terminated: false, truncated: false });
        // A positive torque turns the second link positively.
        env.set_state([0.0; 4], &mut obs);
        env.step(Action::Discrete(2), &mut obs).unwrap();
        assert!(env.state()[1] > 0.0 && env.state()[3] > 0.0, "{:?}", env.state());
    }

    #[test]
    fn swinging_up_terminates_with_zero_reward_then_needs_reset() {
        let mut env = acrobot_v1();
        let mut obs = [0.0f32; 6];
        env.reset(Some(0), &mut obs).unwrap();
        let mut steps = 0;
        let step = loop {
            steps += 1;
            let step = env.step(Action::Discrete(if obs[4] > 0.0 { 0 } else { 2 }), &mut obs).unwrap();
            if step.done() {
                break step;
            }
            assert_eq!(step.reward, -1.0);
        };
        assert!(step.terminated && step.reward == 0.0 && steps < 500, "{steps}");
        let [t1, t2, ..] = env.inner().state();
        assert!(-t1.cos() - (t2 + t1).cos() > 1.0);
        assert!(matches!(env.step(Action::Discrete(1), &mut obs), Err(EnvError::NeedsReset { .. })));
    }

    #[test]
    fn torque_noise_is_checked_and_changes_the_dynamics() {
        assert!(Acrobot::with_torque_noise(-1.0).is_err());
        assert!(matches!(Acrobot::with_torque_noise(f64::NAN), Err(EnvError::BadArgument { .. })));
        let mut noisy = Acrobot::with_torque_noise(0.5).unwrap();
        let mut plain = Acrobot::new();
        let (mut a, mut b) = ([0.0f32; 6], [0.0f32; 6]);
        noisy.set_state([0.05, 0.0, 0.0, 0.0], &mut a);
        plain.set_state([0.05, 0.0, 0.0, 0.0], &mut b);
        noisy.step(Action::Discrete(1), &mut a).unwrap();
        plain.step(Action::Discrete(1), &mut b).unwrap();
        assert_ne!(a, b);
    }
}
