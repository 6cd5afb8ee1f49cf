//! `rlx-chaos`: the chaos run of issues 23 and 45. A PPO or IMPALA run on
//! CartPole-v1 with its evaluators on four `rlx node` processes, each on
//! its own "machine" (a network namespace on a private bridge, with the
//! driver on a fifth), while this tool kills (SIGKILL, then a restart),
//! stops (SIGSTOP, then SIGCONT) and cuts off (its link down, then up)
//! the nodes at random, seeded times, starts the fourth node late with
//! `rlx node --join` (the driver listens with `--node-listen`), and twice
//! kills the driver and restores it from its newest checkpoint.
//! Afterwards it checks what the issues ask: the final `result.json`
//! holds every iteration exactly once, in order, with consistent step
//! counts; every checkpoint of every run directory verifies; the run
//! reached a 100-episode mean return of 475.
//!
//! ```text
//! cargo build --release -p rlx-cli --bin rlx -p rlx-benches --bin rlx-chaos
//! target/release/rlx-chaos --run PPO --seed 1 --minutes 30 --out <dir>
//! python3 benches/chaos/analyse.py <dir> > <dir>/analysis.json
//! python3 benches/chaos/plot.py <dir> <dir>/steps_per_second.png
//! ```
//!
//! It is a benchmark-style script (half an hour of wall time), not a test
//! in CI's budget, and it needs root and iproute2 for the namespaces
//! ([`rlx_benches::lan`]); `--net N` picks the private network
//! `10.79.N.0/24`, so two runs can go side by side. `--out` gets:
//!
//! - `chaos.log`: every fault injected and every restart, with times;
//! - `node-<i>.log`, `driver-<n>.log`: each child's stdout and stderr
//!   (gzipped at the end if over 256 KiB);
//! - `memory.csv`: every child's resident memory every 10 s;
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
//! iteration, reported beside it as `iteration_time_s_median`. The
//! figures of issue 45 (the fraction of wall time at the full evaluator
//! count on nodes, the time to re-admit a node, memory) come from
//! `benches/chaos/analyse.py`, which reads the output folder.
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
use rlx_benches::children::interrupt_flag;
use rlx_benches::lan::Lan;
use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `cluster.node_timeout_s`, the default: a node silent this long is lost.
const NODE_TIMEOUT_S: f64 = 10.0;
/// How often the main loop looks at the children and `result.json` (the
/// resolution of the recovery times).
const POLL: Duration = Duration::from_millis(20);

/// The nodes' port, on each node's own address.
const NODE_PORT: u16 = 7000;
/// The driver's `--node-listen` port, for the node that joins.
const DRIVER_PORT: u16 = 7100;

#[derive(Parser)]
#[command(about = "Chaos run: PPO or IMPALA on CartPole-v1 over 4 rlx nodes in network namespaces that are \
                   killed, stopped, cut off and restarted, one joining late, with the driver killed and \
                   restored twice; then checks results and checkpoints (needs root and iproute2)")]
struct Cli {
    /// The algorithm: PPO (synchronous) or IMPALA (asynchronous).
    #[arg(long, default_value = "PPO", value_parser = ["PPO", "IMPALA"])]
    run: String,
    /// Seed of the fault schedule (and of the training run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Planned length of the run in minutes. Training stops at
    /// `time_total_s` = minutes × 60 − 30 (training time, which survives
    /// restores); the whole run is given up at minutes + 5.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// How many nodes; the last one joins late, with `--join`.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=32))]
    nodes: u16,
    /// The mean time between two node faults, in seconds (each gap is
    /// drawn from 0.5 to 1.5 times it).
    #[arg(long, default_value_t = 60.0)]
    fault_every_s: f64,
    /// The private network `10.79.NET.0/24` (and the namespaces' names):
    /// another NET lets a second run go side by side.
    #[arg(long, default_value_t = 1)]
    net: u8,
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
    /// The drivers' `--checkpoint-freq`. Each checkpoint is written to disk
    /// and synced before the next iteration: with IMPALA's short
    /// iterations, every iteration's checkpoint takes most of the wall time,
    /// which `time_total_s` (the stop) does not count.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_freq: u64,
}

