//! The `multiagent` config section: which policies a multi-agent run has,
//! which agent each one controls, and which of them learn (RLlib's
//! `multiagent` keys).
//!
//! ```yaml
//! multiagent:
//!   policies:                 # ids, each with optional overrides
//!     p0: {}
//!     p1: {config: {lr: 0.0001, model: {fcnet_hiddens: [32, 32]}}}
//!     opponent: {run: DQN}    # another algorithm's policy (acts; learns in its own trainer)
//!   policy_mapping: {agent_0: p0, agent_1: p1}   # or "shared", or a pattern "p{i%2}"
//!   policies_to_train: [p0, p1]                  # default: every policy
//! ```
//!
//! The section is read once here, checked against the env's agents before
//! anything starts, and turns every policy the algorithm builds into a
//! [`MultiPolicy`] of the configured policies (see [`Wiring`]). Everything
//! else — evaluator actors, nodes, weights, checkpoints — is the
//! single-agent machinery, because a multi-agent env is a vector env of its
//! agents ([`rlx::multi_agent`]).
//!
//! A multi-agent env without the section gets one policy,
//! `default_policy`, shared by all agents.

use crate::common::build_context::{PolicyLookup, PolicyWiring};
use crate::common::capabilities::Capabilities;
use crate::common::sampling::PolicyMaker;
use crate::error::BuildError;
use rlx::config::{closest_n, deep_merge, ConfigError};
use rlx::{MultiPolicy, PolicyGraph, Space};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The config key.
pub const KEY: &str = "multiagent";

pub use crate::common::build_context::DEFAULT_POLICY;

/// One policy of the section.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// Another algorithm than the run's, for this policy's network and
    /// acting (e.g. a DQN policy in a PPO run); `None`: the run's.
    pub run: Option<String>,
    /// Overrides of that algorithm's config (the run's resolved config, or
    /// the other algorithm's defaults), `model` included.
    pub config: Value,
}

impl PolicySpec {
    /// The run's algorithm and config, without overrides.
    fn plain() -> Self {
        PolicySpec { run: None, config: Value::Null }
    }
}

/// The section, checked against an env's agents.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The env's agents, in row order.
    pub agent_ids: Vec<String>,
    /// Which policy acts for each row of the env's vector form: row `r`'s
    /// is `row_policy[r % row_policy.len()]`. One entry per agent (agent
    /// `i`'s policy), or, with self-play, one per agent of several copies.
    pub row_policy: Vec<String>,
    /// Self-play's snapshot schedule, if the section asks for self-play.
    pub self_play: Option<SelfPlay>,
    /// By id.
    pub policies: BTreeMap<String, PolicySpec>,
    /// The ids that learn.
    pub to_train: Vec<String>,
}

fn invalid(key: &str, message: impl Into<String>) -> BuildError {
    let key = if key.is_empty() { KEY.to_string() } else { format!("{KEY}.{key}") };
    BuildError::Config(ConfigError::Invalid { key, message: message.into() })
}

/// Splits the `multiagent` section off `overrides`.
pub fn split(overrides: &Value) -> (Option<Value>, Value) {
    match overrides {
        Value::Object(map) if map.contains_key(KEY) => {
            let mut rest = map.clone();
            let section = rest.remove(KEY);
            (section, Value::Object(rest))
        }
        _ => (None, overrides.clone()),
    }
}

/// `multiagent.self_play`: a policy `main` learns against snapshots of
/// itself, `main_v0` … `main_v{pool-1}`, all starting as copies of its
/// initial weights. `main_v0` keeps them; the others are frozen copies of
/// `main` taken every `snapshot_every` iterations, the oldest replaced. In a two-player game, env
/// copy `c` seats `main` as player `c % 2` and snapshot `(c / 2) % pool`
/// as the other, so with `2 × pool` copies per evaluator every snapshot
/// is played from both seats in every round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelfPlay {
    /// Iterations between snapshots.
    pub snapshot_every: u64,
    /// Snapshots kept.
    pub pool: usize,
}

/// The learning policy of a self-play run.
pub const MAIN: &str = "main";

