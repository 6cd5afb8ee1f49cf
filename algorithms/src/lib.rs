//! # rlx-algorithms: built-in algorithms and the `rlx` command line
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
pub mod cli;
pub mod continuous;
pub mod ddpg;
pub mod deploy;
pub mod device;
pub mod distributions;
pub mod dqn;
pub mod es;
pub mod evolution;
pub mod execution;
pub mod impala;
pub mod model;
pub mod optim;
pub mod pbt;
pub mod pg;
pub mod policy_core;
pub mod ppo;
pub mod sac;
pub mod td3;

use rlx::config::{closest_n, merge_json, ConfigError, Validate};
use rlx::{EnvError, HandleError, Trainer};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

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
    #[error("unknown algorithm `{name}`{}; available: {}", closest.first().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default(), ALGORITHMS.iter().map(|a| a.0).collect::<Vec<_>>().join(", "))]
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

/// Built-in algorithms with a one-line description each.
pub const ALGORITHMS: &[(&str, &str)] = &[
    ("A2C", "advantage actor-critic (Mnih et al. 2016, synchronous), one gradient step per batch"),
    ("A3C", "asynchronous advantage actor-critic (Mnih et al. 2016): workers send gradients"),
    ("APEX", "Ape-X DQN (Horgan et al. 2018): per-evaluator ε, supervised replay shards, a learner thread"),
    ("APPO", "asynchronous PPO: IMPALA's architecture with the clipped surrogate objective"),
    ("ARS", "augmented random search (Mania et al. 2018): linear policy, top-b directions, reward-std scaling"),
    (
        "DDPG",
        "deep deterministic policy gradient (Lillicrap et al. 2016) for continuous actions, replay, target networks",
    ),
    ("DQN", "deep Q-learning (Mnih et al. 2015) with double Q, dueling head, n-step returns, prioritized replay"),
    ("ES", "evolution strategies (Salimans et al. 2017): antithetic perturbations, centered ranks, shared noise table"),
    ("IMPALA", "importance-weighted actor-learner (Espeholt et al. 2018): asynchronous sampling, V-trace"),
    (
        "PBT",
        "population-based training (Jaderberg et al. 2017): members of another algorithm exploit and explore hyperparameters",
    ),
    ("PG", "REINFORCE with a learned baseline (Williams 1992), synchronous sampling"),
    ("PPO", "Proximal Policy Optimization (Schulman et al. 2017), synchronous sampling, minibatch epochs"),
    (
        "SAC",
        "soft actor-critic (Haarnoja et al. 2018): squashed Gaussian actor, twin critics, learned entropy temperature",
    ),
    ("TD3", "twin delayed DDPG (Fujimoto et al. 2018): clipped double Q, delayed actor updates, target smoothing"),
];

/// The default config of `algorithm` as JSON.
///
/// # Errors
/// [`BuildError::UnknownAlgorithm`].
pub fn default_config(algorithm: &str) -> Result<Value, BuildError> {
    let value = match algorithm {
        "A2C" => serde_json::to_value(a2c::A2cConfig::default()),
        "A3C" => serde_json::to_value(a3c::A3cConfig::default()),
        "APEX" => serde_json::to_value(apex::ApexConfig::default()),
        "APPO" => serde_json::to_value(appo::AppoConfig::default()),
        "ARS" => serde_json::to_value(ars::ArsConfig::default()),
        "DDPG" => serde_json::to_value(ddpg::DdpgConfig::default()),
        "DQN" => serde_json::to_value(dqn::DqnConfig::default()),
        "ES" => serde_json::to_value(es::EsConfig::default()),
        "IMPALA" => serde_json::to_value(impala::ImpalaConfig::default()),
        "PBT" => serde_json::to_value(pbt::PbtConfig::default().resolved()),
        "PG" => serde_json::to_value(pg::PgConfig::default()),
        "PPO" => serde_json::to_value(ppo::PpoConfig::default()),
        "SAC" => serde_json::to_value(sac::SacConfig::default()),
        "TD3" => serde_json::to_value(td3::Td3Config::default()),
        other => return Err(unknown_algorithm(other)),
    };
    Ok(value.expect("configs serialize"))
}

