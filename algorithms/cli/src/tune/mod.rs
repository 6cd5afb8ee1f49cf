//! `rlx tune`: hyperparameter search over an experiment file whose config
//! values may be search domains ([`space`]), with `num_samples` and an
//! optional ASHA `scheduler` ([`asha`]).
//!
//! Each trial is an `rlx train` child process with its own results
//! directory (`<tune dir>/trial_<k>/`), so a trial that crashes, panics
//! or is killed is reported while the others go on, and a trial is
//! exactly what `rlx train` would run. The tuner reads the trials'
//! `result.json` as they grow: it feeds ASHA, which stops a trial with
//! SIGINT (the trial finishes its iteration and writes a checkpoint), and
//! it prints a table of the trials whenever one changes state.
//!
//! The tuner's state (`tune_state.json`) is rewritten atomically on every
//! change. Ctrl-C passes one SIGINT to every running trial, which stop
//! with a checkpoint; `rlx tune --restore <tune dir>` resumes the
//! unfinished trials from their checkpoints and starts the pending ones.
//! At the end the tuner writes `summary.csv` (one row per trial) and
//! `trials.png` (every trial's curve).

pub mod asha;
pub mod space;

use crate::args::TuneArgs;
use crate::experiment::read_experiment_file;
use crate::plot::{render_learning_curves, Series};
use crate::results::write_atomic;
use crate::retention::ScoreAttr;
use crate::{arg_error, CliError};
use asha::{Asha, AshaConfig};
use rlx::config::ConfigError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The keys of an experiment `rlx tune` takes: `rlx train`'s, and the
/// search's own.
const TUNE_KEYS: &[&str] = &["num_samples", "scheduler"];

/// Where a trial stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Not started.
    Pending,
    /// Training.
    Running,
    /// Reached its stop criteria.
    Terminated,
    /// Stopped early by the scheduler.
    Stopped,
    /// Stopped by Ctrl-C with a checkpoint; `--restore` resumes it.
    Interrupted,
    /// Failed; the error says how.
    Error,
}

/// One trial: its config and how it went.
#[derive(Debug, Serialize, Deserialize)]
pub struct Trial {
    /// `trial_<k>`, also its directory's name.
    pub id: String,
    /// The values the search chose, by config path.
    pub params: Vec<(String, Value)>,
    /// Its whole config.
    pub config: Value,
    /// Where it stands.
    pub status: Status,
    /// How it failed.
    pub error: Option<String>,
    /// Its `rlx train` process while it runs.
    pub pid: Option<u32>,
    /// Its run directory (the newest, after a resume).
    pub run_dir: Option<PathBuf>,
    /// Its last result.
    pub last: Option<Value>,
    /// The latest value of the compared metric (the scheduler's, else the
    /// mean return) in any of its results: an evaluation metric is missing
    /// from the iterations between evaluations.
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(skip)]
    child: Option<Child>,
    /// Lines of the run's result.json already read.
    #[serde(skip)]
    seen: usize,
    /// The scheduler asked it to stop.
    #[serde(skip)]
    stopping: bool,
    /// Run directories that existed before its process started.
    #[serde(skip)]
    before: Vec<PathBuf>,
}

/// The tuner's state, `tune_state.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct TuneState {
    /// The experiment as `rlx train` takes it, less `config`.
    pub experiment: Map<String, Value>,
    /// ASHA's rungs, if it schedules.
    pub scheduler: Option<Asha>,
    /// The trials.
    pub trials: Vec<Trial>,
}

/// How a search ended.
#[derive(Debug)]
pub struct TuneOutcome {
    /// The search's directory.
    pub dir: PathBuf,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
    /// Trials in each final state.
    pub trials: Vec<(String, Status)>,
}

const STATE_FILE: &str = "tune_state.json";

