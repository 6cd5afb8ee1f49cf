//! # Deep Q-Networks (DQN)
//!
//! Mnih et al., "Human-level control through deep reinforcement learning",
//! Nature 2015: Q-learning with a neural network, experience replay and a
//! target network; with the improvements RLlib's DQN also turns on:
//! - **double Q-learning** (van Hasselt, Guez & Silver, AAAI 2016): the
//!   online network picks the next action, the target network values it;
//! - a **dueling head** (Wang et al., ICML 2016): `Q(s, a) = V(s) + A(s, a)
//!   − mean_a' A(s, a')`;
//! - **n-step returns** (Sutton 1988; as in Hessel et al.'s Rainbow, 2018),
//!   computed per trajectory by [`n_step_returns`];
//! - **prioritized replay** (Schaul et al., ICLR 2016), with importance
//!   weights on the loss.
//!
//! The loss is the Huber loss (δ = 1) of the TD error
//! `Q(s, a) − (R + γ^k (1 − terminated) Q_target(s', a*))`, weighted by the
//! importance weights, minimized by Adam with gradient-norm clipping. The
//! target network is a copy of the online network taken every
//! `target_update_interval` gradient updates (counted by the policy, so the
//! same policy works under any optimizer). Exploration is ε-greedy, ε
//! annealed linearly over `exploration_timesteps` env steps.
//!
//! Execution: [`SyncReplayOptimizer`]: evaluators sample `rollout_fragment_length`
//! steps each, the rows go into the replay buffer, the driver learns on
//! replayed minibatches and broadcasts its weights.
//!
//! Learner metrics (`learner.*`): `loss` (weighted Huber), `mean_q`
//! (`Q(s, a)` of the replayed actions), `mean_td_error` (mean |TD error|),
//! `grad_norm` (before clipping), `num_target_updates`, `num_updates` and
//! `replay_buffer_size`.

use crate::actor_critic::MovableDevice;
use crate::device::DeviceSpec;
use crate::nn::{self, HIDDEN};
use crate::{dispatch_dims, BuildError, EnvMaker};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::optimizer::SyncReplayConfig;
use rlx::postprocessing::{n_step_returns, N_STEP_DISCOUNTS};
use rlx::replay::{LinearSchedule, PrioritizedReplayConfig, TD_ERRORS, WEIGHTS};
use rlx::{
    fields, EnvShards, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, RestartPolicy, SampleBatch,
    Space, SyncReplayOptimizer, Trainer,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// DQN's configuration. Every key is optional in `--config`; unknown keys are
/// errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct DqnConfig {
    /// Evaluator actors sampling in parallel; 0 samples in the driver.
    pub num_workers: usize,
    /// Env copies stepped together by each evaluator.
    pub num_envs_per_worker: usize,
    /// Env steps each evaluator samples per round, between learning steps.
    pub rollout_fragment_length: usize,
    /// Env steps sampled per training iteration (one line of results).
    pub timesteps_per_iteration: usize,
    /// Transitions the replay buffer holds.
    pub buffer_size: usize,
    /// Transitions stored before learning starts.
    pub learning_starts: usize,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// Replayed rows trained on per sampled env step.
    pub training_intensity: f64,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Rewards summed into each transition's return before bootstrapping.
    pub n_step: usize,
    /// Double Q-learning: the online network picks the next action, the
    /// target network values it.
    pub double_q: bool,
    /// The dueling head `V(s) + A(s, a) − mean A(s, ·)`; with `false`, Q is
    /// the advantage head alone (the value head is then unused).
    pub dueling: bool,
    /// Gradient updates between copies of the online network into the
    /// target network (RLlib's `target_network_update_freq` counts env
    /// steps instead).
    pub target_update_interval: u64,
    /// ε of ε-greedy exploration at the start.
    pub exploration_initial_eps: f64,
    /// ε after `exploration_timesteps`.
    pub exploration_final_eps: f64,
    /// Env steps (all evaluators together) over which ε anneals linearly.
    pub exploration_timesteps: u64,
    /// Replay in proportion to TD error (prioritized replay).
    pub prioritized_replay: bool,
    /// Priority exponent α.
    pub prioritized_replay_alpha: f64,
    /// Importance-weight exponent β at the start.
    pub prioritized_replay_beta: f64,
    /// β after `prioritized_replay_beta_annealing_timesteps` env steps.
    pub final_prioritized_replay_beta: f64,
    /// Env steps over which β anneals linearly.
    pub prioritized_replay_beta_annealing_timesteps: u64,
    /// Added to every |TD error| so every transition can be replayed.
    pub prioritized_replay_eps: f64,
    /// Evaluators compute each sampled row's TD error (the `td_errors`
    /// column), and replay stores the row with that priority instead of
    /// the buffer's maximum (Ape-X's worker-side prioritization).
    pub worker_side_prioritization: bool,
    /// Maximum global gradient norm; `null` disables clipping.
    pub grad_clip: Option<f64>,
    /// Keyword arguments for the env (see `rlx list`).
    pub env_config: serde_json::Value,
    /// Seed for network initialization, exploration, replay and env resets.
    pub seed: u64,
    /// Where the networks live: `"cpu"`, or `"cuda"` / `"cuda:N"` in a
    /// build with the `cuda` feature.
    pub device: DeviceSpec,
    /// How evaluator actors are restarted after a failure.
    pub restart: RestartPolicy,
    /// Splits each sampling evaluator's env copies over this many
    /// supervised child actors that step them in parallel, for slow envs
    /// (`{"num_shards": 0}`, the default, steps them in the evaluator);
    /// `restart` is the shards' own restart policy. See the book's "Env
    /// shards" section.
    pub env_shards: EnvShards,
}

