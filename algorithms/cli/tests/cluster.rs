//! Multi-node training over loopback: `rlx node` processes host the
//! evaluators of an `rlx train --nodes ...` driver.
//!
//! - PPO learns CartPole with evaluators on two nodes, to the threshold of
//!   the single-process test (400); DreamerV3's world model and AlphaZero's
//!   network learn from evaluators on two nodes.
//! - `kill -9` of one of three nodes mid-run: the run finishes, its
//!   evaluators are re-placed, the results record it, and every finished
//!   iteration is in `result.json`; for AlphaZero, every iteration has all
//!   its self-play games.
//! - A node with another cookie is refused and the driver carries on; a
//!   peer sending malformed frames is dropped and the node carries on.
//! - A node that hangs (SIGSTOP) is found by the driver's heartbeat and its
//!   evaluators move; losing more nodes than the `cluster.node_restart`
//!   budget allows stops the run with a clear error and keeps its results.
//! - An env that panics inside a remote evaluator is restarted by the
//!   node's supervisor within budget, and past it the driver gets a clear
//!   error naming the evaluator, the budget and the panic. With env shards
//!   the node restarts only the shard, one level further down.
//!
//! Every process binds 127.0.0.1 port 0 and is killed when its guard drops.

mod common;

use rlx::{HandleError, OptimizerError};
use rlx_cli::deploy::{self, Deployment};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");
/// A node with env faults on purpose (built only for tests: the crate's
/// `test-node` feature, see `Cargo.toml`).
const TEST_NODE: &str = env!("CARGO_BIN_EXE_rlx-test-node");
const COOKIE: &str = "rlx-test-cookie";
/// The single-process PPO test's threshold (tests/ppo_cartpole.rs).
const THRESHOLD: f64 = 400.0;

fn tmp(name: &str) -> PathBuf {
    common::tmp("cluster", name)
}

/// A child process, killed (SIGKILL) and reaped on drop.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(command: &mut Command, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).unwrap();
        let child = command.stdout(file.try_clone().unwrap()).stderr(file).stdin(Stdio::null()).spawn().unwrap();
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit; kills it past `timeout`.
    fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "timed out after {timeout:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker node and the address it printed.
struct Node {
    proc: Proc,
    addr: String,
}

impl Node {
    fn start(dir: &Path, name: &str, cookie: &str) -> Self {
        Self::start_with(dir, name, cookie, &[])
    }

    /// A node with more flags (TLS files).
    fn start_with(dir: &Path, name: &str, cookie: &str, flags: &[&str]) -> Self {
        Self::start_at(dir, name, "127.0.0.1:0", cookie, flags, None)
    }

    /// A node listening on `listen` (the address of a node killed
    /// before, say), inside `netns` if given; its log is `NAME.log`.
    fn start_at(dir: &Path, name: &str, listen: &str, cookie: &str, flags: &[&str], netns: Option<&Netns>) -> Self {
        let mut command = match netns {
            Some(ns) => ns.command(RLX),
            None => Command::new(RLX),
        };
        command.args(["node", "--listen", listen, "--cookie", cookie, "--name", name]).args(flags);
        Self::from_proc(Proc::spawn(&mut command, dir.join(format!("{name}.log"))))
    }

    /// A node whose CartPole panics at its `panic_at`-th env step (`N`, or
    /// `always`: every 50th), run by the test-only `rlx-test-node` binary
    /// (`tests/bin/rlx-test-node.rs`).
    fn start_faulty(dir: &Path, name: &str, panic_at: &str) -> Self {
        let mut command = Command::new(TEST_NODE);
        command.args([COOKIE, panic_at]);
        Self::from_proc(Proc::spawn(&mut command, dir.join(format!("{name}.log"))))
    }

