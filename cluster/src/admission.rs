//! Admission: what a connection must prove before ractor_cluster reads a
//! byte of it, and TLS around everything.
//!
//! ractor_cluster authenticates a peer with the cookie (a challenge and
//! response, Erlang's scheme), but only inside its session: by then it has
//! taken the peer's frames with the full frame limit (256 MiB), so a peer
//! without the cookie could make a node buffer that much per connection.
//! rlx therefore runs a small handshake of its own first, on fixed-size
//! messages, and hands a connection to ractor_cluster only once it passed:
//!
//! ```text
//! node → peer   "RLXA" · version · n_node                      (37 bytes)
//! peer → node   "RLXA" · version · n_peer · HMAC(k, "peer" · n_node · n_peer)   (69 bytes)
//! node → peer   ACCEPTED · HMAC(k, "node" · n_peer · n_node)    (33 bytes), or REFUSED (1 byte) and close
//! ```
//!
//! `k` is the cookie, `HMAC` is HMAC-SHA-256 (RFC 2104) and the nonces are
//! 32 random bytes each, so a recorded handshake cannot be replayed and
//! neither side learns anything about the cookie. Both sides prove the
//! cookie: a peer also refuses a node that does not know it. A node reads
//! at most 69 bytes from a peer before it has proved the cookie, and
//! gives it [`DEFAULT_HANDSHAKE_TIMEOUT`](crate::DEFAULT_HANDSHAKE_TIMEOUT)
//! for the whole exchange (TLS included). ractor_cluster's own cookie
//! handshake follows unchanged.
//!
//! The cookie authenticates; it does not encrypt. With [`NodeTls`] and
//! [`DriverTls`] the connection is TLS 1.2/1.3 (rustls) from its first
//! byte, the admission handshake included, and with a client CA the node
//! also requires the driver's certificate (mutual TLS).

use aws_lc_rs::{hmac, rand::SecureRandom};
use ractor::ActorRef;
use ractor_cluster::{NetworkStream, NodeServerMessage};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, RootCertStore};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The handshake's magic bytes and version.
const MAGIC: &[u8; 4] = b"RLXA";
const VERSION: u8 = 1;
const NONCE: usize = 32;
const TAG: usize = 32;
const ACCEPTED: u8 = 1;
const REFUSED: u8 = 0;

/// Why a connection was not admitted.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AdmissionError {
    /// The peer does not speak rlx's handshake (another protocol, another
    /// rlx version, or a plaintext client at a TLS node).
    #[error("not an rlx {VERSION} handshake")]
    Protocol,
    /// The other side's proof of the cookie is wrong.
    #[error("wrong cookie")]
    WrongCookie,
    /// The TLS handshake failed (the message says why).
    #[error("TLS: {0}")]
    Tls(String),
    /// The connection failed or closed mid-handshake.
    #[error("connection: {0}")]
    Io(String),
}

impl AdmissionError {
    /// The kind, without details (for rate-limited log lines).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Protocol => "protocol",
            Self::WrongCookie => "wrong cookie",
            Self::Tls(_) => "TLS",
            Self::Io(_) => "connection",
        }
    }
}

impl From<std::io::Error> for AdmissionError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e.to_string())
    }
}

/// The cookie as an HMAC key, for either side of the handshake.
#[derive(Clone)]
pub struct Admission {
    key: hmac::Key,
}

impl Admission {
    /// The handshake with `cookie`.
    pub fn new(cookie: &str) -> Self {
        Self { key: hmac::Key::new(hmac::HMAC_SHA256, cookie.as_bytes()) }
    }

    fn tag(&self, role: &[u8], first: &[u8], second: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        for part in [role, first, second] {
            ctx.update(part);
        }
        ctx.sign()
    }

    fn verify(&self, role: &[u8], first: &[u8], second: &[u8], tag: &[u8]) -> bool {
        let data = [role, first, second].concat();
        hmac::verify(&self.key, &data, tag).is_ok()
    }

    /// The node's side: challenges the peer, checks its proof, proves the
    /// cookie back. Reads at most 69 bytes from `stream`.
    ///
    /// # Errors
    /// Another protocol, a wrong proof, or a failed connection.
    pub async fn admit<S: AsyncRead + AsyncWrite + Unpin>(&self, stream: &mut S) -> Result<(), AdmissionError> {
        let mine = nonce();
        stream.write_all(&[&MAGIC[..], &[VERSION], &mine].concat()).await?;
        stream.flush().await?;
        let mut hello = [0u8; 4 + 1 + NONCE + TAG];
        stream.read_exact(&mut hello).await?;
        if &hello[..4] != MAGIC || hello[4] != VERSION {
            return Err(AdmissionError::Protocol);
        }
        let (theirs, proof) = hello[5..].split_at(NONCE);
        if !self.verify(b"peer", &mine, theirs, proof) {
            let _ = stream.write_all(&[REFUSED]).await;
            let _ = stream.flush().await;
            return Err(AdmissionError::WrongCookie);
        }
        let reply = self.tag(b"node", theirs, &mine);
        stream.write_all(&[&[ACCEPTED][..], reply.as_ref()].concat()).await?;
        stream.flush().await?;
        Ok(())
    }

