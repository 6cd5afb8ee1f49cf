//! `rlx-swarm`: the cluster at the sizes this machine can hold (issue 45),
//! on private networks of "machines" ([`rlx_benches::lan`]: network
//! namespaces on a bridge; needs root and iproute2). Two measurements:
//!
//! - **`scale`**: PPO on CartPole-v1 with 4 evaluators (`--workers`), in
//!   the driver's process (0 nodes) and on 1, 2 and 4 nodes, each on its
//!   own host;
//!   `--repeats` runs of `--seconds` of training each, interleaved. It
//!   reports env steps per second of training. On a machine with fewer
//!   cores than processes this measures the cluster's overhead, not a
//!   speed-up: every node shares the same cores.
//! - **`control-plane`**: for each size N of `--sizes`, N lightweight
//!   nodes (`rlx node --join --num-cpus 1`, one small CartPole evaluator
//!   each), half on host `near` and half on host `far`. A first driver
//!   dials one more node (`anchor`) and asks for one evaluator of 2 CPUs,
//!   which fits nowhere: it waits, so the driver trains nothing and does
//!   only the control plane's work (heartbeats, membership, placement
//!   attempts). Its CPU time over `--idle-s`, with the anchor alone and
//!   then with the N nodes joined, gives that work's cost per node. It is
//!   killed, and a second driver (N evaluators of 1 CPU) trains: the nodes
//!   come back on their own and the evaluators move out to them, then
//!   `far` is cut off for `--partition-s` and healed, and every evaluator
//!   must be back on a node (a re-admission storm of N/2 nodes).
//!
//! ```text
//! cargo build --release -p rlx-cli --bin rlx -p rlx-benches --bin rlx-swarm
//! target/release/rlx-swarm scale --out <dir>
//! target/release/rlx-swarm control-plane --sizes 32,64,128 --out <dir>
//! ```
//!
//! Each writes `summary.json` (every figure, per run) and keeps every
//! process's log and each run directory's `result.json` under `--out`.
//! Every child is killed by its handle and the namespaces are removed at
//! the end, also on an error or on Ctrl-C or SIGTERM. The nodes of the
//! control plane are spread over 8 hosts (`near0`..`near3`, `far0`..`far3`):
//! the driver lets one address hold at most 16 connections in the
//! admission handshake at once.

use clap::{Parser, Subcommand};
use rlx_benches::children::{cpu_seconds, interrupt_flag, kill_child, resident_kib, spawn_logged, write_cookie};
use rlx_benches::lan::Lan;
use rlx_benches::median;
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const NODE_PORT: u16 = 7000;
const DRIVER_PORT: u16 = 7100;
/// How often the loops below look at logs and results.
const POLL: Duration = Duration::from_millis(50);

#[derive(Parser)]
#[command(about = "The cluster at the sizes one machine holds: throughput on 0/1/2/4 nodes, and the control \
                   plane with many nodes (join, heartbeat cost, a re-admission storm). Needs root and iproute2")]
struct Cli {
    #[command(subcommand)]
    what: What,
    /// The `rlx` binary (default: `rlx` next to this binary).
    #[arg(long, global = true)]
    rlx: Option<PathBuf>,
    /// The private network `10.79.NET.0/24` (and the namespaces' names).
    #[arg(long, global = true, default_value_t = 3)]
    net: u8,
}

