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

pub mod acrobot;
pub mod cartpole;
mod classic;
pub mod connect_four;
pub mod dict_cue;
pub mod gym;
pub mod masked_maze;
pub mod minatar;
pub mod mountain_car;
pub mod multi_cartpole;
pub mod pcg64;
pub mod pendulum;
mod registry;
mod snapshot;
pub mod stateless_cartpole;
pub mod tic_tac_toe;

pub use acrobot::{acrobot_v1, Acrobot};
pub use cartpole::{cartpole_v1, CartPole};
pub use classic::ClassicControl;
pub use connect_four::ConnectFour;
pub use dict_cue::DictCue;
pub use masked_maze::MaskedMaze;
pub use minatar::{breakout_v1, space_invaders_v1, Breakout, SpaceInvaders};
pub use mountain_car::{mountain_car_continuous_v0, mountain_car_v0, MountainCar, MountainCarContinuous};
pub use multi_cartpole::{multi_agent_cartpole, MultiAgentCartPole};
pub use pendulum::{pendulum_v1, Pendulum};
pub use registry::{make, make_with, reward_threshold, spec, specs, EnvSpec};
pub use stateless_cartpole::StatelessCartPole;
pub use tic_tac_toe::TicTacToe;
