//! MountainCar-v0 and MountainCarContinuous-v0, matching Gymnasium 1.0's
//! `MountainCarEnv` and `Continuous_MountainCarEnv` step for step.
//!
//! Moore (1990): an underpowered car in a valley must rock back and forth to
//! build up enough momentum to drive up the right hill. Both variants keep
//! the state as Gymnasium does and repeat its operations in the same order,
//! so observations agree to the last bit in practice; the fixture tests hold
//! them to 1e-5 and the rewards to exact equality.
//!
//! # [`MountainCar`] (`MountainCar-v0`)
//!
//! | | |
//! |---|---|
//! | observation | `Box([-1.2, -0.07], [0.6, 0.07])` (float32 bounds): position, velocity |
//! | action | `Discrete(3)`: 0 accelerates left, 1 does nothing, 2 accelerates right |
//! | dynamics | `v += (a − 1)·0.001 − 0.0025·cos(3x)`, clipped to ±0.07; `x += v`, clipped to [−1.2, 0.6]; hitting the left wall while moving left stops the car |
//! | reward | −1 for every step, including the terminating one |
//! | termination | x ≥ 0.5 and v ≥ `goal_velocity` (0 by default) |
//! | truncation | 200 steps (the `TimeLimit` of `MountainCar-v0`) |
//! | reset | x uniform in [−0.6, −0.4], v = 0 |
//!
//! The state is `f64` throughout, as in Gymnasium.
//!
//! # [`MountainCarContinuous`] (`MountainCarContinuous-v0`)
//!
//! | | |
//! |---|---|
//! | observation | `Box([-1.2, -0.07], [0.6, 0.07])` (float32 bounds): position, velocity |
//! | action | `Box(-1, 1, [1])`: the force; values outside [−1, 1] are **clipped, not rejected** (as Gymnasium's `min(max(a, -1), 1)`), NaN is rejected |
//! | dynamics | `v += force·0.0015 − 0.0025·cos(3x)`, clipped to ±0.07; `x += v`, clipped to [−1.2, 0.6]; hitting the left wall while moving left stops the car |
//! | reward | −0.1·a² with the *unclipped* action a, plus 100 on the step that reaches the goal |
//! | termination | x ≥ 0.45 and v ≥ `goal_velocity` (0 by default) |
//! | truncation | 999 steps (the `TimeLimit` of `MountainCarContinuous-v0`) |
//! | reset | x uniform in [−0.6, −0.4], v = 0 |
//!
//! Gymnasium's continuous variant mixes float32 and float64 arithmetic: the
//! state is float64 right after a reset and float32 after every step, and
//! the action is a float32. NumPy 2's promotion rules (NEP 50) then decide,
//! per operation, whether it is done in float32 or float64; this module
//! reproduces that operation by operation (see `Num`), which is what makes
//! the observations match exactly rather than to within a float32 ulp.
//!
//! Because out-of-range forces are clipped, [`MountainCarContinuous`]'s
//! [`step`](rlx::Env::step) accepts actions that `action_space().contains`
//! rejects.
//!
//! Resets draw from NumPy's PCG64 seeded as Gymnasium seeds it
//! ([`crate::pcg64`]): `reset(Some(s))` gives Gymnasium's `reset(seed=s)`
//! start state exactly, checked for 20 seeds by `tests/resets.rs`.

use crate::classic::{check_argument, write_f32, ClassicControl, Dynamics};
use crate::pcg64::Pcg64;
use rlx::video::{Canvas, Frame};
use rlx::{Action, EnvError, Space, TimeLimit};

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
/// Goal of the discrete variant.
const GOAL_POSITION: f64 = 0.5;
/// Goal of the continuous variant.
const CONTINUOUS_GOAL_POSITION: f64 = 0.45;
const FORCE: f64 = 0.001;
const GRAVITY: f64 = 0.0025;
const POWER: f64 = 0.0015;
const MIN_ACTION: f64 = -1.0;
const MAX_ACTION: f64 = 1.0;
const RESET_LOW: f64 = -0.6;
const RESET_HIGH: f64 = -0.4;

/// Both variants observe `(position, velocity)` within the track's bounds.
fn observation_space() -> Space {
    Space::bounded(vec![MIN_POSITION as f32, -MAX_SPEED as f32], vec![MAX_POSITION as f32, MAX_SPEED as f32], vec![2])
        .expect("MountainCar bounds are consistent")
}