/// Runs `rlx tune`.
///
/// # Errors
/// A bad experiment file or search space, or files that cannot be written.
/// A failing trial is not an error: it is reported and the others go on.
pub async fn tune(args: &TuneArgs) -> Result<TuneOutcome, CliError> {
    let (dir, mut state) = match (&args.restore, &args.config_file) {
        (Some(dir), _) => {
            let state = load(dir)?;
            (dir.clone(), state)
        }
        (None, Some(file)) => new_search(file, args)?,
        (None, None) => return Err(CliError::Usage("rlx tune needs -f/--config-file FILE or --restore DIR".into())),
    };
    let max_concurrent =
        args.max_concurrent.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    errln!(
        "{} trials in {} ({} at a time){}",
        state.trials.len(),
        dir.display(),
        max_concurrent,
        if args.restore.is_some() { ", resumed" } else { "" }
    );
    save(&dir, &state)?;
    let interrupted = crate::train::interrupts(false);
    let exe = std::env::current_exe().map_err(|e| CliError::Usage(format!("cannot find the rlx executable: {e}")))?;
    let mut forwarded = false;
    let mut last_table = Instant::now();
    print_table(&state);
    loop {
        let presses = interrupted.load(Ordering::SeqCst);
        let stopping = presses > 0;
        let (mut changed, mut moved) = (false, false);
        if presses >= 2 {
            // A second Ctrl-C: quit now, and take the trials along (each
            // resumes from its newest checkpoint, if it has one).
            errln!("second Ctrl-C: killing the running trials and exiting");
            for t in state.trials.iter_mut().filter(|t| t.status == Status::Running) {
                if let Some(mut child) = t.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                t.pid = None;
                t.status = Status::Interrupted;
            }
            save(&dir, &state)?;
            std::process::exit(130);
        }
        if stopping && !forwarded {
            forwarded = true;
            errln!("Ctrl-C: stopping every trial after its iteration, with a checkpoint");
            // Trials the scheduler is stopping already had their one SIGINT.
            for t in state.trials.iter().filter(|t| t.status == Status::Running && !t.stopping) {
                signal_stop(t);
            }
        }
        // Start trials while there is room.
        while !stopping && running(&state) < max_concurrent {
            let Some(k) = state.trials.iter().position(|t| t.status == Status::Pending) else { break };
            start(&exe, &dir, &state.experiment, &mut state.trials[k])?;
            (changed, moved) = (true, true);
        }
        for k in 0..state.trials.len() {
            if state.trials[k].status != Status::Running {
                continue;
            }
            changed |= read_new_results(&dir, &mut state, k)?;
            let exited = reap(&dir, &mut state.trials[k], stopping)?;
            if exited {
                // What it wrote between the read above and its exit.
                read_new_results(&dir, &mut state, k)?;
                // Asked to stop as it finished its budget: it ran to its end.
                let last = state.trials[k].last.as_ref();
                if state.trials[k].status == Status::Stopped
                    && state.scheduler.as_ref().zip(last).is_some_and(|(asha, last)| asha.at_max_t(last))
                {
                    state.trials[k].status = Status::Terminated;
                }
            }
            (changed, moved) = (changed || exited, moved || exited);
        }
        if changed {
            save(&dir, &state)?;
        }
        // The table when a trial starts or ends, and every 30 s between.
        if moved || last_table.elapsed() > Duration::from_secs(30) {
            print_table(&state);
            last_table = Instant::now();
        }
        let pending = state.trials.iter().any(|t| t.status == Status::Pending);
        if running(&state) == 0 && (!pending || stopping) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    save(&dir, &state)?;
    write_summary(&dir, &state)?;
    let interrupted = interrupted.load(Ordering::SeqCst) > 0;
    report_best(&state);
    if interrupted {
        outln!("interrupted: resume with `rlx tune --restore {}`", dir.display());
    }
    Ok(TuneOutcome { dir, interrupted, trials: state.trials.iter().map(|t| (t.id.clone(), t.status)).collect() })
}

/// Reads the experiment file and expands its search space into trials in
/// a new directory.
fn new_search(file: &Path, args: &TuneArgs) -> Result<(PathBuf, TuneState), CliError> {
    let flag = format!("{} {}", crate::args::config_file_flag(), file.display());
    let mut entries = read_experiment_file(file)?;
    if entries.len() != 1 {
        return Err(CliError::Usage(format!(
            "{flag}: rlx tune searches one experiment; the file has {}",
            entries.len()
        )));
    }
    let (_, mut entry) = entries.remove(0);
    let bad = |message: String| arg_error(&flag, ConfigError::Malformed(message));
    let num_samples = match entry.remove("num_samples") {
        None => 1,
        Some(v) => v
            .as_u64()
            .filter(|&n| (1..=100_000).contains(&n))
            .ok_or_else(|| bad(format!("`num_samples` must be a whole number in [1, 100000], got {v}")))?
            as usize,
    };
    let scheduler = match entry.remove("scheduler") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let config: AshaConfig = serde_json::from_value(v).map_err(|e| bad(format!("scheduler: {e}")))?;
            config.check().map_err(&bad)?;
            Some(Asha::new(config))
        }
    };
    let config = entry.remove("config").unwrap_or(json!({}));
    let variants = space::expand(&config, num_samples, args.seed).map_err(|e| arg_error(&flag, e))?;
    // What stays must be `rlx train`'s keys; it checks them per trial, but
    // a typo should fail here, once.
    if let Some(key) = entry.keys().find(|k| !crate::experiment::EXPERIMENT_KEYS.contains(&k.as_str())) {
        let valid: Vec<&str> = crate::experiment::EXPERIMENT_KEYS.iter().chain(TUNE_KEYS).copied().collect();
        return Err(arg_error(
            &flag,
            ConfigError::UnknownKey {
                key: key.clone(),
                closest: rlx::config::closest(key, valid.iter().copied()),
                valid: valid.iter().map(|s| s.to_string()).collect(),
            },
        ));
    }
    for key in ["run", "env"] {
        if !entry.get(key).is_some_and(Value::is_string) {
            return Err(bad(format!("`{key}` is required")));
        }
    }
    for key in ["checkpoint_freq", "keep_checkpoints_num"] {
        match entry.get(key) {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some_and(|n| n >= u64::from(key == "keep_checkpoints_num")) => {}
            Some(v) => return Err(bad(format!("`{key}` must be a whole number (keep_checkpoints_num >= 1), got {v}"))),
        }
    }
    if let Some(stop) = entry.get("stop").filter(|s| !s.is_null()) {
        let mut stop = stop.clone();
        crate::experiment::translate_stop(&mut stop);
        rlx::config::from_value::<rlx::StopCriteria>(stop).map_err(|e| arg_error(format!("{flag}: stop"), e))?;
    }
    if let Some(attr) = entry.get("checkpoint_score_attr").and_then(Value::as_str) {
        ScoreAttr::parse(attr).map_err(|e| arg_error(&flag, e))?;
    }
    check_trials(&flag, &entry, &variants)?;
    let name = format!("tune_{}_{}", entry["run"].as_str().unwrap_or("run"), entry["env"].as_str().unwrap_or("env"));
    let dir = crate::train::new_run_dir(&args.results_dir, &name.replace(['/', ':'], "-"))?;
    let trials = variants
        .into_iter()
        .enumerate()
        .map(|(k, v)| Trial {
            id: format!("trial_{k:03}"),
            params: v.params,
            config: v.config,
            status: Status::Pending,
            error: None,
            pid: None,
            run_dir: None,
            last: None,
            score: None,
            child: None,
            seen: 0,
            stopping: false,
            before: Vec::new(),
        })
        .collect();
    Ok((dir, TuneState { experiment: entry, scheduler, trials }))
}

