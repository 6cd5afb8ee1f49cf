//! Training Gymnasium envs through the bridge (`gym:<id>`), as a user
//! would: PPO on `gym:CartPole-v1` trains exactly as on the native env and
//! learns within the native test's budget; a custom env loaded with the
//! `module:Id` form and `gym:FrozenLake-v1` are learned; training goes on
//! through worker processes that raise or exit, and no sampled row comes
//! from a dead process; an Atari game runs with the CNN, and DQN replays
//! it as shared byte frames; `rlx train` and `rlx rollout` take a `gym:`
//! env.
//!
//! These need Python with Gymnasium: `rlx_envs::gym::testing::python`
//! prepares `target/python` on first use, or the tests skip with a printed
//! reason (a failure under `RLX_REQUIRE_PYTHON=1`, as in CI).

use rlx::{fields, Column, StopCriteria, TrainResult, Trainer};
use rlx_cli::build_deployed_trainer;
use rlx_envs::gym::testing::python;
use serde_json::{json, Value};

/// As the native PPO test (`ppo_cartpole.rs`).
const CARTPOLE_BUDGET: u64 = 300_000;
const CARTPOLE_THRESHOLD: f64 = 400.0;

/// Trains `env` until the 100-episode mean return reaches `threshold`;
/// fails once `budget` env steps are spent.
async fn learns(env: &str, config: Value, threshold: f64, budget: u64) -> TrainResult {
    let (mut trainer, _) = build_deployed_trainer("PPO", env, &config).await.unwrap();
    let stop =
        StopCriteria { episode_reward_mean: Some(threshold), timesteps_total: Some(budget), ..StopCriteria::default() };
    let mut best = f64::NEG_INFINITY;
    loop {
        let r = trainer.train().await.unwrap();
        let mean = r.episode_reward_mean.unwrap_or(f64::NEG_INFINITY);
        best = best.max(mean);
        eprintln!(
            "{env}: iter {} steps {} mean {mean:.3} t {:.1}s",
            r.training_iteration, r.timesteps_total, r.time_total_s
        );
        if stop.should_stop(&r) {
            assert!(mean >= threshold, "{env}: no mean return of {threshold} within {budget} steps (best {best:.3})");
            return r;
        }
    }
}

async fn first_iterations(env: &str, config: &Value, n: usize) -> (Vec<(Option<f64>, u64, Option<f64>)>, Vec<f32>) {
    let (mut trainer, _) = build_deployed_trainer("PPO", env, config).await.unwrap();
    let mut results = Vec::new();
    for _ in 0..n {
        let r = trainer.train().await.unwrap();
        results.push((r.episode_reward_mean, r.episodes_total, r.learner.get("policy_loss")));
    }
    let weights = trainer.evaluators().local().policy().get_weights();
    (results, weights)
}

/// The same seeds give the same episodes (native resets draw from NumPy's
/// PCG64 as Gymnasium does), so PPO trains on `gym:CartPole-v1` exactly as
/// on `CartPole-v1`, to the same weights; and it learns within the native
/// test's budget, with its copies in two Python processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_on_gym_cartpole_trains_exactly_as_on_the_native_env() {
    if python().is_none() {
        return;
    }
    let config = json!({"seed": 1, "num_workers": 1});
    let native = first_iterations("CartPole-v1", &config, 3).await;
    let gym = first_iterations("gym:CartPole-v1", &config, 3).await;
    assert!(native.0.last().unwrap().1 > 20, "episodes end within the test: {:?}", native.0);
    assert!(gym == native, "gym: {:?}\nnative: {:?}", gym.0, native.0);

    let config = json!({"seed": 1, "num_workers": 1, "env_shards": {"num_shards": 2}});
    learns("gym:CartPole-v1", config, CARTPOLE_THRESHOLD, CARTPOLE_BUDGET).await;
}

/// A user's own env, in a module of their own (`rlx_test_envs`, on the
/// `PYTHONPATH`), loaded with Gymnasium's `module:Id` form, with keyword
/// arguments from `env_config`. A random walk rarely reaches the end of
/// the corridor in 50 steps (mean return about -0.4); 0.9 is all but the
/// shortest path (0.94).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_a_custom_env_from_its_module() {
    if python().is_none() {
        return;
    }
    let config = json!({"seed": 1, "num_workers": 1, "env_config": {"length": 8}});
    learns("gym:rlx_test_envs:Corridor-v0", config, 0.9, 100_000).await;
}

/// FrozenLake's Discrete observations arrive one-hot; without slipping the
/// goal is six moves away, and a random walk reaches it in about 1.5 % of
/// episodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_frozen_lake() {
    if python().is_none() {
        return;
    }
    let config = json!({"seed": 1, "num_workers": 1, "env_config": {"is_slippery": false}});
    learns("gym:FrozenLake-v1", config, 0.9, 150_000).await;
}