impl Default for DqnConfig {
    fn default() -> Self {
        Self {
            num_workers: 0,
            num_envs_per_worker: 1,
            rollout_fragment_length: 4,
            timesteps_per_iteration: 1000,
            buffer_size: 50_000,
            learning_starts: 1000,
            train_batch_size: 64,
            training_intensity: 16.0,
            lr: 1e-3,
            gamma: 0.99,
            n_step: 3,
            double_q: true,
            dueling: true,
            target_update_interval: 250,
            exploration_initial_eps: 1.0,
            exploration_final_eps: 0.02,
            exploration_timesteps: 10_000,
            prioritized_replay: true,
            prioritized_replay_alpha: 0.6,
            prioritized_replay_beta: 0.4,
            final_prioritized_replay_beta: 1.0,
            prioritized_replay_beta_annealing_timesteps: 20_000,
            prioritized_replay_eps: 1e-6,
            worker_side_prioritization: false,
            grad_clip: Some(10.0),
            env_config: serde_json::Value::Null,
            seed: 0,
            device: DeviceSpec::Cpu,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
        }
    }
}

impl Validate for DqnConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.device.check_available()?;
        let positive = |key: &str, v: usize| check(key, v, v >= 1, "must be >= 1");
        positive("num_envs_per_worker", self.num_envs_per_worker)?;
        self.env_shards.validate(self.num_envs_per_worker)?;
        positive("rollout_fragment_length", self.rollout_fragment_length)?;
        positive("timesteps_per_iteration", self.timesteps_per_iteration)?;
        positive("buffer_size", self.buffer_size)?;
        let ls = self.learning_starts;
        check("learning_starts", ls, ls <= self.buffer_size, "must be <= buffer_size (or learning never starts)")?;
        positive("train_batch_size", self.train_batch_size)?;
        positive("n_step", self.n_step)?;
        let (n, len) = (self.n_step, self.rollout_fragment_length);
        check("n_step", n, n <= len, "must be <= rollout_fragment_length (n-step returns stay within a fragment)")?;
        let ti = self.training_intensity;
        check("training_intensity", ti, ti > 0.0 && ti.is_finite(), "must be > 0")?;
        check("lr", self.lr, self.lr > 0.0 && self.lr.is_finite(), "must be > 0")?;
        check("gamma", self.gamma, (0.0..=1.0).contains(&self.gamma), "must be in [0, 1]")?;
        let t = self.target_update_interval;
        check("target_update_interval", t, t >= 1, "must be >= 1")?;
        for (key, eps) in [
            ("exploration_initial_eps", self.exploration_initial_eps),
            ("exploration_final_eps", self.exploration_final_eps),
        ] {
            check(key, eps, (0.0..=1.0).contains(&eps), "must be in [0, 1]")?;
        }
        let alpha = self.prioritized_replay_alpha;
        check("prioritized_replay_alpha", alpha, alpha >= 0.0 && alpha.is_finite(), "must be >= 0")?;
        for (key, beta) in [
            ("prioritized_replay_beta", self.prioritized_replay_beta),
            ("final_prioritized_replay_beta", self.final_prioritized_replay_beta),
        ] {
            check(key, beta, (0.0..=1.0).contains(&beta), "must be in [0, 1]")?;
        }
        let eps = self.prioritized_replay_eps;
        check("prioritized_replay_eps", eps, eps >= 0.0 && eps.is_finite(), "must be >= 0")?;
        if let Some(c) = self.grad_clip {
            check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
        }
        self.restart.validate("restart")
    }
}

