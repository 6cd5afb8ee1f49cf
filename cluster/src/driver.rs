//! The driver's side of a cluster: connect to nodes, place evaluators on
//! them, and keep every evaluator somewhere while nodes come and go.
//!
//! ```text
//! Cluster (the Placement; one per run)     budget: node losses (`node_restart`)
//!   ├── node A watcher (heartbeat) ── spawner ── driver's set on A: evaluators 1, 3, …
//!   ├── node B watcher (heartbeat) ── spawner ── driver's set on B: evaluators 2, 4, …
//!   └── local fallback: RactorEvaluatorSets for evaluators with no node left
//! ```
//!
//! Failure handling, per level:
//! - **On the node**, an evaluator that panics is restarted by the
//!   supervisor of this driver's evaluators on that node, with the run's
//!   `restart` policy exactly as locally (one-for-all restarts every
//!   evaluator of the driver on that node); past that budget the driver gets
//!   [`HandleError::RestartBudgetExceeded`].
//! - **A node that dies or hangs**: its watcher's heartbeat goes unanswered
//!   for `node_timeout` (or its session ends, or a call times out). The node
//!   is marked down and its session closed; every handle using it stops
//!   waiting, re-places its evaluator on the next live node (or in this
//!   process if none is left) with the latest weights and filter statistics,
//!   and retries the call. Lost nodes count against their own budget,
//!   `node_restart` (the run's `restart` unless set), one failure per node
//!   however many evaluators it hosted; they are listed in
//!   [`Cluster::failures`] and their re-placements count as restarts.

use crate::admission::{self, Admission, DriverTls, NodeTls};
use crate::gatekeeper::{self, Gatekeeper, Sessions};
use crate::node::{serve, DEFAULT_MAX_FRAME_BYTES};
use crate::resources::{Fallback, NodeResources, Placing, Strategy};
use crate::wire::{
    self, EvalProtocol, EvalRequest, SpawnProtocol, SpawnRequest, SpawnSpec, SpawnerReply, SpawnerRequest, Wire,
    WireReply,
};
use crate::ClusterError;
use futures::future::BoxFuture;
use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef};
use ractor_cluster::node::NodeSessionMessage;
use ractor_cluster::NodeServerMessage;
use rlx::actor::{RactorEvaluator, RactorEvaluatorSet};
use rlx::handle::{lock, HandleStats, SharedHandle};
use rlx::placement::{ClusterStatus, PlacedWorkers, Placement, WorkerSet};
use rlx::protocol::{EvalReply, LatestState, RowShape};
use rlx::restart::{FailureWindow, RestartPolicy, RestartStrategy};
use rlx::{EvaluatorError, EvaluatorFactory, EvaluatorHandle, HandleError};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

/// How the driver talks to its nodes.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The shared secret.
    pub cookie: String,
    /// How long a node gets to accept and authenticate the driver.
    pub connect_timeout: Duration,
    /// How long one evaluator request may take before its node is presumed
    /// dead (a remote request whose reply is lost is otherwise never answered).
    pub call_timeout: Duration,
    /// How often the driver pings each node's spawner.
    pub heartbeat: Duration,
    /// A node whose spawner has not answered a ping for this long is lost
    /// (it hangs, or its machine is gone without closing the connection).
    pub node_timeout: Duration,
    /// The budget for lost nodes (the driver's level of supervision);
    /// `None`: the run's `restart` policy. Must be one-for-one.
    pub node_restart: Option<RestartPolicy>,
    /// Largest frame the driver accepts, in bytes.
    pub max_frame_bytes: u64,
    /// TLS to every node (`None`: plaintext TCP).
    pub tls: Option<DriverTls>,
    /// The longest wait between two dials of a lost node: the wait starts
    /// at `heartbeat` and doubles after each failed dial up to this.
    pub redial_max: Duration,
    /// What each evaluator needs, how evaluators spread, and what happens
    /// to one that fits no node.
    pub placing: Placing,
    /// Where nodes started with `rlx node --join` dial in (`None`: only
    /// the nodes the driver dials). With [`tls`](Self::tls) and its
    /// `identity`, the driver serves TLS there with that certificate.
    pub listen: Option<SocketAddr>,
    /// Connections [`listen`](Self::listen) holds at once: nodes joined
    /// and handshakes under way. More are closed as they are accepted.
    pub max_node_connections: usize,
}

/// The default [`ClusterOptions::max_node_connections`]: a node's own
/// limit (64, for the drivers that dial it) would cap a cluster at 64
/// joined nodes.
pub const DEFAULT_MAX_NODE_CONNECTIONS: usize = 1024;

impl ClusterOptions {
    /// Defaults for `cookie`: 5 s to connect, 120 s per request, a
    /// heartbeat every second with a 10 s node timeout, the run's restart
    /// budget for lost nodes, 256 MiB frames, lost nodes re-dialled at
    /// least every 30 s, up to 1,024 nodes joined.
    pub fn new(cookie: impl Into<String>) -> Self {
        Self {
            cookie: cookie.into(),
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(120),
            heartbeat: Duration::from_secs(1),
            node_timeout: Duration::from_secs(10),
            node_restart: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            tls: None,
            redial_max: Duration::from_secs(30),
            placing: Placing::default(),
            listen: None,
            max_node_connections: DEFAULT_MAX_NODE_CONNECTIONS,
        }
    }

    /// Checks the options make sense together.
    ///
    /// # Errors
    /// A zero duration, a heartbeat not shorter than the node timeout, a
    /// zero `max_node_connections`, or a one-for-all `node_restart`; the
    /// message names the option.
    pub fn validate(&self) -> Result<(), String> {
        for (name, d) in [
            ("connect_timeout_s", self.connect_timeout),
            ("call_timeout_s", self.call_timeout),
            ("heartbeat_s", self.heartbeat),
            ("node_timeout_s", self.node_timeout),
            ("redial_max_s", self.redial_max),
        ] {
            if d.is_zero() {
                return Err(format!("{name} must be positive"));
            }
        }
        if self.max_node_connections == 0 {
            return Err("max_node_connections must be at least 1".into());
        }
        if self.heartbeat >= self.node_timeout {
            return Err(format!(
                "heartbeat_s ({:?}) must be shorter than node_timeout_s ({:?})",
                self.heartbeat, self.node_timeout
            ));
        }
        self.placing.request.validate()?;
        if self.listen.is_some() && self.tls.as_ref().is_some_and(|t| t.identity.is_none()) {
            return Err("nodes that join over TLS check the driver's certificate: give cluster.tls.cert and \
                        cluster.tls.key (--tls-cert, --tls-key) with --node-listen"
                .into());
        }
        if self.node_restart.is_some_and(|p| p.strategy == RestartStrategy::OneForAll) {
            return Err("node_restart.strategy must be one_for_one: a lost node's evaluators are re-placed, \
                        and evaluators on other nodes have nothing to restart from (one_for_all applies to \
                        the evaluators on one node, through the run's `restart`)"
                .into());
        }
        Ok(())
    }
}

/// The host part of `HOST:PORT` (`[::1]:7000` gives `::1`), the name a
/// node's TLS certificate is checked against by default.
pub(crate) fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']').to_string()
}

/// One process, one NodeServer: ractor_cluster numbers nodes per
/// NodeServer, and process groups are process-wide.
static CONNECTED: AtomicBool = AtomicBool::new(false);

/// A connection to a set of nodes; the [`Placement`] that puts evaluators
/// on them. Dropping the last clone disconnects (and the nodes stop this
/// driver's evaluators).
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<Shared>,
}

