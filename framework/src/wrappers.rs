//! Env wrappers: [`Wrapper`], the one way to write one, and the four users
//! expect, [`TimeLimit`], [`FrameStack`], [`ClipReward`] and
//! [`ActionRepeat`]. Each wraps any [`Env`] and is itself an `Env`, so they
//! compose: `TimeLimit::new(ActionRepeat::new(env, 4)?, 1000)`.
//!
//! A wrapper is a [`Wrapped`] env: the env it wraps beside a [`Wrapper`],
//! the part that says what changes. Every method the `Wrapper` does not
//! override passes through to the wrapped env, as in Gymnasium's `Wrapper`
//! class, so a wrapper that only clips rewards writes only `step`. The
//! built-in wrappers are such pairs under their own names (`TimeLimit<E>`
//! is `Wrapped<E, StepCounter>`), with constructors of their own.
//!
//! Every built-in wrapper snapshots itself (see [`Env::save_state`]) when the
//! env it wraps can: its own counters and buffers go in the snapshot beside
//! the wrapped env's bytes ([`snapshot_beside`]), and `render` shows the
//! wrapped env's frame.

use crate::env::{decode_state, encode_state, Env, EnvError, EnvSignature, EnvState, Step};
use crate::space::{Action, Space};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// What a wrapper changes about the env `E` it wraps. Each method is given
/// the wrapped env and by default passes the call on to it unchanged:
/// override only what the wrapper changes, and put the wrapper in a
/// [`Wrapped`] to get an [`Env`].
///
/// # Examples
/// ```
/// use rlx::{Action, Env, EnvError, Step, Wrapped, Wrapper};
/// # use rlx::{EnvSignature, Space};
/// # struct Zeros(EnvSignature);
/// # impl Env for Zeros {
/// #     fn signature(&self) -> &EnvSignature { &self.0 }
/// #     fn reset(&mut self, _: Option<u64>, _: &mut [f32]) -> Result<(), EnvError> { Ok(()) }
/// #     fn step(&mut self, _: Action<'_>, _: &mut [f32]) -> Result<Step, EnvError> { Ok(Step::default()) }
/// # }
/// # let my_env = Zeros(EnvSignature::new("Zeros", Space::discrete(1), Space::discrete(2)));
///
/// /// Pays 0.5 more on every step that does not end the episode.
/// struct Bonus;
///
/// impl<E: Env> Wrapper<E> for Bonus {
///     fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
///         let mut step = env.step(action, obs)?;
///         if !step.done() {
///             step.reward += 0.5;
///         }
///         Ok(step)
///     }
/// }
///
/// let mut env = Wrapped::wrap(my_env, Bonus);
/// let mut obs = [0.0];
/// env.reset(Some(0), &mut obs)?;
/// assert_eq!(env.step(Action::Discrete(1), &mut obs)?.reward, 0.5);
/// assert_eq!(env.name(), "Zeros", "the name and spaces pass through");
/// # Ok::<(), EnvError>(())
/// ```
pub trait Wrapper<E: Env>: Send {
    /// The wrapped env's name and spaces. A wrapper that changes one builds
    /// its own signature when it is built, and returns it here.
    fn signature<'a>(&'a self, env: &'a E) -> &'a EnvSignature {
        env.signature()
    }

    /// See [`Env::reset`].
    ///
    /// # Errors
    /// The wrapped env's, by default.
    fn reset(&mut self, env: &mut E, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        env.reset(seed, obs)
    }

    /// See [`Env::step`].
    ///
    /// # Errors
    /// The wrapped env's, by default.
    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        env.step(action, obs)
    }

    /// See [`Env::save_state`]; the wrapped env's snapshot as is by default,
    /// right for a wrapper that keeps no state between calls (one that does
    /// keeps it beside the wrapped env's: see [`snapshot_beside`]).
    fn save_state(&self, env: &E) -> Option<EnvState> {
        env.save_state()
    }

    /// See [`Env::load_state`].
    ///
    /// # Errors
    /// The wrapped env's, by default.
    fn load_state(&mut self, env: &mut E, state: &EnvState) -> Result<(), EnvError> {
        env.load_state(state)
    }

    /// See [`Env::render`].
    fn render(&self, env: &E) -> Option<String> {
        env.render()
    }

    /// See [`Env::render_rgb`].
    ///
    /// # Errors
    /// The wrapped env's, by default.
    fn render_rgb(&mut self, env: &mut E) -> Result<Option<crate::video::Frame>, EnvError> {
        env.render_rgb()
    }

    /// See [`Env::action_mask`].
    fn action_mask<'a>(&'a self, env: &'a E) -> Option<&'a [bool]> {
        env.action_mask()
    }
}