impl DqnConfig {
    /// ε over an evaluator's own env steps. Each of `samplers` evaluators
    /// takes about 1/`samplers` of the run's steps, so its own count times
    /// `samplers` tracks the run's.
    fn exploration(&self) -> LinearSchedule {
        let samplers = self.num_workers.max(1) as u64;
        LinearSchedule {
            start: self.exploration_initial_eps,
            end: self.exploration_final_eps,
            steps: self.exploration_timesteps / samplers,
        }
    }

    /// The replay optimizer's settings.
    fn replay(&self) -> SyncReplayConfig {
        let prioritized = self.prioritized_replay.then_some(PrioritizedReplayConfig {
            alpha: self.prioritized_replay_alpha,
            beta: LinearSchedule {
                start: self.prioritized_replay_beta,
                end: self.final_prioritized_replay_beta,
                steps: self.prioritized_replay_beta_annealing_timesteps,
            },
            eps: self.prioritized_replay_eps,
        });
        SyncReplayConfig {
            buffer_size: self.buffer_size,
            prioritized,
            learning_starts: self.learning_starts,
            train_batch_size: self.train_batch_size,
            training_intensity: self.training_intensity,
            timesteps_per_iteration: self.timesteps_per_iteration,
            seed: self.seed,
        }
    }
}

/// The Q-network: a 2×`H` ReLU torso, then an advantage head (`A` outputs)
/// and a value head (1 output). The advantage head comes first because
/// dfdx's `SplitInto` hands the torso's tape to its first output.
pub type QNetwork<const O: usize, const A: usize, const H: usize = HIDDEN> =
    ((Linear<O, H>, ReLU, Linear<H, H>, ReLU), SplitInto<(Linear<H, A>, Linear<H, 1>)>);
/// [`QNetwork`] built on device `D`.
type Model<const O: usize, const A: usize, const H: usize, D> = (
    (modules::Linear<O, H, f32, D>, modules::ReLU, modules::Linear<H, H, f32, D>, modules::ReLU),
    SplitInto<(modules::Linear<H, A, f32, D>, modules::Linear<H, 1, f32, D>)>,
);

/// A DQN policy for `O`-dimensional observations and `A` actions on device
/// `D`: the online and target networks, Adam, and ε-greedy exploration.
pub struct DqnPolicy<const O: usize, const A: usize, D: Device<f32> = Cpu, const H: usize = HIDDEN> {
    cfg: DqnConfig,
    dev: D,
    model: Model<O, A, H, D>,
    target: Model<O, A, H, D>,
    adam: nn::Adam,
    grads: Option<Gradients<f32, D>>,
    rng: ChaCha8Rng,
    exploration: LinearSchedule,
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
    /// Gradient updates applied.
    updates: u64,
    num_target_updates: u64,
    observation_space: Space,
    action_space: Space,
}

// SAFETY: as for `ActorCriticPolicy` (see the argument there): the public
// constructors build the device, no method hands out a clone of it or of a
// tensor, so sending the policy sends every clone of its device handle; the
// other fields are plain data.
unsafe impl<const O: usize, const A: usize, D: MovableDevice, const H: usize> Send for DqnPolicy<O, A, D, H> {}

impl<const O: usize, const A: usize, const H: usize> DqnPolicy<O, A, Cpu, H> {
    /// A policy on the CPU. Initial weights depend only on `cfg.seed`;
    /// exploration uses `rng_seed`.
    pub fn new(cfg: DqnConfig, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        let dev = Cpu::seed_from_u64(cfg.seed);
        Self::on_device(dev, cfg, observation_space, action_space, rng_seed)
    }
}

