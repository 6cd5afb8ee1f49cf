//! The table of built-in algorithms.
//!
//! Every place that turns an algorithm's name into something — `rlx list`,
//! `rlx config`, `rlx train`, `rlx rollout`, PBT's members, the worker
//! nodes — looks it up here, in [`ALGORITHMS`]. Adding an algorithm means
//! writing its file (config, policy, loss, training step) and one entry
//! below.

use crate::build::evaluation_config::{self, EvaluationConfig};
use crate::build::{multi_agent, self_play};
use crate::common::build_context::{BuildContext, PolicyLookup, PolicyResult};
pub use crate::common::capabilities::Capabilities;
use crate::common::sampling::PolicyMaker;
use crate::common::sections::{self, Docs};
use crate::error::BuildError;
use crate::evolution::{ars, es};
use crate::model_based::dreamer_v3;
use crate::off_policy::{ddpg, sac, td3};
use crate::offline::{bc, cql, iql, marwil};
use crate::pbt;
use crate::policy_gradient::{a2c, a3c, actor_critic, appo, impala, pg, ppo};
use crate::q_learning::{apex, dqn};
use crate::search::alpha_zero;
use futures::future::BoxFuture;
use rlx::config::{closest_n, deep_merge, merge_json, Validate};
use rlx::env::EnvMaker;
use rlx::placement::Placement;
use rlx::{fields, PolicyGraph, Space, Trainer};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// A built-in algorithm, known by its name.
pub trait Algorithm: Sync {
    /// The name `--run` takes, e.g. `"PPO"`.
    fn name(&self) -> &'static str;
    /// One line: the paper and what sets the algorithm apart.
    fn about(&self) -> &'static str;
    /// What shared code must know of it ([`Capabilities`]).
    fn capabilities(&self) -> Capabilities;
    /// The default config as JSON.
    fn default_config(&self) -> Value;
    /// Each config key with its documentation, in declaration order.
    fn config_docs(&self) -> Vec<(&'static str, &'static str)>;
    /// A fresh policy for `config` (merged over the defaults) and the given
    /// spaces: what `rlx rollout` loads a checkpoint's weights into.
    ///
    /// # Errors
    /// A bad config, or spaces the algorithm cannot handle.
    fn make_policy(
        &self,
        config: &Value,
        observation_space: &Space,
        action_space: &Space,
        seed: u64,
    ) -> Result<Box<dyn PolicyGraph>, BuildError>;
    /// A trainer on `make_env` with `overrides` merged over the defaults,
    /// and the resolved config.
    ///
    /// # Errors
    /// A bad config, an env the algorithm cannot handle, or an evaluator
    /// that fails to start.
    ///
    /// `placement` decides where worker evaluators run (`None`: actors in
    /// this process).
    fn build(
        &self,
        make_env: EnvMaker,
        overrides: &Value,
        placement: Option<Arc<dyn Placement>>,
    ) -> BoxFuture<'static, Result<(Trainer, Value), BuildError>>;
    /// Every top-level key the config takes: its own, the evaluation
    /// keys and `multiagent` where the algorithm takes them. The one list
    /// behind "valid keys" and "did you mean".
    fn config_keys(&self) -> Vec<String>;
    /// Checks `overrides` as [`build`](Self::build) would, without an env
    /// or evaluators, and returns the resolved config: every key, type and
    /// range (what `rlx tune` checks before its first trial).
    ///
    /// # Errors
    /// The first bad key or value.
    fn check_config(&self, overrides: &Value) -> Result<Value, BuildError>;
}

/// Every built-in algorithm, by name.
pub static ALGORITHMS: &[&dyn Algorithm] = &[
    &A2C,
    &A3C,
    &APEX,
    &APPO,
    &ARS,
    &ALPHA_ZERO,
    &BC,
    &CQL,
    &DDPG,
    &DQN,
    &DREAMER_V3,
    &ES,
    &IMPALA,
    &IQL,
    &MARWIL,
    &PBT,
    &PG,
    &PPO,
    &SAC,
    &TD3,
];

