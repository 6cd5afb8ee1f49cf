//! External applications: an app that owns its simulator loop (a game, a
//! robot, a web service) connects to a running `rlx train` over TCP and
//! asks it for actions, as RLlib's `PolicyServerInput` and `PolicyClient`.
//!
//! ```text
//! rlx train --run PPO --env external:127.0.0.1:9900 \
//!     --config '{"num_envs_per_worker": 2, "env_config": {"spaces_of": "CartPole-v1", "cookie_file": "cookie"}}'
//! ```
//!
//! **Slots.** The sampling evaluator's `num_envs_per_worker` env copies
//! are slots, each held by one connected client at a time; clients beyond
//! that wait for a slot. Each vector step sends every held slot its action
//! and waits for what came of it, so connected clients move in lockstep,
//! as the copies of a vector env do (the slowest client sets the pace).
//! A slot without a client yields no row. A client that attaches starts an
//! episode in its slot; one that disconnects, sends a malformed frame or
//! does not answer within `env_shards.step_timeout_s` is dropped with an
//! error frame, its episode in progress is dropped (its row of that step
//! is marked interrupted, as a restarted env shard's), the drop is counted
//! with the env shard restarts in `result.json`, and its slot goes to the
//! next waiting client. Training never waits for a particular client;
//! with no client at all it waits, logging every 10 s.
//!
//! **The protocol**, after the cluster's admission handshake with the
//! cookie ([`crate::admission`]): frames of a little-endian `u32` length
//! and a tag byte.
//!
//! ```text
//! server → client  H + JSON {"obs_dim", "action": "discrete" | "box", "action_width"}   once
//! client → server  S + f32[obs_dim]                        an episode starts with this observation
//! server → client  A + i64[action_width] or f32[action_width]   the action to take
//! client → server  T + f64 reward + u8 terminated + u8 truncated + f32[obs_dim]
//!                                                          what the action led to; after an end,
//!                                                          the client's next frame is S
//! server → client  E + text                                an error; the server closes
//! ```
//!
//! The policy is the trainer's current one, so the experiences are
//! on-policy for PPO and the policy-gradient family, and go to the replay
//! buffer for DQN and the other off-policy algorithms. `envs/python/
//! rlx_client.py` is the Python client and [`PolicyClient`] the Rust one.
//! Only one evaluator may sample from a server (`num_workers` 0 or 1).

use crate::admission::Admission;
use rlx::sample_batch::Column;
use rlx::vector_env::{BatchSettings, Current, RunningEpisodes, VectorStep};
use rlx::{Action, BatchedEnv, Env, EnvError, EnvSignature, Space, Step};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The prefix of env names served by external applications.
pub const PREFIX: &str = "external:";

/// How long a new connection has to pass the admission handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a server serves: where it listens, the spaces its clients'
/// observations and actions lie in, and the cookie they prove.
#[derive(Clone)]
pub struct ExternalSpec {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The env's name (`external:<address>`) and spaces.
    pub signature: EnvSignature,
    /// The shared secret clients prove (never sent).
    pub cookie: String,
}

/// The env an evaluator is built with: a placeholder whose vectorized
/// form ([`Env::batched`]) is the server. It cannot be stepped by itself.
pub struct ExternalEnv {
    spec: Arc<ExternalSpec>,
}

impl ExternalEnv {
    /// The env of `spec`.
    pub fn new(spec: ExternalSpec) -> Self {
        Self { spec: Arc::new(spec) }
    }

    fn alone(&self) -> EnvError {
        EnvError::Other {
            env: self.spec.signature.name.clone(),
            message: "an external env is stepped by its clients, in an evaluator's vector env; it cannot be stepped on its own (rlx rollout, ES and ARS need an env rlx steps)".into(),
        }
    }
}

impl Env for ExternalEnv {
    fn signature(&self) -> &EnvSignature {
        &self.spec.signature
    }

    fn reset(&mut self, _seed: Option<u64>, _obs: &mut [f32]) -> Result<(), EnvError> {
        Err(self.alone())
    }

    fn step(&mut self, _action: Action<'_>, _obs: &mut [f32]) -> Result<Step, EnvError> {
        Err(self.alone())
    }

    fn batched(&self, num_envs: usize, settings: &BatchSettings) -> Option<Result<Box<dyn BatchedEnv>, EnvError>> {
        Some(Server::start(self.spec.clone(), num_envs, settings).map(|s| Box::new(s) as Box<dyn BatchedEnv>))
    }
}

