//! The processes: the `rlx node`s, each on its own host of the run's
//! network, and one `rlx train` driver at a time on the driver's host,
//! each logging to its own file in `--out`. [`Fleet`] starts, restarts and
//! stops them (and kills every one it started when it drops), heals
//! partitions and samples their memory; [`Drivers`] follows the driver
//! processes one after another, from the first run through each restore.

use crate::audit::{run_dirs, Tail};
use crate::{node_host, Chaos, Flow, Record, DRIVER_PORT, NODE_PORT, POLL};
use rlx::checkpoint::Checkpoint;
use rlx_benches::children::{kill_child, resident_kib, signal_child, spawn_logged};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Restarts of a restored driver that found no usable node, at most.
const MAX_RESTORE_RETRIES: u32 = 3;
/// Restarts of a node whose new process exited at once, in a row, at most.
const MAX_NODE_RESPAWNS: u32 = 10;
/// How often every child's resident memory goes to `memory.csv`.
const MEMORY_EVERY: Duration = Duration::from_secs(10);

/// What a node process is doing, as this tool made it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NodeState {
    /// Running and not stopped.
    Up,
    /// Killed (or exited); started again at the instant.
    Down { restart_at: Instant },
    /// SIGSTOPped; SIGCONT at the instant.
    Stopped { cont_at: Instant },
    /// Cut off (its link down); healed at the instant.
    Partitioned { heal_at: Instant },
}

/// One node, across its restarts (same name, host and address).
pub struct NodeProc {
    pub name: String,
    /// Its host on the run's network, and that host's IP.
    pub host: String,
    pub ip: String,
    /// Where it listens (what the driver dials, unless it joins).
    pub addr: String,
    /// Whether it dials the driver (`rlx node --join`) instead.
    pub joins: bool,
    log: PathBuf,
    pub child: Option<Child>,
    pub state: NodeState,
    starts: u32,
    started_at: Instant,
    /// Processes in a row that exited within 3 s of starting.
    quick_exits: u32,
}

/// Every child process this tool started. Dropping it kills (SIGKILL,
/// which also ends a stopped process) and reaps each one, by its handle:
/// on the normal path, on an error and on a panic.
pub struct Fleet {
    pub nodes: Vec<NodeProc>,
    /// The driver process, if one was started and not killed since.
    pub driver: Option<Child>,
    /// `memory.csv`, and when it was last written.
    memory: File,
    memory_at: Option<Instant>,
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

impl Fleet {
    /// Starts the nodes but the last, and gives them a moment (15 s at
    /// most) to bind before a driver dials them. The last node starts
    /// `late_join_at` seconds after the start, and joins the driver.
    pub fn start(chaos: &mut Chaos, late_join_at: f64) -> Result<Self, String> {
        let now = Instant::now();
        let n = chaos.nodes;
        let nodes = (1..=n)
            .map(|i| {
                let host = node_host(i);
                let ip = chaos.lan.ip(&host);
                let joins = i == n;
                let first_start = if joins { now + Duration::from_secs_f64(late_join_at) } else { now };
                NodeProc {
                    name: format!("chaos-node-{i}"),
                    addr: format!("{ip}:{NODE_PORT}"),
                    host,
                    ip,
                    joins,
                    log: chaos.out.join(format!("node-{i}.log")),
                    child: None,
                    state: NodeState::Down { restart_at: first_start },
                    starts: 0,
                    started_at: now,
                    quick_exits: 0,
                }
            })
            .collect();
        let memory = File::create(chaos.out.join("memory.csv")).map_err(|e| format!("memory.csv: {e}"))?;
        let mut fleet = Fleet { nodes, driver: None, memory, memory_at: None };
        writeln!(fleet.memory, "t_s,process,pid,rss_kib").map_err(|e| format!("memory.csv: {e}"))?;
        for i in 0..n - 1 {
            fleet.spawn_node(chaos, i)?;
        }
        let bind_deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < bind_deadline {
            let all = fleet.nodes[..n - 1]
                .iter()
                .all(|n| fs::read_to_string(&n.log).is_ok_and(|t| t.contains("listening on")));
            if all {
                break;
            }
            std::thread::sleep(POLL);
        }
        Ok(fleet)
    }