/// The env `E` wrapped by `W`: an [`Env`] each of whose methods is `W`'s,
/// given the wrapped env (see [`Wrapper`]).
pub struct Wrapped<E, W> {
    env: E,
    wrapper: W,
}

impl<E: Env, W: Wrapper<E>> Wrapped<E, W> {
    /// `env` wrapped by `wrapper`.
    pub fn wrap(env: E, wrapper: W) -> Self {
        Self { env, wrapper }
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }

    /// The wrapped env, mutably.
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.env
    }

    /// The wrapper.
    pub fn wrapper(&self) -> &W {
        &self.wrapper
    }
}

impl<E: Env, W: Wrapper<E>> Env for Wrapped<E, W> {
    fn signature(&self) -> &EnvSignature {
        self.wrapper.signature(&self.env)
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.wrapper.reset(&mut self.env, seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        self.wrapper.step(&mut self.env, action, obs)
    }
    fn save_state(&self) -> Option<EnvState> {
        self.wrapper.save_state(&self.env)
    }
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        self.wrapper.load_state(&mut self.env, state)
    }
    fn render(&self) -> Option<String> {
        self.wrapper.render(&self.env)
    }
    fn render_rgb(&mut self) -> Result<Option<crate::video::Frame>, EnvError> {
        self.wrapper.render_rgb(&mut self.env)
    }
    fn action_mask(&self) -> Option<&[bool]> {
        self.wrapper.action_mask(&self.env)
    }
}

/// The snapshot of a wrapper that keeps state of its own between calls:
/// `own` beside `env`'s snapshot, or `None` if `env` has none. For
/// [`Wrapper::save_state`]; [`split_snapshot`] takes it apart.
pub fn snapshot_beside<E: Env, T: Serialize>(env: &E, own: T) -> Option<EnvState> {
    let inner = env.save_state()?;
    Some(encode_state(&(own, serde_bytes::ByteBuf::from(inner))))
}

/// A snapshot written by [`snapshot_beside`] taken apart: the wrapper's own
/// state and the wrapped env's snapshot, for [`Wrapper::load_state`] to
/// check and restore (the wrapped env first, so that a snapshot it refuses
/// changes nothing).
///
/// # Errors
/// [`EnvError::Other`] naming `env` if the bytes are not such a snapshot.
pub fn split_snapshot<E: Env, T: DeserializeOwned>(env: &E, state: &EnvState) -> Result<(T, EnvState), EnvError> {
    let (own, inner): (T, serde_bytes::ByteBuf) = decode_state(env.name(), state)?;
    Ok((own, inner.into_vec()))
}

/// Truncates episodes after `max_episode_steps` steps, as Gymnasium's
/// `TimeLimit` wrapper: the last allowed step reports `truncated = true`,
/// even if the env also terminated on it (then both flags are set, and
/// `terminated` wins: no bootstrapping).
pub type TimeLimit<E> = Wrapped<E, StepCounter>;

/// The [`Wrapper`] of a [`TimeLimit`]: the limit and the steps taken so far.
pub struct StepCounter {
    max_episode_steps: usize,
    elapsed: usize,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `env`.
    pub fn new(env: E, max_episode_steps: usize) -> Self {
        Self::wrap(env, StepCounter { max_episode_steps, elapsed: 0 })
    }

    /// Steps taken in the current episode.
    pub fn elapsed_steps(&self) -> usize {
        self.wrapper.elapsed
    }
}

impl<E: Env> Wrapper<E> for StepCounter {
    fn reset(&mut self, env: &mut E, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.elapsed = 0;
        env.reset(seed, obs)
    }

    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut step = env.step(action, obs)?;
        self.elapsed += 1;
        if self.elapsed >= self.max_episode_steps {
            step.truncated = true;
        }
        Ok(step)
    }

    /// The steps taken so far beside the wrapped env's snapshot, so that a
    /// run resumed from a checkpoint truncates its episodes in progress at
    /// the same step as the run that saved it.
    fn save_state(&self, env: &E) -> Option<EnvState> {
        snapshot_beside(env, self.elapsed)
    }

    fn load_state(&mut self, env: &mut E, state: &EnvState) -> Result<(), EnvError> {
        let (elapsed, inner) = split_snapshot(env, state)?;
        env.load_state(&inner)?;
        self.elapsed = elapsed;
        Ok(())
    }
}

