//! What the tests of this crate share (each test file uses some of it).
#![allow(dead_code)]

use rlx::{Action, Env, EnvError, EnvMaker, EnvSignature, Step, Wrapped, Wrapper};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Makes CartPole's step panic when a step counter shared by every copy
/// from the same maker hits a step `panic_at` picks.
struct Faulty {
    signature: EnvSignature,
    steps: Arc<AtomicUsize>,
    panic_at: Arc<dyn Fn(usize) -> bool + Send + Sync>,
}

impl Wrapper<Box<dyn Env>> for Faulty {
    fn signature<'a>(&'a self, _: &'a Box<dyn Env>) -> &'a EnvSignature {
        &self.signature
    }
    fn step(&mut self, env: &mut Box<dyn Env>, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let n = self.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if (self.panic_at)(n) {
            panic!("simulator crashed at global step {n}");
        }
        env.step(action, obs)
    }
}

/// A maker of [`Faulty`] CartPoles sharing one step counter.
pub fn faulty(panic_at: impl Fn(usize) -> bool + Send + Sync + 'static) -> EnvMaker {
    let steps = Arc::new(AtomicUsize::new(0));
    let panic_at: Arc<dyn Fn(usize) -> bool + Send + Sync> = Arc::new(panic_at);
    Arc::new(move || {
        let cartpole = rlx_envs::make("CartPole-v1")?;
        let signature = EnvSignature { name: "FaultyCartPole".into(), ..cartpole.signature().clone() };
        let faulty = Faulty { signature, steps: steps.clone(), panic_at: panic_at.clone() };
        Ok(Box::new(Wrapped::wrap(cartpole, faulty)) as Box<dyn Env>)
    })
}

/// An empty directory `rlx-test-<suite>-<name>-<pid>` under the system's
/// temporary directory (emptied if a killed run left it behind).
pub fn tmp(suite: &str, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-test-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
