//! The fault schedule and the faults. A ChaCha8 RNG seeded by `--seed`
//! picks every fault and every time: a node fault every 0.5 to 1.5 times
//! `--fault-every-s` (SIGKILL and a restart 1 to 5 s later, SIGSTOP for 2
//! to 15 s, or a partition of 5 to 40 s, a third each), only while two
//! nodes are up; the late node's start, in the first 10 to 25 % of the
//! planned training time; and two driver kills, one in each band of the
//! planned training time, each restored 1 to 3 s later. The draws happen
//! in a fixed order, so a seed always gives the same schedule against the
//! same run.

use crate::fleet::{DriverPhase, Drivers, Fleet, NodeProc, NodeState};
use crate::{Chaos, Record, NODE_TIMEOUT_S};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::checkpoint;
use rlx_benches::children::{kill_child, signal_child};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// One fault injected.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: &'static str,
    pub target: String,
    pub at: Instant,
    pub at_s: f64,
    /// How long the node stayed down or stopped, or the driver down.
    pub duration_s: f64,
    /// Whether the node was still part of the current driver's run (not
    /// yet lost or refused), by the driver's log.
    pub node_in_use: Option<bool>,
    /// The newest iteration trained by then.
    pub iteration_at: u64,
    /// For a driver kill: the newest iteration in the killed run's
    /// `result.json` (the driver catches up past it).
    pub last_iteration: Option<u64>,
    pub recovered_s: Option<f64>,
    pub catch_up_s: Option<f64>,
}

/// The seeded schedule, and how far the run got through it.
pub struct Schedule {
    rng: ChaCha8Rng,
    /// The two driver kills, in wall seconds from the start: one in each
    /// band of the planned training time.
    driver_kill_at: [f64; 2],
    next_fault_s: f64,
    /// The mean gap between two node faults.
    fault_every_s: f64,
    /// When the last node starts, with `--join` (wall seconds).
    pub late_join_at: f64,
    pub driver_kills_done: usize,
}

impl Schedule {
    /// The schedule of seed `seed` for a run that trains `stop_time_s`,
    /// with a node fault every `fault_every_s` on average.
    pub fn new(seed: u64, stop_time_s: f64, fault_every_s: f64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let driver_kill_at = [rng.gen_range(0.20..0.40) * stop_time_s, rng.gen_range(0.55..0.75) * stop_time_s];
        let next_fault_s = rng.gen_range(0.5..1.5) * fault_every_s;
        let late_join_at = rng.gen_range(0.10..0.25) * stop_time_s;
        Self { rng, driver_kill_at, next_fault_s, fault_every_s, late_join_at, driver_kills_done: 0 }
    }

    /// The plan, for `chaos.log`.
    pub fn describe(&self, stop: &str) -> String {
        format!(
            "stop {stop}; driver kills planned at {:.1}s and {:.1}s; the last node joins at {:.1}s; \
             first node fault at {:.1}s, then one every {:.0}s on average",
            self.driver_kill_at[0], self.driver_kill_at[1], self.late_join_at, self.next_fault_s, self.fault_every_s
        )
    }

    /// SIGKILLs the driver if a kill is due and the run is ready for it: a
    /// checkpoint to restore from, an iteration trained by this driver, and
    /// two nodes up. Returns whether it did.
    pub fn kill_driver_when_due(
        &mut self,
        chaos: &mut Chaos,
        fleet: &mut Fleet,
        drivers: &mut Drivers,
        record: &mut Record,
        t: f64,
    ) -> bool {
        let due = self.driver_kills_done < 2 && t >= self.driver_kill_at[self.driver_kills_done];
        if !due || !matches!(drivers.phase, DriverPhase::Running) {
            return false;
        }
        let d = drivers.current();
        let ready = d.trained && fleet.up() >= 2 && d.run_dir.as_deref().and_then(checkpoint::latest).is_some();
        if !ready {
            return false;
        }
        let run_dir = d.run_dir.clone().expect("run dir");
        fleet.kill_driver();
        let at = Instant::now();
        self.driver_kills_done += 1;
        let last_iteration = newest_iteration(&run_dir.join("result.json"));
        let down_s = self.rng.gen_range(1.0..3.0);
        let n = drivers.runs.len();
        chaos.say(&format!(
            "SIGKILL driver #{n} at iteration {last_iteration} (kill {} of 2); restore in {down_s:.1}s",
            self.driver_kills_done
        ));
        record.faults.push(Fault {
            kind: "driver_kill",
            target: format!("driver #{n}"),
            at,
            at_s: chaos.t(),
            duration_s: down_s,
            node_in_use: None,
            iteration_at: record.newest_trained,
            last_iteration: Some(last_iteration),
            recovered_s: None,
            catch_up_s: None,
        });
        drivers.phase = DriverPhase::Down { restore_at: at + Duration::from_secs_f64(down_s), from: run_dir };
        true
    }