    fn from_proc(proc: Proc) -> Self {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = proc.log();
            if let Some(rest) = log.split("listening on ").nth(1) {
                let addr = rest.split_whitespace().next().unwrap().to_string();
                return Self { proc, addr };
            }
            assert!(Instant::now() < deadline, "node did not start; log:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn train(dir: &Path, nodes: &[&Node], cookie: &str, config: Value, stop: Value) -> Proc {
    train_with(dir, nodes, cookie, config, stop, &[])
}

/// A driver with more flags (TLS files), logging to `driver.log`.
fn train_with(dir: &Path, nodes: &[&Node], cookie: &str, config: Value, stop: Value, flags: &[&str]) -> Proc {
    train_on(("PPO", "CartPole-v1"), dir, nodes, cookie, config, stop, flags)
}

/// `(algorithm, env)`, otherwise as [`train_with`].
fn train_on(
    (run, env): (&str, &str),
    dir: &Path,
    nodes: &[&Node],
    cookie: &str,
    config: Value,
    stop: Value,
    flags: &[&str],
) -> Proc {
    let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    let mut command = Command::new(RLX);
    command.args(["train", "--run", run, "--env", env, "--seed", "1", "--cookie", cookie]);
    command.args(["--nodes", &addrs.join(","), "--config", &config.to_string(), "--stop", &stop.to_string()]);
    command.arg("--results-dir").arg(dir.join("results")).args(flags);
    Proc::spawn(&mut command, dir.join("driver.log"))
}

/// Every line of the run's `result.json` (empty until the first iteration).
fn results(dir: &Path) -> Vec<Value> {
    let Ok(mut runs) = std::fs::read_dir(dir.join("results")) else { return Vec::new() };
    let Some(Ok(run)) = runs.next() else { return Vec::new() };
    let text = std::fs::read_to_string(run.path().join("result.json")).unwrap_or_default();
    // A line being written may be incomplete: keep whole lines only.
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// A process's resident memory in KiB (Linux; 0 elsewhere).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn mean_return(r: &Value) -> f64 {
    r["episode_reward_mean"].as_f64().unwrap_or(0.0)
}

const PPO_STOP: fn() -> Value = || json!({"episode_reward_mean": THRESHOLD, "timesteps_total": 300_000});

#[test]
fn ppo_learns_with_evaluators_on_two_nodes() {
    let dir = tmp("two-nodes");
    let (a, b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    let mut driver = train(&dir, &[&a, &b], COOKIE, json!({"num_workers": 4}), PPO_STOP());
    let status = driver.wait(Duration::from_secs(240));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let last = results(&dir).pop().expect("results");
    assert!(mean_return(&last) >= THRESHOLD, "{last}\n{}", driver.log());
    assert_eq!(last["num_evaluator_restarts"], 0);
    // Round-robin: evaluators 1 and 3 on one node, 2 and 4 on the other.
    for node in [&a, &b] {
        assert_eq!(node.proc.log().matches("started evaluator").count(), 2, "{}", node.proc.log());
    }
}

/// DreamerV3's evaluators carry the world model's recurrent state from
/// step to step; on nodes they do so in the node's process, and the
/// driver's replay stitches their episodes. A tiny model on CartPole: the
/// env steps all arrive, the updates follow them, and the world model's
/// prediction loss falls.
#[test]
fn dreamer_v3_learns_its_world_model_from_evaluators_on_two_nodes() {
    let dir = tmp("dreamer-nodes");
    let (a, b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    let config = json!({"num_workers": 2, "model_size": "nano", "batch_size_B": 4, "batch_length_T": 16,
        "horizon_H": 5, "training_ratio": 16, "learning_starts": 200, "timesteps_per_iteration": 200,
        "world_model_lr": 0.003});
    let stop = json!({"timesteps_total": 1800});
    let mut driver = train_on(("DreamerV3", "CartPole-v1"), &dir, &[&a, &b], COOKIE, config, stop, &[]);
    let status = driver.wait(Duration::from_secs(300));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let lines = results(&dir);
    let last = lines.last().expect("results");
    assert!(last["timesteps_total"].as_u64().is_some_and(|t| t >= 1800), "{last}");
    assert_eq!(last["num_evaluator_restarts"], 0);
    // 16 replayed rows per env step after the first 200: about 100 updates
    // of 64 rows per 400 steps.
    let updates: f64 = lines.iter().map(|l| l["learner"]["num_updates"].as_f64().unwrap_or(0.0)).sum();
    assert!(updates >= 350.0, "{updates} updates");
    let loss = |l: &Value| {
        let l = &l["learner"];
        Some(l["decoder_loss"].as_f64()? + l["reward_loss"].as_f64()? + l["continue_loss"].as_f64()?)
    };
    let losses: Vec<f64> = lines.iter().filter_map(loss).collect();
    let (first, final_loss) = (losses[0], *losses.last().unwrap());
    assert!(final_loss < 0.5 * first, "prediction loss {first} -> {final_loss}: {losses:?}");
    for node in [&a, &b] {
        assert_eq!(node.proc.log().matches("started evaluator").count(), 1, "{}", node.proc.log());
    }
}

/// AlphaZero's self-play evaluators on two nodes, each splitting its games
/// over two search threads: every iteration's 32 games arrive from the
/// nodes, one position a move, and the network learns from them: alone,
/// without search, it beats random play on TicTacToe.
#[test]
fn alpha_zero_learns_tic_tac_toe_from_self_play_on_two_nodes() {
    let dir = tmp("alpha-zero-nodes");
    let (a, b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    let config = json!({"num_workers": 2, "num_search_workers": 2, "games_per_iteration": 32, "games_in_flight": 8,
        "num_simulations": 100, "temperature_moves": 9, "train_batch_size": 128, "num_sgd_steps": 20, "lr": 0.002,
        "replay_capacity": 20000, "model": {"fcnet_hiddens": [64, 64]}, "arena_interval": 50, "arena_games": 200,
        "arena_opponents": ["random"]});
    let stop = json!({"training_iteration": 100});
    let mut driver = train_on(("AlphaZero", "TicTacToe"), &dir, &[&a, &b], COOKIE, config, stop, &[]);
    let status = driver.wait(Duration::from_secs(300));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let lines = results(&dir);
    assert_eq!(lines.len(), 100);
    for line in &lines {
        assert_eq!(line["episodes_this_iter"], 32, "{line}");
        let moves = line["timesteps_this_iter"].as_u64().unwrap();
        assert!((32 * 5..=32 * 9).contains(&moves), "32 games of 5 to 9 moves: {line}");
        assert_eq!(line["cluster"]["evaluators_on_nodes"], 2, "{line}");
        assert_eq!(line["num_evaluator_restarts"], 0);
    }
    let alone = |line: &Value| line["evaluation"]["arena"]["random"]["without_search"]["win"].as_f64().unwrap();
    let (first, last) = (alone(&lines[49]), alone(&lines[99]));
    // Random play against random play wins about 44 % (both seats).
    assert!(last >= 0.75, "the network alone against random play: {first} after 50 iterations, {last} after 100");
    for node in [&a, &b] {
        assert_eq!(node.proc.log().matches("started evaluator").count(), 1, "{}", node.proc.log());
    }
}

/// `kill -9` of one of three nodes hosting AlphaZero's self-play: the lost
/// evaluator is placed again and plays its share again, so every
/// iteration, the one across the loss too, has all its 30 games.
#[test]
fn killing_a_node_mid_alpha_zero_run_loses_no_game() {
    let dir = tmp("kill-node-alpha-zero");
    let nodes = [Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE), Node::start(&dir, "c", COOKIE)];
    let config = json!({"num_workers": 3, "games_per_iteration": 30, "games_in_flight": 10, "num_simulations": 100,
        "num_sgd_steps": 5, "arena_interval": 0});
    let addrs = nodes.iter().collect::<Vec<_>>();
    let stop = json!({"training_iteration": 150});
    let mut driver = train_on(("AlphaZero", "TicTacToe"), &dir, &addrs, COOKIE, config, stop, &[]);
    let [a, b, c] = nodes;
    let results = kill_mid_run(&dir, &mut driver, c.proc);
    assert_eq!(results.len(), 150);
    for line in &results {
        assert_eq!(line["episodes_this_iter"], 30, "{line}");
        let moves = line["timesteps_this_iter"].as_u64().unwrap();
        assert!((30 * 5..=30 * 9).contains(&moves), "30 games of 5 to 9 moves: {line}");
    }
    let last = results.last().unwrap();
    assert_eq!(last["num_evaluator_restarts"], 1, "{last}");
    let failures = last["evaluator_failures"].to_string();
    assert!(
        failures.contains(&format!("node {} lost", c.addr)) && failures.contains("evaluator 3 re-placed"),
        "{failures}"
    );
    assert_eq!(last["cluster"]["evaluators_on_nodes"], 3, "{last}");
    let started = a.proc.log().matches("started evaluator").count() + b.proc.log().matches("started evaluator").count();
    assert_eq!(started, 2 + 1);
}

#[test]
fn killing_a_node_mid_run_loses_no_finished_iteration() {
    let dir = tmp("kill-node");
    let nodes = [Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE), Node::start(&dir, "c", COOKIE)];
    let mut driver = train(&dir, &nodes.iter().collect::<Vec<_>>(), COOKIE, json!({"num_workers": 6}), PPO_STOP());
    // Let a few iterations finish with evaluators on all three nodes.
    let [a, b, c] = nodes;
    let results = kill_mid_run(&dir, &mut driver, c.proc);
    let last = results.last().unwrap();
    assert!(mean_return(last) >= THRESHOLD, "{last}");
    // Node c hosted evaluators 3 and 6: both were re-placed, and the result says so.
    assert_eq!(last["num_evaluator_restarts"], 2, "{last}");
    let failures = last["evaluator_failures"].to_string();
    assert!(failures.contains(&format!("node {} lost", c.addr)), "{failures}");
    assert!(failures.contains("evaluator 3 re-placed") && failures.contains("evaluator 6 re-placed"), "{failures}");
    // On the surviving nodes.
    let started = a.proc.log().matches("started evaluator").count() + b.proc.log().matches("started evaluator").count();
    assert_eq!(started, 4 + 2);
}

/// The same with a multi-agent run: two agents under two PPO policies, six
/// evaluators on three nodes. Both policies learn to the single-agent
/// threshold through the loss of a node, every iteration is recorded, and
/// each one's per-policy returns with it.
#[test]
fn killing_a_node_mid_multi_agent_run_loses_no_finished_iteration() {
    let dir = tmp("kill-node-multi-agent");
    let nodes = [Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE), Node::start(&dir, "c", COOKIE)];
    let config = json!({"num_workers": 6, "multiagent": {"policy_mapping": "p{i}"}});
    // Both agents balance: the sum over the two reaches 900 (so neither is
    // below 400 for long).
    let stop = json!({"episode_reward_mean": 900.0, "timesteps_total": 800_000});
    let addrs = nodes.iter().collect::<Vec<_>>();
    let mut driver = train_on(("PPO", "MultiAgentCartPole"), &dir, &addrs, COOKIE, config, stop, &[]);
    let [_a, _b, c] = nodes;
    let results = kill_mid_run(&dir, &mut driver, c.proc);
    assert!(results.iter().all(|r| r["policy_reward_mean"].as_object().is_some_and(|p| p.len() == 2)));
    let last = results.last().unwrap();
    for policy in ["p0", "p1"] {
        let mean = last["policy_reward_mean"][policy].as_f64().unwrap_or(0.0);
        assert!(mean >= 300.0, "{policy}: {last}");
    }
    assert_eq!(last["num_evaluator_restarts"], 2, "{last}");
    assert!(last["evaluator_failures"].to_string().contains(&format!("node {} lost", c.addr)), "{last}");
}

/// Lets a few iterations finish with evaluators on every node, SIGKILLs
/// `node`, waits for the run to finish, and returns its results after
/// checking that every finished iteration is there, in order.
fn kill_mid_run(dir: &Path, driver: &mut Proc, mut node: Proc) -> Vec<Value> {
    wait_for_iterations(dir, driver, 3);
    node.child.kill().unwrap(); // SIGKILL
    node.child.wait().unwrap();
    let status = driver.wait(Duration::from_secs(240));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let results = results(dir);
    let iterations: Vec<u64> = results.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=results.len() as u64).collect::<Vec<_>>());
    results
}

