//! Time for PPO with the default config to reach a 100-episode mean return
//! of 475 on CartPole-v1 (the "solved" bar), in wall seconds; the env steps
//! it took are printed after each run. Quick mode (`RLX_BENCH_QUICK=1`)
//! stops at 100 instead, so that CI only checks that the suite runs.

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use std::time::Duration;

fn ppo_to_475(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = c.benchmark_group("ppo_cartpole");
    let quick = rlx_benches::quick();
    let target = if quick { 100.0 } else { 475.0 };
    // Flat sampling: one solve per sample, ten samples.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(if quick { 1 } else { 60 }));
    let mut seed = 0;
    group.bench_function("time_to_475", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (t, steps) = rlx_benches::solve_cartpole(&rt, "PPO", seed, target, 2_000_000);
                eprintln!("seed {seed}: solved in {:.2} s, {steps} env steps", t.as_secs_f64());
                seed += 1;
                total += t;
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, ppo_to_475);
criterion_main!(benches);
