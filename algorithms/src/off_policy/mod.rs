//! Off-policy actor-critic for continuous actions: a deterministic or
//! stochastic actor and critics `Q(s, a)` learned from replay. [`core`]
//! holds what the three share (keys, action bounds, critics, Bellman
//! targets, the replay execution plan).
//!
//! | algorithm | file |
//! |---|---|
//! | DDPG | [`ddpg`] |
//! | TD3 | [`td3`] (DDPG's policy with TD3's three changes switched on) |
//! | SAC | [`sac`] |

pub mod core;
pub mod ddpg;
pub mod sac;
pub mod td3;