/// Each key of `algorithm`'s config with its documentation, in
/// declaration order (what `rlx config` prints).
///
/// # Errors
/// [`BuildError::UnknownAlgorithm`].
pub fn config_docs(algorithm: &str) -> Result<Vec<(&'static str, &'static str)>, BuildError> {
    use documented::DocumentedFields;
    fn zip<C: DocumentedFields>() -> Vec<(&'static str, &'static str)> {
        C::FIELD_NAMES.iter().copied().zip(C::FIELD_DOCS.iter().copied()).collect()
    }
    Ok(match algorithm {
        // A3C's config is A2C's.
        "A2C" | "A3C" => zip::<a2c::A2cConfig>(),
        "APEX" => zip::<apex::ApexConfig>(),
        "APPO" => zip::<appo::AppoConfig>(),
        "ARS" => zip::<ars::ArsConfig>(),
        // TD3's config is DDPG's.
        "DDPG" | "TD3" => zip::<ddpg::DdpgConfig>(),
        "DQN" => zip::<dqn::DqnConfig>(),
        "ES" => zip::<es::EsConfig>(),
        "IMPALA" => zip::<impala::ImpalaConfig>(),
        "PBT" => zip::<pbt::PbtConfig>(),
        "PG" => zip::<pg::PgConfig>(),
        "PPO" => zip::<ppo::PpoConfig>(),
        "SAC" => zip::<sac::SacConfig>(),
        other => return Err(unknown_algorithm(other)),
    })
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
    use actor_critic::make_policy as ac;
    let (o, a) = (observation_space, action_space);
    match algorithm {
        "A2C" | "A3C" => ac(algorithm, &configure::<a2c::A2cConfig>(config)?.0, o, a, seed),
        "APPO" => ac(algorithm, &configure::<appo::AppoConfig>(config)?.0, o, a, seed),
        "ARS" => ars::make_policy(&configure::<ars::ArsConfig>(config)?.0, o, a, seed),
        "ES" => es::make_policy(&configure::<es::EsConfig>(config)?.0, o, a, seed),
        "APEX" => apex::make_policy(&configure::<apex::ApexConfig>(config)?.0, o, a, seed, 0),
        "DDPG" => ddpg::make_policy(&configure::<ddpg::DdpgConfig>(config)?.0, o, a, seed),
        "DQN" => dqn::make_policy(&configure::<dqn::DqnConfig>(config)?.0, o, a, seed),
        "IMPALA" => ac(algorithm, &configure::<impala::ImpalaConfig>(config)?.0, o, a, seed),
        "PBT" => pbt::policy(&configure::<pbt::PbtConfig>(config)?.0, o, a, seed),
        "PG" => ac(algorithm, &configure::<pg::PgConfig>(config)?.0, o, a, seed),
        "PPO" => ac(algorithm, &configure::<ppo::PpoConfig>(config)?.0, o, a, seed),
        "SAC" => sac::make_policy(&configure::<sac::SacConfig>(config)?.0, o, a, seed),
        "TD3" => td3::make_policy(&configure::<td3::Td3Config>(config)?.0, o, a, seed),
        other => Err(unknown_algorithm(other)),
    }
}

fn unknown_algorithm(name: &str) -> BuildError {
    BuildError::UnknownAlgorithm { name: name.to_string(), closest: closest_n(name, ALGORITHMS.iter().map(|a| a.0), 1) }
}

