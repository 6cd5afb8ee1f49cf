//! What the registry wraps around every algorithm's build: the evaluation
//! keys and evaluators ([`evaluation_config`]), and the `multiagent`
//! section with self-play ([`multi_agent`], [`self_play`]).
//!
//! This layer sees algorithms only through the
//! [`BuildContext`](crate::common::build_context::BuildContext) it is
//! handed: a policy of another algorithm (a `multiagent` policy with its
//! own `run`) comes from the context's lookup, not from the registry.

pub mod evaluation_config;
pub mod multi_agent;
pub mod self_play;
