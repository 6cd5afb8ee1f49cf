//! Building evaluators for an algorithm: the part of every execution plan
//! that is the same (envs from the maker, one policy per evaluator, seeds,
//! observation filter, supervised actors).

use crate::{BuildError, EnvMaker};
use rlx::evaluator::evaluator_seed;
use rlx::filter::ObservationFilter;
use rlx::{
    EvaluatorError, EvaluatorFactory, Evaluators, PolicyEvaluator, PolicyGraph, RestartPolicy, Space, VectorEnv,
};
use std::sync::Arc;

/// How an algorithm's evaluators sample.
#[derive(Clone, Debug)]
pub struct SamplingSettings {
    /// Evaluator actors; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies per evaluator.
    pub num_envs_per_worker: usize,
    /// Rows each evaluator returns per `sample()` (at least).
    pub sample_size: usize,
    /// Observation filter.
    pub observation_filter: ObservationFilter,
    /// Run seed.
    pub seed: u64,
    /// Restart policy of the evaluator actors.
    pub restart: RestartPolicy,
}

/// Builds a policy for the env's spaces with the given action-sampling seed.
pub type PolicyMaker = Arc<dyn Fn(&Space, &Space, u64) -> Result<Box<dyn PolicyGraph>, BuildError> + Send + Sync>;

/// The local evaluator and `num_workers` supervised actor evaluators, each
/// with `num_envs_per_worker` envs from `make_env` and a policy from
/// `make_policy`. The env and policy are built once up front so a bad env or
/// an unsupported space is reported before any actor starts.
///
/// # Errors
/// An env that cannot be built, unsupported spaces, or an evaluator that
/// fails to start.
pub async fn spawn_evaluators(
    make_env: EnvMaker,
    make_policy: PolicyMaker,
    s: SamplingSettings,
) -> Result<Evaluators, BuildError> {
    let probe = make_env()?;
    make_policy(probe.observation_space(), probe.action_space(), 0)?;
    drop(probe);
    let settings = s.clone();
    let factory: EvaluatorFactory = Arc::new(move |index, generation| {
        let seed = evaluator_seed(settings.seed, index, generation);
        let envs = (0..settings.num_envs_per_worker).map(|_| make_env()).collect::<Result<Vec<_>, _>>()?;
        let env = VectorEnv::new(envs)?;
        let policy = make_policy(env.observation_space(), env.action_space(), seed)
            .map_err(|e| EvaluatorError::Config(e.to_string()))?;
        let dim = env.obs_dim();
        let evaluator = PolicyEvaluator::new(policy, env, settings.sample_size, seed)?;
        Ok(match settings.observation_filter.build(dim) {
            Some(filter) => evaluator.with_observation_filter(filter),
            None => evaluator,
        })
    });
    Ok(Evaluators::spawn(factory, s.num_workers, s.restart).await?)
}