/// The algorithm called `name`.
///
/// # Errors
/// [`BuildError::UnknownAlgorithm`] with the closest name.
pub fn algorithm(name: &str) -> Result<&'static dyn Algorithm, BuildError> {
    ALGORITHMS.iter().copied().find(|a| a.name() == name).ok_or_else(|| BuildError::UnknownAlgorithm {
        name: name.to_string(),
        closest: closest_n(name, ALGORITHMS.iter().map(|a| a.name()), 1),
        available: names(),
    })
}

/// The names in [`ALGORITHMS`], comma-separated.
pub fn names() -> String {
    ALGORITHMS.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

/// One row of the table for the algorithm whose module is `$module` and
/// config type `$config`: its name is the config's `NAME`, its build the
/// module's `build`, its docs the config's keys (or those of `docs`, a
/// config it shares), and it resolves nothing beyond the config type. A
/// macro because each module's `build` returns a future of its own type,
/// which only a closure written for that module can box; the rows that
/// differ in more (PBT) are written out.
macro_rules! entry {
    ($module:ident::$config:ident {
        capabilities: $capabilities:expr,
        about: $about:expr,
        $(docs: $docs:ty,)?
        make_policy: $make_policy:expr $(,)?
    }) => {
        Entry {
            name: $module::$config::NAME,
            capabilities: $capabilities,
            about: $about,
            docs: entry!(@docs $module::$config $(, $docs)?),
            make_policy: $make_policy,
            build: |ctx, env, c| Box::pin($module::build(ctx, env, c)),
            resolve: None,
        }
    };
    (@docs $module:ident::$config:ident) => {
        key_docs::<$module::$config>
    };
    (@docs $module:ident::$config:ident, $docs:ty) => {
        key_docs::<$docs>
    };
}

static A2C: Entry<a2c::A2cConfig> = entry!(a2c::A2cConfig {
    capabilities: Capabilities { standardizes: &[fields::ADVANTAGES], ..Capabilities::ALL },
    about: "advantage actor-critic (Mnih et al. 2016, synchronous), one gradient step per batch",
    make_policy: |c, o, a, seed| actor_critic::make_policy(a2c::A2cConfig::NAME, c, o, a, seed),
});

static A3C: Entry<a3c::A3cConfig> = entry!(a3c::A3cConfig {
    capabilities: Capabilities { multi_agent: false, ..Capabilities::ALL },
    about: "asynchronous advantage actor-critic (Mnih et al. 2016): workers send gradients",
    // A3C's config is A2C's.
    docs: a2c::A2cConfig,
    make_policy: |c, o, a, seed| actor_critic::make_policy(a3c::A3cConfig::NAME, &c.0, o, a, seed),
});

static ALPHA_ZERO: Entry<alpha_zero::AlphaZeroConfig> = entry!(alpha_zero::AlphaZeroConfig {
    capabilities: Capabilities { plays_games: true, runs_own_workers: false, ..Capabilities::ONE_POLICY },
    about:
        "AlphaZero (Silver et al. 2018): self-play with tree search guided by a policy-value network, for board games",
    make_policy: alpha_zero::make_policy,
});

static APEX: Entry<apex::ApexConfig> = entry!(apex::ApexConfig {
    capabilities: Capabilities { multi_agent: false, ..Capabilities::ALL },
    about: "Ape-X DQN (Horgan et al. 2018): per-evaluator ε, supervised replay shards, a learner thread",
    make_policy: |c, o, a, seed| apex::make_policy(c, o, a, seed, 0),
});

static APPO: Entry<appo::AppoConfig> = entry!(appo::AppoConfig {
    capabilities: Capabilities::ALL,
    about: "asynchronous PPO: IMPALA's architecture with the clipped surrogate objective",
    make_policy: |c, o, a, seed| actor_critic::make_policy(appo::AppoConfig::NAME, c, o, a, seed),
});

static ARS: Entry<ars::ArsConfig> = entry!(ars::ArsConfig {
    capabilities: Capabilities::ONE_POLICY,
    about: "augmented random search (Mania et al. 2018): linear policy, top-b directions, reward-std scaling",
    make_policy: ars::make_policy,
});

static BC: Entry<bc::BcConfig> = entry!(bc::BcConfig {
    capabilities: Capabilities::ALL,
    about: "behaviour cloning from logged episodes (`input`): MARWIL with beta 0",
    // BC's config is MARWIL's.
    docs: marwil::MarwilConfig,
    make_policy: bc::make_policy,
});

static CQL: Entry<cql::CqlConfig> = entry!(cql::CqlConfig {
    capabilities: Capabilities::ALL,
    about: "conservative Q-learning (Kumar et al. 2020) for discrete actions from logged episodes (`input`)",
    // CQL's config is DQN's.
    docs: dqn::DqnConfig,
    make_policy: cql::make_policy,
});

static DDPG: Entry<ddpg::DdpgConfig> = entry!(ddpg::DdpgConfig {
    capabilities: Capabilities::ALL,
    about: "deep deterministic policy gradient (Lillicrap et al. 2016) for continuous actions, replay, target networks",
    make_policy: ddpg::make_policy,
});

static DQN: Entry<dqn::DqnConfig> = entry!(dqn::DqnConfig {
    capabilities: Capabilities::ALL,
    about: "deep Q-learning (Mnih et al. 2015) with double Q, dueling head, n-step returns, prioritized replay",
    make_policy: dqn::make_policy,
});

static DREAMER_V3: Entry<dreamer_v3::DreamerV3Config> = entry!(dreamer_v3::DreamerV3Config {
    capabilities: Capabilities { multi_agent: false, ..Capabilities::ALL },
    about: "DreamerV3 (Hafner et al. 2023): a world model learned from replayed episodes, actor and critic trained in imagination",
    make_policy: dreamer_v3::make_policy,
});

static ES: Entry<es::EsConfig> = entry!(es::EsConfig {
    capabilities: Capabilities::ONE_POLICY,
    about: "evolution strategies (Salimans et al. 2017): antithetic perturbations, centered ranks, shared noise table",
    make_policy: es::make_policy,
});

static IMPALA: Entry<impala::ImpalaConfig> = entry!(impala::ImpalaConfig {
    capabilities: Capabilities::ALL,
    about: "importance-weighted actor-learner (Espeholt et al. 2018): asynchronous sampling, V-trace",
    make_policy: |c, o, a, seed| actor_critic::make_policy(impala::ImpalaConfig::NAME, c, o, a, seed),
});

static IQL: Entry<iql::IqlConfig> = entry!(iql::IqlConfig {
    capabilities: Capabilities::ALL,
    about: "implicit Q-learning (Kostrikov et al. 2022) for continuous actions from logged episodes (`input`)",
    make_policy: iql::make_policy,
});

static MARWIL: Entry<marwil::MarwilConfig> = entry!(marwil::MarwilConfig {
    capabilities: Capabilities::ALL,
    about: "monotonic advantage re-weighted imitation (Wang et al. 2018) from logged episodes (`input`)",
    make_policy: marwil::make_policy,
});

static PBT: Entry<pbt::PbtConfig> = Entry {
    name: pbt::PbtConfig::NAME,
    capabilities: Capabilities::ONE_POLICY,
    about: "population-based training (Jaderberg et al. 2017): members of another algorithm exploit and explore hyperparameters",
    docs: key_docs::<pbt::PbtConfig>,
    make_policy: |c, o, a, seed| pbt::make_policy(&Registry, c, o, a, seed),
    build: |ctx, env, c| Box::pin(pbt::build(&Registry, ctx, env, c)),
    // Checked against the table, the default mutations written out.
    resolve: Some(|c| Ok(c.resolve(&Registry)?)),
};

/// The table as PBT's member algorithms: PBT is handed it rather than
/// importing this module.
impl pbt::MemberAlgorithms for Registry {
    /// Every algorithm but the game players (AlphaZero): PBT takes no
    /// multi-agent env, and a game is one.
    fn names(&self) -> Vec<&'static str> {
        ALGORITHMS.iter().filter(|a| !a.capabilities().plays_games).map(|a| a.name()).collect()
    }

    fn default_config(&self, algorithm: &str) -> Option<Value> {
        self::algorithm(algorithm).ok().map(|a| a.default_config())
    }

    fn build(
        &self,
        algorithm: &str,
        make_env: EnvMaker,
        config: &Value,
    ) -> BoxFuture<'static, Result<Trainer, BuildError>> {
        let build = self::algorithm(algorithm).map(|a| a.build(make_env, config, None));
        Box::pin(async move { build?.await.map(|(trainer, _)| trainer) })
    }
}

