//! Reading the results while the run goes on ([`Tail`]), and checking them
//! and the checkpoints afterwards ([`audit`]): the final `result.json`
//! holds every iteration exactly once, in order, with consistent step
//! counts and the history each restore carried over; every checkpoint of
//! every run directory verifies and loads; the run reached 475. Then the
//! figures of `summary.json`, and [`tidy_output`], which keeps `--out`
//! small.
//!
//! `result.json` is read with `rlx_cli::results` (`read_results`, and
//! `read_history` where a killed driver may have left a torn last line), as
//! `rlx plot` and `rlx train --restore` read it.

use crate::faults::Fault;
use crate::fleet::{DriverPhase, Drivers};
use crate::{Chaos, Record, NODE_TIMEOUT_S, POLL};
use rlx::checkpoint::{self, Checkpoint};
use rlx::TrainResult;
use rlx_benches::median;
use rlx_cli::results::{read_history, read_results};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The return the run must reach (CartPole-v1's reward threshold).
const SOLVE_RETURN: f64 = 475.0;
/// A log, or a run directory's `result.json` or `progress.csv`, larger
/// than this is gzipped at the end.
const MAX_PLAIN_BYTES: u64 = 256 << 10;

/// Reads the complete lines appended to a `result.json` since last time.
pub struct Tail {
    pub path: PathBuf,
    offset: u64,
}

impl Tail {
    pub fn new(path: PathBuf) -> Self {
        Self { path, offset: 0 }
    }

    /// Each new complete line, parsed (an error quotes the line).
    pub fn read(&mut self) -> Vec<Result<TrainResult, String>> {
        let Ok(mut f) = File::open(&self.path) else { return Vec::new() };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut bytes = Vec::new();
        if f.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else { return Vec::new() };
        self.offset += end as u64 + 1;
        bytes[..end]
            .split(|&b| b == b'\n')
            .map(|line| serde_json::from_slice(line).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(line))))
            .collect()
    }
}

/// The run directories under `runs`.
pub fn run_dirs(runs: &Path) -> BTreeSet<PathBuf> {
    fs::read_dir(runs)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default()
}

/// What the run left behind, once every child is stopped.
pub struct Run {
    pub wall_s: f64,
    /// The nodes' addresses.
    pub addrs: Vec<String>,
    /// How often each node was started.
    pub node_starts: BTreeMap<String, u32>,
    pub drivers: Drivers,
    pub driver_kills_done: usize,
    pub record: Record,
}

/// The verdict.
pub struct Audit {
    /// `summary.json`.
    pub summary: Value,
    /// Whether every check passed.
    pub passed: bool,
    /// Every run directory under `runs/`.
    pub run_dirs: Vec<PathBuf>,
}

