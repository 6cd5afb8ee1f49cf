//! The model-based family: an agent that learns a model of its env and
//! learns to act inside it ([`dreamer_v3`]).
//!
//! `dreamer_v3` reads top to bottom (config, policy, losses, training
//! step); the world model it learns is [`world_model`], its networks'
//! layers [`networks`], the formulas of its losses [`math`], its
//! networks for images [`image`], and its replay of whole episodes
//! [`episode_replay`].

pub mod dreamer_v3;
pub mod episode_replay;
pub mod image;
pub mod math;
pub mod networks;
pub mod world_model;