    /// Injects a node fault if one is due, and schedules the next: only
    /// while two nodes are up (else it looks again in 1 s).
    pub fn fault_node_when_due(
        &mut self,
        chaos: &mut Chaos,
        fleet: &mut Fleet,
        drivers: &Drivers,
        record: &mut Record,
        t: f64,
    ) {
        if t < self.next_fault_s {
            return;
        }
        if fleet.up() < 2 {
            self.next_fault_s = t + 1.0;
            return;
        }
        let log = drivers.current().log.clone();
        let in_run = |n: &NodeProc| matches!(drivers.phase, DriverPhase::Running) && node_in_use(&log, n);
        let i = self.pick_node(fleet, &in_run);
        let kind = [NodeFault::Kill, NodeFault::Stop, NodeFault::Partition][self.rng.gen_range(0..3)];
        let dur = match kind {
            NodeFault::Kill => self.rng.gen_range(1.0..5.0),
            NodeFault::Stop => self.rng.gen_range(2.0..15.0),
            NodeFault::Partition => self.rng.gen_range(5.0..40.0),
        };
        let in_use = in_run(&fleet.nodes[i]);
        let at = Instant::now();
        if inject(chaos, &mut fleet.nodes[i], kind, at + Duration::from_secs_f64(dur)) {
            let node = &fleet.nodes[i];
            say_node_fault(chaos, &node.name, kind, dur, in_use);
            record.faults.push(node_fault(node, kind, dur, in_use, at, chaos.t(), record.newest_trained));
        }
        self.next_fault_s = t + self.rng.gen_range(0.5..1.5) * self.fault_every_s;
    }

    /// A node that is up, at random: one the driver uses now if any.
    fn pick_node(&mut self, fleet: &Fleet, in_run: &dyn Fn(&NodeProc) -> bool) -> usize {
        let healthy: Vec<usize> = (0..fleet.nodes.len()).filter(|&i| fleet.nodes[i].state == NodeState::Up).collect();
        let used: Vec<usize> = healthy.iter().copied().filter(|&i| in_run(&fleet.nodes[i])).collect();
        let pool = if used.is_empty() { &healthy } else { &used };
        pool[self.rng.gen_range(0..pool.len())]
    }
}

/// What happens to a node.
#[derive(Clone, Copy, PartialEq)]
enum NodeFault {
    /// SIGKILL, and a restart on the same address.
    Kill,
    /// SIGSTOP, and SIGCONT.
    Stop,
    /// Its link down (every packet dropped both ways), and up again.
    Partition,
}

impl NodeFault {
    fn kind(self) -> &'static str {
        match self {
            NodeFault::Kill => "node_kill",
            NodeFault::Stop => "node_stop",
            NodeFault::Partition => "node_partition",
        }
    }
}

/// Injects `fault` into `node` until `until` (when the node is restarted,
/// continued or healed). Returns whether the fault took.
fn inject(chaos: &mut Chaos, node: &mut NodeProc, fault: NodeFault, until: Instant) -> bool {
    let failed = match fault {
        NodeFault::Kill => {
            if let Some(c) = node.child.as_mut() {
                kill_child(c);
            }
            node.child = None;
            node.state = NodeState::Down { restart_at: until };
            return true;
        }
        NodeFault::Stop => match node.child.as_mut().map(|c| signal_child(c, "STOP")) {
            Some(Ok(())) => {
                node.state = NodeState::Stopped { cont_at: until };
                return true;
            }
            Some(Err(e)) => format!("SIGSTOP {} failed: {e}", node.name),
            None => return false,
        },
        NodeFault::Partition => match chaos.lan.set_link(&node.host, false) {
            Ok(()) => {
                node.state = NodeState::Partitioned { heal_at: until };
                return true;
            }
            Err(e) => format!("cutting {} off failed: {e}", node.name),
        },
    };
    chaos.say(&failed);
    false
}

/// The record of a node fault injected at `at` (`at_s` from the start).
fn node_fault(
    node: &NodeProc,
    fault: NodeFault,
    dur: f64,
    in_use: bool,
    at: Instant,
    at_s: f64,
    iteration_at: u64,
) -> Fault {
    Fault {
        kind: fault.kind(),
        target: format!("{} ({})", node.name, node.addr),
        at,
        at_s,
        duration_s: dur,
        node_in_use: Some(in_use),
        iteration_at,
        last_iteration: None,
        recovered_s: None,
        catch_up_s: None,
    }
}

fn say_node_fault(chaos: &mut Chaos, name: &str, fault: NodeFault, dur: f64, in_use: bool) {
    let past = if dur > NODE_TIMEOUT_S { " (past the node timeout)" } else { "" };
    let what = match fault {
        NodeFault::Kill => format!("SIGKILL {name}; restart in {dur:.1}s"),
        NodeFault::Stop => format!("SIGSTOP {name} for {dur:.1}s{past}"),
        NodeFault::Partition => format!("PARTITION {name} for {dur:.1}s{past}"),
    };
    chaos.say(&format!("{what} [{}]", if in_use { "in use by the driver" } else { "idle" }));
}

/// The newest iteration in a `result.json` (0 if none can be read; a
/// killed driver may leave a torn last line, which is left out).
fn newest_iteration(path: &Path) -> u64 {
    let lines = rlx_cli::results::read_history(path).map(|(lines, _torn)| lines).unwrap_or_default();
    lines.iter().map(|r| r.training_iteration).max().unwrap_or(0)
}

/// Whether the driver uses `node` now, by the last line of its log about
/// it: lost or refused (no), admitted again or joined (yes). A node the
/// driver dials is in use from the start; the node that joins once it
/// joined. Lines name a node by its address (a joined node's with the
/// port it dialled from), so they are matched by the node's IP.
fn node_in_use(driver_log: &Path, node: &NodeProc) -> bool {
    let Ok(text) = fs::read_to_string(driver_log) else { return false };
    let at = format!("node {}:", node.ip);
    // `node NAME@HOST joined from IP:PORT, offering …` (a join refused
    // after the handshake says `… but REASON` instead).
    let joined = format!(" joined from {}:", node.ip);
    let mut in_use = !node.joins;
    for line in text.lines() {
        if line.contains(&at) && (line.contains(" lost: ") || line.contains(" refused: ")) {
            in_use = false;
        } else if (line.contains(&joined) && line.contains(", offering "))
            || (line.contains(&at) && line.contains(" admitted again"))
        {
            in_use = true;
        }
    }
    in_use
}
