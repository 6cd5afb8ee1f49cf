//! rlx's built-in algorithms learn envs of shapes nothing bundled with rlx
//! has, built from outside the rlx workspace through the public API
//! (`rlx_algorithms::build_trainer_with_env` with our own `EnvMaker`s).
//!
//! Each test trains at a fixed seed for a fixed number of env steps and
//! asserts a greedy mean return (50 episodes) far above what uniformly
//! random actions score. Measured at these settings: on the ring PPO,
//! DQN and PPO with our network each 0.96 (random actions 0.19); on reach
//! PPO −4.0 and SAC −4.4 (random actions −41.8).

use rlx_downstream::builtin::{evaluate, random_return, reach, ring, train};
use serde_json::json;

/// Greedy episodes each evaluation plays.
const EPISODES: u64 = 50;

/// The ring's threshold: from any cell the goal is at most 3 moves away
/// (a return of at least 0.9); random actions score 0.19 (50 episodes).
const RING_THRESHOLD: f64 = 0.75;

/// Reach's threshold: heading straight for the goal scores about −3;
/// random actions −41.8 (50 episodes).
const REACH_THRESHOLD: f64 = -10.0;

async fn ring_return(algorithm: &str, config: serde_json::Value, timesteps: u64) -> f64 {
    let make_env = ring();
    let mut trainer = train(algorithm, make_env.clone(), &config, timesteps).await.expect("trains");
    let greedy = evaluate(&mut trainer, &make_env, EPISODES, 1_000).expect("evaluates");
    let random = random_return(&make_env, EPISODES, 1_000).expect("random");
    println!("{algorithm} on the ring: greedy {greedy:.3}, random {random:.3} ({config})");
    assert!(random < RING_THRESHOLD - 0.4, "random actions already score {random:.3}");
    greedy
}

async fn reach_return(algorithm: &str, config: serde_json::Value, timesteps: u64) -> f64 {
    let make_env = reach();
    let mut trainer = train(algorithm, make_env.clone(), &config, timesteps).await.expect("trains");
    let greedy = evaluate(&mut trainer, &make_env, EPISODES, 1_000).expect("evaluates");
    let random = random_return(&make_env, EPISODES, 1_000).expect("random");
    println!("{algorithm} on reach: greedy {greedy:.3}, random {random:.3} ({config})");
    assert!(random < REACH_THRESHOLD - 10.0, "random actions already score {random:.3}");
    greedy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_the_ring() {
    let greedy = ring_return("PPO", json!({"seed": 0, "num_workers": 0}), 40_000).await;
    assert!(greedy > RING_THRESHOLD, "greedy mean return {greedy:.3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_learns_the_ring() {
    let greedy = ring_return("DQN", json!({"seed": 0}), 20_000).await;
    assert!(greedy > RING_THRESHOLD, "greedy mean return {greedy:.3}");
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
    let greedy = ring_return("PPO", config, 40_000).await;
    assert!(greedy > RING_THRESHOLD, "greedy mean return {greedy:.3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_reach_with_continuous_actions() {
    let greedy = reach_return("PPO", json!({"seed": 0, "num_workers": 0}), 60_000).await;
    assert!(greedy > REACH_THRESHOLD, "greedy mean return {greedy:.3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sac_learns_reach() {
    let greedy = reach_return("SAC", json!({"seed": 0}), 6_000).await;
    assert!(greedy > REACH_THRESHOLD, "greedy mean return {greedy:.3}");
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
