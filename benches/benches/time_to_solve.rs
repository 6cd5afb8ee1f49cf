//! Time for each algorithm with its default config to reach a target
//! 100-episode mean training return on CartPole-v1, in wall seconds; the env
//! steps each run took are printed after it (`seed N: ... env steps`).
//!
//! PPO's own suite (`ppo_cartpole`) measures PPO against the "solved" bar of
//! 475. Here every other CartPole algorithm runs against the same bar
//! within its budget (see TARGETS); each sample is one whole run, ten seeds
//! per algorithm. Quick mode (`RLX_BENCH_QUICK=1`) lowers every bar
//! to 100 so that CI only checks that the suite runs.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// (algorithm, target mean return, env-step budget). With seed 0 on
/// 2026-11-21, PG took 416k env steps, A2C 398k, A3C 315k, IMPALA 381k, APPO
/// 401k, ES 136k and ARS 134k; DQN took 297k with seed 1. Ape-X is absent:
/// its training episodes run under per-evaluator ε up to 0.4, and their
/// 100-episode mean had not reached 475 after 150 s (its learning test
/// measures the greedy return instead).
const TARGETS: &[(&str, f64, u64)] = &[
    ("PG", 475.0, 1_000_000),
    ("A2C", 475.0, 1_000_000),
    ("A3C", 475.0, 1_000_000),
    ("IMPALA", 475.0, 1_000_000),
    ("APPO", 475.0, 1_000_000),
    ("DQN", 475.0, 1_000_000),
    ("ES", 475.0, 2_000_000),
    ("ARS", 475.0, 2_000_000),
];

fn time_to_solve(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let quick = rlx_benches::quick();
    for &(algorithm, target, budget) in TARGETS {
        let target = if quick { 100.0 } else { target };
        let mut group = common::runs_group(c, "time_to_solve/cartpole", 60);
        let mut seed = 0;
        group.bench_function(BenchmarkId::new(algorithm, format!("to_{target}")), |b| {
            common::seeded_runs(b, &mut seed, |seed| {
                let (t, steps) = rlx_benches::solve_cartpole(&rt, algorithm, seed, target, budget);
                eprintln!("{algorithm} seed {seed}: reached {target} in {:.2} s, {steps} env steps", t.as_secs_f64());
                t
            })
        });
        group.finish();
    }
}

criterion_group!(benches, time_to_solve);
criterion_main!(benches);
