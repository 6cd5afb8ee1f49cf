//! # Population-based training (PBT)
//!
//! Jaderberg, Dalibard, Osindero, Czarnecki, Donahue, Razavi, Vinyals,
//! Green, Dunning, Simonyan, Fernando & Kavukcuoglu, "Population Based
//! Training of Neural Networks", 2017 (arXiv:1711.09846): train a
//! population of agents in parallel, and every so often let the worse ones
//! **exploit** a better one (copy its weights and hyperparameters) and then
//! **explore** (perturb the copied hyperparameters). The population thus
//! follows a hyperparameter *schedule* found while training, for the
//! compute of one random search.
//!
//! Here a member is any other rlx algorithm (`algorithm`, PPO by default)
//! with its own evaluators, configured by `config` plus its explored
//! hyperparameters. One PBT iteration is one round:
//! 1. every member trains `perturbation_interval` of its own iterations, all
//!    members in parallel;
//! 2. members are ranked by the mean return of the episodes they finished
//!    in the round (their 100-episode mean if none finished);
//! 3. **exploit** by truncation selection (the paper's §3.1): each member in
//!    the bottom `quantile_fraction` copies the weights, observation-filter
//!    statistics and hyperparameters of a member drawn uniformly from the
//!    top `quantile_fraction`;
//! 4. **explore** (the paper's "perturb" and "resample"): each copied
//!    hyperparameter is, with probability `resample_probability`, drawn
//!    again from its range, otherwise multiplied by 0.8 or 1.2 (each with
//!    probability ½) and clamped to its range.
//!
//! The details that matter:
//! - members start from their own random weights (their own seeds) and
//!   hyperparameters drawn from the ranges in `hyperparam_mutations`
//!   (log-uniformly where `log` is set), except a key `config` sets, which
//!   starts at that value in every member;
//! - a member that exploits is rebuilt with its new config and given the
//!   copied weights: the simplest honest way to change any hyperparameter
//!   of any algorithm. Its optimizer moments (Adam's) and episode window
//!   start afresh, as they would in a freshly started trial;
//! - each member is a supervised [`PbtMember`] actor in an
//!   [`ActorPool`](rlx::ActorPool) ("PBT member", restart policy
//!   `restart`). After each round the driver keeps a snapshot of every
//!   member (config, weights, filter, iteration); a member that dies is
//!   restarted from its snapshot and repeats the request it was given.
//!   The iterations it had trained since the snapshot are lost and
//!   counted (`member_iterations_lost`);
//! - the weights a checkpoint saves, and that `rlx rollout` plays, are the
//!   best member's of the last round: the trainer's own evaluator (the
//!   driver's, of the member algorithm, never trained) gets the best
//!   member's weights and filter after every round.
//!
//! Metrics: `episode_reward_mean` and the episode counters are over the
//! episodes of each round's best member; `timesteps_total` counts every
//! member's env steps. Learner metrics: `member_{i}_reward_mean` (the
//! member's ranking score this round), `member_{i}_iterations` (its own
//! iterations so far), `member_{i}_{key}` (each explored hyperparameter's
//! current value), `best_member`, `num_exploits` (cumulative),
//! `member_restarts` (member actors restarted, cumulative) and
//! `member_iterations_lost` (member iterations lost with a dead actor,
//! cumulative).
//!
//! ```text
//! rlx train --run PBT --env CartPole-v1 \
//!     --config '{"algorithm": "PPO", "population": 4, "config": {"train_batch_size": 512}}'
//! ```
//!
//! From Rust, PBT is handed the table of algorithms its members may run
//! ([`MemberAlgorithms`]; the registry's `Registry` is one), as the
//! registry's PBT entry does:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use rlx::PolicyOptimizer;
//! use rlx_algorithms::pbt::{self, PbtConfig};
//! use rlx_algorithms::registry::Registry;
//!
//! let make_env = rlx_algorithms::env_maker("CartPole-v1", &serde_json::Value::Null)?;
//! let cfg = PbtConfig { population: 4, ..PbtConfig::default() };
//! let (mut best, mut population) = pbt::build_optimizer(&Registry, make_env, cfg).await?;
//! let round = population.step(&mut best).await?;
//! println!("best member: {:?}", round.learner.get("best_member"));
//! # Ok(()) }
//! ```
//!
//! One concept per file: `config.rs` ([`PbtConfig`] and its checks),
//! `space.rs` (the ranges PBT explores: the search-space type [`Domain`]
//! that `rlx tune` shares), `exploit.rs` (truncation selection and the
//! explore step, pure functions), `member.rs` (the [`PbtMember`] actor),
//! `optimizer.rs` (the driver, [`PbtOptimizer`]),
//! `member_algorithms.rs` (what PBT needs of the member algorithms) and,
//! here, the build.

