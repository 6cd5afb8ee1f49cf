//! The Gymnasium bridge: env steps per second of 8 copies of a Gymnasium
//! env in 1 and 2 Python worker processes (`gym:CartPole-v1`, and
//! `gym:ALE/Breakout-v5` with DeepMind's preprocessing), stepped through a
//! `VectorEnv` as an evaluator steps them; and PPO's policies sampling
//! them: the default on `gym:CartPole-v1` (1024 rows per sample, one
//! process), a CNN on Breakout (512 rows from 8 copies in 1 or 2 processes,
//! or 512 from each of 2 evaluator actors with 8 copies each; 64 rows
//! instead of 512 in quick mode).
//!
//! Breakout runs both ways a worker process can host its copies: in
//! ale-py's C++ vector env (the default, `atari.vectorized`; one process,
//! one thread per core) and as one Gymnasium env per copy (`per_copy` in
//! the ids).
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

fn maker(name: &'static str, env_config: Value) -> EnvMaker {
    Arc::new(move || rlx_envs::make_with(name, &env_config))
}

/// The `env_config` of Breakout's copies stepped one Gymnasium env each.
fn per_copy() -> Value {
    serde_json::json!({"atari": {"vectorized": false}})
}

fn gym_bridge(c: &mut Criterion) {
    if rlx_envs::gym::testing::python().is_none() {
        return;
    }
    let mut group = common::group(c, "gym_bridge");
    group.throughput(Throughput::Elements(COPIES as u64));
    for (env, actions, env_config, processes, how) in [
        ("gym:CartPole-v1", 2, Value::Null, 1, ""),
        ("gym:CartPole-v1", 2, Value::Null, 2, ""),
        ("gym:ALE/Breakout-v5", 4, Value::Null, 1, ""),
        ("gym:ALE/Breakout-v5", 4, per_copy(), 1, "per_copy_"),
        ("gym:ALE/Breakout-v5", 4, per_copy(), 2, "per_copy_"),
    ] {
        let shards = EnvShards { num_shards: processes, ..EnvShards::default() };
        let mut venv = VectorEnv::build(maker(env, env_config), COPIES, &shards, true).unwrap();
        venv.reset(0).unwrap();
        // A fixed, varied action pattern: every action, in turn.
        let columns: Vec<Column> = (0..actions)
            .map(|k| Column::I64 { data: (0..COPIES as i64).map(|i| (i + k) % actions).collect(), width: 1 })
            .collect();
        let mut out = rlx::vector_env::VectorStep::default();
        let label = env.trim_start_matches("gym:").replace('/', "-");
        group.bench_function(BenchmarkId::new(label, format!("{how}{processes}_processes")), |b| {
            b.iter_custom(|iters| {
                let t0 = Instant::now();
                for i in 0..iters {
                    venv.step(&columns[i as usize % columns.len()], &mut out).unwrap();
                }
                t0.elapsed()
            })
        });
    }
    group.finish();

    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "gym_bridge_sampling");
    // PPO's default policy on CartPole; on Breakout the Nature CNN with one
    // hidden layer of 256 shared by the policy and the value heads, as
    // RLlib's env runners use in `benches/reference/harness.py`
    // (`rllib_sampling --env ALE/Breakout-v5`). Breakout's 8 copies run in
    // the driver's evaluator (1 or 2 Python processes), or 8 copies in each
    // of 2 evaluator actors (one process each: RLlib's 2 runners x 8 envs,
    // each runner acting with its own network).
    let cnn = serde_json::json!({"fcnet_hiddens": [256], "vf_share_layers": true});
    for (env, workers, processes, model, env_config, how) in [
        ("gym:CartPole-v1", 0, 1, Value::Null, Value::Null, ""),
        ("gym:ALE/Breakout-v5", 0, 1, cnn.clone(), Value::Null, ""),
        ("gym:ALE/Breakout-v5", 2, 1, cnn.clone(), Value::Null, ""),
        ("gym:ALE/Breakout-v5", 0, 1, cnn.clone(), per_copy(), "per_copy_"),
        ("gym:ALE/Breakout-v5", 0, 2, cnn.clone(), per_copy(), "per_copy_"),
        ("gym:ALE/Breakout-v5", 2, 1, cnn, per_copy(), "per_copy_"),
    ] {
        let label = env.trim_start_matches("gym:").replace('/', "-");
        let mut config = serde_json::json!({"num_workers": workers, "seed": 1,
            "env_shards": {"num_shards": processes}, "env_config": env_config});
        let id = if model.is_null() {
            format!("ppo_default_policy/{label}")
        } else {
            config["model"] = model;
            // 512 rows per sample from each sampler; 64 in quick mode,
            // where a CNN sample of 512 took over a second a time and the
            // five variants about a minute of CI.
            let quick = rlx_benches::quick();
            let rows = if quick { 64 } else { 512 };
            config["train_batch_size"] = (rows * workers.max(1)).into();
            if quick {
                // Only sampling is timed; the minibatch must fit the batch.
                config["sgd_minibatch_size"] = rows.into();
            }
            if workers == 0 {
                format!("ppo_cnn_policy/{label}/{how}{processes}_processes")
            } else {
                format!("ppo_cnn_policy/{label}/{how}{workers}_actors")
            }
        };
        let (trainer, _) = rt.block_on(rlx_algorithms::build_trainer("PPO", env, &config)).unwrap();
        let sample = || -> usize {
            let rollouts = rt.block_on(rlx::operators::parallel_rollouts(trainer.evaluators())).unwrap();
            rollouts.iter().map(|r| r.batch.len()).sum()
        };
        let rows = sample();
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_function(id, |b| b.iter(|| assert_eq!(sample(), rows)));
    }
    group.finish();
}

criterion_group!(benches, gym_bridge);
criterion_main!(benches);