#[cfg(feature = "cuda")]
impl<const O: usize, const A: usize, const H: usize> DqnPolicy<O, A, Cuda, H> {
    /// A policy on CUDA device `ordinal`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] if the device cannot be opened.
    pub fn on_cuda(
        ordinal: usize,
        cfg: DqnConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = crate::device::open_cuda(ordinal, cfg.seed)?;
        Ok(Self::on_device(dev, cfg, observation_space, action_space, rng_seed))
    }
}

impl<const O: usize, const A: usize, D: Device<f32>, const H: usize> DqnPolicy<O, A, D, H> {
    fn on_device(dev: D, cfg: DqnConfig, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        let model = Model::<O, A, H, D>::build(&dev);
        let adam = nn::Adam::new(model.num_trainable_params(), cfg.lr as f32, 1e-8);
        Self {
            exploration: cfg.exploration(),
            cfg,
            target: model.clone(),
            model,
            dev,
            adam,
            grads: None,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            steps_explored: 0,
            updates: 0,
            num_target_updates: 0,
            observation_space,
            action_space,
        }
    }

    /// ε now.
    pub fn epsilon(&self) -> f64 {
        self.exploration.value(self.steps_explored)
    }

    fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor<(usize, Const<O>), f32, D>, PolicyError> {
        if obs.len() % O != 0 {
            return Err(PolicyError::Other(format!(
                "{} observation values is not a whole number of rows of {O}",
                obs.len()
            )));
        }
        Ok(self.dev.tensor_from_vec(obs.to_vec(), (obs.len() / O, Const::<O>)))
    }

    /// Q-values of every row of `obs` under `net` (online or target), no
    /// gradient, row-major `[n, A]` on the host.
    fn q_values(&self, net: &Model<O, A, H, D>, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let (adv, value) = net.forward(self.obs_tensor(obs)?);
        let (mut q, value) = (adv.as_vec(), value.as_vec());
        if self.cfg.dueling {
            for (row, v) in q.chunks_exact_mut(A).zip(value) {
                let mean = row.iter().sum::<f32>() / A as f32;
                row.iter_mut().for_each(|x| *x += v - mean);
            }
        }
        Ok(q)
    }

    /// The bootstrapped target `R + γ^k (1 − terminated) Q_target(s', a*)`
    /// of every row, with `a*` from the online network (double Q) or the
    /// target network.
    fn td_targets(&self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let new_obs = batch.f32(fields::NEW_OBS)?;
        let (rewards, terminated) = (batch.f32(fields::REWARDS)?, batch.f32(fields::TERMINATEDS)?);
        let discounts = batch.f32(N_STEP_DISCOUNTS)?;
        let q_target = self.q_values(&self.target, new_obs)?;
        let q_select = if self.cfg.double_q { self.q_values(&self.model, new_obs)? } else { q_target.clone() };
        Ok((0..batch.len())
            .map(|i| {
                let next = argmax(&q_select[i * A..(i + 1) * A]);
                rewards[i] + discounts[i] * (1.0 - terminated[i]) * q_target[i * A + next]
            })
            .collect())
    }