/// One connected client.
struct Client {
    stream: TcpStream,
    peer: SocketAddr,
}

/// A client error: the client is dropped.
struct Dropped(String);

impl Client {
    fn send(&mut self, tag: u8, body: &[u8]) -> Result<(), Dropped> {
        let length = (body.len() + 1) as u32;
        let mut frame = Vec::with_capacity(5 + body.len());
        frame.extend_from_slice(&length.to_le_bytes());
        frame.push(tag);
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).map_err(|e| Dropped(format!("write failed ({e})")))
    }

    /// The next frame, of at most `max` bytes.
    fn receive(&mut self, max: usize) -> Result<Vec<u8>, Dropped> {
        let mut head = [0u8; 4];
        self.stream.read_exact(&mut head).map_err(|e| Dropped(read_error(&e)))?;
        let length = u32::from_le_bytes(head) as usize;
        if length == 0 || length > max {
            return Err(Dropped(format!("sent a frame of {length} bytes (at most {max} here)")));
        }
        let mut frame = vec![0u8; length];
        self.stream.read_exact(&mut frame).map_err(|e| Dropped(read_error(&e)))?;
        Ok(frame)
    }

    /// Drops the client, telling it why.
    fn drop_with(mut self, why: &str) {
        let _ = self.send(b'E', why.as_bytes());
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

fn read_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "did not answer within env_shards.step_timeout_s".into()
        }
        std::io::ErrorKind::UnexpectedEof => "disconnected".into(),
        _ => format!("read failed ({e})"),
    }
}

