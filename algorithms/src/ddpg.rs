//! # Deep Deterministic Policy Gradient (DDPG), with TD3's improvements
//!
//! Lillicrap et al., "Continuous control with deep reinforcement learning",
//! ICLR 2016: a deterministic actor `μ(s)` trained by the deterministic
//! policy gradient `∇_θ Q(s, μ_θ(s))` (Silver et al. 2014) through a critic
//! `Q(s, a)` learned by Q-learning from replay, with slowly moving target
//! copies of both networks. TD3 (Fujimoto, van Hoof & Meger, "Addressing
//! Function Approximation Error in Actor-Critic Methods", ICML 2018) is this
//! policy with three flags on (see [`crate::td3`]):
//! - **`twin_q`** (clipped double Q-learning): two critics, both regressed
//!   on the *minimum* of their two target values;
//! - **`policy_delay`**: the actor and the target networks move once every
//!   `d` critic updates;
//! - **`smooth_target_policy`** (target policy smoothing): the target
//!   action is `clip(μ'(s') + clip(ε, −c, c), −1, 1)` with `ε ~ N(0, σ²)`.
//!
//! The details that matter:
//! - The actor ends in `tanh`, so its output `u ∈ [−1, 1]^A` is scaled to
//!   the action bounds: `a = low + (u + 1)/2 · (high − low)`. Everything
//!   inside the policy (critic inputs, exploration and target noise) works
//!   in these **normalized units**: `exploration_noise = 0.1` is a standard
//!   deviation of 10 % of half the action range (0.2 N·m on Pendulum's
//!   ±2), as `0.1 · max_action` in the TD3 paper. The batch stores actions
//!   in env units.
//! - Exploration is Gaussian noise on the actor's output (the TD3 paper's
//!   choice; DDPG's Ornstein-Uhlenbeck noise is no better in practice),
//!   clipped to the bounds, after `random_timesteps` uniformly random
//!   actions.
//! - A critic sees the concatenation `[u, s]` (normalized action first:
//!   dfdx merges a taped tensor only into an untaped one on its right).
//! - The target is `y = R + γ^k (1 − terminated) Q'(s', u')` with `R` and
//!   `k` from [`n_step_returns`]; a time-limit truncation is not
//!   `terminated`, so it bootstraps. The critic loss is the **mean squared
//!   error** `Σ_j mean (Q_j(s, a) − y)²` (summed over the twin critics, as
//!   Fujimoto et al.), the actor loss `−mean Q_1(s, μ(s))`.
//! - Both gradients are computed on the same minibatch from the same
//!   weights (as RLlib does), so a step is `compute_gradients` then
//!   `apply_gradients`; each network has its own Adam and learning rate.
//!   Targets move by Polyak averaging, `θ' ← τ θ + (1 − τ) θ'`, whenever
//!   the actor moves.
//!
//! Execution: [`SyncReplayOptimizer`] with uniform replay; by default one
//! minibatch per sampled env step.
//!
//! Learner metrics (`learner.*`): `critic_loss`, `actor_loss` (on the
//! updates that move the actor), `mean_q` (`Q_1(s, a)` of replayed actions),
//! `mean_target_q` (`y`), `mean_td_error` (mean `|Q_1 − y|`),
//! `critic_grad_norm` and `actor_grad_norm` (before clipping),
//! `num_actor_updates`, `num_updates` and `replay_buffer_size`.

use crate::actor_critic::MovableDevice;
use crate::device::DeviceSpec;
use crate::nn;
use crate::{dispatch_continuous_dims, BuildError, EnvMaker};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, ConfigError, Validate};
use rlx::filter::ObservationFilter;
use rlx::optimizer::SyncReplayConfig;
use rlx::postprocessing::{n_step_returns, N_STEP_DISCOUNTS};
use rlx::{
    fields, EnvShards, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, RestartPolicy, SampleBatch,
    Space, SyncReplayOptimizer, Trainer,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Hidden width of the actor and critic MLPs of DDPG, TD3 and SAC.
pub const CONTINUOUS_HIDDEN: usize = 64;

/// DDPG's configuration (TD3's too, with other defaults). Every key is
/// optional in `--config`; unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct DdpgConfig {
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
    /// Env steps (all evaluators together) of uniformly random actions at
    /// the start, before the actor acts.
    pub random_timesteps: u64,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// Replayed rows trained on per sampled env step; `null` is
    /// `train_batch_size`: one update per env step.
    pub training_intensity: Option<f64>,
    /// Adam learning rate of the actor.
    pub actor_lr: f64,
    /// Adam learning rate of the critics.
    pub critic_lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak coefficient τ of the target networks: `θ' ← τ θ + (1 − τ) θ'`.
    pub tau: f64,
    /// Rewards summed into each transition's return before bootstrapping.
    pub n_step: usize,
    /// Clipped double Q-learning (TD3): two critics, the target is the
    /// smaller of their target values.
    pub twin_q: bool,
    /// Critic updates per actor and target-network update (TD3's `d`).
    pub policy_delay: u64,
    /// Target policy smoothing (TD3): clipped Gaussian noise on the target
    /// action.
    pub smooth_target_policy: bool,
    /// Standard deviation of the target-action noise, in normalized action
    /// units (1 = half the action range).
    pub target_noise: f64,
    /// The target-action noise is clipped to ± this, in normalized units.
    pub target_noise_clip: f64,
    /// Standard deviation of the Gaussian exploration noise, in normalized
    /// action units (1 = half the action range).
    pub exploration_noise: f64,
    /// Maximum global gradient norm of each network; `null` disables
    /// clipping.
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

impl Default for DdpgConfig {
    /// DDPG as the TD3 paper's re-tuned baseline ("OurDDPG"): Gaussian
    /// exploration, one critic, no delay, no smoothing.
    fn default() -> Self {
        Self {
            num_workers: 0,
            num_envs_per_worker: 1,
            rollout_fragment_length: 1,
            timesteps_per_iteration: 1000,
            buffer_size: 100_000,
            learning_starts: 1000,
            random_timesteps: 1000,
            train_batch_size: 256,
            training_intensity: None,
            actor_lr: 1e-3,
            critic_lr: 1e-3,
            gamma: 0.99,
            tau: 0.005,
            n_step: 1,
            twin_q: false,
            policy_delay: 1,
            smooth_target_policy: false,
            target_noise: 0.2,
            target_noise_clip: 0.5,
            exploration_noise: 0.1,
            grad_clip: None,
            env_config: serde_json::Value::Null,
            seed: 0,
            device: DeviceSpec::Cpu,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
        }
    }
}

impl Validate for DdpgConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.device.check_available()?;
        check_replay(&ReplaySettings::from(self))?;
        for (key, lr) in [("actor_lr", self.actor_lr), ("critic_lr", self.critic_lr)] {
            check(key, lr, lr > 0.0 && lr.is_finite(), "must be > 0")?;
        }
        check("gamma", self.gamma, (0.0..=1.0).contains(&self.gamma), "must be in [0, 1]")?;
        check("tau", self.tau, self.tau > 0.0 && self.tau <= 1.0, "must be in (0, 1]")?;
        check("policy_delay", self.policy_delay, self.policy_delay >= 1, "must be >= 1")?;
        for (key, v) in [
            ("target_noise", self.target_noise),
            ("target_noise_clip", self.target_noise_clip),
            ("exploration_noise", self.exploration_noise),
        ] {
            check(key, v, v >= 0.0 && v.is_finite(), "must be >= 0")?;
        }
        if let Some(c) = self.grad_clip {
            check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
        }
        self.restart.validate("restart")
    }
}

