//! What a user meets when something outside rlx fails, through the built
//! `rlx` binary (the library's own tests run with SIGPIPE ignored by the
//! test harness, and once passed while the binary died of it):
//!
//! - a `gym:` or `pettingzoo:` env that cannot be made (an unknown id or
//!   module, no Gymnasium in `RLX_PYTHON`, a space rlx does not take)
//!   prints one line naming the env and the cause, and exits 1, never 141;
//! - a Gymnasium worker process that exits once mid-run is restarted and
//!   the run finishes its steps; one that keeps exiting ends the run past
//!   its restart budget with a clear error and a final checkpoint;
//! - a PettingZoo worker that exits once costs one evaluator restart;
//! - an external-env client that vanishes mid-episode is dropped and the
//!   run finishes; a port already in use is blamed on the other process;
//!   Ctrl-C stops a run that is waiting for its first client;
//! - output into a closed pipe exits quietly (`rollout`, `list`, `config`)
//!   or is dropped while the run goes on (`train`).
//!
//! The Python cases need Python with Gymnasium (`target/python`, prepared
//! on first use) and skip with a printed reason without it (a failure
//! under `RLX_REQUIRE_PYTHON=1`, as in CI).

mod common;

use rlx_envs::gym::testing::python;
use serde_json::{json, Value};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");
/// A small, fast PPO config for process tests.
const FAST: &str = r#"{"num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 256, "sgd_minibatch_size": 128, "num_sgd_iter": 2, "seed": 1}"#;

fn tmp(name: &str) -> PathBuf {
    common::tmp("binary", name)
}

/// `rlx args`, waited for at most `timeout` (then killed, and the test fails).
fn rlx_within(args: &[&str], envs: &[(&str, &str)], timeout: Duration) -> Output {
    let mut child = Command::new(RLX)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rlx");
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{args:?} ran past {timeout:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The arguments of `rlx train` for PPO on `env` with `config`, into `results`, until `stop`.
fn train_args<'a>(env: &'a str, config: &'a str, stop: &'a str, results: &'a Path) -> [&'a str; 11] {
    let r = results.to_str().unwrap();
    ["train", "--run", "PPO", "--env", env, "--config", config, "--stop", stop, "--results-dir", r]
}

fn train(env: &str, config: &str, stop: &str, results: &Path, envs: &[(&str, &str)]) -> Output {
    rlx_within(&train_args(env, config, stop, results), envs, Duration::from_secs(180))
}

/// Expects exit 1 with `error: ` and returns the error line; the whole of
/// stderr is in the assertion messages.
fn error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "exit {:?}, not 1 (141 is SIGPIPE): {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line: {stderr}"));
    line.to_string()
}

/// Every line of a run's `result.json`.
fn result_lines(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("every line of result.json is complete JSON")).collect()
}

/// The one run directory under `results`.
fn run_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Runs PPO on `env` to `stop`, expects it to finish (exit 0), and
/// returns its `result.json` lines, checked whole.
fn finishes(env: &str, config: &Value, stop: &str, results: &Path) -> Vec<Value> {
    let out = train(env, &config.to_string(), stop, results, &[]);
    assert!(out.status.success(), "{env}: exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let lines = result_lines(&run_dir(results));
    assert_whole(&lines);
    lines
}

/// The iterations are 1, 2, ... with none missing, and the steps grow.
fn assert_whole(lines: &[Value]) {
    let iterations: Vec<u64> = lines.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=lines.len() as u64).collect::<Vec<_>>());
    let steps: Vec<u64> = lines.iter().map(|r| r["timesteps_total"].as_u64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
}

/// Runs PPO on `env`, whose worker process exits once and leaves a marker
/// file (passed as `env_config.marker`), to `steps` timesteps in a fresh
/// `tmp(name)`; expects the run to finish past `steps` after that exit, and
/// returns its last result.
fn finishes_after_one_exit(name: &str, env: &str, mut config: Value, steps: u64) -> Value {
    let results = tmp(name);
    let marker = results.join("exited");
    config["env_config"]["marker"] = json!(marker);
    let runs = results.join("runs");
    let lines = finishes(env, &config, &json!({"timesteps_total": steps}).to_string(), &runs);
    assert!(marker.exists(), "the worker did exit");
    let last = lines.last().unwrap().clone();
    assert!(last["timesteps_total"].as_u64().unwrap() >= steps, "{last}");
    std::fs::remove_dir_all(results).unwrap();
    last
}

