//! The optimizer ES and ARS share: it draws the tasks, has the workers (or
//! the driver) evaluate them, merges their observation statistics and asks
//! the [`UpdateRule`] for the new weights.

use super::flat_policy::FlatPolicy;
use super::noise::NoiseTable;
use super::update_rule::UpdateRule;
use super::workers::{EvalRequest, PairResult, PerturbationWorker, Perturber, PerturberSpec, Task, WorkerArgs};
use crate::common::nested_worker::run_on;
use crate::common::sampling::worker_pool_error;
use crate::error::BuildError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::check;
use rlx::evaluator::EvaluatorError;
use rlx::filter::RunningStat;
use rlx::optimizer::{OptimizerError, PolicyOptimizer, StepStats};
use rlx::pool::{ActorPool, ChildArgs};
use rlx::{Evaluators, HandleError, PolicyError, PolicyEvaluator, RestartPolicy, Trainer, VectorEnv};
use std::sync::Arc;

/// Settings shared by ES and ARS.
#[derive(Clone)]
pub struct EvolutionSettings {
    /// Worker actors (0: evaluate in the driver).
    pub num_workers: usize,
    /// Child workers per worker (0: no nesting).
    pub num_children_per_worker: usize,
    /// Antithetic pairs per iteration.
    pub num_perturbations: usize,
    /// σ.
    pub noise_stdev: f32,
    /// Seed of the task draws and of the network's initialization.
    pub seed: u64,
    /// Restart policy of the workers' and the children's supervisors.
    pub restart: RestartPolicy,
    /// Env, network and noise table.
    pub spec: PerturberSpec,
}

/// Drives perturbation workers and applies an [`UpdateRule`]: the
/// execution plan of ES and ARS.
pub struct EvolutionOptimizer {
    workers: Option<ActorPool<PerturbationWorker>>,
    local: Option<Perturber>,
    noise: Arc<NoiseTable>,
    rule: Box<dyn UpdateRule>,
    settings: EvolutionSettings,
    rng: ChaCha8Rng,
}

impl EvolutionOptimizer {
    /// Builds the workers, and the driver's evaluator whose policy holds θ
    /// (for checkpoints and rollouts).
    ///
    /// # Errors
    /// An env that cannot be built, unsupported spaces, a noise table
    /// shorter than the network, or a worker that fails to start.
    pub async fn new(settings: EvolutionSettings, rule: Box<dyn UpdateRule>) -> Result<(Evaluators, Self), BuildError> {
        let spec = &settings.spec;
        let env = (spec.make_env)()?;
        let policy =
            FlatPolicy::new(env.observation_space(), env.action_space(), &spec.model, spec.normalize, settings.seed)
                .map_err(|e| BuildError::Unsupported(e.to_string()))?;
        if policy.num_params() > spec.noise_size {
            let allowed = format!("must be at least the network's {} weights", policy.num_params());
            return Err(check("noise_size", spec.noise_size, false, &allowed).unwrap_err().into());
        }
        let local = PolicyEvaluator::new(Box::new(policy), VectorEnv::new(vec![env])?, 1, settings.seed)
            .map_err(|source| HandleError::Failed { index: 0, source })?;
        let evaluators = Evaluators::from_parts(local, Vec::new());
        let (workers, local) = if settings.num_workers == 0 {
            let perturber = Perturber::new(spec).map_err(|source| HandleError::Failed { index: 0, source })?;
            (None, Some(perturber))
        } else {
            let args = WorkerArgs {
                spec: spec.clone(),
                num_children: settings.num_children_per_worker,
                restart: settings.restart,
            };
            let args: ChildArgs<PerturbationWorker> = Arc::new(move |_, _| args.clone());
            let pool =
                ActorPool::spawn("ES worker", PerturbationWorker::new(), settings.num_workers, args, settings.restart)
                    .await
                    .map_err(|e| HandleError::Spawn { index: 1, reason: e.to_string() })?;
            (Some(pool), None)
        };
        let noise = NoiseTable::shared(spec.noise_seed, spec.noise_size);
        // Its own stream: the network's initialization used `seed` directly.
        let rng = ChaCha8Rng::seed_from_u64(settings.seed ^ 0x7A5C_D8A3_0F1E_2B4D);
        Ok((evaluators, Self { workers, local, noise, rule, settings, rng }))
    }