#[derive(Subcommand)]
enum What {
    /// Env steps per second with 4 evaluators on 0, 1, 2 and 4 nodes.
    Scale {
        #[arg(long)]
        out: PathBuf,
        /// Runs per node count (interleaved: 0,1,2,4,0,1,2,4,...).
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// Training time of each run.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// The node counts.
        #[arg(long, value_delimiter = ',', default_value = "0,1,2,4")]
        nodes: Vec<usize>,
        /// Evaluators (`num_workers`), spread over the nodes.
        #[arg(long, default_value_t = 4)]
        workers: usize,
    },
    /// Many nodes: join time, the control plane's cost, a re-admission storm.
    ControlPlane {
        #[arg(long)]
        out: PathBuf,
        /// The cluster sizes, each even.
        #[arg(long, value_delimiter = ',', default_value = "32,64,128")]
        sizes: Vec<usize>,
        /// How long the first driver's CPU time is measured, before and
        /// after the nodes join.
        #[arg(long, default_value_t = 30.0)]
        idle_s: f64,
        /// How long `far` is cut off (past the 10 s node timeout).
        #[arg(long, default_value_t = 20.0)]
        partition_s: f64,
    },
}

/// Set by Ctrl-C or SIGTERM: every wait below then ends with an error, and
/// what holds the children and the namespaces drops.
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn main() {
    let cli = Cli::parse();
    INTERRUPTED.get_or_init(interrupt_flag);
    let rlx = match &cli.rlx {
        Some(p) => p.clone(),
        None => std::env::current_exe().expect("own path").with_file_name("rlx"),
    };
    let done = if rlx.is_file() {
        match cli.what {
            What::Scale { out, repeats, seconds, nodes, workers } => {
                let runs = ScaleRuns { repeats, seconds, workers };
                scale(&rlx, cli.net, &out, &runs, &nodes)
            }
            What::ControlPlane { out, sizes, idle_s, partition_s } => {
                control_plane(&rlx, cli.net, &out, &sizes, idle_s, partition_s)
            }
        }
    } else {
        Err(format!("no rlx binary at {} (build it, or pass --rlx)", rlx.display()))
    };
    if let Err(e) = done {
        eprintln!("rlx-swarm: {e}");
        std::process::exit(2);
    }
}

/// The children of one measurement, killed (by handle) when it drops.
#[derive(Default)]
struct Children(Vec<Child>);

impl Children {
    /// Starts `program ARGS` on `host`, logging to `log`.
    fn start(&mut self, lan: &Lan, host: &str, rlx: &Path, args: &[&str], log: &Path) -> Result<u32, String> {
        let child = spawn_logged(lan.command(host, rlx).args(args), log, &format!("rlx on {host}"))?;
        let pid = child.id();
        self.0.push(child);
        Ok(pid)
    }

    /// Kills the child `pid` (one of these, not reaped yet, so the pid is
    /// still its own) and forgets it.
    fn kill(&mut self, pid: u32) {
        if let Some(i) = self.0.iter().position(|c| c.id() == pid) {
            kill_child(&mut self.0.swap_remove(i));
        }
    }

    /// Waits for `pid` to exit by itself, `limit` at most.
    fn wait(&mut self, pid: u32, limit: Duration) -> Result<std::process::ExitStatus, String> {
        let deadline = Instant::now() + limit;
        let c = self.0.iter_mut().find(|c| c.id() == pid).ok_or("no such child")?;
        loop {
            if let Some(status) = c.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(format!("pid {pid} still ran after {limit:?}"));
            }
            pause(POLL)?;
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            kill_child(c);
        }
    }
}

/// Polls `done` until it gives a value, `limit` at most, and while the
/// `driver` process (if given) runs (the error says what was awaited).
fn wait_for<T>(
    what: &str,
    driver: Option<u32>,
    limit: Duration,
    mut done: impl FnMut() -> Option<T>,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = done() {
            return Ok(v);
        }
        // A process that exited (a zombie until reaped) has no VmRSS.
        if driver.is_some_and(|pid| resident_kib(pid).is_none()) {
            return Err(format!("the driver exited while waiting for {what}; see its log"));
        }
        if interrupted() {
            return Err(format!("interrupted while waiting for {what}"));
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        std::thread::sleep(POLL);
    }
}

fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// Sleeps for `d`, or until an interrupt (an error).
fn pause(d: Duration) -> Result<(), String> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if interrupted() {
            return Err("interrupted".into());
        }
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

