//! Perturbation workers: a [`Perturber`] evaluates antithetic pairs in
//! place (in the driver, a worker or a child), and a
//! [`PerturbationWorker`] actor (a [`NestedWorker`]) runs one or splits
//! its tasks over children it supervises.

use super::flat_policy::FlatPolicy;
use super::noise::NoiseTable;
use crate::common::nested_worker::{shares, NestedArgs, NestedMsg, NestedState, NestedWorker, Work};
use crate::model::ModelConfig;
use rlx::env::EnvMaker;
use rlx::evaluator::EvaluatorError;
use rlx::filter::RunningStat;
use rlx::{Env, EpisodeSummary, PolicyError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One antithetic pair to evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Offset of ε in the noise table.
    pub noise_offset: usize,
    /// Both episodes reset the env with this seed.
    pub env_seed: u64,
}

/// What every worker needs for one iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRequest {
    /// θ.
    pub weights: Vec<f32>,
    /// The statistics to normalize observations with.
    pub obs_stat: RunningStat,
    /// σ: ε is scaled by it.
    pub noise_stdev: f32,
}

/// A task's outcome: all a worker sends back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    /// The task's noise offset.
    pub noise_offset: usize,
    /// The episode with θ + σε.
    pub pos: EpisodeSummary,
    /// The episode with θ − σε.
    pub neg: EpisodeSummary,
    /// The raw observations both episodes saw.
    pub obs: RunningStat,
}

/// A policy, an env and the noise table: evaluates tasks in place. The
/// same code runs in the driver (no workers), in a worker and in a child.
pub struct Perturber {
    policy: FlatPolicy,
    env: Box<dyn Env>,
    noise: Arc<NoiseTable>,
    perturbed: Vec<f32>,
}

impl Perturber {
    /// Builds the env and the policy, and fetches the noise table.
    ///
    /// # Errors
    /// If the env cannot be built or its spaces are unsupported.
    pub fn new(spec: &PerturberSpec) -> Result<Self, EvaluatorError> {
        let env = (spec.make_env)()?;
        let policy = FlatPolicy::new(env.observation_space(), env.action_space(), &spec.model, spec.normalize, 0)?;
        Ok(Self { policy, env, noise: NoiseTable::shared(spec.noise_seed, spec.noise_size), perturbed: Vec::new() })
    }

    /// Evaluates each task's pair, in order.
    ///
    /// # Errors
    /// Weights of the wrong length, or an env error.
    pub fn evaluate(&mut self, request: &EvalRequest, tasks: &[Task]) -> Result<Vec<PairResult>, EvaluatorError> {
        let dim = self.policy.num_params();
        if request.weights.len() != dim {
            return Err(PolicyError::WrongLength { what: "weights", expected: dim, got: request.weights.len() }.into());
        }
        self.policy.set_obs_stat(&request.obs_stat);
        let (sigma, noise) = (request.noise_stdev, self.noise.clone());
        let mut out = Vec::with_capacity(tasks.len());
        for task in tasks {
            let eps = noise.get(task.noise_offset, dim);
            let mut obs = RunningStat::new(self.policy.obs_dim());
            let mut pair = [None, None];
            for (side, sign) in pair.iter_mut().zip([1.0f32, -1.0]) {
                self.perturbed.clear();
                self.perturbed.extend(request.weights.iter().zip(eps).map(|(&w, &e)| w + sign * sigma * e));
                *side = Some(self.policy.episode(self.env.as_mut(), &self.perturbed, task.env_seed, &mut obs)?);
            }
            let [Some(pos), Some(neg)] = pair else { unreachable!("both sides ran") };
            out.push(PairResult { noise_offset: task.noise_offset, pos, neg, obs });
        }
        Ok(out)
    }
}

/// How to build a [`Perturber`] (and a [`PerturbationWorker`]).
#[derive(Clone)]
pub struct PerturberSpec {
    /// Builds the env.
    pub make_env: EnvMaker,
    /// The network's hidden layers (`fcnet_hiddens`, `fcnet_activation`).
    pub model: ModelConfig,
    /// Whether observations are normalized.
    pub normalize: bool,
    /// The noise table's seed.
    pub noise_seed: u64,
    /// The noise table's length.
    pub noise_size: usize,
}

impl Work for Perturber {
    type Spec = PerturberSpec;
    /// θ, σ and the statistics, and the tasks to evaluate with them.
    type Request = (Arc<EvalRequest>, Vec<Task>);
    /// One result per task, in task order.
    type Answer = Vec<PairResult>;
    const CHILD: &'static str = "ES child worker";

    fn build(spec: &PerturberSpec) -> Result<Self, EvaluatorError> {
        Perturber::new(spec)
    }

    fn run(&mut self, (request, tasks): &Self::Request) -> Result<Vec<PairResult>, EvaluatorError> {
        self.evaluate(request, tasks)
    }

    /// Contiguous chunks of the tasks, the same request with each.
    fn split((request, tasks): &Self::Request, n: usize) -> Vec<Self::Request> {
        shares(tasks.len(), n).into_iter().map(|r| (request.clone(), tasks[r].to_vec())).collect()
    }

    fn join(answers: Vec<Vec<PairResult>>) -> Vec<PairResult> {
        answers.concat()
    }
}

/// A worker actor evaluating perturbations, itself or through children.
pub type PerturbationWorker = NestedWorker<Perturber>;
/// How to start a [`PerturbationWorker`].
pub type WorkerArgs = NestedArgs<Perturber>;
/// Messages of a [`PerturbationWorker`].
pub type WorkerMsg = NestedMsg<Perturber>;
/// A worker's evaluator, or its children.
pub type WorkerState = NestedState<Perturber>;