/// The sampling and replay keys DDPG, TD3 and SAC share.
pub(crate) struct ReplaySettings {
    pub num_workers: usize,
    pub num_envs_per_worker: usize,
    pub rollout_fragment_length: usize,
    pub timesteps_per_iteration: usize,
    pub buffer_size: usize,
    pub learning_starts: usize,
    pub train_batch_size: usize,
    pub training_intensity: Option<f64>,
    pub n_step: usize,
    pub seed: u64,
    pub restart: RestartPolicy,
    pub env_shards: EnvShards,
}

impl From<&DdpgConfig> for ReplaySettings {
    fn from(c: &DdpgConfig) -> Self {
        Self {
            num_workers: c.num_workers,
            num_envs_per_worker: c.num_envs_per_worker,
            rollout_fragment_length: c.rollout_fragment_length,
            timesteps_per_iteration: c.timesteps_per_iteration,
            buffer_size: c.buffer_size,
            learning_starts: c.learning_starts,
            train_batch_size: c.train_batch_size,
            training_intensity: c.training_intensity,
            n_step: c.n_step,
            seed: c.seed,
            restart: c.restart,
            env_shards: c.env_shards,
        }
    }
}

/// Range checks of the shared sampling and replay keys.
pub(crate) fn check_replay(s: &ReplaySettings) -> Result<(), ConfigError> {
    let positive = |key: &str, v: usize| check(key, v, v >= 1, "must be >= 1");
    positive("num_envs_per_worker", s.num_envs_per_worker)?;
    s.env_shards.validate(s.num_envs_per_worker)?;
    positive("rollout_fragment_length", s.rollout_fragment_length)?;
    positive("timesteps_per_iteration", s.timesteps_per_iteration)?;
    positive("buffer_size", s.buffer_size)?;
    let ls = s.learning_starts;
    check("learning_starts", ls, ls <= s.buffer_size, "must be <= buffer_size (or learning never starts)")?;
    positive("train_batch_size", s.train_batch_size)?;
    positive("n_step", s.n_step)?;
    // Returns are summed within a sampled fragment, so a longer n would
    // silently be cut to the fragment.
    let (n, len) = (s.n_step, s.rollout_fragment_length);
    check("n_step", n, n <= len, "must be <= rollout_fragment_length (n-step returns stay within a fragment)")?;
    if let Some(ti) = s.training_intensity {
        check("training_intensity", ti, ti > 0.0 && ti.is_finite(), "must be > 0 or null")?;
    }
    Ok(())
}

impl ReplaySettings {
    /// The replay optimizer's settings (uniform replay).
    pub(crate) fn replay(&self) -> SyncReplayConfig {
        SyncReplayConfig {
            buffer_size: self.buffer_size,
            prioritized: None,
            learning_starts: self.learning_starts,
            train_batch_size: self.train_batch_size,
            training_intensity: self.training_intensity.unwrap_or(self.train_batch_size as f64),
            timesteps_per_iteration: self.timesteps_per_iteration,
            seed: self.seed,
        }
    }

    /// How the evaluators sample.
    pub(crate) fn sampling(&self) -> crate::execution::SamplingSettings {
        crate::execution::SamplingSettings {
            num_workers: self.num_workers,
            num_envs_per_worker: self.num_envs_per_worker,
            sample_size: self.rollout_fragment_length * self.num_envs_per_worker,
            observation_filter: ObservationFilter::NoFilter,
            seed: self.seed,
            restart: self.restart,
            env_shards: self.env_shards,
        }
    }
}

/// An evaluator's share of `random_timesteps`: each of the samplers takes
/// about 1/`samplers` of the run's steps.
pub(crate) fn random_steps_per_evaluator(random_timesteps: u64, num_workers: usize) -> u64 {
    random_timesteps / num_workers.max(1) as u64
}

/// The actor: `O → H → H → A` with ReLU, ending in `tanh`.
pub type DeterministicActor<const O: usize, const A: usize, const H: usize = CONTINUOUS_HIDDEN> =
    (Linear<O, H>, ReLU, Linear<H, H>, ReLU, Linear<H, A>, Tanh);
/// [`DeterministicActor`] built on device `D`.
type ActorNet<const O: usize, const A: usize, const H: usize, D> = (
    modules::Linear<O, H, f32, D>,
    modules::ReLU,
    modules::Linear<H, H, f32, D>,
    modules::ReLU,
    modules::Linear<H, A, f32, D>,
    modules::Tanh,
);

/// A critic `Q(s, a)`: `I → H → H → 1` with ReLU, where the input is the
/// normalized action and the observation, `I = A + O` wide.
pub type Critic<const I: usize, const H: usize = CONTINUOUS_HIDDEN> =
    (Linear<I, H>, ReLU, Linear<H, H>, ReLU, Linear<H, 1>);
