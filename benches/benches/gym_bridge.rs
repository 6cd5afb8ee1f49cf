//! The Gymnasium bridge: env steps per second of 8 copies of a Gymnasium
//! env in 1 and 2 Python worker processes (`gym:CartPole-v1`, and
//! `gym:ALE/Breakout-v5` with DeepMind's preprocessing), stepped through a
//! `VectorEnv` as an evaluator steps them; and PPO's default policy
//! sampling `gym:CartPole-v1` (1024 rows per sample, one process).
//!
//! `benches/scripts/gym_throughput.py` measures the same envs stepped in a
//! plain Python loop, and in Stable-Baselines3's `SubprocVecEnv` and
//! `DummyVecEnv`, for the side-by-side table in the book
//! (`book/src/gymnasium.md`).
//!
//! Needs Python with Gymnasium, ale-py and OpenCV: the tests' interpreter
//! (`target/python`, prepared on first use), or `$RLX_PYTHON`. Without it
//! the suite prints why and measures nothing.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::{Column, EnvMaker, EnvShards, VectorEnv};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

const COPIES: usize = 8;

fn maker(name: &'static str) -> EnvMaker {
    Arc::new(move || rlx_envs::make_with(name, &Value::Null))
}

fn gym_bridge(c: &mut Criterion) {
    if rlx_envs::gym::testing::python().is_none() {
        return;
    }
    let mut group = common::group(c, "gym_bridge");
    group.throughput(Throughput::Elements(COPIES as u64));
    for (env, actions) in [("gym:CartPole-v1", 2), ("gym:ALE/Breakout-v5", 4)] {
        for processes in [1, 2] {
            let shards = EnvShards { num_shards: processes, ..EnvShards::default() };
            let mut venv = VectorEnv::build(maker(env), COPIES, &shards, true).unwrap();
            venv.reset(0).unwrap();
            // A fixed, varied action pattern: every action, in turn.
            let columns: Vec<Column> = (0..actions)
                .map(|k| Column::I64 { data: (0..COPIES as i64).map(|i| (i + k) % actions).collect(), width: 1 })
                .collect();
            let mut out = rlx::vector_env::VectorStep::default();
            let label = env.trim_start_matches("gym:").replace('/', "-");
            group.bench_function(BenchmarkId::new(label, format!("{processes}_processes")), |b| {
                b.iter_custom(|iters| {
                    let t0 = Instant::now();
                    for i in 0..iters {
                        venv.step(&columns[i as usize % columns.len()], &mut out).unwrap();
                    }
                    t0.elapsed()
                })
            });
        }
    }
    group.finish();

    let rt = rlx_benches::runtime();
    let config = serde_json::json!({"num_workers": 0, "seed": 1});
    let (trainer, _) = rt.block_on(rlx_algorithms::build_trainer("PPO", "gym:CartPole-v1", &config)).unwrap();
    let mut group = common::group(c, "gym_bridge_sampling");
    group.throughput(Throughput::Elements(1024));
    group.bench_function("ppo_default_policy/CartPole-v1", |b| {
        b.iter(|| {
            let rollout = trainer.evaluators().local().sample().unwrap();
            assert_eq!(rollout.batch.len(), 1024);
        })
    });
    group.finish();
}

criterion_group!(benches, gym_bridge);
criterion_main!(benches);
