//! Env stepping throughput (env steps/s) for every registered env: one copy
//! stepped directly, and 64 copies in a `VectorEnv`. Actions are drawn
//! uniformly from the action space ahead of time; episodes reset when they
//! end. CartPole is also measured as its concrete type, without dynamic
//! dispatch ("raw").

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::{Action, Column, Env, Space, VectorEnv};
use std::hint::black_box;

/// Env steps per measured iteration (a multiple of 64, the vector width).
const STEPS: usize = 10_240;

/// `n` actions of `space`, as a column of one row each.
fn actions(space: &Space, n: usize) -> Column {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let rows: Vec<Vec<f32>> = (0..n).map(|_| space.sample(&mut rng)).collect();
    match space {
        Space::Box { .. } => Column::F32 { data: rows.concat(), width: space.flat_dim() },
        _ => Column::I64 { data: rows.concat().iter().map(|&a| a as i64).collect(), width: space.flat_dim() },
    }
}

fn action(col: &Column, i: usize) -> Action<'_> {
    match col {
        Column::F32 { data, width } => Action::Continuous(&data[i * width..(i + 1) * width]),
        Column::I64 { data, .. } => Action::Discrete(data[i]),
        Column::U8 { .. } => unreachable!("`actions` makes no byte columns"),
    }
}

fn run_single<E: Env + ?Sized>(env: &mut E, acts: &Column, obs: &mut [f32]) {
    for i in 0..STEPS {
        let step = env.step(action(acts, i), obs).expect("valid action");
        if step.done() {
            env.reset(None, obs).expect("reset");
        }
    }
}

fn envs(c: &mut Criterion) {
    let mut group = common::group(c, "envs");
    group.throughput(Throughput::Elements(STEPS as u64));

    let mut raw = rlx_envs::cartpole_v1();
    let mut obs = [0.0f32; 4];
    raw.reset(Some(0), &mut obs).unwrap();
    let acts = actions(raw.action_space(), STEPS);
    group.bench_function(BenchmarkId::new("single", "CartPole-v1 (raw)"), |b| {
        b.iter(|| run_single(&mut raw, &acts, black_box(&mut obs)))
    });

    // Multi-agent envs step only as vector envs of their agents: their
    // throughput is the multi_agent suite's.
    let single_agent = rlx_envs::specs().iter().filter(|s| rlx_envs::make(s.name).unwrap().agent_ids().is_none());
    for spec in single_agent {
        let mut env = rlx_envs::make(spec.name).unwrap();
        let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
        env.reset(Some(0), &mut obs).unwrap();
        let acts = actions(env.action_space(), STEPS);
        group.bench_function(BenchmarkId::new("single", spec.name), |b| {
            b.iter(|| run_single(env.as_mut(), &acts, black_box(&mut obs)))
        });

        let copies = 64;
        let mut venv = VectorEnv::new((0..copies).map(|_| rlx_envs::make(spec.name).unwrap()).collect()).unwrap();
        venv.reset(0).unwrap();
        let acts = actions(venv.action_space(), copies);
        let mut out = rlx::vector_env::VectorStep::default();
        group.bench_function(BenchmarkId::new("vector_64", spec.name), |b| {
            b.iter(|| {
                for _ in 0..STEPS / copies {
                    venv.step(&acts, &mut out).expect("valid actions");
                }
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, envs);
criterion_main!(benches);
