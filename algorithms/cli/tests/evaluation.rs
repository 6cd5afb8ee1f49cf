//! Evaluation during training, checkpoint retention and TensorBoard, as a
//! user meets them: evaluations run at the interval on evaluators of their
//! own and leave training exactly as it was, in the driver and in parallel
//! actors; `rlx train` stops on the greedy evaluation's mean, keeps exactly
//! the best checkpoints by it and the newest, `rlx rollout --pick best`
//! plays the best, and Python's `tensorboard` reads back the event file
//! with `result.json`'s values.

mod common;
use rlx_cli::build_deployed_trainer;
use rlx_envs::gym::testing::python;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn tmp(name: &str) -> PathBuf {
    common::tmp("evaluation", name)
}

/// Per iteration: steps, training mean, episodes, a learner statistic, and
/// the evaluation; then the learner's weights.
type Trace = (Vec<(u64, Option<f64>, u64, Option<f64>)>, Vec<Option<(u64, f64)>>, Vec<f32>);

async fn trace(config: Value, iterations: usize) -> Trace {
    let (mut trainer, _) = build_deployed_trainer("PPO", "CartPole-v1", &config).await.unwrap();
    let (mut training, mut evaluations) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        let r = trainer.train().await.unwrap();
        training.push((r.timesteps_total, r.episode_reward_mean, r.episodes_total, r.learner.get("policy_loss")));
        evaluations.push(r.evaluation.map(|e| (e.episodes, e.episode_reward_mean)));
    }
    let weights = trainer.evaluators().local().policy().get_weights();
    (training, evaluations, weights)
}

/// Evaluations run after every second iteration with 6 episodes each, in
/// the driver and on two actors in parallel with training, and training
/// samples, learns and ends on exactly the same numbers as without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluation_runs_at_the_interval_and_leaves_training_unchanged() {
    let base =
        json!({"num_workers": 0, "train_batch_size": 1000, "sgd_minibatch_size": 250, "num_sgd_iter": 3, "seed": 5});
    let (training, evaluations, weights) = trace(base.clone(), 4).await;
    assert!(evaluations.iter().all(Option::is_none));
    for workers in [0, 2] {
        let mut config = base.clone();
        config["evaluation_interval"] = json!(2);
        config["evaluation_duration"] = json!(6);
        config["evaluation_num_workers"] = json!(workers);
        let (t, e, w) = trace(config, 4).await;
        assert_eq!(t, training, "{workers} evaluation workers changed training");
        assert_eq!(w, weights, "{workers} evaluation workers changed the learned weights");
        let at: Vec<usize> = e.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(i, _)| i + 1).collect();
        assert_eq!(at, vec![2, 4], "{workers} workers: {e:?}");
        assert!(e.iter().flatten().all(|&(n, mean)| n == 6 && mean > 0.0), "{e:?}");
        if workers == 0 {
            // In the driver, evaluation 2 (after iteration 4) played the
            // weights iteration 4 ended with, greedily, from the documented
            // seeds: replaying that here gives the same episodes exactly.
            // PPO's 8 env copies per evaluator, as the evaluation's.
            let copies = (0..8).map(|_| rlx_envs::make("CartPole-v1").unwrap()).collect();
            let env = rlx::VectorEnv::new(copies).unwrap();
            let (obs, act) = (env.observation_space().clone(), env.action_space().clone());
            let mut policy = rlx_algorithms::make_policy("PPO", &base, &obs, &act, 0).unwrap();
            policy.set_weights(&w).unwrap();
            let mut evaluator = rlx::PolicyEvaluator::new(policy, env, 1, 0).unwrap();
            let seed = rlx::evaluator::evaluator_seed(5 + rlx_algorithms::build::evaluation_config::SEED_OFFSET, 0, 2);
            let episodes = evaluator.evaluate(6, seed, false).unwrap();
            let expected = rlx::evaluation::EvaluationResult::of(&episodes);
            assert_eq!(e[3], Some((6, expected.episode_reward_mean)), "{e:?}");
            // Sampled actions play other episodes.
            let explored = rlx::evaluation::EvaluationResult::of(&evaluator.evaluate(6, seed, true).unwrap());
            assert_ne!(explored.episode_reward_mean, expected.episode_reward_mean);
        }
    }
}

