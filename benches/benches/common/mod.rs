//! What the criterion suites share: how a group is set up, how a
//! time-to-solve sample is timed, and `main` for the suites whose binary is
//! also a cluster node. Each suite includes it (`mod common;`) and uses
//! some of it.
#![allow(dead_code)]

use criterion::measurement::WallTime;
use criterion::{Bencher, BenchmarkGroup, Criterion, SamplingMode};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rlx::postprocessing::N_STEP_DISCOUNTS;
use rlx::{fields, SampleBatch, Space};
use std::time::Duration;

/// A benchmark group with the suites' settings ([`rlx_benches::criterion`]:
/// a moment only in quick mode).
pub fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let cfg = rlx_benches::criterion();
    let mut group = c.benchmark_group(name);
    group.warm_up_time(cfg.warm_up).measurement_time(cfg.measurement).sample_size(cfg.samples);
    group
}

/// A group of whole training runs (time to solve): flat sampling, one run
/// per sample, ten samples, and `seconds` of measurement (1 in quick mode).
pub fn runs_group<'a>(c: &'a mut Criterion, name: &str, seconds: u64) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(if rlx_benches::quick() { 1 } else { seconds }));
    group
}

/// Times one run per iteration, each with the next seed: `run(seed)`
/// returns the time it took, and `seed` counts on across criterion's calls
/// (warm-up and samples), so that no two runs share a seed.
pub fn seeded_runs(b: &mut Bencher<'_>, seed: &mut u64, mut run: impl FnMut(u64) -> Duration) {
    b.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            total += run(*seed);
            *seed += 1;
        }
        total
    })
}

/// `criterion_main!` for a suite whose binary is also re-run as a cluster
/// node ([`rlx_benches::nodes`]): as a node it serves and runs no benchmark.
pub fn main_serving_nodes(benches: fn()) {
    if rlx_benches::nodes::serve_if_node() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// Pendulum-v1's observation space (cos θ, sin θ, θ̇).
pub fn pendulum_observations() -> Space {
    Space::uniform_box(-8.0, 8.0, vec![3]).unwrap()
}

/// Pendulum-v1's action space (torque).
pub fn pendulum_actions() -> Space {
    Space::uniform_box(-2.0, 2.0, vec![1]).unwrap()
}

/// `rows` Pendulum-shaped replay transitions with random contents, for the
/// off-policy learners' benchmarks.
pub fn pendulum_transitions(rng: &mut ChaCha8Rng, rows: usize) -> SampleBatch {
    let mut b = SampleBatch::new();
    b.insert_f32(fields::OBS, (0..rows * 3).map(|_| rng.gen_range(-1.0..1.0)).collect(), 3).unwrap();
    b.insert_f32(fields::NEW_OBS, (0..rows * 3).map(|_| rng.gen_range(-1.0..1.0)).collect(), 3).unwrap();
    b.insert_f32(fields::ACTIONS, (0..rows).map(|_| rng.gen_range(-2.0..2.0)).collect(), 1).unwrap();
    b.insert_f32(fields::REWARDS, (0..rows).map(|_| rng.gen_range(-16.0..0.0)).collect(), 1).unwrap();
    b.insert_f32(fields::TERMINATEDS, vec![0.0; rows], 1).unwrap();
    b.insert_f32(fields::TRUNCATEDS, (0..rows).map(|i| (i % 200 == 199) as u8 as f32).collect(), 1).unwrap();
    b.insert_f32(N_STEP_DISCOUNTS, vec![0.99; rows], 1).unwrap();
    b
}
