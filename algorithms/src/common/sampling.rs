//! Building evaluators for an algorithm: the part of every execution plan
//! that is the same (envs from the maker, one policy per evaluator, seeds,
//! observation filter, supervised actors).

use crate::common::build_context::BuildContext;
pub use crate::common::build_context::PolicyMaker;
use crate::error::BuildError;
use rlx::config::ConfigError;
use rlx::env::EnvMaker;
use rlx::evaluator::evaluator_seed;
use rlx::experience::{
    ExperienceError, ExperienceReader, ExperienceWriter, InputMix, InputSource, InputSpec, OutputSettings,
};
use rlx::filter::ObservationFilter;
use rlx::{EnvShards, EvaluatorError, EvaluatorFactory, Evaluators, PolicyEvaluator, RestartPolicy, VectorEnv};
use std::sync::Arc;

/// How an algorithm's evaluators sample.
#[derive(Clone, Debug, Default)]
pub struct SamplingSettings {
    /// Evaluator actors; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies per evaluator.
    pub num_envs_per_worker: usize,
    /// Rows each evaluator returns per `sample()` (at least).
    pub sample_size: usize,
    /// Observation filter.
    pub observation_filter: ObservationFilter,
    /// Scale rewards by the running std of the discounted return with this
    /// discount (`normalize_rewards`).
    pub reward_scaling: Option<f64>,
    /// Run seed.
    pub seed: u64,
    /// Restart policy of the evaluator actors.
    pub restart: RestartPolicy,
    /// Env shards of the sampling evaluators.
    pub env_shards: EnvShards,
    /// Where the sampling evaluators write their episodes, if anywhere.
    pub output: Option<OutputSettings>,
    /// The files the sampling evaluators read instead of stepping their
    /// envs, and the rows they shuffle together.
    pub input: Option<(InputSpec, usize)>,
}

/// The local evaluator and `num_workers` supervised actor evaluators, each
/// with `num_envs_per_worker` envs from `make_env` and a policy from
/// `make_policy` (wired to a multi-agent env's agents as `ctx` says), placed
/// where `ctx` says. The env and policy are built once up front so a bad env or
/// an unsupported space is reported before any actor starts. With
/// `env_shards`, the evaluators that sample (the workers, or the local one
/// when there are none) step their copies in shard actors; the local
/// evaluator of a run with workers never samples, so its copies stay put.
///
/// # Errors
/// An env that cannot be built, unsupported spaces, or an evaluator that
/// fails to start.
pub async fn spawn_evaluators(
    ctx: &BuildContext,
    make_env: EnvMaker,
    make_policy: PolicyMaker,
    s: SamplingSettings,
) -> Result<Evaluators, BuildError> {
    if let Some(output) = &s.output {
        std::fs::create_dir_all(&output.dir).map_err(|e| ConfigError::Invalid {
            key: "output".into(),
            message: format!("{}: {e}", output.dir.display()),
        })?;
    }
    let probe = make_env()?;
    let make_policy = ctx.policies_for(probe.as_ref(), make_policy)?;
    make_policy(probe.observation_space(), probe.action_space(), 0, 0)?;
    // Each source by its weight: a dataset's reader, checked against the
    // env's spaces, or `None` for the env itself.
    let input = match &s.input {
        Some((spec, window)) => {
            let sources = spec.sources().map_err(|message| ConfigError::Invalid { key: "input".into(), message })?;
            let mut readers = Vec::with_capacity(sources.len());
            for (weight, source) in sources {
                let reader = match source {
                    Some(spec) => {
                        let reader = ExperienceReader::open(&spec).map_err(|e| input_error(&e))?;
                        let (obs, act) = (probe.observation_space(), probe.action_space());
                        reader.check_fits(obs, act).map_err(|e| input_error(&e))?;
                        Some(reader)
                    }
                    None => None,
                };
                readers.push((weight, reader));
            }
            Some((readers, *window))
        }
        None => None,
    };
    drop(probe);
    let settings = s.clone();
    let factory: EvaluatorFactory = Arc::new(move |index, generation| {
        let seed = evaluator_seed(settings.seed, index, generation);
        let n = settings.num_envs_per_worker;
        let samples = index > 0 || settings.num_workers == 0;
        let env = VectorEnv::build(make_env.clone(), n, &settings.env_shards, samples)?;
        let policy = make_policy(env.observation_space(), env.action_space(), seed, index)
            .map_err(|e| EvaluatorError::Config(e.to_string()))?;
        let dim = env.obs_dim();
        let mut evaluator = PolicyEvaluator::new(policy, env, settings.sample_size, seed)?;
        if let Some(filter) = settings.observation_filter.build(dim) {
            evaluator = evaluator.with_observation_filter(filter);
        }
        if let Some(gamma) = settings.reward_scaling {
            evaluator = evaluator.with_reward_scaling(gamma);
        }
        if let Some((readers, window)) = input.clone().filter(|_| samples) {
            let samplers = settings.num_workers.max(1);
            let share = |reader: ExperienceReader| {
                let reader = match reader.files().len() >= samplers {
                    true => reader.share(index.saturating_sub(1), samplers),
                    false => reader,
                };
                InputSource::new(reader, window, seed)
            };
            let sources = readers.into_iter().map(|(w, reader)| (w, reader.map(share))).collect();
            evaluator = evaluator.with_input_mix(InputMix::new(sources, seed ^ 0x5EED_0F_1A9));
        }
        if let Some(output) = settings.output.clone().filter(|_| samples) {
            let (obs, act) = evaluator.spaces();
            let tag = format!("w{index}-g{generation}");
            let filtered = settings.observation_filter != ObservationFilter::NoFilter;
            let writer = ExperienceWriter::new(output, obs, act, &tag).with_filtered_observations(filtered);
            evaluator = evaluator.with_output(writer);
        }
        Ok(evaluator)
    });
    Ok(Evaluators::spawn_placed(factory, s.num_workers, s.restart, ctx.placement.clone()).await?)
}