    /// The weighted Huber loss on `batch` and its flat, unclipped gradient.
    fn backward(&mut self, batch: &SampleBatch) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let n = batch.len();
        let targets = self.td_targets(batch)?;
        let weights = match batch.f32(WEIGHTS) {
            Ok(w) => w.to_vec(),
            Err(_) => vec![1.0; n],
        };
        let actions: Vec<usize> = batch.i64(fields::ACTIONS)?.iter().map(|&a| a as usize).collect();
        if let Some(&a) = actions.iter().find(|&&a| a >= A) {
            return Err(PolicyError::Other(format!("action {a} is outside the {A} actions of this network")));
        }
        let obs = self.obs_tensor(batch.f32(fields::OBS)?)?;
        let grads = self.grads.take().unwrap_or_else(|| self.model.alloc_grads());
        let (adv, value) = self.model.forward(obs.traced(grads));
        let shape = *adv.shape();
        let q = if self.cfg.dueling {
            let mean = adv.with_empty_tape().mean::<(usize,), Axis<1>>().broadcast_like(&shape);
            adv - mean + value.reshape_like(&(n,)).broadcast_like(&shape)
        } else {
            adv
        };
        let q_taken = q.select(self.dev.tensor_from_vec(actions, (n,)));
        let q_host = q_taken.as_vec();
        let huber = q_taken.huber_error(self.dev.tensor_from_vec(targets.clone(), (n,)), 1.0);
        let loss = (huber * self.dev.tensor_from_vec(weights, (n,))).mean();
        let total = loss.as_vec()[0];
        if !total.is_finite() {
            return Err(PolicyError::NonFinite("loss".into()));
        }
        let mut stats = LearnerStats::default();
        stats.set("loss", total as f64);
        stats.set("mean_q", q_host.iter().map(|&q| q as f64).sum::<f64>() / n as f64);
        let td_abs = q_host.iter().zip(&targets).map(|(q, y)| (q - y).abs() as f64).sum::<f64>();
        stats.set("mean_td_error", td_abs / n as f64);
        let mut grads = loss.backward();
        let flat = nn::flat_grads(&self.model, &grads);
        self.model.zero_grads(&mut grads);
        self.grads = Some(grads);
        Ok((flat, stats))
    }

    /// Clips, takes one Adam step, and copies the online network into the
    /// target network every `target_update_interval` updates. Returns the
    /// gradient norm before clipping.
    fn step(&mut self, mut grad: Vec<f32>) -> Result<f32, PolicyError> {
        let norm = nn::clip_grad_norm(&mut grad, self.cfg.grad_clip.map(|c| c as f32))?;
        let mut params = nn::flat_params(&self.model);
        self.adam.update(&mut params, &grad)?;
        nn::load_params(&mut self.model, &params)?;
        self.updates += 1;
        if self.updates % self.cfg.target_update_interval == 0 {
            self.target = self.model.clone();
            self.num_target_updates += 1;
        }
        Ok(norm)
    }
}

/// The index of the largest entry (the first of ties).
fn argmax(row: &[f32]) -> usize {
    (0..row.len()).fold(0, |best, i| if row[i] > row[best] { i } else { best })
}

/// What [`DqnPolicy`] saves besides its weights.
#[derive(Serialize, Deserialize)]
struct SavedState {
    adam: nn::Adam,
    rng: ChaCha8Rng,
    target: Vec<f32>,
    steps_explored: u64,
    updates: u64,
    num_target_updates: u64,
}

impl<const O: usize, const A: usize, D: Device<f32>, const H: usize> PolicyGraph for DqnPolicy<O, A, D, H>
where
    Self: Send,
{
    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    /// Greedy actions, each replaced by a uniformly random one with
    /// probability ε when exploring.
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let q = self.q_values(&self.model, obs)?;
        let eps = self.epsilon();
        let mut actions = Vec::with_capacity(q.len() / A);
        for row in q.chunks_exact(A) {
            let a = if explore && self.rng.gen::<f64>() < eps { self.rng.gen_range(0..A) } else { argmax(row) };
            actions.push(a as i64);
        }
        if explore {
            self.steps_explored += actions.len() as u64;
        }
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        Ok(())
    }

    /// n-step returns and each row's bootstrap discount; with
    /// `worker_side_prioritization`, each row's TD error under the weights
    /// that sampled it.
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        n_step_returns(traj, self.cfg.n_step, self.cfg.gamma as f32)?;
        if self.cfg.worker_side_prioritization {
            let td = self.td_errors(traj)?;
            traj.insert_f32(TD_ERRORS, td, 1)?;
        }
        Ok(())
    }

    /// One gradient step on the (replayed) batch.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (grad, mut stats) = self.backward(batch)?;
        stats.set("grad_norm", self.step(grad)? as f64);
        stats.set("num_target_updates", self.num_target_updates as f64);
        Ok(stats)
    }

    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let (grad, mut stats) = self.backward(batch)?;
        stats.set("grad_norm", rlx::policy::global_norm(&grad));
        Ok((grad, stats))
    }

    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        let expected = self.adam.num_params();
        if grads.len() != expected {
            return Err(PolicyError::WrongLength { what: "gradients", expected, got: grads.len() });
        }
        self.step(grads.to_vec()).map(drop)
    }

    fn td_errors(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let targets = self.td_targets(batch)?;
        let q = self.q_values(&self.model, batch.f32(fields::OBS)?)?;
        let actions = batch.i64(fields::ACTIONS)?;
        Ok(targets.iter().zip(actions).enumerate().map(|(i, (y, &a))| q[i * A + a as usize] - y).collect())
    }

    fn get_weights(&self) -> FlatWeights {
        nn::flat_params(&self.model)
    }

    /// Sets the online network and the target network alike: a policy
    /// given weights (a restored checkpoint) bootstraps from them too.
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        nn::load_params(&mut self.model, weights)?;
        self.target = self.model.clone();
        Ok(())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        let saved = SavedState {
            adam: self.adam.clone(),
            rng: self.rng.clone(),
            target: nn::flat_params(&self.target),
            steps_explored: self.steps_explored,
            updates: self.updates,
            num_target_updates: self.num_target_updates,
        };
        rlx::codec::encode_value(&saved).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let saved: SavedState = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a saved state of this policy: {e}")))?;
        let expected = self.model.num_trainable_params();
        if saved.adam.num_params() != expected || saved.target.len() != expected {
            return Err(PolicyError::Other(format!(
                "the saved state is for another network size (this one has {expected} parameters)"
            )));
        }
        nn::load_params(&mut self.target, &saved.target)?;
        self.adam = saved.adam;
        self.rng = saved.rng;
        (self.steps_explored, self.updates, self.num_target_updates) =
            (saved.steps_explored, saved.updates, saved.num_target_updates);
        Ok(())
    }
}