/// `kill -9` of the driver mid-run: the node it used neither dies (a
/// write to the dead driver's socket once killed `rlx` by SIGPIPE) nor
/// stays bound to it: a second driver trains on the same node, to its
/// stop, and the first run's finished iterations are all on disk.
#[test]
fn a_node_outlives_its_killed_driver_and_serves_the_next() {
    let dir = tmp("driver-killed");
    let mut node = Node::start(&dir, "a", COOKIE);
    let first = dir.join("first");
    std::fs::create_dir_all(&first).unwrap();
    let mut driver =
        train(&first, &[&node], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 1_000_000}));
    wait_for_iterations(&first, &mut driver, 2);
    driver.child.kill().unwrap(); // SIGKILL
    driver.child.wait().unwrap();
    let finished = results(&first);
    let iterations: Vec<u64> = finished.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=finished.len() as u64).collect::<Vec<_>>(), "every finished iteration is whole");
    // The node notices the lost driver and goes on serving.
    std::thread::sleep(Duration::from_secs(2));
    assert!(node.proc.child.try_wait().unwrap().is_none(), "the node died with its driver:\n{}", node.proc.log());
    let second = dir.join("second");
    std::fs::create_dir_all(&second).unwrap();
    let mut driver = train(&second, &[&node], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 3}));
    let status = driver.wait(Duration::from_secs(120));
    assert!(status.success(), "second driver failed:\n{}\nnode:\n{}", driver.log(), node.proc.log());
    assert_eq!(results(&second).len(), 3);
    assert!(node.proc.child.try_wait().unwrap().is_none(), "node log:\n{}", node.proc.log());
    node.proc.child.kill().unwrap();
}