/// Worker processes that fail every 400 env steps (each process hosts
/// four copies: every 100 vector steps), by raising and by exiting: they
/// are restarted and counted, the rollouts hold no row whose `obs` and
/// `new_obs` come from two processes (the env observes its process id),
/// and PPO's training goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_goes_on_through_failing_worker_processes() {
    if python().is_none() {
        return;
    }
    for how in ["raise", "exit"] {
        let config = json!({
            "seed": 1, "num_workers": 0, "train_batch_size": 512, "sgd_minibatch_size": 128, "num_sgd_iter": 2,
            "env_config": {"how": how, "fail_at": 400},
            "env_shards": {"num_shards": 2, "restart": {"max_restarts": 100, "window_s": 60.0}},
        });
        let (mut trainer, _) = build_deployed_trainer("PPO", "gym:rlx_test_envs:Faulty-v0", &config).await.unwrap();
        let mut last = None;
        for _ in 0..4 {
            last = Some(trainer.train().await.unwrap());
        }
        let r = last.unwrap();
        // 4 × 512 rows over 8 copies: 256 vector steps, a failure of each
        // process every 100 of them; the 4 copies of each restart lose
        // their row of that step, which no batch holds.
        assert_eq!(r.learner.get("env_shard_restarts"), Some(4.0), "{how}");
        assert_eq!(r.timesteps_total, 2048 - 4 * 4, "{how}");
        assert!(r.episodes_total > 0, "{how}");
        let (mut rows, mut restarts) = (0, 0);
        for _ in 0..3 {
            let (r, k) = check_rows(&mut trainer);
            (rows, restarts) = (rows + r, restarts + k);
        }
        assert!(restarts > 0, "{how}: the checked batches span restarts");
        assert_eq!(rows as u64 + 4 * restarts, 3 * 512, "{how}");
    }
}

/// Samples one batch from the trainer's (sampling) local evaluator and
/// checks every row's `obs` and `new_obs` come from the same process;
/// returns the rows and the restarts while sampling.
fn check_rows(trainer: &mut Trainer) -> (usize, u64) {
    let rollout = trainer.evaluators().local().sample().unwrap();
    let (Some(Column::F32 { data: obs, .. }), Some(Column::F32 { data: new_obs, .. })) =
        (rollout.batch.get(fields::OBS), rollout.batch.get(fields::NEW_OBS))
    else {
        panic!("no obs/new_obs columns");
    };
    for (row, (o, n)) in obs.chunks(2).zip(new_obs.chunks(2)).enumerate() {
        assert_eq!(o[0], n[0], "row {row}: obs from process {}, new_obs from process {}", o[0], n[0]);
    }
    (rollout.batch.len(), rollout.env_shard_restarts)
}

/// Atari through `ale-py` with DeepMind's preprocessing: 84×84×4 byte
/// frames become the CNN's input; a few thousand frames of PPO run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_runs_pong_with_the_cnn() {
    if python().is_none() {
        return;
    }
    let env = rlx_envs::make("gym:ALE/Pong-v5").unwrap();
    assert_eq!(env.observation_space(), &rlx::Space::bytes(vec![84, 84, 4]));
    assert_eq!(env.action_space(), &rlx::Space::discrete(6));
    drop(env);
    let config = json!({
        "seed": 1, "num_workers": 1, "num_envs_per_worker": 4, "train_batch_size": 256,
        "sgd_minibatch_size": 64, "num_sgd_iter": 1,
    });
    let (mut trainer, _) = build_deployed_trainer("PPO", "gym:ALE/Pong-v5", &config).await.unwrap();
    let mut r = None;
    for _ in 0..3 {
        r = Some(trainer.train().await.unwrap());
    }
    let r = r.unwrap();
    // 768 agent steps, 4 frames each.
    assert_eq!(r.timesteps_total, 768);
    assert!(r.learner.get("policy_loss").is_some_and(f64::is_finite));
}

/// DQN on Atari keeps its replay as shared frames of bytes: Pong's 84×84×4
/// byte observations fill a buffer at under 7.5 KB a transition (as `f32`
/// columns, `obs` and `new_obs` alone took 225,792 bytes), and it learns
/// from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_on_pong_replays_frames_stored_once_as_bytes() {
    if python().is_none() {
        return;
    }
    let config = json!({
        "seed": 1, "num_envs_per_worker": 2, "buffer_size": 1000, "learning_starts": 500,
        "timesteps_per_iteration": 600, "train_batch_size": 32, "training_intensity": 0.5,
    });
    let (mut trainer, _) = build_deployed_trainer("DQN", "gym:ALE/Pong-v5", &config).await.unwrap();
    let mut r = trainer.train().await.unwrap();
    r = if r.learner.get("replay_buffer_size") < Some(1000.0) { trainer.train().await.unwrap() } else { r };
    let (rows, bytes) = (r.learner.get("replay_buffer_size").unwrap(), r.learner.get("replay_buffer_bytes").unwrap());
    assert_eq!(rows, 1000.0, "the buffer is full");
    assert!(bytes / rows < 7_500.0, "{:.0} bytes per transition", bytes / rows);
    assert!(r.learner.get("loss").is_some_and(f64::is_finite), "{:?}", r.learner);
}

/// `rlx train` and `rlx rollout` with a `gym:` env from a user's module,
/// as a user runs them: the run directory (no `:` in its name), a
/// `result.json` line per iteration, and a rollout of the checkpoint's
/// policy in a fresh worker process.
#[test]
fn rlx_train_and_rollout_take_a_gym_env() {
    if python().is_none() {
        return;
    }
    let results = std::env::temp_dir().join(format!("rlx-test-gym-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&results);
    let config = r#"{"seed": 1, "num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 256, "sgd_minibatch_size": 128, "num_sgd_iter": 2, "env_config": {"length": 5}}"#;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["train", "--run", "PPO", "--env", "gym:rlx_test_envs:Corridor-v0", "--config", config])
        .args(["--stop", r#"{"timesteps_total": 1024}"#, "--checkpoint-freq", "2", "--results-dir"])
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dirs: Vec<_> = std::fs::read_dir(&results).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1);
    let name = dirs[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("PPO_gym-rlx_test_envs-Corridor-v0_"), "{name}");
    let lines = std::fs::read_to_string(dirs[0].join("result.json")).unwrap();
    assert_eq!(lines.lines().count(), 4, "{lines}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["rollout", dirs[0].to_str().unwrap(), "--episodes", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("3 episodes: mean return"), "{stdout}");
    let _ = std::fs::remove_dir_all(&results);
}
