//! Training PettingZoo envs through the bridge (`pettingzoo:<id>`), as a
//! user would: a parallel env with a PPO policy per agent, and self-play
//! on PettingZoo's own tic-tac-toe (an AEC env) against a league of
//! snapshots, where PettingZoo raises on any illegal move.
//!
//! These need Python with PettingZoo: `rlx_envs::gym::testing::python`
//! prepares `target/python` on first use, or the tests skip with a printed
//! reason (a failure under `RLX_REQUIRE_PYTHON=1`, as in CI).

use rlx::TrainResult;
use rlx_cli::build_deployed_trainer;
use rlx_envs::gym::testing::python;
use serde_json::json;

/// Trains until `passed` holds of a result; fails past `iterations`.
async fn train_until(
    trainer: &mut rlx::Trainer,
    iterations: usize,
    what: &str,
    mut passed: impl FnMut(&TrainResult) -> bool,
) -> TrainResult {
    for _ in 0..iterations {
        let r = trainer.train().await.unwrap();
        eprintln!(
            "iter {} steps {} policies {:?} win rates {:?} t {:.1}s",
            r.training_iteration, r.timesteps_total, r.policy_reward_mean, r.self_play, r.time_total_s
        );
        if passed(&r) {
            return r;
        }
    }
    panic!("{what} within {iterations} iterations");
}

/// A deployed PPO trainer on the PettingZoo env `env` with `config`, or
/// `None` (the test skips) without Python.
async fn pettingzoo_ppo(env: &str, config: serde_json::Value) -> Option<rlx::Trainer> {
    python()?;
    let (trainer, _) = build_deployed_trainer("PPO", env, &config).await.unwrap();
    Some(trainer)
}

/// `rlx_test_agents.two_corridors`: `left` must walk forward with action
/// 0, `right` with action 1, nine cells in at most 50 steps. A random
/// walk mostly runs out of time (a mean return near -4); the shortest path
/// returns 0.2. Each agent has a PPO policy of its own, sampled by an
/// evaluator actor whose copies step in Python processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_a_parallel_pettingzoo_env_with_a_policy_per_agent() {
    let config = json!({
        "seed": 1, "num_workers": 1, "num_envs_per_worker": 4, "train_batch_size": 2000,
        "sgd_minibatch_size": 250, "num_sgd_iter": 8,
        "multiagent": {"policies": ["left", "right"], "policy_mapping": "{agent}"},
    });
    let Some(mut trainer) = pettingzoo_ppo("pettingzoo:rlx_test_agents.two_corridors", config).await else { return };
    let means = |r: &TrainResult| -> Option<(f64, f64)> {
        Some((
            r.policy_reward_mean.get("left").copied().flatten()?,
            r.policy_reward_mean.get("right").copied().flatten()?,
        ))
    };
    let first = trainer.train().await.unwrap();
    let (l, r) = means(&first).expect("episodes end in the first iteration");
    assert!(l < -2.0 && r < -2.0, "untrained policies mostly run out of time: {l} {r}");
    train_until(&mut trainer, 60, "both policies at a mean return of 0", |r| {
        means(r).is_some_and(|(l, r)| l >= 0.0 && r >= 0.0)
    })
    .await;
}

/// Self-play on `pettingzoo:classic/tictactoe-v3`: `main` plays its league
/// of snapshots, `main_v0` keeping the initial weights (which pick among
/// the legal cells nearly uniformly), and its win rate against `main_v0`
/// rises to 80 %. PettingZoo's game raises on an illegal move, which would
/// fail the run: every move was legal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_play_on_pettingzoo_tic_tac_toe_beats_its_initial_self() {
    let config = json!({
        "seed": 1, "num_envs_per_worker": 8, "train_batch_size": 4096, "sgd_minibatch_size": 256,
        "num_sgd_iter": 6, "lr": 0.001, "entropy_coeff": 0.01, "gamma": 0.99,
        "multiagent": {"self_play": {"snapshot_every": 5, "pool": 4}},
    });
    let Some(mut trainer) = pettingzoo_ppo("pettingzoo:classic/tictactoe-v3", config).await else { return };
    let mut first = None;
    train_until(&mut trainer, 150, "a win rate of 0.8 against the initial snapshot", |r| {
        let Some(rate) = r.self_play.get("main_v0").filter(|m| m.games > 0).map(|m| m.win) else { return false };
        let first = *first.get_or_insert(rate);
        assert!(first < 0.7, "the first games are close to even: {first}");
        rate >= 0.8
    })
    .await;
}
