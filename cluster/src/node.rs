//! A worker node: what `rlx node` runs.
//!
//! ```text
//! NodeServer (ractor_cluster; sessions with drivers)
//! Spawner            joins process group `rlx.spawner`; answers heartbeats
//!   └── EvaluatorServer   one per remote evaluator, joins `rlx.eval.<id>`
//!
//! PoolSupervisor<EvaluatorActor>   one per driver (a RactorEvaluatorSet):
//!   ├── EvaluatorActor     the node level of supervision (the run's
//!   └── EvaluatorActor     `restart` policy; one-for-all restarts every
//!                          evaluator of that driver here)
//! ```
//!
//! ractor_cluster has no remote spawn, so the driver asks the spawner (found
//! through its process group) to build an evaluator; the new
//! [`EvaluatorServer`] joins a group of its own, through which the driver
//! reaches it. The node rebuilds the evaluator by re-running the algorithm's
//! build from the [`SpawnSpec`] (the [`Resolver`] the binary passes in), so a
//! remote evaluator is exactly the one the driver would have built locally.

use crate::admission::{self, Admission, DriverTls, NodeTls};
use crate::gatekeeper::{lock, Gatekeeper, Sessions};
use crate::resources::NodeResources;
use crate::wire::{
    self, EvalProtocol, EvalRequest, SpawnProtocol, SpawnReply, SpawnRequest, SpawnSpec, SpawnerReply, SpawnerRequest,
    Wire, WireError, WireReply, SPAWNER_GROUP,
};
use crate::ClusterError;
use futures::FutureExt as _;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage};
use rlx::actor::{RactorEvaluator, RactorEvaluatorSet};
use rlx::protocol::EvalReply;
use rlx::{EvaluatorFactory, EvaluatorHandle};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::net::TcpListener;

/// Builds the evaluator factory for a spec (the algorithm's build, run on
/// the node). Injected by the binary: this crate knows no algorithms.
pub type Resolver =
    Arc<dyn Fn(SpawnSpec) -> futures::future::BoxFuture<'static, Result<EvaluatorFactory, String>> + Send + Sync>;

/// Default inbound frame limit of rlx nodes and drivers: 256 MiB, raised
/// deliberately from ractor_cluster's 16 MiB so a large batch travels as one
/// frame. Senders check it before sending (an oversized frame would make
/// the receiver drop the whole connection).
pub const DEFAULT_MAX_FRAME_BYTES: u64 = 256 * 1024 * 1024;

/// How long a connection may take to authenticate before the node drops
/// it (the handshake is three small messages).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections a node holds at once, by default (each driver needs one).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// How to run a node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// Where to accept drivers (e.g. `127.0.0.1:7000`; port 0 picks one).
    pub listen: SocketAddr,
    /// The shared secret; drivers with another cookie are refused.
    pub cookie: String,
    /// The node's name, unique in the cluster (`None`: `node-PORT-PID`).
    pub name: Option<String>,
    /// Largest frame accepted, in bytes.
    pub max_frame_bytes: u64,
    /// Connections held at once; one more is closed as it is accepted.
    pub max_connections: usize,
    /// A connection that has not authenticated by then is closed.
    pub handshake_timeout: Duration,
    /// TLS for every connection (`None`: plaintext TCP).
    pub tls: Option<NodeTls>,
    /// What the node offers drivers ([`NodeResources::detect`] by default).
    pub resources: NodeResources,
    /// A driver to join (`HOST:PORT` of its `--node-listen`): the node
    /// dials it, and dials again with back-off whenever the session ends
    /// or the driver cannot be reached, for as long as the node runs.
    pub join: Option<String>,
    /// TLS to the driver it joins: the CA its certificate must be signed
    /// by (and the name it must carry; default: the host of `join`).
    pub join_tls: Option<DriverTls>,
}

