//! Env wrappers users expect: [`TimeLimit`], [`FrameStack`], [`ClipReward`]
//! and [`ActionRepeat`]. Each wraps any [`Env`] and is itself an `Env`, so
//! they compose: `TimeLimit::new(ActionRepeat::new(env, 4)?, 1000)`.
//!
//! Every wrapper snapshots itself (see [`Env::save_state`]) when the env it
//! wraps can: its own counters and buffers go in the snapshot beside the
//! wrapped env's bytes, and `render` shows the wrapped env's frame.

use crate::env::{decode_state, encode_state, Env, EnvError, EnvState, Step};
use crate::space::{Action, Space};

/// Truncates episodes after `max_episode_steps` steps, as Gymnasium's
/// `TimeLimit` wrapper: the last allowed step reports `truncated = true`,
/// even if the env also terminated on it (then both flags are set, and
/// `terminated` wins: no bootstrapping).
pub struct TimeLimit<E> {
    env: E,
    max_episode_steps: usize,
    elapsed: usize,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `env`.
    pub fn new(env: E, max_episode_steps: usize) -> Self {
        Self { env, max_episode_steps, elapsed: 0 }
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }

    /// The wrapped env, mutably.
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.env
    }

    /// Steps taken in the current episode.
    pub fn elapsed_steps(&self) -> usize {
        self.elapsed
    }
}

impl<E: Env> Env for TimeLimit<E> {
    fn name(&self) -> &str {
        self.env.name()
    }
    fn observation_space(&self) -> &Space {
        self.env.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.env.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.elapsed = 0;
        self.env.reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut step = self.env.step(action, obs)?;
        self.elapsed += 1;
        if self.elapsed >= self.max_episode_steps {
            step.truncated = true;
        }
        Ok(step)
    }

    /// The steps taken so far beside the wrapped env's snapshot, so that a
    /// run resumed from a checkpoint truncates its episodes in progress at
    /// the same step as the run that saved it.
    fn save_state(&self) -> Option<EnvState> {
        let inner = self.env.save_state()?;
        Some(encode_state(&(self.elapsed, serde_bytes::ByteBuf::from(inner))))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let (elapsed, inner): (usize, serde_bytes::ByteBuf) = decode_state(self.name(), state)?;
        self.env.load_state(&inner.into_vec())?;
        self.elapsed = elapsed;
        Ok(())
    }

    fn render(&self) -> Option<String> {
        self.env.render()
    }

    fn action_mask(&self) -> Option<&[bool]> {
        self.env.action_mask()
    }
}

/// Observes the last `k` observations, oldest first, as one row of
/// `k × obs_dim` (Gymnasium's `FrameStackObservation` with its default
/// padding: after a reset every slot holds the reset observation).
pub struct FrameStack<E> {
    env: E,
    k: usize,
    frames: Vec<f32>,
    space: Space,
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
        let Space::Box { low, high, shape } = env.observation_space() else {
            return Err(bad(format!("FrameStack needs a Box observation space, not {}", env.observation_space())));
        };
        let tile = |v: &[f32]| v.iter().copied().cycle().take(v.len() * k).collect::<Vec<_>>();
        let mut stacked_shape = vec![k];
        stacked_shape.extend(shape);
        let space = Space::bounded(tile(low), tile(high), stacked_shape).map_err(|e| bad(e.to_string()))?;
        let frames = vec![0.0; low.len() * k];
        Ok(Self { env, k, frames, space })
    }

    fn write(&self, obs: &mut [f32]) {
        obs.copy_from_slice(&self.frames);
    }
}

impl<E: Env> Env for FrameStack<E> {
    fn name(&self) -> &str {
        self.env.name()
    }
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn action_space(&self) -> &Space {
        self.env.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        let d = self.frames.len() / self.k;
        self.env.reset(seed, &mut self.frames[..d])?;
        for i in 1..self.k {
            self.frames.copy_within(..d, i * d);
        }
        self.write(obs);
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let d = self.frames.len() / self.k;
        self.frames.copy_within(d.., 0);
        let n = self.frames.len();
        let step = self.env.step(action, &mut self.frames[n - d..])?;
        self.write(obs);
        Ok(step)
    }