/// Refuses, before any trial starts, what would put a trial in ERROR
/// at once: an unknown algorithm, and any trial's config (every domain
/// resolved to its value) with a key, type or range `rlx train` refuses.
/// A search whose trials all fail burns its whole budget and tells
/// scripts nothing; one check here costs milliseconds.
fn check_trials(flag: &str, entry: &Map<String, Value>, variants: &[space::Variant]) -> Result<(), CliError> {
    let run = entry["run"].as_str().unwrap_or_default();
    rlx_algorithms::registry::algorithm(run).map_err(|e| CliError::Usage(format!("{flag}: run: {e}")))?;
    for variant in variants {
        let mut config = variant.config.clone();
        crate::experiment::translate_config_quietly(&mut config);
        if let Some(map) = config.as_object_mut() {
            // `rlx train` takes the env from the experiment's `env`.
            map.remove("env");
        }
        if let Err(e) = crate::deploy::check_config(run, &config) {
            let chosen: Vec<String> = variant.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let with = if chosen.is_empty() { String::new() } else { format!(" (with {})", chosen.join(", ")) };
            return Err(CliError::Usage(format!("{flag}: config{with}: {e}")));
        }
    }
    Ok(())
}

/// Loads a search to resume: its unfinished trials start again from
/// their checkpoints.
fn load(dir: &Path) -> Result<TuneState, CliError> {
    let path = dir.join(STATE_FILE);
    let bytes = std::fs::read(&path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let mut state: TuneState = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::Usage(format!("{} is not a tuner's state: {e}", path.display())))?;
    let bad = |why: String| CliError::Usage(format!("{}: {why}", path.display()));
    if let Some(asha) = &state.scheduler {
        asha.config.check().map_err(bad)?;
    }
    let mut ids = std::collections::HashSet::new();
    for t in &state.trials {
        let plain = t.id.starts_with("trial_") && t.id[6..].bytes().all(|b| b.is_ascii_digit());
        if !plain || !ids.insert(t.id.as_str()) {
            return Err(bad(format!("trial id `{}` is not a unique trial_<n>", t.id)));
        }
    }
    for t in &mut state.trials {
        if matches!(t.status, Status::Running | Status::Interrupted) {
            t.status = Status::Pending;
        }
        t.pid = None;
    }
    Ok(state)
}