    /// The peer's side (a driver joining a node): answers the challenge and
    /// checks the node's proof.
    ///
    /// # Errors
    /// Another protocol, a refused or wrong proof, or a failed connection.
    pub async fn join<S: AsyncRead + AsyncWrite + Unpin>(&self, stream: &mut S) -> Result<(), AdmissionError> {
        let mut challenge = [0u8; 4 + 1 + NONCE];
        stream.read_exact(&mut challenge).await?;
        if &challenge[..4] != MAGIC || challenge[4] != VERSION {
            return Err(AdmissionError::Protocol);
        }
        let theirs = &challenge[5..];
        let mine = nonce();
        let proof = self.tag(b"peer", theirs, &mine);
        stream.write_all(&[&MAGIC[..], &[VERSION], &mine, proof.as_ref()].concat()).await?;
        stream.flush().await?;
        let mut verdict = [0u8; 1];
        stream.read_exact(&mut verdict).await.map_err(|_| AdmissionError::WrongCookie)?;
        if verdict[0] != ACCEPTED {
            return Err(AdmissionError::WrongCookie);
        }
        let mut reply = [0u8; TAG];
        stream.read_exact(&mut reply).await?;
        if !self.verify(b"node", &mine, theirs, &reply) {
            return Err(AdmissionError::WrongCookie);
        }
        Ok(())
    }
}

/// 32 bytes from the operating system's random source.
fn nonce() -> [u8; NONCE] {
    let mut n = [0u8; NONCE];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut n).expect("the system random source works");
    n
}

/// A node's TLS settings (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTls {
    /// The node's certificate chain.
    pub cert: PathBuf,
    /// The node's private key.
    pub key: PathBuf,
    /// Mutual TLS: drivers must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

/// A driver's TLS settings (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverTls {
    /// The CA the nodes' certificates must be signed by.
    pub ca: PathBuf,
    /// The name the nodes' certificates carry (`None`: each node's host
    /// as given in `--nodes`, a DNS name or an IP address).
    pub server_name: Option<String>,
    /// Mutual TLS: the driver's certificate chain and private key.
    pub identity: Option<(PathBuf, PathBuf)>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: no usable private key: {e}", path.display()))
}

fn roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs(path)? {
        roots.add(cert).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(roots)
}

impl NodeTls {
    /// The acceptor for these files.
    ///
    /// # Errors
    /// A file that cannot be read or holds no usable certificate or key;
    /// the message names the file.
    pub fn acceptor(&self) -> Result<TlsAcceptor, String> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                        .build()
                        .map_err(|e| format!("{}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(certs(&self.cert)?, private_key(&self.key)?)
            .map_err(|e| format!("{} and {}: {e}", self.cert.display(), self.key.display()))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl DriverTls {
    /// The connector for these files.
    ///
    /// # Errors
    /// As [`NodeTls::acceptor`].
    pub fn connector(&self) -> Result<TlsConnector, String> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(&self.ca)?);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => builder
                .with_client_auth_cert(certs(cert)?, private_key(key)?)
                .map_err(|e| format!("{} and {}: {e}", cert.display(), key.display()))?,
        };
        Ok(TlsConnector::from(Arc::new(config)))
    }

    /// The name to check `host`'s certificate against.
    fn server_name(&self, host: &str) -> Result<ServerName<'static>, AdmissionError> {
        let name = self.server_name.as_deref().unwrap_or(host);
        ServerName::try_from(name.to_string()).map_err(|e| AdmissionError::Tls(format!("server name {name:?}: {e}")))
    }
}

/// A TLS acceptor that completes no handshake: it has no certificate to
/// offer, so every ClientHello is refused (rustls reads at most one TLS
/// record of it). ractor_cluster's NodeServer always runs a listener of its
/// own; rlx never uses it, and gives it this acceptor so that nothing
/// reaching that port gets past the first TLS record without admission.
pub(crate) fn refuse_everything() -> TlsAcceptor {
    #[derive(Debug)]
    struct NoCertificate;
    impl rustls::server::ResolvesServerCert for NoCertificate {
        fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
            None
        }
    }
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the provider supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(NoCertificate));
    TlsAcceptor::from(Arc::new(config))
}