/// Sends `signal` (e.g. `"-STOP"`) to a child.
fn signal(proc: &Proc, signal: &str) {
    let status = Command::new("kill").args([signal, &proc.child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal} failed");
}

/// Waits until at least `n` iterations are in `result.json`.
fn wait_for_iterations(dir: &Path, driver: &mut Proc, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while results(dir).len() < n {
        assert!(Instant::now() < deadline, "no progress:\n{}", driver.log());
        assert!(driver.child.try_wait().unwrap().is_none(), "driver exited early:\n{}", driver.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hung_node_is_noticed_by_its_heartbeat_and_its_evaluators_move() {
    let dir = tmp("hung-node");
    let (a, b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    // Requests time out only after 120 s: within the test's wait, only the
    // heartbeat (every 0.2 s, lost after 2 s of silence) can free the run.
    let config = json!({"num_workers": 4, "cluster": {"heartbeat_s": 0.2, "node_timeout_s": 2.0}});
    let mut driver = train(&dir, &[&a, &b], COOKIE, config, json!({"training_iteration": 8}));
    wait_for_iterations(&dir, &mut driver, 2);
    // SIGSTOP: the node hangs with its connection open, so no session ends.
    signal(&b.proc, "-STOP");
    let status = driver.wait(Duration::from_secs(60));
    signal(&b.proc, "-CONT");
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let results = results(&dir);
    let iterations: Vec<u64> = results.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=8).collect::<Vec<_>>());
    let failures = results.last().unwrap()["evaluator_failures"].to_string();
    assert!(failures.contains(&format!("node {} lost: no heartbeat reply within 2s", b.addr)), "{failures}");
    assert!(failures.contains("evaluator 2 re-placed") && failures.contains("evaluator 4 re-placed"), "{failures}");
    assert_eq!(a.proc.log().matches("started evaluator").count(), 2 + 2, "{}", a.proc.log());
    // The driver closed its session with b, so b, once it wakes, stops the
    // evaluators it was keeping for that driver.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !b.proc.log().contains("driver left; stopping its evaluators") {
        assert!(Instant::now() < deadline, "node b kept its evaluators:\n{}", b.proc.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn losing_more_nodes_than_the_node_budget_allows_fails_the_run_clearly() {
    let dir = tmp("node-budget");
    let (a, mut b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    let config = json!({"num_workers": 2, "cluster": {"node_restart": {"max_restarts": 0, "window_s": 600}}});
    let mut driver = train(&dir, &[&a, &b], COOKIE, config, json!({"training_iteration": 50}));
    wait_for_iterations(&dir, &mut driver, 2);
    b.proc.child.kill().unwrap();
    b.proc.child.wait().unwrap();
    let status = driver.wait(Duration::from_secs(60));
    assert!(!status.success(), "the run should stop past the node budget:\n{}", driver.log());
    let log = driver.log();
    assert!(log.contains("at most 0 restarts allowed") && log.contains(&format!("node {} lost", b.addr)), "{log}");
    // The iterations finished before the loss are kept.
    assert!(results(&dir).len() >= 2);
}

#[test]
fn a_node_with_another_cookie_is_refused_and_the_driver_carries_on() {
    let dir = tmp("cookie");
    let (good, bad) = (Node::start(&dir, "good", COOKIE), Node::start(&dir, "bad", "another-cookie"));
    let mut driver = train(&dir, &[&good, &bad], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 3}));
    assert!(driver.wait(Duration::from_secs(120)).success(), "{}", driver.log());
    let log = driver.log();
    assert!(log.contains(&format!("node {} refused", bad.addr)) && log.contains("wrong cookie"), "{log}");
    assert_eq!(results(&dir).len(), 3);
    assert_eq!(good.proc.log().matches("started evaluator").count(), 2);
    assert!(bad.proc.log().contains("wrong cookie"), "{}", bad.proc.log());

    // With only the refused node there is nothing to run on: a clear error.
    let dir = tmp("cookie-only");
    let mut driver = train(&dir, &[&bad], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 3}));
    assert!(!driver.wait(Duration::from_secs(60)).success());
    let log = driver.log();
    assert!(log.contains("error: none of the nodes could be used") && log.contains("wrong cookie"), "{log}");
}

/// Attacks on a node by peers without the cookie, while a driver trains on
/// it. None of them touches the run: no evaluator is stopped, restarted or
/// re-placed, and the iterations go on.
/// - An impostor claims the running driver's name and hangs up at the
///   challenge, four times. (The node used to take the impostor's leaving
///   for the driver's and stop the driver's evaluators.)
/// - 100 connections each send half a length prefix and hold: the node
///   closes each within its handshake timeout (5 s), and those past its
///   limit of 16 connections in the handshake per address at once.
/// - 100 connections each send a frame that claims 200 MiB and then try to
///   send its body: the node reads at most 69 bytes of each before the
///   admission handshake refuses it, and its resident memory grows by less
///   than 32 MiB.
/// - 1,000 admission handshakes with a wrong cookie, as fast as they go:
///   past 20 failures in 10 s the address is refused as it connects, and
///   the node's log stays short.
#[test]
fn peers_without_the_cookie_cannot_touch_a_running_driver() {
    let dir = tmp("attacks");
    let node = Node::start(&dir, "a", COOKIE);
    let mut driver = train(&dir, &[&node], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 1_000_000}));
    wait_for_iterations(&dir, &mut driver, 2);
    let log = node.proc.log();
    let (name, host) = log
        .split("driver=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|full| full.split_once('@'))
        .map(|(name, host)| (name.to_string(), host.to_string()))
        .unwrap_or_else(|| panic!("the node logs the driver's name, NAME@HOST:\n{log}"));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..4 {
            let impostor = ractor_cluster::NodeServer::new(
                0,
                "not-the-cookie".into(),
                name.clone(),
                host.clone(),
                None,
                Some(ractor_cluster::node::NodeConnectionMode::Isolated),
            );
            let (server, handle) = ractor::Actor::spawn(None, impostor, ()).await.unwrap();
            let addr: std::net::SocketAddr = node.addr.parse().unwrap();
            let _ = tokio::time::timeout(Duration::from_secs(5), ractor_cluster::client_connect(&server, addr)).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            server.stop(None);
            let _ = handle.await;
        }
    });
    let before = results(&dir).len();

    let held: Vec<std::net::TcpStream> = (0..100)
        .map(|_| {
            let mut peer = std::net::TcpStream::connect(&node.addr).unwrap();
            peer.write_all(&[0, 0, 0]).unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            peer
        })
        .collect();
    let started = Instant::now();
    for mut peer in held {
        // The node sends its 37-byte challenge, then closes: end of file,
        // or a reset (not our read timeout).
        let mut buf = [0u8; 64];
        let closed = loop {
            match std::io::Read::read(&mut peer, &mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) => break !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            }
        };
        assert!(closed, "a half-sent handshake was held open");
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(9), "closed after {waited:?}");
    }

    // 100 connections, each a frame header claiming 200 MiB and its body.
    let pid = node.proc.child.id();
    let rss_before = rss_kib(pid);
    let (sent, peak) = runtime.block_on(async {
        let addr = node.addr.clone();
        let senders = (0..100).map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let Ok(mut peer) = tokio::net::TcpStream::connect(&addr).await else { return 0 };
                let chunk = vec![7u8; 1 << 20];
                let mut sent = 0usize;
                if peer.write_all(&(200u64 << 20).to_be_bytes()).await.is_err() {
                    return sent;
                }
                while sent < 200 << 20 {
                    match tokio::time::timeout(Duration::from_secs(2), peer.write_all(&chunk)).await {
                        Ok(Ok(())) => sent += chunk.len(),
                        _ => break,
                    }
                }
                sent
            })
        });
        let watch = async {
            let mut peak = 0;
            for _ in 0..100 {
                peak = peak.max(rss_kib(pid));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            peak
        };
        let (sent, peak) = tokio::join!(futures::future::join_all(senders), watch);
        (sent.into_iter().map(|s| s.unwrap_or(0)).sum::<usize>(), peak)
    });
    eprintln!(
        "200 MiB frame bodies: {} MiB accepted by the kernel in all; node RSS {rss_before} KiB before, peak {peak} KiB",
        sent >> 20
    );
    assert!(peak < rss_before + 32 * 1024, "node RSS rose from {rss_before} KiB to {peak} KiB");

    // Then 1,000 admission handshakes with a wrong cookie, as fast as they
    // go: past 20 failures in 10 s the address is refused at accept, and
    // the node's log grows by a line a second at most.
    let log_lines = node.proc.log().lines().count();
    let (burst, admitted) = runtime.block_on(async {
        let guess = rlx_cluster::admission::Admission::new("a-guess");
        let started = Instant::now();
        let mut admitted = 0;
        for _ in 0..1000 {
            let Ok(mut peer) = tokio::net::TcpStream::connect(&node.addr).await else { continue };
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), guess.join(&mut peer)).await {
                admitted += 1;
            }
        }
        (started.elapsed(), admitted)
    });
    eprintln!("1,000 wrong-cookie handshakes in {burst:?}");
    assert_eq!(admitted, 0, "a wrong cookie was admitted");
    let added = node.proc.log().lines().count() - log_lines;
    let bound = 4 + 2 * burst.as_secs() as usize;
    assert!(added <= bound, "{added} log lines for the burst (bound {bound}):\n{}", node.proc.log());
    assert!(node.proc.log().contains("too many failed handshakes"), "{}", node.proc.log());

    wait_for_iterations(&dir, &mut driver, before + 3);
    let log = node.proc.log();
    assert!(!log.contains("driver left"), "{log}");
    assert_eq!(log.matches("started evaluator").count(), 2, "{log}");
    let last = results(&dir).pop().unwrap();
    assert_eq!(last["num_evaluator_restarts"], 0, "{last}");
    assert_eq!(last["evaluator_failures"], serde_json::json!([]), "nothing failed: {last}");
}

#[test]
fn a_peer_sending_malformed_frames_is_dropped_and_the_node_carries_on() {
    let dir = tmp("garbage");
    let node = Node::start(&dir, "a", COOKIE);
    let frames: [&[u8]; 3] = [
        // A length prefix of 2^64 - 1 bytes.
        &[0xff; 16],
        // A small frame that is not a protobuf message.
        &[0, 0, 0, 0, 0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef],
        // Not even a whole length prefix, then EOF.
        &[0, 0, 1],
    ];
    for frame in frames {
        let mut peer = std::net::TcpStream::connect(&node.addr).unwrap();
        peer.write_all(frame).unwrap();
        drop(peer);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut driver = train(&dir, &[&node], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 2}));
    assert!(driver.wait(Duration::from_secs(120)).success(), "{}\nnode:\n{}", driver.log(), node.proc.log());
    assert_eq!(results(&dir).len(), 2);
}

