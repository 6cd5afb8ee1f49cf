//! Pendulum-v1, matching Gymnasium 1.0's `PendulumEnv` step for step.
//!
//! The classic inverted-pendulum swing-up: a frictionless pendulum hangs
//! from a pivot, and a limited torque must swing it up and keep it upright.
//! The state is kept in `f64`, the torque in `f32` (Gymnasium's action
//! dtype), and every operation is done in the same order and at the same
//! precision as Gymnasium's NumPy code, so observations agree to the last
//! bit in practice and rewards exactly; the fixture test holds observations
//! to 1e-5.
//!
//! | | |
//! |---|---|
//! | observation | `Box([-1, -1, -8], [1, 1, 8])`: cos θ, sin θ, θ̇ (θ = 0 is upright) |
//! | action | `Box(-2, 2, [1])`: the torque; values outside [−2, 2] are **clipped, not rejected** (as Gymnasium's `np.clip(u, -2, 2)`), NaN is rejected |
//! | dynamics | `θ̇ += (3g/2 · sin θ + 3u) · 0.05`, clipped to ±8; `θ += θ̇ · 0.05`; g = 10 by default |
//! | reward | −(θ̂² + 0.1·θ̇² + 0.001·u²), θ̂ = θ normalized into [−π, π), u the clipped torque, from the state before the step |
//! | termination | never |
//! | truncation | 200 steps (the `TimeLimit` of `Pendulum-v1`) |
//! | reset | θ uniform in [−π, π], θ̇ uniform in [−1, 1] |
//!
//! Because out-of-range torques are clipped, [`Pendulum`]'s
//! [`step`](rlx::Env::step) accepts actions that `action_space().contains`
//! rejects.
//!
//! Squares are taken with the C library's `pow`/`powf`, as NumPy's `x**2`
//! does (it differs from `x*x` in the last bit for about one value in a
//! thousand), and the float32 parts of the cost and of the torque term are
//! computed in `f32`, as NumPy does for the float32 action.
//!
//! Resets draw from NumPy's PCG64 seeded as Gymnasium seeds it
//! ([`crate::pcg64`]): `reset(Some(s))` gives Gymnasium's `reset(seed=s)`
//! start state exactly, checked for 20 seeds by `tests/resets.rs`.

use std::f64::consts::PI;

use crate::classic::{check_argument, write_f32, ClassicControl, Dynamics};
use crate::pcg64::Pcg64;
use rlx::video::{Canvas, Frame};
use rlx::{Action, EnvError, Space, TimeLimit};

const MAX_SPEED: f64 = 8.0;
const MAX_TORQUE: f64 = 2.0;
const DT: f64 = 0.05;
/// Gymnasium's default gravity.
pub const DEFAULT_GRAVITY: f64 = 10.0;
const M: f64 = 1.0;
const L: f64 = 1.0;
const RESET_THETA: f64 = PI;
const RESET_THETA_DOT: f64 = 1.0;

/// `x**2` as NumPy computes it for a float64: the C library's `pow(x, 2)`.
/// The exponent is hidden from the optimizer, which would otherwise turn
/// the call into `x * x`.
fn square(x: f64) -> f64 {
    x.powf(std::hint::black_box(2.0))
}

/// `x**2` as NumPy computes it for a float32: the C library's `powf(x, 2)`.
fn square_f32(x: f32) -> f32 {
    x.powf(std::hint::black_box(2.0))
}

/// `x % y` with Python's (and NumPy's) sign convention: the result has the
/// sign of `y`.
fn py_mod(x: f64, y: f64) -> f64 {
    let m = x % y;
    if m != 0.0 {
        if (y < 0.0) != (m < 0.0) {
            m + y
        } else {
            m
        }
    } else {
        0.0f64.copysign(y)
    }
}

/// Gymnasium's `angle_normalize`: `x` shifted by whole turns into [−π, π).
fn angle_normalize(x: f64) -> f64 {
    py_mod(x + PI, 2.0 * PI) - PI
}

/// The pendulum without a time limit (Gymnasium's `PendulumEnv`).
/// [`pendulum_v1`] adds the 200-step limit.
pub type Pendulum = ClassicControl<PendulumDynamics>;

/// `Pendulum-v1`: [`Pendulum`] with Gymnasium's 200-step time limit.
pub fn pendulum_v1() -> TimeLimit<Pendulum> {
    TimeLimit::new(Pendulum::new(), 200)
}

/// The physics of [`Pendulum`], whose state is `(θ, θ̇)`; `Default` has
/// Gymnasium's default gravity `g = 10`.
pub struct PendulumDynamics {
    g: f64,
}

