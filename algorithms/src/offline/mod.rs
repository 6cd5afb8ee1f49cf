//! Offline algorithms: policies learned from logged experience (`input`,
//! files any run writes with `output`) rather than from the env.
//!
//! | algorithm | file | what it adds |
//! |---|---|---|
//! | MARWIL | [`marwil`] | imitation weighted by `exp(β·advantage)` |
//! | BC | [`bc`] | plain imitation: MARWIL with `β = 0` |
//! | CQL | [`cql`] | DQN with a penalty on Q-values of actions the data did not take |
//! | IQL | [`iql`] | expectile regression of `V(s)` and advantage-weighted imitation: no unseen action is ever valued |

pub mod bc;
pub mod cql;
pub mod iql;
pub mod marwil;
