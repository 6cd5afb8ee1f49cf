//! What the fault tests of this crate share.

use rlx::{Action, Env, EnvError, EnvMaker, Space, Step};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// CartPole whose step panics when a step counter shared by every copy
/// from the same maker hits a step `panic_at` picks.
struct Faulty {
    inner: Box<dyn Env>,
    steps: Arc<AtomicUsize>,
    panic_at: Arc<dyn Fn(usize) -> bool + Send + Sync>,
}

impl Env for Faulty {
    fn name(&self) -> &str {
        "FaultyCartPole"
    }
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let n = self.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if (self.panic_at)(n) {
            panic!("simulator crashed at global step {n}");
        }
        self.inner.step(action, obs)
    }
}

/// A maker of [`Faulty`] CartPoles sharing one step counter.
pub fn faulty(panic_at: impl Fn(usize) -> bool + Send + Sync + 'static) -> EnvMaker {
    let steps = Arc::new(AtomicUsize::new(0));
    let panic_at: Arc<dyn Fn(usize) -> bool + Send + Sync> = Arc::new(panic_at);
    Arc::new(move || {
        Ok(Box::new(Faulty { inner: rlx_envs::make("CartPole-v1")?, steps: steps.clone(), panic_at: panic_at.clone() })
            as Box<dyn Env>)
    })
}
