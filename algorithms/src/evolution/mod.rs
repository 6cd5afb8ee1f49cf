//! What evolution strategies ([`es`](crate::evolution::es)) and augmented random
//! search ([`ars`](crate::evolution::ars)) share: the noise table, a policy on flat
//! weights, perturbation workers that may nest, and the optimizer that
//! drives them. Each algorithm adds only its update rule ([`UpdateRule`]).
//!
//! One iteration:
//! 1. The driver draws `num_perturbations` tasks: a noise-table offset and
//!    an env seed each.
//! 2. Each worker gets the current weights θ, the observation statistics
//!    and its share of the tasks. For each task it runs one episode with
//!    θ + σε and one with θ − σε (antithetic pair, same env seed), where ε
//!    is the noise table's slice at the task's offset.
//! 3. Workers return `(offset, return⁺, return⁻)` per task plus what their
//!    observations added to the statistics: a few dozen bytes per task, no
//!    matter how large the network. The noise itself never travels: every
//!    process generates the same table from the seed ([`NoiseTable`]).
//! 4. The driver merges the statistics in task order and asks the update
//!    rule for the new θ.
//!
//! **Nesting.** A [`PerturbationWorker`] with `num_children > 0` splits its
//! tasks over child workers it supervises itself (an [`ActorPool`]), so one
//! worker can be a whole node's worth of cores. Every task is evaluated the
//! same way wherever it runs (its own env seed, the driver's frozen
//! statistics) and results are merged in task order, so nesting changes
//! where work runs, not what is computed: the weights are bit for bit those
//! of the flat run (a test checks it).

pub mod ars;
pub mod es;

use crate::common::sections::limits;
use crate::error::BuildError;
use crate::model::{Activation, ModelConfig, ModelSupport};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, check_count, ConfigError};
use rlx::env::EnvMaker;
use rlx::evaluator::EvaluatorError;
use rlx::filter::{ObservationFilter, RunningStat};
use rlx::optimizer::{OptimizerError, PolicyOptimizer, StepStats};
use rlx::pool::{ActorPool, ChildArgs, PoolError};
use rlx::{
    fields, Action, Env, EpisodeSummary, Evaluators, FlatGradients, FlatWeights, HandleError, LearnerStats,
    PolicyError, PolicyEvaluator, PolicyGraph, RestartPolicy, SampleBatch, Space, Trainer, VectorEnv,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

// ---------------------------------------------------------------------------
// Noise table
// ---------------------------------------------------------------------------

/// A block of standard-normal noise generated from a seed (Salimans et al.
/// 2017, §2.1): a perturbation is named by an offset into it, so workers
/// and driver exchange offsets instead of vectors.
pub struct NoiseTable {
    noise: Vec<f32>,
}

impl NoiseTable {
    /// Generates `size` standard-normal values from `seed`.
    pub fn new(seed: u64, size: usize) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self { noise: (0..size).map(|_| rng.sample::<f32, _>(rand_distr::StandardNormal)).collect() }
    }

    /// The table for `(seed, size)`, generated once per process and shared
    /// by every worker in it while any holds it.
    pub fn shared(seed: u64, size: usize) -> Arc<NoiseTable> {
        type Tables = Mutex<HashMap<(u64, usize), Weak<NoiseTable>>>;
        static TABLES: OnceLock<Tables> = OnceLock::new();
        let mut tables = TABLES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = tables.get(&(seed, size)).and_then(Weak::upgrade) {
            return table;
        }
        let table = Arc::new(NoiseTable::new(seed, size));
        tables.insert((seed, size), Arc::downgrade(&table));
        table
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.noise.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.noise.is_empty()
    }

    /// The `dim` values at `offset`.
    ///
    /// # Panics
    /// If the slice runs past the table (offsets come from
    /// [`random_offset`](Self::random_offset)).
    pub fn get(&self, offset: usize, dim: usize) -> &[f32] {
        &self.noise[offset..offset + dim]
    }

    /// A uniformly random offset of a `dim`-long slice.
    pub fn random_offset(&self, rng: &mut impl Rng, dim: usize) -> usize {
        rng.gen_range(0..=self.noise.len() - dim)
    }
}

// ---------------------------------------------------------------------------
// Policy on flat weights
// ---------------------------------------------------------------------------