impl Default for PendulumDynamics {
    fn default() -> Self {
        Self { g: DEFAULT_GRAVITY }
    }
}

impl Pendulum {
    /// The same env with Gymnasium's `g` argument (the acceleration of
    /// gravity).
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] if `g` is not finite.
    pub fn with_gravity(g: f64) -> Result<Self, EnvError> {
        check_argument::<PendulumDynamics>(g.is_finite(), || format!("g must be finite, got {g}"))?;
        Ok(Self::with_dynamics(PendulumDynamics { g }))
    }
}

impl Dynamics for PendulumDynamics {
    const NAME: &'static str = "Pendulum-v1";
    type State = [f64; 2];
    /// The torque, not yet clipped.
    type Action = f32;

    fn observation_space() -> Space {
        let high = [1.0, 1.0, MAX_SPEED as f32];
        Space::bounded(high.iter().map(|h| -h).collect(), high.to_vec(), vec![3])
            .expect("Pendulum bounds are consistent")
    }

    fn action_space() -> Space {
        Space::uniform_box(-MAX_TORQUE as f32, MAX_TORQUE as f32, vec![1])
            .expect("Pendulum action bounds are consistent")
    }

    fn reset(rng: &mut Pcg64) -> [f64; 2] {
        [rng.uniform(-RESET_THETA, RESET_THETA), rng.uniform(-RESET_THETA_DOT, RESET_THETA_DOT)]
    }

    /// Any torque but NaN: it is clipped to [−2, 2] like Gymnasium.
    fn action(action: Action<'_>) -> Option<f32> {
        match action {
            Action::Continuous(&[u]) if !u.is_nan() => Some(u),
            _ => None,
        }
    }

    /// Never terminates: the time limit ends every episode.
    fn step(&self, state: &mut [f64; 2], u: f32, _: &mut Pcg64) -> (f64, bool) {
        let [th, thdot] = *state;
        let u = u.clamp(-MAX_TORQUE as f32, MAX_TORQUE as f32);
        // The torque terms are float32 (a Python float times the float32
        // torque), added to the float64 ones.
        let torque_cost = 0.001f64 as f32 * square_f32(u);
        let costs = square(angle_normalize(th)) + 0.1 * square(thdot) + torque_cost as f64;
        let torque_acc = (3.0 / (M * (L * L))) as f32 * u;
        let newthdot = thdot + (3.0 * self.g / (2.0 * L) * th.sin() + torque_acc as f64) * DT;
        let newthdot = newthdot.clamp(-MAX_SPEED, MAX_SPEED);
        let newth = th + newthdot * DT;
        *state = [newth, newthdot];
        (-costs, false)
    }

    fn observe(&[theta, theta_dot]: &[f64; 2], obs: &mut [f32]) {
        write_f32(obs, [theta.cos(), theta.sin(), theta_dot]);
    }

    /// 500×500 pixels as Gymnasium draws it: the frame spans ±2.2 m around
    /// the pivot, the rod is 1 m long and 0.2 m wide, 0 rad points up and
    /// the angle grows anticlockwise.
    fn draw(&[theta, _]: &[f64; 2]) -> Frame {
        let scale = 500.0 / 4.4;
        let mut canvas = Canvas::new(500, 500, [255, 255, 255]);
        let pivot = (250.0, 250.0);
        let tip = (pivot.0 - scale * theta.sin(), pivot.1 - scale * theta.cos());
        canvas.line(pivot, tip, 0.2 * scale, [204, 77, 77]);
        canvas.fill_circle(tip, 0.1 * scale, [204, 77, 77]);
        canvas.fill_circle(pivot, 0.05 * scale, [0, 0, 0]);
        canvas.into_frame()
    }

