//! Policy-gradient algorithms: an actor and a value function learned from
//! the policy's own samples. [`actor_critic`] is the family's core (network,
//! acting, the loss interface); each algorithm adds its loss and training
//! step.
//!
//! | algorithm | file | what it adds |
//! |---|---|---|
//! | PG | [`pg`] | REINFORCE on returns |
//! | A2C | [`a2c`] | synchronous advantage actor-critic |
//! | A3C | [`a3c`] | asynchronous gradients from the workers |
//! | PPO | [`ppo`] | the clipped surrogate, SGD epochs over minibatches |
//! | IMPALA | [`impala`] | V-trace over a learner thread's queue |
//! | APPO | [`appo`] | PPO's clipped loss on IMPALA's execution |

pub mod a2c;
pub mod a3c;
pub mod actor_critic;
pub mod appo;
pub mod impala;
pub mod pg;
pub mod ppo;