/// Both variants start at rest at a uniform position in [−0.6, −0.4].
fn reset_state(rng: &mut Pcg64) -> [f64; 2] {
    [rng.uniform(RESET_LOW, RESET_HIGH), 0.0]
}

/// The track from −1.2 to 0.6 with the goal `G` and the car `o`, then the
/// position and velocity.
fn render_track(position: f64, velocity: f64, goal: f64) -> String {
    let col = |x: f64| ((x - MIN_POSITION) / (MAX_POSITION - MIN_POSITION) * 40.0).round().clamp(0.0, 40.0) as usize;
    let mut track = vec!['_'; 41];
    track[col(goal)] = 'G';
    track[col(position)] = 'o';
    format!("[{}] x={position:+.3} v={velocity:+.4}", track.into_iter().collect::<String>())
}

/// Both variants' picture, 600×400 pixels as Gymnasium draws it: the hill
/// `0.45 sin(3x) + 0.55` from −1.2 to 0.6, the car tilted with the slope,
/// and a flag at `goal`.
fn draw_hill(position: f64, goal: f64) -> Frame {
    let scale = 600.0 / (MAX_POSITION - MIN_POSITION);
    let height = |x: f64| (3.0 * x).sin() * 0.45 + 0.55;
    let at = |x: f64, up: f64| ((x - MIN_POSITION) * scale, 400.0 - height(x) * scale - up);
    let mut canvas = Canvas::new(600, 400, [255, 255, 255]);
    let xs: Vec<f64> = (0..=100).map(|i| MIN_POSITION + (MAX_POSITION - MIN_POSITION) * f64::from(i) / 100.0).collect();
    for pair in xs.windows(2) {
        canvas.line(at(pair[0], 0.0), at(pair[1], 0.0), 2.0, [0, 0, 0]);
    }
    // The flag: a pole 50 px high with a pennant.
    let foot = at(goal, 0.0);
    canvas.line(foot, (foot.0, foot.1 - 50.0), 2.0, [0, 0, 0]);
    canvas.fill_polygon(
        &[(foot.0, foot.1 - 50.0), (foot.0, foot.1 - 40.0), (foot.0 + 25.0, foot.1 - 45.0)],
        [204, 204, 0],
    );
    // The car: 40×20 px, 10 px above the track, turned with the slope.
    // The slope's angle: the hill's derivative is 1.35 cos(3x).
    let (sin, cos) = (1.35 * (3.0 * position).cos()).atan().sin_cos();
    let centre = at(position, 0.0);
    let corner = |dx: f64, dy: f64| (centre.0 + dx * cos + dy * sin, centre.1 - dx * sin + dy * cos);
    canvas.fill_polygon(
        &[corner(-20.0, -10.0), corner(20.0, -10.0), corner(20.0, -30.0), corner(-20.0, -30.0)],
        [0, 0, 0],
    );
    for dx in [-10.0, 10.0] {
        canvas.fill_circle(corner(dx, -10.0), 5.0, [128, 128, 128]);
    }
    canvas.into_frame()
}

/// The physics of both variants, of [`MountainCarContinuous`] if
/// `CONTINUOUS`, else of [`MountainCar`]; the state is
/// `(position, velocity)`. `Default` has `goal_velocity` 0.
#[derive(Default)]
pub struct MountainCarDynamics<const CONTINUOUS: bool> {
    goal_velocity: f64,
}

impl<const CONTINUOUS: bool> ClassicControl<MountainCarDynamics<CONTINUOUS>>
where
    MountainCarDynamics<CONTINUOUS>: Dynamics,
{
    /// The same env with Gymnasium's `goal_velocity` argument: the car must
    /// reach the goal at least this fast.
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] if `goal_velocity` is not finite.
    pub fn with_goal_velocity(goal_velocity: f64) -> Result<Self, EnvError> {
        let finite = goal_velocity.is_finite();
        check_argument::<MountainCarDynamics<CONTINUOUS>>(finite, || {
            format!("goal_velocity must be finite, got {goal_velocity}")
        })?;
        Ok(Self::with_dynamics(MountainCarDynamics { goal_velocity }))
    }
}

/// The discrete mountain car without a time limit (Gymnasium's
/// `MountainCarEnv`). [`mountain_car_v0`] adds the 200-step limit.
pub type MountainCar = ClassicControl<MountainCarDynamics<false>>;

