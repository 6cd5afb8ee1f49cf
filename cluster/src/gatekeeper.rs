//! The door of a process that accepts cluster connections (a node, or a
//! driver that nodes join): TLS and the admission handshake before
//! ractor_cluster sees a connection, with limits on what a peer that has
//! not proved the cookie can make the process hold, and the count of
//! open and authenticated sessions those limits use.

use crate::admission::{self, Admission, AdmissionError};
use ractor::{ActorId, ActorRef};
use ractor_cluster::node::{NodeServerSessionInformation, NodeSessionMessage};
use ractor_cluster::NodeServerMessage;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The connections of a node (or of a driver that accepts nodes): how
/// many are open, which have
/// authenticated (by their session actor), and the recent failed
/// handshakes per address.
#[derive(Default)]
pub(crate) struct Sessions {
    open: usize,
    /// Connections in TLS or the admission handshake, per peer address.
    admitting: HashMap<IpAddr, usize>,
    authenticated: HashSet<ActorId>,
    /// The peer name of each authenticated session, and the session.
    names: HashMap<ActorId, (String, ActorRef<NodeSessionMessage>)>,
    failures: FailedHandshakes,
    /// For the refusal and accept-failure lines.
    log: LogLimit,
}

/// Failed handshakes per peer address within the last
/// [`FAILURE_WINDOW`]: past [`MAX_FAILURES`] the address is refused at
/// `accept` until the window has moved on, so guessing the cookie costs
/// the node one closed socket per try, and its log one line a second.
#[derive(Default)]
struct FailedHandshakes(HashMap<IpAddr, VecDeque<Instant>>);

/// Connections one address may have in the handshake at once (its
/// admitted sessions do not count).
const MAX_ADMITTING_PER_ADDRESS: usize = 16;

/// Failed handshakes an address may make within [`FAILURE_WINDOW`].
const MAX_FAILURES: usize = 20;
/// The window over which failed handshakes are counted.
const FAILURE_WINDOW: Duration = Duration::from_secs(10);
/// Addresses remembered at once (the oldest is forgotten past it).
const MAX_REMEMBERED: usize = 4096;

impl FailedHandshakes {
    fn record(&mut self, ip: IpAddr, now: Instant) {
        if self.0.len() >= MAX_REMEMBERED && !self.0.contains_key(&ip) {
            let oldest = self.0.iter().min_by_key(|(_, t)| t.back().copied()).map(|(ip, _)| *ip);
            oldest.map(|ip| self.0.remove(&ip));
        }
        let times = self.0.entry(ip).or_default();
        times.push_back(now);
        while times.len() > MAX_FAILURES {
            times.pop_front();
        }
    }

    /// Whether `ip` has failed [`MAX_FAILURES`] times within the window.
    fn blocked(&mut self, ip: IpAddr, now: Instant) -> bool {
        let Some(times) = self.0.get_mut(&ip) else { return false };
        while times.front().is_some_and(|t| now.duration_since(*t) > FAILURE_WINDOW) {
            times.pop_front();
        }
        if times.is_empty() {
            self.0.remove(&ip);
            return false;
        }
        times.len() >= MAX_FAILURES
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sessions {
    /// A connection was handed to ractor_cluster; it is closed unless it
    /// authenticates within `timeout`.
    pub(crate) fn opened(this: &Arc<Mutex<Self>>, ses: NodeServerSessionInformation, timeout: Duration) {
        lock(this).open += 1;
        let sessions = this.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            if !lock(&sessions).authenticated.contains(&ses.actor.get_id()) {
                ses.actor.stop(Some(format!("no handshake within {timeout:?}")));
            }
        });
    }

    /// ractor_cluster authenticated the session. Older sessions with the
    /// same peer name are closed: the peer dialled again, so they outlived
    /// a partition half-open (nothing is written on them to find out).
    pub(crate) fn authenticated(&mut self, ses: &NodeServerSessionInformation) {
        self.authenticated.insert(ses.actor.get_id());
        if let Some(peer) = &ses.peer_name {
            for (id, (name, actor)) in &self.names {
                if *name == peer.name && *id != ses.actor.get_id() {
                    actor.stop(Some("the peer opened a newer session".into()));
                }
            }
            self.names.insert(ses.actor.get_id(), (peer.name.clone(), ses.actor.clone()));
        }
    }

    /// The session ended: whether it had authenticated, and whether
    /// another authenticated session with the same peer name is still
    /// open. One that never authenticated counts as a failed handshake
    /// from its address.
    pub(crate) fn ended(&mut self, ses: &NodeServerSessionInformation) -> (bool, bool) {
        self.open = self.open.saturating_sub(1);
        let authenticated = self.authenticated.remove(&ses.actor.get_id());
        self.names.remove(&ses.actor.get_id());
        if let (false, Ok(peer)) = (authenticated, ses.peer_addr.parse::<SocketAddr>()) {
            self.failures.record(peer.ip(), Instant::now());
        }
        let name = ses.peer_name.as_ref().map(|p| p.name.as_str());
        (authenticated, self.names.values().any(|(n, _)| Some(n.as_str()) == name))
    }
}

