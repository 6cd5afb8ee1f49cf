//! Learning from files, through the built `rlx` binary: a run writes what
//! it samples (`output`), `rlx dataset info` counts it, and DQN, BC,
//! MARWIL and CQL learn from it (`input`); a run killed while writing leaves whole
//! files and one partial file that readers skip.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str]) -> Output {
    let out = Command::new(RLX).args(args).stdin(Stdio::null()).output().expect("run rlx");
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every line of a run's `result.json`.
fn results(run: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run.join("result.json")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The evaluation returns a run reported, in order.
fn evaluations(run: &Path) -> Vec<f64> {
    results(run).iter().filter_map(|r| r["evaluation"]["episode_reward_mean"].as_f64()).collect()
}

/// `rlx train --run <run> --env <env> --stop <stop> --config <config>
/// --results-dir <results>` plus `extra`, which must succeed; the run's
/// directory (the newest under `results`).
fn train(run: &str, env: &str, stop: &str, config: &str, results: &Path, extra: &[&str]) -> PathBuf {
    let dir = results.to_str().unwrap();
    let args = ["train", "--run", run, "--env", env, "--stop", stop, "--config", config, "--results-dir", dir];
    rlx(&args.iter().chain(extra).copied().collect::<Vec<_>>());
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    runs.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    runs.pop().unwrap()
}

/// `rlx dataset info` of `dir`: its `steps:` number, the mean of its
/// `returns:` line, and its whole text.
fn dataset_info(dir: &Path) -> (u64, f64, String) {
    let out = rlx(&["dataset", "info", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{name} {text}"));
    let steps = field("steps:").trim().parse().unwrap();
    let mean =
        field("returns:").split_whitespace().nth(1).map_or(f64::NAN, |m| m.trim_end_matches(',').parse().unwrap());
    (steps, mean, text)
}

const GREEDY_EVAL: &str =
    r#""evaluation_interval": 50, "evaluation_duration": 20, "evaluation_config": {"explore": false}"#;

/// `{"input": dir, <GREEDY_EVAL>}`.
fn input(dir: &Path) -> String {
    format!(r#"{{"input": "{}", {GREEDY_EVAL}}}"#, dir.display())
}

/// Only good actions in the data: imitation works, and so does CQL, whose
/// penalty keeps the Q-values of the actions never taken down, while plain
/// DQN chases those unchecked values and does worse than random play.
#[test]
fn bc_and_cql_on_episodes_of_a_trained_ppo_reach_a_greedy_475_where_dqn_fails() {
    let root = common::tmp("offline", "bc");
    let (ppo, data) = (root.join("ppo"), root.join("expert"));
    // PPO until it solves CartPole, then the solved policy (lr ~0) writes
    // 20k steps of its episodes.
    let run = train(
        "PPO",
        "CartPole-v1",
        r#"{"episode_reward_mean": 475}"#,
        "{}",
        &ppo,
        &["--seed", "1", "--checkpoint-at-end"],
    );
    let solved = results(&run).last().unwrap()["timesteps_total"].as_u64().unwrap();
    let checkpoint = std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let stop = format!(r#"{{"timesteps_total": {}}}"#, solved + 20_000);
    let output = format!(r#"{{"output": "{}", "lr": 1e-9}}"#, data.display());
    train("PPO", "CartPole-v1", &stop, &output, &ppo, &["--restore", checkpoint.to_str().unwrap()]);
    let (steps, mean, info) = dataset_info(&data);
    assert!(steps >= 20_000 && mean > 400.0, "expert episodes: {info}");

    let bc = train("BC", "CartPole-v1", r#"{"training_iteration": 150}"#, &input(&data), &root.join("bc"), &[]);
    let evals = evaluations(&bc);
    assert!(evals.last().copied().unwrap_or_default() >= 475.0, "BC's greedy returns: {evals:?}");

    let config = input(&data).replace("50", "10");
    let stop = r#"{"training_iteration": 40}"#;
    let cql = evaluations(&train("CQL", "CartPole-v1", stop, &config, &root.join("cql"), &[]));
    let dqn = evaluations(&train("DQN", "CartPole-v1", stop, &config, &root.join("dqn"), &[]));
    assert!(cql.iter().all(|&r| r >= 475.0), "CQL's greedy returns: {cql:?}");
    // Random play lasts about 22 steps.
    assert!(dqn.iter().all(|&r| r < 50.0), "DQN's greedy returns: {dqn:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A mix of a learning PPO's episodes, poor to solved: MARWIL's weighting
/// by advantage does better than imitating every action alike.
#[test]
fn marwil_beats_bc_on_the_episodes_of_a_learning_ppo() {
    let root = common::tmp("offline", "marwil");
    let data = root.join("mix");
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    train("PPO", "CartPole-v1", r#"{"timesteps_total": 40000}"#, &output, &root.join("ppo"), &["--seed", "2"]);
    let (_, mean, info) = dataset_info(&data);
    assert!(mean < 250.0, "a mix of poor and good episodes: {info}");
    let mut last = Vec::new();
    for algorithm in ["BC", "MARWIL"] {
        let run = train(
            algorithm,
            "CartPole-v1",
            r#"{"training_iteration": 200}"#,
            &input(&data),
            &root.join(algorithm),
            &[],
        );
        let evals = evaluations(&run);
        last.push(evals.iter().rev().take(2).sum::<f64>() / 2.0);
    }
    let (bc, marwil) = (last[0], last[1]);
    assert!(marwil >= 475.0 && marwil >= bc + 25.0, "greedy returns, last two evaluations: BC {bc}, MARWIL {marwil}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn every_sampled_step_is_written_and_dqn_learns_from_the_files() {
    let root = common::tmp("offline", "dqn");
    let data = root.join("replay");
    let output = format!(r#"{{"output": "{}", "num_workers": 2, "output_compression": "gzip"}}"#, data.display());
    let run = train("DQN", "CartPole-v1", r#"{"timesteps_total": 30000}"#, &output, &root.join("runs"), &[]);
    let sampled = results(&run).last().unwrap()["timesteps_total"].as_u64().unwrap();
    let (steps, _, info) = dataset_info(&data);
    assert_eq!(steps, sampled, "every step the run counted is in the files: {info}");
    assert!(info.contains("files:             2 (0 partial left out)"), "one file per worker, all finished: {info}");

    let config = input(&data).replace("50", "10");
    let run = train("DQN", "CartPole-v1", r#"{"training_iteration": 40}"#, &config, &root.join("from_files"), &[]);
    let evals = evaluations(&run);
    let best = evals.iter().copied().fold(0.0, f64::max);
    // Random play lasts about 22 steps.
    assert!(best >= 200.0 && *evals.last().unwrap() >= 120.0, "DQN's greedy returns from files: {evals:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_run_killed_while_writing_leaves_finished_files_that_read_whole() {
    let root = common::tmp("offline", "killed");
    let data = root.join("data");
    let config =
        format!(r#"{{"output": "{}", "output_max_file_size": 4096, "output_compression": "none"}}"#, data.display());
    let stop = r#"{"timesteps_total": 100000000}"#;
    let mut child = Command::new(RLX)
        .args(["train", "--run", "DQN", "--env", "CartPole-v1", "--stop", stop, "--config", &config])
        .args(["--results-dir", root.join("runs").to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let finished_files = |d: &Path| -> Vec<PathBuf> {
        let entries =
            std::fs::read_dir(d).map(|r| r.map(|e| e.unwrap().path()).collect()).unwrap_or_else(|_| Vec::new());
        entries.into_iter().filter(|p: &PathBuf| p.extension().is_some_and(|x| x == "jsonl")).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished_files(&data).len() < 5 {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no 5 finished files in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (steps, _, info) = dataset_info(&data);
    // The file after the last finished one is begun when its first episode
    // ends: the kill may have come before.
    let partial = info.contains("(1 partial left out)") && info.contains("left out: its writer did not finish it");
    assert!(partial || info.contains("(0 partial left out)"), "at most one partial file: {info}");
    // The finished files hold whole lines only, and every line is an episode.
    let mut lines = 0;
    for path in finished_files(&data) {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'));
        lines += text.lines().count();
    }
    assert!(info.contains(&format!("episodes:          {lines} (")), "{lines} lines: {info}");
    assert!(steps > 0);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn bad_inputs_are_named_before_training() {
    let root = common::tmp("offline", "bad");
    let (data, runs) = (root.join("cartpole"), root.join("runs"));
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    train("DQN", "CartPole-v1", r#"{"timesteps_total": 2000}"#, &output, &runs, &[]);
    let fails = |run: &str, env: &str, config: &str, needle: &str| {
        let args = ["train", "--run", run, "--env", env, "--config", config, "--results-dir", runs.to_str().unwrap()];
        let out = Command::new(RLX).args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{run} {config}: {err}");
        assert!(err.contains(needle), "{run} {config}: {err}");
    };
    let input = format!(r#"{{"input": "{}"}}"#, data.display());
    fails("DQN", "Acrobot-v1", &input, "the dataset's observation space is Box(low=[-4.8");
    fails("PPO", "CartPole-v1", &input, "PPO learns on-policy");
    fails("BC", "CartPole-v1", "{}", "BC learns from files");
    let missing = format!(r#"{{"input": "{}"}}"#, root.join("nothing").display());
    fails("BC", "CartPole-v1", &missing, "no experience files there");
    let glob = format!(r#"{{"input": "{}/*.jsonl.gz"}}"#, data.display());
    fails("BC", "CartPole-v1", &glob, "no experience files there");
    let both = format!(r#"{{"input": "{0}", "output": "{0}"}}"#, data.display());
    fails("DQN", "CartPole-v1", &both, "a run from `input` samples no episodes to write");
    // Neither --stop nor evaluation: nothing would ever stop it.
    fails("DQN", "CartPole-v1", &input, "DQN learns from `input` and plays no episodes of its own");
    std::fs::remove_dir_all(&root).unwrap();
}