fn results(run: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run.join("result.json")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn only_run(dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// `rlx train` with a greedy evaluation every two iterations stops on its
/// mean (475, the env's threshold, far above a random policy's 22),
/// keeps the two best checkpoints by it and the newest, and
/// `rlx rollout --pick best` plays the best of them.
#[test]
fn rlx_train_stops_on_the_evaluation_and_keeps_the_best_checkpoints() {
    let dir = tmp("train");
    let out = Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir"])
        .arg(&dir)
        .args(["--config", r#"{"evaluation_interval": 2, "evaluation_duration": 10, "seed": 1}"#])
        .args(["--stop", r#"{"evaluation/episode_reward_mean": 475, "timesteps_total": 400000}"#])
        .args(["--checkpoint-freq", "2", "--keep-checkpoints-num", "2"])
        .args(["--checkpoint-score-attr", "evaluation/episode_reward_mean"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("eval "), "the progress line shows the evaluation: {stdout}");
    let run = only_run(&dir);
    let results = results(&run);
    let last = results.last().unwrap();
    assert!(last["evaluation"]["episode_reward_mean"].as_f64().unwrap() >= 475.0, "{last}");
    assert!(last["timesteps_total"].as_u64().unwrap() < 400_000, "stopped on the evaluation, not the budget");
    for r in &results {
        let i = r["training_iteration"].as_u64().unwrap();
        assert_eq!(r.get("evaluation").is_some(), i % 2 == 0, "iteration {i}: {r}");
        if i % 2 == 0 {
            assert_eq!(r["evaluation"]["episodes"], 10, "{r}");
        }
    }
    // The checkpoints kept: the two best evaluations, and the newest.
    let mut scored: Vec<(u64, f64)> = results
        .iter()
        .filter_map(|r| Some((r["training_iteration"].as_u64()?, r["evaluation"]["episode_reward_mean"].as_f64()?)))
        .collect();
    let newest = scored.last().unwrap().0;
    scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(b.0.cmp(&a.0)));
    let mut expected: Vec<u64> = scored.iter().take(2).map(|s| s.0).collect();
    let best = expected[0];
    if !expected.contains(&newest) {
        expected.push(newest);
    }
    expected.sort_unstable();
    let mut kept: Vec<u64> = rlx::checkpoint::all(&run)
        .iter()
        .map(|p| rlx::checkpoint::iteration_of(p.file_name().unwrap().to_str().unwrap()).unwrap())
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, expected, "scores {scored:?}");
    let csv = std::fs::read_to_string(run.join("progress.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("evaluation/episode_reward_mean"), "{csv}");

    let out = Command::new(RLX).args(["rollout", "--pick", "best", "--episodes", "2"]).arg(&run).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let best_dir = rlx::checkpoint::dir_name(best);
    assert!(stdout.contains(&best_dir), "rollout --pick best plays {best_dir}: {stdout}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Python's `tensorboard` reads the run's event file back, with a scalar
/// per numeric metric of `result.json` at each iteration's env steps.
#[test]
fn tensorboard_reads_back_the_values_of_result_json() {
    let Some(python) = python() else { return };
    let dir = tmp("tensorboard");
    let out = Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir"])
        .arg(&dir)
        .args(["--config", r#"{"evaluation_interval": 2, "evaluation_duration": 3}"#])
        .args(["--stop", r#"{"training_iteration": 4}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = only_run(&dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/read_tensorboard.py");
    let out = Command::new(python).arg(script).arg(&run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scalars: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = results(&run);
    let mut checked = 0;
    for r in &results {
        let step = r["timesteps_total"].as_u64().unwrap();
        for (tag, value) in leaves(r) {
            let points = scalars[&tag].as_array().unwrap_or_else(|| panic!("no scalar `{tag}` in {scalars}"));
            let point =
                points.iter().find(|p| p[0].as_u64() == Some(step)).unwrap_or_else(|| panic!("{tag} at {step}"));
            let read = point[1].as_f64().unwrap();
            assert_eq!(read, f64::from(value as f32), "{tag} at step {step}");
            checked += 1;
        }
    }
    for tag in ["episode_reward_mean", "evaluation/episode_reward_mean", "learner/policy_loss", "time_total_s"] {
        assert!(scalars.get(tag).is_some(), "no `{tag}`: {scalars}");
    }
    assert_eq!(scalars["evaluation/episode_reward_mean"].as_array().unwrap().len(), 2);
    assert!(checked > 4 * 15, "{checked} values compared");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The numeric leaves of a result, `/`-separated.
fn leaves(v: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, f64)>) {
        match v {
            Value::Number(n) => out.push((prefix.to_string(), n.as_f64().unwrap())),
            Value::Object(m) => {
                for (k, v) in m {
                    let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}/{k}") };
                    walk(&p, v, out);
                }
            }
            _ => {}
        }
    }
    walk("", v, &mut out);
    out
}
