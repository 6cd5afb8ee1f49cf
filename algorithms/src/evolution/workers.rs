//! Perturbation workers: a [`Perturber`] evaluates antithetic pairs in
//! place (in the driver, a worker or a child), and a
//! [`PerturbationWorker`] actor runs one or splits its tasks over children
//! it supervises.

use super::flat_policy::FlatPolicy;
use super::noise::NoiseTable;
use crate::model::ModelConfig;
use rlx::env::EnvMaker;
use rlx::evaluator::EvaluatorError;
use rlx::filter::RunningStat;
use rlx::pool::{ActorPool, ChildArgs, PoolError};
use rlx::{Env, EpisodeSummary, PolicyError, RestartPolicy};
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

/// A worker actor evaluating perturbations, itself or through children.
#[derive(Clone, Copy)]
pub struct PerturbationWorker;

/// How to start a [`PerturbationWorker`].
#[derive(Clone)]
pub struct WorkerArgs {
    /// Env, network and noise table.
    pub spec: PerturberSpec,
    /// Child workers to split tasks over (0: evaluate here).
    pub num_children: usize,
    /// The children's supervisor's restart policy.
    pub restart: RestartPolicy,
}

/// Messages of a [`PerturbationWorker`].
pub enum WorkerMsg {
    /// Evaluate these tasks; the answer keeps their order.
    Evaluate(Arc<EvalRequest>, Vec<Task>, ractor::RpcReplyPort<Result<Vec<PairResult>, EvaluatorError>>),
}

impl ractor::Message for WorkerMsg {}

/// A worker's evaluator, or its children.
pub enum WorkerState {
    /// Evaluates tasks itself.
    Leaf(Box<Perturber>),
    /// Splits tasks over children it supervises.
    Parent(ActorPool<PerturbationWorker>),
}

impl ractor::Actor for PerturbationWorker {
    type Msg = WorkerMsg;
    type State = WorkerState;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        _: ractor::ActorRef<WorkerMsg>,
        args: WorkerArgs,
    ) -> Result<WorkerState, ractor::ActorProcessingErr> {
        if args.num_children == 0 {
            return Ok(WorkerState::Leaf(Box::new(Perturber::new(&args.spec)?)));
        }
        let child = WorkerArgs { num_children: 0, ..args.clone() };
        let child_args: ChildArgs<PerturbationWorker> = Arc::new(move |_, _| child.clone());
        let pool = ActorPool::spawn("ES child worker", PerturbationWorker, args.num_children, child_args, args.restart)
            .await?;
        Ok(WorkerState::Parent(pool))
    }

    async fn handle(
        &self,
        _: ractor::ActorRef<WorkerMsg>,
        msg: WorkerMsg,
        state: &mut WorkerState,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let WorkerMsg::Evaluate(request, tasks, reply) = msg;
        let result = match state {
            WorkerState::Leaf(perturber) => perturber.evaluate(&request, &tasks),
            WorkerState::Parent(children) => {
                let pool_error = |e: PoolError| EvaluatorError::Config(e.to_string());
                evaluate_on(children, &request, &tasks, pool_error, |_, e| e).await
            }
        };
        let _ = reply.send(result);
        Ok(())
    }
}

/// Splits `tasks` into contiguous chunks, one per child, evaluates them in
/// parallel and concatenates the answers in task order. The caller says
/// what a pool failure and a child's error (with the child's index) become.
pub(super) async fn evaluate_on<E>(
    pool: &mut ActorPool<PerturbationWorker>,
    request: &Arc<EvalRequest>,
    tasks: &[Task],
    pool_error: impl FnOnce(PoolError) -> E,
    child_error: impl Fn(usize, EvaluatorError) -> E,
) -> Result<Vec<PairResult>, E> {
    let chunks = split(tasks, pool.len());
    let answers = pool
        .call_all(|i, reply| WorkerMsg::Evaluate(request.clone(), chunks[i].to_vec(), reply))
        .await
        .map_err(pool_error)?;
    let mut out = Vec::with_capacity(tasks.len());
    for (i, answer) in answers.into_iter().enumerate() {
        out.extend(answer.map_err(|e| child_error(i, e))?);
    }
    Ok(out)
}

/// `tasks` in `n` contiguous chunks whose lengths differ by at most one.
fn split(tasks: &[Task], n: usize) -> Vec<&[Task]> {
    let (base, extra) = (tasks.len() / n, tasks.len() % n);
    let mut at = 0;
    (0..n)
        .map(|i| {
            let len = base + usize::from(i < extra);
            at += len;
            &tasks[at - len..at]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_gives_contiguous_near_equal_chunks() {
        let tasks: Vec<Task> = (0..7).map(|i| Task { noise_offset: i, env_seed: 0 }).collect();
        let lens: Vec<usize> = split(&tasks, 3).iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![3, 2, 2]);
        assert_eq!(split(&tasks, 3).concat(), tasks);
    }
}
