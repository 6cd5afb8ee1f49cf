//! With `--features cuda` and a GPU: every kind of network the bundled
//! algorithms build takes the same learner step on `cuda:0` as on the CPU,
//! from the same weights and the same sampled batch.
//!
//! Where no CUDA device can be opened (a build without the `cuda` feature,
//! or no driver or GPU) each test prints why and passes as skipped, unless
//! `RLX_REQUIRE_CUDA=1`, which turns the skip into a failure (set it on a
//! GPU machine; CI has no GPU and does not). Once `cuda:0` opens, any
//! error, building the policy included, fails the test.
//!
//! ```text
//! RLX_REQUIRE_CUDA=1 cargo test --release -p rlx-algorithms --features cuda --test cuda
//! ```

use rlx::{fields, PolicyEvaluator, SampleBatch, VectorEnv};
use rlx_algorithms::make_policy_for_env;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// Whether the CUDA tests can run here: `true` if `cuda:0` opens. If not,
/// prints why `test` is skipped and returns `false`.
///
/// # Panics
/// With `RLX_REQUIRE_CUDA=1`, if `cuda:0` cannot be opened.
fn cuda_device_opens(test: &str) -> bool {
    static NO_DEVICE: OnceLock<Option<String>> = OnceLock::new();
    match NO_DEVICE.get_or_init(why_no_cuda_device) {
        None => true,
        Some(why) if std::env::var("RLX_REQUIRE_CUDA").is_ok_and(|v| v == "1") => {
            panic!("RLX_REQUIRE_CUDA=1, but no CUDA device for the CUDA tests: {why}")
        }
        Some(why) => {
            println!("skipped {test}: no CUDA device ({why}); set RLX_REQUIRE_CUDA=1 to make this an error");
            false
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn why_no_cuda_device() -> Option<String> {
    Some("rlx-algorithms was built without its `cuda` feature: test with `--features cuda`".into())
}

/// Why `cuda:0` cannot be opened, or `None` if it can. Only the driver
/// failing to open the device (no GPU, no such ordinal) counts: cuBLAS
/// failing on a device that opened is an error of the CUDA path, which
/// fails the test like any other.
#[cfg(feature = "cuda")]
fn why_no_cuda_device() -> Option<String> {
    use dfdx::tensor::{Cuda, CudaError};
    // cudarc 0.9 panics instead of returning an error where there is no
    // driver or device (rlx_algorithms::model::device::open_cuda does the same).
    match std::panic::catch_unwind(|| Cuda::try_build(0, 0)) {
        Ok(Ok(_)) => None,
        Ok(Err(CudaError::Driver(e))) => Some(format!("the CUDA driver cannot open cuda:0: {e:?}")),
        Ok(Err(e)) => panic!("cuda:0 opened, but dfdx's CUDA device could not be built on it: {e:?}"),
        Err(_) => Some("cannot open cuda:0: no CUDA driver or no GPU (see the panic message above)".into()),
    }
}

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
    same_step_on_cuda_from(algorithm, env, config, |config| sampled(algorithm, env, config, rows));
}

/// [`same_step_on_cuda`] on the batch `learned` makes from the config.
fn same_step_on_cuda_from(algorithm: &str, env: &str, config: Value, learned: impl FnOnce(&Value) -> SampleBatch) {
    if !cuda_device_opens(&format!("{algorithm} on {env}")) {
        return;
    }
    let probe = rlx_envs::make(env).unwrap();
    let mut gpu_config = config.clone();
    gpu_config["device"] = json!("cuda:0");
    let mut gpu = make_policy_for_env(algorithm, &gpu_config, probe.as_ref(), 7)
        .unwrap_or_else(|e| panic!("{algorithm} on {env}: cuda:0 opens, but the policy could not be built on it: {e}"));
    let mut cpu = make_policy_for_env(algorithm, &config, probe.as_ref(), 7).unwrap();
    // Initial weights come from each device's own RNG: start both alike.
    gpu.set_weights(&cpu.get_weights()).unwrap();
    assert_eq!(gpu.get_weights(), cpu.get_weights(), "{algorithm}: weights did not round-trip through the GPU");
    let batch = learned(&config);
    let before = cpu.get_weights();
    let cpu_stats = cpu.learn_on_batch(&batch).unwrap();
    let gpu_stats = gpu.learn_on_batch(&batch).unwrap();
    let moved = mean_abs_diff(&before, &cpu.get_weights());
    let apart = mean_abs_diff(&cpu.get_weights(), &gpu.get_weights());
    assert!(moved > 1e-6, "{algorithm} on {env}: the CPU step did not move the weights");
    assert!(apart < 0.02 * moved, "{algorithm} on {env}: mean |cpu - gpu| {apart:e} against a mean move of {moved:e}");
    // Timings (`world_model_s`, ...) are not results: the GPU's first
    // update also compiles kernels.
    for (name, &value) in cpu_stats.0.iter().filter(|(name, _)| !name.ends_with("_s")) {
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

/// DreamerV3's world model, actor and critic: one update on sequences
/// replayed from sampled CartPole episodes. The imagined rollouts draw
/// from the policy's own seeded generator on the host, so both devices
/// dream the same trajectories.
#[test]
fn dreamer_v3_on_cuda_matches_cpu() {
    use rand::SeedableRng;
    use rlx::replay::ReplayStore;
    use rlx_algorithms::model_based::episode_replay::EpisodeReplay;
    let config = json!({"seed": 3, "model_size": "nano", "batch_size_B": 4, "batch_length_T": 16, "horizon_H": 5});
    same_step_on_cuda_from("DreamerV3", "CartPole-v1", config, |config| {
        let mut replay = EpisodeReplay::new(2048, 16).unwrap();
        replay.add(&sampled("DreamerV3", "CartPole-v1", config, 512), None).unwrap();
        replay.sample(4 * 16, 0, &mut rand_chacha::ChaCha8Rng::seed_from_u64(5)).unwrap()
    });
}
