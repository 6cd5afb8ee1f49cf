//! What the networks built at run time cost, per workload: sampling
//! throughput (env steps per second of one evaluator stepping 8 env copies
//! with the policy: acting plus env steps) and learner updates per second
//! (one `learn_on_batch` of one minibatch: forward, loss, backward, clip,
//! Adam), for the fully connected networks on CartPole-v1, Pendulum-v1 and
//! MinAtar Breakout's flattened frames, the CNN on Breakout's frames, and
//! the LSTM on StatelessCartPole-v1.
//!
//! The book's Models page compares the fully connected rows with the
//! const-shaped networks these replaced, measured side by side.
//!
//! The `models/acting` group is the Nature CNN acting on Atari frames: PPO's
//! policy (the CNN, one shared hidden layer of 256, the policy and value
//! heads) computing actions for 8 frames of 84 × 84 × 4 bytes, as an
//! evaluator with 8 copies of an `ALE/` game does each step, without the
//! env. `benches/scripts/torch_acting.py` times Stable-Baselines3's
//! `ActorCriticCnnPolicy` of the same shape on PyTorch's threads, for the
//! per-frame comparison on the Performance page.
//!
//! The `models/gemm` group is the machine's limit for those learners (the
//! roofline on the Performance page): dfdx's CPU matrix product (the `gemm`
//! crate, on rayon's threads) at the learners' shapes, without a tape;
//! throughput in elements is floating-point operations (2·m·k·n).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::{fields, PolicyEvaluator, PolicyGraph, SampleBatch, VectorEnv};
use serde_json::{json, Value};

/// Env steps per sampling round.
const ROUND: usize = 4096;

fn evaluator(algorithm: &str, env: &str, config: &Value, rows: usize) -> PolicyEvaluator {
    let envs: Vec<_> = (0..8).map(|_| rlx_envs::make(env).expect("env")).collect();
    let (o, a) = (envs[0].observation_space().clone(), envs[0].action_space().clone());
    let policy = rlx_algorithms::make_policy(algorithm, config, &o, &a, 1).expect("policy");
    PolicyEvaluator::new(policy, VectorEnv::new(envs).expect("envs"), rows, 2).expect("evaluator")
}

/// `rows` postprocessed rows sampled by an untrained policy, for a learner.
fn batch(algorithm: &str, env: &str, config: &Value, rows: usize) -> (Box<dyn PolicyGraph>, SampleBatch) {
    let mut ev = evaluator(algorithm, env, config, rows.max(512));
    let mut batch = ev.sample().expect("sample").batch;
    if batch.contains(fields::ADVANTAGES) {
        batch.standardize(fields::ADVANTAGES).expect("advantages");
    }
    let envs = rlx_envs::make(env).expect("env");
    let policy = rlx_algorithms::make_policy(algorithm, config, envs.observation_space(), envs.action_space(), 0)
        .expect("policy");
    (policy, batch.slice(0..rows))
}

/// One PPO SGD step on the whole batch.
fn ppo(model: Value, rows: usize) -> Value {
    json!({"num_sgd_iter": 1, "sgd_minibatch_size": rows, "train_batch_size": rows, "model": model})
}

fn dqn(model: Value) -> Value {
    json!({"model": model})
}