/// [`Critic`] built on device `D`.
pub(crate) type CriticNet<const I: usize, const H: usize, D> = (
    modules::Linear<I, H, f32, D>,
    modules::ReLU,
    modules::Linear<H, H, f32, D>,
    modules::ReLU,
    modules::Linear<H, 1, f32, D>,
);

/// The bounds of a `Box` action space, mapping between env units and the
/// actors' normalized `[−1, 1]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ActionBounds {
    low: Vec<f32>,
    high: Vec<f32>,
}

impl ActionBounds {
    /// The bounds of `space`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] unless `space` is a `Box` with finite
    /// bounds.
    pub(crate) fn new(space: &Space, algorithm: &str) -> Result<Self, BuildError> {
        match space {
            Space::Box { low, high, .. } if low.iter().chain(high).all(|x| x.is_finite()) => {
                Ok(Self { low: low.clone(), high: high.clone() })
            }
            _ => Err(BuildError::Unsupported(format!(
                "{algorithm} needs a Box action space with finite bounds (its actor's tanh output is scaled to them); \
                 got {space}"
            ))),
        }
    }

    /// Rows of normalized actions in env units:
    /// `low + (u + 1)/2 · (high − low)`.
    pub(crate) fn to_env(&self, u: &[f32]) -> Vec<f32> {
        let w = self.low.len();
        u.iter()
            .enumerate()
            .map(|(i, &u)| self.low[i % w] + (u + 1.0) * 0.5 * (self.high[i % w] - self.low[i % w]))
            .collect()
    }