static PG: Entry<pg::PgConfig> = entry!(pg::PgConfig {
    capabilities: Capabilities::ALL,
    about: "REINFORCE with a learned baseline (Williams 1992), synchronous sampling",
    make_policy: |c, o, a, seed| actor_critic::make_policy(pg::PgConfig::NAME, c, o, a, seed),
});

static PPO: Entry<ppo::PpoConfig> = entry!(ppo::PpoConfig {
    capabilities: Capabilities { standardizes: &[fields::ADVANTAGES], ..Capabilities::ALL },
    about: "Proximal Policy Optimization (Schulman et al. 2017), synchronous sampling, minibatch epochs",
    make_policy: ppo::make_policy,
});

static SAC: Entry<sac::SacConfig> = entry!(sac::SacConfig {
    capabilities: Capabilities::ALL,
    about:
        "soft actor-critic (Haarnoja et al. 2018): squashed Gaussian actor, twin critics, learned entropy temperature",
    make_policy: sac::make_policy,
});

static TD3: Entry<td3::Td3Config> = entry!(td3::Td3Config {
    capabilities: Capabilities::ALL,
    about: "twin delayed DDPG (Fujimoto et al. 2018): clipped double Q, delayed actor updates, target smoothing",
    // TD3's config is DDPG's.
    docs: ddpg::DdpgConfig,
    make_policy: td3::make_policy,
});