struct Shared {
    server: ActorRef<NodeServerMessage>,
    /// The cookie, for the admission handshake.
    admission: Admission,
    tls: Option<(TlsConnector, DriverTls)>,
    /// This driver's node name, as nodes see it.
    name: String,
    spec: SpawnSpec,
    options: ClusterOptions,
    nodes: Mutex<Vec<NodeLink>>,
    /// This run's evaluators on each node (by node id), those started for
    /// a move included: what the node has left is its offer less that
    /// many requests.
    homes: Mutex<BTreeMap<u64, usize>>,
    /// Held while choosing a node and spawning there, so that two
    /// placements never take the same room.
    placing: tokio::sync::Mutex<()>,
    /// Evaluators that were told they wait for room (said once each).
    waiting: Mutex<std::collections::BTreeSet<usize>>,
    /// Re-placements so far.
    replacements: AtomicU64,
    /// Node-side restarts, per evaluator, as last reported by its current node.
    node_restarts: Mutex<BTreeMap<usize, u64>>,
    /// Node-side restarts on nodes since lost.
    retired_restarts: AtomicU64,
    /// Evaluators running in this process because no node was left, by index.
    local: Mutex<BTreeMap<usize, RactorEvaluatorSet>>,
    failures: Mutex<Vec<String>>,
    /// Peer addresses whose sessions ended (from the NodeServer's events).
    closed: Arc<Mutex<Vec<String>>>,
    /// Lost nodes inside the restart window (a lost node is one failure,
    /// however many evaluators it hosted).
    window: Mutex<Option<FailureWindow>>,
    /// Set once lost nodes exceed the restart budget: every handle then fails.
    exhausted: Mutex<Option<(usize, String)>>,
    restart: Mutex<Option<RestartPolicy>>,
    /// One heartbeat task per node.
    watchers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The widths of the evaluators' batch rows, from the env's spaces
    /// (read off one evaluator built here at the first placement; `None`
    /// if that build failed), to check every batch a node returns.
    row_shape: OnceLock<Option<RowShape>>,
    /// The nodes given at start (resolved, with the host name a TLS
    /// certificate is checked against): each is dialled again while it
    /// is not admitted.
    known: Vec<(SocketAddr, String)>,
    /// Sessions opened so far; each admission's spawns carry its number.
    epochs: AtomicU64,
    /// Node losses so far.
    losses: AtomicU64,
    /// Nodes admitted again after they were lost (or refused at start).
    readmissions: AtomicU64,
    /// Evaluators moved while their old home still worked.
    moves: AtomicU64,
    /// Every evaluator this cluster placed, to move them as nodes return.
    evaluators: Mutex<Vec<Weak<RemoteEvaluator>>>,
    /// Evaluators whose calls timed out on nodes that still answered
    /// heartbeats, within the run's `restart` window.
    stuck: Mutex<Option<FailureWindow>>,
    /// Wall time with fewer evaluators on nodes than were placed.
    below_target: Mutex<BelowTarget>,
    /// The last cluster line printed, to print it again only on a change.
    shown: Mutex<Option<(u64, u64, u64)>>,
    /// The names of the nodes that joined (dialled in) so far.
    joined: Mutex<std::collections::BTreeSet<String>>,
    /// The sessions of the listener for joining nodes, for its limits.
    sessions: Arc<Mutex<Sessions>>,
}

/// Time spent below the evaluator target, added up as membership ticks.
#[derive(Default)]
struct BelowTarget {
    since: Option<Instant>,
    total: Duration,
}

#[derive(Clone)]
struct NodeLink {
    addr: SocketAddr,
    node_id: u64,
    spawner: ActorRef<Wire<SpawnProtocol>>,
    /// The driver's session with the node; stopping it closes the connection.
    session: ActorRef<NodeSessionMessage>,
    up: bool,
    /// Turns `true` once the node is lost: handles waiting on it give up.
    down: Arc<watch::Sender<bool>>,
    /// This session's number, sent with every spawn (see [`SpawnRequest::epoch`]).
    epoch: u64,
    /// What the node offers (it says so when admitted).
    resources: NodeResources,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for watcher in self.watchers.lock().expect("watchers lock").drain(..) {
            watcher.abort();
        }
        self.server.stop(Some("cluster dropped".into()));
        CONNECTED.store(false, Ordering::SeqCst);
    }
}

impl Cluster {
    /// Connects to every node in `addrs` (`HOST:PORT`) that answers with the
    /// right cookie; evaluators then run the build described by `spec`.
    /// Nodes that refuse (wrong cookie, not an rlx node, not listening) are
    /// reported in [`failures`](Self::failures) and skipped.
    ///
    /// # Errors
    /// A malformed address, a second cluster in this process, or no usable
    /// node at all (each node's reason is listed).
    pub async fn connect(addrs: &[String], spec: SpawnSpec, options: ClusterOptions) -> Result<Self, ClusterError> {
        options.validate().map_err(ClusterError::Options)?;
        let tls = match &options.tls {
            Some(settings) => Some((settings.connector().map_err(ClusterError::Options)?, settings.clone())),
            None => None,
        };
        let mut resolved: Vec<(SocketAddr, String)> = Vec::new();
        for addr in addrs {
            let found = tokio::net::lookup_host(addr.as_str())
                .await
                .map_err(|e| ClusterError::Address { addr: addr.clone(), reason: e.to_string() })?
                .next()
                .ok_or_else(|| ClusterError::Address { addr: addr.clone(), reason: "resolves to nothing".into() })?;
            if !resolved.iter().any(|(a, _)| *a == found) {
                resolved.push((found, host_of(addr)));
            }
        }
        if CONNECTED.swap(true, Ordering::SeqCst) {
            return Err(ClusterError::Actor("this process is already connected to a cluster".into()));
        }
        // A previous connection's remote actors leave the process groups
        // as its NodeServer shuts down; node ids restart at 0, so wait for
        // them to be gone rather than mistake one for a new node's.
        let deadline = Instant::now() + Duration::from_secs(5);
        while ractor::pg::get_members(&wire::SPAWNER_GROUP.to_string()).iter().any(|c| !c.get_id().is_local())
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Unique across machines: nodes key a driver's evaluators by its name.
        let node_name = format!("driver-{}-{:08x}", std::process::id(), rand::random::<u32>());
        let server = match crate::start_node_server(&node_name, &options.cookie, options.max_frame_bytes).await {
            Ok(server) => server,
            Err(e) => {
                CONNECTED.store(false, Ordering::SeqCst);
                return Err(e);
            }
        };
        let closed: Arc<Mutex<Vec<String>>> = Arc::default();
        let sessions: Arc<Mutex<Sessions>> = Arc::default();
        let events =
            DriverSessions { closed: closed.clone(), sessions: sessions.clone(), timeout: options.connect_timeout };
        let _ = server
            .cast(NodeServerMessage::SubscribeToEvents { id: "rlx.driver".into(), subscription: Box::new(events) });
        let shared = Arc::new(Shared {
            known: resolved.clone(),
            epochs: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            readmissions: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            evaluators: Mutex::default(),
            stuck: Mutex::new(None),
            below_target: Mutex::default(),
            shown: Mutex::new(None),
            joined: Mutex::default(),
            sessions: sessions.clone(),
            closed,
            server,
            admission: Admission::new(&options.cookie),
            tls,
            name: format!("{node_name}@{}", crate::hostname()),
            spec,
            options,
            nodes: Mutex::new(Vec::new()),
            homes: Mutex::default(),
            placing: tokio::sync::Mutex::new(()),
            waiting: Mutex::default(),
            replacements: AtomicU64::new(0),
            node_restarts: Mutex::default(),
            retired_restarts: AtomicU64::new(0),
            local: Mutex::default(),
            failures: Mutex::default(),
            window: Mutex::new(None),
            exhausted: Mutex::new(None),
            restart: Mutex::new(None),
            watchers: Mutex::default(),
            row_shape: OnceLock::new(),
        });
        let joined = futures::future::join_all(resolved.iter().map(|(a, host)| shared.join(*a, host))).await;
        let mut refused = Vec::new();
        for ((addr, _), result) in resolved.iter().zip(joined) {
            match result {
                Ok(link) => shared.nodes.lock().expect("nodes lock").push(link),
                Err(reason) => {
                    let line = format!("node {addr} refused: {reason}");
                    tracing::warn!("{line}");
                    shared.failures.lock().expect("failures lock").push(line.clone());
                    refused.push(line);
                }
            }
        }
        let links = shared.nodes.lock().expect("nodes lock").clone();
        if links.is_empty() && shared.options.listen.is_none() {
            return Err(ClusterError::NoNodes(refused));
        }
        if let Some(listen) = shared.options.listen {
            let door = shared.listen(listen).await?;
            shared.watchers.lock().expect("watchers lock").push(door);
        }
        let watchers = links.into_iter().map(|link| tokio::spawn(watch_node(Arc::downgrade(&shared), link)));
        shared.watchers.lock().expect("watchers lock").extend(watchers);
        let members = tokio::spawn(keep_members(Arc::downgrade(&shared)));
        shared.watchers.lock().expect("watchers lock").push(members);
        Ok(Self { shared })
    }

