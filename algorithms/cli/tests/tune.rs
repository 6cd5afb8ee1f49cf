//! `rlx tune` as a user runs it: a 2×2 grid with ASHA stops trials early
//! and writes the summary; a trial killed mid-run is reported and the
//! others finish; Ctrl-C stops every trial with a checkpoint and
//! `rlx tune --restore` finishes them, every iteration counted once.

mod common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn tmp(name: &str) -> PathBuf {
    common::tmp("tune", name)
}

/// Writes the experiment file and starts `rlx tune` on it.
fn start_tune(dir: &Path, experiment: &str, extra: &[&str]) -> Child {
    let file = dir.join("search.yaml");
    std::fs::write(&file, experiment).unwrap();
    Command::new(RLX)
        .args(["tune", "-f"])
        .arg(&file)
        .arg("--results-dir")
        .arg(dir.join("results"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts `rlx tune`, two trials at once, on PPO in CartPole-v1 with `num_workers: 0`, each stopped
/// at `stop` iterations, over the one config line `grid` (a `grid_search` of two values).
fn start_two_trials(dir: &Path, stop: u64, grid: &str) -> Child {
    let experiment = format!(
        "search:
  run: PPO
  env: CartPole-v1
  stop: {{training_iteration: {stop}}}
  config:
    num_workers: 0
    {grid}
"
    );
    start_tune(dir, &experiment, &["--max-concurrent", "2"])
}

/// Waits for `child` at most `limit`, killing it past that.
fn wait(mut child: Child, limit: Duration) -> (std::process::ExitStatus, String) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            return (status, text);
        }
        if t0.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "rlx tune ran past {limit:?}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The search's directory (the only one under `results`).
fn tune_dir(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("results")).ok()?.filter_map(Result::ok).map(|e| e.path()).find(|p| p.is_dir())
}

fn state(dir: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(tune_dir(dir)?.join("tune_state.json")).ok()?).ok()
}

fn iterations(run_dir: &Value) -> Vec<u64> {
    let text = std::fs::read_to_string(Path::new(run_dir.as_str().unwrap()).join("result.json")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()?["training_iteration"].as_u64()).collect()
}