mod config;
mod exploit;
mod member;
mod member_algorithms;
mod optimizer;
pub mod space;
#[cfg(test)]
mod test_table;

pub use config::PbtConfig;
pub use exploit::{explore, plan_exploits, HyperParam, PERTURBATION_FACTORS};
pub use member::{MemberArgs, MemberMsg, MemberReport, MemberSpec, MemberState, PbtMember};
pub use member_algorithms::MemberAlgorithms;
pub use optimizer::PbtOptimizer;
pub use space::{Domain, Range};

/// The range of one explored hyperparameter, before PBT and `rlx tune`
/// shared one search-space type.
#[deprecated(note = "use `pbt::Range`; `hyperparam_mutations` holds `pbt::Domain`s (`Domain::Range(range)`)")]
pub type Mutation = Range;

use crate::common::build_context::BuildContext;
use crate::error::BuildError;
use exploit::member_seed;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::ConfigError;
use rlx::env::EnvMaker;
use rlx::{Evaluators, Space, Trainer};
use serde_json::{json, Value};

/// A config error of the member algorithm, with its key under `config.`.
fn member_config_error(e: BuildError) -> BuildError {
    match e {
        BuildError::Config(c) => BuildError::Config(match c {
            ConfigError::UnknownKey { key, closest, valid } => {
                ConfigError::UnknownKey { key: format!("config.{key}"), closest, valid }
            }
            ConfigError::Invalid { key, message } => ConfigError::Invalid { key: format!("config.{key}"), message },
            ConfigError::OutOfRange { key, value, allowed } => {
                ConfigError::OutOfRange { key: format!("config.{key}"), value, allowed }
            }
            other => other,
        }),
        other => other,
    }
}

/// The population's starting configs: the shared config, each member's
/// seed, and each explored key drawn from its range unless `config` sets
/// it.
fn initial_configs(cfg: &PbtConfig, params: &[HyperParam], rng: &mut impl Rng) -> Vec<Value> {
    (0..cfg.population)
        .map(|i| {
            let mut c = cfg.config.clone();
            c["seed"] = json!(member_seed(cfg.seed, i, 0));
            for p in params {
                if cfg.config.get(&p.key).is_none() {
                    c[&p.key] = p.to_json(p.sample(rng));
                }
            }
            c
        })
        .collect()
}

/// Checks every member's starting config and the ends of every range
/// against the member algorithm (by building a policy for the env's
/// spaces), naming the key at fault.
fn check_member_configs(
    algorithms: &dyn MemberAlgorithms,
    cfg: &PbtConfig,
    params: &[HyperParam],
    configs: &[Value],
    spaces: &(Space, Space),
) -> Result<(), BuildError> {
    let (obs, act) = spaces;
    algorithms.make_policy(&cfg.algorithm, &configs[0], obs, act, 0).map_err(member_config_error)?;
    for p in params {
        for (end, x) in [("min", p.range.min), ("max", p.range.max)] {
            let mut c = configs[0].clone();
            c[&p.key] = p.to_json(x);
            if let Err(e) = algorithms.make_policy(&cfg.algorithm, &c, obs, act, 0) {
                return Err(BuildError::Config(ConfigError::OutOfRange {
                    key: format!("hyperparam_mutations.{}.{end}", p.key),
                    value: x.to_string(),
                    allowed: format!("{} rejects `{}` = {x}: {e}", cfg.algorithm, p.key),
                }));
            }
        }
    }
    for c in &configs[1..] {
        algorithms.make_policy(&cfg.algorithm, c, obs, act, 0).map_err(member_config_error)?;
    }
    Ok(())
}