    /// The nodes' addresses (those the driver dials are its `--nodes`).
    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    /// Every child's resident memory, every [`MEMORY_EVERY`], to
    /// `memory.csv` (a stopped process has memory too; a dead one none).
    pub fn sample_memory(&mut self, t: f64) {
        if self.memory_at.is_some_and(|at| at.elapsed() < MEMORY_EVERY) {
            return;
        }
        self.memory_at = Some(Instant::now());
        let children = self.nodes.iter().filter_map(|n| n.child.as_ref().map(|c| (n.name.as_str(), c.id())));
        let driver = self.driver.as_ref().map(|c| ("driver", c.id()));
        for (name, pid) in driver.into_iter().chain(children) {
            if let Some(kib) = resident_kib(pid) {
                let _ = writeln!(self.memory, "{t:.1},{name},{pid},{kib}");
            }
        }
    }

    /// How many nodes are running and not stopped.
    pub fn up(&self) -> usize {
        self.nodes.iter().filter(|n| n.state == NodeState::Up).count()
    }

    /// Starts node `i` (again) on its host, listening on its address (and
    /// joining the driver, if it is the one that joins).
    fn spawn_node(&mut self, chaos: &mut Chaos, i: usize) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let mut command = chaos.lan.command(&node.host, &chaos.rlx);
        command
            .args(["node", "--listen", &format!("0.0.0.0:{NODE_PORT}"), "--cookie-file"])
            .arg(&chaos.cookie)
            .args(["--name", &node.name]);
        if node.joins {
            command.args(["--join", &chaos.driver_listen()]);
        }
        let child = spawn_logged(&mut command, &node.log, &format!("{} {}", chaos.rlx.display(), node.name))?;
        node.starts += 1;
        node.started_at = Instant::now();
        let pid = child.id();
        node.child = Some(child);
        node.state = NodeState::Up;
        chaos.say(&format!("started {} on {} (pid {pid}, start #{})", node.name, node.addr, node.starts));
        Ok(())
    }

    /// Starts driver `n`: a new run, or a restore of the run directory
    /// `restore`. Returns its log.
    fn spawn_driver(&mut self, chaos: &mut Chaos, n: usize, restore: Option<&Path>) -> Result<PathBuf, String> {
        let log = chaos.out.join(format!("driver-{n}.log"));
        let dialled: Vec<&str> = self.nodes.iter().filter(|n| !n.joins).map(|n| n.addr.as_str()).collect();
        let mut cmd = chaos.lan.command("driver", &chaos.rlx);
        cmd.args(["train", "--run", &chaos.algorithm, "--env", "CartPole-v1", "--nodes", &dialled.join(",")])
            .args(["--node-listen", &format!("0.0.0.0:{DRIVER_PORT}"), "--cookie-file"])
            .arg(&chaos.cookie)
            .args(["--config", &chaos.config, "--stop", &chaos.stop, "--checkpoint-freq"])
            .arg(chaos.checkpoint_freq.to_string())
            .arg("--results-dir")
            .arg(&chaos.runs);
        match restore {
            Some(dir) => cmd.arg("--restore").arg(dir),
            None => cmd.args(["--seed", &chaos.seed.to_string()]),
        };
        let child = spawn_logged(&mut cmd, &log, "the driver")?;
        let msg = match restore {
            Some(dir) => format!("driver #{n} (pid {}): restore from {}", child.id(), dir.display()),
            None => format!("driver #{n} (pid {}): new run", child.id()),
        };
        chaos.say(&msg);
        self.driver = Some(child);
        Ok(log)
    }

    /// SIGKILLs the driver, if one runs.
    pub fn kill_driver(&mut self) {
        if let Some(c) = self.driver.as_mut() {
            kill_child(c);
        }
        self.driver = None;
    }

    /// The nodes' side of a round: restarts and SIGCONTs that are due, and
    /// nodes that exited by themselves (a failure once one keeps exiting
    /// at once).
    pub fn poll_nodes(&mut self, chaos: &mut Chaos, record: &mut Record, now: Instant, t: f64) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            let gave_up = match self.nodes[i].state {
                NodeState::Down { restart_at } if now >= restart_at => {
                    if let Some(mut c) = self.nodes[i].child.take() {
                        kill_child(&mut c);
                    }
                    self.spawn_node(chaos, i)?;
                    false
                }
                NodeState::Stopped { cont_at } if now >= cont_at => {
                    resume(chaos, &mut self.nodes[i]);
                    false
                }
                NodeState::Partitioned { heal_at } if now >= heal_at => {
                    let node = &mut self.nodes[i];
                    node.state = NodeState::Up;
                    match chaos.lan.set_link(&node.host, true) {
                        Ok(()) => chaos.say(&format!("HEAL {}", node.name)),
                        Err(e) => record.failures.push(format!("healing {}: {e}", node.name)),
                    }
                    false
                }
                NodeState::Up => note_own_exit(chaos, record, &mut self.nodes[i], now, t),
                _ => false,
            };
            if gave_up {
                break;
            }
        }
        Ok(())
    }

    /// Kills and reaps every child; returns how often each node was started.
    pub fn stop(self) -> BTreeMap<String, u32> {
        self.nodes.iter().map(|n| (n.name.clone(), n.starts)).collect()
    }
}