/// One arg-max per element of a `MultiDiscrete` action, over its slice
/// of the outputs.
fn multi_argmax(out: &[f32], nvec: &[i64]) -> Vec<i64> {
    let mut start = 0;
    nvec.iter()
        .map(|&n| {
            let a = argmax(&out[start..start + n as usize]) as i64;
            start += n as usize;
            a
        })
        .collect()
}

/// A model config with these hidden widths (tanh).
pub fn hiddens(widths: &[usize]) -> ModelConfig {
    ModelConfig { fcnet_hiddens: widths.to_vec(), ..ModelConfig::default() }
}

/// A deterministic policy on one flat weight vector: a tanh MLP (or, with
/// no hidden layers, a linear map as in ARS) over normalized observations.
/// Discrete actions take the arg-max output; continuous ones the output
/// clipped to the action bounds.
///
/// Written without a tensor library because ES and ARS only ever run it
/// forward, one observation at a time, with weights that change every
/// episode: a plain loop over a flat vector is the fastest way to do that
/// and makes θ + σε a slice addition.
#[derive(Clone)]
pub struct FlatPolicy {
    obs_space: Space,
    act_space: Space,
    /// Layer widths, input first, output last.
    sizes: Vec<usize>,
    weights: Vec<f32>,
    /// The observation statistics the policy normalizes with.
    obs_stat: RunningStat,
    mean: Vec<f32>,
    inv_std: Vec<f32>,
    normalize: bool,
    activation: Activation,
    scratch: [Vec<f32>; 2],
}

/// Normalized observations are clipped to ±this (as RLlib's filter).
const OBS_CLIP: f32 = 10.0;

impl FlatPolicy {
    /// A policy for these spaces with `model`'s hidden layers
    /// (`fcnet_hiddens`, `fcnet_activation`), initialized from `seed`
    /// (zeros when linear, as in ARS); `normalize` turns observation
    /// normalization on. Observations of any `Box` shape are flattened.
    ///
    /// # Errors
    /// Discrete observations (no one-hot encoding here), or an empty
    /// action space.
    pub fn new(obs: &Space, act: &Space, model: &ModelConfig, normalize: bool, seed: u64) -> Result<Self, PolicyError> {
        let hidden = &model.fcnet_hiddens[..];
        let obs_dim = match obs {
            Space::Box { .. } => obs.flat_dim(),
            other => return Err(PolicyError::Other(format!("needs a Box observation space, not {other}"))),
        };
        let out = match act {
            Space::Discrete { n } => *n as usize,
            Space::Box { .. } => act.flat_dim(),
            Space::MultiDiscrete { nvec } => nvec.iter().sum::<i64>() as usize,
        };
        if out == 0 {
            return Err(PolicyError::Other(format!("cannot act in the empty action space {act}")));
        }
        let mut sizes = vec![obs_dim];
        sizes.extend_from_slice(hidden);
        sizes.push(out);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut weights = Vec::new();
        for (l, w) in sizes.windows(2).enumerate() {
            let (fan_in, fan_out) = (w[0], w[1]);
            // Hidden layers: uniform with unit-variance outputs; the output
            // layer starts two orders of magnitude smaller so early actions do not saturate
            // (the ES paper's normalized-column init has the same aim).
            let last = l == sizes.len() - 2;
            let scale = if hidden.is_empty() {
                0.0
            } else if last {
                0.01 / (fan_in as f32).sqrt()
            } else {
                (3.0 / fan_in as f32).sqrt()
            };
            weights.extend((0..fan_in * fan_out).map(|_| rng.gen_range(-1.0..=1.0f32) * scale));
            weights.extend(std::iter::repeat_n(0.0, fan_out));
        }
        let widest = *sizes.iter().max().unwrap_or(&1);
        Ok(Self {
            obs_space: obs.clone(),
            act_space: act.clone(),
            sizes,
            weights,
            obs_stat: RunningStat::new(obs_dim),
            mean: vec![0.0; obs_dim],
            inv_std: vec![1.0; obs_dim],
            normalize,
            activation: model.fcnet_activation,
            scratch: [vec![0.0; widest], vec![0.0; widest]],
        })
    }

    /// Number of weights.
    pub fn num_params(&self) -> usize {
        self.weights.len()
    }

    /// The observation statistics the policy normalizes with.
    pub fn obs_stat(&self) -> &RunningStat {
        &self.obs_stat
    }