    /// The addresses of the nodes in use (those still up).
    pub fn live_nodes(&self) -> Vec<SocketAddr> {
        self.shared.nodes.lock().expect("nodes lock").iter().filter(|n| n.up).map(|n| n.addr).collect()
    }

    /// What went wrong so far: refused nodes, lost nodes, re-placed evaluators.
    pub fn failures(&self) -> Vec<String> {
        self.shared.failures.lock().expect("failures lock").clone()
    }

    /// Evaluators re-placed after their node was lost.
    pub fn replacements(&self) -> u64 {
        self.shared.replacements.load(Ordering::Relaxed)
    }

    /// Where the evaluators are now, and what membership did so far.
    pub fn status(&self) -> ClusterStatus {
        self.shared.status()
    }
}

impl Shared {
    /// Dials `addr` (TLS if configured, checked against `host`), proves
    /// the cookie, and waits until the session is authenticated and the
    /// node's spawner is visible.
    async fn join(&self, addr: SocketAddr, host: &str) -> Result<NodeLink, String> {
        let timeout = self.options.connect_timeout;
        // Only sessions that end from here on say anything about this dial.
        let closed_before = self.closed.lock().expect("closed lock").len();
        admission::connect(&self.server, addr, host, self.tls.as_ref(), &self.admission, timeout)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let deadline = Instant::now() + timeout;
        let addr_text = addr.to_string();
        loop {
            if let Some(mut link) = self.find_spawner(addr).await {
                link.resources = self.describe(&link).await?;
                tracing::info!("node {addr} offers {}", link.resources);
                return Ok(link);
            }
            if self.closed.lock().expect("closed lock")[closed_before..].contains(&addr_text) {
                return Err(
                    "it closed the connection during the handshake: wrong cookie? (the node's log says why)".into()
                );
            }
            if Instant::now() > deadline {
                return Err(format!("not ready within {timeout:?}: not an rlx node, or overloaded"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn find_spawner(&self, addr: SocketAddr) -> Option<NodeLink> {
        let sessions = self.server.call(NodeServerMessage::GetSessions, Some(Duration::from_secs(1))).await.ok()?;
        let CallResult::Success(sessions) = sessions else { return None };
        let addr_text = addr.to_string();
        let spawners = ractor::pg::get_members(&wire::SPAWNER_GROUP.to_string());
        // A lost session to the same address may not be gone yet: take
        // the one whose spawner is visible.
        let (session, cell) = sessions.values().filter(|s| s.peer_addr == addr_text).find_map(|s| {
            let cell = spawners.iter().find(|c| !c.get_id().is_local() && c.get_id().node() == s.node_id)?;
            Some((s, cell.clone()))
        })?;
        let node_id = session.node_id;
        if self.nodes.lock().expect("nodes lock").iter().any(|n| n.node_id == node_id && !n.up) {
            return None;
        }
        Some(self.new_link(addr, node_id, cell, session.actor.clone()))
    }

    /// A link for a new session with a node (up, with the next epoch); its
    /// resources come with [`describe`](Self::describe).
    fn new_link(
        &self,
        addr: SocketAddr,
        node_id: u64,
        spawner: ActorCell,
        session: ActorRef<NodeSessionMessage>,
    ) -> NodeLink {
        NodeLink {
            addr,
            node_id,
            spawner: spawner.into(),
            session,
            up: true,
            down: Arc::new(watch::channel(false).0),
            epoch: self.epochs.fetch_add(1, Ordering::Relaxed) + 1,
            resources: NodeResources::default(),
        }
    }

    /// Asks a node what it offers.
    async fn describe(&self, link: &NodeLink) -> Result<NodeResources, String> {
        let request = SpawnerRequest::Describe { driver: self.name.clone(), epoch: link.epoch };
        let payload = wire::encode(&request).map_err(|e| e.to_string())?;
        let timeout = self.options.connect_timeout;
        let answer = link.spawner.call(|reply| Wire::call(payload, reply), Some(timeout)).await;
        let Ok(CallResult::Success(bytes)) = answer else {
            return Err(format!("it did not say what it offers within {timeout:?}"));
        };
        match wire::decode::<Result<SpawnerReply, String>>(&bytes) {
            Ok(Ok(SpawnerReply::Described(resources))) => Ok(resources),
            Ok(Err(e)) => Err(format!("it cannot say what it offers: {e}")),
            Ok(Ok(_)) | Err(_) => Err("it answered `Describe` with something else (another rlx version?)".into()),
        }
    }

    /// The budget for lost nodes.
    fn node_policy(&self) -> RestartPolicy {
        self.options.node_restart.or(*self.restart.lock().expect("restart lock")).unwrap_or_default()
    }

    /// Marks a node down (once), recording why, and closes its session (so
    /// a node that only hung stops this driver's evaluators when it wakes);
    /// a lost node counts once against the node budget.
    fn node_lost(&self, node_id: u64, reason: &str) {
        let mut nodes = self.nodes.lock().expect("nodes lock");
        let Some(n) = nodes.iter_mut().find(|n| n.node_id == node_id && n.up) else { return };
        n.up = false;
        self.homes.lock().expect("homes lock").remove(&node_id);
        n.down.send_replace(true);
        n.session.stop(Some(format!("node lost: {reason}")));
        self.losses.fetch_add(1, Ordering::Relaxed);
        let line = format!("node {} lost: {reason}", n.addr);
        tracing::warn!("{line}");
        self.failures.lock().expect("failures lock").push(line.clone());
        let policy = self.node_policy();
        let mut window = self.window.lock().expect("window lock");
        if let Err(failures) = window.get_or_insert_with(|| FailureWindow::new(policy)).record() {
            *self.exhausted.lock().expect("exhausted lock") = Some((failures, line));
        }
    }

    /// Where the next evaluator goes: among the live nodes with room for
    /// its request (other than `except`), the one with the fewest of this
    /// run's evaluators per CPU (spread; the first in the order given on
    /// ties) or the first in the order given (pack).
    fn pick(&self, except: Option<u64>) -> Pick {
        let nodes = self.nodes.lock().expect("nodes lock");
        let homes = self.homes.lock().expect("homes lock");
        let request = &self.options.placing.request;
        let live: Vec<&NodeLink> = nodes.iter().filter(|n| n.up).collect();
        if live.is_empty() {
            return Pick::NoNode;
        }
        let order = |n: &NodeLink| self.known.iter().position(|(a, _)| *a == n.addr).unwrap_or(usize::MAX);
        let crowding =
            |n: &NodeLink| (homes.get(&n.node_id).copied().unwrap_or(0) + 1) as f64 / n.resources.num_cpus.max(1e-9);
        let room = |n: &&&NodeLink| {
            let mut free = n.resources.clone();
            request.take_from(&mut free, homes.get(&n.node_id).copied().unwrap_or(0) as f64);
            Some(n.node_id) != except && request.fits(&free)
        };
        let chosen = match self.options.placing.strategy {
            Strategy::Spread => live
                .iter()
                .filter(room)
                .min_by(|a, b| crowding(a).total_cmp(&crowding(b)).then(order(a).cmp(&order(b)))),
            Strategy::Pack => live.iter().filter(room).min_by_key(|n| order(n)),
        };
        chosen.map_or(Pick::NoRoom, |n| Pick::Node((*n).clone()))
    }

    /// The line that says an evaluator waits: what it needs, and what each
    /// live node offers and holds of this run.
    fn no_room(&self, index: usize) -> String {
        let nodes = self.nodes.lock().expect("nodes lock");
        let homes = self.homes.lock().expect("homes lock");
        let offers: Vec<String> = nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| {
                let held = homes.get(&n.node_id).copied().unwrap_or(0);
                format!("node {} offers {} and holds {held} of this run's evaluators", n.addr, n.resources)
            })
            .collect();
        format!(
            "evaluator {index} waits for a node with room: it needs {}; {}",
            self.options.placing.request,
            offers.join("; ")
        )
    }

    /// Starts evaluator `index` on a live node with room for it (see
    /// [`pick`](Self::pick)). In this process instead when no node is left
    /// at all, or when none has room and `placement_fallback` is `local`;
    /// with `wait`, it waits for room, saying so once. `generation` is its
    /// first generation there.
    async fn place(
        &self,
        index: usize,
        generation: u64,
        restart: RestartPolicy,
        factory: &EvaluatorFactory,
    ) -> Result<Home, HandleError> {
        loop {
            let one_at_a_time = self.placing.lock().await;
            let node = match self.pick(None) {
                Pick::Node(node) => node,
                Pick::NoNode => break,
                Pick::NoRoom if self.options.placing.fallback == Fallback::Local => break,
                Pick::NoRoom => {
                    drop(one_at_a_time);
                    if self.waiting.lock().expect("waiting lock").insert(index) {
                        tracing::warn!("{}", self.no_room(index));
                    }
                    tokio::time::sleep(self.options.heartbeat).await;
                    continue;
                }
            };
            match self.spawn_on(&node, index, generation, restart).await {
                Ok(home) => {
                    self.waiting.lock().expect("waiting lock").remove(&index);
                    return Ok(home);
                }
                Err(SpawnFailure::Node(reason)) => self.node_lost(node.node_id, &reason),
                Err(SpawnFailure::Evaluator(reason)) => return Err(HandleError::Spawn { index, reason }),
            }
        }
        let (set, _) = RactorEvaluatorSet::spawn(factory.clone(), Vec::new(), restart).await?;
        let handle = set.add(index, generation).await?;
        self.local.lock().expect("local lock").insert(index, set);
        Ok(Home::Local(Arc::new(handle)))
    }

    async fn spawn_on(
        &self,
        node: &NodeLink,
        index: usize,
        generation: u64,
        restart: RestartPolicy,
    ) -> Result<Home, SpawnFailure> {
        let spawn_id = format!("{}-{index}-{:016x}", std::process::id(), rand::random::<u64>());
        let request = SpawnerRequest::Spawn(SpawnRequest {
            spec: self.spec.clone(),
            index,
            generation,
            restart,
            spawn_id: spawn_id.clone(),
            driver: self.name.clone(),
            driver_max_frame_bytes: self.options.max_frame_bytes,
            epoch: node.epoch,
        });
        let payload = wire::encode(&request).map_err(|e| SpawnFailure::Evaluator(e.to_string()))?;
        // A spawn builds an evaluator (the first one of a session rebuilds
        // the trainer); the spawner answers no heartbeat meanwhile, so it
        // may take as long as a node may stay silent.
        let timeout = self.options.call_timeout.max(self.options.node_timeout);
        let mut down = node.down.subscribe();
        let answer = tokio::select! {
            answer = node.spawner.call(|reply| Wire::call(payload, reply), Some(timeout)) => answer,
            () = marked_lost(&mut down) => return Err(SpawnFailure::Node("lost while spawning".into())),
        };
        let bytes = match answer {
            Ok(CallResult::Success(bytes)) => bytes,
            Ok(CallResult::Timeout) => {
                return Err(SpawnFailure::Node(format!("spawn request timed out after {timeout:?}")))
            }
            Ok(CallResult::SenderError) | Err(_) => return Err(SpawnFailure::Node("connection lost".into())),
        };
        let reply: Result<SpawnerReply, String> =
            wire::decode(&bytes).map_err(|e| SpawnFailure::Node(format!("undecodable spawn reply: {e}")))?;
        let SpawnerReply::Spawned(reply) = reply.map_err(SpawnFailure::Evaluator)? else {
            return Err(SpawnFailure::Node("the spawner answered a spawn request with a pong".into()));
        };
        // The evaluator's group reaches this process shortly after the reply.
        let deadline = Instant::now() + self.options.connect_timeout;
        loop {
            let member = ractor::pg::get_members(&reply.group)
                .into_iter()
                .find(|c: &ActorCell| !c.get_id().is_local() && c.get_id().node() == node.node_id);
            if let Some(cell) = member {
                *self.homes.lock().expect("homes lock").entry(node.node_id).or_default() += 1;
                return Ok(Home::Remote {
                    actor: cell.into(),
                    node_id: node.node_id,
                    addr: node.addr,
                    max_frame_bytes: reply.max_frame_bytes,
                    down,
                    spawn_id,
                });
            }
            if Instant::now() > deadline {
                return Err(SpawnFailure::Node(format!("evaluator group {} never appeared", reply.group)));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Books a re-placement; fails once lost nodes exceed their budget.
    fn record_replacement(&self, index: usize, reason: &str) -> Result<(), HandleError> {
        if let Some((failures, last_failure)) = self.exhausted.lock().expect("exhausted lock").clone() {
            let budget = self.node_policy();
            return Err(HandleError::RestartBudgetExceeded {
                index,
                failures,
                max_restarts: budget.max_restarts,
                window_s: budget.window_s,
                last_failure,
            });
        }
        self.replacements.fetch_add(1, Ordering::Relaxed);
        self.failures.lock().expect("failures lock").push(format!("evaluator {index} re-placed: {reason}"));
        Ok(())
    }
}

impl Shared {
    /// Admits a node again (a new session, with its own watcher); its
    /// evaluators are placed by [`rebalance`](Self::rebalance).
    fn readmit(self: &Arc<Self>, link: NodeLink) {
        let addr = link.addr;
        {
            let mut nodes = self.nodes.lock().expect("nodes lock");
            nodes.retain(|n| n.addr != addr);
            nodes.push(link.clone());
        }
        self.readmissions.fetch_add(1, Ordering::Relaxed);
        tracing::info!("node {addr} admitted again (session {})", link.epoch);
        let watcher = tokio::spawn(watch_node(Arc::downgrade(self), link));
        self.watchers.lock().expect("watchers lock").push(watcher);
    }

    /// The evaluators placed so far that are still in use.
    fn placed(&self) -> Vec<Arc<RemoteEvaluator>> {
        let mut evaluators = self.evaluators.lock().expect("evaluators lock");
        evaluators.retain(|e| e.strong_count() > 0);
        evaluators.iter().filter_map(Weak::upgrade).collect()
    }

    /// Prepares moves toward the target: each evaluator in this process,
    /// and (when spreading) each on a node more crowded per CPU than
    /// another with room would be after taking it, gets a home there,
    /// started here in the background; the evaluator's own next request
    /// hands its state over (see [`RemoteEvaluator::hand_over`]).
    async fn rebalance(&self) {
        // Room goes to evaluators that wait for it first: a move would take
        // room that frees only when the moved evaluator's next call comes.
        if !self.waiting.lock().expect("waiting lock").is_empty() {
            return;
        }
        let evaluators = self.placed();
        // Evaluators with a move prepared still count on their old node
        // until they hand over: they are leaving it.
        let leaving = |id: u64| {
            let on = |home: &Home| matches!(home, Home::Remote { node_id, .. } if *node_id == id);
            evaluators.iter().filter(|x| lock(&x.prepared).is_some() && on(&lock(&x.home).0)).count()
        };
        for e in &evaluators {
            if lock(&e.prepared).is_some() {
                continue;
            }
            let one_at_a_time = self.placing.lock().await;
            // An evaluator being re-placed is left alone until it has its
            // new home: between `place` and storing that home, the old one
            // would be read here, and a second copy started beside the new
            // one would make its node stop the new one. Held until the
            // prepared home is stored.
            let Ok(_not_replacing) = e.replacing.try_lock() else { continue };
            let (home, placement) = lock(&e.home).clone();
            let from = match &home {
                Home::Local(_) => None,
                Home::Remote { .. } if self.options.placing.strategy == Strategy::Pack => continue,
                Home::Remote { node_id, .. } => Some(*node_id),
            };
            let Pick::Node(node) = self.pick(from) else { continue };
            if let Some(from) = from {
                let left = leaving(from);
                // Locks in the order `pick` takes them: nodes, then homes.
                let nodes = self.nodes.lock().expect("nodes lock");
                let homes = self.homes.lock().expect("homes lock");
                let per_cpu = |id: u64, held: usize| {
                    let cpus = nodes.iter().find(|n| n.node_id == id && n.up)?.resources.num_cpus;
                    Some(held as f64 / cpus.max(1e-9))
                };
                let held = |id: u64| homes.get(&id).copied().unwrap_or(0);
                // A node that is down: the evaluator's next call re-places it.
                let now = per_cpu(from, held(from).saturating_sub(left));
                let (Some(now), Some(after)) = (now, per_cpu(node.node_id, held(node.node_id) + 1)) else { continue };
                if after >= now {
                    continue;
                }
            }
            let generation = (placement + 1) << GENERATIONS_PER_PLACEMENT_BITS;
            match self.spawn_on(&node, e.index, generation, e.restart).await {
                Ok(prepared) => {
                    let extra = {
                        let mut slot = lock(&e.prepared);
                        match *slot {
                            None => {
                                *slot = Some((prepared, placement));
                                None
                            }
                            Some(_) => Some(prepared),
                        }
                    };
                    if let Some(extra) = extra {
                        self.retire(e.index, &extra).await;
                    }
                }
                Err(SpawnFailure::Node(reason)) => self.node_lost(node.node_id, &reason),
                Err(SpawnFailure::Evaluator(reason)) => {
                    tracing::warn!(index = e.index, "cannot move the evaluator to node {}: {reason}", node.addr);
                }
            }
            drop(one_at_a_time);
        }
    }

    /// Stops an evaluator's former home: on its node (if that still
    /// answers) or in this process. Restarts counted there stay counted.
    async fn retire(&self, index: usize, home: &Home) {
        match home {
            Home::Local(_) => {
                let set = self.local.lock().expect("local lock").remove(&index);
                if let Some(set) = set {
                    self.retired_restarts.fetch_add(set.restarts(), Ordering::Relaxed);
                }
            }
            Home::Remote { node_id, spawn_id, .. } => {
                if let Some(held) = self.homes.lock().expect("homes lock").get_mut(node_id) {
                    *held = held.saturating_sub(1);
                }
                let spawner = self
                    .nodes
                    .lock()
                    .expect("nodes lock")
                    .iter()
                    .find(|n| n.node_id == *node_id && n.up)
                    .map(|n| n.spawner.clone());
                let request = SpawnerRequest::Stop { spawn_id: spawn_id.clone() };
                if let (Some(spawner), Ok(payload)) = (spawner, wire::encode(&request)) {
                    let _ = spawner.call(|reply| Wire::call(payload, reply), Some(self.options.connect_timeout)).await;
                }
            }
        }
    }

    /// Books an evaluator whose call timed out on a node that still
    /// answers heartbeats; fails past the run's `restart` budget.
    fn record_stuck(&self, index: usize, reason: &str) -> Result<(), HandleError> {
        let policy = (*self.restart.lock().expect("restart lock")).unwrap_or_default();
        let mut window = self.stuck.lock().expect("stuck lock");
        if let Err(failures) = window.get_or_insert_with(|| FailureWindow::new(policy)).record() {
            return Err(HandleError::RestartBudgetExceeded {
                index,
                failures,
                max_restarts: policy.max_restarts,
                window_s: policy.window_s,
                last_failure: reason.to_string(),
            });
        }
        Ok(())
    }

    /// The cluster as the results show it; also adds up the time below
    /// the evaluator target.
    fn status(&self) -> ClusterStatus {
        let alive: Vec<u64> =
            self.nodes.lock().expect("nodes lock").iter().filter(|n| n.up).map(|n| n.node_id).collect();
        let evaluators = self.placed();
        let on_nodes = evaluators
            .iter()
            .filter(|e| matches!(&lock(&e.home).0, Home::Remote { node_id, .. } if alive.contains(node_id)))
            .count() as u64;
        let local = self.local.lock().expect("local lock").len() as u64;
        let target = evaluators.len() as u64;
        let seconds_below_target = {
            let mut below = self.below_target.lock().expect("below-target lock");
            let now = Instant::now();
            if let Some(since) = below.since.take() {
                below.total += now - since;
            }
            below.since = (on_nodes < target).then_some(now);
            below.total.as_secs_f64()
        };
        ClusterStatus {
            nodes_alive: alive.len() as u64,
            nodes_known: (self.known.len() + self.joined.lock().expect("joined lock").len()) as u64,
            nodes_lost: self.losses.load(Ordering::Relaxed),
            readmissions: self.readmissions.load(Ordering::Relaxed),
            evaluators_on_nodes: on_nodes,
            evaluators_local: local,
            evaluators_target: target,
            seconds_below_target,
            moves: self.moves.load(Ordering::Relaxed),
        }
    }

    /// Logs the cluster when its shape changed since the last line.
    fn show(&self) {
        let s = self.status();
        if s.evaluators_target == 0 {
            return;
        }
        let shape = (s.nodes_alive, s.evaluators_on_nodes, s.evaluators_local);
        if self.shown.lock().expect("shown lock").replace(shape) != Some(shape) {
            tracing::info!(
                "cluster: {}/{} nodes alive, {} of {} evaluators on nodes, {} in the driver",
                s.nodes_alive,
                s.nodes_known,
                s.evaluators_on_nodes,
                s.evaluators_target,
                s.evaluators_local
            );
        }
    }
}

impl Shared {
    /// Opens the door for nodes that join (`rlx node --join`): TLS with
    /// the driver's certificate if configured, the admission handshake and
    /// its limits, as a node's own door has. The joined sessions are
    /// linked by the membership loop ([`link_joined`](Self::link_joined)).
    async fn listen(&self, addr: SocketAddr) -> Result<tokio::task::JoinHandle<()>, ClusterError> {
        let bind = |e: std::io::Error| ClusterError::Bind { addr: addr.to_string(), reason: e.to_string() };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let tls = match &self.options.tls {
            Some(DriverTls { identity: Some((cert, key)), .. }) => {
                let files = NodeTls { cert: cert.clone(), key: key.clone(), client_ca: None };
                Some(files.acceptor().map_err(ClusterError::Options)?)
            }
            _ => None,
        };
        let door = Gatekeeper {
            server: self.server.clone(),
            sessions: self.sessions.clone(),
            admission: self.admission.clone(),
            tls,
            timeout: self.options.connect_timeout,
            max_connections: self.options.max_node_connections,
        };
        tracing::info!("listening for nodes on {bound}");
        Ok(tokio::spawn(door.run(listener)))
    }

    /// Links every node that dialled in and whose spawner is visible, as
    /// a new session (a node that joins again after it was lost is a
    /// re-admission).
    async fn link_joined(self: &Arc<Self>) {
        let Ok(Ok(CallResult::Success(sessions))) =
            tokio::time::timeout(Duration::from_secs(1), self.server.call(NodeServerMessage::GetSessions, None)).await
        else {
            return;
        };
        let spawners = ractor::pg::get_members(&wire::SPAWNER_GROUP.to_string());
        for session in sessions.values().filter(|s| s.is_server) {
            let node_id = session.node_id;
            if self.nodes.lock().expect("nodes lock").iter().any(|n| n.node_id == node_id) {
                continue;
            }
            let Some(cell) = spawners.iter().find(|c| !c.get_id().is_local() && c.get_id().node() == node_id) else {
                continue;
            };
            let Ok(addr) = session.peer_addr.parse::<SocketAddr>() else { continue };
            let name = session.peer_name.as_ref().map_or_else(|| addr.to_string(), |p| p.name.clone());
            let mut link = self.new_link(addr, node_id, cell.clone(), session.actor.clone());
            match self.describe(&link).await {
                Ok(resources) => link.resources = resources,
                Err(reason) => {
                    tracing::warn!("node {name} joined from {addr} but {reason}; closing its session");
                    link.session.stop(Some(reason));
                    continue;
                }
            }
            let again = !self.joined.lock().expect("joined lock").insert(name.clone());
            tracing::info!("node {name} joined from {addr}, offering {}", link.resources);
            if again {
                self.readmissions.fetch_add(1, Ordering::Relaxed);
            }
            self.nodes.lock().expect("nodes lock").push(link.clone());
            let watcher = tokio::spawn(watch_node(Arc::downgrade(self), link));
            self.watchers.lock().expect("watchers lock").push(watcher);
        }
    }
}

/// The driver's membership loop, every `heartbeat` for the whole run:
/// dials each known node that is not admitted (lost, or refused at start)
/// with capped exponential back-off, admits it again when it answers and
/// proves the cookie, then moves evaluators toward the target (out of
/// this process, off crowded nodes). Ends when the cluster is dropped.
async fn keep_members(shared: Weak<Shared>) {
    let Some((every, cap)) = shared.upgrade().map(|s| (s.options.heartbeat, s.options.redial_max)) else { return };
    // Per address: when to dial next, and the wait after that.
    let mut backoff: BTreeMap<SocketAddr, (Instant, Duration)> = BTreeMap::new();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else { return };
        let up: Vec<SocketAddr> =
            shared.nodes.lock().expect("nodes lock").iter().filter(|n| n.up).map(|n| n.addr).collect();
        let now = Instant::now();
        let due: Vec<(SocketAddr, String)> = shared
            .known
            .iter()
            .filter(|(addr, _)| !up.contains(addr))
            .filter(|(addr, _)| backoff.get(addr).is_none_or(|(next, _)| *next <= now))
            .cloned()
            .collect();
        backoff.retain(|addr, _| !up.contains(addr));
        let dials = futures::future::join_all(due.iter().map(|(addr, host)| shared.join(*addr, host))).await;
        for ((addr, _), dialled) in due.iter().zip(dials) {
            match dialled {
                Ok(link) => {
                    backoff.remove(addr);
                    shared.readmit(link);
                }
                Err(reason) => {
                    let wait = backoff.get(addr).map_or(every, |(_, wait)| *wait);
                    backoff.insert(*addr, (Instant::now() + wait, (wait * 2).min(cap)));
                    tracing::debug!("node {addr} not back yet: {reason}");
                }
            }
        }
        if shared.options.listen.is_some() {
            shared.link_joined().await;
        }
        shared.rebalance().await;
        shared.show();
    }
}

/// The driver's watcher of one node: pings its spawner every `heartbeat`
/// and marks the node lost when a ping goes unanswered for `node_timeout`
/// or the connection drops. Ends when the node is lost or the cluster dropped.
async fn watch_node(shared: Weak<Shared>, link: NodeLink) {
    let Some((every, timeout)) = shared.upgrade().map(|s| (s.options.heartbeat, s.options.node_timeout)) else {
        return;
    };
    let Ok(ping) = wire::encode(&SpawnerRequest::Ping) else { return };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if *link.down.borrow() {
            return;
        }
        let reason = match link.spawner.call(|reply| Wire::call(ping.clone(), reply), Some(timeout)).await {
            Ok(CallResult::Success(_)) => continue,
            Ok(CallResult::Timeout) => format!("no heartbeat reply within {timeout:?}"),
            Ok(CallResult::SenderError) | Err(_) => "connection lost (heartbeat)".to_string(),
        };
        if let Some(shared) = shared.upgrade() {
            shared.node_lost(link.node_id, &reason);
        }
        return;
    }
}

/// Resolves once the node behind `down` is marked lost.
async fn marked_lost(down: &mut watch::Receiver<bool>) {
    if down.wait_for(|lost| *lost).await.is_err() {
        // The cluster is gone, and with it every node's flag: nothing to wait for.
        std::future::pending::<()>().await;
    }
}

/// Records the peer address of every session that ends, and counts the
/// sessions for the limits of the listener for joining nodes.
struct DriverSessions {
    closed: Arc<Mutex<Vec<String>>>,
    sessions: Arc<Mutex<Sessions>>,
    /// A session that has not authenticated by then is closed.
    timeout: Duration,
}

impl ractor_cluster::NodeEventSubscription for DriverSessions {
    fn node_session_opened(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        Sessions::opened(&self.sessions, ses, self.timeout);
    }
    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        gatekeeper::lock(&self.sessions).authenticated(&ses);
    }
    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        gatekeeper::lock(&self.sessions).ended(&ses);
        self.closed.lock().expect("closed lock").push(ses.peer_addr);
    }
}

/// What [`Shared::pick`] found.
enum Pick {
    /// A live node with room.
    Node(NodeLink),
    /// Live nodes, none with room.
    NoRoom,
    /// No live node at all.
    NoNode,
}

enum SpawnFailure {
    /// The node is unusable (lost, timed out): try another.
    Node(String),
    /// The evaluator cannot be built (e.g. an unknown env): no node will do better.
    Evaluator(String),
}

/// Where one evaluator lives now (cheap to clone: a request takes a copy).
#[derive(Clone)]
enum Home {
    Remote {
        actor: ActorRef<Wire<EvalProtocol>>,
        node_id: u64,
        addr: SocketAddr,
        max_frame_bytes: u64,
        /// The node's lost flag.
        down: watch::Receiver<bool>,
        /// What the node knows it by (to stop it there).
        spawn_id: String,
    },
    Local(Arc<RactorEvaluator>),
}

impl Home {
    /// Where, in words: `node ADDR` or `the driver`.
    fn place(&self) -> String {
        match self {
            Home::Remote { addr, .. } => format!("node {addr}"),
            Home::Local(_) => "the driver".to_string(),
        }
    }
}

impl Placement for Cluster {
    fn place(
        &self,
        factory: EvaluatorFactory,
        indices: Vec<usize>,
        restart: RestartPolicy,
    ) -> BoxFuture<'static, Result<PlacedWorkers, HandleError>> {
        let shared = self.shared.clone();
        shared.restart.lock().expect("restart lock").get_or_insert(restart);
        shared.row_shape.get_or_init(|| {
            // The driver's own build of an evaluator, dropped at once: only
            // its spaces are kept.
            factory(0, 0).ok().map(|reference| {
                let (obs, act) = reference.spaces();
                RowShape::of(&obs, &act)
            })
        });
        Box::pin(async move {
            let homes = futures::future::join_all(indices.iter().map(|&i| shared.place(i, 0, restart, &factory))).await;
            let mut handles: Vec<SharedHandle> = Vec::with_capacity(indices.len());
            for (&index, home) in indices.iter().zip(homes) {
                let handle = Arc::new(RemoteEvaluator {
                    index,
                    home: Mutex::new((home?, 0)),
                    replacing: tokio::sync::Mutex::new(()),
                    requests: tokio::sync::RwLock::new(()),
                    prepared: Mutex::new(None),
                    restart,
                    factory: factory.clone(),
                    shared: shared.clone(),
                    latest: Mutex::default(),
                    stats: Mutex::default(),
                });
                shared.evaluators.lock().expect("evaluators lock").push(Arc::downgrade(&handle));
                handles.push(handle);
            }
            Ok(PlacedWorkers { handles, keep_alive: Box::new(Cluster { shared }) })
        })
    }
}

impl WorkerSet for Cluster {
    fn restarts(&self) -> u64 {
        let s = &self.shared;
        let node_side: u64 = s.node_restarts.lock().expect("restarts lock").values().sum();
        let local: u64 = s.local.lock().expect("local lock").values().map(RactorEvaluatorSet::restarts).sum();
        s.replacements.load(Ordering::Relaxed) + s.retired_restarts.load(Ordering::Relaxed) + node_side + local
    }

    fn failures(&self) -> Vec<String> {
        Cluster::failures(self)
    }

    fn cluster(&self) -> Option<ClusterStatus> {
        Some(self.status())
    }
}

/// The handle to an evaluator placed by a [`Cluster`]: on a node, or in
/// this process after its node was lost.
pub struct RemoteEvaluator {
    index: usize,
    /// Where it lives now, and how many times it was re-placed.
    home: Mutex<(Home, u64)>,
    /// Held while re-placing, so callers that lose the same node at once
    /// re-place the evaluator once.
    replacing: tokio::sync::Mutex<()>,
    /// Requests hold it shared; a move holds it alone, so that no request
    /// is in flight on the old home while its state is handed over.
    requests: tokio::sync::RwLock<()>,
    /// A home started for a move (by [`Shared::rebalance`]), with the
    /// placement it moves from; the next request hands the state over.
    prepared: Mutex<Option<(Home, u64)>>,
    restart: RestartPolicy,
    factory: EvaluatorFactory,
    shared: Arc<Shared>,
    latest: Mutex<LatestState>,
    stats: Mutex<HandleStats>,
}

/// A re-placed evaluator starts at generation `placements << 16`, past any
/// its earlier homes could have reached within a restart budget.
const GENERATIONS_PER_PLACEMENT_BITS: u32 = 16;

/// Why a request did not get an answer from its evaluator's home.
enum Lost {
    /// The node is gone or silent: re-place and retry.
    Node(String),
    /// The call timed out while the node still answers heartbeats: stop
    /// this evaluator there, re-place it alone, and retry.
    Stuck(String),
    /// The evaluator answered with an error (or the request is unsendable).
    Error(HandleError),
}

impl RemoteEvaluator {
    /// Sends `request` to the evaluator; if its node is lost, re-places it
    /// and retries (within the restart budget).
    async fn request(&self, request: EvalRequest) -> Result<EvalReply, HandleError> {
        let payload = wire::encode(&request).map_err(|e| self.config_error(e.to_string()))?;
        let num_params = lock(&self.latest).num_params();
        let limit = wire::reply_limit(&request, num_params, self.shared.options.max_frame_bytes);
        loop {
            let (mut home, placement) = lock(&self.home).clone();
            match self.send(&mut home, &payload, limit).await {
                Ok(reply) => return Ok(reply),
                Err(Lost::Error(e)) => return Err(e),
                Err(Lost::Node(reason)) => self.replace(placement, &reason).await?,
                Err(Lost::Stuck(reason)) => {
                    self.shared.record_stuck(self.index, &reason)?;
                    self.replace_from(placement, &reason, Some(&home)).await?;
                }
            }
        }
    }

    /// Sends `payload` to the evaluator's home; its reply may decode to at
    /// most `reply_limit` bytes (see [`wire::reply_limit`]).
    async fn send(&self, home: &mut Home, payload: &[u8], reply_limit: usize) -> Result<EvalReply, Lost> {
        let index = self.index;
        match home {
            Home::Local(handle) => {
                let request = wire::decode(payload).map_err(|e| Lost::Error(self_config(index, e.to_string())))?;
                let reply = serve(handle, request).await.map_err(|e| Lost::Error(e.into_handle(index, "local")))?;
                reply
                    .into_reply(reply_limit)
                    .map_err(|e| Lost::Error(self_config(index, format!("undecodable batch: {e}"))))
            }
            Home::Remote { actor, node_id, addr, max_frame_bytes, down, .. } => {
                // ractor_cluster drops the whole connection on an oversized
                // frame, so refuse it here with a clear error instead.
                let limit = max_frame_bytes.saturating_sub(4096);
                if payload.len() as u64 > limit {
                    return Err(Lost::Error(self_config(
                        index,
                        format!(
                            "a request of {} bytes exceeds node {addr}'s frame limit of {limit} bytes",
                            payload.len()
                        ),
                    )));
                }
                let timeout = self.shared.options.call_timeout;
                let owned = payload.to_vec();
                let answer = tokio::select! {
                    answer = actor.call(|reply| Wire::call(owned, reply), Some(timeout)) => answer,
                    () = marked_lost(down) => return Err(Lost::Node(format!("node {addr} was lost"))),
                };
                let bytes = match answer {
                    Ok(CallResult::Success(bytes)) => bytes,
                    // Slowness is not death: the heartbeat decides about
                    // the node; only this evaluator is given up on.
                    Ok(CallResult::Timeout) if !*down.borrow() => {
                        return Err(Lost::Stuck(format!(
                            "evaluator {index} gave no reply within {timeout:?} on node {addr}, which still \
                             answers heartbeats"
                        )));
                    }
                    Ok(CallResult::Timeout) => return Err(Lost::Node(format!("node {addr} was lost"))),
                    Ok(CallResult::SenderError) | Err(_) => {
                        let reason = format!("connection to node {addr} lost");
                        self.shared.node_lost(*node_id, &reason);
                        return Err(Lost::Node(reason));
                    }
                };
                // A node whose reply does not decode, or holds non-finite
                // numbers or a gradient of the wrong length, is not trusted
                // further: it is lost, and the evaluator is re-placed.
                let bad = |reason: String| {
                    let reason = format!("bad reply from node {addr}: {reason}");
                    self.shared.node_lost(*node_id, &reason);
                    Lost::Node(reason)
                };
                let answer: Result<(WireReply, u64), wire::WireError> =
                    wire::decode_within(&bytes, reply_limit).map_err(|e| bad(e.to_string()))?;
                let (reply, node_restarts) =
                    answer.map_err(|e| Lost::Error(e.into_handle(index, &addr.to_string())))?;
                let reply = reply.into_reply(reply_limit).map_err(|e| bad(format!("undecodable batch: {e}")))?;
                let shape = self.shared.row_shape.get().cloned().flatten();
                reply.check(lock(&self.latest).num_params(), shape).map_err(bad)?;
                self.shared.node_restarts.lock().expect("restarts lock").insert(index, node_restarts);
                Ok(reply)
            }
        }
    }

    /// Puts the evaluator on another node (or here) and brings it up to
    /// date, unless another caller already re-placed it since `placement`.
    async fn replace(&self, placement: u64, reason: &str) -> Result<(), HandleError> {
        self.replace_from(placement, reason, None).await
    }

    /// [`replace`](Self::replace), stopping `stuck` first (the home whose
    /// call timed out on a node that still answers), under the same lock
    /// and only if no other caller re-placed the evaluator meanwhile. A
    /// home prepared for a move is given up too: the new placement
    /// chooses afresh.
    async fn replace_from(&self, placement: u64, reason: &str, stuck: Option<&Home>) -> Result<(), HandleError> {
        let _one_at_a_time = self.replacing.lock().await;
        if lock(&self.home).1 != placement {
            return Ok(());
        }
        if let Some(home) = stuck {
            self.shared.retire(self.index, home).await;
        }
        let prepared = lock(&self.prepared).take();
        if let Some((home, _)) = prepared {
            self.shared.retire(self.index, &home).await;
        }
        self.shared.record_replacement(self.index, reason)?;
        // Restarts counted on the lost node stay counted.
        let on_old_node = self.shared.node_restarts.lock().expect("restarts lock").remove(&self.index).unwrap_or(0);
        self.shared.retired_restarts.fetch_add(on_old_node, Ordering::Relaxed);
        lock(&self.stats).restarts += 1 + on_old_node;
        // Each placement gets its own range of generations (and so of seeds).
        let placement = placement + 1;
        let generation = placement << GENERATIONS_PER_PLACEMENT_BITS;
        let home = self.shared.place(self.index, generation, self.restart, &self.factory).await?;
        *lock(&self.home) = (home.clone(), placement);
        tracing::warn!(index = self.index, "evaluator re-placed on {}: {reason}", home.place());
        // If these fail, the caller's retry notices and re-places again.
        let replay = lock(&self.latest).replay();
        for request in replay {
            // Weights and filter statistics: acknowledged with `Done`.
            let limit = wire::reply_limit(&request, None, self.shared.options.max_frame_bytes);
            let _ = self.send(&mut home.clone(), &self.encode(&request)?, limit).await;
        }
        Ok(())
    }

    /// Moves the evaluator to its prepared home, if it has one and no
    /// other request is in flight: the old home's whole state (episodes in
    /// progress, observation filter, random generators, steps sampled)
    /// and the latest weights go to the new home, which then serves every
    /// request, and the old home stops. Nothing sampled is lost. If any
    /// step fails, the evaluator stays where it was (a lost node is then
    /// noticed by the request that follows).
    async fn hand_over(&self) {
        let Ok(_alone) = self.requests.try_write() else { return };
        // The slot stays filled until the move ends, however it ends: while
        // it is filled, `rebalance` starts no second home for this index,
        // which the node would take as the newer copy and stop this one for.
        let Some((new, from)) = lock(&self.prepared).clone() else { return };
        let _emptied = EmptyOnDrop(&self.prepared);
        // If this call is dropped part-way (a round that stops waiting for
        // slow evaluators), the home that was not kept is still stopped.
        let mut unused = RetireOnDrop { shared: self.shared.clone(), index: self.index, home: Some(new.clone()) };
        let (old, placement) = lock(&self.home).clone();
        if placement != from {
            // Re-placed since the move was prepared.
            return;
        }
        let max_frame = self.shared.options.max_frame_bytes;
        let limit = |request: &EvalRequest| wire::reply_limit(request, None, max_frame);
        let state = match self.encode(&EvalRequest::SaveState) {
            Ok(payload) => self.send(&mut old.clone(), &payload, limit(&EvalRequest::SaveState)).await,
            Err(e) => Err(Lost::Error(e)),
        };
        let Ok(EvalReply::State(state)) = state else {
            tracing::warn!(index = self.index, "evaluator not moved: its state could not be saved");
            return;
        };
        let latest_weights =
            || lock(&self.latest).replay().into_iter().find(|r| matches!(r, EvalRequest::SetWeights(_)));
        let weights = latest_weights();
        for request in weights.clone().into_iter().chain([EvalRequest::LoadState(Arc::new(state))]) {
            let delivered = match self.encode(&request) {
                Ok(payload) => self.send(&mut new.clone(), &payload, limit(&request)).await.map(drop),
                Err(e) => Err(Lost::Error(e)),
            };
            if delivered.is_err() {
                tracing::warn!(index = self.index, "evaluator not moved: its new home did not take its state");
                return;
            }
        }
        *lock(&self.home) = (new.clone(), placement + 1);
        unused.home = Some(old.clone());
        // Weights pushed without waiting while the state moved went to the
        // old home: send the newest again, until none newer came meanwhile.
        let mut sent = weights;
        for _ in 0..3 {
            let Some(newer) = latest_weights().filter(|w| !same_weights(w, sent.as_ref())) else { break };
            if let Ok(payload) = self.encode(&newer) {
                let _ = self.send(&mut new.clone(), &payload, limit(&newer)).await;
            }
            sent = Some(newer);
        }
        // Restarts counted on the old node stay counted.
        let on_old_node = self.shared.node_restarts.lock().expect("restarts lock").remove(&self.index).unwrap_or(0);
        self.shared.retired_restarts.fetch_add(on_old_node, Ordering::Relaxed);
        lock(&self.stats).restarts += on_old_node;
        self.shared.moves.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = unused.home.take() {
            self.shared.retire(self.index, &old).await;
        }
        tracing::info!(index = self.index, "evaluator moved from {} to {}", old.place(), new.place());
    }

    fn encode(&self, request: &EvalRequest) -> Result<Vec<u8>, HandleError> {
        wire::encode(request).map_err(|e| self.config_error(e.to_string()))
    }

    fn config_error(&self, message: String) -> HandleError {
        self_config(self.index, message)
    }
}

/// Empties a move's slot on drop, however the move ends.
struct EmptyOnDrop<'a>(&'a Mutex<Option<(Home, u64)>>);

impl Drop for EmptyOnDrop<'_> {
    fn drop(&mut self) {
        *lock(self.0) = None;
    }
}