/// SIGCONTs a stopped node whose stop has run its course.
fn resume(chaos: &mut Chaos, node: &mut NodeProc) {
    let r = node.child.as_mut().map(|c| signal_child(c, "CONT"));
    node.state = NodeState::Up;
    match r {
        Some(Ok(())) => chaos.say(&format!("SIGCONT {}", node.name)),
        Some(Err(e)) => chaos.say(&format!("SIGCONT {} failed: {e}", node.name)),
        None => {}
    }
}

/// If a running node exited by itself, records it and schedules its
/// restart in 1 s. Returns `true` (gives up, with a failure recorded) once
/// it has exited within 3 s of its start more than [`MAX_NODE_RESPAWNS`]
/// times in a row.
fn note_own_exit(chaos: &mut Chaos, record: &mut Record, node: &mut NodeProc, now: Instant, t: f64) -> bool {
    let Some(status) = node.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) else { return false };
    let quick = node.started_at.elapsed() < Duration::from_secs(3);
    node.quick_exits = if quick { node.quick_exits + 1 } else { 0 };
    let line = format!(
        "{} exited by itself ({status}) {:.1}s after its start #{}",
        node.name,
        node.started_at.elapsed().as_secs_f64(),
        node.starts
    );
    node.state = NodeState::Down { restart_at: now + Duration::from_secs(1) };
    record.node_respawns += 1;
    record.node_unexpected_exits.push(format!("{line} at {t:.1}s"));
    chaos.say(&line);
    if node.quick_exits > MAX_NODE_RESPAWNS {
        record.failures.push(format!("{line}: {MAX_NODE_RESPAWNS} quick exits in a row, gave up"));
        return true;
    }
    false
}

/// One driver process: the first run or a restore.
pub struct DriverRun {
    pub log: PathBuf,
    pub run_dir: Option<PathBuf>,
    tail: Option<Tail>,
    /// The checkpoint iteration it was restored from (0 for the first run):
    /// lines up to it are carried-over history.
    pub baseline: u64,
    pub restored_from: Option<PathBuf>,
    pub started_at: Instant,
    /// Whether it trained an iteration of its own yet.
    pub trained: bool,
}

impl DriverRun {
    fn new(log: PathBuf, baseline: u64, restored_from: Option<PathBuf>) -> Self {
        Self { log, run_dir: None, tail: None, baseline, restored_from, started_at: Instant::now(), trained: false }
    }
}

/// The driver side of the main loop.
pub enum DriverPhase {
    Running,
    /// Killed; restored from `from` at the instant.
    Down {
        restore_at: Instant,
        from: PathBuf,
    },
    Exited(ExitStatus),
}

/// The driver processes, one after another.
pub struct Drivers {
    /// Every driver started, the current one last.
    pub runs: Vec<DriverRun>,
    pub phase: DriverPhase,
    /// The run directories that a driver already claimed.
    known_dirs: BTreeSet<PathBuf>,
    /// Restores started again because the last found no usable node.
    pub restore_retries: u32,
}

impl Drivers {
    /// Starts the first driver: a new run with `--seed`.
    pub fn start(chaos: &mut Chaos, fleet: &mut Fleet) -> Result<Self, String> {
        let known_dirs = run_dirs(&chaos.runs);
        let log = fleet.spawn_driver(chaos, 1, None)?;
        let runs = vec![DriverRun::new(log, 0, None)];
        Ok(Self { runs, phase: DriverPhase::Running, known_dirs, restore_retries: 0 })
    }

    /// The current driver.
    pub fn current(&self) -> &DriverRun {
        self.runs.last().expect("a driver")
    }