    /// Normalizes with `stat` from now on (no-op without normalization).
    pub fn set_obs_stat(&mut self, stat: &RunningStat) {
        self.obs_stat = stat.clone();
        if self.normalize {
            self.mean = stat.mean().iter().map(|&m| m as f32).collect();
            self.inv_std = stat.std().iter().map(|&s| 1.0 / (s as f32 + 1e-8)).collect();
        }
    }

    /// The network's output for one observation, into `self.scratch[..]`;
    /// returns which scratch buffer holds it.
    fn forward(&mut self, obs: &[f32], weights: &[f32]) -> usize {
        let [a, b] = &mut self.scratch;
        if self.normalize {
            for (i, &x) in obs.iter().enumerate() {
                a[i] = ((x - self.mean[i]) * self.inv_std[i]).clamp(-OBS_CLIP, OBS_CLIP);
            }
        } else {
            a[..obs.len()].copy_from_slice(obs);
        }
        let (mut input, mut output) = (a, b);
        let mut at = 0;
        let layers = self.sizes.len() - 1;
        for l in 0..layers {
            let (n_in, n_out) = (self.sizes[l], self.sizes[l + 1]);
            let (w, bias) = (&weights[at..at + n_in * n_out], &weights[at + n_in * n_out..at + n_in * n_out + n_out]);
            at += n_in * n_out + n_out;
            output[..n_out].copy_from_slice(bias);
            for (i, &x) in input[..n_in].iter().enumerate() {
                for (o, &wij) in output[..n_out].iter_mut().zip(&w[i * n_out..(i + 1) * n_out]) {
                    *o += x * wij;
                }
            }
            if l + 1 < layers {
                match self.activation {
                    Activation::Tanh => output[..n_out].iter_mut().for_each(|o| *o = o.tanh()),
                    Activation::Relu => output[..n_out].iter_mut().for_each(|o| *o = o.max(0.0)),
                }
            }
            std::mem::swap(&mut input, &mut output);
        }
        // After the last swap the output sits in `input`.
        usize::from(!std::ptr::eq(input.as_ptr(), self.scratch[0].as_ptr()))
    }

    /// Steps `env` with this policy's action for `obs` under `weights`.
    fn act(&mut self, env: &mut dyn Env, obs: &mut [f32], weights: &[f32]) -> Result<rlx::Step, rlx::EnvError> {
        let which = self.forward(obs, weights);
        let out = &mut self.scratch[which][..*self.sizes.last().unwrap_or(&0)];
        match &self.act_space {
            Space::Discrete { .. } => env.step(Action::Discrete(argmax(out) as i64), obs),
            Space::MultiDiscrete { nvec } => env.step(Action::MultiDiscrete(&multi_argmax(out, nvec)), obs),
            Space::Box { low, high, .. } => {
                for ((a, &lo), &hi) in out.iter_mut().zip(low).zip(high) {
                    *a = a.clamp(lo, hi);
                }
                env.step(Action::Continuous(out), obs)
            }
        }
    }

    /// Runs one episode from `env.reset(seed)` with `weights`, recording
    /// the raw observations in `seen`; returns the return and the length.
    ///
    /// # Errors
    /// The env's error (e.g. an action outside its space).
    pub fn episode(
        &mut self,
        env: &mut dyn Env,
        weights: &[f32],
        seed: u64,
        seen: &mut RunningStat,
    ) -> Result<EpisodeSummary, rlx::EnvError> {
        let mut obs = vec![0.0; self.sizes[0]];
        env.reset(Some(seed), &mut obs)?;
        let mut summary = EpisodeSummary { episode_return: 0.0, length: 0, truncated: false, agent: None };
        loop {
            seen.push(&obs);
            let step = self.act(env, &mut obs, weights)?;
            summary.episode_return += step.reward;
            summary.length += 1;
            if step.done() {
                summary.truncated = step.truncated && !step.terminated;
                return Ok(summary);
            }
        }
    }
}

fn argmax(x: &[f32]) -> usize {
    x.iter().enumerate().fold(0, |best, (i, &v)| if v > x[best] { i } else { best })
}