/// A DQN policy for the given spaces on the config's device.
///
/// # Errors
/// [`BuildError::Unsupported`] unless the observation space is a `Box` and
/// the action space `Discrete` with a compiled network size, or for a
/// device this build or machine lacks.
pub fn make_policy(
    cfg: &DqnConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (obs_dim, n_actions) = match (observation_space, action_space) {
        (Space::Box { .. }, Space::Discrete { n }) => (observation_space.flat_dim(), *n as usize),
        _ => {
            return Err(BuildError::Unsupported(format!(
                "DQN supports a Box observation space with Discrete actions; got {observation_space} and {action_space}"
            )))
        }
    };
    let (o, a, cfg) = (observation_space.clone(), action_space.clone(), cfg.clone());
    dispatch_dims!(
        obs_dim,
        n_actions,
        |OBS, ACT| build_on::<OBS, ACT>(cfg, o, a, rng_seed),
        Err(BuildError::Unsupported(format!(
            "no compiled DQN network for {obs_dim} observations and {n_actions} actions; supported (obs, actions): {:?}",
            nn::SUPPORTED_DIMS
        )))
    )
}

fn build_on<const O: usize, const A: usize>(
    cfg: DqnConfig,
    o: Space,
    a: Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    match cfg.device {
        DeviceSpec::Cpu => Ok(Box::new(DqnPolicy::<O, A>::new(cfg, o, a, rng_seed))),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(n) => Ok(Box::new(DqnPolicy::<O, A, Cuda>::on_cuda(n, cfg, o, a, rng_seed)?)),
        #[cfg(not(feature = "cuda"))]
        DeviceSpec::Cuda(_) => Err(cfg.device.check_available().expect_err("CUDA is not in this build").into()),
    }
}