/// Runs TLS (if configured) and the admission handshake on an accepted
/// connection; the stream to hand to ractor_cluster.
pub(crate) async fn admit_incoming(
    stream: TcpStream,
    peer_addr: SocketAddr,
    tls: Option<&TlsAcceptor>,
    admission: &Admission,
) -> Result<NetworkStream, AdmissionError> {
    let local_addr = stream.local_addr()?;
    let _ = stream.set_nodelay(true);
    Ok(match tls {
        None => {
            let mut stream = stream;
            admission.admit(&mut stream).await?;
            NetworkStream::Raw { peer_addr, local_addr, stream }
        }
        Some(acceptor) => {
            let mut stream = acceptor.accept(stream).await.map_err(|e| AdmissionError::Tls(e.to_string()))?;
            admission.admit(&mut stream).await?;
            NetworkStream::TlsServer { peer_addr, local_addr, stream }
        }
    })
}

/// Dials a node as `server`'s client: TCP, TLS (if configured), the
/// admission handshake, then the connection is ractor_cluster's.
pub(crate) async fn connect(
    server: &ActorRef<NodeServerMessage>,
    addr: SocketAddr,
    host: &str,
    tls: Option<&(TlsConnector, DriverTls)>,
    admission: &Admission,
    timeout: Duration,
) -> Result<(), AdmissionError> {
    let handshake = async {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        let (peer_addr, local_addr) = (stream.peer_addr()?, stream.local_addr()?);
        Ok::<_, AdmissionError>(match tls {
            None => {
                let mut stream = stream;
                admission.join(&mut stream).await?;
                NetworkStream::Raw { peer_addr, local_addr, stream }
            }
            Some((connector, settings)) => {
                let name = settings.server_name(host)?;
                let mut stream =
                    connector.connect(name, stream).await.map_err(|e| AdmissionError::Tls(e.to_string()))?;
                admission.join(&mut stream).await?;
                NetworkStream::TlsClient { peer_addr, local_addr, stream }
            }
        })
    };
    let stream = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| AdmissionError::Io(format!("no handshake within {timeout:?}")))??;
    server
        .cast(NodeServerMessage::ConnectionOpened { stream: Box::new(stream), is_server: false })
        .map_err(|e| AdmissionError::Io(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn handshake(
        node_cookie: &str,
        peer_cookie: &str,
    ) -> (Result<(), AdmissionError>, Result<(), AdmissionError>) {
        let (mut a, mut b) = tokio::io::duplex(256);
        let (node, peer) = (Admission::new(node_cookie), Admission::new(peer_cookie));
        tokio::join!(node.admit(&mut a), peer.join(&mut b))
    }

    #[tokio::test]
    async fn the_same_cookie_is_admitted_and_another_refused_on_both_sides() {
        assert_eq!(handshake("secret", "secret").await, (Ok(()), Ok(())));
        let (node, peer) = handshake("secret", "guess").await;
        assert_eq!(node, Err(AdmissionError::WrongCookie));
        assert_eq!(peer, Err(AdmissionError::WrongCookie));
    }

    /// Garbage (here a ractor_cluster frame's length prefix of 200 MiB) is
    /// refused after at most 69 bytes, whatever it claims.
    #[tokio::test]
    async fn a_peer_that_does_not_speak_the_handshake_is_refused_after_69_bytes() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let node = Admission::new("secret");
        let garbage: Vec<u8> =
            (200u64 << 20).to_be_bytes().into_iter().chain(std::iter::repeat(7).take(1000)).collect();
        b.write_all(&garbage).await.unwrap();
        assert_eq!(node.admit(&mut a).await, Err(AdmissionError::Protocol));
        drop(a);
        let mut left = Vec::new();
        b.read_to_end(&mut left).await.unwrap();
        assert_eq!(left.len(), 37, "only the challenge came back");
    }

    /// A recorded proof does not admit a second time: the node's nonce is
    /// fresh.
    #[tokio::test]
    async fn a_replayed_proof_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(256);
        let node = Admission::new("secret");
        let peer = Admission::new("secret");
        let (recorder, _) = tokio::join!(
            async {
                // The peer's side, recording what it sends.
                let mut challenge = [0u8; 37];
                b.read_exact(&mut challenge).await.unwrap();
                let mine = nonce();
                let proof = peer.tag(b"peer", &challenge[5..], &mine);
                let hello = [&MAGIC[..], &[VERSION], &mine, proof.as_ref()].concat();
                b.write_all(&hello).await.unwrap();
                hello
            },
            node.admit(&mut a)
        );
        let (mut a, mut b) = tokio::io::duplex(256);
        let (result, _) = tokio::join!(node.admit(&mut a), async {
            let mut challenge = [0u8; 37];
            b.read_exact(&mut challenge).await.unwrap();
            b.write_all(&recorder).await.unwrap();
        });
        assert_eq!(result, Err(AdmissionError::WrongCookie));
    }
}