impl PolicyGraph for FlatPolicy {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.obs_space, &self.act_space)
    }

    /// The deterministic action of θ (exploration in ES and ARS happens in
    /// weight space, so `explore` changes nothing).
    fn compute_actions(&mut self, obs: &[f32], _explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let dim = self.sizes[0];
        if obs.len() % dim != 0 {
            return Err(PolicyError::Other(format!("{} observation values are not rows of {dim}", obs.len())));
        }
        let weights = std::mem::take(&mut self.weights);
        let n_out = *self.sizes.last().unwrap_or(&0);
        *out = SampleBatch::new();
        let result = match self.act_space.clone() {
            Space::Discrete { .. } => {
                let actions = obs
                    .chunks_exact(dim)
                    .map(|row| {
                        let which = self.forward(row, &weights);
                        argmax(&self.scratch[which][..n_out]) as i64
                    })
                    .collect();
                out.insert_i64(fields::ACTIONS, actions, 1)
            }
            Space::Box { low, high, .. } => {
                let mut actions = Vec::with_capacity(obs.len() / dim * n_out);
                for row in obs.chunks_exact(dim) {
                    let which = self.forward(row, &weights);
                    let clipped = self.scratch[which][..n_out].iter().zip(&low).zip(&high);
                    actions.extend(clipped.map(|((&a, &lo), &hi)| a.clamp(lo, hi)));
                }
                out.insert_f32(fields::ACTIONS, actions, n_out)
            }
            Space::MultiDiscrete { nvec } => {
                let mut actions = Vec::with_capacity(obs.len() / dim * nvec.len());
                for row in obs.chunks_exact(dim) {
                    let which = self.forward(row, &weights);
                    actions.extend(multi_argmax(&self.scratch[which][..n_out], &nvec));
                }
                out.insert_i64(fields::ACTIONS, actions, nvec.len())
            }
        };
        self.weights = weights;
        Ok(result?)
    }

    fn postprocess_trajectory(&mut self, _traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(())
    }

    fn learn_on_batch(&mut self, _batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        Err(not_gradient_based())
    }

    fn compute_gradients(&mut self, _batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        Err(not_gradient_based())
    }

    fn apply_gradients(&mut self, _grads: &[f32]) -> Result<(), PolicyError> {
        Err(not_gradient_based())
    }

    fn get_weights(&self) -> FlatWeights {
        self.weights.clone()
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        if weights.len() != self.weights.len() {
            return Err(PolicyError::WrongLength { what: "weights", expected: self.weights.len(), got: weights.len() });
        }
        self.weights.copy_from_slice(weights);
        Ok(())
    }

    /// The observation statistics: part of what the policy computes.
    fn save_state(&self) -> Option<Vec<u8>> {
        rlx::codec::encode_value(&self.obs_stat).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let stat: RunningStat = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a flat policy's observation statistics: {e}")))?;
        if stat.mean().len() != self.sizes[0] {
            return Err(PolicyError::WrongLength {
                what: "observation statistics",
                expected: self.sizes[0],
                got: stat.mean().len(),
            });
        }
        self.set_obs_stat(&stat);
        Ok(())
    }
}

fn not_gradient_based() -> PolicyError {
    PolicyError::Other(
        "ES and ARS policies learn from episode returns in their optimizer, not from sample batches".into(),
    )
}

// ---------------------------------------------------------------------------
// Perturbation workers
// ---------------------------------------------------------------------------

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
            let mut obs = RunningStat::new(self.policy.sizes[0]);
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
async fn evaluate_on<E>(
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

// ---------------------------------------------------------------------------
// The optimizer
// ---------------------------------------------------------------------------

/// An algorithm's way of turning evaluated pairs into new weights.
pub trait UpdateRule: Send {
    /// The new θ from the pairs evaluated around `theta`, with statistics.
    fn update(&mut self, theta: &[f32], results: &[PairResult], noise: &NoiseTable) -> (Vec<f32>, LearnerStats);

    /// What a checkpoint of the rule leaves out, in words.
    fn checkpoint_gaps(&self) -> Vec<String> {
        Vec::new()
    }
}

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

/// The config keys ES and ARS share: workers, perturbations, the noise
/// table, the flat policy and its observation filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct Perturbations {
    /// Worker actors evaluating perturbations in parallel; 0 evaluates in the driver.
    pub num_workers: usize,
    /// Child actors per worker that share its perturbations (nesting); 0: none.
    pub num_children_per_worker: usize,
    /// Antithetic pairs (two episodes each) per iteration: ARS's
    /// directions N.
    pub num_perturbations: usize,
    /// σ (ARS's ν), the perturbations' standard deviation.
    pub noise_stdev: f64,
    /// The step size: Adam's for ES, α for ARS.
    pub stepsize: f64,
    /// The policy network's hidden layers: `fcnet_hiddens` (`[]` is a
    /// linear policy) and `fcnet_activation`; the other `model` keys do not
    /// apply.
    pub model: ModelConfig,
    /// `"MeanStdFilter"` (normalize observations; ARS V2) or `"NoFilter"`
    /// (ARS V1).
    pub observation_filter: ObservationFilter,
    /// Length of the shared noise table (values; 4 bytes each, generated once per process).
    pub noise_size: usize,
    /// Seed of the noise table.
    pub noise_seed: u64,
    /// Keyword arguments for the env.
    pub env_config: serde_json::Value,
    /// Seed of the network's initialization (a linear policy starts at
    /// zero) and of the perturbation draws.
    pub seed: u64,
    /// How worker (and child) actors are restarted after a failure.
    pub restart: RestartPolicy,
}