/// The rows of the one run directory's `result.json` under `results`
/// (a torn last line is left out).
fn rows(results: &Path) -> Vec<Value> {
    let Some(dir) = fs::read_dir(results).ok().and_then(|rd| rd.filter_map(Result::ok).find(|e| e.path().is_dir()))
    else {
        return Vec::new();
    };
    let text = fs::read_to_string(dir.path().join("result.json")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn count_in(path: &Path, text: &str) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.matches(text).count())
}

fn fresh_dir(out: &Path) -> Result<(), String> {
    if out.exists() && fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(false) {
        return Err(format!("{} is not empty: use a fresh --out", out.display()));
    }
    fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ---------------------------------------------------------------------------
// scale

/// The runs of `scale`: how many per node count, how long, how many evaluators.
struct ScaleRuns {
    repeats: u32,
    seconds: f64,
    workers: usize,
}

fn scale(rlx: &Path, net: u8, out: &Path, runs_of: &ScaleRuns, counts: &[usize]) -> Result<(), String> {
    let ScaleRuns { repeats, seconds, workers } = *runs_of;
    fresh_dir(out)?;
    let max = counts.iter().copied().max().unwrap_or(0);
    let hosts: Vec<String> =
        std::iter::once("driver".to_string()).chain((1..=max).map(|i| format!("node{i}"))).collect();
    let lan = Lan::create(net, &hosts.iter().map(String::as_str).collect::<Vec<_>>())?;
    let cookie = out.join("cookie");
    write_cookie(&cookie)?;
    let mut runs = Vec::new();
    for r in 1..=repeats {
        for &k in counts {
            let run = scale_run(rlx, &lan, out, &cookie, (k, r), seconds, workers)?;
            println!("{run}");
            runs.push(run);
        }
    }
    let mut by_count = serde_json::Map::new();
    for &k in counts {
        let xs: Vec<f64> =
            runs.iter().filter(|r| r["nodes"] == k).filter_map(|r| r["env_steps_per_s"].as_f64()).collect();
        by_count.insert(k.to_string(), json!({"runs": xs.len(), "median_env_steps_per_s": median(&xs)}));
    }
    let base = by_count.get("0").and_then(|v| v["median_env_steps_per_s"].as_f64());
    for v in by_count.values_mut() {
        if let (Some(b), Some(x)) = (base, v["median_env_steps_per_s"].as_f64()) {
            v["ratio_to_0_nodes"] = json!(round3(x / b));
        }
    }
    let summary = json!({
        "what": format!(
            "PPO CartPole-v1, num_workers {workers}, env steps per second of training (timesteps_total / time_total_s)"
        ),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "seconds_per_run": seconds, "repeats": repeats, "by_nodes": by_count, "runs": runs,
    });
    let _ = fs::remove_file(&cookie);
    write_summary(out, &summary)
}

/// Run `r` with `workers` evaluators on `k` nodes (0: in the driver).
fn scale_run(
    rlx: &Path,
    lan: &Lan,
    out: &Path,
    cookie: &Path,
    (k, r): (usize, u32),
    seconds: f64,
    workers: usize,
) -> Result<Value, String> {
    let dir = out.join(format!("nodes-{k}-run-{r}"));
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut children = Children::default();
    let cookie = cookie.to_str().ok_or("cookie path")?;
    let mut addrs = Vec::new();
    for i in 1..=k {
        let host = format!("node{i}");
        let listen = format!("0.0.0.0:{NODE_PORT}");
        let args = ["node", "--listen", &listen, "--cookie-file", cookie, "--name", &host];
        children.start(lan, &host, rlx, &args, &dir.join(format!("{host}.log")))?;
        addrs.push(format!("{}:{NODE_PORT}", lan.ip(&host)));
    }
    for i in 1..=k {
        let log = dir.join(format!("node{i}.log"));
        wait_for("a node to listen", None, Duration::from_secs(30), || {
            (count_in(&log, "listening on") > 0).then_some(())
        })?;
    }
    let stop = json!({"time_total_s": seconds}).to_string();
    let results = dir.join("runs");
    let results_arg = results.to_str().ok_or("path")?;
    let seed = r.to_string();
    let nodes = addrs.join(",");
    let config = json!({ "num_workers": workers }).to_string();
    let mut args = vec!["train", "--run", "PPO", "--env", "CartPole-v1", "--config", &config];
    args.extend(["--stop", &stop, "--seed", &seed, "--results-dir", results_arg]);
    if k > 0 {
        args.extend(["--nodes", &nodes, "--cookie-file", cookie]);
    }
    let driver = children.start(lan, "driver", rlx, &args, &dir.join("driver.log"))?;
    let status = children.wait(driver, Duration::from_secs_f64(seconds + 120.0))?;
    if !status.success() {
        return Err(format!("the driver with {k} nodes exited with {status}; see {}", dir.display()));
    }
    let rows = rows(&results);
    let last = rows.last().ok_or("no result rows")?;
    let steps = last["timesteps_total"].as_f64().unwrap_or(0.0);
    let time = last["time_total_s"].as_f64().unwrap_or(f64::NAN);
    let on_nodes = last["cluster"]["evaluators_on_nodes"].as_u64().unwrap_or(0);
    Ok(json!({
        "nodes": k, "run": r, "iterations": rows.len(), "timesteps_total": steps, "time_total_s": round3(time),
        "env_steps_per_s": round3(steps / time), "evaluators_on_nodes": on_nodes,
    }))
}

// ---------------------------------------------------------------------------
// control plane

fn control_plane(
    rlx: &Path,
    net: u8,
    out: &Path,
    sizes: &[usize],
    idle_s: f64,
    partition_s: f64,
) -> Result<(), String> {
    fresh_dir(out)?;
    if let Some(odd) = sizes.iter().find(|n| **n == 0 || **n % 2 == 1) {
        return Err(format!("--sizes: {odd} is not a positive even number (half the nodes are cut off)"));
    }
    let lan = Lan::create(net, &["driver", "near0", "near1", "near2", "near3", "far0", "far1", "far2", "far3"])?;
    let cookie = out.join("cookie");
    write_cookie(&cookie)?;
    let mut results = Vec::new();
    for &n in sizes {
        let figures = swarm(rlx, &lan, &out.join(format!("nodes-{n}")), &cookie, n, idle_s, partition_s)?;
        println!("{figures}");
        results.push(figures);
    }
    let _ = fs::remove_file(&cookie);
    let summary = json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "idle_s": idle_s, "partition_s": partition_s, "sizes": results,
    });
    write_summary(out, &summary)
}

