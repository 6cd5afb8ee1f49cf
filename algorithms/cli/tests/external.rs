//! External applications (`--env external:<address>`): clients that own
//! their simulator loop connect, prove the cookie, and ask for actions;
//! rlx trains on their experiences. A Python client (Gymnasium's
//! CartPole) and a Rust client (rlx's CartPole) together bring PPO to a
//! mean return of 200, and DQN learns from them off-policy; clients that
//! send garbage, lie about the cookie or vanish mid-episode are dropped
//! and training goes on.

mod common;

use rlx::StopCriteria;
use rlx_cli::build_deployed_trainer;
use rlx_cluster::policy_client::{ClientError, PolicyClient};
use rlx_envs::gym::testing::python;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread::JoinHandle;

const COOKIE: &str = "external-test-cookie";

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn cookie_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("rlx-external-cookie-{}", std::process::id()));
    std::fs::write(&path, COOKIE).unwrap();
    path
}

/// A Rust client driving rlx's own CartPole until the server goes away;
/// returns the steps it took.
fn rust_client(address: String, seed: u64) -> JoinHandle<u64> {
    std::thread::spawn(move || common::play_cartpole(&mut common::connect(&address, COOKIE), seed, None))
}

/// The Python client process (`envs/tests/python/cartpole_client.py`).
fn python_client(address: &str, cookie: &PathBuf, seed: u64) -> Child {
    let python = python().expect("checked by the caller");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../envs");
    Command::new(python)
        .arg(format!("{dir}/tests/python/cartpole_client.py"))
        .args([address, cookie.to_str().unwrap(), &seed.to_string(), &format!("{dir}/python")])
        .spawn()
        .unwrap()
}

/// A server of two CartPole slots.
fn two_slots(cookie: &PathBuf) -> serde_json::Value {
    json!({
        "seed": 1, "num_workers": 0, "num_envs_per_worker": 2,
        "env_config": {"spaces_of": "CartPole-v1", "cookie_file": cookie},
    })
}

fn stop() -> StopCriteria {
    StopCriteria { episode_reward_mean: Some(200.0), timesteps_total: Some(150_000), ..StopCriteria::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_from_a_python_and_a_rust_client() {
    if python().is_none() {
        return;
    }
    let (address, cookie) = (free_address(), cookie_file());
    let config = two_slots(&cookie);
    let mut py = python_client(&address, &cookie, 3);
    let rust = rust_client(address.clone(), 4);
    let (mut trainer, _) = build_deployed_trainer("PPO", &format!("external:{address}"), &config).await.unwrap();
    let stop = stop();
    let r = loop {
        let r = trainer.train().await.unwrap();
        eprintln!("iter {} steps {} mean {:?}", r.training_iteration, r.timesteps_total, r.episode_reward_mean);
        if stop.should_stop(&r) {
            break r;
        }
    };
    drop(trainer);
    let _ = py.kill();
    let _ = py.wait();
    let rust_steps = rust.join().unwrap();
    assert!(
        r.episode_reward_mean.is_some_and(|m| m >= 200.0),
        "no mean of 200 within the budget: {:?}",
        r.episode_reward_mean
    );
    // Both clients took part (each moves once per vector step).
    assert!(rust_steps as f64 >= 0.4 * r.timesteps_total as f64, "{rust_steps} of {}", r.timesteps_total);
    let _ = std::fs::remove_file(cookie);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_learns_off_policy_from_clients() {
    let (address, cookie) = (free_address(), cookie_file());
    let config = two_slots(&cookie);
    let clients = [rust_client(address.clone(), 5), rust_client(address.clone(), 6)];
    let (mut trainer, _) = build_deployed_trainer("DQN", &format!("external:{address}"), &config).await.unwrap();
    let mut best = f64::NEG_INFINITY;
    let mut r = None;
    for _ in 0..400 {
        let res = trainer.train().await.unwrap();
        best = best.max(res.episode_reward_mean.unwrap_or(0.0));
        let done = res.timesteps_total >= 60_000 || best >= 100.0;
        r = Some(res);
        if done {
            break;
        }
    }
    drop(trainer);
    for c in clients {
        c.join().unwrap();
    }
    let r = r.unwrap();
    // A random policy's mean is about 22.
    assert!(best >= 100.0, "DQN's best mean return {best} after {} steps", r.timesteps_total);
    let _ = std::fs::remove_file(cookie);
}

/// Garbage before the handshake, a wrong cookie, a malformed frame after
/// it, and a client that vanishes mid-episode: each is refused or dropped
/// (counted with the env shard restarts), and a well-behaved client keeps
/// training going.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clients_are_dropped_and_training_goes_on() {
    let (address, cookie) = (free_address(), cookie_file());
    let config = json!({
        "seed": 1, "num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 512, "sgd_minibatch_size": 128,
        "num_sgd_iter": 2, "env_config": {"spaces_of": "CartPole-v1", "cookie_file": cookie},
    });
    let good = rust_client(address.clone(), 7);
    let (mut trainer, _) = build_deployed_trainer("PPO", &format!("external:{address}"), &config).await.unwrap();
    let r = trainer.train().await.unwrap();
    assert!(r.timesteps_total > 0);

    // Garbage instead of the handshake, and a wrong cookie: refused.
    let mut raw = std::net::TcpStream::connect(&address).unwrap();
    let _ = raw.write_all(&[0xff; 200]);
    assert!(matches!(PolicyClient::connect(&address, "wrong"), Err(ClientError::Admission(_))));
    // Admitted, then a reward that is not a number.
    let bad = std::thread::spawn({
        let address = address.clone();
        move || {
            let mut c = common::connect(&address, COOKIE);
            c.start_episode(&[0.0; 4]).unwrap();
            c.step(&[0.0; 4], f64::NAN, false, false)
        }
    });
    // Admitted, one episode started, then gone.
    let vanish = std::thread::spawn({
        let address = address.clone();
        move || {
            let mut c = common::connect(&address, COOKIE);
            let _ = c.start_episode(&[0.0; 4]);
        }
    });
    let mut restarts = 0.0;
    for _ in 0..40 {
        let r = trainer.train().await.unwrap();
        restarts = r.learner.get("env_shard_restarts").unwrap_or(0.0);
        if restarts >= 2.0 {
            break;
        }
    }
    vanish.join().unwrap();
    let err = bad.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("not finite"), "{err}");
    assert!(restarts >= 2.0, "the NaN reward and the vanished client are counted: {restarts}");
    let before = trainer.train().await.unwrap().timesteps_total;
    let after = trainer.train().await.unwrap().timesteps_total;
    assert!(after > before, "training goes on with the good client");
    drop(trainer);
    good.join().unwrap();
    let _ = std::fs::remove_file(cookie);
}