/// The population and its driver, with the driver's evaluator that holds
/// the best member's policy, for callers that want the optimizer itself (a
/// test that kills a member); [`build`] wraps them in a [`Trainer`].
/// Members run the algorithms of `algorithms` (`&Registry`, the registry's
/// table).
///
/// # Errors
/// A config the member algorithms refuse ([`PbtConfig::resolve`]), an env
/// that cannot be built, a member config the member algorithm rejects (the
/// error names the key), or a member that fails to start.
pub async fn build_optimizer(
    algorithms: &'static dyn MemberAlgorithms,
    make_env: EnvMaker,
    cfg: PbtConfig,
) -> Result<(Evaluators, PbtOptimizer), BuildError> {
    let cfg = cfg.resolve(algorithms)?;
    let params = cfg.hyperparams(algorithms);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let configs = initial_configs(&cfg, &params, &mut rng);
    let probe = make_env()?;
    let spaces = (probe.observation_space().clone(), probe.action_space().clone());
    drop(probe);
    check_member_configs(algorithms, &cfg, &params, &configs, &spaces)?;

    // The driver's evaluator, for the best member's policy: the member
    // algorithm's, built without workers and never trained.
    let mut best_config = configs[0].clone();
    if cfg.member_defaults(algorithms).get("num_workers").is_some() {
        best_config["num_workers"] = json!(0);
    }
    let best = algorithms
        .build(&cfg.algorithm, make_env.clone(), &best_config)
        .await
        .map_err(member_config_error)?
        .into_evaluators();
    let optimizer = PbtOptimizer::spawn(algorithms, cfg, params, configs, make_env, spaces, rng).await?;
    Ok((best, optimizer))
}

/// The execution plan: a population of member trainers in supervised
/// actors, driven by [`PbtOptimizer`].
///
/// # Errors
/// As [`build_optimizer`].
pub async fn build(
    algorithms: &'static dyn MemberAlgorithms,
    _ctx: BuildContext,
    make_env: EnvMaker,
    cfg: PbtConfig,
) -> Result<Trainer, BuildError> {
    let (best, optimizer) = build_optimizer(algorithms, make_env, cfg).await?;
    Ok(Trainer::new(best, Box::new(optimizer)))
}

/// The member algorithm's policy for `cfg` (what `rlx rollout` loads a
/// PBT checkpoint's weights into): the first member's starting config.
///
/// # Errors
/// A config the member algorithms refuse, or spaces without a compiled
/// network.
pub fn make_policy(
    algorithms: &dyn MemberAlgorithms,
    cfg: &PbtConfig,
    observation_space: &Space,
    action_space: &Space,
    seed: u64,
) -> Result<Box<dyn rlx::PolicyGraph>, BuildError> {
    let cfg = cfg.clone().resolve(algorithms)?;
    let params = cfg.hyperparams(algorithms);
    let configs = initial_configs(&cfg, &params, &mut ChaCha8Rng::seed_from_u64(cfg.seed));
    algorithms
        .make_policy(&cfg.algorithm, &configs[0], observation_space, action_space, seed)
        .map_err(member_config_error)
}

#[cfg(test)]
mod tests {
    use super::test_table::TwoAlgorithms;
    use super::*;
    use rlx::config::merge_json;

    #[test]
    fn initial_configs_sample_unset_keys_and_keep_set_ones() {
        let cfg: PbtConfig = merge_json(&PbtConfig::default(), &json!({"config": {"clip_param": 0.25}})).unwrap();
        let cfg = cfg.resolve(&TwoAlgorithms).unwrap();
        let params = cfg.hyperparams(&TwoAlgorithms);
        assert_eq!(params.iter().map(|p| p.key.as_str()).collect::<Vec<_>>(), ["clip_param", "entropy_coeff", "lr"]);
        let configs = initial_configs(&cfg, &params, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(configs.len(), 4);
        for c in &configs {
            assert_eq!(c["clip_param"], json!(0.25));
            assert_eq!(c["num_workers"], json!(0));
            assert!((1e-4..=1e-2).contains(&c["lr"].as_f64().unwrap()));
        }
        let seeds: std::collections::BTreeSet<u64> = configs.iter().map(|c| c["seed"].as_u64().unwrap()).collect();
        assert_eq!(seeds.len(), 4);
        assert_ne!(configs[0]["lr"], configs[1]["lr"]);
    }

    #[tokio::test]
    async fn member_values_the_algorithm_rejects_are_build_errors_naming_the_key() {
        let make_env = crate::env_maker("CartPole-v1", &Value::Null).unwrap();
        let build = |overrides: Value| {
            let make_env = make_env.clone();
            async move {
                let cfg: PbtConfig = merge_json(&PbtConfig::default(), &overrides).unwrap();
                build_optimizer(&TwoAlgorithms, make_env, cfg).await.err().map(|e| e.to_string()).unwrap_or_default()
            }
        };
        let err = build(json!({"config": {"gamma": 1.5}})).await;
        assert!(err.contains("`config.gamma`"), "{err}");
        let err = build(json!({"hyperparam_mutations": {"clip_param": {"min": 0.0, "max": 0.3}}})).await;
        assert!(err.contains("`hyperparam_mutations.clip_param.min`"), "{err}");
    }
}
