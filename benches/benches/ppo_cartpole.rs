//! Time for PPO with the default config to reach a 100-episode mean return
//! of 475 on CartPole-v1 (the "solved" bar), in wall seconds; the env steps
//! it took are printed after each run. Quick mode (`RLX_BENCH_QUICK=1`)
//! stops at 100 instead, so that CI only checks that the suite runs.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};

fn ppo_to_475(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let target = if rlx_benches::quick() { 100.0 } else { 475.0 };
    let mut group = common::runs_group(c, "ppo_cartpole", 60);
    let mut seed = 0;
    group.bench_function("time_to_475", |b| {
        common::seeded_runs(b, &mut seed, |seed| {
            let (t, steps) = rlx_benches::solve_cartpole(&rt, "PPO", seed, target, 2_000_000);
            eprintln!("seed {seed}: solved in {:.2} s, {steps} env steps", t.as_secs_f64());
            t
        })
    });
    group.finish();
}

criterion_group!(benches, ppo_to_475);
criterion_main!(benches);