/// Builds a trainer for `algorithm` on the registered env `env`, with the
/// JSON `overrides` merged over the algorithm's defaults. Returns the trainer
/// and the full resolved config.
///
/// # Errors
/// Unknown algorithm or env, a bad config key or value, or an evaluator that
/// fails to start.
///
/// With `"nodes"` (and `"cookie"`) in `overrides`, the evaluators run on
/// those worker nodes, and with `"backend": "actix"` as actix actors
/// ([`deploy`]); the resolved config keeps these keys but never the cookie.
pub async fn build_trainer(algorithm: &str, env: &str, overrides: &Value) -> Result<(Trainer, Value), BuildError> {
    let (deployment, overrides) = deploy::split(overrides)?;
    let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
    let make_env = env_maker(env, &kwargs)?;
    if deployment.actix {
        let (trainer, mut resolved) = deploy::build_on_actix(algorithm, make_env, &overrides).await?;
        resolved["backend"] = serde_json::json!("actix");
        return Ok((trainer, resolved));
    }
    if deployment.nodes.is_empty() {
        return build_trainer_with_env(algorithm, make_env, &overrides).await;
    }
    let (trainer, mut resolved) = deploy::build_on_nodes(algorithm, env, make_env, &overrides, &deployment).await?;
    resolved["nodes"] = serde_json::json!(deployment.nodes);
    if deployment.cluster != deploy::ClusterKeys::default() {
        resolved["cluster"] = serde_json::to_value(&deployment.cluster).expect("cluster keys serialize");
    }
    Ok((trainer, resolved))
}

/// `overrides` merged over `C`'s defaults, and the resolved config as JSON.
fn configure<C: Default + Serialize + DeserializeOwned + Validate>(
    overrides: &Value,
) -> Result<(C, Value), BuildError> {
    let cfg: C = merge_json(&C::default(), overrides)?;
    let resolved = serde_json::to_value(&cfg).expect("configs serialize");
    Ok((cfg, resolved))
}

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
    match algorithm {
        "A2C" => {
            let (cfg, resolved) = configure::<a2c::A2cConfig>(overrides)?;
            Ok((a2c::build(make_env, cfg).await?, resolved))
        }
        "A3C" => {
            let (cfg, resolved) = configure::<a3c::A3cConfig>(overrides)?;
            Ok((a3c::build(make_env, cfg).await?, resolved))
        }
        "APEX" => {
            let (cfg, resolved) = configure::<apex::ApexConfig>(overrides)?;
            Ok((apex::build(make_env, cfg).await?, resolved))
        }
        "APPO" => {
            let (cfg, resolved) = configure::<appo::AppoConfig>(overrides)?;
            Ok((appo::build(make_env, cfg).await?, resolved))
        }
        "ARS" => {
            let (cfg, resolved) = configure::<ars::ArsConfig>(overrides)?;
            Ok((ars::build(make_env, cfg).await?, resolved))
        }
        "ES" => {
            let (cfg, resolved) = configure::<es::EsConfig>(overrides)?;
            Ok((es::build(make_env, cfg).await?, resolved))
        }
        "DDPG" => {
            let (cfg, resolved) = configure::<ddpg::DdpgConfig>(overrides)?;
            Ok((ddpg::build(make_env, cfg).await?, resolved))
        }
        "DQN" => {
            let (cfg, resolved) = configure::<dqn::DqnConfig>(overrides)?;
            Ok((dqn::build(make_env, cfg).await?, resolved))
        }
        "IMPALA" => {
            let (cfg, resolved) = configure::<impala::ImpalaConfig>(overrides)?;
            Ok((impala::build(make_env, cfg).await?, resolved))
        }
        "PBT" => {
            // The member algorithm's default mutations written out.
            let cfg = configure::<pbt::PbtConfig>(overrides)?.0.resolved();
            let resolved = serde_json::to_value(&cfg).expect("configs serialize");
            Ok((pbt::build(make_env, cfg).await?, resolved))
        }
        "PG" => {
            let (cfg, resolved) = configure::<pg::PgConfig>(overrides)?;
            Ok((pg::build(make_env, cfg).await?, resolved))
        }
        "PPO" => {
            let (cfg, resolved) = configure::<ppo::PpoConfig>(overrides)?;
            Ok((ppo::build(make_env, cfg).await?, resolved))
        }
        "SAC" => {
            let (cfg, resolved) = configure::<sac::SacConfig>(overrides)?;
            Ok((sac::build(make_env, cfg).await?, resolved))
        }
        "TD3" => {
            let (cfg, resolved) = configure::<td3::Td3Config>(overrides)?;
            Ok((td3::build(make_env, cfg).await?, resolved))
        }
        other => Err(unknown_algorithm(other)),
    }
}
