//! The multi-device learner computes what one device computes: on a real
//! PPO batch, data-parallel SGD over 2 and 3 CPU replicas gives the weights
//! single-device SGD gives (to 1e-5), the replicas stay identical to the
//! driver's policy, and PPO configured with `num_devices: 2` learns.

use rlx::optimizer::{MultiDeviceConfig, MultiDeviceLearner};
use rlx::{fields, PolicyEvaluator, PolicyGraph, SampleBatch, VectorEnv};
use rlx_algorithms::{build_trainer, make_policy};
use serde_json::{json, Value};

fn ppo_config() -> Value {
    json!({"seed": 3, "lr": 3e-3, "grad_clip": 0.5, "sgd_minibatch_size": 128, "num_sgd_iter": 3})
}

fn policy(seed: u64) -> Box<dyn PolicyGraph> {
    let env = rlx_envs::make("CartPole-v1").unwrap();
    make_policy("PPO", &ppo_config(), env.observation_space(), env.action_space(), seed).unwrap()
}

/// 512 rows of CartPole sampled by an untrained PPO policy, postprocessed,
/// advantages standardized as the optimizer does.
fn ppo_batch() -> SampleBatch {
    let envs = (0..4).map(|_| rlx_envs::make("CartPole-v1").unwrap()).collect();
    let mut evaluator = PolicyEvaluator::new(policy(11), VectorEnv::new(envs).unwrap(), 512, 5).unwrap();
    let mut batch = evaluator.sample().unwrap().batch;
    batch.standardize(fields::ADVANTAGES).unwrap();
    batch
}