/// Stops a home on drop unless taken out of it: the home a move did not
/// keep (the new one if the move failed or was dropped, the old one if it
/// succeeded), whatever way the move's future ends.
struct RetireOnDrop {
    shared: Arc<Shared>,
    index: usize,
    home: Option<Home>,
}

impl Drop for RetireOnDrop {
    fn drop(&mut self) {
        if let Some(home) = self.home.take() {
            let (shared, index) = (self.shared.clone(), self.index);
            tokio::spawn(async move { shared.retire(index, &home).await });
        }
    }
}

/// Whether two `SetWeights` requests carry the same weights (the same
/// allocation: a handle keeps the latest it was given).
fn same_weights(a: &EvalRequest, b: Option<&EvalRequest>) -> bool {
    match (a, b) {
        (EvalRequest::SetWeights(a), Some(EvalRequest::SetWeights(b))) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

fn self_config(index: usize, message: String) -> HandleError {
    HandleError::Failed { index, source: EvaluatorError::Config(message) }
}

#[async_trait::async_trait]
impl EvaluatorHandle for RemoteEvaluator {
    fn index(&self) -> usize {
        self.index
    }

    async fn call(&self, request: EvalRequest) -> Result<EvalReply, HandleError> {
        lock(&self.latest).note(&request);
        self.hand_over().await;
        let _shared = self.requests.read().await;
        let reply = self.request(request).await?;
        lock(&self.stats).record_reply(&reply);
        Ok(reply)
    }

    fn cast(&self, request: EvalRequest) {
        lock(&self.latest).note(&request);
        // Fire and forget: if the node is gone, the next request re-places
        // the evaluator and sends it the latest weights.
        let (home, _) = lock(&self.home).clone();
        if let Home::Local(handle) = &home {
            handle.cast(request);
        } else if let (Home::Remote { actor, max_frame_bytes, .. }, Ok(payload)) = (&home, wire::encode(&request)) {
            // Too large for the node: skip it; the next request's size check reports it.
            if payload.len() as u64 <= max_frame_bytes.saturating_sub(4096) {
                let _ = actor.cast(Wire::cast(payload));
            }
        }
    }

    fn stats(&self) -> HandleStats {
        let node_side = self.shared.node_restarts.lock().expect("restarts lock").get(&self.index).copied().unwrap_or(0);
        let stats = *lock(&self.stats);
        HandleStats { restarts: stats.restarts + node_side, ..stats }
    }
}