/// One row of the table: an algorithm's functions over its config type `C`.
struct Entry<C> {
    name: &'static str,
    capabilities: Capabilities,
    about: &'static str,
    docs: fn() -> Vec<(&'static str, &'static str)>,
    make_policy: fn(&C, &Space, &Space, u64) -> Result<Box<dyn PolicyGraph>, BuildError>,
    build: fn(BuildContext, EnvMaker, C) -> BoxFuture<'static, Result<Trainer, BuildError>>,
    /// Checks what the config type alone cannot and fills in keys whose
    /// defaults depend on other keys, before the config is resolved (PBT's
    /// member algorithm and mutations, against the table).
    resolve: Option<fn(C) -> Result<C, BuildError>>,
}

impl<C: Default + Serialize + DeserializeOwned + Validate + Send + Sync + 'static> Entry<C> {
    /// Whether the algorithm takes the evaluation keys ([`Capabilities::evaluates`]).
    fn evaluates(&self) -> bool {
        self.capabilities.evaluates
    }

    fn configure(&self, overrides: &Value) -> Result<C, BuildError> {
        let cfg: C = merge_json(&C::default(), overrides)?;
        match self.resolve {
            Some(resolve) => resolve(cfg),
            None => Ok(cfg),
        }
    }

    /// The default config, resolved.
    fn defaults(&self) -> C {
        match self.resolve {
            Some(resolve) => resolve(C::default()).expect("the default config resolves"),
            None => C::default(),
        }
    }

    /// The config's keys ([`Algorithm::config_keys`]).
    fn keys(&self) -> Vec<String> {
        let defaults = self.defaults();
        // A struct's fields, or (flattened sections, read as a map) the
        // keys its defaults serialize to, as `merge_json` takes them.
        let mut keys = rlx::config::field_names::<C>();
        if keys.is_empty() {
            if let Value::Object(map) = serde_json::to_value(defaults).expect("configs serialize") {
                keys = map.into_iter().map(|(k, _)| k).collect();
            }
        }
        if self.evaluates() {
            keys.extend(evaluation_config::keys().iter().map(|k| k.to_string()));
            keys.push(multi_agent::KEY.to_string());
        }
        keys
    }

    /// Refuses a top-level key outside [`keys`](Self::keys), naming the
    /// whole list (the algorithm's config alone lists its own keys, not the
    /// sections split off before it is read).
    fn check_keys(&self, overrides: &Value) -> Result<(), BuildError> {
        Ok(rlx::config::check_keys(overrides, &self.keys())?)
    }

    /// What a build needs from the config, checked: the `multiagent`
    /// section, the evaluation keys, the algorithm's config, the resolved
    /// config, and the evaluators' config and policies if it evaluates.
    fn plan(&self, overrides: &Value) -> Result<Plan<C>, BuildError> {
        self.check_keys(overrides)?;
        let (multiagent, overrides) = multi_agent::split(overrides);
        if !self.evaluates() && multiagent.is_some() {
            return Err(self.no_multi_agent());
        }
        let (eval, overrides) = evaluation_config::split(&overrides)?;
        if eval.evaluation_interval > 0 && !self.evaluates() {
            return Err(BuildError::Unsupported(format!(
                "{} does not evaluate during training (`evaluation_interval`): {}",
                self.name, "its policies keep observation statistics in their state, or it trains several trainers"
            )));
        }
        let cfg = self.configure(&overrides)?;
        let mut resolved = serde_json::to_value(&cfg).expect("configs serialize");
        // The evaluators' policies: this config with `evaluation_config` on top.
        let evaluators = match eval.evaluation_interval {
            0 => None,
            _ => {
                let (merged, explore) = evaluation_config::evaluator_config(&resolved, &eval)?;
                let eval_cfg = self.configure(&merged).map_err(|e| match e {
                    BuildError::Config(e) => BuildError::Config(evaluation_config::in_evaluation_config(e)),
                    other => other,
                })?;
                let make = self.make_policy;
                let policies: PolicyMaker = Arc::new(move |o: &Space, a: &Space, seed, _| make(&eval_cfg, o, a, seed));
                Some((merged, explore, policies))
            }
        };
        if self.evaluates() {
            deep_merge(&mut resolved, &serde_json::to_value(&eval).expect("serializes"));
        }
        Ok(Plan { multiagent, eval, cfg, resolved, evaluators })
    }

    fn no_multi_agent(&self) -> BuildError {
        if self.capabilities.plays_games {
            return BuildError::Unsupported(format!(
                "{} plays every seat of a game with one network: it takes no `{}` section",
                self.name,
                multi_agent::KEY
            ));
        }
        BuildError::Unsupported(format!(
            "{} does not train multi-agent envs or several policies (`{}`): it perturbs or breeds one policy's weights",
            self.name,
            multi_agent::KEY
        ))
    }
}

