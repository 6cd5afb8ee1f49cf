//! # rlx-algorithms: the built-in algorithms
//!
//! One file per algorithm, reading top to bottom: module docs (paper,
//! details that matter, metrics), config with defaults, network, policy
//! graph with the loss, execution plan. Start with [`ppo`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use rlx_algorithms::build_trainer;
//! let (mut trainer, _config) = build_trainer("PPO", "CartPole-v1", &serde_json::json!({"num_workers": 2})).await?;
//! for _ in 0..10 {
//!     let result = trainer.train().await?;
//!     println!("{:?}", result.episode_reward_mean);
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

/// `algorithm_name!(PpoConfig, "PPO")`: the name `--run` takes, as the
/// config's `NAME`, which the registry's entry and every message use.
macro_rules! algorithm_name {
    ($config:ty, $name:literal) => {
        impl $config {
            /// The name `--run` takes.
            pub const NAME: &'static str = $name;
        }
    };
}

pub mod build;
pub mod common;
pub mod error;
pub mod evolution;
pub mod model;
pub mod model_based;
pub mod off_policy;
pub mod offline;
pub mod pbt;
pub mod policy_gradient;
pub mod q_learning;
pub mod registry;
pub mod search;

// Each algorithm by its name, as `rlx_algorithms::ppo` (where user code
// and the book have always found it).
pub use evolution::{ars, es};
pub use model_based::dreamer_v3;
pub use off_policy::{ddpg, sac, td3};
pub use offline::{bc, cql, iql, marwil};
pub use policy_gradient::{a2c, a3c, appo, impala, pg, ppo};
pub use q_learning::{apex, dqn};
pub use search::alpha_zero;

use rlx::config::ConfigError;
use rlx::{EnvError, Trainer};
use serde_json::Value;
use std::sync::Arc;

pub use error::BuildError;
pub use registry::{Algorithm, Capabilities, ALGORITHMS};
pub use rlx::env::EnvMaker;

/// The tensor library the built-in networks are written with, for custom
/// networks ([`model::custom`]) to use the same version.
pub use dfdx;

/// An [`EnvMaker`] for a registered env name with keyword arguments
/// (`null` for none).
///
/// # Errors
/// [`EnvError::Unknown`] with the closest names, or a bad keyword argument.
pub fn env_maker(name: &str, kwargs: &Value) -> Result<EnvMaker, EnvError> {
    rlx_envs::make_with(name, kwargs)?;
    let (name, kwargs) = (name.to_string(), kwargs.clone());
    Ok(Arc::new(move || rlx_envs::make_with(&name, &kwargs)))
}

/// The default config of `algorithm` as JSON.
///
/// # Errors
/// [`BuildError::UnknownAlgorithm`].
pub fn default_config(algorithm: &str) -> Result<Value, BuildError> {
    Ok(registry::algorithm(algorithm)?.default_config())
}

/// Each key of `algorithm`'s config with its documentation, in
/// declaration order (what `rlx config` prints).
///
/// # Errors
/// [`BuildError::UnknownAlgorithm`].
pub fn config_docs(algorithm: &str) -> Result<Vec<(&'static str, &'static str)>, BuildError> {
    Ok(registry::algorithm(algorithm)?.config_docs())
}

/// Each key of the `model` config key with its documentation, in
/// declaration order (what `rlx config` prints under `model:`).
pub fn model_docs() -> Vec<(&'static str, &'static str)> {
    use documented::DocumentedFields;
    model::ModelConfig::FIELD_NAMES.iter().copied().zip(model::ModelConfig::FIELD_DOCS.iter().copied()).collect()
}

/// A fresh policy of `algorithm` with its resolved `config`, for the given
/// spaces: what `rlx rollout` loads a checkpoint's weights into.
///
/// # Errors
/// Unknown algorithm, a bad config, or spaces without a compiled network.
pub fn make_policy(
    algorithm: &str,
    config: &Value,
    observation_space: &rlx::Space,
    action_space: &rlx::Space,
    seed: u64,
) -> Result<Box<dyn rlx::PolicyGraph>, BuildError> {
    registry::algorithm(algorithm)?.make_policy(config, observation_space, action_space, seed)
}