impl NodeConfig {
    /// A node on `listen` with `cookie`, and the defaults for the rest.
    pub fn new(listen: SocketAddr, cookie: impl Into<String>) -> Self {
        Self {
            listen,
            cookie: cookie.into(),
            name: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            tls: None,
            resources: NodeResources::detect(),
            join: None,
            join_tls: None,
        }
    }
}

/// A running node. Dropping it does not stop it; call [`Node::stop`].
pub struct Node {
    /// The address drivers connect to.
    pub addr: SocketAddr,
    /// The node's name.
    pub name: String,
    server: ActorRef<NodeServerMessage>,
    spawner: ActorRef<Wire<SpawnProtocol>>,
    accept: tokio::task::JoinHandle<()>,
    /// Keeps the node joined to its driver (with `join`).
    joining: Option<tokio::task::JoinHandle<()>>,
}

impl Node {
    /// Starts a node: binds `listen`, starts the NodeServer and the spawner.
    ///
    /// # Errors
    /// The address cannot be bound, a TLS file cannot be used, or an actor
    /// fails to start.
    pub async fn start(config: NodeConfig, resolver: Resolver) -> Result<Self, ClusterError> {
        let tls = config.tls.as_ref().map(NodeTls::acceptor).transpose().map_err(ClusterError::Options)?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| ClusterError::Bind { addr: config.listen.to_string(), reason: e.to_string() })?;
        let addr = listener
            .local_addr()
            .map_err(|e| ClusterError::Bind { addr: config.listen.to_string(), reason: e.to_string() })?;
        let name = config.name.clone().unwrap_or_else(|| format!("node-{}-{}", addr.port(), std::process::id()));
        let server = crate::start_node_server(&name, &config.cookie, config.max_frame_bytes).await?;
        let owned: Owned = Arc::default();
        let sessions: Arc<Mutex<Sessions>> = Arc::default();
        let gate =
            Gate { owned: owned.clone(), sessions: sessions.clone(), handshake_timeout: config.handshake_timeout };
        server
            .cast(NodeServerMessage::SubscribeToEvents { id: "rlx.spawner".into(), subscription: Box::new(gate) })
            .map_err(|e| ClusterError::Actor(e.to_string()))?;
        let args = SpawnerState {
            resolver,
            owned,
            sets: HashMap::new(),
            spawned: HashMap::new(),
            resources: config.resources.clone(),
            max_frame_bytes: config.max_frame_bytes,
        };
        let (spawner, _) = Actor::spawn(None, Spawner, args).await.map_err(|e| ClusterError::Actor(e.to_string()))?;
        // rlx accepts connections itself (rather than ractor_cluster's
        // listener) so that port 0 works, the bound address is known, and
        // a connection reaches ractor_cluster only once it has passed TLS
        // and the admission handshake (see `admission`).
        let gatekeeper = Gatekeeper {
            server: server.clone(),
            sessions,
            admission: Admission::new(&config.cookie),
            tls,
            timeout: config.handshake_timeout,
            max_connections: config.max_connections,
        };
        let accept = tokio::spawn(gatekeeper.run(listener));
        let joining = match &config.join {
            Some(driver) => {
                let tls = match &config.join_tls {
                    Some(settings) => Some((settings.connector().map_err(ClusterError::Options)?, settings.clone())),
                    None => None,
                };
                let admission = Admission::new(&config.cookie);
                Some(tokio::spawn(keep_joined(
                    server.clone(),
                    driver.clone(),
                    tls,
                    admission,
                    config.handshake_timeout,
                )))
            }
            None => None,
        };
        Ok(Self { addr, name, server, spawner, accept, joining })
    }

    /// Stops the node and every evaluator on it.
    pub fn stop(self) {
        if let Some(joining) = &self.joining {
            joining.abort();
        }
        self.accept.abort();
        self.spawner.stop(Some("node stopped".into()));
        self.server.stop(Some("node stopped".into()));
    }
}