/// One cluster of `n` nodes, through its phases.
fn swarm(
    rlx: &Path,
    lan: &Lan,
    dir: &Path,
    cookie: &Path,
    n: usize,
    idle_s: f64,
    partition_s: f64,
) -> Result<Value, String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut children = Children::default();
    let cookie = cookie.to_str().ok_or("cookie path")?;
    let join = format!("{}:{DRIVER_PORT}", lan.ip("driver"));
    let driver_args = |workers: usize, cpus: usize, fallback: &str, results: &Path| -> Vec<String> {
        let config = json!({
            "num_workers": workers, "num_cpus_per_worker": cpus, "placement_fallback": fallback,
            "train_batch_size": 32 * n, "sgd_minibatch_size": (32 * n).min(256), "num_sgd_iter": 2,
            // The budget for lost nodes counts every node lost in the window,
            // across the cluster: the storm loses N/2 at once, past the
            // default (the run's `restart`, 3 in 60 s).
            "cluster": {"node_restart": {"max_restarts": 10_000, "window_s": 60}},
        });
        let stop = json!({"time_total_s": 100_000});
        ["train", "--run", "PPO", "--env", "CartPole-v1", "--node-listen", &format!("0.0.0.0:{DRIVER_PORT}")]
            .iter()
            .map(|s| s.to_string())
            .chain(["--cookie-file".into(), cookie.into(), "--config".into(), config.to_string()])
            .chain(["--stop".into(), stop.to_string(), "--results-dir".into(), results.display().to_string()])
            .collect()
    };
    let start_driver = |children: &mut Children, k: usize, workers: usize, cpus: usize, dial: &[&str]| {
        let log = dir.join(format!("driver-{k}.log"));
        let fallback = if dial.is_empty() { "local" } else { "wait" };
        let args = driver_args(workers, cpus, fallback, &dir.join(format!("runs-{k}")));
        let args: Vec<&str> = args.iter().map(String::as_str).chain(dial.iter().copied()).collect();
        let pid = children.start(lan, "driver", rlx, &args, &log)?;
        let said = |text: &str| count_in(&log, text) > 0;
        wait_for("the driver to listen", Some(pid), Duration::from_secs(60), || {
            (said("listening for nodes on") || said("error")).then_some(())
        })?;
        if !said("listening for nodes on") {
            return Err(format!("the driver failed; see {}", log.display()));
        }
        Ok::<_, String>((pid, log))
    };

    // 1. The control plane alone: one evaluator that fits no node waits.
    let anchor_addr = format!("{}:{NODE_PORT}", lan.ip("near0"));
    let anchor_log = dir.join("anchor.log");
    let anchor_args = [
        "node",
        "--listen",
        &format!("0.0.0.0:{NODE_PORT}"),
        "--cookie-file",
        cookie,
        "--name",
        "anchor",
        "--num-cpus",
        "1",
    ];
    children.start(lan, "near0", rlx, &anchor_args, &anchor_log)?;
    wait_for("the anchor node to listen", None, Duration::from_secs(30), || {
        (count_in(&anchor_log, "listening on") > 0).then_some(())
    })?;
    let (driver1, log1) = start_driver(&mut children, 1, 1, 2, &["--nodes", &anchor_addr])?;
    let idle_cost = |what: &str| -> Result<f64, String> {
        let before = cpu_seconds(driver1).ok_or_else(|| format!("the first driver is gone ({what})"))?;
        let from = Instant::now();
        pause(Duration::from_secs_f64(idle_s))?;
        let after = cpu_seconds(driver1).ok_or_else(|| format!("the first driver is gone ({what})"))?;
        Ok((after - before) / from.elapsed().as_secs_f64())
    };
    pause(Duration::from_secs(2))?;
    let alone_cpu = idle_cost("anchor alone")?;
    let alone_kib = resident_kib(driver1).unwrap_or(0);
    let started = Instant::now();
    let mut node_pids = Vec::new();
    for i in 0..n {
        let host = format!("{}{}", if i < n / 2 { "near" } else { "far" }, i % 4);
        let name = format!("swarm-{i}");
        let args = [
            "node",
            "--listen",
            "127.0.0.1:0",
            "--join",
            &join,
            "--cookie-file",
            cookie,
            "--name",
            &name,
            "--num-cpus",
            "1",
        ];
        node_pids.push(children.start(lan, &host, rlx, &args, &dir.join(format!("{name}.log")))?);
    }
    let spawned_s = started.elapsed().as_secs_f64();
    let limit = Duration::from_secs(60 + n as u64);
    let joined_s = wait_for("every node to join", Some(driver1), limit, || {
        (count_in(&log1, " joined from ") >= n).then(|| started.elapsed().as_secs_f64())
    })?;
    pause(Duration::from_secs(2))?;
    let joined_cpu = idle_cost("nodes joined")?;
    let driver1_kib = resident_kib(driver1).unwrap_or(0);
    let node_kib: Vec<f64> = node_pids.iter().filter_map(|p| resident_kib(*p)).map(|k| k as f64).collect();
    children.kill(driver1);

    // 2. A driver that trains (a new run) at the same address: the nodes
    // come back to it on their own.
    let restarted = Instant::now();
    let (driver2, log2) = start_driver(&mut children, 2, n, 1, &[])?;
    let results2 = dir.join("runs-2");
    let all_on_nodes = |rows: &[Value]| {
        rows.last().is_some_and(|r| r["cluster"]["nodes_alive"] == n && r["cluster"]["evaluators_on_nodes"] == n)
    };
    let rejoined_s =
        wait_for("every node back after the restore", Some(driver2), Duration::from_secs(120 + n as u64), || {
            (count_in(&log2, " joined from ") >= n).then(|| restarted.elapsed().as_secs_f64())
        })?;
    let full_s = wait_for("every evaluator on a node", Some(driver2), limit, || {
        all_on_nodes(&rows(&results2)).then(|| restarted.elapsed().as_secs_f64())
    })?;
    let driver2_kib = resident_kib(driver2).unwrap_or(0);

    // 3. The storm: `far` cut off, then healed.
    let far = ["far0", "far1", "far2", "far3"];
    for host in far {
        lan.set_link(host, false)?;
    }
    let cut = Instant::now();
    let lost_s = wait_for("the far half lost", Some(driver2), Duration::from_secs(120), || {
        rows(&results2)
            .last()
            .is_some_and(|r| r["cluster"]["nodes_alive"] == n / 2)
            .then(|| cut.elapsed().as_secs_f64())
    })?;
    let rest = Duration::from_secs_f64(partition_s).saturating_sub(cut.elapsed());
    pause(rest)?;
    for host in far {
        lan.set_link(host, true)?;
    }
    let healed = Instant::now();
    let recovered_s =
        wait_for("every evaluator back on a node after the heal", Some(driver2), Duration::from_secs(300), || {
            all_on_nodes(&rows(&results2)).then(|| healed.elapsed().as_secs_f64())
        })?;
    pause(Duration::from_secs(3))?;
    children.kill(driver2);
    let rows = rows(&results2);
    let iterations: Vec<u64> = rows.iter().filter_map(|r| r["training_iteration"].as_u64()).collect();
    let contiguous = iterations.iter().copied().eq(1..=iterations.len() as u64);
    let last = rows.last().cloned().unwrap_or(Value::Null);
    drop(children);
    Ok(json!({
        "nodes": n,
        "spawn_all_s": round3(spawned_s),
        "all_joined_s": round3(joined_s),
        "idle_driver_cpu_fraction_anchor_alone": round3(alone_cpu),
        "idle_driver_cpu_fraction_nodes_joined": round3(joined_cpu),
        "idle_driver_cpu_ms_per_node_per_s": round3((joined_cpu - alone_cpu) * 1000.0 / n as f64),
        "idle_driver_rss_kib_anchor_alone": alone_kib,
        "idle_driver_rss_kib_nodes_joined": driver1_kib,
        "idle_driver_rss_kib_per_node": round3((driver1_kib as f64 - alone_kib as f64) / n as f64),
        "node_rss_kib_median": median(&node_kib),
        "restore_all_rejoined_s": round3(rejoined_s),
        "restore_all_on_nodes_s": round3(full_s),
        "training_driver_rss_kib": driver2_kib,
        "partition_detected_s": round3(lost_s),
        "storm_recovered_after_heal_s": round3(recovered_s),
        "iterations": iterations.len(),
        "iterations_contiguous": contiguous,
        "connections_refused_by_the_drivers": count_in(&log1, " refused ") + count_in(&log2, " refused "),
        "last_cluster": last["cluster"],
    }))
}

fn write_summary(out: &Path, summary: &Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(summary).expect("summary serializes");
    println!("{text}");
    fs::write(out.join("summary.json"), format!("{text}\n")).map_err(|e| format!("summary.json: {e}"))
}
