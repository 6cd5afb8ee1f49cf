//! # CQL for discrete actions: DQN with a conservative penalty
//!
//! Kumar et al., "Conservative Q-Learning for Offline Reinforcement
//! Learning", NeurIPS 2020, the CQL(H) variant for discrete actions: DQN's
//! loss ([`crate::q_learning::dqn`]) plus
//!
//! ```text
//! α·E_(s,a)~data[ log Σ_a' exp Q(s, a') − Q(s, a) ]
//! ```
//!
//! which pushes down the Q-values of the actions the data did not take, so
//! that the greedy policy does not chase values no episode confirmed. `α`
//! is `min_q_weight` (RLlib's name), a DQN key that `CQL` sets to 1. The
//! run reads its transitions from `input` into DQN's replay buffer.
//! Continuous CQL is SAC's key of the same name (`--run SAC` with
//! `min_q_weight` and `input`; the penalty is in
//! `off_policy/core.rs`'s `Conservative`).

use crate::common::build_context::BuildContext;
use crate::error::BuildError;
use crate::offline::marwil::require_input;
use crate::q_learning::dqn::{self, DqnConfig};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{PolicyGraph, Space, Trainer};
use serde::{Deserialize, Serialize};

/// CQL's configuration: DQN's keys, with `min_q_weight` 1 and no
/// exploration (its evaluators read files).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CqlConfig(pub DqnConfig);

impl Default for CqlConfig {
    fn default() -> Self {
        Self(DqnConfig {
            min_q_weight: 1.0,
            exploration_initial_eps: 0.0,
            exploration_final_eps: 0.0,
            ..DqnConfig::default()
        })
    }
}

impl Validate for CqlConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.0.validate()?;
        let w = self.0.min_q_weight;
        check("min_q_weight", w, w > 0.0, "must be > 0 for CQL (0 is DQN)")
    }
}

/// A CQL policy for the given spaces (see [`dqn::make_policy`]).
///
/// # Errors
/// As [`dqn::make_policy`].
pub fn make_policy(cfg: &CqlConfig, obs: &Space, act: &Space, seed: u64) -> Result<Box<dyn PolicyGraph>, BuildError> {
    dqn::make_policy(&cfg.0, obs, act, seed)
}

algorithm_name!(CqlConfig, "CQL");

/// DQN's execution plan over `input`.
///
/// # Errors
/// No `input`; as [`dqn::build`].
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: CqlConfig) -> Result<Trainer, BuildError> {
    require_input(CqlConfig::NAME, &cfg.0.sampling)?;
    dqn::build(ctx, make_env, cfg.0).await
}
