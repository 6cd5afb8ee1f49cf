//! rlx's built-in algorithms learn envs of shapes nothing bundled with rlx
//! has, built from outside the rlx workspace through the public API
//! (`rlx_algorithms::build_trainer_with_env` with our own `EnvMaker`s).
//!
//! Each test trains at a fixed seed for a fixed number of env steps and
//! asserts a greedy mean return (50 episodes) far above what uniformly
//! random actions score. Measured at these settings: on the ring PPO,
//! DQN and PPO with our network each 0.96 (random actions 0.19); on reach
//! PPO −4.0 and SAC −4.4 (random actions −41.8).

use rlx::env::EnvMaker;
use rlx_downstream::builtin::{evaluate, random_return, reach, ring, train};
use serde_json::json;

/// Greedy episodes each evaluation plays.
const EPISODES: u64 = 50;

/// One of our envs, and the greedy mean return that shows a policy learned it.
struct Task {
    name: &'static str,
    make_env: fn() -> EnvMaker,
    /// What the learned policy's greedy mean return must beat.
    threshold: f64,
    /// How far below the threshold random actions must score, so that
    /// beating it takes learning.
    margin: f64,
}

/// The ring: from any cell the goal is at most 3 moves away (a return of
/// at least 0.9); random actions score 0.19 (50 episodes).
const RING: Task = Task { name: "the ring", make_env: ring, threshold: 0.75, margin: 0.4 };

/// Reach: heading straight for the goal scores about −3; random actions
/// −41.8 (50 episodes).
const REACH: Task = Task { name: "reach", make_env: reach, threshold: -10.0, margin: 10.0 };

/// Trains `algorithm` with `config` on `task` for `timesteps` env steps and
/// asserts that its greedy mean return beats the task's threshold, which
/// random actions miss by the task's margin.
async fn assert_learns(task: &Task, algorithm: &str, config: serde_json::Value, timesteps: u64) {
    let make_env = (task.make_env)();
    let mut trainer = train(algorithm, make_env.clone(), &config, timesteps).await.expect("trains");
    let greedy = evaluate(&mut trainer, &make_env, EPISODES, 1_000).expect("evaluates");
    let random = random_return(&make_env, EPISODES, 1_000).expect("random");
    println!("{algorithm} on {}: greedy {greedy:.3}, random {random:.3} ({config})", task.name);
    assert!(random < task.threshold - task.margin, "random actions already score {random:.3} on {}", task.name);
    assert!(greedy > task.threshold, "{algorithm} on {}: greedy mean return {greedy:.3}", task.name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_the_ring() {
    assert_learns(&RING, "PPO", json!({"seed": 0, "num_workers": 0}), 40_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_reach_with_continuous_actions() {
    assert_learns(&REACH, "PPO", json!({"seed": 0, "num_workers": 0}), 60_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_learns_the_ring() {
    assert_learns(&RING, "DQN", json!({"seed": 0}), 20_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sac_learns_reach() {
    assert_learns(&REACH, "SAC", json!({"seed": 0}), 6_000).await;
}

/// PPO with our own network ([`rlx_downstream::network::SkipMlp`]) in
/// place of the built-in fully connected layers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_with_our_network_learns_the_ring() {
    rlx_downstream::network::register();
    let config = json!({
        "seed": 0,
        "num_workers": 0,
        "model": {"custom_model": "skip_mlp", "custom_model_config": {"width": 32}},
    });
    assert_learns(&RING, "PPO", config, 40_000).await;
}

/// A custom model that refuses its options is a config error naming the
/// key, and an unregistered one names what is registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_custom_models_are_config_errors() {
    rlx_downstream::network::register();
    let bad = json!({"model": {"custom_model": "skip_mlp", "custom_model_config": {"width": 0}}});
    let err = train("PPO", ring(), &bad, 1).await.err().expect("refused");
    assert!(err.contains("model.custom_model") && err.contains("width must be a positive integer"), "{err}");
    let missing = json!({"model": {"custom_model": "no_such_net"}});
    let err = train("PPO", ring(), &missing, 1).await.err().expect("refused");
    assert!(err.contains("no custom model `no_such_net`") && err.contains("skip_mlp"), "{err}");
}