fn save(dir: &Path, state: &TuneState) -> Result<(), CliError> {
    let bytes = serde_json::to_vec_pretty(state).expect("the state serializes");
    Ok(write_atomic(&dir.join(STATE_FILE), &bytes)?)
}

fn running(state: &TuneState) -> usize {
    state.trials.iter().filter(|t| t.status == Status::Running).count()
}

/// Starts a trial's `rlx train`: fresh, or from its run's newest
/// checkpoint when it ran before.
fn start(exe: &Path, dir: &Path, experiment: &Map<String, Value>, trial: &mut Trial) -> Result<(), CliError> {
    let trial_dir = dir.join(&trial.id);
    std::fs::create_dir_all(&trial_dir).map_err(|e| at(e, &trial_dir))?;
    let mut command = Command::new(exe);
    command.arg("train").arg("--results-dir").arg(&trial_dir);
    let restore = trial.run_dir.as_ref().filter(|d| rlx::checkpoint::latest(d).is_some());
    match restore {
        Some(run_dir) => {
            command.arg("--restore").arg(run_dir);
        }
        None => {
            let text = |k: &str| experiment.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            command.args(["--run", &text("run"), "--env", &text("env")]);
            command.arg("--config").arg(trial.config.to_string());
        }
    }
    if let Some(stop) = experiment.get("stop").filter(|s| !s.is_null()) {
        command.arg("--stop").arg(stop.to_string());
    }
    if let Some(n) = experiment.get("checkpoint_freq").and_then(Value::as_u64) {
        command.arg("--checkpoint-freq").arg(n.to_string());
    }
    // Every trial ends with a checkpoint, so `rlx rollout` can play it.
    command.arg("--checkpoint-at-end");
    if let Some(n) = experiment.get("keep_checkpoints_num").and_then(Value::as_u64) {
        command.arg("--keep-checkpoints-num").arg(n.to_string());
    }
    if let Some(attr) = experiment.get("checkpoint_score_attr").and_then(Value::as_str) {
        command.arg("--checkpoint-score-attr").arg(attr);
    }
    let log = |name: &str| -> Result<Stdio, CliError> {
        let path = trial_dir.join(name);
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| at(e, &path))?;
        Ok(Stdio::from(file))
    };
    command.stdin(Stdio::null()).stdout(log("stdout.log")?).stderr(log("stderr.log")?);
    // Its own process group: a Ctrl-C at the terminal reaches the tuner
    // only, which passes exactly one SIGINT on (a second would make the
    // trial quit without its checkpoint).
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    trial.before = run_dirs(&trial_dir);
    let child = command.spawn().map_err(|e| CliError::Usage(format!("cannot start {}: {e}", exe.display())))?;
    trial.pid = Some(child.id());
    trial.child = Some(child);
    trial.status = Status::Running;
    trial.seen = 0;
    trial.stopping = false;
    Ok(())
}

/// The run directories in a trial's directory.
fn run_dirs(trial_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(trial_dir) else { return Vec::new() };
    entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect()
}

