//! The `rlx` binary as a user runs it: bad input exits non-zero with an
//! error naming the problem (never a panic or backtrace); a SIGKILLed run
//! keeps every finished iteration and a loadable checkpoint; Ctrl-C stops
//! cleanly with a final checkpoint; `--restore` continues the iteration
//! count; the learning curve is a real PNG; `rollout` and `plot` work.

mod common;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");
/// A small, fast PPO config for process tests.
const FAST: &str = r#"{"num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 256, "sgd_minibatch_size": 128, "num_sgd_iter": 2, "seed": 1}"#;

fn tmp(name: &str) -> PathBuf {
    common::tmp("cli", name)
}

fn rlx(args: &[&str]) -> Output {
    Command::new(RLX).args(args).output().expect("run rlx")
}

/// Runs `rlx args`, expects failure, and returns stderr.
fn fails(args: &[&str]) -> String {
    let out = rlx(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{args:?}: {stderr}");
    stderr
}

/// The one run directory under `results`.
fn run_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn result_lines(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("every line of result.json is complete JSON")).collect()
}

fn checkpoints(dir: &Path) -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("checkpoint_"))
        .collect();
    c.sort();
    c
}

/// `(width, height)` from a PNG's IHDR chunk, or `None` if not a PNG.
fn png_size(path: &Path) -> Option<(u32, u32)> {
    let b = std::fs::read(path).ok()?;
    if b.len() < 24 || &b[..8] != b"\x89PNG\r\n\x1a\n" || &b[12..16] != b"IHDR" {
        return None;
    }
    Some((u32::from_be_bytes(b[16..20].try_into().unwrap()), u32::from_be_bytes(b[20..24].try_into().unwrap())))
}