/// Observes the last `k` observations, oldest first, as one row of
/// `k × obs_dim` (Gymnasium's `FrameStackObservation` with its default
/// padding: after a reset every slot holds the reset observation).
pub type FrameStack<E> = Wrapped<E, Frames>;

/// The [`Wrapper`] of a [`FrameStack`]: the last `k` frames and the
/// signature with the stacked observation space.
pub struct Frames {
    k: usize,
    frames: Vec<f32>,
    signature: EnvSignature,
}

impl<E: Env> FrameStack<E> {
    /// Wraps `env`, stacking `k` frames.
    ///
    /// # Errors
    /// If `k` is zero or the observation space is not a `Box`.
    pub fn new(env: E, k: usize) -> Result<Self, EnvError> {
        let bad = |message: String| EnvError::BadArgument { env: env.name().to_string(), message };
        if k == 0 {
            return Err(bad("FrameStack needs k >= 1".into()));
        }
        let Space::Box { low, high, shape, dtype } = env.observation_space() else {
            return Err(bad(format!("FrameStack needs a Box observation space, not {}", env.observation_space())));
        };
        let tile = |v: &[f32]| v.iter().copied().cycle().take(v.len() * k).collect::<Vec<_>>();
        let mut stacked_shape = vec![k];
        stacked_shape.extend(shape);
        let space = Space::bounded(tile(low), tile(high), stacked_shape).map_err(|e| bad(e.to_string()))?;
        let space = space.with_dtype(*dtype);
        let frames = vec![0.0; low.len() * k];
        let signature = EnvSignature::new(env.name(), space, env.action_space().clone());
        Ok(Self::wrap(env, Frames { k, frames, signature }))
    }
}

impl<E: Env> Wrapper<E> for Frames {
    fn signature<'a>(&'a self, _env: &'a E) -> &'a EnvSignature {
        &self.signature
    }

    fn reset(&mut self, env: &mut E, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        let d = self.frames.len() / self.k;
        env.reset(seed, &mut self.frames[..d])?;
        for i in 1..self.k {
            self.frames.copy_within(..d, i * d);
        }
        obs.copy_from_slice(&self.frames);
        Ok(())
    }

    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let d = self.frames.len() / self.k;
        self.frames.copy_within(d.., 0);
        let n = self.frames.len();
        let step = env.step(action, &mut self.frames[n - d..])?;
        obs.copy_from_slice(&self.frames);
        Ok(step)
    }

    /// The stacked frames beside the wrapped env's snapshot, so that a run
    /// resumed from a checkpoint observes the same history as the run that
    /// saved it.
    fn save_state(&self, env: &E) -> Option<EnvState> {
        snapshot_beside(env, &self.frames)
    }

    fn load_state(&mut self, env: &mut E, state: &EnvState) -> Result<(), EnvError> {
        let (frames, inner): (Vec<f32>, _) = split_snapshot(env, state)?;
        if frames.len() != self.frames.len() {
            return Err(EnvError::Other {
                env: env.name().to_string(),
                message: format!("saved FrameStack holds {} values, this one {}", frames.len(), self.frames.len()),
            });
        }
        env.load_state(&inner)?;
        self.frames = frames;
        Ok(())
    }
}

/// Clips every reward to `[min, max]` (Gymnasium's `ClipReward`; `-1, 1` is
/// the DQN-on-Atari convention).
pub type ClipReward<E> = Wrapped<E, RewardBounds>;

/// The [`Wrapper`] of a [`ClipReward`]: the bounds. It keeps no state, so
/// its snapshot is the wrapped env's.
pub struct RewardBounds {
    min: f64,
    max: f64,
}

impl<E: Env> ClipReward<E> {
    /// Wraps `env`.
    ///
    /// # Errors
    /// If `min > max` or either is NaN.
    pub fn new(env: E, min: f64, max: f64) -> Result<Self, EnvError> {
        if min.is_nan() || max.is_nan() || min > max {
            return Err(EnvError::BadArgument {
                env: env.name().to_string(),
                message: format!("ClipReward needs min <= max, got [{min}, {max}]"),
            });
        }
        Ok(Self::wrap(env, RewardBounds { min, max }))
    }
}