#[test]
fn a_batch_larger_than_ractor_clusters_default_frame_limit_arrives() {
    let dir = tmp("large");
    let node = Node::start(&dir, "a", COOKIE);
    // One evaluator returns the whole 400,000-row batch in one reply
    // (over 16 MiB encoded); one cheap SGD pass over it.
    let config = json!({"num_workers": 1, "num_envs_per_worker": 64, "train_batch_size": 400_000,
                        "sgd_minibatch_size": 65_536, "num_sgd_iter": 1});
    let mut driver = train(&dir, &[&node], COOKIE, config, json!({"training_iteration": 1}));
    assert!(
        driver.wait(Duration::from_secs(180)).success(),
        "{}
node:
{}",
        driver.log(),
        node.proc.log()
    );
    assert!(results(&dir)[0]["timesteps_total"].as_u64().unwrap() >= 400_000);
    assert!(node.proc.log().contains("large reply"), "{}", node.proc.log());
}

/// Two nodes serve mutual TLS with a test CA; a driver with the CA and its
/// certificate trains PPO on them. A plaintext client with the right
/// cookie is refused, and so is a driver without a certificate.
#[test]
fn over_tls_a_driver_trains_and_plaintext_is_refused() {
    let dir = tmp("tls");
    let [ca, node_cert, node_key, driver_cert, driver_key] = common::test_pki(&dir);
    let node_flags = ["--tls-cert", &node_cert, "--tls-key", &node_key, "--tls-client-ca", &ca];
    let (a, b) = (Node::start_with(&dir, "a", COOKIE, &node_flags), Node::start_with(&dir, "b", COOKIE, &node_flags));
    let driver_flags = ["--tls-ca", &ca, "--tls-cert", &driver_cert, "--tls-key", &driver_key];
    let stop = json!({"training_iteration": 3});
    let mut driver = train_with(&dir, &[&a, &b], COOKIE, json!({"num_workers": 2}), stop, &driver_flags);
    assert!(driver.wait(Duration::from_secs(120)).success(), "{}", driver.log());
    assert_eq!(results(&dir).len(), 3);
    for node in [&a, &b] {
        assert_eq!(node.proc.log().matches("started evaluator").count(), 1, "{}", node.proc.log());
    }

    // The right cookie in plaintext: the node wants a TLS handshake first.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let plaintext = runtime.block_on(async {
        let mut peer = tokio::net::TcpStream::connect(&a.addr).await.unwrap();
        let admission = rlx_cluster::admission::Admission::new(COOKIE);
        tokio::time::timeout(Duration::from_secs(10), admission.join(&mut peer)).await
    });
    // It waits for a challenge the node never sends in plaintext, and the
    // node closes it at its handshake timeout.
    assert!(matches!(plaintext, Ok(Err(_))), "a plaintext client was not refused: {plaintext:?}");
    // The node writes its line just after it closes the connection.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !a.proc.log().contains("no handshake within") {
        assert!(Instant::now() < deadline, "no refusal logged:\n{}", a.proc.log());
        std::thread::sleep(Duration::from_millis(20));
    }

    // Without a client certificate the nodes refuse the driver.
    let dir2 = tmp("tls-no-cert");
    let mut driver = train_with(
        &dir2,
        &[&a, &b],
        COOKIE,
        json!({"num_workers": 2}),
        json!({"training_iteration": 3}),
        &["--tls-ca", &ca],
    );
    assert!(!driver.wait(Duration::from_secs(60)).success());
    assert!(driver.log().contains("none of the nodes could be used"), "{}", driver.log());
}

/// Builds PPO in this process with its evaluators on `node`, with `extra`
/// config keys.
async fn driver_on(node: &Node, extra: Value) -> rlx::Trainer {
    let mut config = json!({"num_workers": 2, "seed": 1, "train_batch_size": 1000, "sgd_minibatch_size": 250});
    rlx::config::deep_merge(&mut config, &extra);
    let deployment =
        Deployment { nodes: vec![node.addr.clone()], cookie: Some(COOKIE.into()), actix: false, ..Default::default() };
    let make_env = rlx_algorithms::env_maker("CartPole-v1", &Value::Null).unwrap();
    deploy::build_on_nodes("PPO", "CartPole-v1", make_env, &config, &deployment).await.unwrap().0
}

/// One test for both cases: a process holds one cluster connection at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_panics_in_remote_evaluators_are_restarted_within_budget_and_reported_past_it() {
    let dir = tmp("panic");
    // One panic on the node (at its 3000th env step): restarted there, training goes on.
    {
        let node = Node::start_faulty(&dir, "once", "3000");
        let mut trainer = driver_on(&node, Value::Null).await;
        let mut last = None;
        for _ in 0..6 {
            last = Some(trainer.train().await.unwrap_or_else(|e| panic!("{e}\nnode:\n{}", node.proc.log())));
        }
        let last = last.unwrap();
        assert_eq!(last.num_evaluator_restarts, 1, "{last:?}");
        assert_eq!(last.training_iteration, 6);
    }
    // The same panic under env shards, the level below the evaluator on
    // the node: the node restarts the shard, the evaluator carries on, and
    // one step of the shard's copies is lost.
    {
        let node = Node::start_faulty(&dir, "sharded", "3000");
        let mut trainer = driver_on(&node, json!({"num_envs_per_worker": 4, "env_shards": {"num_shards": 2}})).await;
        let mut last = None;
        for _ in 0..6 {
            last = Some(trainer.train().await.unwrap_or_else(|e| panic!("{e}\nnode:\n{}", node.proc.log())));
        }
        let last = last.unwrap();
        assert_eq!(last.num_evaluator_restarts, 0, "{last:?}");
        assert_eq!(last.learner.get("env_shard_restarts"), Some(1.0), "{last:?}");
        assert_eq!(last.num_env_steps_trained, 6 * 1000 - 2, "{last:?}");
        assert!(node.proc.log().contains("env shard was restarted"), "{}", node.proc.log());
    }
    // A panic every 50 steps: past the default budget (3 restarts in 60 s)
    // the driver's error names the evaluator, the budget and the panic.
    let node = Node::start_faulty(&dir, "always", "always");
    let mut trainer = driver_on(&node, Value::Null).await;
    let err = loop {
        match trainer.train().await {
            Ok(r) => assert!(r.training_iteration < 20, "never failed"),
            Err(e) => break e,
        }
    };
    match &err {
        OptimizerError::Evaluator(HandleError::RestartBudgetExceeded { max_restarts: 3, last_failure, .. }) => {
            assert!(last_failure.contains("simulator crashed"), "{err}");
            assert!(last_failure.contains(&node.addr), "{err}");
        }
        other => panic!("expected the restart budget error, got {other}"),
    }
}

// ---------------------------------------------------------------------------
// Membership: lost nodes come back, evaluators move back out.

/// Waits until the newest result's `cluster` object satisfies `ready`
/// (at most 90 s) and returns that result.
fn wait_for_cluster(dir: &Path, driver: &mut Proc, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait_for_cluster_after(dir, driver, what, 0, ready)
}