/// Starts a long run and waits until `result.json` has `iterations` lines.
fn start_long_run(results: &Path, extra: &[&str], iterations: usize) -> (Child, PathBuf) {
    let mut child = Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", FAST])
        .args(["--stop", r#"{"training_iteration": 1000000}"#, "--results-dir", results.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(dir) = std::fs::read_dir(results).unwrap().next().map(|e| e.unwrap().path()) {
            if result_lines(&dir).len() >= iterations {
                return (child, dir);
            }
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the run did not reach {iterations} iterations in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_input_names_the_problem() {
    let results = tmp("bad");
    let r = results.to_str().unwrap();
    let train = |extra: &[&str]| {
        let mut args = vec!["train", "--results-dir", r];
        args.extend_from_slice(extra);
        fails(&args)
    };
    let e = train(&["--run", "ppo", "--env", "CartPole-v1"]);
    assert!(e.contains("unknown algorithm `ppo`") && e.contains("did you mean `PPO`"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPol-v1"]);
    assert!(e.contains("unknown env `CartPol-v1`") && e.contains("CartPole-v1"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--config", r#"{"lr_rate": 0.1}"#]);
    assert!(e.contains("`lr_rate`") && e.contains("did you mean `lr`"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--config", r#"{"num_workers": "two"}"#]);
    assert!(e.contains("num_workers"), "{e}");
    // A typo that would allocate for minutes is refused at once, with the bound.
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--config", r#"{"num_envs_per_worker": 100000000}"#]);
    assert!(e.contains("num_envs_per_worker") && e.contains("[1, 16384]"), "{e}");
    let e = train(&["--run", "DQN", "--env", "CartPole-v1", "--config", r#"{"buffer_size": 100000000000}"#]);
    assert!(e.contains("buffer_size") && e.contains("134217728"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--config", r#"{"lambda": 1.5}"#]);
    assert!(e.contains("lambda") && e.contains("[0, 1]"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--stop", r#"{"reward": 1}"#]);
    assert!(e.contains("--stop") && e.contains("`reward`"), "{e}");
    let e = train(&["--run", "PPO", "--env", "CartPole-v1", "--restore", "/nonexistent/ckpt"]);
    assert!(e.contains("/nonexistent/ckpt") && e.contains("no such directory"), "{e}");

    // A checkpoint from PPO on CartPole, then damaged and mismatched uses of it.
    let out = rlx(&[
        "train",
        "--run",
        "PPO",
        "--env",
        "CartPole-v1",
        "--config",
        FAST,
        "--results-dir",
        r,
        "--stop",
        r#"{"training_iteration": 1}"#,
        "--checkpoint-at-end",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ckpt = checkpoints(&run_dir(&results)).pop().unwrap();
    let c = ckpt.to_str().unwrap();
    let e = train(&["--run", "A2C", "--restore", c]);
    assert!(e.contains("a checkpoint of PPO on CartPole-v1") && e.contains("A2C on CartPole-v1"), "{e}");
    let e = train(&["--env", "Acrobot-v1", "--restore", c]);
    assert!(e.contains("PPO on Acrobot-v1"), "{e}");
    std::fs::write(ckpt.join("metadata.json"), b"{\"format_version\": 1, \"algorithm\": ").unwrap();
    let e = fails(&["rollout", c, "--episodes", "1"]);
    assert!(e.contains("metadata.json") && e.contains("corrupt"), "{e}");
    let e = fails(&["config", "PPOO"]);
    assert!(e.contains("did you mean `PPO`"), "{e}");
    std::fs::remove_dir_all(results).unwrap();
}

/// One list of valid keys per algorithm, sections included, behind both
/// "valid keys" and "did you mean"; errors name the flag, or the file,
/// experiment and key, a value came from.
#[test]
fn errors_name_every_valid_key_and_where_the_value_came_from() {
    let results = tmp("sources");
    let r = results.to_str().unwrap();
    let config =
        |json: &str| fails(&["train", "--run", "PPO", "--env", "CartPole-v1", "--config", json, "--results-dir", r]);
    let e = config(r#"{"evaluation_num_worker": 1}"#);
    assert!(e.contains("did you mean `evaluation_num_workers`"), "{e}");
    for key in ["evaluation_interval", "evaluation_config", "multiagent", "nodes", "backend", "cluster", "lr", "model"]
    {
        assert!(e.contains(&format!("{key},")) || e.contains(&format!(", {key}")), "`{key}` is a valid key: {e}");
    }
    for (typo, meant) in [
        ("node", "nodes"),
        ("evaluation_duraton", "evaluation_duration"),
        ("multiagen", "multiagent"),
        ("backnd", "backend"),
    ] {
        let e = config(&format!(r#"{{"{typo}": 1}}"#));
        assert!(e.contains(&format!("`{typo}` (did you mean `{meant}`?)")), "{e}");
    }
    // A multi-agent section on a single-agent env names the section.
    let e = config(r#"{"multiagent": {"policies": ["a", "b"]}}"#);
    assert!(e.contains("config key `multiagent`:") && e.contains("multi-agent env"), "{e}");
    let e = fails(&["train", "--run", "PPO", "--env", "CartPole-v1", "--nodes", "127.0.0.1:1", "--results-dir", r]);
    assert!(e.contains("--cookie-file"), "{e}");

    let file = results.join("exp.yaml");
    let yaml = |text: &str| {
        std::fs::write(&file, text).unwrap();
        fails(&["train", "-f", file.to_str().unwrap(), "--results-dir", r])
    };
    let f = file.display().to_string();
    let e = yaml("cartpole:\n  run: PPO\n  env: CartPole-v1\n  stop: 100\n");
    assert!(e.contains(&format!("{f}: experiment `cartpole`: stop: must be a map of criteria")), "{e}");
    let e = yaml("cartpole:\n  run: PPO\n  env: CartPole-v1\n  config: {lr: fast}\n");
    assert!(e.contains(&format!("{f}: experiment `cartpole`: config: config key `lr`")), "{e}");
    let e = yaml("cartpole:\n  run: PPOO\n  env: CartPole-v1\n");
    assert!(e.contains(&format!("{f}: experiment `cartpole`: run: unknown algorithm `PPOO`")), "{e}");
    assert!(e.contains("did you mean `PPO`"), "{e}");
    // A key given by --config over a file is blamed on the flag.
    std::fs::write(&file, "cartpole:\n  run: PPO\n  env: CartPole-v1\n").unwrap();
    let e = fails(&["train", "-f", &f, "--config", r#"{"lr": "fast"}"#, "--results-dir", r]);
    assert!(e.starts_with("error: --config: config key `lr`"), "{e}");
    let e = fails(&["train", "-f", "missing.yaml", "--results-dir", r]);
    assert!(e.starts_with("error: -f missing.yaml: cannot read"), "{e}");
    assert_eq!(std::fs::read_dir(&results).unwrap().count(), 1, "nothing but the file was made");
    std::fs::remove_dir_all(results).unwrap();
}

/// An explicit `--stop '{}'` means no criterion, and the message says so
/// (CartPole-v1 has a reward threshold, 475, which it must not deny).
#[test]
fn an_empty_stop_trains_until_interrupted_and_says_why() {
    let results = tmp("empty-stop");
    let mut child = Command::new(RLX)
        .args(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", FAST, "--stop", "{}", "--results-dir"])
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let seen = common::read_until(&mut stderr, "results in", Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.contains("--stop gives no criterion: training until interrupted (Ctrl-C)"), "{seen}");
    assert!(!seen.contains("reward threshold"), "{seen}");
    std::fs::remove_dir_all(results).unwrap();
}

#[test]
fn sigkill_loses_no_finished_iteration() {
    let results = tmp("kill");
    let (mut child, dir) = start_long_run(&results, &["--checkpoint-freq", "2"], 5);
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    let lines = result_lines(&dir);
    assert!(lines.len() >= 5);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["training_iteration"], i as u64 + 1, "iterations are consecutive and complete");
    }
    let csv = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    assert!(csv.lines().count() >= 5, "progress.csv has the header and the finished rows");
    // The newest checkpoint is complete: rollout loads it through the run directory.
    let ckpts = checkpoints(&dir);
    assert!(!ckpts.is_empty());
    let out = rlx(&["rollout", dir.to_str().unwrap(), "--episodes", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 episodes: mean return"), "{stdout}");
    std::fs::remove_dir_all(results).unwrap();
}

#[test]
fn ctrl_c_checkpoints_and_restore_continues() {
    let results = tmp("sigint");
    let (mut child, dir) = start_long_run(&results, &[], 3);
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let status = common::wait_with_timeout(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "Ctrl-C exits with 128 + SIGINT");
    let lines = result_lines(&dir);
    let last = lines.last().unwrap()["training_iteration"].as_u64().unwrap();
    let ckpt = checkpoints(&dir).pop().expect("a final checkpoint");
    assert!(ckpt.ends_with(format!("checkpoint_{last:06}")), "{ckpt:?} vs iteration {last}");

    // Resume from the run directory for two more iterations, into a new run
    // directory that carries the history over.
    let resumed = tmp("resumed");
    let stop = format!(r#"{{"training_iteration": {}}}"#, last + 2);
    let out = rlx(&[
        "train",
        "--restore",
        dir.to_str().unwrap(),
        "--stop",
        &stop,
        "--results-dir",
        resumed.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not an exact resume"), "{stderr}");
    let new_dir = run_dir(&resumed);
    let iterations: Vec<u64> =
        result_lines(&new_dir).iter().map(|l| l["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=last + 2).collect::<Vec<_>>());
    let params: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(new_dir.join("params.json")).unwrap()).unwrap();
    assert_eq!(params["restored_from"], ckpt.to_str().unwrap());
    std::fs::remove_dir_all(results).unwrap();
    std::fs::remove_dir_all(resumed).unwrap();
}

/// A run killed mid-line leaves a torn last line in `result.json`, and a
/// bit may rot in its newest checkpoint: `--restore` still resumes, from
/// the previous good checkpoint, without the torn line, saying both. A
/// garbage line in the middle of the history is an error naming its line,
/// and nothing is created.
#[test]
fn restore_survives_a_torn_result_line_and_a_damaged_checkpoint() {
    let results = tmp("torn");
    let r = results.to_str().unwrap();
    let stop3 = r#"{"training_iteration": 3}"#;
    let args = ["train", "--run", "PPO", "--env", "CartPole-v1", "--config", FAST, "--results-dir", r];
    let out = rlx(&[&args[..], &["--stop", stop3, "--checkpoint-freq", "1"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = run_dir(&results);
    let ckpts = checkpoints(&dir);
    assert_eq!(ckpts.len(), 3);
    let history = std::fs::read_to_string(dir.join("result.json")).unwrap();
    std::fs::write(dir.join("result.json"), format!("{history}{{\"training_iteration\": 4, \"timesteps_to")).unwrap();
    let weights = ckpts[2].join("policy.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    bytes[100] ^= 0x04;
    std::fs::write(&weights, bytes).unwrap();
    let stale = dir.join(".checkpoint_000004.tmp-4194303");
    std::fs::create_dir(&stale).unwrap();

    let resumed = tmp("torn-resumed");
    let rr = resumed.to_str().unwrap();
    let restore = |extra: &[&str]| {
        let mut a = vec!["train", "--restore", dir.to_str().unwrap(), "--results-dir", rr];
        a.extend_from_slice(extra);
        rlx(&a)
    };
    let out = restore(&["--stop", r#"{"training_iteration": 4}"#]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("policy.safetensors") && stderr.contains("previous good checkpoint"), "{stderr}");
    assert!(stderr.contains("line 4 is torn"), "{stderr}");
    assert!(!stale.exists(), "{stderr}");
    let new_dir = run_dir(&resumed);
    let iterations: Vec<u64> =
        result_lines(&new_dir).iter().map(|l| l["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, vec![1, 2, 3, 4], "history to the good checkpoint (2), then 3 and 4 trained anew");
    std::fs::remove_dir_all(&resumed).unwrap();

    let lines: Vec<&str> = history.lines().collect();
    std::fs::write(dir.join("result.json"), format!("{}\nnot json\n{}\n", lines[0], lines[1..].join("\n"))).unwrap();
    let out = restore(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("result.json: line 2") && stderr.contains("cannot read"), "{stderr}");
    assert!(
        !resumed.exists() || std::fs::read_dir(&resumed).unwrap().next().is_none(),
        "a failed restore creates nothing"
    );
    std::fs::remove_dir_all(results).unwrap();
}

#[test]
fn yaml_run_plots_rollout_and_list() {
    let results = tmp("yaml");
    let yaml = results.join("cartpole-ppo.yaml");
    std::fs::write(
        &yaml,
        format!(
            "cartpole-ppo:\n  run: PPO\n  env: CartPole-v1\n  stop:\n    training_iteration: 3\n  checkpoint_at_end: true\n  config: {FAST}\n"
        ),
    )
    .unwrap();
    let runs = results.join("runs");
    let r = runs.to_str().unwrap();
    for seed in ["1", "2"] {
        let out = rlx(&["train", "-f", yaml.to_str().unwrap(), "--seed", seed, "--results-dir", r]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2);
    for d in &dirs {
        assert_eq!(result_lines(d).len(), 3);
        let (w, h) = png_size(&d.join("learning_curve.png")).expect("learning_curve.png is a PNG");
        assert!(w >= 400 && h >= 300, "{w}x{h}");
    }
    let out_png = results.join("compare.png");
    let out = rlx(&[
        "plot",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "-o",
        out_png.to_str().unwrap(),
        "--size",
        "640x480",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(png_size(&out_png), Some((640, 480)));
    let e = fails(&["plot", results.to_str().unwrap(), "-o", out_png.to_str().unwrap()]);
    assert!(e.contains("result.json"), "{e}");
    // The path the user gave, not a temporary file's.
    let nodir = results.join("nodir").join("x.png");
    let e = fails(&["plot", dirs[0].to_str().unwrap(), "-o", nodir.to_str().unwrap()]);
    assert!(e.contains("nodir/x.png") && e.contains("does not exist") && !e.contains("x.tmp"), "{e}");

    let ckpt = checkpoints(&dirs[0]).pop().unwrap();
    let out = rlx(&["rollout", ckpt.to_str().unwrap(), "--episodes", "1", "--render"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("episode 1 step 0") && stdout.contains("1 episode: mean return"), "{stdout}");

    let list = String::from_utf8_lossy(&rlx(&["list"]).stdout).to_string();
    assert!(list.lines().any(|l| l.trim_start().starts_with("PPO ")), "{list}");
    assert!(list.lines().any(|l| l.trim_start().starts_with("CartPole-v1 ")), "{list}");
    let config = String::from_utf8_lossy(&rlx(&["config", "PPO"]).stdout).to_string();
    assert!(config.contains("# Clip range") && config.contains("clip_param: 0.2"), "{config}");
    std::fs::remove_dir_all(results).unwrap();
}

/// The off-policy algorithms' own binaries train as `rlx train --run` does,
/// each on an env it supports, and write their results.
#[test]
fn replay_algorithm_binaries_train_and_write_results() {
    let results = tmp("replay-bins");
    for (bin, env, config) in [
        (
            env!("CARGO_BIN_EXE_rlx-apex"),
            "CartPole-v1",
            r#"{"num_workers": 1, "timesteps_per_iteration": 600, "learning_starts": 700}"#,
        ),
        (
            env!("CARGO_BIN_EXE_rlx-td3"),
            "Pendulum-v1",
            r#"{"timesteps_per_iteration": 300, "learning_starts": 400, "train_batch_size": 32}"#,
        ),
        (
            env!("CARGO_BIN_EXE_rlx-sac"),
            "Pendulum-v1",
            r#"{"timesteps_per_iteration": 300, "learning_starts": 400, "train_batch_size": 32}"#,
        ),
    ] {
        let dir = results.join(env.replace('/', "_") + bin.rsplit('/').next().unwrap());
        let args = ["--env", env, "--config", config, "--stop", r#"{"training_iteration": 2}"#, "--results-dir"];
        let out = Command::new(bin).args(args).arg(&dir).output().expect("run the binary");
        assert!(out.status.success(), "{bin}: {}", String::from_utf8_lossy(&out.stderr));
        let run = run_dir(&dir);
        let lines = result_lines(&run);
        assert_eq!(lines.len(), 2, "{bin}");
        assert!(lines[1]["learner"]["num_updates"].as_f64().unwrap() > 0.0, "{bin} learned: {}", lines[1]);
        // The loss first appears after learning_starts, past iteration 1:
        // progress.csv keeps its column all the same, row 1 empty in it.
        let loss = if bin.ends_with("apex") { "loss" } else { "critic_loss" };
        assert!(lines[0]["learner"].get(loss).is_none(), "{bin}: no update in iteration 1: {}", lines[0]);
        let csv = std::fs::read_to_string(run.join("progress.csv")).unwrap();
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let header = reader.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2, "{bin}: {csv}");
        let column = header.iter().position(|c| c == format!("learner/{loss}"));
        let column = column.unwrap_or_else(|| panic!("{bin}: no learner/{loss} column: {csv}"));
        assert_eq!(rows[0].get(column), Some(""), "{bin}: {csv}");
        assert!(rows[1][column].parse::<f64>().unwrap().is_finite(), "{bin}: {csv}");
    }
    // Off-policy algorithms reject the env shapes they have no network for.
    let e = fails(&["train", "--run", "SAC", "--env", "CartPole-v1", "--stop", r#"{"training_iteration": 1}"#]);
    assert!(e.contains("SAC") && e.contains("Discrete"), "{e}");
    std::fs::remove_dir_all(results).unwrap();
}

/// ES and ARS train from their binaries, and `rollout` plays the checkpoint
/// with the observation statistics the policy learned with (they live in
/// the policy's state, not in an evaluator filter).
#[test]
fn evolution_binaries_train_and_rollout_plays_the_learned_policy() {
    let results = tmp("evolution-bins");
    for (bin, env, min_return) in
        [(env!("CARGO_BIN_EXE_rlx-es"), "CartPole-v1", 400.0), (env!("CARGO_BIN_EXE_rlx-ars"), "CartPole-v1", 400.0)]
    {
        let dir = results.join(bin.rsplit('/').next().unwrap());
        let config = r#"{"seed": 1, "noise_size": 1000000}"#;
        let args = ["--env", env, "--config", config, "--stop", r#"{"training_iteration": 8}"#, "--checkpoint-at-end"];
        let out = Command::new(bin).args(args).arg("--results-dir").arg(&dir).output().expect("run the binary");
        assert!(out.status.success(), "{bin}: {}", String::from_utf8_lossy(&out.stderr));
        let run = run_dir(&dir);
        assert_eq!(result_lines(&run).len(), 8, "{bin}");
        let out = rlx(&["rollout", run.to_str().unwrap(), "--episodes", "5"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mean: f64 = stdout
            .split("mean return ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no mean return in {stdout}"));
        assert!(mean >= min_return, "{bin}: rollout mean {mean} < {min_return}: {stdout}");
    }
    std::fs::remove_dir_all(results).unwrap();
}

/// `rlx-pbt` runs a population round by round and writes one result line
/// per round, with each member's explored hyperparameters in it.
#[test]
fn pbt_binary_trains_a_population() {
    let results = tmp("pbt-bin");
    let config = r#"{"population": 2, "perturbation_interval": 1, "quantile_fraction": 0.5,
        "config": {"num_workers": 0, "train_batch_size": 256, "sgd_minibatch_size": 128, "num_sgd_iter": 2}}"#;
    let args = ["--env", "CartPole-v1", "--config", config, "--stop", r#"{"training_iteration": 2}"#];
    let out =
        Command::new(env!("CARGO_BIN_EXE_rlx-pbt")).args(args).arg("--results-dir").arg(&results).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = result_lines(&run_dir(&results));
    assert_eq!(lines.len(), 2);
    let learner = &lines[1]["learner"];
    assert_eq!(learner["num_exploits"].as_f64(), Some(2.0), "{learner}");
    assert!(learner["member_1_lr"].as_f64().is_some(), "{learner}");
    std::fs::remove_dir_all(results).unwrap();
}

/// A multi-agent run from the command line: two policies from the
/// `multiagent` section, their returns in `result.json`, `progress.csv`
/// and the progress line, and `rlx rollout` playing the checkpoint with
/// each agent under its own policy. A mapping to a policy the section does
/// not define is refused before training, naming it.
#[test]
fn multi_agent_run_from_the_command_line_and_its_rollout() {
    let results = tmp("multi-agent");
    let r = results.to_str().unwrap();
    let config = r#"{"num_workers": 1, "seed": 1, "multiagent": {"policies": ["p0", "p1"], "policy_mapping": "p{i}"}}"#;
    // Each agent's return is at most 500, so a sum of 800 needs both
    // above 300; the budget is what can run out.
    let stop = r#"{"episode_reward_mean": 800, "timesteps_total": 500000}"#;
    let out = rlx(&[
        "train",
        "--run",
        "PPO",
        "--env",
        "MultiAgentCartPole",
        "--config",
        config,
        "--stop",
        stop,
        "--checkpoint-at-end",
        "--results-dir",
        r,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("  p0 ") && stdout.contains("  p1 "), "{stdout}");
    let dir = run_dir(&results);
    let last = result_lines(&dir).pop().unwrap();
    for policy in ["p0", "p1"] {
        assert!(last["policy_reward_mean"][policy].as_f64().unwrap() > 250.0, "{last}");
    }
    let header = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    let header = header.lines().next().unwrap();
    assert!(header.contains("policy_reward_mean/p0") && header.contains("agent_reward_mean/agent_1"), "{header}");

    let ckpt = checkpoints(&dir).pop().unwrap();
    let out = rlx(&["rollout", ckpt.to_str().unwrap(), "--episodes", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("agents agent_0, agent_1") && stdout.contains("agent_1 "), "{stdout}");
    let mean: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("3 episodes: mean return "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(mean >= 600.0, "both greedy agents balance: {stdout}");

    // A turn-based game with masked moves plays back too.
    let games = results.join("games");
    let config = r#"{"num_envs_per_worker": 8, "multiagent": {"self_play": {"pool": 4, "snapshot_every": 2}}}"#;
    let out = rlx(&[
        "train",
        "--run",
        "PPO",
        "--env",
        "TicTacToe",
        "--config",
        config,
        "--stop",
        r#"{"training_iteration": 2}"#,
        "--checkpoint-at-end",
        "--results-dir",
        games.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = rlx(&["rollout", run_dir(&games).to_str().unwrap(), "--episodes", "4"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("4 episodes: mean return 0.0"), "zero-sum: {stdout}");
    // The snapshot column first appears in iteration 2; progress.csv keeps it.
    let csv = std::fs::read_to_string(run_dir(&games).join("progress.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let column = header.iter().position(|c| c == "learner/self_play_snapshot");
    let column = column.unwrap_or_else(|| panic!("no learner/self_play_snapshot column: {csv}"));
    assert_eq!((rows[0].get(column), rows[1].get(column)), (Some(""), Some("1.0")), "{csv}");

    let bad = r#"{"multiagent": {"policies": ["p0"], "policy_mapping": {"agent_0": "p0", "agent_1": "p9"}}}"#;
    let e = fails(&["train", "--run", "PPO", "--env", "MultiAgentCartPole", "--config", bad, "--results-dir", r]);
    assert!(e.contains("p9") && e.contains("agent_1"), "{e}");
    std::fs::remove_dir_all(results).unwrap();
}