fn models(c: &mut Criterion) {
    let flat = json!({"conv_filters": []});
    let lstm = json!({"use_lstm": true, "lstm_cell_size": 64, "fcnet_hiddens": [64], "max_seq_len": 20});

    let mut group = common::group(c, "models/sampling");
    group.throughput(Throughput::Elements(ROUND as u64));
    for (id, algorithm, env, config) in [
        ("cartpole_mlp", "PPO", "CartPole-v1", json!({})),
        ("pendulum_gaussian", "PPO", "Pendulum-v1", json!({})),
        ("breakout_flat_mlp", "PPO", "MinAtar/Breakout-v1", json!({"model": flat})),
        ("breakout_cnn", "PPO", "MinAtar/Breakout-v1", json!({})),
        ("stateless_cartpole_lstm", "PPO", "StatelessCartPole-v1", json!({"model": lstm})),
        ("breakout_flat_mlp_dqn", "DQN", "MinAtar/Breakout-v1", json!({"model": flat})),
    ] {
        let mut ev = evaluator(algorithm, env, &config, ROUND);
        group.bench_function(BenchmarkId::new("8_envs", id), |b| b.iter(|| ev.sample().expect("sample")));
    }
    group.finish();

    let mut group = common::group(c, "models/acting");
    group.throughput(Throughput::Elements(8));
    let atari = rlx::Space::bytes(vec![84, 84, 4]);
    let config = json!({"model": {"fcnet_hiddens": [256], "vf_share_layers": true}});
    let mut policy = rlx_algorithms::make_policy("PPO", &config, &atari, &rlx::Space::discrete(4), 1).expect("policy");
    // Frames of bytes, as the bridge hands them over (b / 255).
    let frames: Vec<f32> = (0..8 * atari.flat_dim()).map(|i| ((i * 2_654_435_761) % 256) as f32 / 255.0).collect();
    group.bench_function("nature_cnn_8_frames", |b| {
        b.iter(|| {
            let mut out = SampleBatch::default();
            policy.compute_actions(&frames, true, &mut out).expect("act");
            out
        })
    });
    group.finish();

    let mut group = common::group(c, "models/gemm");
    let dev = dfdx::prelude::Cpu::default();
    // (m, k, n): a [m, k] × [k, n] product. The first five are the 2×64
    // networks' layers at PPO's 256-row and DQN's 64-row minibatches, and a
    // weight gradient (the rows become the inner dimension); the last is a
    // large square one, near the machine's peak.
    for (m, k, n) in [(256, 4, 64), (256, 64, 64), (64, 256, 64), (64, 64, 64), (256, 64, 2), (256, 256, 256)] {
        use dfdx::prelude::*;
        let a: Tensor<(usize, usize), f32, Cpu> = dev.sample_normal_like(&(m, k));
        let w: Tensor<(usize, usize), f32, Cpu> = dev.sample_normal_like(&(k, n));
        group.throughput(Throughput::Elements(2 * (m * k * n) as u64));
        group.bench_function(BenchmarkId::new("matmul", format!("{m}x{k}x{n}")), |b| {
            b.iter(|| a.clone().matmul(w.clone()))
        });
    }
    group.finish();

    let mut group = common::group(c, "models/learner");
    group.throughput(Throughput::Elements(1));
    for (id, algorithm, env, config, rows) in [
        ("ppo_cartpole_mlp_256", "PPO", "CartPole-v1", ppo(json!({}), 256), 256),
        ("ppo_breakout_flat_mlp_256", "PPO", "MinAtar/Breakout-v1", ppo(flat.clone(), 256), 256),
        ("ppo_breakout_cnn_256", "PPO", "MinAtar/Breakout-v1", ppo(json!({}), 256), 256),
        ("ppo_pendulum_gaussian_256", "PPO", "Pendulum-v1", ppo(json!({}), 256), 256),
        ("ppo_stateless_cartpole_lstm_256", "PPO", "StatelessCartPole-v1", ppo(lstm.clone(), 256), 256),
        ("dqn_cartpole_mlp_64", "DQN", "CartPole-v1", dqn(json!({})), 64),
        ("dqn_breakout_flat_mlp_64", "DQN", "MinAtar/Breakout-v1", dqn(flat.clone()), 64),
        ("dqn_breakout_cnn_64", "DQN", "MinAtar/Breakout-v1", dqn(json!({})), 64),
        ("sac_pendulum_256", "SAC", "Pendulum-v1", json!({}), 256),
        ("td3_pendulum_256", "TD3", "Pendulum-v1", json!({}), 256),
        ("ddpg_pendulum_256", "DDPG", "Pendulum-v1", json!({}), 256),
    ] {
        let (mut policy, batch) = batch(algorithm, env, &config, rows);
        group.bench_function(BenchmarkId::new("update", id), |b| {
            b.iter(|| policy.learn_on_batch(&batch).expect("learn"))
        });
    }
    group.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
