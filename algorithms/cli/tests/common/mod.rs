//! What the tests of this crate share (each test file uses some of it).
#![allow(dead_code)]

use rlx::{Action, Env, EnvError, EnvMaker, EnvSignature, Step, Wrapped, Wrapper};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Runs `fault` with a step counter shared by every copy from the same
/// maker before each of CartPole's steps (it panics or stalls at steps
/// of its choosing).
struct Faulty {
    signature: EnvSignature,
    steps: Arc<AtomicUsize>,
    fault: Arc<dyn Fn(usize) + Send + Sync>,
}

impl Wrapper<Box<dyn Env>> for Faulty {
    fn signature<'a>(&'a self, _: &'a Box<dyn Env>) -> &'a EnvSignature {
        &self.signature
    }
    fn step(&mut self, env: &mut Box<dyn Env>, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        (self.fault)(self.steps.fetch_add(1, Ordering::SeqCst) + 1);
        env.step(action, obs)
    }
}

/// A maker of CartPoles sharing one step counter whose step panics at
/// the steps `panic_at` picks.
pub fn faulty(panic_at: impl Fn(usize) -> bool + Send + Sync + 'static) -> EnvMaker {
    with_fault(move |n| {
        if panic_at(n) {
            panic!("simulator crashed at global step {n}");
        }
    })
}

/// A maker of CartPoles sharing one step counter whose `at`-th step
/// blocks its thread for `pause` (a simulator that hangs for a while).
pub fn stalling(at: usize, pause: std::time::Duration) -> EnvMaker {
    with_fault(move |n| {
        if n == at {
            std::thread::sleep(pause);
        }
    })
}

/// A maker of [`Faulty`] CartPoles sharing one step counter.
fn with_fault(fault: impl Fn(usize) + Send + Sync + 'static) -> EnvMaker {
    let steps = Arc::new(AtomicUsize::new(0));
    let fault: Arc<dyn Fn(usize) + Send + Sync> = Arc::new(fault);
    Arc::new(move || {
        let cartpole = rlx_envs::make("CartPole-v1")?;
        let signature = EnvSignature { name: "FaultyCartPole".into(), ..cartpole.signature().clone() };
        let faulty = Faulty { signature, steps: steps.clone(), fault: fault.clone() };
        Ok(Box::new(Wrapped::wrap(cartpole, faulty)) as Box<dyn Env>)
    })
}

/// An empty directory `rlx-test-<suite>-<name>-<pid>` under the system's
/// temporary directory (emptied if a killed run left it behind).
pub fn tmp(suite: &str, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-test-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Connects a policy client, retrying while the server starts (a trainer
/// binds when its evaluator is built).
pub fn connect(address: &str, cookie: &str) -> rlx_cluster::policy_client::PolicyClient {
    use rlx_cluster::policy_client::{ClientError, PolicyClient};
    for _ in 0..400 {
        match PolicyClient::connect(address, cookie) {
            Ok(c) => return c,
            Err(ClientError::Io(_)) => std::thread::sleep(std::time::Duration::from_millis(25)),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no server at {address}");
}

/// Plays rlx's CartPole, seeded `seed`, through `client`: `steps` steps at
/// most, or every episode until the server goes away (`None`). Returns
/// the steps taken.
pub fn play_cartpole(client: &mut rlx_cluster::policy_client::PolicyClient, seed: u64, steps: Option<u64>) -> u64 {
    use rlx_cluster::policy_client::ClientAction;
    let mut env = rlx_envs::make("CartPole-v1").unwrap();
    let mut obs = [0f32; 4];
    env.reset(Some(seed), &mut obs).unwrap();
    let mut taken = 0;
    let Ok(mut action) = client.start_episode(&obs) else { return 0 };
    while steps.is_none_or(|n| taken < n) {
        let ClientAction::Discrete(a) = action else { panic!("CartPole's actions are discrete") };
        let s = env.step(Action::Discrete(a[0]), &mut obs).unwrap();
        taken += 1;
        match client.step(&obs, s.reward, s.terminated, s.truncated) {
            Ok(Some(next)) => action = next,
            Ok(None) => {
                env.reset(None, &mut obs).unwrap();
                match client.start_episode(&obs) {
                    Ok(next) => action = next,
                    Err(_) => return taken,
                }
            }
            Err(_) => return taken,
        }
    }
    taken
}

/// Reads lines from `reader` (a child's stderr) until one contains
/// `needle`, or the stream ends, or `timeout` passes; returns what it read.
pub fn read_until(reader: &mut impl std::io::BufRead, needle: &str, timeout: std::time::Duration) -> String {
    let deadline = std::time::Instant::now() + timeout;
    let mut seen = String::new();
    while !seen.contains(needle) && std::time::Instant::now() < deadline {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
    }
    seen
}

/// Waits for `child` at most `timeout`; kills it past that and fails.
pub fn wait_with_timeout(child: &mut std::process::Child, timeout: std::time::Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Writes a test CA, a node certificate for 127.0.0.1 and a driver
/// certificate, all signed by the CA, as PEM files in `dir`; returns the
/// paths of `ca.pem`, `node.pem`, `node.key`, `driver.pem`, `driver.key`.
#[cfg(test)] // rcgen is a dev-dependency; the test-node binary includes this file too
pub fn test_pki(dir: &std::path::Path) -> [String; 5] {
    use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let leaf = |name: &str, purpose: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.extended_key_usages = vec![purpose];
        (params.signed_by(&key, &ca, &ca_key).unwrap(), key)
    };
    let (node, node_key) = leaf("127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let (driver, driver_key) = leaf("rlx-driver", ExtendedKeyUsagePurpose::ClientAuth);
    let files = [
        ("ca.pem", ca.pem()),
        ("node.pem", node.pem()),
        ("node.key", node_key.serialize_pem()),
        ("driver.pem", driver.pem()),
        ("driver.key", driver_key.serialize_pem()),
    ];
    files.map(|(name, pem)| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_str().unwrap().to_string()
    })
}