/// A checked config, ready to build ([`Entry::plan`]).
struct Plan<C> {
    multiagent: Option<Value>,
    eval: EvaluationConfig,
    cfg: C,
    resolved: Value,
    /// The evaluators' merged config, whether they explore, and their policies.
    evaluators: Option<(Value, bool, PolicyMaker)>,
}

impl<C> Algorithm for Entry<C>
where
    C: Default + Serialize + DeserializeOwned + Validate + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn default_config(&self) -> Value {
        let mut value = serde_json::to_value(self.defaults()).expect("configs serialize");
        if self.evaluates() {
            deep_merge(&mut value, &serde_json::to_value(EvaluationConfig::default()).expect("serializes"));
        }
        value
    }

    fn config_keys(&self) -> Vec<String> {
        self.keys()
    }

    fn check_config(&self, overrides: &Value) -> Result<Value, BuildError> {
        let mut plan = self.plan(overrides)?;
        if let Some(section) = plan.multiagent {
            plan.resolved[multi_agent::KEY] = section;
        }
        Ok(plan.resolved)
    }

    fn config_docs(&self) -> Vec<(&'static str, &'static str)> {
        let mut docs = (self.docs)();
        if self.evaluates() {
            docs.extend(key_docs::<EvaluationConfig>());
        }
        docs
    }

    fn make_policy(
        &self,
        config: &Value,
        observation_space: &Space,
        action_space: &Space,
        seed: u64,
    ) -> Result<Box<dyn PolicyGraph>, BuildError> {
        let (_, config) = evaluation_config::split(config)?;
        (self.make_policy)(&self.configure(&config)?, observation_space, action_space, seed)
    }

    fn build(
        &self,
        make_env: EnvMaker,
        overrides: &Value,
        placement: Option<Arc<dyn Placement>>,
    ) -> BoxFuture<'static, Result<(Trainer, Value), BuildError>> {
        let plan = self.plan(overrides).and_then(|plan| {
            // Only these algorithms pay for the probe.
            let multi_agent_env = || make_env().ok().is_some_and(|env| env.agent_ids().is_some());
            if !self.evaluates() && !self.capabilities.plays_games && multi_agent_env() {
                return Err(self.no_multi_agent());
            }
            Ok(plan)
        });
        let Plan { multiagent, eval, cfg, mut resolved, evaluators } = match plan {
            Ok(plan) => plan,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        // Every policy the build makes meets the env through the wiring,
        // which reads the `multiagent` section there.
        let wiring = multi_agent::Wiring::new(
            multiagent.clone(),
            self.name,
            self.capabilities,
            resolved.clone(),
            Arc::new(Registry),
        );
        let ctx = BuildContext { policies: Some(wiring.clone()), placement };
        if let Some(section) = multiagent {
            resolved[multi_agent::KEY] = section;
        }
        let build = (self.build)(ctx.clone(), make_env.clone(), cfg);
        Box::pin(async move {
            let trainer = build.await?;
            let trainer = match evaluators {
                Some((merged, explore, policies)) => {
                    evaluation_config::attach(&ctx, trainer, &eval, &merged, explore, make_env, policies).await?
                }
                None => trainer,
            };
            let trainer = match wiring.plan() {
                Some(plan) => self_play::attach(trainer, &plan),
                None => trainer,
            };
            Ok((trainer, resolved))
        })
    }
}