    /// Rows of env actions in normalized units (the inverse of
    /// [`to_env`](Self::to_env)); out-of-range actions are clipped first,
    /// as the env clips them.
    pub(crate) fn to_normalized(&self, a: &[f32]) -> Vec<f32> {
        let w = self.low.len();
        a.iter()
            .enumerate()
            .map(|(i, &a)| {
                let (lo, hi) = (self.low[i % w], self.high[i % w]);
                if hi > lo {
                    (2.0 * (a.clamp(lo, hi) - lo) / (hi - lo) - 1.0).clamp(-1.0, 1.0)
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// Row-major `[n, O]` observations as a tensor.
pub(crate) fn obs_tensor<const O: usize, D: Device<f32>>(
    dev: &D,
    obs: &[f32],
) -> Result<Tensor<(usize, Const<O>), f32, D>, PolicyError> {
    if !obs.len().is_multiple_of(O) {
        return Err(PolicyError::Other(format!(
            "{} observation values is not a whole number of rows of {O}",
            obs.len()
        )));
    }
    Ok(dev.tensor_from_vec(obs.to_vec(), (obs.len() / O, Const::<O>)))
}

/// The critic input `[u, s]` of every row, from normalized actions `u`
/// (`[n, A]`) and observations `s` (`[n, O]`).
///
/// # Errors
/// If the two have different numbers of rows.
pub(crate) fn critic_input<const O: usize, const A: usize, const I: usize, D: Device<f32>>(
    dev: &D,
    u: &[f32],
    obs: &[f32],
) -> Result<Tensor<(usize, Const<I>), f32, D>, PolicyError> {
    debug_assert_eq!(I, O + A);
    let n = obs.len() / O;
    if u.len() != n * A || obs.len() != n * O {
        return Err(PolicyError::Other(format!(
            "{} action values do not match {} observation rows of {O} (actions are {A} wide)",
            u.len(),
            n
        )));
    }
    let mut x = Vec::with_capacity(n * I);
    for (u, s) in u.chunks_exact(A).zip(obs.chunks_exact(O)) {
        x.extend_from_slice(u);
        x.extend_from_slice(s);
    }
    Ok(dev.tensor_from_vec(x, (n, Const::<I>)))
}

/// [`critic_input`] for actions on a gradient tape (the actor's output),
/// so that `∂Q/∂u` flows back into the actor.
pub(crate) fn critic_input_taped<const O: usize, const A: usize, const I: usize, D: Device<f32>>(
    u: Tensor<(usize, Const<A>), f32, D, OwnedTape<f32, D>>,
    obs: Tensor<(usize, Const<O>), f32, D>,
) -> Tensor<(usize, Const<I>), f32, D, OwnedTape<f32, D>> {
    let u: Tensor<(usize, usize), f32, D, _> = u.realize();
    let obs: Tensor<(usize, usize), f32, D> = obs.realize();
    (u, obs).concat_along(Axis::<1>).realize()
}

/// Q-values of the rows of `x` under each critic (no gradient), then their
/// element-wise minimum: one `Vec` per critic and the minimum.
pub(crate) fn q_values<const I: usize, const H: usize, D: Device<f32>>(
    critics: &[CriticNet<I, H, D>],
    x: &Tensor<(usize, Const<I>), f32, D>,
) -> (Vec<Vec<f32>>, Vec<f32>) {
    let each: Vec<Vec<f32>> = critics.iter().map(|c| c.forward(x.clone()).as_vec()).collect();
    let min = (0..each[0].len()).map(|i| each.iter().map(|q| q[i]).fold(f32::INFINITY, f32::min)).collect();
    (each, min)
}

/// `R + γ^k (1 − terminated) · next_value` of every row.
pub(crate) fn bellman_targets(batch: &SampleBatch, next_value: &[f32]) -> Result<Vec<f32>, PolicyError> {
    let (rewards, terminated) = (batch.f32(fields::REWARDS)?, batch.f32(fields::TERMINATEDS)?);
    let discounts = batch.f32(N_STEP_DISCOUNTS)?;
    Ok((0..batch.len()).map(|i| rewards[i] + discounts[i] * (1.0 - terminated[i]) * next_value[i]).collect())
}

/// The summed MSE loss `Σ_j mean (Q_j(x) − y)²` of `critics` and its flat
/// gradient (critic after critic), with `mean_q`, `mean_td_error` (of the
/// first critic) and `critic_loss` in the stats.
pub(crate) fn critic_backward<const I: usize, const H: usize, D: Device<f32>>(
    dev: &D,
    critics: &[CriticNet<I, H, D>],
    x: Tensor<(usize, Const<I>), f32, D>,
    targets: &[f32],
    stats: &mut LearnerStats,
) -> Result<Vec<f32>, PolicyError> {
    let n = targets.len();
    let y = dev.tensor_from_vec(targets.to_vec(), (n, Const::<1>));
    let (mut flat, mut total) = (Vec::new(), 0.0f32);
    for (j, critic) in critics.iter().enumerate() {
        let q = critic.forward(x.clone().traced(critic.alloc_grads()));
        if j == 0 {
            let q = q.as_vec();
            stats.set("mean_q", q.iter().map(|&q| q as f64).sum::<f64>() / n as f64);
            let td = q.iter().zip(targets).map(|(q, y)| (q - y).abs() as f64).sum::<f64>();
            stats.set("mean_td_error", td / n as f64);
        }
        let loss = (q - y.clone()).square().mean();
        total += loss.as_vec()[0];
        let grads = loss.backward();
        flat.extend(nn::flat_grads(critic, &grads));
    }
    if !total.is_finite() {
        return Err(PolicyError::NonFinite("critic loss".into()));
    }
    stats.set("critic_loss", total as f64);
    stats.set("mean_target_q", targets.iter().map(|&y| y as f64).sum::<f64>() / n.max(1) as f64);
    Ok(flat)
}

/// The parameters of several networks of one type, concatenated.
pub(crate) fn flat_params_of<D: Device<f32>, M: TensorCollection<f32, D>>(nets: &[M]) -> Vec<f32> {
    nets.iter().flat_map(|m| nn::flat_params(m)).collect()
}

/// Loads [`flat_params_of`]'s layout back.
pub(crate) fn load_params_of<D: Device<f32>, M: TensorCollection<f32, D> + NumParams<f32, D>>(
    nets: &mut [M],
    src: &[f32],
) -> Result<(), PolicyError> {
    let expected: usize = nets.iter().map(|m| m.num_trainable_params()).sum();
    if src.len() != expected {
        return Err(PolicyError::WrongLength { what: "weights", expected, got: src.len() });
    }
    let mut pos = 0;
    for m in nets {
        let k = m.num_trainable_params();
        nn::load_params(m, &src[pos..pos + k])?;
        pos += k;
    }
    Ok(())
}

/// Clips `grad`, takes one Adam step on `params` and returns the norm
/// before clipping.
pub(crate) fn adam_step(
    adam: &mut nn::Adam,
    params: &mut [f32],
    grad: &mut [f32],
    grad_clip: Option<f64>,
) -> Result<f32, PolicyError> {
    let norm = nn::clip_grad_norm(grad, grad_clip.map(|c| c as f32))?;
    adam.update(params, grad)?;
    Ok(norm)
}

/// A DDPG/TD3 policy for `O`-dimensional observations and `A`-dimensional
/// actions (`I = A + O`) on device `D`: the actor, one or two critics,
/// their targets, two Adams, and Gaussian exploration.
pub struct DdpgPolicy<
    const O: usize,
    const A: usize,
    const I: usize,
    D: Device<f32> = Cpu,
    const H: usize = CONTINUOUS_HIDDEN,
> {
    cfg: DdpgConfig,
    dev: D,
    actor: ActorNet<O, A, H, D>,
    critics: Vec<CriticNet<I, H, D>>,
    target_actor: ActorNet<O, A, H, D>,
    target_critics: Vec<CriticNet<I, H, D>>,
    actor_adam: nn::Adam,
    critic_adam: nn::Adam,
    bounds: ActionBounds,
    rng: ChaCha8Rng,
    /// This evaluator's share of `random_timesteps`.
    random_steps: u64,
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
    /// Critic updates applied.
    updates: u64,
    /// Actor (and target) updates applied.
    actor_updates: u64,
    observation_space: Space,
    action_space: Space,
}

// SAFETY: as for `ActorCriticPolicy` (see the argument there): the public
// constructors build the device, no method hands out a clone of it or of a
// tensor, so sending the policy sends every clone of its device handle; the
// other fields are plain data.
unsafe impl<const O: usize, const A: usize, const I: usize, D: MovableDevice, const H: usize> Send
    for DdpgPolicy<O, A, I, D, H>
{
}

impl<const O: usize, const A: usize, const I: usize, const H: usize> DdpgPolicy<O, A, I, Cpu, H> {
    /// A policy on the CPU. Initial weights depend only on `cfg.seed`;
    /// exploration and target noise use `rng_seed`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] unless the action space is a bounded
    /// `Box`.
    pub fn new(
        cfg: DdpgConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = Cpu::seed_from_u64(cfg.seed);
        Self::on_device(dev, cfg, observation_space, action_space, rng_seed)
    }
}

#[cfg(feature = "cuda")]
impl<const O: usize, const A: usize, const I: usize, const H: usize> DdpgPolicy<O, A, I, Cuda, H> {
    /// A policy on CUDA device `ordinal`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] if the device cannot be opened or the
    /// action space is not a bounded `Box`.
    pub fn on_cuda(
        ordinal: usize,
        cfg: DdpgConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = crate::device::open_cuda(ordinal, cfg.seed)?;
        Self::on_device(dev, cfg, observation_space, action_space, rng_seed)
    }
}

impl<const O: usize, const A: usize, const I: usize, D: Device<f32>, const H: usize> DdpgPolicy<O, A, I, D, H> {
    fn on_device(
        dev: D,
        cfg: DdpgConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        assert_eq!(I, O + A, "the critic input is [action, observation]");
        let bounds = ActionBounds::new(&action_space, "DDPG")?;
        let actor = ActorNet::<O, A, H, D>::build(&dev);
        let critics: Vec<_> = (0..if cfg.twin_q { 2 } else { 1 }).map(|_| CriticNet::<I, H, D>::build(&dev)).collect();
        let critic_params = critics.iter().map(|c| c.num_trainable_params()).sum();
        Ok(Self {
            actor_adam: nn::Adam::new(actor.num_trainable_params(), cfg.actor_lr as f32, 1e-8),
            critic_adam: nn::Adam::new(critic_params, cfg.critic_lr as f32, 1e-8),
            random_steps: random_steps_per_evaluator(cfg.random_timesteps, cfg.num_workers),
            cfg,
            target_actor: actor.clone(),
            target_critics: critics.clone(),
            actor,
            critics,
            dev,
            bounds,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            steps_explored: 0,
            updates: 0,
            actor_updates: 0,
            observation_space,
            action_space,
        })
    }

    fn num_actor_params(&self) -> usize {
        self.actor.num_trainable_params()
    }

    /// The normalized actions `μ(s) ∈ [−1, 1]^A` of every row of `obs` under
    /// `actor` (online or target), no gradient.
    fn actions(&self, actor: &ActorNet<O, A, H, D>, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        Ok(actor.forward(obs_tensor::<O, D>(&self.dev, obs)?).as_vec())
    }

    /// The target `y = R + γ^k (1 − terminated) min_j Q'_j(s', u')` of every
    /// row, with `u' = μ'(s')`, smoothed with clipped noise if configured.
    fn td_targets(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let new_obs = batch.f32(fields::NEW_OBS)?;
        let mut next = self.actions(&self.target_actor, new_obs)?;
        if self.cfg.smooth_target_policy {
            let (sigma, c) = (self.cfg.target_noise as f32, self.cfg.target_noise_clip as f32);
            for u in &mut next {
                let eps: f32 = self.rng.sample(StandardNormal);
                *u = (*u + (sigma * eps).clamp(-c, c)).clamp(-1.0, 1.0);
            }
        }
        let x = critic_input::<O, A, I, D>(&self.dev, &next, new_obs)?;
        let (_, q_min) = q_values(&self.target_critics, &x);
        bellman_targets(batch, &q_min)
    }

    /// The critics' summed MSE gradient on `batch` (critics' layout).
    fn critic_gradient(&mut self, batch: &SampleBatch, stats: &mut LearnerStats) -> Result<Vec<f32>, PolicyError> {
        let targets = self.td_targets(batch)?;
        let obs = batch.f32(fields::OBS)?;
        let u = self.bounds.to_normalized(batch.f32(fields::ACTIONS)?);
        let x = critic_input::<O, A, I, D>(&self.dev, &u, obs)?;
        critic_backward(&self.dev, &self.critics, x, &targets, stats)
    }

    /// The actor loss `−mean Q_1(s, μ(s))` and its gradient (actor's layout).
    fn actor_gradient(&self, batch: &SampleBatch, stats: &mut LearnerStats) -> Result<Vec<f32>, PolicyError> {
        let obs = obs_tensor::<O, D>(&self.dev, batch.f32(fields::OBS)?)?;
        let u = self.actor.forward(obs.clone().traced(self.actor.alloc_grads()));
        let q = self.critics[0].forward(critic_input_taped::<O, A, I, D>(u, obs));
        let loss = q.mean() * -1.0;
        let value = loss.as_vec()[0];
        if !value.is_finite() {
            return Err(PolicyError::NonFinite("actor loss".into()));
        }
        stats.set("actor_loss", value as f64);
        let grads = loss.backward();
        Ok(nn::flat_grads(&self.actor, &grads))
    }

    /// Whether the next update moves the actor.
    fn actor_due(&self) -> bool {
        (self.updates + 1).is_multiple_of(self.cfg.policy_delay)
    }

    /// Applies a gradient in [`get_weights`](PolicyGraph::get_weights)'s
    /// layout: the critics always; the actor and the targets every
    /// `policy_delay`-th update.
    fn step(&mut self, grad: &mut [f32], stats: &mut LearnerStats) -> Result<(), PolicyError> {
        let (actor_grad, critic_grad) = grad.split_at_mut(self.num_actor_params());
        let mut params = flat_params_of(&self.critics);
        let norm = adam_step(&mut self.critic_adam, &mut params, critic_grad, self.cfg.grad_clip)?;
        load_params_of(&mut self.critics, &params)?;
        stats.set("critic_grad_norm", norm as f64);
        self.updates += 1;
        if self.updates.is_multiple_of(self.cfg.policy_delay) {
            let mut params = nn::flat_params(&self.actor);
            let norm = adam_step(&mut self.actor_adam, &mut params, actor_grad, self.cfg.grad_clip)?;
            nn::load_params(&mut self.actor, &params)?;
            stats.set("actor_grad_norm", norm as f64);
            let tau = self.cfg.tau as f32;
            nn::soft_update(&mut self.target_actor, &self.actor, tau)?;
            for (target, online) in self.target_critics.iter_mut().zip(&self.critics) {
                nn::soft_update(target, online, tau)?;
            }
            self.actor_updates += 1;
        }
        stats.set("num_actor_updates", self.actor_updates as f64);
        Ok(())
    }
}

/// What [`DdpgPolicy`] saves besides its weights.
#[derive(Serialize, Deserialize)]
struct SavedState {
    actor_adam: nn::Adam,
    critic_adam: nn::Adam,
    rng: ChaCha8Rng,
    target_actor: Vec<f32>,
    target_critics: Vec<f32>,
    steps_explored: u64,
    updates: u64,
    actor_updates: u64,
}

impl<const O: usize, const A: usize, const I: usize, D: Device<f32>, const H: usize> PolicyGraph
    for DdpgPolicy<O, A, I, D, H>
where
    Self: Send,
{
    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    /// `μ(s)` in env units; when exploring, uniformly random actions for
    /// this evaluator's share of `random_timesteps`, then `μ(s)` plus
    /// Gaussian noise, clipped to the bounds.
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let mut u = self.actions(&self.actor, obs)?;
        if explore {
            let sigma = self.cfg.exploration_noise as f32;
            for row in u.chunks_exact_mut(A) {
                let random = self.steps_explored < self.random_steps;
                for x in row {
                    *x = if random {
                        self.rng.gen_range(-1.0..=1.0)
                    } else {
                        let eps: f32 = self.rng.sample(StandardNormal);
                        (*x + sigma * eps).clamp(-1.0, 1.0)
                    };
                }
                self.steps_explored += 1;
            }
        }
        *out = SampleBatch::new();
        out.insert_f32(fields::ACTIONS, self.bounds.to_env(&u), A)?;
        Ok(())
    }

    /// n-step returns and each row's bootstrap discount.
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(n_step_returns(traj, self.cfg.n_step, self.cfg.gamma as f32)?)
    }

    /// One update on the (replayed) batch: the critics, and every
    /// `policy_delay`-th time the actor and the targets.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        let critic_grad = self.critic_gradient(batch, &mut stats)?;
        // The actor's gradient is only computed when it will be used.
        let mut grad =
            if self.actor_due() { self.actor_gradient(batch, &mut stats)? } else { vec![0.0; self.num_actor_params()] };
        grad.extend(critic_grad);
        self.step(&mut grad, &mut stats)?;
        Ok(stats)
    }

    /// The actor's and the critics' gradients, in the weights' layout
    /// (`apply_gradients` uses the actor's part every `policy_delay`-th
    /// time).
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let mut stats = LearnerStats::default();
        let critic_grad = self.critic_gradient(batch, &mut stats)?;
        let mut grad = self.actor_gradient(batch, &mut stats)?;
        grad.extend(critic_grad);
        stats.set("grad_norm", rlx::policy::global_norm(&grad));
        Ok((grad, stats))
    }

    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        let expected = self.num_actor_params() + self.critic_adam.num_params();
        if grads.len() != expected {
            return Err(PolicyError::WrongLength { what: "gradients", expected, got: grads.len() });
        }
        self.step(&mut grads.to_vec(), &mut LearnerStats::default())
    }

