//! Q-learning: a value per action learned off-policy from replay.
//! [`dqn`] is the family's core (network, ε-greedy acting, the TD loss
//! with double-Q, dueling, n-step, distributional and noisy options);
//! [`distributional`] holds C51's atoms and projection; [`apex`]
//! distributes DQN's sampling and prioritized replay.

pub mod apex;
pub mod distributional;
pub mod dqn;
