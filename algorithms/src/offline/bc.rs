//! # BC: behaviour cloning
//!
//! Imitates the logged actions: MARWIL ([`super::marwil`]) with `β = 0`
//! and no value loss, so the loss is `−E[log π(a_t|s_t)]` (minus the
//! entropy bonus, 0 by default). The keys are MARWIL's; `beta` must stay 0.

use crate::common::build_context::BuildContext;
use crate::common::sections::ActorCriticLearner;
use crate::error::BuildError;
use crate::offline::marwil::{self, MarwilConfig};
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{PolicyGraph, Space, Trainer};
use serde::{Deserialize, Serialize};

/// BC's configuration: MARWIL's keys, with `beta` 0 and `vf_loss_coeff` 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BcConfig(pub MarwilConfig);

impl Default for BcConfig {
    fn default() -> Self {
        let marwil = MarwilConfig::default();
        Self(MarwilConfig {
            beta: 0.0,
            actor_critic: ActorCriticLearner { vf_loss_coeff: 0.0, ..marwil.actor_critic },
            ..marwil
        })
    }
}

impl Validate for BcConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.0.validate()?;
        check(
            "beta",
            self.0.beta,
            self.0.beta == 0.0,
            "must be 0 for BC, which imitates every action alike (MARWIL weighs them)",
        )
    }
}

/// A BC policy for the given spaces (see [`marwil::make_policy`]).
///
/// # Errors
/// As [`marwil::make_policy`].
pub fn make_policy(cfg: &BcConfig, obs: &Space, act: &Space, seed: u64) -> Result<Box<dyn PolicyGraph>, BuildError> {
    marwil::make_policy(&cfg.0, obs, act, seed)
}

algorithm_name!(BcConfig, "BC");

/// MARWIL's execution plan with BC's config.
///
/// # Errors
/// As [`marwil::build`].
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: BcConfig) -> Result<Trainer, BuildError> {
    marwil::learn_from_input(ctx, BcConfig::NAME, make_env, cfg.0).await
}