/// Checks a `--join` address: `HOST:PORT` with a port number.
///
/// # Errors
/// What is wrong with it.
pub fn check_join_address(driver: &str) -> Result<(), String> {
    let Some((host, port)) = driver.rsplit_once(':') else {
        return Err(format!("`{driver}` is not HOST:PORT (no port)"));
    };
    if host.trim_start_matches('[').trim_end_matches(']').is_empty() {
        return Err(format!("`{driver}` is not HOST:PORT (no host)"));
    }
    port.parse::<u16>().map(drop).map_err(|_| format!("`{driver}` is not HOST:PORT (`{port}` is not a port number)"))
}

/// Keeps the node joined to the driver at `driver`: dials it (TLS if
/// configured, the admission handshake), waits while the session lasts,
/// and dials again, waiting 0.5 s after a failed dial and doubling up to
/// 30 s, back to 0.5 s after a session. A driver that is restored at the
/// same address gets the node back without anyone touching it.
async fn keep_joined(
    server: ActorRef<NodeServerMessage>,
    driver: String,
    tls: Option<(tokio_rustls::TlsConnector, DriverTls)>,
    admission: Admission,
    timeout: Duration,
) {
    const FIRST: Duration = Duration::from_millis(500);
    let host = crate::driver::host_of(&driver);
    let mut wait = FIRST;
    loop {
        let dialled = async {
            let addr = tokio::net::lookup_host(driver.as_str())
                .await
                .map_err(|e| e.to_string())?
                .next()
                .ok_or_else(|| "resolves to nothing".to_string())?;
            admission::connect(&server, addr, &host, tls.as_ref(), &admission, timeout)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(addr)
        };
        match dialled.await {
            Ok(addr) => {
                // The session shows up once ractor_cluster's handshake is
                // done, and is gone when it ends.
                let deadline = tokio::time::Instant::now() + timeout;
                while !session_to(&server, addr).await && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if session_to(&server, addr).await {
                    tracing::info!("joined the driver at {driver}");
                    wait = FIRST;
                    while session_to(&server, addr).await {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    tracing::info!("the driver at {driver} is gone; dialling it again");
                    continue;
                }
                tracing::warn!("cannot join the driver at {driver}: its session did not start (wrong cookie?)");
            }
            Err(reason) => tracing::info!("cannot join the driver at {driver} yet: {reason}; again in {wait:?}"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

/// Whether the node has a session with the peer at `addr`.
async fn session_to(server: &ActorRef<NodeServerMessage>, addr: SocketAddr) -> bool {
    let text = addr.to_string();
    let sessions = server.call(NodeServerMessage::GetSessions, Some(Duration::from_secs(1))).await;
    matches!(sessions, Ok(ractor::rpc::CallResult::Success(s)) if s.values().any(|s| s.peer_addr == text))
}

/// Evaluator servers per driver name, with the driver's latest session
/// epoch: stopped when that driver leaves, or when it starts a later
/// session (it re-placed them when it lost this node).
type Owned = Arc<Mutex<HashMap<String, (u64, Vec<ActorCell>)>>>;

/// Watches the node's connections. A connection that has not
/// authenticated within the handshake timeout is closed. When an
/// authenticated driver's connection ends, its evaluators are stopped, so
/// a restarted driver does not leave its predecessor's evaluators sampling;
/// a peer that never authenticated owns nothing, whatever name it claimed.
struct Gate {
    owned: Owned,
    sessions: Arc<Mutex<Sessions>>,
    handshake_timeout: Duration,
}

impl NodeEventSubscription for Gate {
    fn node_session_opened(&self, ses: NodeServerSessionInformation) {
        Sessions::opened(&self.sessions, ses, self.handshake_timeout);
    }

    fn node_session_authenticated(&self, ses: NodeServerSessionInformation) {
        lock(&self.sessions).authenticated(&ses);
    }

    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        // A session that outlived a partition ends after its driver
        // dialled in again: the driver is still here, and its next spawn
        // (a later epoch) stops what the old session started.
        let (was_authenticated, driver_still_here) = lock(&self.sessions).ended(&ses);
        let Some(peer) = ses.peer_name.filter(|_| was_authenticated && !driver_still_here) else { return };
        let (_, cells) = lock(&self.owned).remove(&peer.name).unwrap_or_default();
        if !cells.is_empty() {
            tracing::info!(driver = %peer.name, evaluators = cells.len(), "driver left; stopping its evaluators");
        }
        for cell in cells {
            cell.stop(Some(format!("driver {} left", peer.name)));
        }
    }
}

/// Starts evaluators on request.
struct Spawner;

struct SpawnerState {
    resolver: Resolver,
    owned: Owned,
    /// Each driver's evaluators on this node share one supervisor (so
    /// one-for-all spans them); it stops when its last server stops.
    sets: HashMap<String, Weak<RactorEvaluatorSet>>,
    /// Each running evaluator's set and index, by spawn id, for `Stop`.
    spawned: HashMap<String, (Weak<RactorEvaluatorSet>, usize)>,
    /// What the node offers.
    resources: NodeResources,
    max_frame_bytes: u64,
}

impl Actor for Spawner {
    type Msg = Wire<SpawnProtocol>;
    type State = SpawnerState;
    type Arguments = SpawnerState;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: SpawnerState,
    ) -> Result<SpawnerState, ActorProcessingErr> {
        ractor::pg::join(SPAWNER_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut SpawnerState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(reply) = msg.reply else {
            tracing::warn!("spawner: ignored a cast");
            return Ok(());
        };
        let result = match wire::decode::<SpawnerRequest>(&msg.payload) {
            Ok(SpawnerRequest::Ping) => Ok(SpawnerReply::Pong),
            Ok(SpawnerRequest::Describe { driver, epoch }) => {
                enter_epoch(&state.owned, &driver, epoch).map(|()| SpawnerReply::Described(state.resources.clone()))
            }
            Ok(SpawnerRequest::Stop { spawn_id }) => {
                stop_evaluator(state, &spawn_id).await;
                Ok(SpawnerReply::Stopped)
            }
            Ok(SpawnerRequest::Spawn(request)) => {
                spawn_evaluator(myself.get_cell(), state, request).await.map(SpawnerReply::Spawned)
            }
            Err(e) => Err(format!("undecodable spawn request: {e}")),
        };
        send_encoded(reply, &result);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SpawnerState,
    ) -> Result<(), ActorProcessingErr> {
        // An evaluator server ended (its driver left, or it was stopped):
        // forget it; the spawner itself carries on.
        if let SupervisionEvent::ActorTerminated(cell, ..) | SupervisionEvent::ActorFailed(cell, _) = event {
            for (_, cells) in state.owned.lock().expect("owned lock").values_mut() {
                cells.retain(|c| c.get_id() != cell.get_id());
            }
            state.sets.retain(|_, set| set.strong_count() > 0);
            state.spawned.retain(|_, (set, _)| set.strong_count() > 0);
        }
        Ok(())
    }
}

/// Encodes `reply` and sends it to `port`; one that cannot be encoded is
/// logged, and the caller sees its reply port dropped.
fn send_encoded<T: Serialize>(port: RpcReplyPort<Vec<u8>>, reply: &T) {
    match wire::encode(reply) {
        Ok(bytes) => {
            let _ = port.send(bytes);
        }
        Err(e) => tracing::error!("cannot encode a reply: {e}"),
    }
}

/// Stops the evaluator started with `spawn_id`, if it still runs here:
/// it leaves its driver's set first (no restart, and its index is free
/// for a later spawn once this returns), then its server stops.
async fn stop_evaluator(state: &mut SpawnerState, spawn_id: &str) {
    if let Some((set, index)) = state.spawned.remove(spawn_id) {
        if let Some(set) = set.upgrade() {
            set.remove(index).await;
        }
    }
    for cell in ractor::pg::get_members(&wire::eval_group(spawn_id)) {
        if cell.get_id().is_local() {
            cell.stop(Some("moved to another home".into()));
        }
    }
}

/// Checks `request`'s session epoch against the latest one seen from its
/// driver: a later one stops the evaluators of the earlier sessions, an
/// earlier one is refused (a message that outlived its session).
fn enter_epoch(owned: &Owned, driver: &str, epoch: u64) -> Result<(), String> {
    let mut owned = owned.lock().expect("owned lock");
    let (latest, cells) = owned.entry(driver.to_string()).or_insert((epoch, Vec::new()));
    if epoch < *latest {
        return Err(format!("stale session: epoch {epoch} after epoch {latest}"));
    }
    if epoch > *latest {
        if !cells.is_empty() {
            tracing::info!(
                driver,
                evaluators = cells.len(),
                "driver dialled in again; stopping the evaluators of its earlier session"
            );
        }
        for cell in cells.drain(..) {
            cell.stop(Some("its driver started a new session".into()));
        }
        *latest = epoch;
    }
    Ok(())
}

/// The driver's evaluator set on this node for the request's session,
/// started on its first spawn.
async fn driver_set(state: &mut SpawnerState, request: &SpawnRequest) -> Result<Arc<RactorEvaluatorSet>, String> {
    let key = format!("{}#{}", request.driver, request.epoch);
    if let Some(set) = state.sets.get(&key).and_then(Weak::upgrade) {
        return Ok(set);
    }
    let spec = request.spec.clone();
    let factory: EvaluatorFactory =
        std::panic::AssertUnwindSafe((state.resolver)(spec.clone())).catch_unwind().await.map_err(|p| {
            format!("building {} on {} panicked: {}", spec.algorithm, spec.env, rlx::handle::panic_message(&*p))
        })??;
    let (set, _) = RactorEvaluatorSet::spawn(factory, Vec::new(), request.restart).await.map_err(|e| e.to_string())?;
    let set = Arc::new(set);
    state.sets.insert(key, Arc::downgrade(&set));
    Ok(set)
}

async fn spawn_evaluator(
    spawner: ActorCell,
    state: &mut SpawnerState,
    request: SpawnRequest,
) -> Result<SpawnReply, String> {
    enter_epoch(&state.owned, &request.driver, request.epoch)?;
    let set = driver_set(state, &request).await?;
    // A copy of this evaluator the driver no longer uses (a move or a
    // re-placement that did not finish) gives its index up first.
    let stale: Vec<String> = state
        .spawned
        .iter()
        .filter(|(_, (s, index))| *index == request.index && std::ptr::eq(s.as_ptr(), Arc::as_ptr(&set)))
        .map(|(id, _)| id.clone())
        .collect();
    for spawn_id in stale {
        stop_evaluator(state, &spawn_id).await;
    }
    let handle = set.add(request.index, request.generation).await.map_err(|e| e.to_string())?;
    let group = wire::eval_group(&request.spawn_id);
    state.spawned.insert(request.spawn_id.clone(), (Arc::downgrade(&set), request.index));
    let args = ServerArgs {
        set,
        handle,
        group: group.clone(),
        reply_limit: request.driver_max_frame_bytes.saturating_sub(4096),
        request_limit: usize::try_from(state.max_frame_bytes).unwrap_or(usize::MAX),
    };
    let (server, _) = Actor::spawn_linked(None, EvaluatorServer, args, spawner).await.map_err(|e| match e {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    })?;
    let mut owned = state.owned.lock().expect("owned lock");
    owned.entry(request.driver.clone()).or_insert((request.epoch, Vec::new())).1.push(server.get_cell());
    tracing::info!(index = request.index, driver = %request.driver, "started evaluator");
    Ok(SpawnReply { group, max_frame_bytes: state.max_frame_bytes })
}

/// One remote evaluator: decodes the driver's requests and forwards them to
/// a node-local supervised evaluator actor.
pub struct EvaluatorServer;

/// Arguments of an [`EvaluatorServer`].
pub struct ServerArgs {
    set: Arc<RactorEvaluatorSet>,
    handle: RactorEvaluator,
    group: String,
    /// Largest reply the driver accepts.
    reply_limit: u64,
    /// Largest request, uncompressed: the node's configured maximum message.
    request_limit: usize,
}

/// The driver's node-local evaluator set (kept alive) and this evaluator's handle.
pub struct ServerState {
    _set: Arc<RactorEvaluatorSet>,
    handle: RactorEvaluator,
    reply_limit: u64,
    request_limit: usize,
}

impl Actor for EvaluatorServer {
    type Msg = Wire<EvalProtocol>;
    type State = ServerState;
    type Arguments = ServerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ServerArgs,
    ) -> Result<ServerState, ActorProcessingErr> {
        ractor::pg::join(args.group, vec![myself.get_cell()]);
        let (reply_limit, request_limit) = (args.reply_limit, args.request_limit);
        Ok(ServerState { _set: args.set, handle: args.handle, reply_limit, request_limit })
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        let reply = match wire::decode_within::<EvalRequest>(&msg.payload, state.request_limit) {
            Err(e) => Err(WireError::BadRequest(e.to_string())),
            Ok(request) => serve(&state.handle, request).await,
        };
        let Some(port) = msg.reply else {
            if let Err(e) = reply {
                tracing::warn!("evaluator server: a cast failed: {e:?}");
            }
            return Ok(());
        };
        let reply = reply.map(|r| (r, state.handle.stats().restarts));
        let bytes = match wire::encode(&reply) {
            Ok(bytes) if bytes.len() as u64 <= state.reply_limit => {
                if bytes.len() as u64 > ractor_cluster::DEFAULT_MAX_INBOUND_FRAME_SIZE {
                    tracing::info!(
                        "large reply: {} MiB, above ractor_cluster's default frame limit of 16 MiB",
                        bytes.len() >> 20
                    );
                }
                Ok(bytes)
            }
            Ok(bytes) => Err(format!(
                "a reply of {} bytes exceeds the driver's frame limit of {} bytes",
                bytes.len(),
                state.reply_limit
            )),
            Err(e) => Err(e.to_string()),
        };
        match bytes {
            Ok(bytes) => {
                let _ = port.send(bytes);
            }
            Err(e) => send_encoded(port, &Err::<(WireReply, u64), _>(WireError::Unavailable(e))),
        }
        Ok(())
    }
}

/// Runs one request on a (node-local or driver-local) evaluator handle.
pub(crate) async fn serve(handle: &RactorEvaluator, request: EvalRequest) -> Result<WireReply, WireError> {
    let reply = match request {
        // Sent as a cast: applied before the evaluator's next request.
        EvalRequest::PushWeights(_) => {
            handle.cast(request);
            EvalReply::Done
        }
        request => handle.call(request).await.map_err(WireError::from_handle)?,
    };
    WireReply::new(reply).map_err(|e| WireError::Unavailable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_address_needs_a_host_and_a_port_number() {
        assert!(check_join_address("10.0.0.1:7100").is_ok());
        assert!(check_join_address("driver.example:7100").is_ok());
        assert!(check_join_address("[::1]:7100").is_ok());
        assert_eq!(check_join_address("driver").unwrap_err(), "`driver` is not HOST:PORT (no port)");
        assert_eq!(check_join_address(":7100").unwrap_err(), "`:7100` is not HOST:PORT (no host)");
        let e = check_join_address("driver:http").unwrap_err();
        assert_eq!(e, "`driver:http` is not HOST:PORT (`http` is not a port number)");
    }
}
