//! `rlx-chaos`: the chaos run of issue 23. A PPO run on CartPole-v1 with
//! its evaluators on three `rlx node` processes, while this tool kills
//! (SIGKILL), stops (SIGSTOP, then SIGCONT) and restarts the nodes at
//! random, seeded intervals, and twice kills the driver and restores it
//! from its newest checkpoint. Afterwards it checks what the issue asks:
//! the final `result.json` holds every iteration exactly once, in order,
//! with consistent step counts; every checkpoint of every run directory
//! verifies; the run reached a 100-episode mean return of 475.
//!
//! ```text
//! cargo build --release -p rlx-cli --bin rlx -p rlx-benches --bin rlx-chaos
//! target/release/rlx-chaos --seed 1 --minutes 6 --out benches/reference/results/chaos-2026-11-25/seed-1
//! ```
//!
//! It is a benchmark-style script (minutes of wall time), not a test in
//! CI's budget. Everything binds 127.0.0.1 only. `--out` gets:
//!
//! - `chaos.log`: every fault injected and every restart, with times;
//! - `node-<i>.log`, `driver-<n>.log`: each child's stdout and stderr (a
//!   log over 1 MB is cut to its last 2000 lines at the end);
//! - `runs/`: the run directories (`result.json`, `params.json`,
//!   checkpoints; only each run's newest checkpoint is kept after all of
//!   them verified, unless `--keep-checkpoints`; a `result.json` or
//!   `progress.csv` over 256 KiB is gzipped);
//! - `summary.json`: the figures and the checks (also printed).
//!
//! The exit status is 0 only if every check passed.
//!
//! What a fault's "time to recover" means here: from the moment the fault
//! is injected until the next iteration that the current driver trains
//! appears in its `result.json` (lines a restored run carries over from
//! the old run do not count). It includes the ordinary length of an
//! iteration, reported beside it as `iteration_time_s_median`.
//!
//! The parts: this file holds the settings and the main loop;
//! [`fleet`] starts, watches and stops the node and driver processes;
//! [`faults`] holds the seeded fault schedule and injects the faults;
//! [`audit`] reads the results and checkpoints, checks them and writes
//! `summary.json`.

mod audit;
mod faults;
mod fleet;

use clap::Parser;
use faults::{Fault, Schedule};
use fleet::{Drivers, Fleet};
use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `cluster.node_timeout_s`, the default: a node silent this long is lost.
const NODE_TIMEOUT_S: f64 = 10.0;
/// How often the main loop looks at the children and `result.json` (the
/// resolution of the recovery times).
const POLL: Duration = Duration::from_millis(20);

#[derive(Parser)]
#[command(about = "Chaos run: PPO on CartPole-v1 over 3 rlx nodes that are killed, stopped and restarted, \
                   with the driver killed and restored twice; then checks results and checkpoints")]
struct Cli {
    /// Seed of the fault schedule (and of the training run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Planned length of the run in minutes. Training stops at
    /// `time_total_s` = minutes × 60 − 30 (training time, which survives
    /// restores); the whole run is given up at minutes + 5.
    #[arg(long, default_value_t = 6.0)]
    minutes: f64,
    /// The `rlx` binary (default: `rlx` next to this binary).
    #[arg(long)]
    rlx: Option<PathBuf>,
    /// Where to write logs, run directories and `summary.json`.
    #[arg(long)]
    out: PathBuf,
    /// Keep every checkpoint after verifying (default: only each run's
    /// newest, to keep the output small).
    #[arg(long)]
    keep_checkpoints: bool,
}

/// The run's settings, its clock and its log (`chaos.log`).
struct Chaos {
    rlx: PathBuf,
    out: PathBuf,
    /// `<out>/runs`: the drivers' `--results-dir`.
    runs: PathBuf,
    cookie: PathBuf,
    start: Instant,
    log: File,
    /// The drivers' `--config` and `--stop`, as JSON.
    config: String,
    stop: String,
    /// The training time (`time_total_s`) at which the run stops.
    stop_time_s: f64,
    seed: u64,
    minutes: f64,
    keep_checkpoints: bool,
}

impl Chaos {
    /// Checks the command line and prepares `--out`: an empty `runs/`, the
    /// cookie file and `chaos.log`.
    fn new(cli: Cli) -> Result<Self, String> {
        let rlx = match &cli.rlx {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("rlx"),
        };
        if !rlx.is_file() {
            return Err(format!("no rlx binary at {} (build it, or pass --rlx)", rlx.display()));
        }
        if !(cli.minutes > 0.0 && cli.minutes.is_finite()) {
            return Err("--minutes must be positive".into());
        }
        let out = cli.out;
        fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let runs = out.join("runs");
        if runs.exists() && fs::read_dir(&runs).map(|mut d| d.next().is_some()).unwrap_or(false) {
            return Err(format!("{} is not empty: use a fresh --out", runs.display()));
        }
        fs::create_dir_all(&runs).map_err(|e| format!("{}: {e}", runs.display()))?;
        let cookie = out.join("cookie");
        fleet::write_cookie(&cookie)?;
        let log = File::create(out.join("chaos.log")).map_err(|e| format!("chaos.log: {e}"))?;
        let stop_time_s = (cli.minutes * 60.0 - 30.0).max(30.0);
        let config = serde_json::json!({
            "num_workers": 3,
            "cluster": {"node_restart": {"max_restarts": 50, "window_s": 60}},
        })
        .to_string();
        let stop = serde_json::json!({ "time_total_s": stop_time_s }).to_string();
        let (seed, minutes, keep_checkpoints) = (cli.seed, cli.minutes, cli.keep_checkpoints);
        let start = Instant::now();
        Ok(Self { rlx, out, runs, cookie, start, log, config, stop, stop_time_s, seed, minutes, keep_checkpoints })
    }

