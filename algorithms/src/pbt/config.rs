//! PBT's configuration: its keys with their defaults, the checks that need
//! no member algorithm ([`Validate`]), and those against the member
//! algorithms' table, which also write the default mutations out
//! ([`PbtConfig::resolve`]).

use super::exploit::HyperParam;
use super::member_algorithms::MemberAlgorithms;
use super::space::{Domain, Range};
use crate::common::sections::limits;
use rlx::config::{check, check_count, closest, deep_merge, ConfigError, Validate};
use rlx::RestartPolicy;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// PBT's configuration. Every key is optional in `--config`; unknown keys
/// are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct PbtConfig {
    /// The members' algorithm (any built-in algorithm but PBT).
    pub algorithm: String,
    /// Members trained in parallel (at least 2).
    pub population: usize,
    /// The config every member shares, as for `--config` of `algorithm`
    /// (except `seed`, derived from PBT's, and `env_config`, set at PBT's
    /// top level). By default members sample in their own actor
    /// (`num_workers` 0): the population is the parallelism.
    pub config: Value,
    /// Member iterations between two exploit/explore rounds (one PBT
    /// iteration is one round).
    pub perturbation_interval: u64,
    /// Share of the population in the bottom quantile, which copies a
    /// member of the top quantile of the same size; in (0, 0.5].
    pub quantile_fraction: f64,
    /// Probability that explore draws a copied hyperparameter afresh from
    /// its range rather than multiplying it by 0.8 or 1.2.
    pub resample_probability: f64,
    /// The hyperparameters to explore: numeric keys of the member config,
    /// each with its range, e.g. `{"lr": {"min": 1e-4, "max": 1e-2, "log":
    /// true}}` (or, as in `rlx tune`, `{"lr": {"loguniform": [1e-4,
    /// 1e-2]}}`; `choice` and `grid_search` cannot be explored). `null`:
    /// those of `lr` (log-uniform in [1e-4, 1e-2]), `entropy_coeff` ([0,
    /// 0.01]) and `clip_param` ([0.1, 0.3]) that the member algorithm has.
    /// Keys that shape the network cannot be explored: exploiting copies
    /// weights between members.
    pub hyperparam_mutations: Option<BTreeMap<String, Domain>>,
    /// Keyword arguments for the env every member trains on.
    pub env_config: Value,
    /// Seed of the exploit/explore draws and of the initial
    /// hyperparameters; member `i` trains with seed `seed + 10007 (i + 1)`
    /// (plus a different offset after each exploit or restart).
    pub seed: u64,
    /// How member actors are restarted after a failure.
    pub restart: RestartPolicy,
}

impl PbtConfig {
    /// The name `--run` takes.
    pub const NAME: &'static str = "PBT";
}

