//! Building evaluators for an algorithm: the part of every execution plan
//! that is the same (envs from the maker, one policy per evaluator, seeds,
//! observation filter, supervised actors).

use crate::actor_critic::{self, ActorCriticLoss};
use crate::{BuildError, EnvMaker};
use rlx::config::{check, ConfigError};
use rlx::evaluator::evaluator_seed;
use rlx::filter::ObservationFilter;
use rlx::optimizer::{MultiDeviceConfig, MultiDeviceLearner, SyncSamplesConfig};
use rlx::{
    fields, EnvShards, EvaluatorError, EvaluatorFactory, Evaluators, PolicyEvaluator, PolicyGraph, RestartPolicy,
    Space, SyncSamplesOptimizer, Trainer, VectorEnv,
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
    /// Env shards of the sampling evaluators.
    pub env_shards: EnvShards,
}

/// Builds a policy for the env's spaces with the given action-sampling seed,
/// for the evaluator with the given index (0 is the driver's; Ape-X gives
/// each evaluator its own exploration ε).
pub type PolicyMaker =
    Arc<dyn Fn(&Space, &Space, u64, usize) -> Result<Box<dyn PolicyGraph>, BuildError> + Send + Sync>;

/// The local evaluator and `num_workers` supervised actor evaluators, each
/// with `num_envs_per_worker` envs from `make_env` and a policy from
/// `make_policy`. The env and policy are built once up front so a bad env or
/// an unsupported space is reported before any actor starts. With
/// `env_shards`, the evaluators that sample (the workers, or the local one
/// when there are none) step their copies in shard actors; the local
/// evaluator of a run with workers never samples, so its copies stay put.
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
    make_policy(probe.observation_space(), probe.action_space(), 0, 0)?;
    drop(probe);
    let settings = s.clone();
    let factory: EvaluatorFactory = Arc::new(move |index, generation| {
        let seed = evaluator_seed(settings.seed, index, generation);
        let n = settings.num_envs_per_worker;
        let samples = index > 0 || settings.num_workers == 0;
        let env = if settings.env_shards.enabled() && samples {
            VectorEnv::sharded(make_env.clone(), n, &settings.env_shards)?
        } else {
            VectorEnv::new((0..n).map(|_| make_env()).collect::<Result<Vec<_>, _>>()?)?
        };
        let policy = make_policy(env.observation_space(), env.action_space(), seed, index)
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

impl SamplingSettings {
    /// Synchronous sampling: each round gathers `train_batch_size` rows
    /// split evenly over the samplers.
    pub fn synchronous(
        num_workers: usize,
        num_envs_per_worker: usize,
        train_batch_size: usize,
        observation_filter: ObservationFilter,
        seed: u64,
        restart: RestartPolicy,
    ) -> Self {
        let sample_size = train_batch_size.div_ceil(num_workers.max(1));
        let env_shards = EnvShards::default();
        Self { num_workers, num_envs_per_worker, sample_size, observation_filter, seed, restart, env_shards }
    }

    /// These settings with the evaluators' copies split over `env_shards`.
    pub fn with_env_shards(self, env_shards: EnvShards) -> Self {
        Self { env_shards, ..self }
    }
}

/// The execution plan of the synchronous actor-critic algorithms without
/// minibatches (PG, A2C): evaluators with `loss`'s policy, driven by a
/// [`SyncSamplesOptimizer`] that standardizes advantages over each train
/// batch.
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn sync_trainer<L: ActorCriticLoss>(
    name: &'static str,
    make_env: EnvMaker,
    loss: L,
    sampling: SamplingSettings,
    min_sample_fraction: f64,
) -> Result<Trainer, BuildError> {
    let evaluators = spawn_evaluators(make_env, actor_critic_policies(name, loss), sampling).await?;
    let plan = SyncSamplesConfig { standardize_fields: vec![fields::ADVANTAGES.to_string()], min_sample_fraction };
    Ok(Trainer::new(Box::new(SyncSamplesOptimizer::new(evaluators, plan))))
}

/// Policies of the actor-critic algorithm `name` with `loss`, for
/// [`spawn_evaluators`].
pub fn actor_critic_policies<L: ActorCriticLoss>(name: &'static str, loss: L) -> PolicyMaker {
    Arc::new(move |o: &Space, a: &Space, seed, _| actor_critic::make_policy(name, &loss, o, a, seed))
}

/// With `num_devices` > 1, a learner that splits each minibatch over that
/// many replicas of the driver's policy (built like it, on the next
/// devices); `None` for one device.
///
/// # Errors
/// A device that cannot be opened.
pub fn multi_device_learner<L: ActorCriticLoss>(
    name: &'static str,
    loss: &L,
    evaluators: &Evaluators,
    num_devices: usize,
) -> Result<Option<MultiDeviceLearner>, BuildError> {
    if num_devices <= 1 {
        return Ok(None);
    }
    let learner = loss.learner();
    let local = evaluators.local().policy();
    let (obs, act) = (local.observation_space().clone(), local.action_space().clone());
    let replicas = (1..num_devices)
        .map(|i| actor_critic::make_policy_on(name, loss, &obs, &act, 0, learner.device.replica(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let config = MultiDeviceConfig {
        num_sgd_iter: learner.num_sgd_iter,
        sgd_minibatch_size: learner.sgd_minibatch_size,
        seed: learner.seed,
    };
    let learner = MultiDeviceLearner::new(replicas, config).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Some(learner))
}

/// Range checks every actor-critic config shares.
///
/// # Errors
/// The first out-of-range key.
pub fn check_learning(
    lr: f64,
    gamma: f64,
    vf_loss_coeff: f64,
    entropy_coeff: f64,
    grad_clip: Option<f64>,
    restart: &RestartPolicy,
) -> Result<(), ConfigError> {
    check("lr", lr, lr > 0.0 && lr.is_finite(), "must be > 0")?;
    check("gamma", gamma, (0.0..=1.0).contains(&gamma), "must be in [0, 1]")?;
    check("vf_loss_coeff", vf_loss_coeff, vf_loss_coeff >= 0.0, "must be >= 0")?;
    check("entropy_coeff", entropy_coeff, entropy_coeff >= 0.0, "must be >= 0")?;
    if let Some(c) = grad_clip {
        check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
    }
    restart.validate("restart")
}

/// Range checks of synchronous sampling.
///
/// # Errors
/// The first out-of-range key.
pub fn check_sync_sampling(
    num_envs_per_worker: usize,
    env_shards: &EnvShards,
    train_batch_size: usize,
    min_sample_fraction: f64,
    observation_filter: ObservationFilter,
) -> Result<(), ConfigError> {
    check("num_envs_per_worker", num_envs_per_worker, num_envs_per_worker >= 1, "must be >= 1")?;
    env_shards.validate(num_envs_per_worker)?;
    check("train_batch_size", train_batch_size, train_batch_size >= 1, "must be >= 1")?;
    let f = min_sample_fraction;
    check("min_sample_fraction", f, f > 0.0 && f <= 1.0, "must be in (0, 1]")?;
    // Filter statistics are synchronized with every worker each step, which
    // would wait for the straggler after all.
    let filtered = observation_filter != ObservationFilter::NoFilter;
    check("min_sample_fraction", f, f == 1.0 || !filtered, "must be 1.0 when an observation_filter is set")
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