/// Accepts connections and admits them (TLS if configured, then the
/// admission handshake) before ractor_cluster sees them. An address past
/// its failed handshakes, or a connection past the limit, is closed as it
/// is accepted; a failed `accept` (out of file descriptors, say) is
/// retried after a pause doubling from 10 ms to 1 s, not in a busy loop.
pub(crate) struct Gatekeeper {
    pub(crate) server: ActorRef<NodeServerMessage>,
    pub(crate) sessions: Arc<Mutex<Sessions>>,
    pub(crate) admission: Admission,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) timeout: Duration,
    pub(crate) max_connections: usize,
}

impl Gatekeeper {
    pub(crate) async fn run(self, listener: TcpListener) {
        let this = Arc::new(self);
        let mut delay = Duration::ZERO;
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    delay = (delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    lock(&this.sessions).log.line("accept failed", |n| {
                        tracing::warn!("accept failed ({e}; {n} failures since the last line); retrying in {delay:?}")
                    });
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            delay = Duration::ZERO;
            if let Some(why) = this.refusal(peer.ip()) {
                lock(&this.sessions).log.line(why, |n| {
                    tracing::warn!("refused {peer}: {why} ({n} refused for this reason since its last line)")
                });
                continue;
            }
            tokio::spawn(this.clone().admit(stream, peer));
        }
    }

    /// Why a new connection from `ip` is closed at once, if it is;
    /// otherwise it counts as being admitted.
    fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let mut sessions = lock(&self.sessions);
        if sessions.failures.blocked(ip, Instant::now()) {
            return Some("too many failed handshakes from it");
        }
        let admitting: usize = sessions.admitting.values().sum();
        if sessions.open + admitting >= self.max_connections {
            // Closed at once: no peer can make the node hold more.
            return Some("connection limit reached");
        }
        let from_ip = sessions.admitting.entry(ip).or_default();
        if *from_ip >= MAX_ADMITTING_PER_ADDRESS {
            // So that one address holding silent connections cannot keep
            // every other peer out.
            return Some("too many connections from it in the handshake");
        }
        *from_ip += 1;
        None
    }

    /// TLS and the admission handshake within the timeout; then the
    /// connection is ractor_cluster's. A wrong proof, another protocol or a
    /// failed TLS handshake counts against the address.
    async fn admit(self: Arc<Self>, stream: tokio::net::TcpStream, peer: SocketAddr) {
        let handshake = admission::admit_incoming(stream, peer, self.tls.as_ref(), &self.admission);
        let admitted = tokio::time::timeout(self.timeout, handshake)
            .await
            .unwrap_or_else(|_| Err(AdmissionError::Io(format!("no handshake within {:?}", self.timeout))));
        let mut sessions = lock(&self.sessions);
        if let Some(n) = sessions.admitting.get_mut(&peer.ip()) {
            *n -= 1;
            if *n == 0 {
                sessions.admitting.remove(&peer.ip());
            }
        }
        match admitted {
            Ok(stream) => {
                drop(sessions);
                let _ =
                    self.server.cast(NodeServerMessage::ConnectionOpened { stream: Box::new(stream), is_server: true });
            }
            Err(e) => {
                if !matches!(e, AdmissionError::Io(_)) {
                    sessions.failures.record(peer.ip(), Instant::now());
                }
                sessions.log.line(e.kind(), |n| {
                    tracing::warn!("refused {peer}: {e} ({n} refused for this reason since its last line)")
                });
            }
        }
    }
}

/// Keeps each kind of log line to one a second, counting the ones left
/// out (the kinds are a handful of fixed reasons).
#[derive(Default)]
struct LogLimit(HashMap<&'static str, (Instant, u64)>);

impl LogLimit {
    /// Logs through `line` (given the count of this kind since its last
    /// line) at most once a second per kind.
    fn line(&mut self, kind: &'static str, line: impl FnOnce(u64)) {
        match self.0.get_mut(kind) {
            Some((last, unlogged)) => {
                *unlogged += 1;
                if last.elapsed() >= Duration::from_secs(1) {
                    line(*unlogged);
                    *last = Instant::now();
                    *unlogged = 0;
                }
            }
            None => {
                line(1);
                self.0.insert(kind, (Instant::now(), 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_its_failures_until_the_window_moves_on() {
        let mut failures = FailedHandshakes::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            assert!(!failures.blocked(a, t0), "blocked after {i} failures");
            failures.record(a, t0);
        }
        assert!(failures.blocked(a, t0));
        assert!(!failures.blocked(b, t0), "another address is not");
        assert!(!failures.blocked(a, t0 + FAILURE_WINDOW + Duration::from_millis(1)));
        for i in 0..=MAX_REMEMBERED {
            failures.record(IpAddr::from([10, 1, (i >> 8) as u8, i as u8]), t0);
        }
        assert!(failures.0.len() <= MAX_REMEMBERED);
    }
}