    /// The actor's parameters, then each critic's.
    fn get_weights(&self) -> FlatWeights {
        let mut w = nn::flat_params(&self.actor);
        w.extend(flat_params_of(&self.critics));
        w
    }

    /// Sets the online networks and their targets alike: a policy given
    /// weights (a restored checkpoint) bootstraps from them too.
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        let expected = self.num_actor_params() + self.critic_adam.num_params();
        if weights.len() != expected {
            return Err(PolicyError::WrongLength { what: "weights", expected, got: weights.len() });
        }
        let (actor, critics) = weights.split_at(self.num_actor_params());
        nn::load_params(&mut self.actor, actor)?;
        load_params_of(&mut self.critics, critics)?;
        self.target_actor = self.actor.clone();
        self.target_critics = self.critics.clone();
        Ok(())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        let saved = SavedState {
            actor_adam: self.actor_adam.clone(),
            critic_adam: self.critic_adam.clone(),
            rng: self.rng.clone(),
            target_actor: nn::flat_params(&self.target_actor),
            target_critics: flat_params_of(&self.target_critics),
            steps_explored: self.steps_explored,
            updates: self.updates,
            actor_updates: self.actor_updates,
        };
        rlx::codec::encode_value(&saved).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let saved: SavedState = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a saved state of this policy: {e}")))?;
        let (na, nc) = (self.num_actor_params(), self.critic_adam.num_params());
        if saved.actor_adam.num_params() != na
            || saved.target_actor.len() != na
            || saved.critic_adam.num_params() != nc
            || saved.target_critics.len() != nc
        {
            return Err(PolicyError::Other(format!(
                "the saved state is for other networks (this policy has {na} actor and {nc} critic parameters)"
            )));
        }
        nn::load_params(&mut self.target_actor, &saved.target_actor)?;
        load_params_of(&mut self.target_critics, &saved.target_critics)?;
        (self.actor_adam, self.critic_adam, self.rng) = (saved.actor_adam, saved.critic_adam, saved.rng);
        (self.steps_explored, self.updates, self.actor_updates) =
            (saved.steps_explored, saved.updates, saved.actor_updates);
        Ok(())
    }
}

