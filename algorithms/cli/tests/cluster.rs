//! Multi-node training over loopback: `rlx node` processes host the
//! evaluators of an `rlx train --nodes ...` driver.
//!
//! - PPO learns CartPole with evaluators on two nodes, to the threshold of
//!   the single-process test (400).
//! - `kill -9` of one of three nodes mid-run: the run finishes, its
//!   evaluators are re-placed, the results record it, and every finished
//!   iteration is in `result.json`.
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
use rlx_algorithms::{BuildError, EnvMaker};
use rlx_cli::deploy::{self, Deployment};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use std::sync::Arc;
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");
const COOKIE: &str = "rlx-test-cookie";
/// The single-process PPO test's threshold (tests/ppo_cartpole.rs).
const THRESHOLD: f64 = 400.0;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-test-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
        let mut command = Command::new(RLX);
        command.args(["node", "--listen", "127.0.0.1:0", "--cookie", cookie, "--name", name]);
        Self::from_proc(Proc::spawn(&mut command, dir.join(format!("{name}.log"))))
    }

    /// A node in a child process running `test_node_process` (below).
    fn start_faulty(dir: &Path, name: &str, panic_mode: &str) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["test_node_process", "--exact", "--nocapture"]).env("RLX_TEST_NODE", panic_mode);
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
    let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    let mut command = Command::new(RLX);
    command.args(["train", "--run", "PPO", "--env", "CartPole-v1", "--seed", "1", "--cookie", cookie]);
    command.args(["--nodes", &addrs.join(","), "--config", &config.to_string(), "--stop", &stop.to_string()]);
    command.arg("--results-dir").arg(dir.join("results"));
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

#[test]
fn killing_a_node_mid_run_loses_no_finished_iteration() {
    let dir = tmp("kill-node");
    let nodes = [Node::start(&dir, "a", COOKIE), Node::start(&dir, "b", COOKIE), Node::start(&dir, "c", COOKIE)];
    let mut driver = train(&dir, &nodes.iter().collect::<Vec<_>>(), COOKIE, json!({"num_workers": 6}), PPO_STOP());
    // Let a few iterations finish with evaluators on all three nodes.
    wait_for_iterations(&dir, &mut driver, 3);
    let [a, b, mut c] = nodes;
    c.proc.child.kill().unwrap(); // SIGKILL
    c.proc.child.wait().unwrap();
    let status = driver.wait(Duration::from_secs(240));
    assert!(status.success(), "driver failed:\n{}", driver.log());
    let results = results(&dir);
    // Every finished iteration is there, in order.
    let iterations: Vec<u64> = results.iter().map(|r| r["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=results.len() as u64).collect::<Vec<_>>());
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
    assert!(bad.proc.log().contains("auth_fail"), "{}", bad.proc.log());

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
///   connection limit (64) at once.
/// - 1,000 handshakes with a wrong cookie: past 20 failures in 10 s the
///   address is refused as it connects, and the node's log stays short.
#[test]
fn peers_without_the_cookie_cannot_touch_a_running_driver() {
    let dir = tmp("attacks");
    let node = Node::start(&dir, "a", COOKIE);
    let mut driver = train(&dir, &[&node], COOKIE, json!({"num_workers": 2}), json!({"training_iteration": 1_000_000}));
    wait_for_iterations(&dir, &mut driver, 2);
    let log = node.proc.log();
    let name = log
        .split("driver=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|full| full.strip_suffix("@localhost"))
        .unwrap_or_else(|| panic!("the node logs the driver's name, NAME@localhost:\n{log}"))
        .to_string();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..4 {
            let impostor = ractor_cluster::NodeServer::new(
                0,
                "not-the-cookie".into(),
                name.clone(),
                "localhost".into(),
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
        let mut buf = [0u8; 64];
        // The node closes it: end of file, or a reset (not our read timeout).
        let closed = match std::io::Read::read(&mut peer, &mut buf) {
            Ok(n) => n == 0,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        };
        assert!(closed, "a half-sent handshake was held open");
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(9), "closed after {waited:?}");
    }
    // Then 1,000 handshakes with a wrong cookie, as fast as they go: past 20
    // failures in 10 s the address is refused at accept, and the node's log
    // grows by a line a second at most.
    let log_lines = node.proc.log().lines().count();
    let burst = runtime.block_on(async {
        let guesser = ractor_cluster::NodeServer::new(
            0,
            "a-guess".into(),
            "guesser".into(),
            "localhost".into(),
            None,
            Some(ractor_cluster::node::NodeConnectionMode::Isolated),
        );
        let (server, handle) = ractor::Actor::spawn(None, guesser, ()).await.unwrap();
        let addr: std::net::SocketAddr = node.addr.parse().unwrap();
        let started = Instant::now();
        for _ in 0..1000 {
            let _ = tokio::time::timeout(Duration::from_secs(1), ractor_cluster::client_connect(&server, addr)).await;
        }
        let burst = started.elapsed();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.stop(None);
        let _ = handle.await;
        burst
    });
    eprintln!("1,000 wrong-cookie handshakes in {burst:?}");
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
    assert!(last.get("evaluator_failures").is_none(), "nothing failed: {last}");
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

/// The entry point of the nodes that `Node::start_faulty` runs (a re-run
/// of this test binary with `RLX_TEST_NODE` set); a no-op otherwise.
#[test]
fn test_node_process() {
    let Ok(mode) = std::env::var("RLX_TEST_NODE") else { return };
    let at = if mode == "always" { 0 } else { mode.parse().unwrap() };
    // CartPole that panics at the `at`-th step of this process, or, with
    // `at == 0`, at every 50th step.
    let make_env = common::faulty(move |n| (at > 0 && n == at) || (at == 0 && n % 50 == 0));
    let envs: deploy::EnvResolver =
        Arc::new(move |_name: &str, _: &Value| -> Result<EnvMaker, BuildError> { Ok(make_env.clone()) });
    rlx_cli::init_logging();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = rlx_cluster::NodeConfig::new("127.0.0.1:0".parse().unwrap(), COOKIE);
        let node = rlx_cluster::Node::start(config, deploy::node_resolver_with(envs)).await.unwrap();
        println!("listening on {}", node.addr);
        std::io::stdout().flush().unwrap();
        // The parent kills this process.
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
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
