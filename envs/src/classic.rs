//! What the classic-control envs (CartPole, MountainCar,
//! MountainCarContinuous, Acrobot, Pendulum) share: [`ClassicControl`]
//! wraps the [`Dynamics`] of each, as [`MinAtar`](crate::minatar::MinAtar)
//! wraps a game.
//!
//! Each env's own file keeps what makes it that env, to be read top to
//! bottom against its Gymnasium source: its constants, its spaces, its
//! reset distribution, its physics, its observation and its rendering.
//! This module keeps the bookkeeping they all did the same way: the state,
//! the seeded generator, the `done` flag, the spaces, the `Env` methods and
//! the checkpoint snapshot.
//!
//! Seeding happens in one place, [`seeded`]: NumPy's PCG64 generator
//! seeded as Gymnasium seeds it ([`crate::pcg64`]), so `reset(Some(s))`
//! starts each env exactly where Gymnasium's `reset(seed=s)` does, and
//! unseeded resets continue the same stream as Gymnasium's.

use crate::pcg64::Pcg64;
use crate::snapshot::Snapshot;
use rlx::env::{invalid_action, EnvState};
use rlx::video::Frame;
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The generator of a classic-control env seeded with `seed`: on
/// `reset(Some(seed))`, and with 0 when the env is built (Gymnasium seeds
/// a new env from the operating system instead; rlx stays reproducible).
fn seeded(seed: u64) -> Pcg64 {
    Pcg64::from_seed(seed)
}

/// One classic-control task without a time limit: what the body of
/// Gymnasium's `<Name>Env` class computes. Implemented by the envs of this
/// crate only.
pub trait Dynamics: Send {
    /// The registered name, e.g. `"CartPole-v1"`.
    const NAME: &'static str;

    /// Everything that changes within an episode (for most envs the `f64`
    /// state vector), saved in checkpoints; `Default` is the state before
    /// the first reset.
    type State: Copy + Default + Send + Serialize + DeserializeOwned;

    /// An action of the action space, once checked.
    type Action;

    /// The space observations lie in.
    fn observation_space() -> Space;

    /// The space actions must lie in.
    fn action_space() -> Space;

    /// The start state of an episode, drawn from `rng`.
    fn reset(rng: &mut Pcg64) -> Self::State;

    /// `action` as this env takes it, or `None` if it does not (the step is
    /// then an [`EnvError::InvalidAction`]).
    fn action(action: Action<'_>) -> Option<Self::Action>;

    /// One step from `state`, which it updates; returns the reward and
    /// whether the episode terminated. `rng` is the env's generator, for
    /// envs with noise.
    fn step(&self, state: &mut Self::State, action: Self::Action, rng: &mut Pcg64) -> (f64, bool);

    /// Writes the observation of `state` into `obs`.
    fn observe(state: &Self::State, obs: &mut [f32]);

    /// One line of text showing `state` (see [`Env::render`]).
    fn render(state: &Self::State) -> String;

    /// A picture of `state` (see [`Env::render_rgb`]), laid out as
    /// Gymnasium's `rgb_array` is: the same size and scale.
    fn draw(state: &Self::State) -> Frame;
}

/// Writes `values` into `obs`, rounded to `f32` as Gymnasium's float32
/// observations are.
pub(crate) fn write_f32(obs: &mut [f32], values: impl IntoIterator<Item = f64>) {
    for (o, v) in obs.iter_mut().zip(values) {
        *o = v as f32;
    }
}

/// `Ok` if `ok`, otherwise an [`EnvError::BadArgument`] of the env of `D`
/// with `message`: the check of a constructor's argument.
pub(crate) fn check_argument<D: Dynamics>(ok: bool, message: impl FnOnce() -> String) -> Result<(), EnvError> {
    if ok {
        Ok(())
    } else {
        Err(EnvError::BadArgument { env: D::NAME.into(), message: message() })
    }
}

/// A classic-control env: its dynamics (the crate's sealed `Dynamics`
/// trait, one implementation per env) with the state, the seeded generator,
/// the `done` flag and the signature (name and spaces). Each env names its own, e.g.
/// [`CartPole`](crate::CartPole).
pub struct ClassicControl<D: Dynamics> {
    dynamics: D,
    pub(crate) state: D::State,
    pub(crate) done: bool,
    rng: Pcg64,
    signature: EnvSignature,
}

impl<D: Dynamics + Default> Default for ClassicControl<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Dynamics + Default> ClassicControl<D> {
    /// The env with Gymnasium's default arguments; call `reset` before
    /// stepping.
    pub fn new() -> Self {
        Self::with_dynamics(D::default())
    }
}

impl<D: Dynamics> ClassicControl<D> {
    /// The env with `dynamics`; call `reset` before stepping.
    pub(crate) fn with_dynamics(dynamics: D) -> Self {
        Self {
            dynamics,
            state: D::State::default(),
            done: true,
            rng: seeded(0),
            signature: EnvSignature::new(D::NAME, D::observation_space(), D::action_space()),
        }
    }

