//! PPO learns CartPole-v1: with a fixed seed and a fixed budget of env steps
//! the 100-episode mean return must pass 400, with its evaluator a ractor
//! actor (the default) and with it an actix sync actor. With its env copies
//! split over shard actors it trains exactly as without.

use rlx::StopCriteria;
use rlx_cli::build_deployed_trainer;
use serde_json::json;

/// Env steps PPO may use. With the default config it typically passes 400
/// well before this.
const STEP_BUDGET: u64 = 300_000;
const THRESHOLD: f64 = 400.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_cartpole_within_budget() {
    learns(json!({"seed": 1, "num_workers": 1})).await;
}

/// The same run on the actix backend, on one runtime shared with the actix
/// System, as the `rlx` binary runs it.
#[test]
fn ppo_learns_cartpole_with_the_actix_backend() {
    let runtime = std::sync::Arc::new(
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap(),
    );
    rlx_cluster::actix_backend::share_runtime(runtime.clone());
    runtime.block_on(learns(json!({"seed": 1, "num_workers": 1, "backend": "actix"})));
}

/// Env shards change where the copies step, not what is sampled: PPO with
/// its 8 copies over 2 and over 3 shard actors trains exactly as without,
/// iteration by iteration, to the same weights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_with_env_shards_trains_exactly_as_without() {
    async fn run(config: serde_json::Value) -> (Vec<(Option<f64>, u64, Option<f64>)>, Vec<f32>) {
        let (mut trainer, _) = build_deployed_trainer("PPO", "CartPole-v1", &config).await.unwrap();
        let mut results = Vec::new();
        for _ in 0..4 {
            let r = trainer.train().await.unwrap();
            results.push((r.episode_reward_mean, r.episodes_total, r.learner.get("policy_loss")));
        }
        let weights = trainer.evaluators().local().policy().get_weights();
        (results, weights)
    }
    let want = run(json!({"seed": 1, "num_workers": 1})).await;
    assert!(want.0.last().unwrap().1 > 20, "episodes end within the test: {:?}", want.0);
    for shards in [2, 3] {
        let got = run(json!({"seed": 1, "num_workers": 1, "env_shards": {"num_shards": shards}})).await;
        assert!(got == want, "{shards} shards: {:?}\nwithout: {:?}", got.0, want.0);
    }
}

/// Trains until the run's stop criteria (as `rlx train --stop`) hold: the
/// 100-episode mean return reached [`THRESHOLD`], or the budget ran out.
async fn learns(config: serde_json::Value) {
    let (mut trainer, resolved) = build_deployed_trainer("PPO", "CartPole-v1", &config).await.unwrap();
    assert_eq!(resolved.get("backend"), config.get("backend"));
    let stop = StopCriteria {
        episode_reward_mean: Some(THRESHOLD),
        timesteps_total: Some(STEP_BUDGET),
        ..StopCriteria::default()
    };
    let mut best = f64::NEG_INFINITY;
    let r = loop {
        let r = trainer.train().await.unwrap();
        let mean = r.episode_reward_mean.unwrap_or(0.0);
        best = best.max(mean);
        eprintln!("iter {} steps {} mean {mean:.1} t {:.1}s", r.training_iteration, r.timesteps_total, r.time_total_s);
        if stop.should_stop(&r) {
            break r;
        }
    };
    assert!(
        r.episode_reward_mean.is_some_and(|mean| mean >= THRESHOLD),
        "PPO did not reach a mean return of {THRESHOLD} within {STEP_BUDGET} steps (best {best:.1})"
    );
    // Sanity of the metrics that came with it.
    assert!(r.learner.get("policy_loss").is_some() && r.learner.get("kl").is_some());
    assert!(r.episodes_total >= 100);
}
