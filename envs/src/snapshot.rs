//! The snapshot the classic-control envs save for checkpoints
//! ([`rlx::Env::save_state`]): the env's name, its state, its `done` flag and
//! its generator.
//!
//! The name is checked on load because envs with the same state layout
//! (MountainCar and Pendulum both keep two floats) would otherwise accept
//! each other's snapshots silently.
//!
//! Snapshots taken before the envs drew from NumPy's PCG64 hold a ChaCha8
//! generator. They still load: the state and the `done` flag exactly (an
//! episode in progress continues as it would have), the generator seeded
//! from the old one's seed, so later resets are reproducible but not the
//! ones the old generator would have drawn.

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
        let tag: Tag = decode_state(env, bytes)?;
        if tag.env != env {
            return Err(EnvError::Other { env: env.into(), message: format!("got a saved state of {}", tag.env) });
        }
        match decode_state(env, bytes) {
            Ok(snapshot) => Ok(snapshot),
            Err(error) => {
                let old: OldSnapshot<S> = decode_state(env, bytes).map_err(|_| error)?;
                let seed = old.rng.get_seed();
                let seed = u64::from_le_bytes(seed[..8].try_into().expect("8 bytes"));
                Ok(Snapshot { env: old.env, state: old.state, done: old.done, rng: Pcg64::from_seed(seed) })
            }
        }
    }
}

/// Only the env name of a snapshot, new or old.
#[derive(Deserialize)]
struct Tag {
    env: String,
    #[allow(dead_code)]
    state: IgnoredAny,
    #[allow(dead_code)]
    done: IgnoredAny,
    #[allow(dead_code)]
    rng: IgnoredAny,
}

/// A snapshot from before the envs drew from PCG64.
#[derive(Deserialize)]
struct OldSnapshot<S> {
    env: String,
    state: S,
    done: bool,
    rng: rand_chacha::ChaCha8Rng,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[derive(Serialize)]
    struct Old {
        env: String,
        state: [f64; 4],
        done: bool,
        rng: ChaCha8Rng,
    }

    /// A checkpoint written before the envs drew from PCG64 still restores
    /// the episode in progress, with a reproducible generator.
    #[test]
    fn a_snapshot_from_before_pcg64_loads_its_state() {
        let old = Old {
            env: "CartPole-v1".into(),
            state: [0.1, 0.2, 0.3, 0.4],
            done: false,
            rng: ChaCha8Rng::seed_from_u64(5),
        };
        let bytes = encode_state(&old);
        let a = Snapshot::<[f64; 4]>::load("CartPole-v1", &bytes).unwrap();
        let b = Snapshot::<[f64; 4]>::load("CartPole-v1", &bytes).unwrap();
        assert_eq!((a.state, a.done), (old.state, old.done));
        assert_eq!(a.rng, b.rng);
        assert!(Snapshot::<[f64; 4]>::load("Acrobot-v1", &bytes).is_err());
        // A new snapshot round-trips as it is.
        let new = Snapshot::save("CartPole-v1", [0.5; 4], true, &Pcg64::from_seed(9));
        let c = Snapshot::<[f64; 4]>::load("CartPole-v1", &new).unwrap();
        assert_eq!((c.state, c.done, c.rng), ([0.5; 4], true, Pcg64::from_seed(9)));
    }
}
