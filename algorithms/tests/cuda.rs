//! With `--features cuda` and a GPU: every kind of network the bundled
//! algorithms build takes the same learner step on `cuda:0` as on the CPU,
//! from the same weights and the same sampled batch. Without a GPU each
//! test prints why and returns; without the feature this file is empty.
#![cfg(feature = "cuda")]

use rlx::{fields, PolicyEvaluator, SampleBatch, VectorEnv};
use rlx_algorithms::make_policy_for_env;
use serde_json::{json, Value};

/// A batch of `rows` sampled on the CPU by a policy of the same kind,
/// postprocessed by it (returns, advantages, n-step fields).
fn sampled(algorithm: &str, env: &str, config: &Value, rows: usize) -> SampleBatch {
    let envs: Vec<_> = (0..4).map(|_| rlx_envs::make(env).unwrap()).collect();
    let policy = make_policy_for_env(algorithm, config, envs[0].as_ref(), 11).unwrap();
    let mut evaluator = PolicyEvaluator::new(policy, VectorEnv::new(envs).unwrap(), rows, 5).unwrap();
    let mut batch = evaluator.sample().unwrap().batch;
    if batch.contains(fields::ADVANTAGES) {
        batch.standardize(fields::ADVANTAGES).unwrap();
    }
    batch
}

fn mean_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| f64::from((x - y).abs())).sum::<f64>() / a.len() as f64
}

/// One learner step on each device from the same weights. Float rounding
/// differs between cuBLAS and the CPU's GEMM, and Adam turns a near-zero
/// gradient into a full step of either sign, so single weights may differ
/// by up to 2·lr; the mean difference must stay far below the mean move.
fn same_step_on_cuda(algorithm: &str, env: &str, config: Value, rows: usize) {
    let probe = rlx_envs::make(env).unwrap();
    let mut gpu_config = config.clone();
    gpu_config["device"] = json!("cuda:0");
    let mut gpu = match make_policy_for_env(algorithm, &gpu_config, probe.as_ref(), 7) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skipping {algorithm} on {env}: no usable CUDA device ({e})");
            return;
        }
    };
    let mut cpu = make_policy_for_env(algorithm, &config, probe.as_ref(), 7).unwrap();
    // Initial weights come from each device's own RNG: start both alike.
    gpu.set_weights(&cpu.get_weights()).unwrap();
    assert_eq!(gpu.get_weights(), cpu.get_weights(), "{algorithm}: weights did not round-trip through the GPU");
    let batch = sampled(algorithm, env, &config, rows);
    let before = cpu.get_weights();
    let cpu_stats = cpu.learn_on_batch(&batch).unwrap();
    let gpu_stats = gpu.learn_on_batch(&batch).unwrap();
    let moved = mean_abs_diff(&before, &cpu.get_weights());
    let apart = mean_abs_diff(&cpu.get_weights(), &gpu.get_weights());
    assert!(moved > 1e-6, "{algorithm} on {env}: the CPU step did not move the weights");
    assert!(apart < 0.02 * moved, "{algorithm} on {env}: mean |cpu - gpu| {apart:e} against a mean move of {moved:e}");
    for (name, &value) in &cpu_stats.0 {
        let other = gpu_stats.0.get(name).copied().unwrap_or(f64::NAN);
        let close = (value - other).abs() <= 1e-2 * value.abs().max(1.0);
        assert!(close, "{algorithm} on {env}: learner stat {name} is {value} on the CPU, {other} on the GPU");
    }
    println!("{algorithm} on {env}: mean move {moved:.3e}, mean |cpu - gpu| {apart:.3e}");
}

#[test]
fn ppo_mlp_on_cuda_matches_cpu() {
    let config = json!({"seed": 3, "lr": 3e-3, "grad_clip": 0.5, "sgd_minibatch_size": 128, "num_sgd_iter": 3});
    same_step_on_cuda("PPO", "CartPole-v1", config, 512);
}

#[test]
fn ppo_lstm_on_cuda_matches_cpu() {
    let model = json!({"use_lstm": true, "lstm_cell_size": 32, "fcnet_hiddens": [32], "max_seq_len": 8});
    let config = json!({"seed": 3, "sgd_minibatch_size": 128, "num_sgd_iter": 1, "model": model});
    same_step_on_cuda("PPO", "StatelessCartPole-v1", config, 512);
}

#[test]
fn ppo_gaussian_on_cuda_matches_cpu() {
    let config = json!({"seed": 3, "sgd_minibatch_size": 128, "num_sgd_iter": 1});
    same_step_on_cuda("PPO", "Pendulum-v1", config, 512);
}

#[test]
fn dqn_cnn_on_cuda_matches_cpu() {
    let config = json!({"seed": 3, "lr": 2.5e-4, "prioritized_replay": false});
    same_step_on_cuda("DQN", "MinAtar/Breakout-v1", config, 256);
}

#[test]
fn sac_on_cuda_matches_cpu() {
    same_step_on_cuda("SAC", "Pendulum-v1", json!({"seed": 3}), 256);
}
