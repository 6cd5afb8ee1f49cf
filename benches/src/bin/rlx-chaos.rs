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

use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::checkpoint::{self, Checkpoint};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The return the run must reach (CartPole-v1's reward threshold).
const SOLVE_RETURN: f64 = 475.0;
/// `cluster.node_timeout_s`, the default: a node silent this long is lost.
const NODE_TIMEOUT_S: f64 = 10.0;
/// How often the main loop looks at the children and `result.json` (the
/// resolution of the recovery times).
const POLL: Duration = Duration::from_millis(20);
/// A log larger than this is cut to its last [`KEEP_LINES`] lines.
const MAX_LOG_BYTES: u64 = 1 << 20;
const KEEP_LINES: usize = 2000;
/// A run directory's `result.json` or `progress.csv` larger than this is
/// gzipped at the end.
const MAX_RUN_FILE_BYTES: u64 = 256 << 10;
/// Restarts of a restored driver that found no usable node, at most.
const MAX_RESTORE_RETRIES: u32 = 3;
/// Restarts of a node whose new process exited at once, in a row, at most.
const MAX_NODE_RESPAWNS: u32 = 10;

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

/// What a node process is doing, as this tool made it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum NodeState {
    /// Running and not stopped.
    Up,
    /// Killed (or exited); started again at the instant.
    Down { restart_at: Instant },
    /// SIGSTOPped; SIGCONT at the instant.
    Stopped { cont_at: Instant },
}

struct NodeProc {
    name: String,
    addr: String,
    log: PathBuf,
    child: Option<Child>,
    state: NodeState,
    starts: u32,
    started_at: Instant,
    /// Processes in a row that exited within 3 s of starting.
    quick_exits: u32,
}

/// Every child process this tool started. Dropping it kills (SIGKILL,
/// which also ends a stopped process) and reaps each one, by its handle:
/// on the normal path, on an error and on a panic.
struct Fleet {
    nodes: Vec<NodeProc>,
    driver: Option<Child>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(d) = self.driver.as_mut() {
            kill_child(d);
        }
        for n in &mut self.nodes {
            if let Some(c) = n.child.as_mut() {
                kill_child(c);
            }
        }
    }
}

