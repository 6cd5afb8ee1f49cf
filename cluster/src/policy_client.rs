//! The Rust client of an external env ([`crate::external`]): an
//! application that owns its simulator loop asks a running `rlx train`
//! for actions.
//!
//! ```no_run
//! use rlx_cluster::policy_client::{ClientAction, PolicyClient};
//! # fn simulate(_: &ClientAction) -> (Vec<f32>, f64, bool) { (vec![0.0; 4], 1.0, true) }
//! let mut client = PolicyClient::connect("127.0.0.1:9900", "the cookie").unwrap();
//! let mut action = client.start_episode(&[0.0, 0.0, 0.0, 0.0]).unwrap();
//! loop {
//!     let (obs, reward, done) = simulate(&action);
//!     match client.step(&obs, reward, done, false).unwrap() {
//!         Some(next) => action = next,
//!         None => break, // the episode ended; start_episode for the next
//!     }
//! }
//! ```

use crate::admission::Admission;
use serde::Deserialize;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// An action from the server.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientAction {
    /// A `Discrete` action (one element) or a `MultiDiscrete` one.
    Discrete(Vec<i64>),
    /// A `Box` action, within the action space's bounds.
    Continuous(Vec<f32>),
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting or the connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The cookie handshake failed.
    #[error("admission: {0}")]
    Admission(String),
    /// The server dropped this client, saying why.
    #[error("the server dropped this client: {0}")]
    Dropped(String),
    /// The server sent something this client does not understand.
    #[error("protocol: {0}")]
    Protocol(String),
    /// An observation of the wrong width.
    #[error("observation of {got} values; the server takes {want}")]
    Observation {
        /// Values given.
        got: usize,
        /// Values the server takes.
        want: usize,
    },
}

#[derive(Deserialize)]
struct Hello {
    obs_dim: usize,
    action: String,
    action_width: usize,
}

/// A connection to an external env's server.
pub struct PolicyClient {
    stream: TcpStream,
    hello: Hello,
}

impl PolicyClient {
    /// Connects to `address` and proves `cookie`.
    ///
    /// # Errors
    /// An unreachable server, a wrong cookie, or a server that does not
    /// speak the protocol.
    pub fn connect(address: &str, cookie: &str) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        // The handshake is the cluster's (async); it runs on a thread of
        // its own, so that connecting works from async code too.
        let stream = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                    runtime.block_on(async {
                        stream.set_nonblocking(true)?;
                        let mut s = tokio::net::TcpStream::from_std(stream)?;
                        Admission::new(cookie).join(&mut s).await.map_err(|e| ClientError::Admission(e.to_string()))?;
                        let s = s.into_std()?;
                        s.set_nonblocking(false)?;
                        Ok::<_, ClientError>(s)
                    })
                })
                .join()
                .map_err(|_| ClientError::Protocol("the handshake thread panicked".into()))?
        })?;
        // Handshake done: the server answers at the pace of training,
        // which may pause (a learner step); no read timeout from here on.
        stream.set_read_timeout(None)?;
        let mut client = Self { stream, hello: Hello { obs_dim: 0, action: String::new(), action_width: 0 } };
        let frame = client.receive(b'H')?;
        client.hello = serde_json::from_slice(&frame).map_err(|e| ClientError::Protocol(format!("hello: {e}")))?;
        Ok(client)
    }

    /// Width of the observations the server takes.
    pub fn obs_dim(&self) -> usize {
        self.hello.obs_dim
    }

    /// Starts an episode at `obs`; returns the first action.
    ///
    /// # Errors
    /// As [`connect`](Self::connect), or an observation of the wrong width.
    pub fn start_episode(&mut self, obs: &[f32]) -> Result<ClientAction, ClientError> {
        let body = self.obs_bytes(obs)?;
        self.send(b'S', &body)?;
        self.action()
    }

    /// Reports what the last action led to: the next observation, the
    /// reward, and whether the episode ended (terminated, or truncated by a
    /// time limit). Returns the next action, or `None` after an end (call
    /// [`start_episode`](Self::start_episode) for the next episode).
    ///
    /// # Errors
    /// As [`start_episode`](Self::start_episode).
    pub fn step(
        &mut self,
        obs: &[f32],
        reward: f64,
        terminated: bool,
        truncated: bool,
    ) -> Result<Option<ClientAction>, ClientError> {
        let mut body = reward.to_le_bytes().to_vec();
        body.extend([u8::from(terminated), u8::from(truncated)]);
        body.extend(self.obs_bytes(obs)?);
        self.send(b'T', &body)?;
        if terminated || truncated {
            return Ok(None);
        }
        self.action().map(Some)
    }

    fn obs_bytes(&self, obs: &[f32]) -> Result<Vec<u8>, ClientError> {
        if obs.len() != self.hello.obs_dim {
            return Err(ClientError::Observation { got: obs.len(), want: self.hello.obs_dim });
        }
        Ok(obs.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn action(&mut self) -> Result<ClientAction, ClientError> {
        let body = self.receive(b'A')?;
        let w = self.hello.action_width;
        if body.len() != 8 * w && body.len() != 4 * w {
            return Err(ClientError::Protocol(format!("an action of {} bytes", body.len())));
        }
        Ok(if self.hello.action == "box" {
            ClientAction::Continuous(
                body.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            )
        } else {
            ClientAction::Discrete(
                body.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect(),
            )
        })
    }

    fn send(&mut self, tag: u8, body: &[u8]) -> Result<(), ClientError> {
        let mut frame = ((body.len() + 1) as u32).to_le_bytes().to_vec();
        frame.push(tag);
        frame.extend_from_slice(body);
        self.stream.write_all(&frame)?;
        Ok(())
    }

    fn receive(&mut self, tag: u8) -> Result<Vec<u8>, ClientError> {
        let mut head = [0u8; 4];
        self.stream.read_exact(&mut head)?;
        let length = u32::from_le_bytes(head) as usize;
        if length == 0 || length > 1 << 20 {
            return Err(ClientError::Protocol(format!("a frame of {length} bytes")));
        }
        let mut frame = vec![0u8; length];
        self.stream.read_exact(&mut frame)?;
        match frame[0] {
            t if t == tag => Ok(frame[1..].to_vec()),
            b'E' => Err(ClientError::Dropped(String::from_utf8_lossy(&frame[1..]).into_owned())),
            t => Err(ClientError::Protocol(format!("a frame of kind {:?} where {:?} was due", t as char, tag as char))),
        }
    }
}