    /// The worker pool (`None` when the driver evaluates), e.g. for a
    /// fault test to kill a worker.
    pub fn workers(&self) -> Option<&ActorPool<PerturbationWorker>> {
        self.workers.as_ref()
    }

    /// The weights and observation statistics the driver's policy holds.
    fn current(evaluators: &Evaluators) -> (Vec<f32>, RunningStat) {
        let local = evaluators.local();
        let policy = local.policy();
        let stat = policy.save_state().and_then(|b| rlx::codec::decode_value(&b).ok());
        (policy.get_weights(), stat.unwrap_or_else(|| RunningStat::new(policy.observation_space().flat_dim())))
    }

    /// One iteration's tasks (drawn by the driver, so a run is one seed's
    /// whatever the worker layout).
    fn draw_tasks(&mut self, dim: usize) -> Vec<Task> {
        (0..self.settings.num_perturbations)
            .map(|_| Task { noise_offset: self.noise.random_offset(&mut self.rng, dim), env_seed: self.rng.gen() })
            .collect()
    }

    /// Evaluates `request` on each task, on the workers or in the driver.
    async fn evaluate(
        &mut self,
        request: &Arc<EvalRequest>,
        tasks: &[Task],
    ) -> Result<Vec<PairResult>, OptimizerError> {
        Ok(match (&mut self.workers, &mut self.local) {
            (Some(pool), _) => {
                let failed = |i: usize, source| HandleError::Failed { index: i + 1, source };
                run_on(pool, &(request.clone(), tasks.to_vec()), worker_pool_error, failed).await?
            }
            (None, Some(local)) => local.evaluate(request, tasks)?,
            (None, None) => unreachable!("built with workers or a local perturber"),
        })
    }

    /// Gives the driver's policy the new weights and observation statistics.
    fn adopt(evaluators: &mut Evaluators, weights: &[f32], obs_stat: &RunningStat) -> Result<(), EvaluatorError> {
        let mut local = evaluators.local_mut();
        let policy = local.policy_mut();
        policy.set_weights(weights)?;
        let stat_bytes = rlx::codec::encode_value(obs_stat).map_err(|e| PolicyError::Other(e.to_string()))?;
        Ok(policy.load_state(&stat_bytes)?)
    }
}

#[rlx::async_trait]
impl PolicyOptimizer for EvolutionOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let (theta, mut obs_stat) = Self::current(evaluators);
        let tasks = self.draw_tasks(theta.len());
        let noise_stdev = self.settings.noise_stdev;
        let request = Arc::new(EvalRequest { weights: theta.clone(), obs_stat: obs_stat.clone(), noise_stdev });
        let results = self.evaluate(&request, &tasks).await?;
        let mut episodes = Vec::with_capacity(2 * results.len());
        for r in &results {
            obs_stat.merge(&r.obs).map_err(|e| EvaluatorError::Config(format!("an ES worker's result: {e}")))?;
            episodes.extend([r.pos, r.neg]);
        }
        let (new_theta, mut learner) = self.rule.update(&theta, &results, &self.noise);
        Self::adopt(evaluators, &new_theta, &obs_stat)?;
        let update: Vec<f32> = new_theta.iter().zip(&theta).map(|(a, b)| a - b).collect();
        learner.set("num_perturbations", results.len() as f64);
        learner.set("weights_norm", rlx::policy::global_norm(&new_theta));
        learner.set("update_norm", rlx::policy::global_norm(&update));
        learner.set("obs_stat_count", obs_stat.count() as f64);
        if let Some(pool) = &self.workers {
            learner.set("worker_restarts", pool.restarts() as f64);
        }
        let steps: u64 = episodes.iter().map(|e| e.length).sum();
        Ok(StepStats { steps_sampled: steps, steps_trained: steps, episodes, learner })
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        let mut gaps = self.rule.checkpoint_gaps();
        gaps.push("the task generator's position is not saved; a restored run draws new perturbations".into());
        gaps
    }
}

/// Wraps the optimizer in a trainer.
///
/// # Errors
/// As [`EvolutionOptimizer::new`].
pub async fn trainer(settings: EvolutionSettings, rule: Box<dyn UpdateRule>) -> Result<Trainer, BuildError> {
    let (evaluators, optimizer) = EvolutionOptimizer::new(settings, rule).await?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}