/// `MountainCar-v0`: [`MountainCar`] with Gymnasium's 200-step time limit.
pub fn mountain_car_v0() -> TimeLimit<MountainCar> {
    TimeLimit::new(MountainCar::new(), 200)
}

impl Dynamics for MountainCarDynamics<false> {
    const NAME: &'static str = "MountainCar-v0";
    type State = [f64; 2];
    /// 0 accelerates left, 1 does nothing, 2 accelerates right.
    type Action = i64;

    fn observation_space() -> Space {
        observation_space()
    }

    fn action_space() -> Space {
        Space::discrete(3)
    }

    fn reset(rng: &mut Pcg64) -> [f64; 2] {
        reset_state(rng)
    }

    fn action(action: Action<'_>) -> Option<i64> {
        match action {
            Action::Discrete(a @ 0..=2) => Some(a),
            _ => None,
        }
    }

    fn step(&self, state: &mut [f64; 2], a: i64, _: &mut Pcg64) -> (f64, bool) {
        let [position, velocity] = *state;
        let velocity = velocity + ((a - 1) as f64 * FORCE + (3.0 * position).cos() * (-GRAVITY));
        let mut velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        let position = (position + velocity).clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= GOAL_POSITION && velocity >= self.goal_velocity;
        *state = [position, velocity];
        (-1.0, terminated)
    }

    fn observe(state: &[f64; 2], obs: &mut [f32]) {
        write_f32(obs, *state);
    }

    fn render(&[position, velocity]: &[f64; 2]) -> String {
        render_track(position, velocity, GOAL_POSITION)
    }

    fn draw(&[position, _]: &[f64; 2]) -> Frame {
        draw_hill(position, GOAL_POSITION)
    }
}

/// The type of a scalar in Gymnasium's continuous mountain car step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    /// A Python float (or int): "weak", it takes the other operand's type.
    Py,
    /// `np.float32`.
    F32,
    /// `np.float64`.
    F64,
}

/// A scalar with NumPy 2 (NEP 50) semantics: float32 op float32 and
/// float32 op Python float are done in float32 (the Python float is first
/// rounded to float32), anything involving a float64 is done in float64,
/// and comparisons follow the same rule. `v` always holds the exact value
/// (a float32 value is stored widened).
#[derive(Clone, Copy, Debug)]
struct Num {
    v: f64,
    ty: Ty,
}

impl Num {
    fn py(v: f64) -> Self {
        Num { v, ty: Ty::Py }
    }

    fn f32(v: f32) -> Self {
        Num { v: v as f64, ty: Ty::F32 }
    }

    fn f64(v: f64) -> Self {
        Num { v, ty: Ty::F64 }
    }

    fn with(self, ty: Ty) -> Self {
        match ty {
            Ty::F32 => Num { v: self.v as f32 as f64, ty },
            _ => Num { v: self.v, ty },
        }
    }

    /// The type both operands are converted to, and the values converted.
    fn common(self, other: Num) -> (Ty, f64, f64) {
        let ty = match (self.ty, other.ty) {
            (Ty::F64, _) | (_, Ty::F64) => Ty::F64,
            (Ty::F32, _) | (_, Ty::F32) => Ty::F32,
            _ => Ty::Py,
        };
        (ty, self.with(ty).v, other.with(ty).v)
    }

    fn op(self, other: Num, f64_op: fn(f64, f64) -> f64, f32_op: fn(f32, f32) -> f32) -> Num {
        match self.common(other) {
            (Ty::F32, a, b) => Num::f32(f32_op(a as f32, b as f32)),
            (ty, a, b) => Num { v: f64_op(a, b), ty },
        }
    }

    fn add(self, other: Num) -> Num {
        self.op(other, |a, b| a + b, |a, b| a + b)
    }

    fn sub(self, other: Num) -> Num {
        self.op(other, |a, b| a - b, |a, b| a - b)
    }

    fn mul(self, other: Num) -> Num {
        self.op(other, |a, b| a * b, |a, b| a * b)
    }

    fn gt(self, other: Num) -> bool {
        let (_, a, b) = self.common(other);
        a > b
    }

    fn lt(self, other: Num) -> bool {
        let (_, a, b) = self.common(other);
        a < b
    }

    fn ge(self, other: Num) -> bool {
        let (_, a, b) = self.common(other);
        a >= b
    }

    fn eq(self, other: Num) -> bool {
        let (_, a, b) = self.common(other);
        a == b
    }
}

