//! # Twin Delayed DDPG (TD3)
//!
//! Fujimoto, van Hoof & Meger, "Addressing Function Approximation Error in
//! Actor-Critic Methods", ICML 2018. The policy is DDPG's
//! ([`crate::off_policy::ddpg`], where the math is) with the paper's three fixes for
//! overestimation and variance switched on by default:
//! - clipped double Q-learning (`twin_q`): the target takes the smaller of
//!   two target critics;
//! - delayed policy updates (`policy_delay` = 2): the actor and the target
//!   networks move once per two critic updates;
//! - target policy smoothing (`smooth_target_policy`): noise of standard
//!   deviation `target_noise` = 0.2, clipped to ±`target_noise_clip` = 0.5
//!   (in units of half the action range), on the target action.
//!
//! The config has DDPG's keys with these defaults; learner metrics are
//! DDPG's.

use crate::common::build_context::BuildContext;
use crate::error::BuildError;
use crate::off_policy::ddpg::{self, DdpgConfig};
use rlx::config::{ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::{PolicyGraph, Space, Trainer};
use serde::{Deserialize, Serialize};

/// TD3's configuration: DDPG's keys with TD3's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Td3Config(pub DdpgConfig);

impl Default for Td3Config {
    fn default() -> Self {
        Self(DdpgConfig {
            twin_q: true,
            policy_delay: 2,
            smooth_target_policy: true,
            target_noise: 0.2,
            target_noise_clip: 0.5,
            ..DdpgConfig::default()
        })
    }
}

impl Validate for Td3Config {
    fn validate(&self) -> Result<(), ConfigError> {
        self.0.validate()
    }
}

/// A TD3 policy for the given spaces (see [`ddpg::make_policy`]).
///
/// # Errors
/// As [`ddpg::make_policy`].
pub fn make_policy(
    cfg: &Td3Config,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    ddpg::make_policy(&cfg.0, observation_space, action_space, rng_seed)
}

algorithm_name!(Td3Config, "TD3");

/// DDPG's execution plan with TD3's config.
///
/// # Errors
/// As [`ddpg::build`].
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: Td3Config) -> Result<Trainer, BuildError> {
    ddpg::build(ctx, make_env, cfg.0).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_the_config_is_flat() {
        let cfg = Td3Config::default();
        assert!(cfg.0.twin_q && cfg.0.smooth_target_policy && cfg.0.policy_delay == 2);
        let json = serde_json::to_value(&cfg).unwrap();
        assert_eq!(json["policy_delay"], 2, "DDPG's keys at the top level");
        let merged: Td3Config = rlx::config::merge_json(&cfg, &serde_json::json!({"tau": 0.01})).unwrap();
        assert_eq!(merged.0.continuous.tau, 0.01);
        assert!(merged.0.twin_q, "TD3's defaults stay under an override");
        let err = rlx::config::merge_json(&cfg, &serde_json::json!({"policy_dealy": 3})).unwrap_err();
        assert!(err.to_string().contains("policy_delay"), "{err}");
    }
}