/// Polls the tuner's state until `ready` holds (at most a minute).
fn until(dir: &Path, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        if let Some(s) = state(dir).filter(|s| ready(s)) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "never {what}: {:?}", state(dir));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn statuses(state: &Value) -> Vec<&str> {
    state["trials"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect()
}

#[test]
fn a_grid_with_asha_stops_trials_early_and_writes_the_summary() {
    let dir = tmp("asha");
    // Trials 0 and 1 (lr 0.001) learn, and the first of them to reach a
    // rung goes on; 2 and 3 (lr 1e-7) stay at a random policy's ~22 and
    // start (two trials at a time) after the first two recorded their
    // higher means at the rung at iteration 4, so ASHA stops them there.
    // Batches of 4096 make an iteration take tens of milliseconds, so that
    // the tuner (polling every 100 ms) sees a trial's rung before its last
    // iteration: with 1024, a trial's 12 iterations took 0.2 s, and one that
    // had finished before its results were read ran to its end.
    let experiment = "search:
  run: PPO
  env: CartPole-v1
  stop: {training_iteration: 12}
  scheduler: {type: asha, metric: episode_reward_mean, mode: max, grace_period: 4, reduction_factor: 2, max_t: 12}
  config:
    num_workers: 0
    train_batch_size: 4096
    lr: {grid_search: [0.001, 0.0000001]}
    num_sgd_iter: {grid_search: [4, 8]}
";
    let (status, out) = wait(start_tune(&dir, experiment, &["--max-concurrent", "2"]), Duration::from_secs(300));
    assert!(status.success(), "{out}");
    let state = state(&dir).unwrap();
    let trials = state["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4, "{out}");
    for t in trials {
        let last = t["last"]["training_iteration"].as_u64().unwrap();
        let slow = t["config"]["lr"].as_f64().unwrap() < 1e-6;
        match t["status"].as_str().unwrap() {
            "TERMINATED" => assert_eq!(last, 12, "{t}"),
            "STOPPED" => assert!(last < 12, "{t}"),
            other => panic!("trial {other}: {t}\n{out}"),
        }
        if slow {
            assert_eq!(t["status"], "STOPPED", "a trial that does not learn is stopped early: {t}\n{out}");
        }
        // Stopped or not, each ends with a checkpoint.
        assert!(rlx::checkpoint::latest(Path::new(t["run_dir"].as_str().unwrap())).is_some(), "{t}");
    }
    assert!(statuses(&state).contains(&"TERMINATED"), "{out}");
    let dir_path = tune_dir(&dir).unwrap();
    let summary = std::fs::read_to_string(dir_path.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    let header = lines.next().unwrap();
    assert!(
        header.contains("config/lr") && header.contains("config/num_sgd_iter") && header.contains("status"),
        "{header}"
    );
    assert_eq!(lines.count(), 4, "{summary}");
    assert!(dir_path.join("trials.png").is_file());
    assert!(out.contains("best trial: trial_00"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_crashed_trial_is_reported_and_the_others_finish() {
    let dir = tmp("crash");
    // trial_000 is killed mid-run.
    let tune = start_two_trials(&dir, 25, "lr: {grid_search: [0.001, 0.0005]}");
    let running = until(&dir, "ran trial_000 two iterations", |s| {
        let t = &s["trials"][0];
        t["pid"].is_u64() && t["run_dir"].is_string() && iterations(&t["run_dir"]).len() >= 2
    });
    let pid = running["trials"][0]["pid"].as_i64().unwrap() as i32;
    // SAFETY: kills the trial process the tuner reported.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let (status, out) = wait(tune, Duration::from_secs(300));
    // A search with a failed trial is no success for a script.
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(out.contains("error: 1 of 2 trials failed"), "{out}");
    let state = state(&dir).unwrap();
    assert_eq!(statuses(&state), ["ERROR", "TERMINATED"], "{out}");
    let killed = state["trials"][0]["error"].as_str().unwrap();
    assert!(killed.contains("signal"), "{killed}");
    assert_eq!(iterations(&state["trials"][1]["run_dir"]), (1..=25).collect::<Vec<_>>());
    std::fs::remove_dir_all(dir).unwrap();
}

/// What would put a trial in ERROR at once is refused before the first
/// trial starts, with exit 1, and no search directory is made: a typo in
/// a domain, a config key, a value one domain draws, or the algorithm.
#[test]
fn a_search_that_cannot_run_is_refused_before_any_trial() {
    let dir = tmp("refused");
    let refused = |config: &str, run: &str| -> String {
        let experiment = format!("search:\n  run: {run}\n  env: CartPole-v1\n  num_samples: 3\n  config:\n{config}");
        let (status, out) = wait(start_tune(&dir, &experiment, &[]), Duration::from_secs(30));
        assert_eq!(status.code(), Some(1), "{out}");
        assert!(tune_dir(&dir).is_none(), "no search directory: {out}");
        assert!(out.contains(&format!("error: -f {}", dir.join("search.yaml").display())), "names the file: {out}");
        out
    };
    let e = refused("    lr: {gridsearch: [0.1, 0.2]}\n", "PPO");
    assert!(e.contains("`gridsearch` is not a search domain (did you mean `grid_search`?)"), "{e}");
    let e = refused("    num_worker: 0\n", "PPO");
    assert!(e.contains("unknown config key `num_worker` (did you mean `num_workers`?)"), "{e}");
    let e = refused("    lr: {grid_search: [0.001, -1.0]}\n", "PPO");
    assert!(e.contains("(with lr=-1.0)") && e.contains("`lr`"), "names the trial's value and the key: {e}");
    let e = refused("    lr: 0.001\n", "PPOO");
    assert!(e.contains("run: unknown algorithm `PPOO` (did you mean `PPO`?)"), "{e}");
    let out = Command::new(RLX).args(["tune", "-f", "missing.yaml"]).output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: -f missing.yaml: cannot read"), "the flag as typed: {e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn ctrl_c_stops_every_trial_with_a_checkpoint_and_restore_finishes_them() {
    let dir = tmp("restore");
    let tune = start_two_trials(&dir, 30, "seed: {grid_search: [1, 2]}");
    until(&dir, "ran both trials three iterations", |s| {
        s["trials"].as_array().unwrap().iter().all(|t| t["run_dir"].is_string() && iterations(&t["run_dir"]).len() >= 3)
    });
    // SAFETY: interrupts the tuner we started.
    assert_eq!(unsafe { libc::kill(tune.id() as i32, libc::SIGINT) }, 0);
    let (status, out) = wait(tune, Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "{out}");
    let stopped = state(&dir).unwrap();
    assert_eq!(statuses(&stopped), ["INTERRUPTED", "INTERRUPTED"], "{out}");
    let mut at_stop = Vec::new();
    for t in stopped["trials"].as_array().unwrap() {
        let run = Path::new(t["run_dir"].as_str().unwrap());
        let checkpoint = rlx::checkpoint::latest(run).expect("a checkpoint at Ctrl-C");
        let done = iterations(&t["run_dir"]);
        assert!(done.len() < 30, "stopped before the end: {done:?}");
        assert_eq!(checkpoint.file_name().unwrap().to_str().unwrap(), rlx::checkpoint::dir_name(done.len() as u64));
        at_stop.push(done.len());
    }

    let out = Command::new(RLX).args(["tune", "--restore"]).arg(tune_dir(&dir).unwrap()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let done = state(&dir).unwrap();
    assert_eq!(statuses(&done), ["TERMINATED", "TERMINATED"], "{text}");
    for (k, (t, before)) in done["trials"].as_array().unwrap().iter().zip(at_stop).enumerate() {
        // A new run directory that carries the history: every iteration once.
        assert_ne!(t["run_dir"], stopped["trials"][k]["run_dir"]);
        assert_eq!(iterations(&t["run_dir"]), (1..=30).collect::<Vec<_>>(), "resumed after {before}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
