//! What a build is handed besides its config: how the run's policies meet
//! the env's agents, and where worker evaluators run.
//!
//! Every algorithm's `build` takes a [`BuildContext`] and hands it to
//! [`spawn_evaluators`](crate::common::sampling::spawn_evaluators), so the
//! data flow is visible at each call site. The registry fills it in
//! (`registry.rs`): the `multiagent` section's wiring
//! ([`crate::build::multi_agent`]), which builds another algorithm's
//! policy through a [`PolicyLookup`] rather than by importing the
//! registry, and the deployment's [`Placement`] (worker nodes, the actix
//! backend). A caller's own execution plan passes
//! [`BuildContext::default`]: its policy maker as given (one
//! `default_policy` for every agent of a multi-agent env), in-process
//! actors.

use crate::error::BuildError;
use rlx::placement::Placement;
use rlx::{Env, MultiPolicy, PolicyGraph, Space};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Builds a policy for the env's spaces with the given action-sampling seed,
/// for the evaluator with the given index (0 is the driver's; Ape-X gives
/// each evaluator its own exploration ε).
pub type PolicyMaker =
    Arc<dyn Fn(&Space, &Space, u64, usize) -> Result<Box<dyn PolicyGraph>, BuildError> + Send + Sync>;

/// See the [module docs](self).
#[derive(Clone, Default)]
pub struct BuildContext {
    /// How the run's policies are wired to a multi-agent env's agents;
    /// `None`: the algorithm's own policy maker, as given (on a
    /// multi-agent env, one `default_policy` acting for every agent).
    pub policies: Option<Arc<dyn PolicyWiring>>,
    /// Where worker evaluators run; `None`: supervised ractor actors in
    /// this process.
    pub placement: Option<Arc<dyn Placement>>,
}

impl BuildContext {
    /// The policies for `env` (a probe of the run's env): `base` itself
    /// without wiring, otherwise what the wiring makes of it.
    ///
    /// # Errors
    /// What the wiring refuses (a `multiagent` section that does not fit
    /// the env, say).
    pub fn policies_for(&self, env: &dyn Env, base: PolicyMaker) -> Result<PolicyMaker, BuildError> {
        match &self.policies {
            Some(wiring) => wiring.policies(env, base),
            None => single_policy(env, base),
        }
    }

    /// The policy maker of a learner that keeps a policy of its own
    /// (IMPALA's and APPO's learner thread), over the same wiring as the
    /// evaluators. Call it after [`policies_for`](Self::policies_for).
    pub fn learner_policies(&self, base: PolicyMaker) -> PolicyMaker {
        match &self.policies {
            Some(wiring) => wiring.learner_policies(base),
            None => base,
        }
    }
}

/// How a run's policies meet a multi-agent env (implemented by
/// [`crate::build::multi_agent`]).
pub trait PolicyWiring: Send + Sync {
    /// The policies for `env`: `base` for a single-agent env, or policies
    /// over all its agents.
    ///
    /// # Errors
    /// A configuration that does not fit the env.
    fn policies(&self, env: &dyn Env, base: PolicyMaker) -> Result<PolicyMaker, BuildError>;

    /// The learner's policy maker over the wiring [`policies`](Self::policies)
    /// made, or `base` if it made none.
    fn learner_policies(&self, base: PolicyMaker) -> PolicyMaker;
}

/// A policy, or why it could not be built.
pub type PolicyResult = Result<Box<dyn PolicyGraph>, BuildError>;

/// Builds a policy of any known algorithm by name (the registry is one):
/// what a `multiagent` policy with its own `run` is built with.
pub trait PolicyLookup: Send + Sync {
    /// Whether `algorithm` is known.
    ///
    /// # Errors
    /// An unknown name, with the closest known one.
    fn check(&self, algorithm: &str) -> Result<(), BuildError>;

    /// A fresh policy of `algorithm` for `config` (over its defaults).
    ///
    /// # Errors
    /// An unknown algorithm, a bad config, spaces it cannot handle.
    fn make_policy(&self, algorithm: &str, config: &Value, obs: &Space, act: &Space, seed: u64) -> PolicyResult;
}

/// The policy of a multi-agent env run without a `multiagent` section.
pub const DEFAULT_POLICY: &str = "default_policy";

/// The policies for `env` without a `multiagent` section: `base` itself
/// for a single-agent env; for a multi-agent one, a [`MultiPolicy`] whose
/// one policy, [`DEFAULT_POLICY`], acts for every agent.
///
/// # Errors
/// A policy that cannot be built.
pub fn single_policy(env: &dyn rlx::Env, base: PolicyMaker) -> Result<PolicyMaker, BuildError> {
    let Some(agents) = env.agent_ids() else { return Ok(base) };
    let (num_agents, ids) = (agents.len(), vec![DEFAULT_POLICY.to_string()]);
    let row_policy = vec![DEFAULT_POLICY.to_string(); num_agents];
    Ok(Arc::new(move |o: &Space, a: &Space, seed, index| {
        let policies = BTreeMap::from([(DEFAULT_POLICY.to_string(), base(o, a, seed, index)?)]);
        MultiPolicy::new(policies, num_agents, &row_policy, &ids, &[])
            .map(|p| Box::new(p) as Box<dyn PolicyGraph>)
            .map_err(|e| BuildError::Unsupported(e.to_string()))
    }))
}