impl SelfPlay {
    /// The id of snapshot `k`.
    pub fn snapshot(k: usize) -> String {
        format!("{MAIN}_v{k}")
    }

    fn parse(value: &Value) -> Result<Self, BuildError> {
        let Value::Object(map) = value else {
            return Err(invalid("self_play", format!("must be an object, got {value}")));
        };
        let mut out = SelfPlay { snapshot_every: 5, pool: 4 };
        for (key, v) in map {
            let n = v.as_u64().filter(|&n| n > 0);
            match (key.as_str(), n) {
                ("snapshot_every", Some(n)) => out.snapshot_every = n,
                ("pool", Some(n)) if n <= 64 => out.pool = n as usize,
                ("snapshot_every" | "pool", _) => {
                    return Err(invalid(
                        &format!("self_play.{key}"),
                        format!("must be a whole number in 1..=64, got {v}"),
                    ))
                }
                _ => {
                    return Err(invalid(
                        &format!("self_play.{key}"),
                        "unknown key; self_play takes snapshot_every and pool",
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The plan: `main` and its snapshots over two players.
    fn plan(self, section: &Map<String, Value>, agents: &[String]) -> Result<Plan, BuildError> {
        if let Some(key) = ["policies", "policy_mapping"].iter().find(|k| section.contains_key(**k)) {
            return Err(invalid(key, "is made by self_play (policy `main` and its snapshots); leave it out"));
        }
        if let Some(to_train) = section.get("policies_to_train") {
            if *to_train != serde_json::json!([MAIN]) {
                return Err(invalid("policies_to_train", "self_play trains `main` only"));
            }
        }
        if agents.len() != 2 {
            return Err(invalid("self_play", format!("needs a two-player game; the env has agents {agents:?}")));
        }
        let mut policies: BTreeMap<String, PolicySpec> =
            (0..self.pool).map(|k| (Self::snapshot(k), PolicySpec::plain())).collect();
        policies.insert(MAIN.into(), PolicySpec::plain());
        let mut row_policy = Vec::new();
        for c in 0..2 * self.pool {
            let (seat, opponent) = (c % 2, Self::snapshot((c / 2) % self.pool));
            row_policy.extend((0..2).map(|s| if s == seat { MAIN.to_string() } else { opponent.clone() }));
        }
        Ok(Plan {
            agent_ids: agents.to_vec(),
            row_policy,
            self_play: Some(self),
            policies,
            to_train: vec![MAIN.into()],
        })
    }
}

impl Plan {
    /// Reads `section` (`None`: one shared [`DEFAULT_POLICY`]) for an env
    /// whose agents are `agent_ids`.
    ///
    /// # Errors
    /// Unknown keys; a mapping that names a policy `policies` lacks, an
    /// agent the env does not have, or leaves an agent out; a policy no
    /// agent maps to; `policies_to_train` naming an unknown policy; an
    /// unknown `run` (one `lookup` does not know). Each names what is wrong.
    pub fn new(section: Option<&Value>, agent_ids: &[String], lookup: &dyn PolicyLookup) -> Result<Self, BuildError> {
        let empty = Map::new();
        let section = match section {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(other) => return Err(invalid("", format!("must be an object, got {other}"))),
        };
        const KEYS: [&str; 4] = ["policies", "policy_mapping", "policies_to_train", "self_play"];
        if let Some(key) = section.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(BuildError::Config(ConfigError::UnknownKey {
                key: format!("{KEY}.{key}"),
                closest: closest_n(key, KEYS, 1).into_iter().next(),
                valid: KEYS.iter().map(|k| k.to_string()).collect(),
            }));
        }
        if let Some(self_play) = section.get("self_play") {
            return SelfPlay::parse(self_play)?.plan(section, agent_ids);
        }
        let declared = section.get("policies").map(|p| parse_policies(p, lookup)).transpose()?;
        let agent_policy = map_agents(section.get("policy_mapping"), declared.as_ref(), agent_ids)?;
        let policies = match declared {
            Some(declared) => {
                for (agent, id) in agent_ids.iter().zip(&agent_policy) {
                    if !declared.contains_key(id) {
                        let message = format!(
                            "maps agent `{agent}` to policy `{id}`, which `policies` does not define (policies: {})",
                            listed(&declared)
                        );
                        return Err(invalid("policy_mapping", message));
                    }
                }
                if let Some(idle) = declared.keys().find(|id| !agent_policy.contains(id)) {
                    return Err(invalid(
                        "policies",
                        format!("policy `{idle}` controls no agent (policy_mapping sends none of {agent_ids:?} to it)"),
                    ));
                }
                declared
            }
            None => agent_policy.iter().map(|id| (id.clone(), PolicySpec::plain())).collect(),
        };
        let to_train = match section.get("policies_to_train") {
            None | Some(Value::Null) => policies.keys().cloned().collect(),
            Some(Value::Array(ids)) => {
                let mut out = Vec::new();
                for id in ids {
                    let Some(id) = id.as_str() else {
                        return Err(invalid("policies_to_train", format!("must list policy ids, got {id}")));
                    };
                    if !policies.contains_key(id) {
                        let message = format!("names `{id}`, which is not a policy (policies: {})", listed(&policies));
                        return Err(invalid("policies_to_train", message));
                    }
                    out.push(id.to_string());
                }
                out
            }
            Some(other) => return Err(invalid("policies_to_train", format!("must be a list of ids, got {other}"))),
        };
        if let Some((id, spec)) = policies.iter().find(|(id, spec)| spec.run.is_some() && to_train.contains(id)) {
            let message = format!(
                "names `{id}`, a {} policy: another algorithm's policy only acts here and learns in a trainer of \
                 its own (see the two-trainer example in the book); leave it out",
                spec.run.as_deref().unwrap_or_default()
            );
            return Err(invalid("policies_to_train", message));
        }
        Ok(Self { agent_ids: agent_ids.to_vec(), row_policy: agent_policy, self_play: None, policies, to_train })
    }

    /// A maker of [`MultiPolicy`]s over this plan. Policy `k` (in id
    /// order) is its algorithm's `make_policy` — the run's, or its own
    /// `run` — over a config: the run's `resolved` config (or the other
    /// algorithm's defaults) with the policy's `config` on top, and the
    /// run's seed plus `k × 1,000,003`, so that no two policies start
    /// alike. That is how the run's algorithm builds its own policies, and
    /// how `rlx rollout` rebuilds them. What the run's optimizer
    /// standardizes over the whole batch (PPO's and A2C's advantages),
    /// each policy gets standardized over its own rows.
    pub fn policies(
        self: &Arc<Self>,
        run: &'static str,
        capabilities: Capabilities,
        resolved: &Value,
        lookup: Arc<dyn PolicyLookup>,
    ) -> PolicyMaker {
        let plan = Arc::clone(self);
        let resolved = resolved.clone();
        let standardize = capabilities.standardizes;
        Arc::new(move |o: &Space, a: &Space, seed: u64, _| {
            let run_seed = resolved.get("seed").and_then(Value::as_u64).unwrap_or(0);
            let mut policies: BTreeMap<String, Box<dyn PolicyGraph>> = BTreeMap::new();
            for (k, (id, spec)) in plan.policies.iter().enumerate() {
                let offset = 1_000_003 * k as u64;
                let (algorithm, mut config) = match &spec.run {
                    None => (run, resolved.clone()),
                    Some(other) => (other.as_str(), Value::Object(Map::new())),
                };
                if spec.config.is_object() {
                    deep_merge(&mut config, &spec.config);
                }
                if spec.config.get("seed").is_none() {
                    config["seed"] = Value::from(run_seed.wrapping_add(offset));
                }
                let policy = lookup
                    .make_policy(algorithm, &config, o, a, seed.wrapping_add(offset))
                    .map_err(|e| in_policy(id, e))?;
                policies.insert(id.clone(), policy);
            }
            MultiPolicy::new(policies, plan.agent_ids.len(), &plan.row_policy, &plan.to_train, standardize)
                .map(|p| Box::new(p) as Box<dyn PolicyGraph>)
                .map_err(|e| BuildError::Unsupported(e.to_string()))
        })
    }
}

/// The `multiagent` section's [`PolicyWiring`] for a registry build of
/// algorithm `run`: reads the section when the build meets the env
/// ([`PolicyWiring::policies`]) and keeps the plan it made, for the
/// learner's policies and for [`attach`].
pub struct Wiring {
    section: Option<Value>,
    run: &'static str,
    capabilities: Capabilities,
    resolved: Value,
    lookup: Arc<dyn PolicyLookup>,
    plan: Mutex<Option<Arc<Plan>>>,
}

impl Wiring {
    /// The wiring of a build of `run` with `section` (the `multiagent`
    /// key, if given) and the `resolved` config; another algorithm's
    /// policy comes from `lookup`.
    pub fn new(
        section: Option<Value>,
        run: &'static str,
        capabilities: Capabilities,
        resolved: Value,
        lookup: Arc<dyn PolicyLookup>,
    ) -> Arc<Self> {
        Arc::new(Self { section, run, capabilities, resolved, lookup, plan: Mutex::new(None) })
    }

    /// The plan made while building, if the env had agents.
    pub fn plan(&self) -> Option<Arc<Plan>> {
        self.plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl PolicyWiring for Wiring {
    /// `base` itself for a single-agent env, or [`MultiPolicy`]s over the
    /// plan that the section (or the default, one shared policy) makes for
    /// the env's agents.
    ///
    /// # Errors
    /// A `multiagent` section for a single-agent env; a section that does
    /// not fit the env's agents ([`Plan::new`]); an algorithm that cannot
    /// train several policies.
    fn policies(&self, env: &dyn rlx::Env, base: PolicyMaker) -> Result<PolicyMaker, BuildError> {
        let Some(agents) = env.agent_ids() else {
            return match self.section {
                Some(_) => Err(invalid("", format!("needs a multi-agent env; {} has one agent", env.name()))),
                None => Ok(base),
            };
        };
        if !self.capabilities.multi_agent {
            return Err(BuildError::Unsupported(format!(
                "{} does not train multi-agent envs yet ({} has agents {agents:?}); \
                 PPO, A2C, PG, IMPALA, APPO, DQN, SAC, TD3 and DDPG do",
                self.run,
                env.name()
            )));
        }
        let resolved = &self.resolved;
        if resolved.get("num_devices").and_then(Value::as_u64).is_some_and(|n| n > 1) {
            return Err(invalid("", "multi-agent runs learn on one device; set num_devices to 1"));
        }
        let plan = Arc::new(Plan::new(self.section.as_ref(), agents, self.lookup.as_ref())?);
        if let Some(schedule) = plan.self_play {
            let copies = resolved.get("num_envs_per_worker").and_then(Value::as_u64).unwrap_or(1);
            if copies < 2 * schedule.pool as u64 {
                return Err(invalid(
                    "self_play.pool",
                    format!(
                        "{} snapshots need num_envs_per_worker of at least {} (each snapshot from both seats); \
                         it is {copies}",
                        schedule.pool,
                        2 * schedule.pool
                    ),
                ));
            }
        }
        *self.plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&plan));
        Ok(plan.policies(self.run, self.capabilities, resolved, Arc::clone(&self.lookup)))
    }

    fn learner_policies(&self, base: PolicyMaker) -> PolicyMaker {
        match self.plan() {
            Some(plan) => plan.policies(self.run, self.capabilities, &self.resolved, Arc::clone(&self.lookup)),
            None => base,
        }
    }
}

/// The policy ids, comma-separated, for error messages.
fn listed(policies: &BTreeMap<String, PolicySpec>) -> String {
    policies.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn in_policy(id: &str, e: BuildError) -> BuildError {
    BuildError::Unsupported(format!("{KEY}.policies.{id}: {e}"))
}

/// `policies`: a list of ids, or a map from id to `{run, config}` (or null).
fn parse_policies(value: &Value, lookup: &dyn PolicyLookup) -> Result<BTreeMap<String, PolicySpec>, BuildError> {
    let out: BTreeMap<String, PolicySpec> = match value {
        Value::Array(ids) => ids
            .iter()
            .map(|id| {
                id.as_str()
                    .map(|id| (id.to_string(), PolicySpec::plain()))
                    .ok_or_else(|| invalid("policies", format!("must be policy ids, got {id}")))
            })
            .collect::<Result<_, _>>()?,
        Value::Object(map) => map
            .iter()
            .map(|(id, spec)| {
                let spec = match spec {
                    Value::Null => PolicySpec::plain(),
                    Value::Object(fields) => {
                        if let Some(key) = fields.keys().find(|k| !["run", "config"].contains(&k.as_str())) {
                            return Err(invalid(
                                &format!("policies.{id}"),
                                format!("unknown key `{key}`; a policy takes `run` and `config`"),
                            ));
                        }
                        let run = match fields.get("run") {
                            None | Some(Value::Null) => None,
                            Some(Value::String(name)) => {
                                lookup.check(name)?;
                                Some(name.clone())
                            }
                            Some(other) => {
                                return Err(invalid(
                                    &format!("policies.{id}.run"),
                                    format!("must be a name, got {other}"),
                                ))
                            }
                        };
                        let config = fields.get("config").cloned().unwrap_or(Value::Null);
                        if !(config.is_null() || config.is_object()) {
                            return Err(invalid(&format!("policies.{id}.config"), "must be an object"));
                        }
                        PolicySpec { run, config }
                    }
                    other => return Err(invalid(&format!("policies.{id}"), format!("must be an object, got {other}"))),
                };
                Ok((id.clone(), spec))
            })
            .collect::<Result<_, _>>()?,
        other => return Err(invalid("policies", format!("must be a list or a map of policy ids, got {other}"))),
    };
    if out.is_empty() {
        return Err(invalid("policies", "names no policy"));
    }
    Ok(out)
}

/// Each agent's policy id from `policy_mapping`.
fn map_agents(
    mapping: Option<&Value>,
    declared: Option<&BTreeMap<String, PolicySpec>>,
    agents: &[String],
) -> Result<Vec<String>, BuildError> {
    let all = |id: &str| agents.iter().map(|_| id.to_string()).collect();
    match mapping {
        None | Some(Value::Null) => match declared {
            None => Ok(all(DEFAULT_POLICY)),
            Some(d) if d.len() == 1 => Ok(all(d.keys().next().expect("one"))),
            Some(_) => Err(invalid(
                "policy_mapping",
                "is needed with several policies: a map from agent id to policy id, \"shared\", or a pattern such as \"p{i%2}\"",
            )),
        },
        Some(Value::String(s)) if s == "shared" => match declared {
            None => Ok(all("shared")),
            Some(d) if d.len() == 1 => Ok(all(d.keys().next().expect("one"))),
            Some(d) => Err(invalid(
                "policy_mapping",
                format!("\"shared\" needs exactly one policy, `policies` has {}", d.len()),
            )),
        },
        Some(Value::String(pattern)) => {
            agents.iter().enumerate().map(|(i, agent)| expand(pattern, i, agent)).collect()
        }
        Some(Value::Object(map)) => {
            if let Some(stranger) = map.keys().find(|k| !agents.contains(k)) {
                return Err(invalid(
                    "policy_mapping",
                    format!("names agent `{stranger}`, which the env does not have (agents: {})", agents.join(", ")),
                ));
            }
            agents
                .iter()
                .map(|agent| match map.get(agent) {
                    Some(Value::String(id)) => Ok(id.clone()),
                    Some(other) => Err(invalid(
                        &format!("policy_mapping.{agent}"),
                        format!("must be a policy id, got {other}"),
                    )),
                    None => Err(invalid("policy_mapping", format!("gives agent `{agent}` no policy"))),
                })
                .collect()
        }
        Some(other) => Err(invalid(
            "policy_mapping",
            format!("must be a map from agent id to policy id, \"shared\", or a pattern, got {other}"),
        )),
    }
}

/// Agent `i` (id `agent`)'s policy id from a pattern: `{i}`, `{i%N}` and
/// `{i/N}` stand for the agent's index and arithmetic on it, `{agent}` for
/// its id; the rest is copied.
fn expand(pattern: &str, i: usize, agent: &str) -> Result<String, BuildError> {
    let mut out = String::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| invalid("policy_mapping", format!("pattern `{pattern}` has a `{{` without its `}}`")))?
            + open;
        let token = rest[open + 1..close].replace(' ', "");
        let number = |s: &str| {
            s.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                invalid("policy_mapping", format!("in `{{{token}}}`, `{s}` is not a whole number above 0"))
            })
        };
        let value = match token.as_str() {
            "i" => i.to_string(),
            "agent" => agent.to_string(),
            t if t.starts_with("i%") => (i % number(&t[2..])?).to_string(),
            t if t.starts_with("i/") => (i / number(&t[2..])?).to_string(),
            t => {
                return Err(invalid(
                    "policy_mapping",
                    format!("pattern `{pattern}`: unknown `{{{t}}}`; use {{i}}, {{i%N}}, {{i/N}} or {{agent}}"),
                ))
            }
        };
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn agents(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("agent_{i}")).collect()
    }

    fn err(section: Value) -> String {
        Plan::new(Some(&section), &agents(2), &Registry).expect_err("refused").to_string()
    }

    #[test]
    fn mappings_by_map_pattern_shared_and_default() {
        let by_map =
            Plan::new(Some(&json!({"policy_mapping": {"agent_0": "a", "agent_1": "b"}})), &agents(2), &Registry)
                .unwrap();
        assert_eq!(by_map.row_policy, ["a", "b"]);
        assert_eq!(by_map.to_train, ["a", "b"]);
        let pattern = Plan::new(Some(&json!({"policy_mapping": "p{i%2}"})), &agents(4), &Registry).unwrap();
        assert_eq!(pattern.row_policy, ["p0", "p1", "p0", "p1"]);
        assert_eq!(expand("team{i/2}-{agent}", 3, "x").unwrap(), "team1-x");
        let shared = Plan::new(Some(&json!({"policy_mapping": "shared"})), &agents(3), &Registry).unwrap();
        assert_eq!(shared.row_policy, ["shared"; 3]);
        let default = Plan::new(None, &agents(2), &Registry).unwrap();
        assert_eq!(default.row_policy, [DEFAULT_POLICY; 2]);
        let one = Plan::new(Some(&json!({"policies": ["main"]})), &agents(2), &Registry).unwrap();
        assert_eq!(one.row_policy, ["main"; 2]);
    }

    #[test]
    fn each_mistake_is_named_before_anything_runs() {
        let e = err(json!({"policies": ["p0", "p1"], "policy_mapping": {"agent_0": "p0", "agent_1": "p9"}}));
        assert!(e.contains("p9") && e.contains("agent_1"), "{e}");
        let e = err(json!({"policies": ["p0", "p1", "p2"], "policy_mapping": "p{i}"}));
        assert!(e.contains("`p2` controls no agent"), "{e}");
        let e = err(json!({"policy_mapping": {"agent_0": "p0", "agent_1": "p0", "agent_7": "p0"}}));
        assert!(e.contains("agent_7") && e.contains("does not have"), "{e}");
        let e = err(json!({"policy_mapping": {"agent_0": "p0"}}));
        assert!(e.contains("agent_1") && e.contains("no policy"), "{e}");
        let e = err(json!({"policy_mapping": "p{i%2}", "policies_to_train": ["p0", "p5"]}));
        assert!(e.contains("policies_to_train") && e.contains("p5"), "{e}");
        let e = err(json!({"policy_mapping": "p{j}"}));
        assert!(e.contains("{j}"), "{e}");
        let e = err(json!({"policies": {"p0": {"run": "DQNN"}}}));
        assert!(e.contains("DQN"), "{e}");
        let e = err(json!({"policy_maping": "shared"}));
        assert!(e.contains("policy_mapping"), "{e}");
        let e = err(json!({"policies": ["a", "b"]}));
        assert!(e.contains("policy_mapping") && e.contains("needed"), "{e}");
    }
}