/// [`wait_for_cluster`] for a result past iteration `after` (a restored
/// run's `result.json` starts with the history it carried over).
fn wait_for_cluster_after(
    dir: &Path,
    driver: &mut Proc,
    what: &str,
    after: u64,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let newer = |r: &Value| r["training_iteration"].as_u64().is_some_and(|i| i > after) && ready(&r["cluster"]);
        if let Some(last) = results(dir).pop().filter(newer) {
            return last;
        }
        assert!(driver.child.try_wait().unwrap().is_none(), "driver exited early:\n{}", driver.log());
        assert!(Instant::now() < deadline, "{what}: not within 90 s; last result {:?}", results(dir).pop());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGKILLs the driver and checks that every iteration it finished is in
/// `result.json`, in order, none twice; returns them.
fn stop_and_check_iterations(dir: &Path, mut driver: Proc) -> Vec<Value> {
    driver.child.kill().unwrap();
    driver.child.wait().unwrap();
    let results = results(dir);
    let iterations: Vec<u64> = results.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=results.len() as u64).collect::<Vec<_>>(), "an iteration was lost or repeated");
    results
}

/// Fast detection and re-dialling, for tests that lose nodes on purpose
/// (a node silent for 5 s is lost: long enough that a busy 2-core machine
/// does not lose one by accident).
fn quick_membership(num_workers: usize) -> Value {
    json!({"num_workers": num_workers, "cluster": {"heartbeat_s": 0.2, "node_timeout_s": 5.0, "redial_max_s": 1.0}})
}

/// Waits (at most 30 s) until `proc`'s log contains `text`.
fn wait_for_log(proc: &Proc, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proc.log().contains(text) {
        assert!(Instant::now() < deadline, "no `{text}` in the log:\n{}", proc.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both nodes killed one after the other, then started again at their
/// addresses: the driver re-dials them, admits them again, and moves the
/// evaluators that fell back into its own process out to them, then
/// spreads them over both. No iteration is lost, and a move is no restart.
#[test]
fn killed_nodes_started_again_are_admitted_and_evaluators_move_back_out() {
    let dir = tmp("readmit");
    let (mut a, mut b) = (Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE));
    let (a_addr, b_addr) = (a.addr.clone(), b.addr.clone());
    let mut driver = train(&dir, &[&a, &b], COOKIE, quick_membership(4), json!({"training_iteration": 1_000_000}));
    wait_for_cluster(&dir, &mut driver, "two evaluators on each node", |c| {
        c["nodes_alive"] == 2 && c["evaluators_on_nodes"] == 4 && c["evaluators_local"] == 0
    });
    b.proc.child.kill().unwrap();
    b.proc.child.wait().unwrap();
    wait_for_cluster(&dir, &mut driver, "four evaluators on a", |c| {
        c["nodes_alive"] == 1 && c["evaluators_on_nodes"] == 4
    });
    a.proc.child.kill().unwrap();
    a.proc.child.wait().unwrap();
    let alone = wait_for_cluster(&dir, &mut driver, "four evaluators in the driver", |c| {
        c["nodes_alive"] == 0 && c["evaluators_local"] == 4 && c["nodes_lost"] == 2
    });
    assert_eq!(alone["num_evaluator_restarts"], 2 + 4, "{alone}");
    a = Node::start_at(&dir, "a", &a_addr, COOKIE, &[], None);
    let out = wait_for_cluster(&dir, &mut driver, "evaluators out of the driver, on a", |c| {
        c["readmissions"] == 1 && c["evaluators_on_nodes"] == 4 && c["evaluators_local"] == 0
    });
    assert!(out["cluster"]["moves"].as_u64().unwrap() >= 4, "{out}");
    b = Node::start_at(&dir, "b", &b_addr, COOKIE, &[], None);
    let spread = wait_for_cluster(&dir, &mut driver, "two evaluators on each node again", |c| {
        c["readmissions"] == 2 && c["nodes_alive"] == 2 && c["evaluators_on_nodes"] == 4 && c["moves"] == 6
    });
    assert_eq!(b.proc.log().matches("started evaluator").count(), 2, "{}", b.proc.log());
    assert_eq!(a.proc.log().matches("started evaluator").count(), 4, "{}", a.proc.log());
    let cluster = &spread["cluster"];
    assert!(cluster["seconds_below_target"].as_f64().unwrap() > 0.0, "{cluster}");
    let log = driver.log();
    assert!(log.contains(&format!("node {a_addr} admitted again")), "{log}");
    assert!(log.contains("cluster: 2/2 nodes alive, 4 of 4 evaluators on nodes, 0 in the driver"), "{log}");
    let results = stop_and_check_iterations(&dir, driver);
    // Moves are not restarts: only the six re-placements after the losses.
    assert_eq!(results.last().unwrap()["num_evaluator_restarts"], 6);
}

/// A host at another address: a network namespace joined to this one by
/// a veth pair, with a private /30 between them. Deleted on drop (with
/// its end of the pair); the test kills the processes inside first.
struct Netns {
    name: String,
    host_link: String,
    /// The namespace's address.
    ip: String,
    link: String,
}

impl Netns {
    /// A new namespace, or `None` (with the reason printed) where none can
    /// be made here. With `RLX_REQUIRE_NETNS=1`, as in CI, that is a failure.
    fn create() -> Option<Self> {
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = std::process::id();
        let net = format!("10.{}.{}.{}", 100 + k % 100, (id >> 6) & 255, (id & 63) * 4);
        let ip = |last: u32| {
            let (prefix, base) = net.rsplit_once('.').unwrap();
            format!("{prefix}.{}", base.parse::<u32>().unwrap() + last)
        };
        let ns = Self {
            name: format!("rlx-test-{id}-{k}"),
            host_link: format!("rh{id}-{k}"),
            ip: ip(2),
            link: format!("rn{id}-{k}"),
        };
        let steps: [&[&str]; 8] = [
            &["netns", "add", &ns.name],
            &["link", "add", &ns.host_link, "type", "veth", "peer", "name", &ns.link],
            &["link", "set", &ns.link, "netns", &ns.name],
            &["addr", "add", &format!("{}/30", ip(1)), "dev", &ns.host_link],
            &["link", "set", &ns.host_link, "up"],
            &["-n", &ns.name, "addr", "add", &format!("{}/30", ns.ip), "dev", &ns.link],
            &["-n", &ns.name, "link", "set", &ns.link, "up"],
            // A node's ractor_cluster listener binds 127.0.0.1.
            &["-n", &ns.name, "link", "set", "lo", "up"],
        ];
        for step in steps {
            let out = Command::new("ip").args(step).output();
            let failed = match out {
                Ok(o) if o.status.success() => continue,
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => format!("cannot run `ip`: {e}"),
            };
            let reason = format!("cannot make a network namespace (`ip {}`: {failed})", step.join(" "));
            assert!(std::env::var("RLX_REQUIRE_NETNS").as_deref() != Ok("1"), "RLX_REQUIRE_NETNS=1: {reason}");
            eprintln!("skipped: {reason}");
            return None;
        }
        Some(ns)
    }

    /// `program` run inside the namespace (`ip netns exec` execs it, so
    /// the child's id is the program's).
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name, program]);
        command
    }

    /// Takes the namespace's link down (`up: false`) or up: down, every
    /// packet either way is dropped without a word to either side.
    fn set_link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        let status = Command::new("ip").args(["-n", &self.name, "link", "set", &self.link, state]).status().unwrap();
        assert!(status.success(), "ip link set {state} failed");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host_link]).stderr(Stdio::null()).status();
    }
}

