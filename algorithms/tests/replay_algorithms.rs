//! The replay family learns CartPole-v1 under fixed seeds and step budgets.

use rlx_algorithms::build_trainer;
use serde_json::{json, Value};

/// Trains until the 100-episode mean return reaches `threshold`, failing
/// past `budget` env steps. Returns the last result's learner stats.
async fn learns(algorithm: &str, config: Value, threshold: f64, budget: u64) -> rlx::LearnerStats {
    let (mut trainer, _) = build_trainer(algorithm, "CartPole-v1", &config).await.unwrap();
    let mut best = f64::NEG_INFINITY;
    loop {
        let r = trainer.train().await.unwrap();
        let mean = r.episode_reward_mean.unwrap_or(0.0);
        best = best.max(mean);
        eprintln!("iter {} steps {} mean {mean:.1} t {:.1}s", r.training_iteration, r.timesteps_total, r.time_total_s);
        if mean >= threshold && r.episodes_total >= 20 {
            return r.learner;
        }
        assert!(
            r.timesteps_total < budget,
            "{algorithm} did not reach a mean return of {threshold} within {budget} steps (best {best:.1})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_learns_cartpole() {
    let learner = learns("DQN", json!({"seed": 1}), 150.0, 40_000).await;
    // It learned through the target network and from replay.
    assert!(learner.get("num_target_updates").unwrap() >= 1.0);
    assert!(learner.get("replay_buffer_size").unwrap() > 1000.0);
}