/// The continuous mountain car without a time limit (Gymnasium's
/// `Continuous_MountainCarEnv`). [`mountain_car_continuous_v0`] adds the
/// 999-step limit.
pub type MountainCarContinuous = ClassicControl<MountainCarDynamics<true>>;

/// `MountainCarContinuous-v0`: [`MountainCarContinuous`] with Gymnasium's
/// 999-step time limit.
pub fn mountain_car_continuous_v0() -> TimeLimit<MountainCarContinuous> {
    TimeLimit::new(MountainCarContinuous::new(), 999)
}

impl MountainCarContinuous {
    /// The state `(position, velocity)`: float64 values right after a reset,
    /// float32 values (widened) after a step, as in Gymnasium.
    pub fn state(&self) -> [f64; 2] {
        self.state.0
    }

    /// Puts the car in `state`, as a float64 state the way `reset` leaves it,
    /// and starts an episode from it (used to replay reference trajectories
    /// from their exact initial state).
    pub fn set_state(&mut self, state: [f64; 2], obs: &mut [f32]) {
        self.start((state, false), obs);
    }
}

impl Dynamics for MountainCarDynamics<true> {
    const NAME: &'static str = "MountainCarContinuous-v0";
    /// `(position, velocity)` and whether they hold float32 values (after a
    /// step) rather than float64 ones (after a reset), as Gymnasium's
    /// `self.state` does; a checkpoint keeps which, or the next step's NumPy
    /// promotion (and so its last bit) could differ.
    type State = ([f64; 2], bool);
    /// The force, not yet clipped.
    type Action = f32;

    fn observation_space() -> Space {
        observation_space()
    }

    fn action_space() -> Space {
        Space::uniform_box(MIN_ACTION as f32, MAX_ACTION as f32, vec![1])
            .expect("MountainCarContinuous action bounds are consistent")
    }

    fn reset(rng: &mut Pcg64) -> Self::State {
        (reset_state(rng), false)
    }

    /// Any force but NaN: it is clipped to [−1, 1] like Gymnasium (the
    /// reward uses the unclipped value).
    fn action(action: Action<'_>) -> Option<f32> {
        match action {
            Action::Continuous(&[a]) if !a.is_nan() => Some(a),
            _ => None,
        }
    }

    fn step(&self, state: &mut Self::State, a: f32, _: &mut Pcg64) -> (f64, bool) {
        let ([position, velocity], state_is_f32) = *state;
        let load = |v: f64| if state_is_f32 { Num::f32(v as f32) } else { Num::f64(v) };
        let (position, velocity) = (load(position), load(velocity));
        let action = Num::f32(a);
        let (min_action, max_action) = (Num::py(MIN_ACTION), Num::py(MAX_ACTION));
        let max_speed = Num::py(MAX_SPEED);
        let (min_position, max_position) = (Num::py(MIN_POSITION), Num::py(MAX_POSITION));

        // Python's max/min keep the first argument unless the other is
        // strictly better, so an in-range force stays the float32 action.
        let force = if min_action.gt(action) { min_action } else { action };
        let force = if max_action.lt(force) { max_action } else { force };
        let cos = Num::py(Num::py(3.0).mul(position).v.cos());
        let mut velocity = velocity.add(force.mul(Num::py(POWER)).sub(Num::py(GRAVITY).mul(cos)));
        if velocity.gt(max_speed) {
            velocity = max_speed;
        }
        if velocity.lt(Num::py(-MAX_SPEED)) {
            velocity = Num::py(-MAX_SPEED);
        }
        let mut position = position.add(velocity);
        if position.gt(max_position) {
            position = max_position;
        }
        if position.lt(min_position) {
            position = min_position;
        }
        if position.eq(min_position) && velocity.lt(Num::py(0.0)) {
            velocity = Num::py(0.0);
        }
        let terminated = position.ge(Num::py(CONTINUOUS_GOAL_POSITION)) && velocity.ge(Num::py(self.goal_velocity));
        let bonus = if terminated { 100.0 } else { 0.0 };
        // `math.pow(a, 2)` of a float32 is exact in float64, so a·a is the same.
        let reward = bonus - (a as f64 * a as f64) * 0.1;

        *state = ([position.with(Ty::F32).v, velocity.with(Ty::F32).v], true);
        (reward, terminated)
    }

    fn observe((values, _): &Self::State, obs: &mut [f32]) {
        write_f32(obs, *values);
    }

    fn render(&([position, velocity], _): &Self::State) -> String {
        render_track(position, velocity, CONTINUOUS_GOAL_POSITION)
    }

