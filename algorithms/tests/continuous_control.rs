//! DDPG, TD3 and SAC learn Pendulum-v1 under fixed seeds and step budgets.
//!
//! Pendulum never terminates and truncates at 200 steps; a random policy
//! scores about −1200 per episode, a good swing-up about −150. After every
//! training iteration (1000 env steps) the learner's policy is evaluated
//! without exploration on 10 episodes with fixed reset seeds; the test
//! passes once their mean return beats the threshold. (The trainer's
//! `episode_reward_mean` is a 100-episode window of noisy training
//! episodes, so it lags the policy by ~20k steps on Pendulum; it is
//! printed too.)
//!
//! Minibatches of 128 rather than the default 256 halve the CPU time per
//! update and learn Pendulum as fast per step.

mod common;

use rlx_algorithms::build_trainer;
use serde_json::{json, Value};

/// Trains on Pendulum-v1 until the greedy policy's mean return over 10
/// evaluation episodes beats `threshold`, failing past `budget` env steps.
/// Returns the last result's learner stats.
async fn learns_pendulum(algorithm: &str, config: Value, threshold: f64, budget: u64) -> rlx::LearnerStats {
    let (mut trainer, _) = build_trainer(algorithm, "Pendulum-v1", &config).await.unwrap();
    let failure = format!("{algorithm} did not reach a mean evaluation return of {threshold}");
    let r = common::train_until(&mut trainer, &failure, budget, |trainer, r| {
        let eval = common::greedy_return(trainer.evaluators().local().policy_mut(), "Pendulum-v1", 10);
        eprintln!(
            "{algorithm} iter {} steps {} evaluation {eval:.1} training window {:.1} t {:.1}s",
            r.training_iteration,
            r.timesteps_total,
            r.episode_reward_mean.unwrap_or(f64::NAN),
            r.time_total_s
        );
        Some(common::Score { value: eval, passed: eval > threshold })
    })
    .await;
    r.learner
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn td3_learns_pendulum() {
    let learner = learns_pendulum("TD3", json!({"seed": 1, "train_batch_size": 128}), -400.0, 15_000).await;
    // Delayed policy updates: the actor learned, on every second update.
    let actor = learner.get("num_actor_updates").unwrap();
    assert!(actor >= 1000.0, "{learner:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sac_learns_pendulum() {
    let learner = learns_pendulum("SAC", json!({"seed": 1, "train_batch_size": 128}), -400.0, 15_000).await;
    // The temperature was tuned down from its initial 1.
    assert!(learner.get("alpha").unwrap() < 0.5, "{learner:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddpg_learns_pendulum() {
    learns_pendulum("DDPG", json!({"seed": 1, "train_batch_size": 128}), -400.0, 10_000).await;
}