/// The table as a [`PolicyLookup`]: how a `multiagent` policy with its own
/// `run` is built, without the build layer importing this module.
pub struct Registry;

impl PolicyLookup for Registry {
    fn check(&self, algorithm: &str) -> Result<(), BuildError> {
        self::algorithm(algorithm).map(drop)
    }

    fn make_policy(&self, algorithm: &str, config: &Value, obs: &Space, act: &Space, seed: u64) -> PolicyResult {
        self::algorithm(algorithm)?.make_policy(config, obs, act, seed)
    }
}

/// A config's keys with their docs ([`sections::key_docs`]), with the
/// sections each family declares for itself.
fn key_docs<C: documented::DocumentedFields>() -> Docs {
    sections::key_docs::<C>(family_section_docs)
}

/// The keys of the sections a family holds under the field `field`.
fn family_section_docs(field: &str) -> Option<Docs> {
    Some(match field {
        "q_learning" => key_docs::<dqn::QLearning>(),
        "impala" => key_docs::<impala::ImpalaConfig>(),
        "continuous" => key_docs::<crate::off_policy::core::ContinuousLearning>(),
        "perturbations" => key_docs::<crate::evolution::Perturbations>(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sorted() {
        let names: Vec<&str> = ALGORITHMS.iter().map(|a| a.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 20);
    }

    /// `rlx config` prints exactly the config's keys, each with its doc.
    #[test]
    fn config_docs_cover_every_key() {
        for a in ALGORITHMS {
            let cfg = a.default_config();
            let docs = a.config_docs();
            let mut documented: Vec<&str> = docs.iter().map(|d| d.0).collect();
            let mut keys: Vec<&str> = cfg.as_object().expect("an object").keys().map(String::as_str).collect();
            documented.sort_unstable();
            keys.sort_unstable();
            assert_eq!(documented, keys, "{}", a.name());
            assert!(docs.iter().all(|d| !d.1.trim().is_empty()), "{}: an undocumented key", a.name());
        }
    }

    #[test]
    fn an_unknown_name_suggests_the_closest() {
        let err = algorithm("PPo2").err().expect("unknown").to_string();
        assert!(err.contains("did you mean `PPO`"), "{err}");
    }
}
