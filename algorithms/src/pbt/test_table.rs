//! A table of two member algorithms, A2C and PPO, for PBT's unit tests:
//! the registry's table sits above PBT, and `algorithms/tests/pbt.rs`
//! runs PBT on it. Their configs and policies are the algorithms' own;
//! the table builds no trainer.

use super::member_algorithms::MemberAlgorithms;
use crate::common::build_context::PolicyLookup;
use crate::error::BuildError;
use crate::policy_gradient::a2c::A2cConfig;
use crate::policy_gradient::actor_critic;
use crate::policy_gradient::ppo::{self, PpoConfig};
use futures::future::BoxFuture;
use rlx::config::merge_json;
use rlx::env::EnvMaker;
use rlx::{PolicyGraph, Space, Trainer};
use serde_json::Value;

/// See the [module docs](self).
pub struct TwoAlgorithms;

fn unknown(algorithm: &str) -> BuildError {
    BuildError::Unsupported(format!("`{algorithm}` is not in the unit tests' table"))
}

impl PolicyLookup for TwoAlgorithms {
    fn check(&self, algorithm: &str) -> Result<(), BuildError> {
        self.default_config(algorithm).map(drop).ok_or_else(|| unknown(algorithm))
    }

    fn make_policy(
        &self,
        algorithm: &str,
        config: &Value,
        obs: &Space,
        act: &Space,
        seed: u64,
    ) -> Result<Box<dyn PolicyGraph>, BuildError> {
        match algorithm {
            "A2C" => actor_critic::make_policy("A2C", &merge_json(&A2cConfig::default(), config)?, obs, act, seed),
            "PPO" => ppo::make_policy(&merge_json(&PpoConfig::default(), config)?, obs, act, seed),
            other => Err(unknown(other)),
        }
    }
}

impl MemberAlgorithms for TwoAlgorithms {
    /// PBT among them, as in the registry, for PBT to leave out.
    fn names(&self) -> Vec<&'static str> {
        vec!["A2C", "PBT", "PPO"]
    }

    fn default_config(&self, algorithm: &str) -> Option<Value> {
        match algorithm {
            "A2C" => serde_json::to_value(A2cConfig::default()).ok(),
            "PPO" => serde_json::to_value(PpoConfig::default()).ok(),
            _ => None,
        }
    }

    fn build(&self, algorithm: &str, _: EnvMaker, _: &Value) -> BoxFuture<'static, Result<Trainer, BuildError>> {
        let err = BuildError::Unsupported(format!("the unit tests' table builds no {algorithm} trainer"));
        Box::pin(std::future::ready(Err(err)))
    }
}