    /// The angle in degrees, normalized into [−180, 180) with 0 upright,
    /// and the angular velocity.
    fn render(&[theta, theta_dot]: &[f64; 2]) -> String {
        format!("θ={:+6.1}° (0° is upright) θ̇={theta_dot:+.3}", angle_normalize(theta).to_degrees())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::tests::{check_registered, check_rejects, check_resets};
    use rlx::{Env, Step};

    #[test]
    fn registered_like_gymnasium() {
        check_registered("Pendulum-v1", None, &Pendulum::new());
    }

    #[test]
    fn reset_is_seeded_and_in_range() {
        let mut means = [0.0f64; 2];
        check_resets(&mut Pendulum::new(), |env, a: &[f32; 3]| {
            let [th, thdot] = env.state();
            assert!((-PI..=PI).contains(&th) && (-1.0..=1.0).contains(&thdot), "{th} {thdot}");
            assert_eq!(*a, [th.cos() as f32, th.sin() as f32, thdot as f32]);
            assert!(env.observation_space().contains_row(a));
            means[0] += th / 4000.0;
            means[1] += thdot / 4000.0;
        });
        assert!(means[0].abs() < 0.1 && means[1].abs() < 0.03, "reset mean should be ~0: {means:?}");
    }

    #[test]
    fn spaces_match_gymnasium() {
        let env = Pendulum::new();
        let obs = Space::bounded(vec![-1.0, -1.0, -8.0], vec![1.0, 1.0, 8.0], vec![3]).unwrap();
        assert_eq!(env.observation_space(), &obs);
        assert_eq!(env.action_space().to_string(), "Box(-2, 2, [1])");
    }

    #[test]
    fn bad_actions_are_errors_naming_env_and_space() {
        let bad = [
            Action::Continuous(&[f32::NAN]),
            Action::Continuous(&[]),
            Action::Discrete(0),
            Action::Continuous(&[0.5, 0.5]),
        ];
        check_rejects(&mut pendulum_v1(), "Box(-2, 2, [1])", &bad);
    }

    #[test]
    fn out_of_range_torque_is_clipped() {
        let mut a = Pendulum::new();
        let mut b = Pendulum::new();
        let (mut obs_a, mut obs_b) = ([0.0f32; 3], [0.0f32; 3]);
        for (u, clipped) in [(5.0f32, 2.0f32), (-3.5, -2.0), (f32::INFINITY, 2.0), (f32::NEG_INFINITY, -2.0)] {
            a.set_state([0.3, -0.5], &mut obs_a);
            b.set_state([0.3, -0.5], &mut obs_b);
            assert!(!a.action_space().contains(Action::Continuous(&[u])));
            let sa = a.step(Action::Continuous(&[u]), &mut obs_a).unwrap();
            let sb = b.step(Action::Continuous(&[clipped]), &mut obs_b).unwrap();
            assert_eq!((obs_a, sa), (obs_b, sb), "torque {u} acts as {clipped}");
        }
    }

    #[test]
    fn reward_and_velocity_limit() {
        let mut env = Pendulum::new();
        let mut obs = [0.0f32; 3];
        env.set_state([0.0, 0.0], &mut obs);
        let step = env.step(Action::Continuous(&[0.0]), &mut obs).unwrap();
        assert_eq!(step, Step { reward: 0.0, terminated: false, truncated: false });
        env.set_state([PI, 7.99], &mut obs);
        let step = env.step(Action::Continuous(&[2.0]), &mut obs).unwrap();
        assert_eq!(obs[2], 8.0, "θ̇ is clipped to 8");
        let expected = -(square(angle_normalize(PI)) + 0.1 * square(7.99) + (0.001f64 as f32 * 4.0) as f64);
        assert_eq!(step.reward, expected);
        assert!((step.reward + (PI * PI + 0.1 * 7.99 * 7.99 + 0.004)).abs() < 1e-6);
    }

    #[test]
    fn angle_normalize_like_numpy() {
        assert_eq!(angle_normalize(0.0), 0.0);
        assert_eq!(angle_normalize(PI), -PI);
        assert!((angle_normalize(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-15);
        assert!((angle_normalize(-3.0 * PI / 2.0) - PI / 2.0).abs() < 1e-15);
        assert_eq!(py_mod(-1.0, 3.0), 2.0);
        assert_eq!(py_mod(1.0, -3.0), -2.0);
        assert_eq!(py_mod(-3.0, 3.0).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn truncates_after_200_steps_and_never_terminates() {
        let mut env = pendulum_v1();
        let mut obs = [0.0f32; 3];
        env.reset(Some(5), &mut obs).unwrap();
        for t in 1..=200 {
            let step = env.step(Action::Continuous(&[1.0]), &mut obs).unwrap();
            assert!(!step.terminated);
            assert_eq!(step.truncated, t == 200);
            assert!((-16.2736044..=0.0).contains(&step.reward), "{}", step.reward);
            assert!(env.observation_space().contains_row(&obs));
        }
    }

    #[test]
    fn gravity_must_be_finite() {
        assert!(matches!(Pendulum::with_gravity(f64::NAN), Err(EnvError::BadArgument { .. })));
        let mut env = Pendulum::with_gravity(9.81).unwrap();
        let mut obs = [0.0f32; 3];
        env.set_state([1.0, 0.0], &mut obs);
        env.step(Action::Continuous(&[0.0]), &mut obs).unwrap();
        assert_eq!(env.state()[1], (3.0 * 9.81 / 2.0 * 1.0f64.sin()) * DT);
    }
}