impl Default for Perturbations {
    fn default() -> Self {
        Self {
            num_workers: 2,
            num_children_per_worker: 0,
            num_perturbations: 32,
            noise_stdev: 0.02,
            stepsize: 0.01,
            model: hiddens(&[32, 32]),
            observation_filter: ObservationFilter::MeanStdFilter,
            // The paper's table holds 250M values (1 GB); 10M is plenty for
            // networks of a few thousand weights.
            noise_size: 10_000_000,
            noise_seed: 123,
            env_config: serde_json::Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

impl Perturbations {
    /// Range checks, with `algorithm` named in a model error.
    ///
    /// # Errors
    /// The first bad key, by name.
    pub fn validate(&self, algorithm: &'static str) -> Result<(), ConfigError> {
        check_count("num_workers", self.num_workers, 0, limits::MAX_WORKERS)?;
        check_count("num_perturbations", self.num_perturbations, 1, limits::MAX_BATCH_ROWS)?;
        let nested = self.num_children_per_worker;
        check(
            "num_children_per_worker",
            nested,
            nested == 0 || self.num_workers > 0,
            "needs num_workers > 0 (children belong to workers)",
        )?;
        let sigma = self.noise_stdev;
        check("noise_stdev", sigma, sigma > 0.0 && sigma.is_finite(), "must be positive")?;
        // The shared noise table: 4 bytes a value, in every process.
        check_count("noise_size", self.noise_size, 1, limits::MAX_BUFFER_SIZE * 8)?;
        check("stepsize", self.stepsize, self.stepsize > 0.0 && self.stepsize.is_finite(), "must be positive")?;
        self.restart.validate("restart")?;
        self.model.validate(ModelSupport::mlp(algorithm))
    }

    fn normalize(&self) -> bool {
        self.observation_filter == ObservationFilter::MeanStdFilter
    }

    /// The flat policy for these spaces (what `rlx rollout` loads weights
    /// into).
    ///
    /// # Errors
    /// Unsupported spaces, with `algorithm` named.
    pub fn policy(
        &self,
        algorithm: &str,
        obs: &Space,
        act: &Space,
        seed: u64,
    ) -> Result<Box<dyn PolicyGraph>, BuildError> {
        let policy = FlatPolicy::new(obs, act, &self.model, self.normalize(), seed);
        Ok(Box::new(policy.map_err(|e| BuildError::Unsupported(format!("{algorithm} {e}")))?))
    }

    /// The optimizer's settings, with envs from `make_env`.
    pub fn settings(&self, make_env: EnvMaker) -> EvolutionSettings {
        EvolutionSettings {
            num_workers: self.num_workers,
            num_children_per_worker: self.num_children_per_worker,
            num_perturbations: self.num_perturbations,
            noise_stdev: self.noise_stdev as f32,
            seed: self.seed,
            restart: self.restart,
            spec: PerturberSpec {
                make_env,
                model: self.model.clone(),
                normalize: self.normalize(),
                noise_seed: self.noise_seed,
                noise_size: self.noise_size,
            },
        }
    }
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
            let pool = ActorPool::spawn("ES worker", PerturbationWorker, settings.num_workers, args, settings.restart)
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
                evaluate_on(pool, request, tasks, handle_error, failed).await?
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

/// A worker pool's failure as the handle error a local evaluator's would
/// be (workers count from 1).
fn handle_error(e: PoolError) -> HandleError {
    match e {
        PoolError::BudgetExceeded { child, failures, max_restarts, window_s, last_failure, .. } => {
            HandleError::RestartBudgetExceeded { index: child + 1, failures, max_restarts, window_s, last_failure }
        }
        PoolError::Spawn { child, reason, .. } => HandleError::Spawn { index: child + 1, reason },
        PoolError::Unreachable { child, reason, .. } => HandleError::Unreachable { index: child + 1, reason },
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

/// Centered ranks (Salimans et al. 2017, §2.2): each value replaced by its
/// rank scaled to [−0.5, 0.5], so the update ignores the returns' scale and
/// outliers.
pub fn centered_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let denom = (x.len().max(2) - 1) as f64;
    // Equal values share their average rank, so ties (every CartPole
    // episode at 500) push θ nowhere.
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && x[order[end]] == x[order[start]] {
            end += 1;
        }
        let rank = (start + end - 1) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank / denom - 0.5;
        }
        start = end;
    }
    ranks
}

/// `Σ_i w_i ε_i` over the pairs' noise slices.
pub fn weighted_noise_sum(results: &[PairResult], weights: &[f64], noise: &NoiseTable, dim: usize) -> Vec<f64> {
    let mut sum = vec![0.0f64; dim];
    for (r, &w) in results.iter().zip(weights) {
        for (s, &e) in sum.iter_mut().zip(noise.get(r.noise_offset, dim)) {
            *s += w * e as f64;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_noise_table_is_one_per_seed_and_reproducible() {
        let a = NoiseTable::shared(7, 1000);
        let b = NoiseTable::shared(7, 1000);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(NoiseTable::new(7, 1000).get(10, 5), a.get(10, 5));
        let mean = a.noise.iter().map(|&x| x as f64).sum::<f64>() / 1000.0;
        let var = a.noise.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / 1000.0;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.15, "mean {mean} var {var}");
    }

    #[test]
    fn centered_ranks_span_minus_half_to_half_and_keep_order() {
        assert_eq!(centered_ranks(&[10.0, -3.0, 500.0]), vec![0.0, -0.5, 0.5]);
        assert_eq!(centered_ranks(&[500.0, 500.0, 500.0]), vec![0.0, 0.0, 0.0]);
        assert_eq!(centered_ranks(&[1.0, 2.0, 2.0, 3.0]), vec![-0.5, 0.0, 0.0, 0.5]);
    }

    #[test]
    fn split_gives_contiguous_near_equal_chunks() {
        let tasks: Vec<Task> = (0..7).map(|i| Task { noise_offset: i, env_seed: 0 }).collect();
        let lens: Vec<usize> = split(&tasks, 3).iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![3, 2, 2]);
        assert_eq!(split(&tasks, 3).concat(), tasks);
    }

    #[test]
    fn the_flat_policy_matches_a_hand_computed_forward_pass() {
        let obs = Space::uniform_box(-1.0, 1.0, vec![2]).unwrap();
        let mut p = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[2]), false, 0).unwrap();
        // Layer 1: w = [[1, 0], [0, -1]] (input-major), b = [0, 0.5]; layer 2: w = [[1, 0], [0, 1]], b = [0, 0].
        p.set_weights(&[1.0, 0.0, 0.0, -1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]).unwrap();
        let which = p.forward(&[0.3, 0.2], &p.weights.clone());
        let out = &p.scratch[which][..2];
        assert!((out[0] - 0.3f32.tanh()).abs() < 1e-6 && (out[1] - 0.3f32.tanh()).abs() < 1e-6, "{out:?}");
        let mut batch = SampleBatch::new();
        p.compute_actions(&[0.3, 0.9, 0.3, -0.9], false, &mut batch).unwrap();
        // tanh(0.3) vs tanh(-0.4): action 0; tanh(0.3) vs tanh(1.4): action 1.
        assert_eq!(batch.i64(fields::ACTIONS).unwrap(), &[0, 1]);
    }

    #[test]
    fn normalization_round_trips_through_the_policy_state() {
        let obs = Space::uniform_box(-5.0, 5.0, vec![3]).unwrap();
        let mut p = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[]), true, 0).unwrap();
        let mut stat = RunningStat::new(3);
        stat.push(&[1.0, 2.0, 3.0]);
        stat.push(&[3.0, 2.0, 1.0]);
        p.set_obs_stat(&stat);
        let mut q = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[]), true, 0).unwrap();
        q.load_state(&p.save_state().unwrap()).unwrap();
        assert_eq!(q.obs_stat(), &stat);
        assert_eq!(q.mean, vec![2.0, 2.0, 2.0]);
        assert!(q.load_state(b"junk").is_err());
    }
}