/// Reads the lines a running trial added to its result.json, feeds them
/// to the scheduler, and asks the trial to stop if it says so. Returns
/// whether anything changed.
fn read_new_results(dir: &Path, state: &mut TuneState, k: usize) -> Result<bool, CliError> {
    let (attr, _) = metric(state.scheduler.as_ref());
    let trial = &mut state.trials[k];
    if trial.run_dir.as_ref().is_none_or(|d| trial.before.contains(d)) {
        let new = run_dirs(&dir.join(&trial.id)).into_iter().find(|d| !trial.before.contains(d));
        let Some(new) = new else { return Ok(false) };
        trial.run_dir = Some(new);
    }
    let path = trial.run_dir.as_ref().expect("set above").join("result.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(false) };
    // Whole lines only: the last may be half written.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    let lines: Vec<&str> = complete.lines().collect();
    if lines.len() <= trial.seen {
        return Ok(false);
    }
    let results: Vec<Value> = lines[trial.seen..].iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    // A fast trial may have written several results since the last read,
    // up to its last: one that has finished its budget is not stopped for
    // an earlier rung (the rung still records its value).
    let finished = state.scheduler.as_ref().zip(results.last()).is_some_and(|(asha, last)| asha.at_max_t(last));
    for result in results {
        trial.score = attr.value(&result).or(trial.score);
        if let Some(asha) = &mut state.scheduler {
            let time = asha.time_of(&result);
            if !asha.on_result(k, time, trial.score) && !trial.stopping && !finished {
                trial.stopping = true;
                signal_stop(trial);
            }
        }
        trial.last = Some(result);
    }
    trial.seen = lines.len();
    Ok(true)
}

/// Asks a trial's process to stop after its iteration, with a checkpoint.
fn signal_stop(trial: &Trial) {
    #[cfg(unix)]
    if let Some(pid) = trial.pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: sends a signal to our own child, whose id we hold.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
    }
}

/// Collects a trial whose process exited. Returns whether it did.
fn reap(dir: &Path, trial: &mut Trial, interrupted: bool) -> Result<bool, CliError> {
    let Some(child) = &mut trial.child else { return Ok(false) };
    let Some(status) = child.try_wait().map_err(|e| at(e, &dir.join(&trial.id)))? else { return Ok(false) };
    trial.child = None;
    trial.pid = None;
    // Exit status 130 is a trial that stopped on SIGINT with a checkpoint;
    // death by SIGINT itself, one that got it before it could act on it.
    #[cfg(unix)]
    let by_sigint = std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGINT);
    #[cfg(not(unix))]
    let by_sigint = false;
    let asked = status.code() == Some(130) || by_sigint;
    trial.status = match status.code() {
        Some(0) => Status::Terminated,
        _ if asked && trial.stopping => Status::Stopped,
        _ if asked && interrupted => Status::Interrupted,
        _ => {
            let log = dir.join(&trial.id).join("stderr.log");
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
            trial.error = Some(format!("rlx train exited with {status}: {tail} (see {})", log.display()));
            Status::Error
        }
    };
    Ok(true)
}

/// The metric trials are compared by: the scheduler's, else the mean
/// return.
fn metric(scheduler: Option<&Asha>) -> (ScoreAttr, bool) {
    let (text, minimize) = match scheduler {
        Some(asha) => (asha.config.metric.as_str(), asha.config.mode == "min"),
        None => ("episode_reward_mean", false),
    };
    // Checked when the experiment or state was read.
    (ScoreAttr::parse(text).unwrap_or_else(|_| ScoreAttr::newest()), minimize)
}