/// [`make_policy`] for the env `env` (a copy of the run's): for a
/// multi-agent env, the [`rlx::MultiPolicy`] of every policy in the
/// config's `multiagent` section (or the one shared default policy), as
/// the run built it; otherwise the algorithm's policy for the env's spaces.
///
/// # Errors
/// As [`make_policy`]; a `multiagent` section that does not fit the env.
pub fn make_policy_for_env(
    algorithm: &str,
    config: &Value,
    env: &dyn rlx::Env,
    seed: u64,
) -> Result<Box<dyn rlx::PolicyGraph>, BuildError> {
    let (obs, act) = (env.observation_space(), env.action_space());
    // A game player (AlphaZero) has one network for every seat.
    let plays_games = registry::algorithm(algorithm).is_ok_and(|a| a.capabilities().plays_games);
    let Some(agents) = env.agent_ids().filter(|_| !plays_games) else {
        return make_policy(algorithm, config, obs, act, seed);
    };
    let (section, resolved) = build::multi_agent::split(config);
    let plan = Arc::new(build::multi_agent::Plan::new(section.as_ref(), agents, &registry::Registry)?);
    let entry = registry::algorithm(algorithm)?;
    plan.policies(entry.name(), entry.capabilities(), &resolved, Arc::new(registry::Registry))(obs, act, seed, 0)
}

/// Builds a trainer for `algorithm` on the registered env `env`, with the
/// JSON `overrides` merged over the algorithm's defaults. Returns the trainer
/// and the full resolved config.
///
/// The evaluators run in this process, as ractor actors. To place them on
/// worker nodes (`"nodes"`) or run them as actix actors (`"backend"`), build
/// with `rlx_cli::build_deployed_trainer`, which the `rlx` command uses,
/// or hand a placement to [`build_trainer_placed`].
///
/// # Errors
/// Unknown algorithm or env, a bad config key or value, or an evaluator that
/// fails to start.
pub async fn build_trainer(algorithm: &str, env: &str, overrides: &Value) -> Result<(Trainer, Value), BuildError> {
    if let Some(key) = DEPLOYMENT_KEYS.iter().find(|k| overrides.get(**k).is_some()) {
        return Err(BuildError::Config(ConfigError::Invalid {
            key: key.to_string(),
            message: "says where evaluators run, which rlx_cli::build_deployed_trainer (and the `rlx` command) reads; \
                      rlx_algorithms::build_trainer runs them in this process"
                .into(),
        }));
    }
    let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
    build_trainer_with_env(algorithm, env_maker(env, &kwargs)?, overrides).await
}

/// Config keys that say where evaluators run rather than how the algorithm
/// learns (see `rlx_cli::deploy`).
pub const DEPLOYMENT_KEYS: &[&str] = &[
    "nodes",
    "node_listen",
    "cookie",
    "backend",
    "cluster",
    "num_cpus_per_worker",
    "num_gpus_per_worker",
    "custom_resources_per_worker",
    "placement_strategy",
    "placement_fallback",
];

/// [`build_trainer`] for an env supplied by the caller (the config's
/// `env_config` is then the caller's business).
///
/// # Errors
/// As [`build_trainer`].
pub async fn build_trainer_with_env(
    algorithm: &str,
    make_env: EnvMaker,
    overrides: &Value,
) -> Result<(Trainer, Value), BuildError> {
    registry::algorithm(algorithm)?.build(make_env, overrides, None).await
}

/// [`build_trainer_with_env`] with the worker evaluators placed by
/// `placement` (remote nodes, another actor backend; see
/// [`rlx::placement`]) instead of running as actors in this process.
///
/// # Errors
/// As [`build_trainer`]; workers the placement cannot start.
pub async fn build_trainer_placed(
    algorithm: &str,
    make_env: EnvMaker,
    overrides: &Value,
    placement: Arc<dyn rlx::placement::Placement>,
) -> Result<(Trainer, Value), BuildError> {
    registry::algorithm(algorithm)?.build(make_env, overrides, Some(placement)).await
}

/// [`build_trainer`] with the agents of `env` mapped to policies by
/// `mapping` (from Rust, a closure from agent id to policy id, in place of
/// the `multiagent` section's `policy_mapping`). The closure is asked once
/// per agent, when the run is built; the rest of `overrides`' `multiagent`
/// section (`policies`, `policies_to_train`) applies as usual.
///
/// # Errors
/// As [`build_trainer`]; an env without agents.
pub async fn build_trainer_with_mapping(
    algorithm: &str,
    env: &str,
    overrides: &Value,
    mapping: rlx::PolicyMapping,
) -> Result<(Trainer, Value), BuildError> {
    let key = format!("{}.policy_mapping", build::multi_agent::KEY);
    let invalid = |key: String, message: String| BuildError::Config(ConfigError::Invalid { key, message });
    let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
    let probe = env_maker(env, &kwargs)?()?;
    let agents = probe
        .agent_ids()
        .ok_or_else(|| invalid(key, format!("needs a multi-agent env; {} has one agent", probe.name())))?;
    let map: serde_json::Map<String, Value> = agents.iter().map(|a| (a.clone(), Value::from(mapping(a)))).collect();
    let mut overrides = overrides.clone();
    if !overrides.is_object() {
        return Err(invalid(String::new(), "must be an object".into()));
    }
    overrides[build::multi_agent::KEY]["policy_mapping"] = Value::Object(map);
    build_trainer(algorithm, env, &overrides).await
}