#[test]
fn python_envs_that_cannot_be_made_print_one_line_and_exit_1() {
    let Some(python) = python() else { return };
    let results = tmp("unmakeable");
    let fails = |env: &str, envs: &[(&str, &str)]| -> String {
        let line = error_line(&train(env, FAST, r#"{"training_iteration": 1}"#, &results, envs));
        assert!(line.contains(env), "the line names the env: {line}");
        line
    };
    let e = fails("gym:NoSuchEnv-v0", &[]);
    assert!(e.contains("Gymnasium has no env `NoSuchEnv-v0`"), "{e}");
    let e = fails("gym:CartPol-v1", &[]);
    assert!(e.contains("close ids: CartPole-v1"), "{e}");
    let e = fails("gym:nosuchmodule:Foo-v0", &[]);
    assert!(e.contains("no module `nosuchmodule` to import"), "{e}");
    let e = fails("pettingzoo:classic/nosuch-v0", &[]);
    assert!(e.contains("neither an id of PettingZoo's registry"), "{e}");
    // MiniGrid's shape: a Dict with a Text mission.
    let e = fails("gym:rlx_test_envs:MissionDict-v0", &[]);
    assert!(e.contains("['mission']") && e.contains("Text"), "names the space and where it sits: {e}");
    // An interpreter without Gymnasium: the same Python without its site-packages.
    let bare = results.join("bare-python");
    std::fs::write(&bare, format!("#!/bin/sh\nexec {} -S \"$@\"\n", python.display())).unwrap();
    std::fs::set_permissions(&bare, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let e = fails("gym:CartPole-v1", &[("RLX_PYTHON", bare.to_str().unwrap())]);
    assert!(e.contains("`gymnasium` is not installed in") && e.contains("pip install gymnasium"), "{e}");
    let e = fails("gym:CartPole-v1", &[("RLX_PYTHON", "/nonexistent/python")]);
    assert!(e.contains("/nonexistent/python"), "{e}");
    // Nothing was left half-made.
    assert_eq!(std::fs::read_dir(&results).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count(), 0);
    std::fs::remove_dir_all(results).unwrap();
}

/// A buggy simulator whose process exits once, after 3,000 steps: the
/// process is replaced and the run finishes its 20,000 steps, with the
/// restart counted and every iteration on disk.
#[test]
fn a_gym_worker_that_exits_once_is_restarted_and_the_run_finishes() {
    if python().is_none() {
        return;
    }
    let config = json!({
        "seed": 1, "num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 1000,
        "sgd_minibatch_size": 250, "num_sgd_iter": 2,
        "env_config": {"fail_at": 3000, "how": "exit_once"},
    });
    let last = finishes_after_one_exit("exit-once", "gym:rlx_test_envs:Faulty-v0", config, 20_000);
    assert!(last["learner"]["env_shard_restarts"].as_f64().unwrap_or(0.0) >= 1.0, "{last}");
}

/// The other ways a worker process fails, each every 2,000 of its steps:
/// raising an exception and hanging (killed after `step_timeout_s`). Each
/// failed process is replaced within the budget and the run finishes.
#[test]
fn gym_workers_that_raise_or_hang_are_replaced_and_the_run_finishes() {
    if python().is_none() {
        return;
    }
    for how in ["raise", "hang"] {
        let results = tmp(&format!("fails-{how}"));
        let config = json!({
            "seed": 1, "num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 1000,
            "sgd_minibatch_size": 250, "num_sgd_iter": 2,
            "env_shards": {"restart": {"max_restarts": 20}, "step_timeout_s": 1.0},
            "env_config": {"fail_at": 2000, "how": how},
        });
        let lines = finishes("gym:rlx_test_envs:Faulty-v0", &config, r#"{"timesteps_total": 8000}"#, &results);
        let last = lines.last().unwrap();
        assert!(last["timesteps_total"].as_u64().unwrap() >= 8000, "{how}: {last}");
        assert!(last["learner"]["env_shard_restarts"].as_f64().unwrap_or(0.0) >= 3.0, "{how}: {last}");
        std::fs::remove_dir_all(results).unwrap();
    }
}

/// A worker that exits every 700 steps, with one restart allowed: the run
/// ends with exit 1, an error naming the budget, and a final checkpoint
/// of its last finished iteration, which says it is no exact resume. The
/// same with the env in an evaluator actor (`num_workers: 1`), which is
/// restarted within its own budget first, and whose failed state the
/// checkpoint leaves out.
#[test]
fn a_gym_worker_that_keeps_exiting_ends_the_run_with_an_error_and_a_checkpoint() {
    if python().is_none() {
        return;
    }
    for workers in [0, 1] {
        let results = tmp(&format!("keeps-exiting-{workers}"));
        let config = json!({
            "seed": 1, "num_workers": workers, "num_envs_per_worker": 4, "train_batch_size": 256,
            "sgd_minibatch_size": 128, "num_sgd_iter": 2,
            "env_shards": {"restart": {"max_restarts": 1}},
            "env_config": {"fail_at": 700, "how": "exit"},
        });
        let stop = r#"{"timesteps_total": 100000}"#;
        let out = train("gym:rlx_test_envs:Faulty-v0", &config.to_string(), stop, &results, &[]);
        let e = error_line(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("training failed"), "{workers} workers: {stderr}");
        assert!(stderr.contains("max_restarts = 1") && stderr.contains("exit status: 3"), "{workers}: {stderr}");
        let dir = run_dir(&results);
        let lines = result_lines(&dir);
        assert!(lines.len() >= 2, "{workers} workers: iterations finished before the failure: {stderr}");
        assert_whole(&lines);
        let checkpoint = dir.join(format!("checkpoint_{:06}", lines.len()));
        assert!(
            checkpoint.join("metadata.json").is_file(),
            "{workers}: a final checkpoint of the last iteration: {stderr}"
        );
        assert!(stderr.contains(&format!("last checkpoint: {}", checkpoint.display())), "{workers}: {stderr}");
        let metadata: Value =
            serde_json::from_slice(&std::fs::read(checkpoint.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(metadata["training_iteration"].as_u64(), Some(lines.len() as u64));
        assert_eq!(metadata["exact_resume"], json!(false), "{metadata}");
        assert!(metadata["notes"].to_string().contains("when the next one failed"), "{metadata}");
        std::fs::remove_dir_all(results).unwrap();
    }
}

/// A PettingZoo worker process that exits once: its evaluator actor is
/// restarted under its supervisor's budget and the run reaches its stop.
#[test]
fn a_pettingzoo_worker_that_exits_once_costs_one_evaluator_restart() {
    if python().is_none() {
        return;
    }
    let config = json!({
        "seed": 1, "num_workers": 1, "num_envs_per_worker": 2, "train_batch_size": 500,
        "sgd_minibatch_size": 250, "num_sgd_iter": 2,
        "multiagent": {"policies": ["left", "right"], "policy_mapping": "{agent}"},
        "env_config": {"crash_at": 600},
    });
    let last = finishes_after_one_exit("pettingzoo-crash", "pettingzoo:rlx_test_agents.crash_once", config, 5000);
    assert!(last["num_evaluator_restarts"].as_u64().unwrap() >= 1, "{last}");
}

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `rlx train` on `external:<address>`, its stderr piped.
fn external_run(address: &str, cookie_file: &Path, stop: &str, results: &Path) -> Child {
    let config = json!({
        "seed": 1, "num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 500,
        "sgd_minibatch_size": 250, "num_sgd_iter": 2,
        "env_config": {"spaces_of": "CartPole-v1", "cookie_file": cookie_file},
    });
    Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", &format!("external:{address}"), "--config", &config.to_string()])
        .args(["--stop", stop, "--results-dir", results.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A client that vanishes mid-episode (the socket closed under the
/// server's next write, which once killed `rlx` by SIGPIPE) is dropped;
/// the next client carries the run to its stop, with every iteration on disk.
#[test]
fn an_external_client_that_vanishes_mid_episode_is_dropped_and_the_run_finishes() {
    let results = tmp("external-vanish");
    let cookie = results.join("cookie");
    std::fs::write(&cookie, "vanish-cookie").unwrap();
    let address = free_address();
    let runs = results.join("runs");
    let mut run = external_run(&address, &cookie, r#"{"timesteps_total": 2000}"#, &runs);
    {
        let mut quitter = common::connect(&address, "vanish-cookie");
        assert_eq!(common::play_cartpole(&mut quitter, 1, Some(5)), 5, "CartPole lasts more than 5 steps");
        // Dropped mid-episode: the socket closes.
    }
    let mut client = common::connect(&address, "vanish-cookie");
    let played = common::play_cartpole(&mut client, 2, None);
    let status = common::wait_with_timeout(&mut run, Duration::from_secs(120));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    let lines = result_lines(&run_dir(&runs));
    assert_whole(&lines);
    let steps = lines.last().unwrap()["timesteps_total"].as_u64().unwrap();
    assert!(steps >= 2000, "{stderr}");
    // Every step counted was played: the quitter's 5 and the second client's.
    assert!(played + 5 >= steps, "{played} + 5 steps played, {steps} counted");
    std::fs::remove_dir_all(results).unwrap();
}

/// A second server on a port in use blames the other process (not
/// `num_workers`); Ctrl-C stops a run that waits for its first client,
/// with exit 130.
#[test]
fn an_external_env_on_a_taken_port_names_it_and_ctrl_c_stops_the_wait() {
    let results = tmp("external-port");
    let cookie = results.join("cookie");
    std::fs::write(&cookie, "port-cookie").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let mut run = external_run(&address, &cookie, r#"{"timesteps_total": 2000}"#, &results.join("a"));
    let status = common::wait_with_timeout(&mut run, Duration::from_secs(60));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("another process already listens there"), "{stderr}");
    assert!(!stderr.contains("num_workers"), "{stderr}");
    drop(taken);

    let address = free_address();
    let mut run = external_run(&address, &cookie, r#"{"timesteps_total": 2000}"#, &results.join("b"));
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let seen = common::read_until(&mut stderr, "results in", Duration::from_secs(60));
    assert!(seen.contains("results in"), "rlx did not start waiting: {seen}");
    // Waiting for a client now; the first Ctrl-C stops it.
    std::thread::sleep(Duration::from_millis(500));
    let sent = Command::new("kill").args(["-INT", &run.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let status = common::wait_with_timeout(&mut run, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains("stopped on request while waiting for a client to connect"), "{seen}{rest}");
    std::fs::remove_dir_all(results).unwrap();
}

/// A reader that is gone before `rlx` writes its first byte (`{ sleep;
/// rlx ...; } | true`): `rollout`, `list` and `config` exit quietly (0,
/// nothing on stderr), and `train` trains on to its stop with every
/// iteration on disk. With SIGPIPE's default action each died of the
/// first write (status 141).
#[test]
fn output_into_a_closed_pipe_neither_kills_nor_stops_rlx() {
    let results = tmp("closed-pipe");
    let stop = r#"{"training_iteration": 2}"#;
    let args = train_args("CartPole-v1", FAST, stop, &results);
    let out = rlx_within(&[&args[..], &["--checkpoint-at-end"]].concat(), &[], Duration::from_secs(120));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = run_dir(&results);
    let closed = |command: String| -> Output {
        let script = format!("set -o pipefail; {{ sleep 0.3; exec '{RLX}' {command}; }} | true");
        Command::new("bash").args(["-c", &script]).output().unwrap()
    };
    for command in [format!("rollout '{}' --episodes 3", dir.display()), "list".into(), "config PPO".into()] {
        let out = closed(command.clone());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{command}: {stderr}");
        assert!(stderr.is_empty(), "{command}: {stderr}");
    }
    let more = results.join("more");
    let out = closed(format!(
        "train --run PPO --env CartPole-v1 --config '{FAST}' --stop '{stop}' --results-dir '{}' 2>&1",
        more.display()
    ));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(result_lines(&run_dir(&more)).len(), 2);
    std::fs::remove_dir_all(results).unwrap();
}