/// The observation and action widths of a `Box` → `Box` env, or why
/// `algorithm` cannot run on it.
pub(crate) fn continuous_dims(
    algorithm: &str,
    observation_space: &Space,
    action_space: &Space,
) -> Result<(usize, usize), BuildError> {
    match (observation_space, action_space) {
        (Space::Box { .. }, Space::Box { .. }) => Ok((observation_space.flat_dim(), action_space.flat_dim())),
        _ => Err(BuildError::Unsupported(format!(
            "{algorithm} supports a Box observation space with Box (continuous) actions; got {observation_space} and \
             {action_space}"
        ))),
    }
}

/// The error for widths without a compiled network.
pub(crate) fn no_network(algorithm: &str, obs_dim: usize, action_dim: usize) -> BuildError {
    BuildError::Unsupported(format!(
        "no compiled {algorithm} network for {obs_dim} observations and {action_dim} action dimensions; supported \
         (obs, action): {:?}",
        nn::SUPPORTED_CONTINUOUS_DIMS
    ))
}

/// A DDPG/TD3 policy for the given spaces on the config's device.
///
/// # Errors
/// [`BuildError::Unsupported`] unless both spaces are `Box`es (the action
/// space bounded) with a compiled network size, or for a device this build
/// or machine lacks.
pub fn make_policy(
    cfg: &DdpgConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (obs_dim, action_dim) = continuous_dims("DDPG", observation_space, action_space)?;
    let (o, a, cfg) = (observation_space.clone(), action_space.clone(), cfg.clone());
    dispatch_continuous_dims!(
        obs_dim,
        action_dim,
        |OBS, ACT, IN| build_on::<OBS, ACT, IN>(cfg, o, a, rng_seed),
        Err(no_network("DDPG", obs_dim, action_dim))
    )
}