/// The execution plan: evaluators from `make_env` sampling
/// `rollout_fragment_length` steps each per round, driven by
/// [`SyncReplayOptimizer`].
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(make_env: EnvMaker, cfg: DqnConfig) -> Result<Trainer, BuildError> {
    let sampling = crate::execution::SamplingSettings {
        num_workers: cfg.num_workers,
        num_envs_per_worker: cfg.num_envs_per_worker,
        sample_size: cfg.rollout_fragment_length * cfg.num_envs_per_worker,
        observation_filter: ObservationFilter::NoFilter,
        seed: cfg.seed,
        restart: cfg.restart,
        env_shards: cfg.env_shards,
    };
    let replay = cfg.replay();
    let policy_cfg = cfg.clone();
    let make_policy = Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(&policy_cfg, o, a, seed));
    let evaluators = crate::execution::spawn_evaluators(make_env, make_policy, sampling).await?;
    let optimizer = SyncReplayOptimizer::new(evaluators, replay).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(Box::new(optimizer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::replay::BATCH_INDEXES;

    fn spaces() -> (Space, Space) {
        (Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), Space::discrete(2))
    }

    /// Four transitions with hand-picked rewards and ends.
    fn batch(p: &mut dyn PolicyGraph) -> SampleBatch {
        let obs: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut b = SampleBatch::new();
        p.compute_actions(&obs, false, &mut b).unwrap();
        b.insert_f32(fields::OBS, obs.clone(), 4).unwrap();
        b.insert_f32(fields::NEW_OBS, obs.iter().map(|x| x * 0.5).collect(), 4).unwrap();
        b.insert_f32(fields::REWARDS, vec![1.0, 0.0, -1.0, 2.0], 1).unwrap();
        b.insert_f32(fields::TERMINATEDS, vec![0.0, 0.0, 1.0, 0.0], 1).unwrap();
        b.insert_f32(fields::TRUNCATEDS, vec![0.0; 4], 1).unwrap();
        b.insert_f32(N_STEP_DISCOUNTS, vec![0.99; 4], 1).unwrap();
        b
    }

    #[test]
    fn targets_follow_the_bellman_equation() {
        for (double_q, dueling) in [(true, true), (false, true), (true, false), (false, false)] {
            let cfg = DqnConfig { double_q, dueling, ..DqnConfig::default() };
            let (o, a) = spaces();
            let mut p = DqnPolicy::<4, 2>::new(cfg, o, a, 0);
            let b = batch(&mut p);
            let new_obs = b.f32(fields::NEW_OBS).unwrap();
            let (q_t, q_o) = (p.q_values(&p.target, new_obs).unwrap(), p.q_values(&p.model, new_obs).unwrap());
            let targets = p.td_targets(&b).unwrap();
            for i in 0..4 {
                let pick = if double_q { argmax(&q_o[i * 2..i * 2 + 2]) } else { argmax(&q_t[i * 2..i * 2 + 2]) };
                let r = b.f32(fields::REWARDS).unwrap()[i];
                let expected = if i == 2 { r } else { r + 0.99 * q_t[i * 2 + pick] };
                assert!((targets[i] - expected).abs() < 1e-6, "{double_q} {dueling} row {i}");
            }
            // The taped loss path sees the same TD errors as td_errors().
            let td = p.td_errors(&b).unwrap();
            let (_, stats) = p.compute_gradients(&b).unwrap();
            let mean_abs = td.iter().map(|x| x.abs() as f64).sum::<f64>() / 4.0;
            assert!((stats.get("mean_td_error").unwrap() - mean_abs).abs() < 1e-5);
        }
    }

    #[test]
    fn dueling_q_is_value_plus_centered_advantage() {
        let (o, a) = spaces();
        let p = DqnPolicy::<4, 2>::new(DqnConfig::default(), o, a, 0);
        let obs = [0.1f32, -0.2, 0.3, 0.05];
        let (adv, v) = p.model.forward(p.obs_tensor(&obs).unwrap());
        let (adv, v) = (adv.as_vec(), v.as_vec()[0]);
        let q = p.q_values(&p.model, &obs).unwrap();
        let mean = (adv[0] + adv[1]) / 2.0;
        assert!((q[0] - (v + adv[0] - mean)).abs() < 1e-6 && (q[1] - (v + adv[1] - mean)).abs() < 1e-6);
    }

    #[test]
    fn learning_moves_q_towards_the_target_and_syncs_the_target_network() {
        let cfg = DqnConfig { target_update_interval: 3, lr: 1e-2, ..DqnConfig::default() };
        let (o, a) = spaces();
        let mut p = DqnPolicy::<4, 2>::new(cfg, o, a, 0);
        let b = batch(&mut p);
        let before: f32 = p.td_errors(&b).unwrap().iter().map(|x| x * x).sum();
        let target_before = nn::flat_params(&p.target);
        p.learn_on_batch(&b).unwrap();
        p.learn_on_batch(&b).unwrap();
        assert_eq!(nn::flat_params(&p.target), target_before, "no copy before the interval");
        let stats = p.learn_on_batch(&b).unwrap();
        assert_eq!(nn::flat_params(&p.target), p.get_weights(), "copied at the interval");
        assert_eq!(stats.get("num_target_updates"), Some(1.0));
        let after: f32 = p.td_errors(&b).unwrap().iter().map(|x| x * x).sum();
        assert!(after < before, "squared TD error {before} -> {after}");
    }

    #[test]
    fn gradient_split_equals_learn_step() {
        let (o, a) = spaces();
        let mut x = DqnPolicy::<4, 2>::new(DqnConfig::default(), o.clone(), a.clone(), 0);
        let mut y = DqnPolicy::<4, 2>::new(DqnConfig::default(), o, a, 0);
        let b = batch(&mut x);
        let (g, _) = x.compute_gradients(&b).unwrap();
        x.apply_gradients(&g).unwrap();
        y.learn_on_batch(&b).unwrap();
        assert_eq!(x.get_weights(), y.get_weights());
        assert!(x.apply_gradients(&g[1..]).is_err());
    }

    #[test]
    fn importance_weights_scale_the_gradient() {
        let (o, a) = spaces();
        let mut p = DqnPolicy::<4, 2>::new(DqnConfig::default(), o, a, 0);
        let mut b = batch(&mut p);
        let (g1, _) = p.compute_gradients(&b).unwrap();
        b.insert_f32(WEIGHTS, vec![0.5; 4], 1).unwrap();
        b.insert_i64(BATCH_INDEXES, vec![0, 1, 2, 3], 1).unwrap();
        let (g2, _) = p.compute_gradients(&b).unwrap();
        assert!(g1.iter().zip(&g2).all(|(a, b)| (a * 0.5 - b).abs() < 1e-6));
    }

    #[test]
    fn epsilon_anneals_with_explored_steps_and_greedy_ignores_it() {
        let cfg = DqnConfig { exploration_timesteps: 100, exploration_final_eps: 0.1, ..DqnConfig::default() };
        let (o, a) = spaces();
        let mut p = DqnPolicy::<4, 2>::new(cfg, o, a, 0);
        let obs = vec![0.1f32; 4 * 50];
        let mut out = SampleBatch::new();
        assert_eq!(p.epsilon(), 1.0);
        p.compute_actions(&obs, false, &mut out).unwrap();
        assert_eq!(p.epsilon(), 1.0, "greedy acting does not advance the schedule");
        let greedy = out.i64(fields::ACTIONS).unwrap().to_vec();
        assert!(greedy.iter().all(|&a| a == greedy[0]));
        p.compute_actions(&obs, true, &mut out).unwrap();
        let explored = out.i64(fields::ACTIONS).unwrap();
        assert!(explored.iter().any(|&a| a != greedy[0]), "ε = 1 explores");
        assert!((p.epsilon() - 0.55).abs() < 1e-9);
        p.compute_actions(&obs, true, &mut out).unwrap();
        assert!((p.epsilon() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn state_round_trips_and_bad_input_is_an_error() {
        let (o, a) = spaces();
        let mut p = DqnPolicy::<4, 2>::new(DqnConfig { target_update_interval: 1000, ..DqnConfig::default() }, o, a, 0);
        let b = batch(&mut p);
        p.learn_on_batch(&b).unwrap();
        let mut q = DqnPolicy::<4, 2>::new(
            DqnConfig { target_update_interval: 1000, ..DqnConfig::default() },
            spaces().0,
            spaces().1,
            9,
        );
        q.set_weights(&p.get_weights()).unwrap();
        q.load_state(&p.save_state().unwrap()).unwrap();
        assert_eq!(nn::flat_params(&q.target), nn::flat_params(&p.target));
        p.learn_on_batch(&b).unwrap();
        q.learn_on_batch(&b).unwrap();
        assert_eq!(p.get_weights(), q.get_weights(), "a restored policy continues exactly");
        assert!(q.load_state(b"junk").is_err());

        let mut bad = b.clone();
        bad.insert_i64(fields::ACTIONS, vec![0, 1, 2, 0], 1).unwrap();
        assert!(p.learn_on_batch(&bad).unwrap_err().to_string().contains("action 2"));
        let mut missing = SampleBatch::new();
        missing.insert_f32(fields::OBS, vec![0.0; 4], 4).unwrap();
        assert!(p.learn_on_batch(&missing).is_err());
        let err = rlx::config::merge_json(&DqnConfig::default(), &serde_json::json!({"n_step": 0})).unwrap_err();
        assert!(err.to_string().contains("n_step"), "{err}");
        let err =
            rlx::config::merge_json(&DqnConfig::default(), &serde_json::json!({"final_prioritized_replay_beta": 2.0}))
                .unwrap_err();
        assert!(err.to_string().contains("final_prioritized_replay_beta"), "{err}");
        let pixel = Space::uniform_box(0.0, 1.0, vec![3, 3]).unwrap();
        assert!(make_policy(&DqnConfig::default(), &pixel, &Space::discrete(2), 0).is_err());
    }
}