/// The chosen values, `name=value`, floats to four significant digits.
fn short(params: &[(String, Value)]) -> String {
    let value = |v: &Value| match v.as_f64() {
        // Rounded to four decimals without trailing zeros; below 0.01
        // (and 0.0) in scientific notation.
        Some(x) if !v.is_i64() && !v.is_u64() && x.abs() >= 0.01 => {
            format!("{x:.4}").parse::<f64>().map_or_else(|_| x.to_string(), |r| r.to_string())
        }
        Some(x) if !v.is_i64() && !v.is_u64() => format!("{x:.3e}"),
        _ => v.to_string(),
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", k.rsplit('/').next().unwrap_or(k), value(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_table(state: &TuneState) {
    let (attr, _) = metric(state.scheduler.as_ref());
    let counts: Vec<String> =
        [Status::Pending, Status::Running, Status::Terminated, Status::Stopped, Status::Interrupted, Status::Error]
            .iter()
            .filter_map(|s| {
                let n = state.trials.iter().filter(|t| t.status == *s).count();
                (n > 0).then(|| format!("{n} {s:?}").to_lowercase())
            })
            .collect();
    outln!("== trials: {}", counts.join(", "));
    outln!("{:<10} {:<11} {:>5} {:>9} {:>10} {:>7}  params", "trial", "status", "iter", "steps", attr.metric, "time");
    for t in &state.trials {
        let get = |key: &str| t.last.as_ref().and_then(|r| r.get(key)).cloned().unwrap_or(Value::Null);
        let text = |key: &str| get(key).as_u64().map_or("-".into(), |n| n.to_string());
        let score = t.score.map_or("-".into(), |v| format!("{v:.2}"));
        outln!(
            "{:<10} {:<11} {:>5} {:>9} {:>10} {:>7}  {}",
            t.id,
            format!("{:?}", t.status).to_uppercase(),
            text("training_iteration"),
            text("timesteps_total"),
            score,
            get("time_total_s").as_f64().map_or("-".into(), |s| format!("{s:.1}s")),
            short(&t.params)
        );
        if let Some(e) = &t.error {
            outln!("{:<10} error: {e}", "");
        }
    }
}

/// `summary.csv` and `trials.png`.
fn write_summary(dir: &Path, state: &TuneState) -> Result<(), CliError> {
    let (attr, _) = metric(state.scheduler.as_ref());
    let path = dir.join("summary.csv");
    let mut csv = csv::Writer::from_path(&path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let names: Vec<String> =
        state.trials.first().map(|t| t.params.iter().map(|p| p.0.clone()).collect()).unwrap_or_default();
    let mut header = vec!["trial".to_string(), "status".into()];
    header.extend(names.iter().map(|n| format!("config/{n}")));
    header.extend(["training_iteration", "timesteps_total", "time_total_s", "episode_reward_mean"].map(String::from));
    if attr.metric != "episode_reward_mean" {
        header.push(attr.metric.clone());
    }
    header.extend(["run_dir".to_string(), "error".into()]);
    let io = |e: csv::Error| CliError::Usage(format!("{}: {e}", path.display()));
    csv.write_record(&header).map_err(io)?;
    for t in &state.trials {
        let cell = |v: Option<&Value>| match v {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        let get = |key: &str| cell(t.last.as_ref().and_then(|r| r.get(key)));
        let mut row = vec![t.id.clone(), format!("{:?}", t.status).to_uppercase()];
        row.extend(t.params.iter().map(|p| cell(Some(&p.1))));
        row.extend(["training_iteration", "timesteps_total", "time_total_s", "episode_reward_mean"].map(get));
        if attr.metric != "episode_reward_mean" {
            row.push(t.score.map_or(String::new(), |v| v.to_string()));
        }
        row.push(t.run_dir.as_ref().map_or(String::new(), |d| d.display().to_string()));
        row.push(t.error.clone().unwrap_or_default());
        csv.write_record(&row).map_err(io)?;
    }
    csv.flush().map_err(|e| at(e, &path))?;
    // One curve per trial that reported: the compared metric against env steps.
    let mut series = Vec::new();
    for t in &state.trials {
        let Some(run_dir) = &t.run_dir else { continue };
        let results = crate::retention::read_lines(&run_dir.join("result.json")).unwrap_or_default();
        let points: Vec<(f64, f64)> =
            results.iter().filter_map(|r| Some((r.get("timesteps_total")?.as_f64()?, attr.value(r)?))).collect();
        if !points.is_empty() {
            series.push(Series { label: format!("{} {}", t.id, short(&t.params)), points });
        }
    }
    if !series.is_empty() {
        if let Err(e) = render_learning_curves(&series, &dir.join("trials.png"), (1000, 600)) {
            errln!("warning: cannot draw trials.png: {e}");
        }
    }
    outln!("wrote {} and {}", path.display(), dir.join("trials.png").display());
    Ok(())
}

fn report_best(state: &TuneState) {
    let (attr, minimize) = metric(state.scheduler.as_ref());
    let best = state.trials.iter().filter_map(|t| Some((t, t.score?))).max_by(|a, b| {
        if minimize {
            b.1.total_cmp(&a.1)
        } else {
            a.1.total_cmp(&b.1)
        }
    });
    if let Some((t, v)) = best {
        outln!("best trial: {} ({} = {v:.2}) with {}", t.id, attr.metric, short(&t.params));
    }
}

fn at(e: std::io::Error, path: &Path) -> CliError {
    CliError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}