impl Default for PbtConfig {
    fn default() -> Self {
        Self {
            algorithm: "PPO".into(),
            population: 4,
            config: json!({"num_workers": 0}),
            perturbation_interval: 5,
            quantile_fraction: 0.25,
            resample_probability: 0.25,
            hyperparam_mutations: None,
            env_config: Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

/// The explored hyperparameters PBT picks when `hyperparam_mutations` is
/// `null`, among those the member algorithm has.
fn default_mutations() -> [(&'static str, Range); 3] {
    [
        ("lr", Range { min: 1e-4, max: 1e-2, log: true }),
        ("entropy_coeff", Range { min: 0.0, max: 0.01, log: false }),
        ("clip_param", Range { min: 0.1, max: 0.3, log: false }),
    ]
}

impl PbtConfig {
    /// The explored hyperparameters: `hyperparam_mutations`, or the
    /// defaults the member algorithm has.
    pub fn mutations(&self, algorithms: &dyn MemberAlgorithms) -> BTreeMap<String, Domain> {
        if let Some(m) = &self.hyperparam_mutations {
            return m.clone();
        }
        let defaults = algorithms.default_config(&self.algorithm).unwrap_or(Value::Null);
        default_mutations()
            .into_iter()
            .filter(|(key, _)| defaults.get(key).is_some_and(Value::is_number))
            .map(|(key, m)| (key.to_string(), Domain::Range(m)))
            .collect()
    }

    /// This config checked against the member algorithms (`algorithm` one
    /// of them; the keys of `config` and of `hyperparam_mutations` its),
    /// with the default mutations written out (what the resolved config
    /// shows). The registry's PBT entry resolves every config it reads,
    /// so `rlx train --run PBT` and `Algorithm::check_config` (which `rlx
    /// tune` calls) run these checks.
    ///
    /// # Errors
    /// The first key at fault, named.
    pub fn resolve(mut self, algorithms: &dyn MemberAlgorithms) -> Result<Self, ConfigError> {
        self.check_members(algorithms)?;
        self.hyperparam_mutations = Some(self.mutations(algorithms));
        Ok(self)
    }

    /// The member algorithm's defaults with `config` over them.
    pub(super) fn member_defaults(&self, algorithms: &dyn MemberAlgorithms) -> Value {
        let mut base = algorithms.default_config(&self.algorithm).unwrap_or(Value::Null);
        deep_merge(&mut base, &self.config);
        base
    }

    /// The explored hyperparameters with their kind (integer or not, as
    /// the member algorithm's config holds them).
    pub(super) fn hyperparams(&self, algorithms: &dyn MemberAlgorithms) -> Vec<HyperParam> {
        let defaults = algorithms.default_config(&self.algorithm).unwrap_or(Value::Null);
        self.mutations(algorithms)
            .into_iter()
            // `resolve` refuses every domain but a range.
            .filter_map(|(key, domain)| {
                let range = *domain.range()?;
                let integer = defaults.get(&key).is_some_and(|v| v.is_u64() || v.is_i64());
                Some(HyperParam { key, range, integer })
            })
            .collect()
    }

    /// `config`, which must be an object.
    fn config_object(&self) -> Result<&Map<String, Value>, ConfigError> {
        self.config
            .as_object()
            .ok_or_else(|| ConfigError::Invalid { key: "config".into(), message: "must be a JSON object".into() })
    }

    /// The checks against the member algorithms ([`resolve`](Self::resolve)).
    fn check_members(&self, algorithms: &dyn MemberAlgorithms) -> Result<(), ConfigError> {
        let names: Vec<&str> = algorithms.names().into_iter().filter(|&a| a != Self::NAME).collect();
        let allowed = format!("must be one of {}", names.join(", "));
        check("algorithm", &self.algorithm, names.contains(&self.algorithm.as_str()), &allowed)?;
        let config = self.config_object()?;
        let defaults = algorithms.default_config(&self.algorithm).unwrap_or(Value::Null);
        // The member keys PBT sets itself, neither set in `config` nor explored.
        let own = [
            ("seed", "set PBT's `seed`: each member's derives from it"),
            ("env_config", "set `env_config` at PBT's top level: all members share the env"),
        ];
        let valid: Vec<String> = defaults
            .as_object()
            .map(|o| o.keys().filter(|k| !own.iter().any(|(o, _)| o == k)).cloned().collect())
            .unwrap_or_default();
        for (key, instead) in own {
            if config.contains_key(key) {
                return Err(ConfigError::Invalid { key: format!("config.{key}"), message: instead.into() });
            }
        }
        for key in config.keys() {
            if !valid.contains(key) {
                return Err(ConfigError::UnknownKey {
                    key: format!("config.{key}"),
                    closest: closest(key, valid.iter().map(String::as_str)),
                    valid: valid.clone(),
                });
            }
        }
        let mutations = self.mutations(algorithms);
        check(
            "hyperparam_mutations",
            "{}",
            !mutations.is_empty(),
            &format!("must name at least one numeric key of {}'s config to explore", self.algorithm),
        )?;
        for (key, domain) in &mutations {
            let path = format!("hyperparam_mutations.{key}");
            match defaults.get(key).filter(|_| valid.contains(key)) {
                None => {
                    return Err(ConfigError::UnknownKey {
                        key: path,
                        closest: closest(key, valid.iter().map(String::as_str)),
                        valid: valid.clone(),
                    })
                }
                Some(v) if !(v.is_number() || v.is_null()) => {
                    return Err(ConfigError::Invalid {
                        key: path,
                        message: format!(
                            "{}'s `{key}` is not a number ({v}); only numbers can be explored",
                            self.algorithm
                        ),
                    })
                }
                Some(_) => {}
            }
            let Some(m) = domain.range() else {
                return Err(ConfigError::Invalid {
                    key: path,
                    message: format!(
                        "`{}` cannot be explored: PBT multiplies a number by 0.8 or 1.2 within a range, so give \
                         a range ({{\"min\", \"max\", \"log\"}}, `uniform` or `loguniform`)",
                        domain.kind()
                    ),
                });
            };
            let finite = m.min.is_finite() && m.max.is_finite();
            check(&format!("{path}.max"), m.max, finite && m.min <= m.max, "must be finite and >= min")?;
            check(&format!("{path}.min"), m.min, !m.log || m.min > 0.0, "must be > 0 with `log`")?;
        }
        Ok(())
    }
}

/// The checks that need no member algorithm; [`PbtConfig::resolve`] does
/// the others.
impl Validate for PbtConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        check_count("population", self.population, 2, limits::MAX_WORKERS)?;
        let q = self.quantile_fraction;
        check("quantile_fraction", q, q > 0.0 && q <= 0.5, "must be in (0, 0.5]")?;
        let p = self.resample_probability;
        check("resample_probability", p, (0.0..=1.0).contains(&p), "must be in [0, 1]")?;
        let n = self.perturbation_interval;
        check("perturbation_interval", n, n >= 1, "must be >= 1")?;
        self.restart.validate("restart")?;
        self.config_object()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_table::TwoAlgorithms;
    use super::*;
    use rlx::config::merge_json;

    /// The error of `overrides`, read and resolved as the registry does.
    fn config_error(overrides: Value) -> String {
        merge_json(&PbtConfig::default(), &overrides)
            .and_then(|cfg| cfg.resolve(&TwoAlgorithms))
            .expect_err("a bad config")
            .to_string()
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = config_error(json!({"population": 1}));
        assert!(err.contains("`population`") && err.contains("[2, 4096]"), "{err}");
        assert!(config_error(json!({"quantile_fraction": 0.6})).contains("`quantile_fraction`"));
        assert!(config_error(json!({"quantile_fraction": 0.0})).contains("`quantile_fraction`"));
        assert!(config_error(json!({"resample_probability": 1.5})).contains("`resample_probability`"));
        assert!(config_error(json!({"perturbation_interval": 0})).contains("`perturbation_interval`"));
        let err = config_error(json!({"algorithm": "PBT"}));
        assert!(err.contains("`algorithm`") && err.contains("must be one of A2C, PPO"), "{err}");
        assert!(config_error(json!({"algorithm": "PPOO"})).contains("`algorithm`"));
        let err = config_error(json!({"config": {"num_wrokers": 2}}));
        assert!(err.contains("`config.num_wrokers`") && err.contains("did you mean `num_workers`"), "{err}");
        assert!(config_error(json!({"config": {"seed": 3}})).contains("`config.seed`"));
        assert!(config_error(json!({"config": {"env_config": {}}})).contains("`config.env_config`"));
        assert!(config_error(json!({"config": [1]})).contains("`config`"));
        let err = config_error(json!({"hyperparam_mutations": {"lrr": {"min": 0.1, "max": 0.2}}}));
        assert!(err.contains("`hyperparam_mutations.lrr`") && err.contains("did you mean `lr`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"device": {"min": 0.1, "max": 0.2}}}));
        assert!(err.contains("`hyperparam_mutations.device`") && err.contains("not a number"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.1, "max": 0.01}}}));
        assert!(err.contains("`hyperparam_mutations.lr.max`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.0, "max": 0.01, "log": true}}}));
        assert!(err.contains("`hyperparam_mutations.lr.min`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.0, "mx": 0.01}}}));
        assert!(err.contains("hyperparam_mutations.lr") && err.contains("mx"), "{err}");
        assert!(config_error(json!({"hyperparam_mutations": {}})).contains("`hyperparam_mutations`"));
        let err = config_error(json!({"hyperparam_mutations": {"seed": {"min": 0.0, "max": 9.0}}}));
        assert!(err.contains("`hyperparam_mutations.seed`"), "{err}");
    }

    #[test]
    fn tune_domains_read_as_ranges_and_lists_are_refused_by_key() {
        let read = |mutations: Value| {
            merge_json(&PbtConfig::default(), &json!({"hyperparam_mutations": mutations}))
                .and_then(|cfg| cfg.resolve(&TwoAlgorithms))
        };
        let tune = read(json!({"lr": {"loguniform": [1e-4, 1e-2]}, "clip_param": {"uniform": [0.1, 0.3]}})).unwrap();
        let pbt = read(json!({"lr": {"min": 1e-4, "max": 1e-2, "log": true}, "clip_param": {"min": 0.1, "max": 0.3}}));
        assert_eq!(tune, pbt.unwrap());
        // The resolved config writes ranges as PBT always has.
        let resolved = serde_json::to_value(&tune).unwrap();
        assert_eq!(resolved["hyperparam_mutations"]["lr"], json!({"min": 1e-4, "max": 1e-2, "log": true}));
        for kind in ["choice", "grid_search"] {
            let err = read(json!({"num_sgd_iter": {kind: [4, 8]}})).unwrap_err().to_string();
            assert!(
                err.contains("`hyperparam_mutations.num_sgd_iter`")
                    && err.contains(&format!("`{kind}` cannot be explored")),
                "{err}"
            );
        }
        let err = read(json!({"lr": {"loguniform": [0, 1]}})).unwrap_err().to_string();
        assert!(
            err.contains("`hyperparam_mutations.lr`") && err.contains("`loguniform` needs 0 < low < high"),
            "{err}"
        );
    }

    #[test]
    fn default_mutations_follow_the_member_algorithm() {
        let ppo = PbtConfig::default().mutations(&TwoAlgorithms);
        assert_eq!(ppo.keys().collect::<Vec<_>>(), ["clip_param", "entropy_coeff", "lr"]);
        let a2c = PbtConfig { algorithm: "A2C".into(), ..PbtConfig::default() }.mutations(&TwoAlgorithms);
        assert_eq!(a2c.keys().collect::<Vec<_>>(), ["entropy_coeff", "lr"]);
        // A user's map replaces the defaults rather than merging into them.
        let cfg: PbtConfig =
            merge_json(&PbtConfig::default(), &json!({"hyperparam_mutations": {"gamma": {"min": 0.9, "max": 0.999}}}))
                .unwrap();
        let cfg = cfg.resolve(&TwoAlgorithms).unwrap();
        assert_eq!(cfg.mutations(&TwoAlgorithms).keys().collect::<Vec<_>>(), ["gamma"]);
    }
}