    fn draw(&([position, _], _): &Self::State) -> Frame {
        draw_hill(position, CONTINUOUS_GOAL_POSITION)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::tests::{check_rejects, check_resets};
    use rlx::Env;

    #[test]
    fn registered_like_gymnasium() {
        assert_eq!(crate::spec("MountainCar-v0").unwrap().reward_threshold, Some(-110.0));
        assert_eq!(crate::spec("MountainCarContinuous-v0").unwrap().reward_threshold, Some(90.0));
        let env = crate::make("MountainCar-v0").unwrap();
        assert_eq!((env.name(), env.action_space()), ("MountainCar-v0", &Space::discrete(3)));
        let env = crate::make("MountainCarContinuous-v0").unwrap();
        assert_eq!(env.name(), "MountainCarContinuous-v0");
        assert_eq!(env.action_space(), MountainCarContinuous::new().action_space());
    }

    #[test]
    fn time_limits_match_gymnasium() {
        let mut obs = [0.0f32; 2];
        let mut env = mountain_car_v0();
        env.reset(Some(0), &mut obs).unwrap();
        let steps = (1..).find(|_| env.step(Action::Discrete(1), &mut obs).unwrap().truncated).unwrap();
        assert_eq!(steps, 200);
        let mut env = mountain_car_continuous_v0();
        env.reset(Some(0), &mut obs).unwrap();
        let steps = (1..).find(|_| env.step(Action::Continuous(&[0.0]), &mut obs).unwrap().truncated).unwrap();
        assert_eq!(steps, 999);
    }

    fn check_reset<E: Env>(env: &mut E, state: impl Fn(&E) -> [f64; 2]) {
        let mut mean = 0.0;
        check_resets(env, |env, a: &[f32; 2]| {
            let [x, v] = state(env);
            assert!((RESET_LOW..RESET_HIGH).contains(&x), "{x}");
            assert_eq!(v, 0.0);
            assert_eq!(*a, [x as f32, 0.0]);
            assert!(env.observation_space().contains_row(a));
            mean += x / 4000.0;
        });
        assert!((mean + 0.5).abs() < 0.003, "reset position mean should be ~-0.5: {mean}");
    }

    #[test]
    fn reset_is_seeded_and_in_range() {
        check_reset(&mut MountainCar::new(), |e| e.state());
        check_reset(&mut MountainCarContinuous::new(), |e| e.state());
    }

    #[test]
    fn spaces_match_gymnasium() {
        let low = vec![-1.2f32, -0.07];
        let high = vec![0.6f32, 0.07];
        let obs = Space::bounded(low, high, vec![2]).unwrap();
        assert_eq!(MountainCar::new().observation_space(), &obs);
        assert_eq!(MountainCarContinuous::new().observation_space(), &obs);
        assert_eq!(MountainCar::new().action_space(), &Space::discrete(3));
        assert_eq!(MountainCarContinuous::new().action_space().to_string(), "Box(-1, 1, [1])");
    }

    #[test]
    fn bad_actions_are_errors_naming_env_and_space() {
        let bad = [Action::Discrete(3), Action::Discrete(-1), Action::Continuous(&[0.5])];
        check_rejects(&mut mountain_car_v0(), "Discrete(3)", &bad);

        let mut env = mountain_car_continuous_v0();
        let bad = [Action::Continuous(&[f32::NAN]), Action::Continuous(&[0.1, 0.2]), Action::Discrete(1)];
        check_rejects(&mut env, "Box(-1, 1, [1])", &bad);
        assert!(env.step(Action::Continuous(&[0.5]), &mut [0.0f32; 2]).is_ok());
    }

    #[test]
    fn continuous_force_is_clipped_but_reward_uses_the_action() {
        let mut a = MountainCarContinuous::new();
        let mut b = MountainCarContinuous::new();
        let (mut obs_a, mut obs_b) = ([0.0f32; 2], [0.0f32; 2]);
        a.set_state([-0.5, 0.0], &mut obs_a);
        b.set_state([-0.5, 0.0], &mut obs_b);
        assert!(!a.action_space().contains(Action::Continuous(&[3.0])));
        let sa = a.step(Action::Continuous(&[3.0]), &mut obs_a).unwrap();
        let sb = b.step(Action::Continuous(&[1.0]), &mut obs_b).unwrap();
        assert_eq!(obs_a, obs_b, "a force of 3 acts as 1");
        assert_eq!(sa.reward, -0.9);
        assert_eq!(sb.reward, -0.1);
        let sa = a.step(Action::Continuous(&[-5.0]), &mut obs_a).unwrap();
        let sb = b.step(Action::Continuous(&[-1.0]), &mut obs_b).unwrap();
        assert_eq!(obs_a, obs_b, "a force of -5 acts as -1");
        assert_eq!((sa.reward, sb.reward), (-2.5, -0.1));
    }

    #[test]
    fn the_left_wall_stops_the_car() {
        let mut env = MountainCar::new();
        let mut obs = [0.0f32; 2];
        env.set_state([-1.19, -0.05], &mut obs);
        env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!(env.state(), [MIN_POSITION, 0.0]);
        let mut env = MountainCarContinuous::new();
        env.set_state([-1.19, -0.05], &mut obs);
        env.step(Action::Continuous(&[-1.0]), &mut obs).unwrap();
        assert_eq!(obs, [-1.2, 0.0]);
    }

    #[test]
    fn pumping_reaches_the_goal_then_needs_reset() {
        let mut env = mountain_car_v0();
        let mut obs = [0.0f32; 2];
        env.reset(Some(1), &mut obs).unwrap();
        let step = loop {
            let step = env.step(Action::Discrete(if obs[1] >= 0.0 { 2 } else { 0 }), &mut obs).unwrap();
            if step.done() {
                break step;
            }
        };
        assert!(step.terminated && obs[0] >= 0.5 && step.reward == -1.0);
        assert!(matches!(env.step(Action::Discrete(1), &mut obs), Err(EnvError::NeedsReset { .. })));

        let mut env = mountain_car_continuous_v0();
        env.reset(Some(1), &mut obs).unwrap();
        let step = loop {
            let step = env.step(Action::Continuous(&[if obs[1] >= 0.0 { 1.0 } else { -1.0 }]), &mut obs).unwrap();
            if step.done() {
                break step;
            }
        };
        assert!(step.terminated && obs[0] >= 0.45 && step.reward == 100.0 - 0.1);
        assert!(matches!(env.step(Action::Continuous(&[0.0]), &mut obs), Err(EnvError::NeedsReset { .. })));
    }

    #[test]
    fn snapshots_keep_the_float32_state() {
        // After a step the continuous car's state is float32, after a reset
        // float64: a restore must bring back which, or the next step's NumPy
        // promotion (and so its last bit) can differ.
        let mut env = MountainCarContinuous::new();
        let mut obs = [0.0f32; 2];
        env.reset(Some(1), &mut obs).unwrap();
        env.step(Action::Continuous(&[0.3]), &mut obs).unwrap();
        let snapshot = env.save_state().unwrap();
        let mut restored = MountainCarContinuous::new();
        restored.reset(Some(2), &mut obs).unwrap();
        restored.load_state(&snapshot).unwrap();
        assert_eq!((restored.state.0, restored.state.1, restored.done), (env.state.0, true, false));
        // The discrete car's snapshot is not the continuous car's.
        let discrete = MountainCar::new().save_state().unwrap();
        let err = restored.load_state(&discrete).unwrap_err().to_string();
        assert!(err.contains("MountainCarContinuous-v0") && err.contains("saved state of MountainCar-v0"), "{err}");
    }

    #[test]
    fn goal_velocity_must_be_finite() {
        assert!(MountainCar::with_goal_velocity(0.01).is_ok());
        assert!(matches!(MountainCar::with_goal_velocity(f64::NAN), Err(EnvError::BadArgument { .. })));
        assert!(MountainCarContinuous::with_goal_velocity(f64::INFINITY).is_err());
    }

    #[test]
    fn numpy_promotion_rules() {
        // float32 - Python float rounds the Python float to float32 first.
        let tiny = 2f64.powi(-25) + 2f64.powi(-50);
        assert_eq!(Num::f32(1.0).sub(Num::py(tiny)).v, 1.0);
        assert_eq!(Num::f32(1.0).sub(Num::f64(tiny)).v, 1.0 - tiny);
        // and compares in float32: np.float32(0.07) > 0.07 is False.
        assert!(!Num::f32(0.07).gt(Num::py(0.07)));
        assert!(Num::f64(0.07f32 as f64).gt(Num::py(0.07)));
        assert_eq!(Num::py(3.0).mul(Num::f32(0.1)).ty, Ty::F32);
    }
}