/// The server: slots, waiting clients, and the thread that admits them.
pub struct Server {
    spec: Arc<ExternalSpec>,
    slots: Vec<Option<Client>>,
    waiting: Arc<Mutex<VecDeque<Client>>>,
    stop: Arc<AtomicBool>,
    obs_dim: usize,
    drops: u64,
    episodes: RunningEpisodes,
    /// The address it listens on (the port chosen when asked for port 0).
    pub local_addr: Option<SocketAddr>,
    /// The thread admitting clients; joined on drop, so that the port is
    /// free again when the server is gone (an evaluator restarted by its
    /// supervisor binds it anew).
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(spec: Arc<ExternalSpec>, num_envs: usize, settings: &BatchSettings) -> Result<Self, EnvError> {
        let name = spec.signature.name.clone();
        let waiting = Arc::new(Mutex::new(VecDeque::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let timeout = settings.step_timeout;
        let mut local_addr = None;
        let mut acceptor = None;
        // The driver's own evaluator of a run with workers never samples:
        // it gets slots that no client can reach, and the port stays free
        // for the worker that samples.
        if settings.sampling {
            let listener = TcpListener::bind(spec.listen).map_err(|e| EnvError::Other {
                env: name.clone(),
                message: if e.kind() == std::io::ErrorKind::AddrInUse {
                    format!(
                        "cannot listen on {}: another process already listens there (another rlx run or server?); \
                         stop it, or give this run another port",
                        spec.listen
                    )
                } else {
                    format!("cannot listen on {} ({e})", spec.listen)
                },
            })?;
            listener
                .set_nonblocking(true)
                .map_err(|e| EnvError::Other { env: name.clone(), message: e.to_string() })?;
            local_addr = listener.local_addr().ok();
            tracing::info!(env = %name, address = ?local_addr, "waiting for external clients");
            let (waiting, stop, spec) = (waiting.clone(), stop.clone(), spec.clone());
            let thread = std::thread::Builder::new()
                .name("rlx-external-accept".into())
                .spawn(move || accept(&listener, &spec, &waiting, &stop, timeout))
                .map_err(|e| EnvError::Other { env: name.clone(), message: e.to_string() })?;
            acceptor = Some(thread);
        }
        let obs_dim = spec.signature.observation_space.flat_dim();
        Ok(Self {
            spec,
            slots: (0..num_envs).map(|_| None).collect(),
            waiting,
            stop,
            obs_dim,
            drops: 0,
            episodes: RunningEpisodes::new(num_envs),
            local_addr,
            acceptor,
        })
    }

    fn name(&self) -> &str {
        &self.spec.signature.name
    }

    /// Drops slot `i`'s client after `why`.
    fn drop_client(&mut self, i: usize, why: &str) {
        if let Some(client) = self.slots[i].take() {
            tracing::warn!(env = %self.name(), slot = i, peer = %client.peer, reason = why, "external client dropped; its episode in progress is lost");
            client.drop_with(why);
            self.drops += 1;
        }
    }

    /// Gives free slots to waiting clients, reading each one's first
    /// observation into `obs`; returns the slots filled.
    fn fill_slots(&mut self, obs: &mut [f32]) -> Vec<usize> {
        let d = self.obs_dim;
        let mut filled = Vec::new();
        for i in 0..self.slots.len() {
            if self.slots[i].is_some() {
                continue;
            }
            let Some(mut client) = self.waiting.lock().ok().and_then(|mut w| w.pop_front()) else { break };
            match read_start(&mut client, &mut obs[i * d..(i + 1) * d]) {
                Ok(()) => {
                    self.slots[i] = Some(client);
                    self.episodes.start(i..i + 1);
                    filled.push(i);
                }
                Err(Dropped(why)) => {
                    tracing::warn!(env = %self.name(), peer = %client.peer, reason = %why, "external client dropped before its first episode");
                    client.drop_with(&why);
                    self.drops += 1;
                }
            }
        }
        filled
    }

    /// Waits until some slot has a client (the run cannot sample without),
    /// or until the process is asked to stop ([`rlx::interrupt`]).
    fn wait_for_clients(&mut self, obs: &mut [f32]) -> Result<Vec<usize>, EnvError> {
        let mut said = Instant::now();
        loop {
            let filled = self.fill_slots(obs);
            if !filled.is_empty() || self.slots.iter().any(Option::is_some) {
                return Ok(filled);
            }
            if rlx::interrupt::requested() {
                return Err(EnvError::Other {
                    env: self.name().to_string(),
                    message: format!("{} while waiting for a client to connect", rlx::interrupt::STOPPED),
                });
            }
            if said.elapsed() > Duration::from_secs(10) {
                tracing::info!(env = %self.name(), "no external client connected; waiting");
                said = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for i in 0..self.slots.len() {
            if let Some(client) = self.slots[i].take() {
                client.drop_with("the server stopped");
            }
        }
        if let Some(thread) = self.acceptor.take() {
            let _ = thread.join();
        }
    }
}

/// Reads an `S` frame: the first observation of an episode, into `obs`.
fn read_start(client: &mut Client, obs: &mut [f32]) -> Result<(), Dropped> {
    let frame = client.receive(1 + 4 * obs.len())?;
    if frame[0] != b'S' {
        return Err(Dropped(format!("sent a frame of kind {:?} where an episode start (S) was due", frame[0] as char)));
    }
    read_obs(&frame[1..], obs)
}

fn read_obs(bytes: &[u8], obs: &mut [f32]) -> Result<(), Dropped> {
    if bytes.len() != 4 * obs.len() {
        return Err(Dropped(format!(
            "sent an observation of {} bytes; {} floats ({} bytes) were due",
            bytes.len(),
            obs.len(),
            4 * obs.len()
        )));
    }
    for (o, b) in obs.iter_mut().zip(bytes.chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    if obs.iter().any(|x| !x.is_finite()) {
        return Err(Dropped("sent an observation that is not finite".into()));
    }
    Ok(())
}

/// Admits connections until `stop`: the cookie handshake, then the hello,
/// then the waiting queue.
fn accept(
    listener: &TcpListener,
    spec: &ExternalSpec,
    waiting: &Mutex<VecDeque<Client>>,
    stop: &AtomicBool,
    timeout: Duration,
) {
    let admission = Admission::new(&spec.cookie);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("external clients cannot be admitted: {e}");
            return;
        }
    };
    let (action, width) = match &spec.signature.action_space {
        Space::Box { .. } => ("box", spec.signature.action_space.flat_dim()),
        Space::Discrete { .. } => ("discrete", 1),
        Space::MultiDiscrete { nvec } => ("discrete", nvec.len()),
        Space::Dict { .. } => {
            tracing::error!("external clients cannot act in the Dict action space {}", spec.signature.action_space);
            return;
        }
    };
    let hello = format!(
        r#"{{"obs_dim": {}, "action": "{action}", "action_width": {width}}}"#,
        spec.signature.observation_space.flat_dim()
    );
    while !stop.load(Ordering::Relaxed) {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => {
                tracing::warn!("accepting an external client failed: {e}");
                continue;
            }
        };
        let admitted = runtime.block_on(async {
            stream.set_nonblocking(true)?;
            let mut s = tokio::net::TcpStream::from_std(stream)?;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, admission.admit(&mut s)).await {
                Ok(Ok(())) => s.into_std(),
                Ok(Err(e)) => Err(std::io::Error::other(e.to_string())),
                Err(_) => Err(std::io::Error::other("handshake timed out")),
            }
        });
        let stream = match admitted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, "external client refused: {e}");
                continue;
            }
        };
        let ready = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true));
        if ready.is_err() {
            continue;
        }
        let mut client = Client { stream, peer };
        if client.send(b'H', hello.as_bytes()).is_ok() {
            if let Ok(mut w) = waiting.lock() {
                w.push_back(client);
            }
        }
    }
}

