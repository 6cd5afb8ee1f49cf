//! # rlx-envs: environments that match their references exactly
//!
//! Each env here reproduces a reference implementation (Gymnasium for
//! classic control) step for step, checked by fixture tests recorded from
//! the reference package (`envs/scripts/record_fixtures.py`).
//!
//! ```
//! use rlx::{Action, Env};
//! let mut env = rlx_envs::make("CartPole-v1").unwrap();
//! let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
//! env.reset(Some(0), &mut obs).unwrap();
//! let step = env.step(Action::Discrete(1), &mut obs).unwrap();
//! assert_eq!(step.reward, 1.0);
//! ```
#![warn(missing_docs)]

pub mod cartpole;
mod registry;

pub use cartpole::{cartpole_v1, CartPole};
pub use registry::{make, spec, specs, EnvSpec};
