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

pub mod a2c;
pub mod a3c;
pub mod actor_critic;
pub mod apex;
pub mod appo;
pub mod ars;
pub mod capabilities;
pub mod continuous;
pub mod ddpg;
pub mod device;
pub mod distributions;
pub mod dqn;
pub mod es;
pub mod evaluation;
pub mod evolution;
pub mod execution;
pub mod impala;
pub mod model;
pub mod multi_agent;
pub mod optim;
pub mod pbt;
pub mod pg;
pub mod policy_core;
pub mod ppo;
pub mod registry;
pub mod sac;
pub mod sections;
pub mod self_play;
pub mod td3;

use rlx::config::ConfigError;
use rlx::{EnvError, HandleError, Trainer};
use serde_json::Value;
use std::sync::Arc;

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

/// Why a trainer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No algorithm by that name.
    #[error("unknown algorithm `{name}`{}; available: {}", closest.first().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default(), registry::names())]
    UnknownAlgorithm {
        /// The requested name.
        name: String,
        /// Close names.
        closest: Vec<String>,
    },
    /// The config is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The env is unknown or failed to build.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The algorithm cannot handle this env.
    #[error("{0}")]
    Unsupported(String),
    /// An evaluator failed to start.
    #[error(transparent)]
    Evaluator(#[from] HandleError),
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
    let Some(agents) = env.agent_ids() else {
        return make_policy(algorithm, config, obs, act, seed);
    };
    let (section, resolved) = multi_agent::split(config);
    let plan = std::sync::Arc::new(multi_agent::Plan::new(section.as_ref(), agents)?);
    let entry = registry::algorithm(algorithm)?;
    plan.policies(entry.name(), entry.capabilities(), &resolved)(obs, act, seed, 0)
}

/// Builds a trainer for `algorithm` on the registered env `env`, with the
/// JSON `overrides` merged over the algorithm's defaults. Returns the trainer
/// and the full resolved config.
///
/// The evaluators run in this process, as ractor actors. To place them on
/// worker nodes (`"nodes"`) or run them as actix actors (`"backend"`), build
/// with `rlx_cli::build_trainer`, which the `rlx` command uses.
///
/// # Errors
/// Unknown algorithm or env, a bad config key or value, or an evaluator that
/// fails to start.
pub async fn build_trainer(algorithm: &str, env: &str, overrides: &Value) -> Result<(Trainer, Value), BuildError> {
    if let Some(key) = DEPLOYMENT_KEYS.iter().find(|k| overrides.get(**k).is_some()) {
        return Err(BuildError::Config(ConfigError::Invalid {
            key: key.to_string(),
            message: "says where evaluators run, which rlx_cli::build_trainer (and the `rlx` command) reads; \
                      rlx_algorithms::build_trainer runs them in this process"
                .into(),
        }));
    }
    let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
    build_trainer_with_env(algorithm, env_maker(env, &kwargs)?, overrides).await
}

/// Config keys that say where evaluators run rather than how the algorithm
/// learns (see `rlx_cli::deploy`).
pub const DEPLOYMENT_KEYS: &[&str] = &["nodes", "cookie", "backend", "cluster"];

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
    registry::algorithm(algorithm)?.build(make_env, overrides).await
}