/// Checks everything the run left and gathers the figures.
pub fn audit(chaos: &Chaos, run: Run) -> Audit {
    let Run { wall_s, addrs, node_starts, drivers, driver_kills_done, mut record } = run;
    let failures = &mut record.failures;
    if driver_kills_done < 2 {
        failures.push(format!("{driver_kills_done} driver kills made, 2 planned"));
    }
    failures.extend(record.bad_lines.iter().map(|l| format!("unparseable result line seen while running: {l}")));
    recovery_times(&mut record.faults, &record.observations);
    let lines = final_results(&drivers, failures);
    let fin = FinalLines::check(&lines);
    fin.report(&lines, chaos.stop_time_s, failures);
    let by_iteration: BTreeMap<u64, &TrainResult> = lines.iter().map(|r| (r.training_iteration, r)).collect();
    let restores = check_restores(&drivers, &by_iteration, &record.faults, failures);
    let dirs: Vec<PathBuf> = run_dirs(&chaos.runs).into_iter().collect();
    let checkpoints = Checkpoints::verify(&dirs, &by_iteration);
    checkpoints.report(failures);
    if !record.node_unexpected_exits.is_empty() {
        failures.push(format!("nodes exited by themselves: {}", record.node_unexpected_exits.join("; ")));
    }
    let passed = failures.is_empty();
    let mut summary = json!({
        "passed": passed,
        "failures": failures,
        "algorithm": chaos.algorithm,
        "seed": chaos.seed,
        "minutes": chaos.minutes,
        "fault_every_s": chaos.fault_every_s,
        "started_unix_s": chaos.start_unix_s,
        "wall_time_s": round3(wall_s),
        "poll_interval_s": POLL.as_secs_f64(),
        "stop": serde_json::from_str::<Value>(&chaos.stop).unwrap_or(Value::Null),
        "config": serde_json::from_str::<Value>(&chaos.config).unwrap_or(Value::Null),
        "nodes": addrs,
        "node_starts": node_starts,
        "node_respawns_after_own_exit": record.node_respawns,
        "run_dirs": dirs.iter().map(|d| d.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect::<Vec<_>>(),
    });
    for part in [fin.figures(&lines), fault_figures(&record.faults), restores, checkpoints.figures()] {
        merge(&mut summary, part);
    }
    merge(&mut summary, driver_figures(&drivers));
    Audit { summary, passed, run_dirs: dirs }
}

/// Adds the keys of the object `more` to the object `summary`.
fn merge(summary: &mut Value, more: Value) {
    if let (Value::Object(to), Value::Object(from)) = (summary, more) {
        to.extend(from);
    }
}

/// Each fault's time to recover: until the next iteration the current
/// driver trained itself appeared; for a driver kill, also until the
/// driver passed the killed run's newest iteration.
fn recovery_times(faults: &mut [Fault], observations: &[(std::time::Instant, u64)]) {
    for f in faults {
        f.recovered_s = observations.iter().find(|(at, _)| *at > f.at).map(|(at, _)| (*at - f.at).as_secs_f64());
        if let Some(last) = f.last_iteration {
            f.catch_up_s =
                observations.iter().find(|(at, it)| *at > f.at && *it > last).map(|(at, _)| (*at - f.at).as_secs_f64());
        }
    }
}

/// The last driver's `result.json` (empty, with a failure, if it cannot be
/// read).
fn final_results(drivers: &Drivers, failures: &mut Vec<String>) -> Vec<TrainResult> {
    let Some(dir) = drivers.runs.last().and_then(|d| d.run_dir.as_ref()) else {
        failures.push("the last driver made no run directory".into());
        return Vec::new();
    };
    read_whole(&dir.join("result.json")).unwrap_or_else(|e| {
        failures.push(format!("final result.json: {e}"));
        Vec::new()
    })
}

/// Every line of a `result.json` that must be whole: [`read_results`],
/// and a last line without its newline (torn) is an error too.
fn read_whole(path: &Path) -> Result<Vec<TrainResult>, String> {
    let lines = read_results(path).map_err(|e| e.to_string())?;
    let ends_whole = || -> std::io::Result<bool> {
        let mut f = File::open(path)?;
        let mut last = [0u8];
        f.seek(SeekFrom::End(-1))?;
        f.read_exact(&mut last)?;
        Ok(last[0] == b'\n')
    };
    if !lines.is_empty() && !ends_whole().unwrap_or(false) {
        return Err(format!("{}: line {} is torn (no newline)", path.display(), lines.len()));
    }
    Ok(lines)
}

/// The checks of the final `result.json`, line by line.
#[derive(Default)]
struct FinalLines {
    /// The newest iteration.
    iterations: u64,
    missing: u64,
    duplicated: u64,
    out_of_order: u64,
    step_errors: Vec<String>,
    max_return: Option<f64>,
    first_solved: Option<u64>,
    iteration_times: Vec<f64>,
}

impl FinalLines {
    fn check(lines: &[TrainResult]) -> Self {
        let mut c = Self::default();
        let mut seen = BTreeSet::new();
        for (n, r) in lines.iter().enumerate() {
            let it = r.training_iteration;
            if !seen.insert(it) {
                c.duplicated += 1;
            }
            if it != n as u64 + 1 {
                c.out_of_order += 1;
            }
            c.step_errors.extend(step_error(n.checked_sub(1).map(|p| &lines[p]), r));
            if let Some(ret) = r.episode_reward_mean {
                c.max_return = Some(c.max_return.map_or(ret, |m| m.max(ret)));
                if ret >= SOLVE_RETURN && c.first_solved.is_none() {
                    c.first_solved = Some(it);
                }
            }
            c.iteration_times.push(r.time_this_iter_s);
        }
        if let Some(&max) = seen.iter().next_back() {
            c.iterations = max;
            c.missing = (1..=max).filter(|i| !seen.contains(i)).count() as u64;
        }
        c
    }

    /// The failures among the checks; the run must also have reached its
    /// stop criterion (`stop_time_s` of training time).
    fn report(&self, lines: &[TrainResult], stop_time_s: f64, failures: &mut Vec<String>) {
        if lines.is_empty() {
            failures.push("the final result.json has no iteration".into());
        }
        let counts = [(self.missing, "iterations missing from"), (self.duplicated, "iterations duplicated in")];
        for (n, what) in counts.into_iter().filter(|(n, _)| *n > 0) {
            failures.push(format!("{n} {what} the final result.json"));
        }
        if self.out_of_order > 0 {
            failures.push(format!("{} lines of the final result.json out of order", self.out_of_order));
        }
        if let Some(first) = self.step_errors.first() {
            failures.push(format!("{} step-count inconsistencies, first: {first}", self.step_errors.len()));
        }
        match self.max_return {
            Some(r) if r >= SOLVE_RETURN => {}
            other => failures.push(format!("the run never reached {SOLVE_RETURN} (best {other:?})")),
        }
        let last_time_total = lines.last().map(|r| r.time_total_s);
        if last_time_total.is_none_or(|t| t < stop_time_s) {
            failures.push(format!("the run did not reach its stop criterion (time_total_s {last_time_total:?})"));
        }
    }

    fn figures(&self, lines: &[TrainResult]) -> Value {
        let last = lines.last();
        json!({
            "iterations": self.iterations,
            "timesteps_total": last.map(|r| r.timesteps_total),
            "time_total_s": last.map(|r| round3(r.time_total_s)),
            "iteration_time_s_median": median(&self.iteration_times).map(round3),
            "iterations_missing": self.missing,
            "iterations_duplicated": self.duplicated,
            "lines_out_of_order": self.out_of_order,
            "step_count_inconsistencies": self.step_errors.len(),
            "max_episode_reward_mean": self.max_return,
            "first_iteration_at_475": self.first_solved,
            "num_evaluator_restarts": last.map(|r| r.num_evaluator_restarts),
        })
    }
}

/// Unless `timesteps_total` is the previous line's plus this line's
/// `timesteps_this_iter`, what is wrong.
fn step_error(prev: Option<&TrainResult>, r: &TrainResult) -> Option<String> {
    let expected = prev.map_or(0, |p| p.timesteps_total) + r.timesteps_this_iter;
    (r.timesteps_total != expected).then(|| {
        format!(
            "iteration {}: timesteps_total {}, expected {expected} (previous total + timesteps_this_iter {})",
            r.training_iteration, r.timesteps_total, r.timesteps_this_iter
        )
    })
}

/// Every restore: what it started from, what it trained again, and
/// whether the carried-over history equals the old run's lines. Returns
/// the figures.
fn check_restores(
    drivers: &Drivers,
    by_iteration: &BTreeMap<u64, &TrainResult>,
    faults: &[Fault],
    failures: &mut Vec<String>,
) -> Value {
    let mut retrained_total = 0u64;
    let mut restores = Vec::new();
    let mut kill_faults = faults.iter().filter(|f| f.kind == "driver_kill");
    for (n, d) in drivers.runs.iter().enumerate() {
        let Some(from) = &d.restored_from else { continue };
        let old = match read_history(&from.join("result.json")) {
            Ok((lines, _torn)) => lines,
            Err(e) => {
                failures.push(format!("the restored run's result.json: {e}"));
                Vec::new()
            }
        };
        let last = old.iter().map(|r| r.training_iteration).max().unwrap_or(0);
        let retrained = last.saturating_sub(d.baseline);
        // A retried restore (no node usable) starts from the same run and
        // is counted once.
        let is_retry = drivers.runs[..n].iter().any(|e| e.restored_from.as_ref() == Some(from));
        if !is_retry {
            retrained_total += retrained;
        }
        let mismatches = history_mismatches(&old, d.baseline, by_iteration);
        if mismatches > 0 {
            failures.push(format!(
                "{mismatches} iterations up to {} differ between {} and the final result.json",
                d.baseline,
                from.display()
            ));
        }
        let fault = if is_retry { None } else { kill_faults.next() };
        restores.push(json!({
            "driver": n + 1,
            "restored_from": from.file_name().map(|s| s.to_string_lossy().into_owned()),
            "checkpoint_iteration": d.baseline,
            "last_iteration_before_kill": last,
            "iterations_retrained": retrained,
            "retry": is_retry,
            "history_mismatches": mismatches,
            "time_to_first_new_iteration_s": fault.and_then(|f| f.recovered_s).map(round3),
            "time_to_pass_last_iteration_s": fault.and_then(|f| f.catch_up_s).map(round3),
            "driver_start_after_kill_s": fault.map(|f| round3((d.started_at - f.at).as_secs_f64())),
        }));
    }
    json!({"restores": restores, "iterations_retrained": retrained_total})
}

/// How many of the old run's lines up to the checkpoint `baseline` differ
/// from the final `result.json` in their counters or return.
fn history_mismatches(old: &[TrainResult], baseline: u64, by_iteration: &BTreeMap<u64, &TrainResult>) -> usize {
    let same = |a: &TrainResult, b: &TrainResult| {
        (a.training_iteration, a.timesteps_total, a.timesteps_this_iter, a.episodes_total)
            == (b.training_iteration, b.timesteps_total, b.timesteps_this_iter, b.episodes_total)
            && a.episode_reward_mean == b.episode_reward_mean
    };
    old.iter()
        .filter(|r| r.training_iteration <= baseline)
        .filter(|r| !by_iteration.get(&r.training_iteration).is_some_and(|w| same(r, w)))
        .count()
}

/// How the drivers went: restores, retries, the last one's exit.
fn driver_figures(drivers: &Drivers) -> Value {
    let restored = drivers.runs.iter().filter(|d| d.restored_from.is_some()).count() as u64;
    let final_exit = match &drivers.phase {
        DriverPhase::Exited(status) => Some(
            status
                .code()
                .map_or_else(|| format!("signal {}", status.signal().unwrap_or(0)), |c| format!("exit code {c}")),
        ),
        _ => None,
    };
    json!({
        "driver_restores": restored - u64::from(drivers.restore_retries),
        "restore_retries_no_node": drivers.restore_retries,
        "final_driver_exit": final_exit,
    })
}

/// Every checkpoint of every run directory, verified and loaded.
#[derive(Default)]
struct Checkpoints {
    verified: u64,
    failures: Vec<String>,
    /// `.checkpoint_*` temporaries left behind.
    stale: Vec<String>,
}

impl Checkpoints {
    fn verify(dirs: &[PathBuf], by_iteration: &BTreeMap<u64, &TrainResult>) -> Self {
        let mut c = Self::default();
        for dir in dirs {
            let dir_name = dir.file_name().unwrap_or_default().to_string_lossy();
            let entries: Vec<PathBuf> =
                fs::read_dir(dir).map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default();
            for p in entries {
                let name = p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                if name.starts_with(".checkpoint_") {
                    c.stale.push(format!("{dir_name}/{name}"));
                    continue;
                }
                let Some(iteration) = checkpoint::iteration_of(&name) else { continue };
                match checkpoint_problem(&p, iteration, by_iteration) {
                    None => c.verified += 1,
                    Some(problem) => c.failures.push(format!("{dir_name}/{name}: {problem}")),
                }
            }
        }
        c
    }

    fn report(&self, failures: &mut Vec<String>) {
        if self.verified == 0 {
            failures.push("no checkpoint verified".into());
        }
        if let Some(first) = self.failures.first() {
            failures.push(format!("{} checkpoints failed, first: {first}", self.failures.len()));
        }
    }

    fn figures(&self) -> Value {
        json!({
            "checkpoints_verified": self.verified,
            "checkpoints_failed": self.failures.len(),
            "checkpoint_failures": self.failures,
            "stale_checkpoint_temporaries": self.stale,
        })
    }
}

/// What is wrong with the checkpoint at `p`, if anything: its
/// `SHA256SUMS`, its loading (the same checkpoint, with no fallback and no
/// warning), its iteration, and its `timesteps_total` against the final
/// `result.json`.
fn checkpoint_problem(p: &Path, iteration: u64, by_iteration: &BTreeMap<u64, &TrainResult>) -> Option<String> {
    let verified = checkpoint::verify(p);
    let loaded = Checkpoint::load(p);
    let c = match (verified, loaded) {
        (Err(e), _) => return Some(format!("SHA256SUMS: {e}")),
        (Ok(false), _) => return Some("no SHA256SUMS".into()),
        (Ok(true), Err(e)) => return Some(format!("load: {e}")),
        (Ok(true), Ok(c)) => c,
    };
    if c.dir != p || !c.warnings.is_empty() {
        return Some(format!("loaded {} instead, warnings {:?}", c.dir.display(), c.warnings));
    }
    if c.metadata.training_iteration != iteration {
        return Some(format!("metadata says iteration {}", c.metadata.training_iteration));
    }
    match by_iteration.get(&iteration).map(|r| r.timesteps_total) {
        Some(ts) if ts != c.metadata.timesteps_total => Some(format!(
            "timesteps_total {} but the final result.json has {ts} at iteration {iteration}",
            c.metadata.timesteps_total
        )),
        _ => None,
    }
}

/// The kinds a fault counts under: its own, and for node faults whether a
/// stop outlasted the node timeout and whether the driver still used the
/// node.
fn subkinds(f: &Fault) -> Vec<&'static str> {
    let mut kinds = vec![f.kind];
    let past = f.duration_s > NODE_TIMEOUT_S;
    match f.kind {
        "node_stop" => kinds.push(if past { "node_stop_past_timeout" } else { "node_stop_within_timeout" }),
        "node_partition" => {
            kinds.push(if past { "node_partition_past_timeout" } else { "node_partition_within_timeout" })
        }
        _ => {}
    }
    if f.node_in_use == Some(true) {
        kinds.push(match f.kind {
            "node_kill" => "node_kill_in_use",
            "node_stop" => "node_stop_in_use",
            _ => "node_partition_in_use",
        });
    }
    kinds
}

