//! Shared helpers for the rlx criterion benchmarks. What needs criterion's
//! own types (setting up a group, timing whole runs, `main` for the suites
//! that are also cluster nodes) is in `benches/common/mod.rs`, which each
//! suite includes: this library does not depend on criterion.
//!
//! Set `RLX_BENCH_QUICK=1` to run every suite for a moment only (CI checks
//! that the benchmarks build and run; the figures come from full runs).

pub mod atari_stream;
/// The book's Rust examples, compiled as doctests of this crate.
#[cfg(doctest)]
mod book;
pub mod children;
pub mod lan;
pub mod nodes;

use std::time::Duration;

/// Whether the quick mode is on.
pub fn quick() -> bool {
    std::env::var_os("RLX_BENCH_QUICK").is_some_and(|v| v != "0")
}

/// Criterion settings: a short run in quick mode.
pub fn criterion() -> criterion_config::Config {
    if quick() {
        criterion_config::Config {
            warm_up: Duration::from_millis(100),
            measurement: Duration::from_millis(500),
            samples: 10,
        }
    } else {
        criterion_config::Config { warm_up: Duration::from_secs(2), measurement: Duration::from_secs(10), samples: 20 }
    }
}

/// Plain numbers, so this crate's library does not depend on criterion.
pub mod criterion_config {
    use std::time::Duration;

    /// Warm-up time, measurement time and sample count.
    pub struct Config {
        /// Warm-up time.
        pub warm_up: Duration,
        /// Measurement time.
        pub measurement: Duration,
        /// Number of samples.
        pub samples: usize,
    }
}

/// The middle value of `xs`, or the mean of the two middle ones; `None`
/// if there are none. For the figures of the benchmark tools.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// A multi-threaded tokio runtime with one worker per core, as the `rlx`
/// binary uses.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

/// How a run to a target return went (the time-to-solve suites).
pub struct Solve {
    /// Whether the 100-episode mean training return reached the target.
    pub solved: bool,
    /// Wall time from the first iteration.
    pub wall: Duration,
    /// Env steps sampled by then.
    pub env_steps: u64,
    /// The best 100-episode mean seen.
    pub best_mean: f64,
}

/// Trains until the 100-episode mean return reaches `target`, or until
/// `budget` env steps have been sampled.
pub async fn train_until(trainer: &mut rlx::Trainer, target: f64, budget: u64) -> Result<Solve, rlx::OptimizerError> {
    let t0 = std::time::Instant::now();
    let mut best_mean = f64::NEG_INFINITY;
    loop {
        let r = trainer.train().await?;
        let mean = r.episode_reward_mean.unwrap_or(f64::NEG_INFINITY);
        best_mean = best_mean.max(mean);
        if mean >= target || r.timesteps_total >= budget {
            return Ok(Solve { solved: mean >= target, wall: t0.elapsed(), env_steps: r.timesteps_total, best_mean });
        }
    }
}

/// One time-to-solve sample of the criterion suites: `algorithm` with its
/// defaults and `seed` on CartPole-v1 until the 100-episode mean reaches
/// `target`; panics if `budget` env steps run out first.
pub fn solve_cartpole(
    rt: &tokio::runtime::Runtime,
    algorithm: &str,
    seed: u64,
    target: f64,
    budget: u64,
) -> (Duration, u64) {
    rt.block_on(async {
        let config = serde_json::json!({"seed": seed});
        let (mut trainer, _) = rlx_algorithms::build_trainer(algorithm, "CartPole-v1", &config).await.expect("build");
        let s = train_until(&mut trainer, target, budget).await.expect("train");
        assert!(s.solved, "{algorithm} seed {seed} did not reach {target} in {budget} env steps");
        (s.wall, s.env_steps)
    })
}