/// SIGKILL and reap. A child already reaped is not signalled again (std
/// remembers its status), so a reused pid is never hit.
fn kill_child(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Sends `signal` (`STOP`, `CONT`) to a child that has not been reaped, so
/// its pid is still its own.
fn signal_child(c: &mut Child, signal: &str) -> Result<(), String> {
    if !matches!(c.try_wait(), Ok(None)) {
        return Err(format!("pid {} has exited", c.id()));
    }
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(c.id().to_string())
        .status()
        .map_err(|e| format!("kill -{signal} {}: {e}", c.id()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {} exited with {status}", c.id()))
    }
}

/// One fault injected.
#[derive(Clone, Debug)]
struct Fault {
    kind: &'static str,
    target: String,
    at: Instant,
    at_s: f64,
    /// How long the node stayed down or stopped, or the driver down.
    duration_s: f64,
    /// Whether the node was still part of the current driver's run (not
    /// yet lost or refused), by the driver's log.
    node_in_use: Option<bool>,
    /// The newest iteration trained by then.
    iteration_at: u64,
    /// For a driver kill: the newest iteration in the killed run's
    /// `result.json` (the driver catches up past it).
    last_iteration: Option<u64>,
    recovered_s: Option<f64>,
    catch_up_s: Option<f64>,
}

/// Reads the complete lines appended to a `result.json` since last time.
struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    fn new(path: PathBuf) -> Self {
        Self { path, offset: 0 }
    }

    fn read(&mut self) -> Vec<Result<Value, String>> {
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

/// One driver process: the first run or a restore.
struct DriverRun {
    log: PathBuf,
    run_dir: Option<PathBuf>,
    tail: Option<Tail>,
    /// The checkpoint iteration it was restored from (0 for the first run):
    /// lines up to it are carried-over history.
    baseline: u64,
    restored_from: Option<PathBuf>,
    started_at: Instant,
    /// Whether it trained an iteration of its own yet.
    trained: bool,
}

/// The driver side of the main loop.
enum DriverPhase {
    Running,
    /// Killed; restored from `from` at the instant.
    Down {
        restore_at: Instant,
        from: PathBuf,
    },
    Exited(ExitStatus),
}

/// Every line of a `result.json`, parsed (a line that does not parse is
/// an error naming it).
fn read_results(path: &Path) -> Result<Vec<Value>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if !line.ends_with('\n') {
            return Err(format!("{}: line {} is torn (no newline)", path.display(), n + 1));
        }
        let v: Value =
            serde_json::from_str(line.trim_end()).map_err(|e| format!("{}: line {}: {e}", path.display(), n + 1))?;
        out.push(v);
    }
    Ok(out)
}

/// The complete lines of a `result.json`, leaving out a torn last line (a
/// killed driver may leave one).
fn read_results_lenient(path: &Path) -> Vec<Value> {
    let Ok(text) = fs::read_to_string(path) else { return Vec::new() };
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| serde_json::from_str(l.trim_end()).ok())
        .collect()
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn f64_of(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn stats(xs: &[f64]) -> Value {
    json!({
        "count": xs.len(),
        "median_s": median(xs).map(round3),
        "max_s": xs.iter().copied().reduce(f64::max).map(round3),
        "min_s": xs.iter().copied().reduce(f64::min).map(round3),
    })
}

/// The run directories under `runs`.
fn run_dirs(runs: &Path) -> BTreeSet<PathBuf> {
    fs::read_dir(runs)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default()
}

/// Whether the driver's log says it lost or refused the node at `addr`.
fn node_dropped_by_driver(driver_log: &Path, addr: &str) -> bool {
    let Ok(text) = fs::read_to_string(driver_log) else { return false };
    let lost = format!("node {addr} lost");
    let refused = format!("node {addr} refused");
    text.lines().any(|l| l.contains(&lost) || l.contains(&refused))
}

/// A log over [`MAX_LOG_BYTES`] is cut to its last [`KEEP_LINES`] lines.
fn shrink_log(path: &Path) {
    let Ok(meta) = fs::metadata(path) else { return };
    if meta.len() <= MAX_LOG_BYTES {
        return;
    }
    let Ok(bytes) = fs::read(path) else { return };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let keep = &lines[lines.len().saturating_sub(KEEP_LINES)..];
    let mut out = format!(
        "[rlx-chaos: this log was {} bytes and {} lines; only its last {} lines are kept]\n",
        meta.len(),
        lines.len(),
        keep.len()
    );
    for l in keep {
        out.push_str(l);
        out.push('\n');
    }
    let _ = fs::write(path, out);
}

/// Compresses a file over [`MAX_RUN_FILE_BYTES`] with `gzip -9 -n` (the
/// run directories' `result.json` and `progress.csv` run to megabytes at
/// about 20 iterations a second). Returns the new name, if it did.
fn gzip_large(path: &Path) -> Option<String> {
    if fs::metadata(path).ok()?.len() <= MAX_RUN_FILE_BYTES {
        return None;
    }
    let ok = Command::new("gzip").args(["-9", "-n", "-f"]).arg(path).status().ok()?.success();
    ok.then(|| format!("{}.gz", path.display()))
}

/// A 32-byte random cookie, hex, in a file only its owner may read.
fn write_cookie(path: &Path) -> Result<(), String> {
    let mut secret = [0u8; 32];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut secret)).map_err(|e| format!("/dev/urandom: {e}"))?;
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(hex.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Three free loopback ports (bound and released; a restarted node comes
/// back on the same one).
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("binding 127.0.0.1:0: {e}"))?;
    listeners.iter().map(|l| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())).collect()
}

/// Opens `path` for appending, as a child's stdout and stderr.
fn log_stdio(path: &Path) -> Result<(Stdio, Stdio), String> {
    let f = OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let g = f.try_clone().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((Stdio::from(f), Stdio::from(g)))
}

struct Chaos {
    cli: Cli,
    rlx: PathBuf,
    out: PathBuf,
    runs: PathBuf,
    cookie: PathBuf,
    start: Instant,
    log: File,
    config: String,
    stop: String,
}