    /// The driver's side of a round: its new lines, its exit, a restore
    /// that is due. [`Flow::Stop`] once it exited (or cannot be restored).
    pub fn poll(
        &mut self,
        chaos: &mut Chaos,
        fleet: &mut Fleet,
        record: &mut Record,
        now: Instant,
    ) -> Result<Flow, String> {
        match &self.phase {
            DriverPhase::Running => {
                self.claim_run_dir(chaos);
                self.read_new_lines(record);
                let status = fleet.driver.as_mut().and_then(|c| c.try_wait().ok().flatten());
                if let Some(status) = status {
                    if self.retry_restore(chaos, fleet, status, now) {
                        return Ok(Flow::Again);
                    }
                    self.note_exit(chaos, record, status);
                }
            }
            DriverPhase::Down { restore_at, from } => {
                if now >= *restore_at {
                    let from = from.clone();
                    if !self.restore(chaos, fleet, record, from)? {
                        return Ok(Flow::Stop);
                    }
                }
            }
            DriverPhase::Exited(_) => {}
        }
        Ok(if matches!(self.phase, DriverPhase::Exited(_)) { Flow::Stop } else { Flow::Next })
    }

    /// Takes the first new directory under `runs/` as the current
    /// driver's, once one appears.
    fn claim_run_dir(&mut self, chaos: &mut Chaos) {
        let d = self.runs.last_mut().expect("a driver");
        if d.run_dir.is_some() {
            return;
        }
        let new: Vec<PathBuf> = run_dirs(&chaos.runs).difference(&self.known_dirs).cloned().collect();
        if let Some(dir) = new.into_iter().next() {
            self.known_dirs.insert(dir.clone());
            d.tail = Some(Tail::new(dir.join("result.json")));
            chaos.say(&format!("run directory {}", dir.display()));
            d.run_dir = Some(dir);
        }
    }

    /// Notes when each iteration the current driver trained itself
    /// appears in its `result.json`.
    fn read_new_lines(&mut self, record: &mut Record) {
        let d = self.runs.last_mut().expect("a driver");
        let Some(tail) = d.tail.as_mut() else { return };
        for line in tail.read() {
            match line {
                Ok(r) if r.training_iteration > d.baseline => {
                    record.observations.push((Instant::now(), r.training_iteration));
                    d.trained = true;
                    record.newest_trained = r.training_iteration;
                }
                Ok(_) => {}
                Err(e) => record.bad_lines.push(format!("{}: {e}", tail.path.display())),
            }
        }
    }

    /// A restored driver that exited before training anything because
    /// none of the nodes could be used is not rlx's fault (this tool had
    /// every node down or stopped at that moment): restores again in 2 s,
    /// [`MAX_RESTORE_RETRIES`] times at most. Returns whether it did.
    fn retry_restore(&mut self, chaos: &mut Chaos, fleet: &mut Fleet, status: ExitStatus, now: Instant) -> bool {
        let d = self.current();
        let Some(from) = d.restored_from.clone() else { return false };
        let retry = !status.success()
            && !d.trained
            && self.restore_retries < MAX_RESTORE_RETRIES
            && fs::read_to_string(&d.log).unwrap_or_default().contains("none of the nodes could be used");
        if retry {
            self.restore_retries += 1;
            chaos.say(&format!("driver #{} found no usable node ({status}); restoring again", self.runs.len()));
            fleet.driver = None;
            self.phase = DriverPhase::Down { restore_at: now + Duration::from_secs(2), from };
        }
        retry
    }

    /// The driver exited: a failure unless with status 0.
    fn note_exit(&mut self, chaos: &mut Chaos, record: &mut Record, status: ExitStatus) {
        let n = self.runs.len();
        chaos.say(&format!("driver #{n} exited: {status}"));
        if !status.success() {
            record.failures.push(format!("driver #{n} exited with {status}; see driver-{n}.log"));
        }
        self.phase = DriverPhase::Exited(status);
    }

    /// Starts the next driver, restoring the run directory `from`. Returns
    /// `false` (with a failure recorded) if it holds no checkpoint.
    fn restore(
        &mut self,
        chaos: &mut Chaos,
        fleet: &mut Fleet,
        record: &mut Record,
        from: PathBuf,
    ) -> Result<bool, String> {
        let ckpt_iter = match Checkpoint::load(&from) {
            Ok(c) => c.metadata.training_iteration,
            Err(e) => {
                record.failures.push(format!("no checkpoint to restore in {}: {e}", from.display()));
                return Ok(false);
            }
        };
        let log = fleet.spawn_driver(chaos, self.runs.len() + 1, Some(&from))?;
        self.runs.push(DriverRun::new(log, ckpt_iter, Some(from)));
        self.phase = DriverPhase::Running;
        Ok(true)
    }
}