    /// The stacked frames beside the wrapped env's snapshot, so that a run
    /// resumed from a checkpoint observes the same history as the run that
    /// saved it.
    fn save_state(&self) -> Option<EnvState> {
        let inner = self.env.save_state()?;
        Some(encode_state(&(&self.frames, serde_bytes::ByteBuf::from(inner))))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let (frames, inner): (Vec<f32>, serde_bytes::ByteBuf) = decode_state(self.name(), state)?;
        if frames.len() != self.frames.len() {
            return Err(EnvError::Other {
                env: self.name().to_string(),
                message: format!("saved FrameStack holds {} values, this one {}", frames.len(), self.frames.len()),
            });
        }
        self.env.load_state(&inner.into_vec())?;
        self.frames = frames;
        Ok(())
    }

    fn render(&self) -> Option<String> {
        self.env.render()
    }

    fn action_mask(&self) -> Option<&[bool]> {
        self.env.action_mask()
    }
}

/// Clips every reward to `[min, max]` (Gymnasium's `ClipReward`; `-1, 1` is
/// the DQN-on-Atari convention).
pub struct ClipReward<E> {
    env: E,
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
        Ok(Self { env, min, max })
    }
}

impl<E: Env> Env for ClipReward<E> {
    fn name(&self) -> &str {
        self.env.name()
    }
    fn observation_space(&self) -> &Space {
        self.env.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.env.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.env.reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut step = self.env.step(action, obs)?;
        step.reward = step.reward.clamp(self.min, self.max);
        Ok(step)
    }

    /// The wrapped env's snapshot as is (clipping keeps no state), so that
    /// checkpoints can resume episodes in progress.
    fn save_state(&self) -> Option<EnvState> {
        self.env.save_state()
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        self.env.load_state(state)
    }

    fn render(&self) -> Option<String> {
        self.env.render()
    }

    fn action_mask(&self) -> Option<&[bool]> {
        self.env.action_mask()
    }
}

/// Repeats each action `k` times and sums the rewards, stopping early when
/// the episode ends (frame skipping).
pub struct ActionRepeat<E> {
    env: E,
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
        Ok(Self { env, k })
    }
}

impl<E: Env> Env for ActionRepeat<E> {
    fn name(&self) -> &str {
        self.env.name()
    }
    fn observation_space(&self) -> &Space {
        self.env.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.env.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.env.reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut total = Step::default();
        for _ in 0..self.k {
            let step = self.env.step(action, obs)?;
            total.reward += step.reward;
            total.terminated = step.terminated;
            total.truncated = step.truncated;
            if step.done() {
                break;
            }
        }
        Ok(total)
    }

    /// The wrapped env's snapshot as is (each call repeats its action
    /// within the call, so nothing is in flight between calls), so that
    /// checkpoints can resume episodes in progress.
    fn save_state(&self) -> Option<EnvState> {
        self.env.save_state()
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        self.env.load_state(state)
    }

    fn render(&self) -> Option<String> {
        self.env.render()
    }

    fn action_mask(&self) -> Option<&[bool]> {
        self.env.action_mask()
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
        obs: Space,
        act: Space,
    }

    fn count(end: u32) -> Count {
        let obs = Space::uniform_box(0.0, 100.0, vec![1]).unwrap();
        Count { t: 0, end, snapshots: true, obs, act: Space::discrete(1) }
    }

    impl Env for Count {
        fn name(&self) -> &str {
            "Count"
        }
        fn observation_space(&self) -> &Space {
            &self.obs
        }
        fn action_space(&self) -> &Space {
            &self.act
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