/// The run's settings, its clock and its log (`chaos.log`).
struct Chaos {
    rlx: PathBuf,
    /// The algorithm (`--run`).
    algorithm: String,
    /// The driver's host and the nodes', on their own network.
    lan: Lan,
    nodes: usize,
    fault_every_s: f64,
    out: PathBuf,
    /// `<out>/runs`: the drivers' `--results-dir`.
    runs: PathBuf,
    cookie: PathBuf,
    start: Instant,
    /// The same moment as `start`, in seconds since the Unix epoch (the
    /// analysis puts the drivers' log times on the run's clock with it).
    start_unix_s: f64,
    log: File,
    /// The drivers' `--config` and `--stop`, as JSON.
    config: String,
    stop: String,
    /// The training time (`time_total_s`) at which the run stops.
    stop_time_s: f64,
    seed: u64,
    minutes: f64,
    keep_checkpoints: bool,
    checkpoint_freq: u64,
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
        if !(cli.fault_every_s > 0.0 && cli.fault_every_s.is_finite()) {
            return Err("--fault-every-s must be positive".into());
        }
        let out = cli.out;
        fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let runs = out.join("runs");
        if runs.exists() && fs::read_dir(&runs).map(|mut d| d.next().is_some()).unwrap_or(false) {
            return Err(format!("{} is not empty: use a fresh --out", runs.display()));
        }
        fs::create_dir_all(&runs).map_err(|e| format!("{}: {e}", runs.display()))?;
        let cookie = out.join("cookie");
        rlx_benches::children::write_cookie(&cookie)?;
        let log = File::create(out.join("chaos.log")).map_err(|e| format!("chaos.log: {e}"))?;
        let nodes = usize::from(cli.nodes);
        let hosts: Vec<String> = std::iter::once("driver".to_string()).chain((1..=nodes).map(node_host)).collect();
        let lan = Lan::create(cli.net, &hosts.iter().map(String::as_str).collect::<Vec<_>>())
            .map_err(|e| format!("cannot make the network namespaces: {e}"))?;
        let stop_time_s = (cli.minutes * 60.0 - 30.0).max(30.0);
        let config = serde_json::json!({
            "num_workers": 4,
            "cluster": {"node_restart": {"max_restarts": 50, "window_s": 60}},
        })
        .to_string();
        let stop = serde_json::json!({ "time_total_s": stop_time_s }).to_string();
        let (seed, minutes, keep_checkpoints) = (cli.seed, cli.minutes, cli.keep_checkpoints);
        let start = Instant::now();
        let start_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Ok(Self {
            rlx,
            algorithm: cli.run,
            lan,
            nodes,
            fault_every_s: cli.fault_every_s,
            out,
            runs,
            cookie,
            start,
            start_unix_s,
            log,
            config,
            stop,
            stop_time_s,
            seed,
            minutes,
            keep_checkpoints,
            checkpoint_freq: cli.checkpoint_freq,
        })
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

    /// Where the node that joins dials the driver.
    fn driver_listen(&self) -> String {
        format!("{}:{DRIVER_PORT}", self.lan.ip("driver"))
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

/// The host name of node `i` (from 1) on the run's network.
fn node_host(i: usize) -> String {
    format!("node{i}")
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

/// The whole chaos run: whether every check passed.
fn run(cli: Cli) -> Result<bool, String> {
    let mut chaos = Chaos::new(cli)?;
    let interrupted = interrupt_flag();
    let mut schedule = Schedule::new(chaos.seed, chaos.stop_time_s, chaos.fault_every_s);
    let plan = schedule.describe(&chaos.stop);
    chaos.say(&format!("{} seed {}; {plan}", chaos.algorithm, chaos.seed));

    let mut fleet = Fleet::start(&mut chaos, schedule.late_join_at)?;
    let mut record = Record::default();
    let mut drivers = Drivers::start(&mut chaos, &mut fleet)?;
    main_loop(&mut chaos, &mut fleet, &mut drivers, &mut schedule, &mut record, &interrupted)?;

    // Stop everything this tool started, whatever happened above.
    let addrs = fleet.addrs();
    let node_starts = fleet.stop();
    let wall_s = chaos.t();
    chaos.say(&format!("all children stopped; wall time {wall_s:.1}s; verifying"));
    let driver_kills_done = schedule.driver_kills_done;
    let run = audit::Run { wall_s, addrs, node_starts, drivers, driver_kills_done, record };
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
        fleet.sample_memory(t);
        std::thread::sleep(POLL);
    }
}