fn learner(devices: usize, sgd_minibatch_size: Option<usize>, num_sgd_iter: usize) -> MultiDeviceLearner {
    let replicas = (1..devices).map(|i| policy(100 + i as u64)).collect();
    MultiDeviceLearner::new(replicas, MultiDeviceConfig { num_sgd_iter, sgd_minibatch_size, seed: 9 }).unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Two training iterations of data-parallel SGD on `devices` replicas:
/// the driver policy's weights and the reported gradient norm after each,
/// checking on the way that every replica holds exactly the driver's weights.
fn train_on(devices: usize, batch: &SampleBatch) -> Vec<(Vec<f32>, f64)> {
    let mut local = policy(7);
    let mut learner = learner(devices, Some(128), 3);
    assert_eq!(learner.num_devices(), devices);
    (0..2)
        .map(|_| {
            let stats = learner.learn(local.as_mut(), batch.clone()).unwrap();
            assert!(stats.get("policy_loss").unwrap().is_finite() && stats.get("grad_norm").unwrap() > 0.0);
            let weights = local.get_weights();
            for (i, replica) in learner.replica_weights().unwrap().iter().enumerate() {
                assert_eq!(replica, &weights, "replica {} diverged from the driver's policy", i + 1);
            }
            (weights, stats.get("grad_norm").unwrap())
        })
        .collect()
}

#[test]
fn replicas_compute_what_one_device_computes() {
    let batch = ppo_batch();
    let initial = policy(7).get_weights();
    let single = train_on(1, &batch);
    // The step moved the weights, so agreeing below is not agreeing on nothing.
    assert!(max_abs_diff(&single[0].0, &initial) > 1e-3);
    assert!(max_abs_diff(&single[1].0, &single[0].0) > 1e-4);
    // 2 replicas split each minibatch of 128 evenly; 3 split it 42/43/43.
    for devices in [2, 3] {
        let multi = train_on(devices, &batch);
        for (iteration, ((m, m_norm), (s, s_norm))) in multi.iter().zip(&single).enumerate() {
            let diff = max_abs_diff(m, s);
            assert!(diff < 1e-5, "{devices} devices, iteration {iteration}: max |Δw| = {diff}");
            // Adam hides a gradient's scale; the norm of the averaged
            // gradient does not, so a mis-weighted average shows here.
            let rel = (m_norm - s_norm).abs() / s_norm;
            assert!(rel < 1e-4, "{devices} devices, iteration {iteration}: grad_norm {m_norm} vs {s_norm}");
        }
    }
}

#[test]
fn one_device_equals_the_policys_own_learner() {
    // One epoch over the whole batch as a single minibatch: the learner's
    // compute/average/apply path equals the policy's learn_on_batch.
    let batch = ppo_batch();
    let config = json!({"seed": 3, "lr": 3e-3, "sgd_minibatch_size": 512, "num_sgd_iter": 1, "train_batch_size": 512});
    let env = rlx_envs::make("CartPole-v1").unwrap();
    let make = || make_policy("PPO", &config, env.observation_space(), env.action_space(), 7).unwrap();
    let mut own = make();
    own.learn_on_batch(&batch).unwrap();
    for devices in [1, 2] {
        let mut local = make();
        let replicas = (1..devices).map(|_| make()).collect();
        let config = MultiDeviceConfig { num_sgd_iter: 1, sgd_minibatch_size: None, seed: 0 };
        MultiDeviceLearner::new(replicas, config).unwrap().learn(local.as_mut(), batch.clone()).unwrap();
        let diff = max_abs_diff(&local.get_weights(), &own.get_weights());
        assert!(diff < 1e-5, "{devices} devices: max |Δw| = {diff}");
    }
}

#[test]
fn replicas_pick_up_a_restored_policy() {
    // After the driver's policy changes outside the learner (a checkpoint
    // restore), the replicas copy it before the next step.
    let batch = ppo_batch();
    let mut local = policy(7);
    let mut learner = learner(2, Some(128), 1);
    learner.learn(local.as_mut(), batch.clone()).unwrap();
    let restored: Vec<f32> = local.get_weights().iter().map(|w| w * 0.5).collect();
    local.set_weights(&restored).unwrap();
    learner.mark_out_of_sync();
    learner.learn(local.as_mut(), batch).unwrap();
    assert_eq!(learner.replica_weights().unwrap()[0], local.get_weights());
}

#[test]
fn a_failed_step_leaves_the_learner_usable() {
    // Every replica fails on a batch without advantages, part-way through
    // the step; the next step must neither read stale replies nor leave the
    // replicas apart.
    let batch = ppo_batch();
    let mut broken = batch.clone();
    broken.remove(fields::ADVANTAGES);
    let mut local = policy(7);
    let mut learner = learner(3, Some(128), 2);
    let err = learner.learn(local.as_mut(), broken).unwrap_err();
    assert!(err.to_string().contains(fields::ADVANTAGES), "{err}");
    learner.learn(local.as_mut(), batch).unwrap();
    for weights in learner.replica_weights().unwrap() {
        assert_eq!(weights, local.get_weights());
    }
}

#[test]
fn bad_settings_are_errors() {
    let bad = MultiDeviceConfig { num_sgd_iter: 0, sgd_minibatch_size: Some(8), seed: 0 };
    assert!(MultiDeviceLearner::new(Vec::new(), bad).is_err());
    let mut l = learner(2, Some(8), 1);
    let err = l.learn(policy(0).as_mut(), SampleBatch::new()).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_cartpole_on_two_cpu_replicas() {
    let config = json!({"seed": 1, "num_workers": 1, "num_devices": 2});
    let (mut trainer, _) = build_trainer("PPO", "CartPole-v1", &config).await.unwrap();
    let mut best = f64::NEG_INFINITY;
    while trainer.last_result().timesteps_total < 200_000 {
        let r = trainer.train().await.unwrap();
        assert_eq!(r.learner.get("num_devices"), Some(2.0));
        best = best.max(r.episode_reward_mean.unwrap_or(0.0));
        if best >= 300.0 {
            return;
        }
    }
    panic!("PPO on 2 CPU replicas did not reach a mean return of 300 in 200k steps (best {best:.1})");
}

#[tokio::test]
async fn device_and_num_devices_are_checked() {
    let err = build_trainer("PPO", "CartPole-v1", &json!({"num_devices": 0})).await.err().unwrap().to_string();
    assert!(err.contains("num_devices"), "{err}");
    let err = build_trainer("PPO", "CartPole-v1", &json!({"device": "tpu"})).await.err().unwrap().to_string();
    assert!(err.contains("device") && err.contains("cuda:N"), "{err}");
    if !cfg!(feature = "cuda") {
        let err = build_trainer("PPO", "CartPole-v1", &json!({"device": "cuda:0"})).await.err().unwrap().to_string();
        assert!(err.contains("--features cuda"), "{err}");
    }
}