impl<E: Env> Wrapper<E> for RewardBounds {
    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut step = env.step(action, obs)?;
        step.reward = step.reward.clamp(self.min, self.max);
        Ok(step)
    }
}

/// Repeats each action `k` times and sums the rewards, stopping early when
/// the episode ends (frame skipping).
pub type ActionRepeat<E> = Wrapped<E, Repeat>;

/// The [`Wrapper`] of an [`ActionRepeat`]: `k`. Each call repeats its action
/// within the call, so nothing is in flight between calls and its snapshot
/// is the wrapped env's.
pub struct Repeat {
    k: usize,
}

impl<E: Env> ActionRepeat<E> {
    /// Wraps `env`.
    ///
    /// # Errors
    /// If `k` is zero.
    pub fn new(env: E, k: usize) -> Result<Self, EnvError> {
        if k == 0 {
            return Err(EnvError::BadArgument {
                env: env.name().to_string(),
                message: "ActionRepeat needs k >= 1".into(),
            });
        }
        Ok(Self::wrap(env, Repeat { k }))
    }
}

impl<E: Env> Wrapper<E> for Repeat {
    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut total = Step::default();
        for _ in 0..self.k {
            let step = env.step(action, obs)?;
            total.reward += step.reward;
            total.terminated = step.terminated;
            total.truncated = step.truncated;
            if step.done() {
                break;
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::invalid_action;

    /// Observation = step count; reward = step count; terminates at `end`.
    /// Snapshots itself unless `snapshots` is false.
    struct Count {
        t: u32,
        end: u32,
        snapshots: bool,
        signature: EnvSignature,
    }

    fn count(end: u32) -> Count {
        let obs = Space::uniform_box(0.0, 100.0, vec![1]).unwrap();
        Count { t: 0, end, snapshots: true, signature: EnvSignature::new("Count", obs, Space::discrete(1)) }
    }

    impl Env for Count {
        fn signature(&self) -> &EnvSignature {
            &self.signature
        }
        fn reset(&mut self, _: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
            self.t = 0;
            obs[0] = 0.0;
            Ok(())
        }
        fn step(&mut self, a: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
            if a != Action::Discrete(0) {
                return Err(invalid_action(self, a));
            }
            self.t += 1;
            obs[0] = self.t as f32;
            Ok(Step { reward: self.t as f64, terminated: self.t == self.end, truncated: false })
        }
        fn save_state(&self) -> Option<EnvState> {
            self.snapshots.then(|| encode_state(&self.t))
        }
        fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
            self.t = decode_state(self.name(), state)?;
            Ok(())
        }
        fn render(&self) -> Option<String> {
            Some(format!("t={}", self.t))
        }
    }

    #[test]
    fn time_limit_truncates_like_gymnasium() {
        let mut env = TimeLimit::new(count(100), 3);
        let mut obs = [0.0];
        env.reset(None, &mut obs).unwrap();
        let steps: Vec<Step> = (0..3).map(|_| env.step(Action::Discrete(0), &mut obs).unwrap()).collect();
        assert_eq!(steps.iter().map(|s| s.truncated).collect::<Vec<_>>(), [false, false, true]);
        let mut env = TimeLimit::new(count(3), 3);
        env.reset(None, &mut obs).unwrap();
        let last = (0..3).map(|_| env.step(Action::Discrete(0), &mut obs).unwrap()).last().unwrap();
        assert!(last.terminated && last.truncated);
    }

    #[test]
    fn frame_stack_keeps_the_last_k_oldest_first() {
        let mut env = FrameStack::new(count(100), 3).unwrap();
        assert_eq!(env.observation_space().flat_dim(), 3);
        assert!(matches!(env.observation_space(), Space::Box { shape, .. } if shape == &vec![3, 1]));
        let mut obs = [9.0; 3];
        env.reset(None, &mut obs).unwrap();
        assert_eq!(obs, [0.0, 0.0, 0.0]);
        env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!(obs, [0.0, 0.0, 1.0]);
        env.step(Action::Discrete(0), &mut obs).unwrap();
        env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!(obs, [1.0, 2.0, 3.0]);
        assert!(FrameStack::new(count(1), 0).is_err());
    }

    #[test]
    fn clip_reward_and_action_repeat() {
        let mut env = ClipReward::new(count(100), -1.0, 2.0).unwrap();
        let mut obs = [0.0];
        env.reset(None, &mut obs).unwrap();
        assert_eq!(env.step(Action::Discrete(0), &mut obs).unwrap().reward, 1.0);
        assert_eq!(env.step(Action::Discrete(0), &mut obs).unwrap().reward, 2.0);
        assert_eq!(env.step(Action::Discrete(0), &mut obs).unwrap().reward, 2.0);
        assert!(ClipReward::new(count(1), 1.0, -1.0).is_err());

        let mut env = ActionRepeat::new(count(5), 2).unwrap();
        env.reset(None, &mut obs).unwrap();
        let s = env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!((s.reward, obs[0]), (3.0, 2.0));
        env.step(Action::Discrete(0), &mut obs).unwrap();
        // Steps 5 terminates: the third repeat stops after one step.
        let s = env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!((s.reward, s.terminated, obs[0]), (5.0, true, 5.0));
        assert!(env.step(Action::Discrete(1), &mut obs).is_err());
    }

    /// Every wrapper at once, around a `Count` that ends at step 30.
    fn stack() -> TimeLimit<FrameStack<ClipReward<ActionRepeat<Count>>>> {
        let env = ActionRepeat::new(count(30), 2).unwrap();
        TimeLimit::new(FrameStack::new(ClipReward::new(env, -1.0, 2.5).unwrap(), 3).unwrap(), 6)
    }

    /// Steps `env` `n` times from its current state, resetting when an
    /// episode ends, and records every observation and step.
    fn run(env: &mut impl Env, obs: &mut [f32; 3], n: usize) -> Vec<([f32; 3], Step)> {
        (0..n)
            .map(|_| {
                let step = env.step(Action::Discrete(0), obs).unwrap();
                let out = (*obs, step);
                if step.done() {
                    env.reset(None, obs).unwrap();
                }
                out
            })
            .collect()
    }

    #[test]
    fn wrappers_resume_from_a_snapshot_exactly() {
        let mut env = stack();
        let mut obs = [0.0; 3];
        env.reset(None, &mut obs).unwrap();
        run(&mut env, &mut obs, 4);
        let snapshot = env.save_state().expect("every layer snapshots");
        let (saved_obs, saved_elapsed) = (obs, env.elapsed_steps());
        let want = run(&mut env, &mut obs, 20);
        // The time limit (6 steps of 2) ends episodes before Count does.
        assert!(want.iter().any(|(_, s)| s.truncated && !s.terminated), "{want:?}");

        let mut restored = stack();
        restored.reset(None, &mut obs).unwrap();
        restored.step(Action::Discrete(0), &mut obs).unwrap();
        restored.load_state(&snapshot).unwrap();
        assert_eq!(restored.elapsed_steps(), saved_elapsed);
        assert_eq!(restored.render().as_deref(), Some("t=8"), "render shows the innermost env");
        obs = saved_obs;
        assert_eq!(run(&mut restored, &mut obs, 20), want);
    }

    #[test]
    fn wrappers_without_an_inner_snapshot_have_none() {
        let mut env = stack();
        env.inner_mut().env.env.env.snapshots = false;
        assert_eq!(env.save_state(), None);
        assert!(TimeLimit::new(count(3), 3).save_state().is_some());
        assert_eq!(ClipReward::new(count(3), 0.0, 1.0).unwrap().save_state(), count(3).save_state());
    }

    #[test]
    fn bad_snapshots_are_errors_and_change_nothing() {
        let mut env = stack();
        let mut obs = [0.0; 3];
        env.reset(None, &mut obs).unwrap();
        env.step(Action::Discrete(0), &mut obs).unwrap();
        let before = env.save_state().unwrap();
        for garbage in [vec![], vec![0xc1], b"not a snapshot".to_vec(), vec![0x92, 0x01, 0xc4, 0x01, 0xff]] {
            let err = env.load_state(&garbage).unwrap_err();
            assert!(matches!(err, EnvError::Other { .. }) && err.to_string().contains("Count"), "{err}");
        }
        // A snapshot of a FrameStack of another depth.
        let other = FrameStack::new(count(30), 2).unwrap().save_state().unwrap();
        assert!(env.inner_mut().load_state(&other).is_err());
        assert_eq!(env.save_state().unwrap(), before);
    }
}
