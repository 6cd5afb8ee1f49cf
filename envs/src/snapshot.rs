//! The snapshot the classic-control envs save for checkpoints
//! ([`rlx::Env::save_state`]): the env's name, its state, its `done` flag and
//! its generator.
//!
//! The name is checked on load because envs with the same state layout
//! (MountainCar and Pendulum both keep two floats) would otherwise accept
//! each other's snapshots silently.

use crate::pcg64::Pcg64;
use rlx::env::{decode_state, encode_state, EnvState};
use rlx::EnvError;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

/// What a classic-control env saves; `S` is its state vector.
#[derive(Serialize, Deserialize)]
pub(crate) struct Snapshot<S> {
    env: String,
    pub state: S,
    pub done: bool,
    pub rng: Pcg64,
}

impl<S: Serialize + DeserializeOwned> Snapshot<S> {
    /// Encodes the snapshot of the env named `env`.
    pub fn save(env: &str, state: S, done: bool, rng: &Pcg64) -> EnvState {
        encode_state(&Snapshot { env: env.to_string(), state, done, rng: rng.clone() })
    }

    /// Decodes a snapshot, refusing one of another env. The name is read
    /// first, so another env's snapshot is named as such even when its
    /// state has another layout.
    pub fn load(env: &str, bytes: &EnvState) -> Result<Self, EnvError> {
        let tag: Snapshot<IgnoredAny> = decode_state(env, bytes)?;
        if tag.env != env {
            return Err(EnvError::Other { env: env.into(), message: format!("got a saved state of {}", tag.env) });
        }
        decode_state(env, bytes)
    }
}