/// A node at another address, cut off by a partition that drops every
/// packet both ways (its link down) and then heals. The heartbeat finds
/// it lost, its evaluators move to the other node, and once the link is
/// up the driver admits it again in a new session and moves evaluators
/// back; the node stops those of the old session. No iteration is lost
/// and no evaluator runs twice.
#[test]
fn a_partitioned_node_is_used_again_after_the_partition_heals() {
    let dir = tmp("partition");
    let Some(ns) = Netns::create() else { return };
    let far = Node::start_at(&dir, "far", &format!("{}:0", ns.ip), COOKIE, &[], Some(&ns));
    let near = Node::start(&dir, "near", COOKIE);
    let mut driver = train(&dir, &[&far, &near], COOKIE, quick_membership(4), json!({"training_iteration": 1_000_000}));
    wait_for_cluster(&dir, &mut driver, "two evaluators on each node", |c| {
        c["evaluators_on_nodes"] == 4 && c["moves"] == 0
    });
    wait_for_iterations(&dir, &mut driver, 3);
    ns.set_link(false);
    let cut = wait_for_cluster(&dir, &mut driver, "the far node lost", |c| {
        c["nodes_alive"] == 1 && c["evaluators_on_nodes"] == 4
    });
    let failures = cut["evaluator_failures"].to_string();
    assert!(failures.contains(&format!("node {} lost: no heartbeat reply within 5s", far.addr)), "{failures}");
    ns.set_link(true);
    let healed = wait_for_cluster(&dir, &mut driver, "the far node used again", |c| {
        c["readmissions"] == 1 && c["nodes_alive"] == 2 && c["evaluators_on_nodes"] == 4 && c["moves"] == 2
    });
    let cluster = &healed["cluster"];
    assert_eq!((cluster["evaluators_target"].as_u64(), cluster["evaluators_local"].as_u64()), (Some(4), Some(0)));
    // Two evaluators in the first session, two moved back in the second,
    // and the first session's stopped.
    let far_log = far.proc.log();
    assert_eq!(far_log.matches("started evaluator").count(), 4, "{far_log}");
    assert!(
        far_log.contains("stopping the evaluators of its earlier session") || far_log.contains("driver left"),
        "{far_log}"
    );
    let results = stop_and_check_iterations(&dir, driver);
    assert_eq!(results.last().unwrap()["num_evaluator_restarts"], 2);
    drop((far, near));
}

/// Slowness is not death: one env step on the node blocks for 8 s, past
/// a 3 s call timeout, while the node answers its heartbeats. Only that
/// evaluator is given up on (stopped there and started again); the node
/// is not lost, its other evaluator stays, and every iteration finishes.
#[test]
fn a_slow_call_on_a_node_that_answers_heartbeats_restarts_one_evaluator_and_keeps_the_node() {
    let dir = tmp("slow-call");
    let node = Node::start_faulty(&dir, "slow", "stall-3000");
    let config =
        json!({"num_workers": 2, "cluster": {"heartbeat_s": 0.2, "node_timeout_s": 10.0, "call_timeout_s": 3.0}});
    let mut driver = train(&dir, &[&node], COOKIE, config, json!({"training_iteration": 6}));
    let status = driver.wait(Duration::from_secs(120));
    assert!(status.success(), "driver failed:\n{}\nnode:\n{}", driver.log(), node.proc.log());
    let results = results(&dir);
    let iterations: Vec<u64> = results.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=6).collect::<Vec<_>>());
    let last = results.last().unwrap();
    let cluster = &last["cluster"];
    assert_eq!((cluster["nodes_lost"].as_u64(), cluster["nodes_alive"].as_u64()), (Some(0), Some(1)), "{last}");
    assert_eq!(cluster["evaluators_on_nodes"], 2, "{last}");
    // One restart for the stall (more only if a plain call took 3 s on a
    // loaded machine; those name the node the same way).
    assert!(last["num_evaluator_restarts"].as_u64() >= Some(1), "{last}");
    let failures = last["evaluator_failures"].to_string();
    assert!(
        failures.contains(&format!("gave no reply within 3s on node {}, which still answers heartbeats", node.addr)),
        "{failures}"
    );
    assert!(!failures.contains("lost"), "{failures}");
}

// ---------------------------------------------------------------------------
// Resources: nodes say what they offer, evaluators what they need.

/// An RLlib experiment file asking one CPU per env runner for 5 runners,
/// on nodes of 1 and 3 CPUs: 1 and 3 evaluators, and the fifth, which fits
/// nowhere, in the driver (`placement_fallback: local`). Each node prints
/// what it offers.
#[test]
fn an_rllib_file_asking_a_cpu_per_env_runner_puts_one_and_three_evaluators_on_one_and_three_cpus() {
    let dir = tmp("cpus");
    let small = Node::start_at(&dir, "small", "127.0.0.1:0", COOKIE, &["--num-cpus", "1"], None);
    let large = Node::start_at(&dir, "large", "127.0.0.1:0", COOKIE, &["--num-cpus", "3"], None);
    wait_for_log(&small.proc, "offering 1 CPUs, 0 GPUs");
    let file = dir.join("cartpole-ppo.yaml");
    let experiment =
        "cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    training_iteration: 3\n  config:\n    \
                      framework: torch\n    num_env_runners: 5\n    num_cpus_per_env_runner: 1\n    placement_fallback: local\n";
    std::fs::write(&file, experiment).unwrap();
    let nodes = format!("{},{}", small.addr, large.addr);
    let mut command = Command::new(RLX);
    command.arg("train").arg("-f").arg(&file).args(["--nodes", &nodes, "--cookie", COOKIE]);
    command.arg("--results-dir").arg(dir.join("results"));
    let mut driver = Proc::spawn(&mut command, dir.join("driver.log"));
    let status = driver.wait(Duration::from_secs(120));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    assert_eq!(small.proc.log().matches("started evaluator").count(), 1, "{}", small.proc.log());
    assert_eq!(large.proc.log().matches("started evaluator").count(), 3, "{}", large.proc.log());
    let last = results(&dir).pop().unwrap();
    let cluster = &last["cluster"];
    assert_eq!((cluster["evaluators_on_nodes"].as_u64(), cluster["evaluators_local"].as_u64()), (Some(4), Some(1)));
    let log = driver.log();
    assert!(log.contains(&format!("node {} offers 1 CPUs, 0 GPUs", small.addr)), "{log}");
}