/// The faults: counts, times to recover by kind, and the full list.
fn fault_figures(faults: &[Fault]) -> Value {
    let mut by_kind: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut injected: BTreeMap<&str, u64> = BTreeMap::new();
    let mut unrecovered: BTreeMap<&str, u64> = BTreeMap::new();
    for f in faults {
        *injected.entry(f.kind).or_default() += 1;
        for k in subkinds(f) {
            *counts.entry(k).or_default() += 1;
            match f.recovered_s {
                Some(s) => by_kind.entry(k).or_default().push(s),
                None => *unrecovered.entry(k).or_default() += 1,
            }
        }
    }
    let recover: BTreeMap<&str, Value> = counts
        .keys()
        .map(|k| {
            let mut s = stats(by_kind.get(k).map_or(&[][..], Vec::as_slice));
            s["not_recovered_before_the_end"] = json!(unrecovered.get(k).copied().unwrap_or(0));
            (*k, s)
        })
        .collect();
    let catch_up: Vec<f64> = faults.iter().filter_map(|f| f.catch_up_s).collect();
    json!({
        "faults_injected": injected,
        "faults_by_subkind": counts,
        "faults_total": faults.len(),
        "time_to_recover_s": recover,
        "driver_time_to_pass_last_iteration_s": stats(&catch_up),
        "faults": faults.iter().map(fault_entry).collect::<Vec<_>>(),
    })
}