fn build_on<const O: usize, const A: usize, const I: usize>(
    cfg: DdpgConfig,
    o: Space,
    a: Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    match cfg.device {
        DeviceSpec::Cpu => Ok(Box::new(DdpgPolicy::<O, A, I>::new(cfg, o, a, rng_seed)?)),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(n) => Ok(Box::new(DdpgPolicy::<O, A, I, Cuda>::on_cuda(n, cfg, o, a, rng_seed)?)),
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
pub async fn build(make_env: EnvMaker, cfg: DdpgConfig) -> Result<Trainer, BuildError> {
    let settings = ReplaySettings::from(&cfg);
    let policy_cfg = cfg.clone();
    let make_policy = Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(&policy_cfg, o, a, seed));
    let evaluators = crate::execution::spawn_evaluators(make_env, make_policy, settings.sampling()).await?;
    let optimizer =
        SyncReplayOptimizer::new(evaluators, settings.replay()).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(Box::new(optimizer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spaces() -> (Space, Space) {
        (Space::uniform_box(-1.0, 1.0, vec![3]).unwrap(), Space::uniform_box(-2.0, 2.0, vec![1]).unwrap())
    }

    type Policy = DdpgPolicy<3, 1, 4>;

    fn policy(cfg: DdpgConfig) -> Policy {
        let (o, a) = spaces();
        Policy::new(cfg, o, a, 0).unwrap()
    }

    /// Four transitions with hand-picked rewards and ends.
    fn batch() -> SampleBatch {
        let obs: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut b = SampleBatch::new();
        b.insert_f32(fields::OBS, obs.clone(), 3).unwrap();
        b.insert_f32(fields::ACTIONS, vec![-2.0, -0.5, 1.0, 2.0], 1).unwrap();
        b.insert_f32(fields::NEW_OBS, obs.iter().map(|x| x * 0.5).collect(), 3).unwrap();
        b.insert_f32(fields::REWARDS, vec![1.0, 0.0, -1.0, 2.0], 1).unwrap();
        b.insert_f32(fields::TERMINATEDS, vec![0.0, 0.0, 1.0, 0.0], 1).unwrap();
        b.insert_f32(fields::TRUNCATEDS, vec![0.0, 0.0, 0.0, 1.0], 1).unwrap();
        b.insert_f32(N_STEP_DISCOUNTS, vec![0.99; 4], 1).unwrap();
        b
    }

    fn td3() -> DdpgConfig {
        crate::td3::Td3Config::default().0
    }

    #[test]
    fn action_bounds_round_trip() {
        let b = ActionBounds::new(&Space::bounded(vec![-2.0, 0.0], vec![2.0, 1.0], vec![2]).unwrap(), "X").unwrap();
        assert_eq!(b.to_env(&[-1.0, -1.0, 0.0, 1.0]), vec![-2.0, 0.0, 0.0, 1.0]);
        assert_eq!(b.to_normalized(&[-2.0, 0.0, 0.0, 1.0, 5.0, -3.0]), vec![-1.0, -1.0, 0.0, 1.0, 1.0, -1.0]);
        let unbounded = Space::uniform_box(f32::NEG_INFINITY, f32::INFINITY, vec![1]).unwrap();
        assert!(ActionBounds::new(&unbounded, "X").unwrap_err().to_string().contains("finite bounds"));
    }

    #[test]
    fn td3_targets_use_the_min_of_twin_targets_and_clipped_smoothing_noise() {
        let mut p = policy(DdpgConfig { target_noise: 10.0, target_noise_clip: 0.3, ..td3() });
        assert_eq!(p.critics.len(), 2);
        let b = batch();
        let new_obs = b.f32(fields::NEW_OBS).unwrap().to_vec();
        let mu = p.actions(&p.target_actor, &new_obs).unwrap();
        // Replay the policy's noise draws: with σ = 10 every draw is clipped
        // to ±0.3.
        let mut rng = p.rng.clone();
        let smoothed: Vec<f32> = mu
            .iter()
            .map(|&u| {
                let eps: f32 = rng.sample(StandardNormal);
                (u + (10.0 * eps).clamp(-0.3, 0.3)).clamp(-1.0, 1.0)
            })
            .collect();
        assert!(smoothed.iter().zip(&mu).all(|(s, m)| (s - m).abs() <= 0.3 + 1e-6 && (s - m).abs() > 0.0));
        let x = critic_input::<3, 1, 4, Cpu>(&p.dev, &smoothed, &new_obs).unwrap();
        let q1 = p.target_critics[0].forward(x.clone()).as_vec();
        let q2 = p.target_critics[1].forward(x).as_vec();
        let targets = p.td_targets(&b).unwrap();
        let r = b.f32(fields::REWARDS).unwrap();
        for i in 0..4 {
            let next = if i == 2 { 0.0 } else { 0.99 * q1[i].min(q2[i]) };
            assert!((targets[i] - (r[i] + next)).abs() < 1e-5, "row {i}: {} vs {}", targets[i], r[i] + next);
        }
        // Without smoothing and twin critics: the single target critic at μ'(s').
        let mut p = policy(DdpgConfig::default());
        let x = critic_input::<3, 1, 4, Cpu>(&p.dev, &mu, &new_obs).unwrap();
        let q = p.target_critics[0].forward(x).as_vec();
        let targets = p.td_targets(&b).unwrap();
        assert!((targets[3] - (2.0 + 0.99 * q[3])).abs() < 1e-5, "truncation bootstraps");
    }

    #[test]
    fn critic_input_puts_the_action_first_and_the_taped_path_agrees() {
        let dev = Cpu::default();
        let x = critic_input::<2, 1, 3, Cpu>(&dev, &[0.5, -0.5], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(x.as_vec(), vec![0.5, 1.0, 2.0, -0.5, 3.0, 4.0]);
        let u = dev.tensor_from_vec(vec![0.5, -0.5], (2, Const::<1>));
        let obs = dev.tensor_from_vec(vec![1.0, 2.0, 3.0, 4.0], (2, Const::<2>));
        let taped = critic_input_taped::<2, 1, 3, Cpu>(u.leaky_traced(), obs);
        assert_eq!(taped.as_vec(), x.as_vec());
        assert!(critic_input::<2, 1, 3, Cpu>(&dev, &[0.5], &[1.0, 2.0, 3.0, 4.0]).is_err());
    }

    #[test]
    fn soft_update_moves_targets_by_tau_and_the_actor_waits_for_the_delay() {
        let mut p = policy(DdpgConfig { tau: 0.1, policy_delay: 2, ..td3() });
        let b = batch();
        let (actor0, target0) = (nn::flat_params(&p.actor), nn::flat_params(&p.target_actor));
        let critic_target0 = flat_params_of(&p.target_critics);
        let critic0 = flat_params_of(&p.critics);
        let stats = p.learn_on_batch(&b).unwrap();
        assert_eq!(nn::flat_params(&p.actor), actor0, "the actor waits");
        assert_eq!(flat_params_of(&p.target_critics), critic_target0, "the targets wait");
        assert_ne!(flat_params_of(&p.critics), critic0, "the critics move");
        assert!(stats.get("actor_loss").is_none() && stats.get("critic_loss").is_some());
        let stats = p.learn_on_batch(&b).unwrap();
        assert_eq!(stats.get("num_actor_updates"), Some(1.0));
        assert!(stats.get("actor_loss").is_some());
        assert_ne!(nn::flat_params(&p.actor), actor0, "the actor moves on the second update");
        let (actor, target) = (nn::flat_params(&p.actor), nn::flat_params(&p.target_actor));
        for i in 0..actor.len() {
            let expected = 0.1 * actor[i] + 0.9 * target0[i];
            assert!((target[i] - expected).abs() < 1e-6, "param {i}");
        }
        let (critics, targets) = (flat_params_of(&p.critics), flat_params_of(&p.target_critics));
        for i in 0..critics.len() {
            assert!((targets[i] - (0.1 * critics[i] + 0.9 * critic_target0[i])).abs() < 1e-6, "critic param {i}");
        }
    }

    #[test]
    fn learning_reduces_the_critic_loss_and_raises_q_of_the_actor() {
        let mut p = policy(DdpgConfig { critic_lr: 1e-2, actor_lr: 1e-2, tau: 1.0, ..DdpgConfig::default() });
        let b = batch();
        let first = p.learn_on_batch(&b).unwrap();
        let mut last = first.clone();
        for _ in 0..50 {
            last = p.learn_on_batch(&b).unwrap();
        }
        assert!(last.get("actor_loss").unwrap() < first.get("actor_loss").unwrap(), "{first:?} -> {last:?}");
        assert!(last.get("critic_loss").unwrap().is_finite());
    }

    #[test]
    fn gradient_split_equals_learn_step() {
        for delay in [1, 2] {
            let cfg = DdpgConfig { policy_delay: delay, ..td3() };
            let (mut x, mut y) = (policy(cfg.clone()), policy(cfg));
            let b = batch();
            for _ in 0..3 {
                let (g, _) = x.compute_gradients(&b).unwrap();
                x.apply_gradients(&g).unwrap();
                y.learn_on_batch(&b).unwrap();
                assert_eq!(x.get_weights(), y.get_weights(), "delay {delay}");
                assert_eq!(nn::flat_params(&x.target_actor), nn::flat_params(&y.target_actor));
            }
            let (g, _) = x.compute_gradients(&b).unwrap();
            assert!(x.apply_gradients(&g[1..]).is_err());
        }
    }

    #[test]
    fn exploration_is_random_then_noisy_and_greedy_is_deterministic() {
        let cfg = DdpgConfig { random_timesteps: 10, exploration_noise: 0.0, ..DdpgConfig::default() };
        let mut p = policy(cfg);
        let obs = vec![0.1f32; 3 * 10];
        let mut out = SampleBatch::new();
        p.compute_actions(&obs, false, &mut out).unwrap();
        let greedy = out.f32(fields::ACTIONS).unwrap().to_vec();
        assert!(greedy.iter().all(|&a| a == greedy[0] && (-2.0..=2.0).contains(&a)));
        p.compute_actions(&obs, true, &mut out).unwrap();
        let random = out.f32(fields::ACTIONS).unwrap().to_vec();
        assert!(random.iter().all(|a| (-2.0..=2.0).contains(a)) && random.iter().any(|&a| a != random[0]));
        p.compute_actions(&obs, true, &mut out).unwrap();
        assert_eq!(out.f32(fields::ACTIONS).unwrap(), greedy, "zero noise after the random steps");
        let mut p = policy(DdpgConfig { random_timesteps: 0, exploration_noise: 0.1, ..DdpgConfig::default() });
        p.compute_actions(&obs, true, &mut out).unwrap();
        let noisy = out.f32(fields::ACTIONS).unwrap();
        let spread = noisy.iter().map(|a| (a - greedy[0]).abs()).fold(0.0f32, f32::max);
        assert!(spread > 0.0 && spread < 2.0 * 0.1 * 5.0, "σ = 0.1 half-ranges: {noisy:?}");
    }

    #[test]
    fn state_round_trips_and_bad_input_is_an_error() {
        let cfg = DdpgConfig { policy_delay: 2, ..td3() };
        let mut p = policy(cfg.clone());
        let b = batch();
        p.learn_on_batch(&b).unwrap();
        p.learn_on_batch(&b).unwrap();
        let (o, a) = spaces();
        let mut q = Policy::new(cfg, o, a, 0).unwrap();
        q.set_weights(&p.get_weights()).unwrap();
        q.load_state(&p.save_state().unwrap()).unwrap();
        for _ in 0..2 {
            p.learn_on_batch(&b).unwrap();
            q.learn_on_batch(&b).unwrap();
        }
        assert_eq!(p.get_weights(), q.get_weights(), "a restored policy continues exactly");
        assert!(q.load_state(b"junk").is_err());
        let single = policy(DdpgConfig::default());
        assert!(single.get_weights().len() < p.get_weights().len());
        assert!(q.load_state(&single.save_state().unwrap()).is_err());

        let mut missing = SampleBatch::new();
        missing.insert_f32(fields::OBS, vec![0.0; 3], 3).unwrap();
        assert!(p.learn_on_batch(&missing).is_err());
        for (key, value) in [
            ("tau", serde_json::json!(0.0)),
            ("policy_delay", serde_json::json!(0)),
            ("target_noise", serde_json::json!(-1.0)),
            ("actor_lr", serde_json::json!(0.0)),
            ("training_intensity", serde_json::json!(0.0)),
            ("n_step", serde_json::json!(0)),
        ] {
            let err = rlx::config::merge_json(&DdpgConfig::default(), &serde_json::json!({ key: value })).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
        let (o, _) = spaces();
        let err = make_policy(&DdpgConfig::default(), &o, &Space::discrete(2), 0).err().unwrap();
        assert!(err.to_string().contains("Box (continuous) actions"), "{err}");
        let wide = Space::uniform_box(-1.0, 1.0, vec![7]).unwrap();
        let err = make_policy(&DdpgConfig::default(), &wide, &spaces().1, 0).err().unwrap();
        assert!(err.to_string().contains("no compiled DDPG network"), "{err}");
    }
}