/// An evaluator asking for a GPU that no node has waits, with one line
/// naming what it needs and what each node offers; with
/// `placement_fallback: local` it runs in the driver instead.
#[test]
fn an_evaluator_asking_for_a_gpu_no_node_has_waits_or_runs_in_the_driver() {
    let dir = tmp("gpu");
    let node = Node::start_at(&dir, "cpu-only", "127.0.0.1:0", COOKIE, &["--num-gpus", "0"], None);
    let waiting = dir.join("waiting");
    std::fs::create_dir_all(&waiting).unwrap();
    let config = json!({"num_workers": 2, "num_gpus_per_worker": 1});
    let mut driver = train(&waiting, &[&node], COOKIE, config, json!({"training_iteration": 2}));
    let deadline = Instant::now() + Duration::from_secs(60);
    let line = format!("evaluator 1 waits for a node with room: it needs 1 GPU; node {} offers", node.addr);
    while !driver.log().contains(&line) {
        assert!(Instant::now() < deadline, "no waiting line:\n{}", driver.log());
        assert!(driver.child.try_wait().unwrap().is_none(), "driver exited:\n{}", driver.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(results(&waiting).is_empty(), "no iteration while the evaluators wait");
    // One line for each of the two evaluators, however long they wait.
    let log = driver.log();
    assert_eq!(log.matches("evaluator 1 waits for a node with room").count(), 1, "{log}");
    assert_eq!(log.matches("waits for a node with room").count(), 2, "{log}");
    assert_eq!(node.proc.log().matches("started evaluator").count(), 0);
    drop(driver);
    let local = dir.join("local");
    std::fs::create_dir_all(&local).unwrap();
    let config = json!({"num_workers": 2, "num_gpus_per_worker": 1, "placement_fallback": "local"});
    let mut driver = train(&local, &[&node], COOKIE, config, json!({"training_iteration": 2}));
    let status = driver.wait(Duration::from_secs(120));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let last = results(&local).pop().unwrap();
    let cluster = &last["cluster"];
    assert_eq!((cluster["evaluators_local"].as_u64(), cluster["evaluators_on_nodes"].as_u64()), (Some(2), Some(0)));
    assert_eq!(node.proc.log().matches("started evaluator").count(), 0);
}

// ---------------------------------------------------------------------------
// Joining: nodes dial a running driver.

/// A port on 127.0.0.1 that was free a moment ago (for a driver's
/// `--node-listen`, which a restored driver must find again).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The only run directory under `dir/results`.
fn run_dir(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir.join("results")).unwrap().next().unwrap().unwrap().path()
}

/// A driver that only listens starts with its evaluators in its own
/// process; a node started with `--join` mid-run gets them (on nodes up,
/// in the driver down). The driver is then killed and restored from its
/// checkpoint at the same address, and the node, which kept dialling,
/// comes back to it on its own. A `--join` that is not HOST:PORT is
/// refused at start.
#[test]
fn a_node_that_joins_mid_run_gets_the_evaluators_and_comes_back_to_a_restored_driver() {
    let dir = tmp("join");
    let out = Command::new(RLX).args(["node", "--join", "driver", "--cookie", COOKIE]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--join `driver` is not HOST:PORT (no port)"), "{stderr}");

    let listen = format!("127.0.0.1:{}", free_port());
    let (first, second) = (dir.join("first"), dir.join("second"));
    let config = json!({"num_workers": 2, "cluster": {"heartbeat_s": 0.2, "node_timeout_s": 2.0}});
    let mut command = Command::new(RLX);
    command.args(["train", "--run", "PPO", "--env", "CartPole-v1", "--seed", "1", "--cookie", COOKIE]);
    command.args(["--node-listen", &listen, "--config", &config.to_string(), "--checkpoint-freq", "1"]);
    command.args(["--stop", &json!({"training_iteration": 1_000_000}).to_string()]);
    command.arg("--results-dir").arg(first.join("results"));
    std::fs::create_dir_all(&first).unwrap();
    let mut driver = Proc::spawn(&mut command, first.join("driver.log"));
    wait_for_cluster(&first, &mut driver, "both evaluators in the driver, no node", |c| {
        c["evaluators_local"] == 2 && c["nodes_known"] == 0
    });
    let node = Node::start_at(&dir, "joiner", "127.0.0.1:0", COOKIE, &["--join", &listen], None);
    wait_for_cluster(&first, &mut driver, "both evaluators on the node that joined", |c| {
        c["nodes_alive"] == 1 && c["nodes_known"] == 1 && c["evaluators_on_nodes"] == 2 && c["evaluators_local"] == 0
    });
    assert!(node.proc.log().contains(&format!("joined the driver at {listen}")), "{}", node.proc.log());
    assert!(driver.log().contains("joined from 127.0.0.1:"), "{}", driver.log());
    assert_eq!(node.proc.log().matches("started evaluator").count(), 2, "{}", node.proc.log());

    let run = run_dir(&first);
    driver.child.kill().unwrap();
    driver.child.wait().unwrap();
    let killed_at = results(&first).pop().unwrap()["training_iteration"].as_u64().unwrap();
    wait_for_log(&node.proc, &format!("the driver at {listen} is gone"));
    std::fs::create_dir_all(&second).unwrap();
    let mut command = Command::new(RLX);
    command.arg("train").arg("--restore").arg(&run).args(["--cookie", COOKIE]);
    command.args(["--stop", &json!({"training_iteration": 1_000_000}).to_string()]);
    command.arg("--results-dir").arg(second.join("results"));
    let mut restored = Proc::spawn(&mut command, second.join("driver.log"));
    wait_for_cluster_after(&second, &mut restored, "the node back with both evaluators", killed_at, |c| {
        c["nodes_alive"] == 1 && c["evaluators_on_nodes"] == 2 && c["evaluators_local"] == 0
    });
    assert_eq!(node.proc.log().matches(&format!("joined the driver at {listen}")).count(), 2, "{}", node.proc.log());
    drop(restored);
}

/// With `--node-listen` and a certificate, the driver serves TLS to the
/// nodes that join: one with `--tls-ca` joins and gets the evaluators; one
/// that dials in plaintext with the right cookie is never admitted.
#[test]
fn nodes_join_over_tls_and_a_plaintext_joiner_is_refused() {
    let dir = tmp("join-tls");
    let [ca, cert, key, ..] = common::test_pki(&dir);
    let listen = format!("127.0.0.1:{}", free_port());
    let config = json!({"num_workers": 2, "cluster": {"heartbeat_s": 0.2, "node_timeout_s": 2.0}});
    let mut command = Command::new(RLX);
    command.args(["train", "--run", "PPO", "--env", "CartPole-v1", "--seed", "1", "--cookie", COOKIE]);
    command.args(["--node-listen", &listen, "--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key]);
    command.args(["--config", &config.to_string(), "--stop", &json!({"training_iteration": 1_000_000}).to_string()]);
    command.arg("--results-dir").arg(dir.join("results"));
    let mut driver = Proc::spawn(&mut command, dir.join("driver.log"));
    let plain = Node::start_at(&dir, "plain", "127.0.0.1:0", COOKIE, &["--join", &listen], None);
    let secure = Node::start_at(&dir, "secure", "127.0.0.1:0", COOKIE, &["--join", &listen, "--tls-ca", &ca], None);
    wait_for_cluster(&dir, &mut driver, "both evaluators on the node that joined over TLS", |c| {
        c["nodes_alive"] == 1 && c["nodes_known"] == 1 && c["evaluators_on_nodes"] == 2
    });
    assert_eq!(secure.proc.log().matches("started evaluator").count(), 2, "{}", secure.proc.log());
    wait_for_log(&plain.proc, &format!("cannot join the driver at {listen} yet"));
    assert!(!plain.proc.log().contains("joined the driver"), "{}", plain.proc.log());
    assert_eq!(plain.proc.log().matches("started evaluator").count(), 0);
}