fn fault_entry(f: &Fault) -> Value {
    json!({
        "at_s": round3(f.at_s), "kind": f.kind, "target": f.target, "duration_s": round3(f.duration_s),
        "node_in_use": f.node_in_use, "iteration_at": f.iteration_at,
        "last_iteration": f.last_iteration,
        "recovered_s": f.recovered_s.map(round3), "catch_up_s": f.catch_up_s.map(round3),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Count, median, max and min of durations in seconds.
fn stats(xs: &[f64]) -> Value {
    json!({
        "count": xs.len(),
        "median_s": median(xs).map(round3),
        "max_s": xs.iter().copied().reduce(f64::max).map(round3),
        "min_s": xs.iter().copied().reduce(f64::min).map(round3),
    })
}

/// Keeps `--out` small: only each run's newest checkpoint once all of
/// them verified (unless `--keep-checkpoints`), large logs and run files
/// gzipped (whole: the analysis reads every line); and the cookie goes.
pub fn tidy_output(chaos: &mut Chaos, dirs: &[PathBuf], passed: bool) {
    let entries = fs::read_dir(&chaos.out).map(|rd| rd.filter_map(Result::ok).collect::<Vec<_>>()).unwrap_or_default();
    // chaos.log stays plain: this tool still writes to it.
    let logs = entries.iter().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "log"));
    for p in logs.filter(|p| !p.ends_with("chaos.log")) {
        gzip_large(&p);
    }
    if !chaos.keep_checkpoints && passed {
        for dir in dirs {
            for old in checkpoint::all(dir).into_iter().skip(1) {
                let _ = fs::remove_dir_all(old);
            }
        }
    }
    for dir in dirs {
        for file in ["result.json", "progress.csv"] {
            if let Some(gz) = gzip_large(&dir.join(file)) {
                chaos.say(&format!("compressed {gz}"));
            }
        }
    }
    let _ = fs::remove_file(chaos.out.join("cookie"));
}

/// Compresses a file over [`MAX_PLAIN_BYTES`] with `gzip -9 -n` (the
/// run directories' `result.json` and `progress.csv`, and the drivers'
/// logs, run to megabytes at about 20 iterations a second). Returns the
/// new name, if it did.
fn gzip_large(path: &Path) -> Option<String> {
    if fs::metadata(path).ok()?.len() <= MAX_PLAIN_BYTES {
        return None;
    }
    let ok = Command::new("gzip").args(["-9", "-n", "-f"]).arg(path).status().ok()?.success();
    ok.then(|| format!("{}.gz", path.display()))
}
