//! HTTPS for `rlx serve`: TLS in front of axum, with the certificate
//! files and rustls settings of `rlx node` ([`rlx_cluster::NodeTls`]).
//!
//! Handshakes run on their own tasks (at most [`MAX_HANDSHAKES`] at once),
//! so a client that opens a connection and sends nothing holds up no one
//! else, and is dropped after [`HANDSHAKE`]. A failed handshake (a
//! plaintext client, a certificate the CA did not sign) closes that
//! connection only.

use rlx_cluster::tokio_rustls::{server::TlsStream, TlsAcceptor};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// Connections whose handshake is done, waiting for axum to take them.
const READY: usize = 128;

/// Handshakes at once; a connection past them waits to be accepted, in
/// the kernel's backlog.
pub const MAX_HANDSHAKES: usize = 1024;

/// A listener that hands axum connections after their TLS handshake.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp` and runs each handshake with `acceptor`.
    ///
    /// # Errors
    /// The listener's address cannot be read.
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let addr = tcp.local_addr()?;
        let (done, ready) = mpsc::channel(READY);
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else { return };
                // Stops, and frees the port, once axum has dropped the listener.
                let accepted = tokio::select! {
                    () = done.closed() => return,
                    accepted = tcp.accept() => accepted,
                };
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, say: wait, as axum's own listener does.
                        tracing::warn!("rlx serve: accepting a connection failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (acceptor, done) = (acceptor.clone(), done.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = done.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("rlx serve: TLS handshake with {peer} failed: {e}"),
                        Err(_) => tracing::debug!("rlx serve: no TLS handshake from {peer} within {HANDSHAKE:?}"),
                    }
                });
            }
        });
        Ok(Self { ready, addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task ended (it never does while this lives).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