impl BatchedEnv for Server {
    /// Gives slots to the clients waiting; the others start empty. Seeds
    /// mean nothing here: the clients own their simulators.
    fn reset(&mut self, _seed: u64, now: &mut Current) -> Result<(), EnvError> {
        now.obs.fill(0.0);
        self.fill_slots(&mut now.obs);
        Ok(())
    }

    fn step(&mut self, actions: &Column, out: &mut VectorStep, now: &mut Current) -> Result<(), EnvError> {
        let (n, d) = (self.slots.len(), self.obs_dim);
        let (obs, finished) = (&mut now.obs, &mut now.finished);
        // Every row is no transition unless a client answers for it.
        out.interrupted.iter_mut().for_each(|x| *x = true);
        out.rewards.iter_mut().for_each(|x| *x = 0.0);
        out.terminated.iter_mut().for_each(|x| *x = false);
        out.truncated.iter_mut().for_each(|x| *x = false);
        if self.slots.iter().all(Option::is_none) {
            for i in self.wait_for_clients(obs)? {
                out.new_obs[i * d..(i + 1) * d].copy_from_slice(&obs[i * d..(i + 1) * d]);
            }
            return Ok(());
        }
        let mut failed = Vec::new();
        for i in 0..n {
            if let Some(client) = self.slots[i].as_mut() {
                if let Err(Dropped(why)) = client.send(b'A', &actions.le_bytes(i..i + 1)) {
                    failed.push((i, why));
                }
            }
        }
        for i in 0..n {
            if self.slots[i].is_none() || failed.iter().any(|(j, _)| *j == i) {
                continue;
            }
            let result = (|| -> Result<(), Dropped> {
                let client = self.slots[i].as_mut().expect("checked");
                let frame = client.receive(1 + 10 + 4 * d)?;
                if frame[0] != b'T' || frame.len() != 1 + 10 + 4 * d {
                    return Err(Dropped(format!(
                        "sent a frame of kind {:?} and {} bytes where a step result (T, {} bytes) was due",
                        frame[0] as char,
                        frame.len(),
                        1 + 10 + 4 * d
                    )));
                }
                let reward = f64::from_le_bytes(frame[1..9].try_into().expect("8 bytes"));
                if !reward.is_finite() {
                    return Err(Dropped("sent a reward that is not finite".into()));
                }
                let (terminated, truncated) = (frame[9] != 0, frame[10] != 0);
                read_obs(&frame[11..], &mut out.new_obs[i * d..(i + 1) * d])?;
                if terminated || truncated {
                    let mut first = vec![0.0; d];
                    read_start(self.slots[i].as_mut().expect("checked"), &mut first)?;
                    obs[i * d..(i + 1) * d].copy_from_slice(&first);
                } else {
                    obs[i * d..(i + 1) * d].copy_from_slice(&out.new_obs[i * d..(i + 1) * d]);
                }
                out.rewards[i] = reward as f32;
                out.terminated[i] = terminated;
                out.truncated[i] = truncated;
                out.interrupted[i] = false;
                self.episodes.step(i, reward, terminated, truncated, finished);
                Ok(())
            })();
            if let Err(Dropped(why)) = result {
                // Its episode is lost, even one that had just ended but
                // was not followed by the start of the next.
                out.interrupted[i] = true;
                out.rewards[i] = 0.0;
                failed.push((i, why));
            }
        }
        for (i, why) in failed {
            self.drop_client(i, &why);
            obs[i * d..(i + 1) * d].fill(0.0);
        }
        for i in self.fill_slots(obs) {
            out.new_obs[i * d..(i + 1) * d].copy_from_slice(&obs[i * d..(i + 1) * d]);
        }
        for i in 0..n {
            if out.interrupted[i] {
                out.new_obs[i * d..(i + 1) * d].copy_from_slice(&obs[i * d..(i + 1) * d]);
            }
        }
        Ok(())
    }

    fn restarts(&self) -> u64 {
        self.drops
    }
}