impl Chaos {
    fn t(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn say(&mut self, msg: &str) {
        let line = format!("[{:7.1}s] {msg}", self.t());
        println!("{line}");
        let _ = writeln!(self.log, "{line}");
    }

    fn spawn_node(&mut self, node: &mut NodeProc) -> Result<(), String> {
        let (o, e) = log_stdio(&node.log)?;
        let child = Command::new(&self.rlx)
            .args(["node", "--listen", &node.addr, "--cookie-file"])
            .arg(&self.cookie)
            .args(["--name", &node.name])
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting {} {}: {e}", self.rlx.display(), node.name))?;
        node.starts += 1;
        node.started_at = Instant::now();
        let pid = child.id();
        node.child = Some(child);
        node.state = NodeState::Up;
        let msg = format!("started {} on {} (pid {pid}, start #{})", node.name, node.addr, node.starts);
        self.say(&msg);
        Ok(())
    }

    fn spawn_driver(&mut self, n: usize, restore: Option<&Path>, nodes: &str) -> Result<(Child, PathBuf), String> {
        let log = self.out.join(format!("driver-{n}.log"));
        let (o, e) = log_stdio(&log)?;
        let mut cmd = Command::new(&self.rlx);
        cmd.args(["train", "--run", "PPO", "--env", "CartPole-v1", "--nodes", nodes, "--cookie-file"])
            .arg(&self.cookie)
            .args(["--config", &self.config, "--stop", &self.stop, "--checkpoint-freq", "1", "--results-dir"])
            .arg(&self.runs);
        match restore {
            Some(dir) => {
                cmd.arg("--restore").arg(dir);
            }
            None => {
                cmd.args(["--seed", &self.cli.seed.to_string()]);
            }
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting the driver: {e}"))?;
        let msg = match restore {
            Some(dir) => format!("driver #{n} (pid {}): restore from {}", child.id(), dir.display()),
            None => format!("driver #{n} (pid {}): new run", child.id()),
        };
        self.say(&msg);
        Ok((child, log))
    }
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

#[allow(clippy::too_many_lines)]
fn run(cli: Cli) -> Result<bool, String> {
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
    let out = cli.out.clone();
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let runs = out.join("runs");
    if runs.exists() && fs::read_dir(&runs).map(|mut d| d.next().is_some()).unwrap_or(false) {
        return Err(format!("{} is not empty: use a fresh --out", runs.display()));
    }
    fs::create_dir_all(&runs).map_err(|e| format!("{}: {e}", runs.display()))?;
    let cookie = out.join("cookie");
    write_cookie(&cookie)?;
    let log = File::create(out.join("chaos.log")).map_err(|e| format!("chaos.log: {e}"))?;
    let interrupted = interrupt_flag();

    let planned_s = cli.minutes * 60.0;
    let stop_time_s = (planned_s - 30.0).max(30.0);
    let config = json!({
        "num_workers": 3,
        "cluster": {"node_restart": {"max_restarts": 50, "window_s": 60}},
    })
    .to_string();
    let stop = json!({ "time_total_s": stop_time_s }).to_string();
    let seed = cli.seed;
    let minutes = cli.minutes;
    let keep_checkpoints = cli.keep_checkpoints;
    let mut chaos =
        Chaos { cli, rlx, out: out.clone(), runs: runs.clone(), cookie, start: Instant::now(), log, config, stop };
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // The two driver kills, in wall seconds from the start: one in each
    // band of the planned training time.
    let driver_kill_at = [rng.gen_range(0.20..0.40) * stop_time_s, rng.gen_range(0.55..0.75) * stop_time_s];
    let mut next_fault_s = rng.gen_range(10.0..20.0);
    let hard_deadline = chaos.start + Duration::from_secs_f64((minutes + 5.0) * 60.0);
    chaos.say(&format!(
        "seed {seed}; stop {}; driver kills planned at {:.1}s and {:.1}s; first node fault at {:.1}s",
        chaos.stop, driver_kill_at[0], driver_kill_at[1], next_fault_s
    ));

    let ports = free_ports(3)?;
    let now = Instant::now();
    let mut fleet = Fleet {
        nodes: ports
            .iter()
            .enumerate()
            .map(|(i, port)| NodeProc {
                name: format!("chaos-node-{}", i + 1),
                addr: format!("127.0.0.1:{port}"),
                log: out.join(format!("node-{}.log", i + 1)),
                child: None,
                state: NodeState::Down { restart_at: now },
                starts: 0,
                started_at: now,
                quick_exits: 0,
            })
            .collect(),
        driver: None,
    };
    for i in 0..fleet.nodes.len() {
        chaos.spawn_node(&mut fleet.nodes[i])?;
    }
    let addrs: Vec<String> = fleet.nodes.iter().map(|n| n.addr.clone()).collect();
    let nodes_arg = addrs.join(",");
    // Give the nodes a moment to bind before the driver dials them.
    let bind_deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < bind_deadline {
        let all = fleet.nodes.iter().all(|n| fs::read_to_string(&n.log).is_ok_and(|t| t.contains("listening on")));
        if all {
            break;
        }
        std::thread::sleep(POLL);
    }

    let mut failures: Vec<String> = Vec::new();
    let mut faults: Vec<Fault> = Vec::new();
    let mut observations: Vec<(Instant, u64)> = Vec::new();
    let mut bad_lines: Vec<String> = Vec::new();
    let mut drivers: Vec<DriverRun> = Vec::new();
    let mut known_dirs = run_dirs(&runs);
    let mut restores: Vec<Value> = Vec::new();
    let mut restore_retries = 0u32;
    let mut node_unexpected_exits: Vec<String> = Vec::new();
    let mut node_respawns = 0u32;
    let mut driver_kills_done = 0usize;
    let mut newest_trained = 0u64;

    let (child, dlog) = chaos.spawn_driver(1, None, &nodes_arg)?;
    fleet.driver = Some(child);
    drivers.push(DriverRun {
        log: dlog,
        run_dir: None,
        tail: None,
        baseline: 0,
        restored_from: None,
        started_at: Instant::now(),
        trained: false,
    });
    let mut phase = DriverPhase::Running;

    // The main loop, bounded by the hard deadline.
    loop {
        let now = Instant::now();
        let t = chaos.t();
        if now >= hard_deadline {
            failures.push(format!("hard timeout: the run had not ended after {:.0} min", minutes + 5.0));
            break;
        }
        if interrupted.load(Ordering::SeqCst) {
            failures.push("interrupted (Ctrl-C or SIGTERM)".into());
            break;
        }

        // The driver: new lines, exit, restore.
        match &phase {
            DriverPhase::Running => {
                let d = drivers.last_mut().expect("a driver");
                if d.run_dir.is_none() {
                    let new: Vec<PathBuf> = run_dirs(&runs).difference(&known_dirs).cloned().collect();
                    if let Some(dir) = new.into_iter().next() {
                        known_dirs.insert(dir.clone());
                        d.tail = Some(Tail::new(dir.join("result.json")));
                        d.run_dir = Some(dir.clone());
                        let msg = format!("run directory {}", dir.display());
                        chaos.say(&msg);
                    }
                }
                let d = drivers.last_mut().expect("a driver");
                if let Some(tail) = d.tail.as_mut() {
                    for line in tail.read() {
                        match line {
                            Ok(v) => {
                                let it = u64_of(&v, "training_iteration").unwrap_or(0);
                                if it > d.baseline {
                                    observations.push((Instant::now(), it));
                                    d.trained = true;
                                    newest_trained = it;
                                }
                            }
                            Err(e) => bad_lines.push(format!("{}: {e}", tail.path.display())),
                        }
                    }
                }
                let status = fleet.driver.as_mut().and_then(|c| c.try_wait().ok().flatten());
                if let Some(status) = status {
                    let d = drivers.last().expect("a driver");
                    let n = drivers.len();
                    let log_text = fs::read_to_string(&d.log).unwrap_or_default();
                    if !status.success()
                        && d.restored_from.is_some()
                        && !d.trained
                        && log_text.contains("none of the nodes could be used")
                        && restore_retries < MAX_RESTORE_RETRIES
                    {
                        // Not rlx's fault: this tool had every node down or
                        // stopped at that moment. Try again.
                        restore_retries += 1;
                        let from = d.restored_from.clone().expect("restored");
                        chaos.say(&format!("driver #{n} found no usable node ({status}); restoring again"));
                        fleet.driver = None;
                        phase = DriverPhase::Down { restore_at: now + Duration::from_secs(2), from };
                        continue;
                    }
                    chaos.say(&format!("driver #{n} exited: {status}"));
                    if !status.success() {
                        failures.push(format!("driver #{n} exited with {status}; see driver-{n}.log"));
                    }
                    phase = DriverPhase::Exited(status);
                }
            }
            DriverPhase::Down { restore_at, from } => {
                if now >= *restore_at {
                    let from = from.clone();
                    let ckpt_iter = match Checkpoint::load(&from) {
                        Ok(c) => c.metadata.training_iteration,
                        Err(e) => {
                            failures.push(format!("no checkpoint to restore in {}: {e}", from.display()));
                            break;
                        }
                    };
                    let n = drivers.len() + 1;
                    let (child, dlog) = chaos.spawn_driver(n, Some(&from), &nodes_arg)?;
                    fleet.driver = Some(child);
                    drivers.push(DriverRun {
                        log: dlog,
                        run_dir: None,
                        tail: None,
                        baseline: ckpt_iter,
                        restored_from: Some(from),
                        started_at: Instant::now(),
                        trained: false,
                    });
                    phase = DriverPhase::Running;
                }
            }
            DriverPhase::Exited(_) => {}
        }
        if matches!(phase, DriverPhase::Exited(_)) {
            break;
        }

        // The nodes: restarts, SIGCONTs, and processes that exited.
        for i in 0..fleet.nodes.len() {
            let state = fleet.nodes[i].state;
            match state {
                NodeState::Down { restart_at } if now >= restart_at => {
                    if let Some(mut c) = fleet.nodes[i].child.take() {
                        kill_child(&mut c);
                    }
                    chaos.spawn_node(&mut fleet.nodes[i])?;
                }
                NodeState::Stopped { cont_at } if now >= cont_at => {
                    let node = &mut fleet.nodes[i];
                    let r = node.child.as_mut().map(|c| signal_child(c, "CONT"));
                    node.state = NodeState::Up;
                    let name = node.name.clone();
                    match r {
                        Some(Ok(())) => chaos.say(&format!("SIGCONT {name}")),
                        Some(Err(e)) => chaos.say(&format!("SIGCONT {name} failed: {e}")),
                        None => {}
                    }
                }
                NodeState::Up => {
                    let node = &mut fleet.nodes[i];
                    let exited = node.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                    if let Some(status) = exited {
                        let quick = node.started_at.elapsed() < Duration::from_secs(3);
                        node.quick_exits = if quick { node.quick_exits + 1 } else { 0 };
                        let line = format!(
                            "{} exited by itself ({status}) {:.1}s after its start #{}",
                            node.name,
                            node.started_at.elapsed().as_secs_f64(),
                            node.starts
                        );
                        let give_up = node.quick_exits > MAX_NODE_RESPAWNS;
                        node.state = NodeState::Down { restart_at: now + Duration::from_secs(1) };
                        node_respawns += 1;
                        node_unexpected_exits.push(format!("{line} at {t:.1}s"));
                        chaos.say(&line);
                        if give_up {
                            failures.push(format!("{line}: {MAX_NODE_RESPAWNS} quick exits in a row, gave up"));
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        if !failures.is_empty() {
            break;
        }

        // A driver kill, when due: a checkpoint to restore from, an
        // iteration trained by this driver, and two nodes up.
        let up = fleet.nodes.iter().filter(|n| n.state == NodeState::Up).count();
        if driver_kills_done < 2 && t >= driver_kill_at[driver_kills_done] && matches!(phase, DriverPhase::Running) {
            let d = drivers.last().expect("a driver");
            let ready = d.trained && up >= 2 && d.run_dir.as_deref().and_then(checkpoint::latest).is_some();
            if ready {
                let run_dir = d.run_dir.clone().expect("run dir");
                if let Some(c) = fleet.driver.as_mut() {
                    kill_child(c);
                }
                fleet.driver = None;
                let at = Instant::now();
                driver_kills_done += 1;
                let last_iteration = read_results_lenient(&run_dir.join("result.json"))
                    .iter()
                    .filter_map(|v| u64_of(v, "training_iteration"))
                    .max()
                    .unwrap_or(0);
                let down_s = rng.gen_range(1.0..3.0);
                let n = drivers.len();
                chaos.say(&format!(
                    "SIGKILL driver #{n} at iteration {last_iteration} (kill {driver_kills_done} of 2); restore in {down_s:.1}s"
                ));
                faults.push(Fault {
                    kind: "driver_kill",
                    target: format!("driver #{n}"),
                    at,
                    at_s: chaos.t(),
                    duration_s: down_s,
                    node_in_use: None,
                    iteration_at: newest_trained,
                    last_iteration: Some(last_iteration),
                    recovered_s: None,
                    catch_up_s: None,
                });
                phase = DriverPhase::Down { restore_at: at + Duration::from_secs_f64(down_s), from: run_dir };
                continue;
            }
        }

        // A node fault, when due: never below one node up and unstopped.
        if t >= next_fault_s {
            if up >= 2 {
                let driver_log = drivers.last().map(|d| d.log.clone());
                let in_run = |n: &NodeProc| {
                    matches!(phase, DriverPhase::Running)
                        && driver_log.as_deref().is_some_and(|l| !node_dropped_by_driver(l, &n.addr))
                };
                // Prefer a node the driver still uses: once it has dropped
                // all three (it re-admits none), faults only reach idle
                // nodes until the next restore.
                let healthy: Vec<usize> =
                    (0..fleet.nodes.len()).filter(|&i| fleet.nodes[i].state == NodeState::Up).collect();
                let used: Vec<usize> = healthy.iter().copied().filter(|&i| in_run(&fleet.nodes[i])).collect();
                let pool = if used.is_empty() { &healthy } else { &used };
                let i = pool[rng.gen_range(0..pool.len())];
                let kill = rng.gen_bool(0.5);
                let dur = if kill { rng.gen_range(1.0..5.0) } else { rng.gen_range(2.0..15.0) };
                let in_use = in_run(&fleet.nodes[i]);
                let at = Instant::now();
                let node = &mut fleet.nodes[i];
                let name = node.name.clone();
                let target = format!("{} ({})", node.name, node.addr);
                let ok = if kill {
                    if let Some(c) = node.child.as_mut() {
                        kill_child(c);
                    }
                    node.child = None;
                    node.state = NodeState::Down { restart_at: at + Duration::from_secs_f64(dur) };
                    true
                } else {
                    match node.child.as_mut().map(|c| signal_child(c, "STOP")) {
                        Some(Ok(())) => {
                            node.state = NodeState::Stopped { cont_at: at + Duration::from_secs_f64(dur) };
                            true
                        }
                        Some(Err(e)) => {
                            chaos.say(&format!("SIGSTOP {name} failed: {e}"));
                            false
                        }
                        None => false,
                    }
                };
                if ok {
                    let what = if kill {
                        format!("SIGKILL {name}; restart in {dur:.1}s")
                    } else {
                        format!(
                            "SIGSTOP {name} for {dur:.1}s{}",
                            if dur > NODE_TIMEOUT_S { " (past the node timeout)" } else { "" }
                        )
                    };
                    chaos.say(&format!("{what} [{}]", if in_use { "in use by the driver" } else { "idle" }));
                    faults.push(Fault {
                        kind: if kill { "node_kill" } else { "node_stop" },
                        target,
                        at,
                        at_s: chaos.t(),
                        duration_s: dur,
                        node_in_use: Some(in_use),
                        iteration_at: newest_trained,
                        last_iteration: None,
                        recovered_s: None,
                        catch_up_s: None,
                    });
                }
                next_fault_s = t + rng.gen_range(5.0..20.0);
            } else {
                next_fault_s = t + 1.0;
            }
        }
        std::thread::sleep(POLL);
    }

    // Stop everything this tool started, whatever happened above.
    let final_exit = match &phase {
        DriverPhase::Exited(status) => Some(
            status
                .code()
                .map_or_else(|| format!("signal {}", status.signal().unwrap_or(0)), |c| format!("exit code {c}")),
        ),
        _ => None,
    };
    let node_starts: BTreeMap<String, u32> = fleet.nodes.iter().map(|n| (n.name.clone(), n.starts)).collect();
    drop(fleet);
    let wall_s = chaos.t();
    chaos.say(&format!("all children stopped; wall time {wall_s:.1}s; verifying"));
    if driver_kills_done < 2 {
        failures.push(format!("{driver_kills_done} driver kills made, 2 planned"));
    }
    failures.extend(bad_lines.iter().map(|l| format!("unparseable result line seen while running: {l}")));

    // Time to recover.
    for f in &mut faults {
        f.recovered_s = observations.iter().find(|(at, _)| *at > f.at).map(|(at, _)| (*at - f.at).as_secs_f64());
        if let Some(last) = f.last_iteration {
            f.catch_up_s =
                observations.iter().find(|(at, it)| *at > f.at && *it > last).map(|(at, _)| (*at - f.at).as_secs_f64());
        }
    }

    // The final result.json.
    let final_dir = drivers.last().and_then(|d| d.run_dir.clone());
    let mut iterations = 0u64;
    let mut missing = 0u64;
    let mut duplicated = 0u64;
    let mut out_of_order = 0u64;
    let mut step_errors = Vec::new();
    let mut max_return: Option<f64> = None;
    let mut first_solved: Option<u64> = None;
    let mut final_lines: Vec<Value> = Vec::new();
    let mut iteration_times = Vec::new();
    match final_dir.as_ref().map(|d| read_results(&d.join("result.json"))) {
        None => failures.push("the last driver made no run directory".into()),
        Some(Err(e)) => failures.push(format!("final result.json: {e}")),
        Some(Ok(lines)) => final_lines = lines,
    }
    let mut seen = BTreeSet::new();
    let mut prev: Option<&Value> = None;
    for (n, v) in final_lines.iter().enumerate() {
        let it = u64_of(v, "training_iteration").unwrap_or(0);
        if !seen.insert(it) {
            duplicated += 1;
        }
        if it != n as u64 + 1 {
            out_of_order += 1;
        }
        let total = u64_of(v, "timesteps_total");
        let this = u64_of(v, "timesteps_this_iter");
        let expected = match prev {
            None => this,
            Some(p) => u64_of(p, "timesteps_total").zip(this).map(|(a, b)| a + b),
        };
        if total.is_none() || total != expected {
            step_errors.push(format!(
                "iteration {it}: timesteps_total {total:?}, expected {expected:?} (previous total + timesteps_this_iter {this:?})"
            ));
        }
        if let Some(r) = f64_of(v, "episode_reward_mean") {
            max_return = Some(max_return.map_or(r, |m: f64| m.max(r)));
            if r >= SOLVE_RETURN && first_solved.is_none() {
                first_solved = Some(it);
            }
        }
        if let Some(s) = f64_of(v, "time_this_iter_s") {
            iteration_times.push(s);
        }
        prev = Some(v);
    }
    if let Some(&max) = seen.iter().next_back() {
        iterations = max;
        missing = (1..=max).filter(|i| !seen.contains(i)).count() as u64;
    }
    if final_lines.is_empty() {
        failures.push("the final result.json has no iteration".into());
    }
    if missing > 0 {
        failures.push(format!("{missing} iterations missing from the final result.json"));
    }
    if duplicated > 0 {
        failures.push(format!("{duplicated} iterations duplicated in the final result.json"));
    }
    if out_of_order > 0 {
        failures.push(format!("{out_of_order} lines of the final result.json out of order"));
    }
    if !step_errors.is_empty() {
        failures.push(format!("{} step-count inconsistencies, first: {}", step_errors.len(), step_errors[0]));
    }
    match max_return {
        Some(r) if r >= SOLVE_RETURN => {}
        other => failures.push(format!("the run never reached {SOLVE_RETURN} (best {other:?})")),
    }
    let last_time_total = final_lines.last().and_then(|v| f64_of(v, "time_total_s"));
    if last_time_total.is_none_or(|t| t < stop_time_s) {
        failures.push(format!("the run did not reach its stop criterion (time_total_s {last_time_total:?})"));
    }

    // Every restore: what it started from, what it trained again, and
    // whether the carried-over history equals the old run's lines.
    let by_iteration: BTreeMap<u64, &Value> =
        final_lines.iter().filter_map(|v| u64_of(v, "training_iteration").map(|i| (i, v))).collect();
    let mut retrained_total = 0u64;
    let compared =
        ["training_iteration", "timesteps_total", "timesteps_this_iter", "episodes_total", "episode_reward_mean"];
    let mut kill_faults = faults.iter().filter(|f| f.kind == "driver_kill");
    for (n, d) in drivers.iter().enumerate() {
        let Some(from) = &d.restored_from else { continue };
        let old = read_results_lenient(&from.join("result.json"));
        let last = old.iter().filter_map(|v| u64_of(v, "training_iteration")).max().unwrap_or(0);
        let retrained = last.saturating_sub(d.baseline);
        // A retried restore (no node usable) starts from the same run and
        // is counted once.
        let is_retry = drivers[..n].iter().any(|e| e.restored_from.as_ref() == Some(from));
        if !is_retry {
            retrained_total += retrained;
        }
        let mut history_mismatches = 0;
        for v in old.iter().filter(|v| u64_of(v, "training_iteration").is_some_and(|i| i <= d.baseline)) {
            let i = u64_of(v, "training_iteration").unwrap_or(0);
            let same = by_iteration.get(&i).is_some_and(|w| compared.iter().all(|k| v.get(k) == w.get(k)));
            if !same {
                history_mismatches += 1;
            }
        }
        if history_mismatches > 0 {
            failures.push(format!(
                "{history_mismatches} iterations up to {} differ between {} and the final result.json",
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
            "history_mismatches": history_mismatches,
            "time_to_first_new_iteration_s": fault.and_then(|f| f.recovered_s).map(round3),
            "time_to_pass_last_iteration_s": fault.and_then(|f| f.catch_up_s).map(round3),
            "driver_start_after_kill_s": fault.map(|f| round3((d.started_at - f.at).as_secs_f64())),
        }));
    }
    let driver_restores =
        drivers.iter().filter(|d| d.restored_from.is_some()).count() as u64 - u64::from(restore_retries);

    // Every checkpoint of every run directory.
    let mut checkpoints_verified = 0u64;
    let mut checkpoint_failures: Vec<String> = Vec::new();
    let mut stale_temporaries: Vec<String> = Vec::new();
    let dirs: Vec<PathBuf> = run_dirs(&runs).into_iter().collect();
    for dir in &dirs {
        let entries: Vec<PathBuf> =
            fs::read_dir(dir).map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default();
        for p in entries {
            let name = p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            if name.starts_with(".checkpoint_") {
                stale_temporaries.push(format!("{}/{name}", dir.file_name().unwrap_or_default().to_string_lossy()));
                continue;
            }
            let Some(iteration) = checkpoint::iteration_of(&name) else { continue };
            let label = format!("{}/{name}", dir.file_name().unwrap_or_default().to_string_lossy());
            let verified = checkpoint::verify(&p);
            let loaded = Checkpoint::load(&p);
            let problem = match (verified, loaded) {
                (Err(e), _) => Some(format!("SHA256SUMS: {e}")),
                (Ok(false), _) => Some("no SHA256SUMS".into()),
                (Ok(true), Err(e)) => Some(format!("load: {e}")),
                (Ok(true), Ok(c)) => {
                    if c.dir != p || !c.warnings.is_empty() {
                        Some(format!("loaded {} instead, warnings {:?}", c.dir.display(), c.warnings))
                    } else if c.metadata.training_iteration != iteration {
                        Some(format!("metadata says iteration {}", c.metadata.training_iteration))
                    } else {
                        match by_iteration.get(&iteration).and_then(|v| u64_of(v, "timesteps_total")) {
                            Some(ts) if ts != c.metadata.timesteps_total => Some(format!(
                                "timesteps_total {} but the final result.json has {ts} at iteration {iteration}",
                                c.metadata.timesteps_total
                            )),
                            _ => None,
                        }
                    }
                }
            };
            match problem {
                None => checkpoints_verified += 1,
                Some(p) => checkpoint_failures.push(format!("{label}: {p}")),
            }
        }
    }
    if checkpoints_verified == 0 {
        failures.push("no checkpoint verified".into());
    }
    if !checkpoint_failures.is_empty() {
        failures.push(format!("{} checkpoints failed, first: {}", checkpoint_failures.len(), checkpoint_failures[0]));
    }
    if !node_unexpected_exits.is_empty() {
        failures.push(format!("nodes exited by themselves: {}", node_unexpected_exits.join("; ")));
    }

    // Figures.
    let mut by_kind: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut injected: BTreeMap<&str, u64> = BTreeMap::new();
    let mut unrecovered: BTreeMap<&str, u64> = BTreeMap::new();
    for f in &faults {
        *injected.entry(f.kind).or_default() += 1;
        let mut kinds = vec![f.kind];
        if f.kind == "node_stop" {
            kinds.push(if f.duration_s > NODE_TIMEOUT_S {
                "node_stop_past_timeout"
            } else {
                "node_stop_within_timeout"
            });
        }
        if f.node_in_use == Some(true) {
            kinds.push(if f.kind == "node_kill" { "node_kill_in_use" } else { "node_stop_in_use" });
        }
        for k in kinds {
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
    let fault_list: Vec<Value> = faults
        .iter()
        .map(|f| {
            json!({
                "at_s": round3(f.at_s), "kind": f.kind, "target": f.target, "duration_s": round3(f.duration_s),
                "node_in_use": f.node_in_use, "iteration_at": f.iteration_at,
                "last_iteration": f.last_iteration,
                "recovered_s": f.recovered_s.map(round3), "catch_up_s": f.catch_up_s.map(round3),
            })
        })
        .collect();
    let last = final_lines.last();
    let passed = failures.is_empty();
    let summary = json!({
        "passed": passed,
        "failures": failures,
        "seed": seed,
        "minutes": minutes,
        "started_unix_s": started_unix_s,
        "wall_time_s": round3(wall_s),
        "poll_interval_s": POLL.as_secs_f64(),
        "stop": serde_json::from_str::<Value>(&chaos.stop).unwrap_or(Value::Null),
        "config": serde_json::from_str::<Value>(&chaos.config).unwrap_or(Value::Null),
        "nodes": addrs,
        "iterations": iterations,
        "timesteps_total": last.and_then(|v| u64_of(v, "timesteps_total")),
        "time_total_s": last_time_total.map(round3),
        "iteration_time_s_median": median(&iteration_times).map(round3),
        "faults_injected": injected,
        "faults_by_subkind": counts,
        "final_driver_exit": final_exit,
        "faults_total": faults.len(),
        "driver_restores": driver_restores,
        "restore_retries_no_node": restore_retries,
        "iterations_retrained": retrained_total,
        "iterations_missing": missing,
        "iterations_duplicated": duplicated,
        "lines_out_of_order": out_of_order,
        "step_count_inconsistencies": step_errors.len(),
        "checkpoints_verified": checkpoints_verified,
        "checkpoints_failed": checkpoint_failures.len(),
        "checkpoint_failures": checkpoint_failures,
        "stale_checkpoint_temporaries": stale_temporaries,
        "max_episode_reward_mean": max_return,
        "first_iteration_at_475": first_solved,
        "num_evaluator_restarts": last.and_then(|v| u64_of(v, "num_evaluator_restarts")),
        "time_to_recover_s": recover,
        "driver_time_to_pass_last_iteration_s": stats(&catch_up),
        "restores": restores,
        "node_starts": node_starts,
        "node_respawns_after_own_exit": node_respawns,
        "run_dirs": dirs.iter().map(|d| d.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "faults": fault_list,
    });
    let text = serde_json::to_string_pretty(&summary).expect("summary serializes");
    println!("{text}");
    fs::write(out.join("summary.json"), format!("{text}\n")).map_err(|e| format!("summary.json: {e}"))?;

    // Keep the output small: logs cut, and only each run's newest
    // checkpoint once all of them verified.
    for entry in fs::read_dir(&out).map(|rd| rd.filter_map(Result::ok).collect::<Vec<_>>()).unwrap_or_default() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "log") {
            shrink_log(&p);
        }
    }
    if !keep_checkpoints && passed {
        for dir in &dirs {
            for old in checkpoint::all(dir).into_iter().skip(1) {
                let _ = fs::remove_dir_all(old);
            }
        }
    }
    for dir in &dirs {
        for file in ["result.json", "progress.csv"] {
            if let Some(gz) = gzip_large(&dir.join(file)) {
                chaos.say(&format!("compressed {gz}"));
            }
        }
    }
    let _ = fs::remove_file(out.join("cookie"));
    chaos.say(if passed { "PASSED" } else { "FAILED" });
    Ok(passed)
}
