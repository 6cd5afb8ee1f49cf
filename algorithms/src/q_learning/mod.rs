//! Q-learning: a value per action learned off-policy from replay.
//! [`dqn`] is the family's core (network, ε-greedy acting, the TD loss
//! with double-Q, dueling and n-step options); [`apex`] distributes its
//! sampling and prioritized replay.

pub mod apex;
pub mod dqn;