    /// Puts the env in `state` and starts an episode from it.
    pub(crate) fn start(&mut self, state: D::State, obs: &mut [f32]) {
        self.state = state;
        self.done = false;
        D::observe(&self.state, obs);
    }
}

/// The envs whose state is an `f64` vector: all but MountainCarContinuous,
/// whose state also records whether it holds float32 values and which has
/// its own `state` and `set_state`.
impl<D: Dynamics<State = [f64; N]>, const N: usize> ClassicControl<D> {
    /// The full `f64` state (its variables are named on the env's dynamics
    /// type, e.g. [`CartPoleDynamics`](crate::cartpole::CartPoleDynamics)).
    pub fn state(&self) -> [f64; N] {
        self.state
    }

    /// Puts the env in `state` and starts an episode from it (used to
    /// replay reference trajectories from their exact initial state).
    pub fn set_state(&mut self, state: [f64; N], obs: &mut [f32]) {
        self.start(state, obs);
    }
}

impl<D: Dynamics> Env for ClassicControl<D> {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let Some(seed) = seed {
            self.rng = seeded(seed);
        }
        let state = D::reset(&mut self.rng);
        self.start(state, obs);
        Ok(())
    }

    /// # Errors
    /// [`EnvError::InvalidAction`] for an action the env does not take
    /// (some envs clip out-of-range values instead, see their docs);
    /// [`EnvError::NeedsReset`] before the first reset and after
    /// termination.
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Some(checked) = D::action(action) else {
            return Err(invalid_action(self, action));
        };
        if self.done {
            return Err(EnvError::NeedsReset { env: D::NAME.into() });
        }
        let (reward, terminated) = self.dynamics.step(&mut self.state, checked, &mut self.rng);
        self.done = terminated;
        D::observe(&self.state, obs);
        Ok(Step { reward, terminated, truncated: false })
    }

    /// The state, the `done` flag and the generator, so that a run resumed
    /// from a checkpoint continues its episodes bit for bit.
    fn save_state(&self) -> Option<EnvState> {
        Some(Snapshot::save(D::NAME, self.state, self.done, &self.rng))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let s = Snapshot::load(D::NAME, state)?;
        (self.state, self.done, self.rng) = (s.state, s.done, s.rng);
        Ok(())
    }

    fn render(&self) -> Option<String> {
        Some(D::render(&self.state))
    }

    fn render_rgb(&mut self) -> Result<Option<Frame>, EnvError> {
        Ok(Some(D::draw(&self.state)))
    }
}

/// Checks every classic-control env runs against itself.
#[cfg(test)]
pub(crate) mod tests {
    use rlx::{Action, Env, EnvError};

    /// The registration test every classic-control env shares: `name` is
    /// registered with Gymnasium's `reward_threshold` and makes an env of
    /// that name with `native`'s observation space.
    pub(crate) fn check_registered(name: &str, reward_threshold: Option<f64>, native: &dyn Env) {
        assert_eq!(crate::spec(name).unwrap().reward_threshold, reward_threshold);
        let env = crate::make(name).unwrap();
        assert_eq!((env.name(), env.observation_space()), (name, native.observation_space()));
    }

    /// The bad-action test every classic-control env shares: after a reset,
    /// each of `bad` is an [`EnvError::InvalidAction`] whose message names
    /// the env, the action and the action space `space`.
    pub(crate) fn check_rejects(env: &mut dyn Env, space: &str, bad: &[Action<'_>]) {
        let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
        env.reset(Some(0), &mut obs).unwrap();
        for &action in bad {
            let err = env.step(action, &mut obs).unwrap_err();
            assert!(matches!(err, EnvError::InvalidAction { .. }), "{err}");
            let err = err.to_string();
            assert!(err.contains(env.name()) && err.contains(&action.to_string()) && err.contains(space), "{err}");
        }
    }

    /// The reset test every classic-control env shares: the same seed gives
    /// the same start and another seed another one; then `check` sees each
    /// of 4000 unseeded starts (the env and its observation), to check that
    /// it lies in the reset distribution.
    pub(crate) fn check_resets<E: Env, const N: usize>(env: &mut E, mut check: impl FnMut(&E, &[f32; N])) {
        let mut a = [0.0f32; N];
        let mut b = [0.0f32; N];
        env.reset(Some(3), &mut a).unwrap();
        env.reset(Some(3), &mut b).unwrap();
        assert_eq!(a, b);
        env.reset(Some(4), &mut b).unwrap();
        assert_ne!(a, b);
        for _ in 0..4000 {
            env.reset(None, &mut a).unwrap();
            check(env, &a);
        }
    }
}