/// A bad `input`, as a config error naming the key.
fn input_error(e: &ExperienceError) -> BuildError {
    ConfigError::Invalid { key: "input".into(), message: e.to_string() }.into()
}

#[cfg(test)]
mod tests {
    use rlx::Space;
    use serde_json::json;

    #[test]
    fn every_sampling_algorithm_checks_env_shards_and_names_the_key() {
        let (o, a) = (Space::uniform_box(-1.0, 1.0, vec![3]).unwrap(), Space::discrete(2));
        for algorithm in ["PG", "A2C", "A3C", "PPO", "IMPALA", "APPO", "DQN", "APEX", "DDPG", "TD3", "SAC"] {
            let defaults = crate::default_config(algorithm).unwrap();
            assert_eq!(defaults["env_shards"]["num_shards"], 0, "{algorithm}: off by default");
            for (bad, named) in [
                (json!({"num_shards": 1000}), "env_shards.num_shards"),
                (json!({"restart": {"window_s": 0.0}}), "env_shards.restart.window_s"),
                (json!({"num_shard": 2}), "did you mean `num_shards`"),
            ] {
                let config = json!({"env_shards": bad});
                let err = crate::make_policy(algorithm, &config, &o, &a, 0).err().expect("a bad value");
                assert!(err.to_string().contains(named), "{algorithm}: {err}");
            }
        }
    }
}

/// A pool of worker actors' failure as the handle error a worker evaluator's
/// would be (workers count from 1, after the driver's evaluator): ES's and
/// ARS's perturbation workers.
pub fn worker_pool_error(e: rlx::PoolError) -> rlx::HandleError {
    use rlx::{HandleError, PoolError};
    match e {
        PoolError::BudgetExceeded { child, failures, max_restarts, window_s, last_failure, .. } => {
            HandleError::RestartBudgetExceeded { index: child + 1, failures, max_restarts, window_s, last_failure }
        }
        PoolError::Spawn { child, reason, .. } => HandleError::Spawn { index: child + 1, reason },
        PoolError::Unreachable { child, reason, .. } => HandleError::Unreachable { index: child + 1, reason },
    }
}
