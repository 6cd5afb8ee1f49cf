//! Multi-node rlx on ractor_cluster: worker nodes (`rlx node`) and remote
//! evaluators that optimizers drive through the same
//! [`EvaluatorHandle`](rlx::EvaluatorHandle) as local ones.
//!
//! - [`admission`]: what a connection proves before ractor_cluster reads
//!   it (the cookie, in a fixed-size handshake), and TLS.
//! - [`node`]: what a worker node runs (a spawner and evaluator servers).
//! - [`driver`]: the driver's side: connecting to nodes, placing evaluators
//!   on them round-robin, and re-placing those of a node that dies.
//! - [`wire`]: the messages, as MessagePack + LZ4 bytes.
//! - [`actix_backend`]: local evaluators as actix sync actors instead of
//!   ractor actors (`"backend": "actix"`).
//!
//! The driver runs an algorithm's ordinary build with a [`driver::Cluster`]
//! as its [`Placement`](rlx::placement::Placement), which the build hands
//! down to `Evaluators::spawn_placed`; nothing in the algorithm or its
//! optimizer changes.

pub mod actix_backend;
pub mod admission;
pub mod driver;
pub mod external;
mod gatekeeper;
pub mod node;
pub mod policy_client;
pub mod resources;
pub mod wire;

pub use admission::{AdmissionError, DriverTls, NodeTls};
pub use driver::{Cluster, ClusterOptions, DEFAULT_MAX_NODE_CONNECTIONS};
pub use node::{
    Node, NodeConfig, Resolver, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FRAME_BYTES,
};
/// The TLS streams [`NodeTls::acceptor`] and [`DriverTls::connector`] make
/// (`rlx serve` serves HTTPS with the same files).
pub use tokio_rustls;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{IncomingEncryptionMode, NodeServer, NodeServerMessage};

/// What can go wrong setting up a cluster.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ClusterError {
    /// A node's listen address cannot be bound.
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A node address is not of the form `HOST:PORT`, or does not resolve.
    #[error("bad node address {addr:?}: {reason}")]
    Address {
        /// The address as given.
        addr: String,
        /// Why.
        reason: String,
    },
    /// No listed node could be used.
    #[error("none of the nodes could be used: {}", .0.join("; "))]
    NoNodes(Vec<String>),
    /// Cluster options that do not make sense (the message names which).
    #[error("cluster options: {0}")]
    Options(String),
    /// A ractor actor failed to start or to answer.
    #[error("actor error: {0}")]
    Actor(String),
}

/// The host part of this process's ractor_cluster name, `NAME@HOST`: a
/// random token drawn once per process (rlx addresses nodes by socket
/// address, not by this name). ractor_cluster takes a peer whose
/// `HOST:PORT` equals its own for a connection to itself, and refuses a
/// session whose `HOST:PORT` it already has. The port is that of a
/// listener nothing uses, drawn from each machine's own ephemeral range,
/// so with one fixed host for every process (`localhost`, before
/// 2026-12-01) two machines could share the pair: a node that drew the
/// driver's port never joined it (seen at 64 nodes), and of two nodes
/// that drew the same port the second was refused.
fn hostname() -> &'static str {
    use std::hash::{BuildHasher, Hasher};
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        // Randomly keyed per process by std; the id and the time besides.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        format!("h{:016x}", h.finish())
    })
}

/// Starts this process's ractor_cluster NodeServer. Its own listener binds
/// an ephemeral loopback port that nothing uses: nodes accept on the
/// address rlx binds itself ([`Node::start`]), and drivers only dial out.
/// That listener cannot be turned off, so it gets a TLS acceptor that
/// refuses every handshake: a local process that finds the port gets no
/// session, and cannot make the process buffer a frame.
async fn start_node_server(
    name: &str,
    cookie: &str,
    max_frame_bytes: u64,
) -> Result<ActorRef<NodeServerMessage>, ClusterError> {
    let server = NodeServer::new(
        0,
        cookie.to_string(),
        name.to_string(),
        hostname().to_string(),
        Some(IncomingEncryptionMode::Tls(admission::refuse_everything())),
        Some(NodeConnectionMode::Isolated),
    )
    .with_listen_addr(std::net::Ipv4Addr::LOCALHOST.into())
    .with_max_inbound_frame_size(max_frame_bytes);
    let (server, _) = Actor::spawn(None, server, ()).await.map_err(|e| ClusterError::Actor(e.to_string()))?;
    Ok(server)
}