    /// Seconds since the start.
    fn t(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Prints `msg` with the time, and appends it to `chaos.log`.
    fn say(&mut self, msg: &str) {
        let line = format!("[{:7.1}s] {msg}", self.t());
        println!("{line}");
        let _ = writeln!(self.log, "{line}");
    }

    /// When the whole run is given up: minutes + 5.
    fn hard_deadline(&self) -> Instant {
        self.start + Duration::from_secs_f64((self.minutes + 5.0) * 60.0)
    }
}

/// What the main loop saw, which the audit checks.
#[derive(Default)]
struct Record {
    /// Every check that failed so far (the run passed if none did).
    failures: Vec<String>,
    faults: Vec<Fault>,
    /// When each iteration that a driver trained itself appeared in its
    /// `result.json`.
    observations: Vec<(Instant, u64)>,
    /// Lines of a `result.json` that did not parse while running.
    bad_lines: Vec<String>,
    /// The newest iteration trained so far.
    newest_trained: u64,
    /// Nodes that exited without being killed, with when and how.
    node_unexpected_exits: Vec<String>,
    node_respawns: u32,
}

/// What the main loop does after a step.
enum Flow {
    /// Goes on with this round.
    Next,
    /// Starts the next round at once.
    Again,
    /// Leaves the loop.
    Stop,
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("rlx-chaos: {e}");
            std::process::exit(2);
        }
    }
}

/// Ctrl-C or SIGTERM sets the flag; the main loop then stops, and the
/// fleet's drop kills the children.
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        });
        f.store(true, Ordering::SeqCst);
    });
    flag
}

/// The whole chaos run: whether every check passed.
fn run(cli: Cli) -> Result<bool, String> {
    let mut chaos = Chaos::new(cli)?;
    let interrupted = interrupt_flag();
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut schedule = Schedule::new(chaos.seed, chaos.stop_time_s);
    let plan = schedule.describe(&chaos.stop);
    chaos.say(&format!("seed {}; {plan}", chaos.seed));

    let mut fleet = Fleet::start(&mut chaos)?;
    let mut record = Record::default();
    let mut drivers = Drivers::start(&mut chaos, &mut fleet)?;
    main_loop(&mut chaos, &mut fleet, &mut drivers, &mut schedule, &mut record, &interrupted)?;

    // Stop everything this tool started, whatever happened above.
    let addrs = fleet.addrs();
    let node_starts = fleet.stop();
    let wall_s = chaos.t();
    chaos.say(&format!("all children stopped; wall time {wall_s:.1}s; verifying"));
    let driver_kills_done = schedule.driver_kills_done;
    let run = audit::Run { started_unix_s, wall_s, addrs, node_starts, drivers, driver_kills_done, record };
    let audit = audit::audit(&chaos, run);
    let text = serde_json::to_string_pretty(&audit.summary).expect("summary serializes");
    println!("{text}");
    fs::write(chaos.out.join("summary.json"), format!("{text}\n")).map_err(|e| format!("summary.json: {e}"))?;
    audit::tidy_output(&mut chaos, &audit.run_dirs, audit.passed);
    chaos.say(if audit.passed { "PASSED" } else { "FAILED" });
    Ok(audit.passed)
}

/// The main loop, bounded by the hard deadline: watches the driver and the
/// nodes, and injects the faults that are due, until the driver exits.
fn main_loop(
    chaos: &mut Chaos,
    fleet: &mut Fleet,
    drivers: &mut Drivers,
    schedule: &mut Schedule,
    record: &mut Record,
    interrupted: &AtomicBool,
) -> Result<(), String> {
    let hard_deadline = chaos.hard_deadline();
    loop {
        let now = Instant::now();
        let t = chaos.t();
        if now >= hard_deadline {
            record.failures.push(format!("hard timeout: the run had not ended after {:.0} min", chaos.minutes + 5.0));
            return Ok(());
        }
        if interrupted.load(Ordering::SeqCst) {
            record.failures.push("interrupted (Ctrl-C or SIGTERM)".into());
            return Ok(());
        }
        match drivers.poll(chaos, fleet, record, now)? {
            Flow::Next => {}
            Flow::Again => continue,
            Flow::Stop => return Ok(()),
        }
        fleet.poll_nodes(chaos, record, now, t)?;
        if !record.failures.is_empty() {
            return Ok(());
        }
        if schedule.kill_driver_when_due(chaos, fleet, drivers, record, t) {
            continue;
        }
        schedule.fault_node_when_due(chaos, fleet, drivers, record, t);
        std::thread::sleep(POLL);
    }
}
