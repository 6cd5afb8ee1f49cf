//! # Soft Actor-Critic (SAC)
//!
//! Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018
//! (arXiv:1812.05905; the version with twin critics, target critics and a
//! learned temperature): maximize `E[Σ γ^t (r_t + α H(π(·|s_t)))]` with a
//! stochastic actor, for continuous actions.
//!
//! The details that matter:
//! - **Squashed Gaussian actor.** The actor outputs a mean `m(s)` and a log
//!   standard deviation, squashed into `[−5, 2]` by `tanh` (as CleanRL)
//!   rather than clipped, so it always has a gradient. An action is
//!   `u = tanh(m + σ ε)`, `ε ~ N(0, I)` (the reparameterization trick),
//!   scaled to the action bounds as in [`crate::ddpg`]. Its log-density is
//!   the Gaussian's minus the `tanh` Jacobian (the paper's appendix C):
//!   `log π(u|s) = Σ_i [log N(x_i; m_i, σ_i) − log(1 − tanh²(x_i))]`, with
//!   `log(1 − tanh² x) = 2 (log 2 − x − softplus(−2x))` for stability.
//!   Acting without exploration takes `tanh(m(s))`.
//! - **Twin critics and targets.** Both critics regress on
//!   `y = R + γ^k (1 − terminated) (min_j Q'_j(s', u') − α log π(u'|s'))`
//!   with `u' ~ π(·|s')` from the current actor; the loss is the summed
//!   **mean squared error** of the two. Target critics move by Polyak
//!   averaging with `tau` after every update; a time-limit truncation
//!   bootstraps.
//! - **Actor loss** `mean(α log π(ũ|s) − min_j Q_j(s, ũ))`, `ũ`
//!   reparameterized, so the gradient flows through the critics into the
//!   actor (only the actor's part of that gradient is used).
//! - **Automatic entropy tuning** (`tune_alpha`): `log α` is learned by
//!   minimizing `−log α · mean(log π(ũ|s) + H̄)` with its own Adam, `H̄ =
//!   target_entropy`, by default `−|A|` (the paper's choice).
//! - All three gradients come from the same minibatch and weights, so an
//!   update is `compute_gradients` then `apply_gradients`.
//!
//! Execution: [`SyncReplayOptimizer`] with uniform replay; by default one
//! minibatch per sampled env step.
//!
//! Learner metrics (`learner.*`): `critic_loss`, `actor_loss`, `alpha`,
//! `alpha_loss`, `entropy` (`−mean log π` of the replayed states, a sample
//! estimate), `mean_q`, `mean_target_q`, `mean_td_error` (mean
//! `|Q_1 − y|`), `critic_grad_norm` and `actor_grad_norm` (before
//! clipping), `num_updates` and `replay_buffer_size`.

use crate::actor_critic::MovableDevice;
use crate::ddpg::{
    adam_step, bellman_targets, check_replay, continuous_dims, critic_backward, critic_input, critic_input_taped,
    flat_params_of, load_params_of, no_network, obs_tensor, q_values, random_steps_per_evaluator, ActionBounds,
    CriticNet, ReplaySettings, CONTINUOUS_HIDDEN,
};
use crate::device::DeviceSpec;
use crate::nn;
use crate::{dispatch_continuous_dims, BuildError, EnvMaker};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, ConfigError, Validate};
use rlx::postprocessing::n_step_returns;
use rlx::{
    fields, EnvShards, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, RestartPolicy, SampleBatch,
    Space, SyncReplayOptimizer, Trainer,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The log standard deviation is squashed into `[LOG_STD_MIN, LOG_STD_MAX]`.
pub const LOG_STD_MIN: f32 = -5.0;
/// See [`LOG_STD_MIN`].
pub const LOG_STD_MAX: f32 = 2.0;

/// SAC's configuration. Every key is optional in `--config`; unknown keys
/// are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct SacConfig {
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
    /// Adam learning rate of `log α`.
    pub alpha_lr: f64,
    /// Discount γ.
    pub gamma: f64,
    /// Polyak coefficient τ of the target critics: `θ' ← τ θ + (1 − τ) θ'`.
    pub tau: f64,
    /// Rewards summed into each transition's return before bootstrapping.
    pub n_step: usize,
    /// The entropy temperature α at the start (fixed if `tune_alpha` is
    /// false).
    pub initial_alpha: f64,
    /// Learn α so that the policy's entropy tracks `target_entropy`.
    pub tune_alpha: bool,
    /// The entropy α is tuned towards; `null` is `−(action dimensions)`.
    pub target_entropy: Option<f64>,
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

impl Default for SacConfig {
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
            alpha_lr: 1e-3,
            gamma: 0.99,
            tau: 0.005,
            n_step: 1,
            initial_alpha: 1.0,
            tune_alpha: true,
            target_entropy: None,
            grad_clip: None,
            env_config: serde_json::Value::Null,
            seed: 0,
            device: DeviceSpec::Cpu,
            restart: RestartPolicy::default(),
            env_shards: EnvShards::default(),
        }
    }
}

impl Validate for SacConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.device.check_available()?;
        check_replay(&ReplaySettings::from(self))?;
        for (key, lr) in [("actor_lr", self.actor_lr), ("critic_lr", self.critic_lr), ("alpha_lr", self.alpha_lr)] {
            check(key, lr, lr > 0.0 && lr.is_finite(), "must be > 0")?;
        }
        check("gamma", self.gamma, (0.0..=1.0).contains(&self.gamma), "must be in [0, 1]")?;
        check("tau", self.tau, self.tau > 0.0 && self.tau <= 1.0, "must be in (0, 1]")?;
        let a = self.initial_alpha;
        check("initial_alpha", a, a > 0.0 && a.is_finite(), "must be > 0")?;
        if let Some(h) = self.target_entropy {
            check("target_entropy", h, h.is_finite(), "must be a finite number or null")?;
        }
        if let Some(c) = self.grad_clip {
            check("grad_clip", c, c > 0.0, "must be > 0 or null")?;
        }
        self.restart.validate("restart")
    }
}

impl From<&SacConfig> for ReplaySettings {
    fn from(c: &SacConfig) -> Self {
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

/// The Gaussian actor: a 2×`H` ReLU torso, then a mean head and a
/// (pre-squash) log-standard-deviation head, `A` outputs each. The mean
/// head comes first because dfdx's `SplitInto` hands the torso's tape to
/// its first output.
pub type GaussianActor<const O: usize, const A: usize, const H: usize = CONTINUOUS_HIDDEN> =
    ((Linear<O, H>, ReLU, Linear<H, H>, ReLU), SplitInto<(Linear<H, A>, Linear<H, A>)>);
/// [`GaussianActor`] built on device `D`.
type ActorNet<const O: usize, const A: usize, const H: usize, D> = (
    (modules::Linear<O, H, f32, D>, modules::ReLU, modules::Linear<H, H, f32, D>, modules::ReLU),
    SplitInto<(modules::Linear<H, A, f32, D>, modules::Linear<H, A, f32, D>)>,
);

/// `LOG_STD_MIN + (tanh(raw) + 1)/2 · (LOG_STD_MAX − LOG_STD_MIN)`.
fn squash_log_std(raw: f32) -> f32 {
    LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (raw.tanh() + 1.0)
}

/// Normalized actions `[n, A]` and their log-densities `[n]`.
type SquashedSample<const A: usize, D, T> = (Tensor<(usize, Const<A>), f32, D, T>, Tensor<(usize,), f32, D, T>);

/// A reparameterized sample of the squashed Gaussian and its log-density.
///
/// # Shapes
/// `mean`, `raw_log_std` and the standard-normal draws `eps` are `[n, A]`;
/// returns the normalized action `tanh(mean + σ ε)` (`[n, A]`) and
/// `log π` (`[n]`), both on `mean`'s tape (`T` = `NoneTape` for targets).
fn squashed_sample<const A: usize, D: Device<f32>, T: Tape<f32, D> + Merge<T>>(
    dev: &D,
    mean: Tensor<(usize, Const<A>), f32, D, T>,
    raw_log_std: Tensor<(usize, Const<A>), f32, D, T>,
    eps: &[f32],
) -> SquashedSample<A, D, T> {
    let shape = *mean.shape();
    let half_range = 0.5 * (LOG_STD_MAX - LOG_STD_MIN);
    let log_std = (raw_log_std.tanh() + 1.0) * half_range + LOG_STD_MIN;
    let std = log_std.with_empty_tape().exp();
    let x = mean + std * dev.tensor_from_vec(eps.to_vec(), shape);
    let action = x.with_empty_tape().tanh();
    // log(1 − tanh² x) = 2 log 2 + z − 2 softplus(z) with z = −2x, and
    // softplus(z) = relu(z) + log(1 + exp(−|z|)).
    let z = x * -2.0;
    let softplus = z.with_empty_tape().relu() + (z.with_empty_tape().abs().negate().exp() + 1.0).ln();
    let log_det = (z - softplus * 2.0) + 2.0 * std::f32::consts::LN_2;
    // log N(x; m, σ) = −ε²/2 − log σ − log(2π)/2, as x = m + σ ε.
    let half_log_2pi = 0.5 * (2.0 * std::f32::consts::PI).ln();
    let gauss: Vec<f32> = eps.iter().map(|e| -0.5 * e * e - half_log_2pi).collect();
    let logp = (log_std.negate() - log_det) + dev.tensor_from_vec(gauss, shape);
    (action, logp.sum::<(usize,), Axis<1>>())
}

/// A SAC policy for `O`-dimensional observations and `A`-dimensional
/// actions (`I = A + O`) on device `D`: the Gaussian actor, twin critics and
/// their targets, `log α`, three Adams.
pub struct SacPolicy<
    const O: usize,
    const A: usize,
    const I: usize,
    D: Device<f32> = Cpu,
    const H: usize = CONTINUOUS_HIDDEN,
> {
    cfg: SacConfig,
    dev: D,
    actor: ActorNet<O, A, H, D>,
    critics: Vec<CriticNet<I, H, D>>,
    target_critics: Vec<CriticNet<I, H, D>>,
    log_alpha: f32,
    target_entropy: f32,
    actor_adam: nn::Adam,
    critic_adam: nn::Adam,
    alpha_adam: nn::Adam,
    bounds: ActionBounds,
    rng: ChaCha8Rng,
    /// This evaluator's share of `random_timesteps`.
    random_steps: u64,
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
    observation_space: Space,
    action_space: Space,
}

// SAFETY: as for `ActorCriticPolicy` (see the argument there): the public
// constructors build the device, no method hands out a clone of it or of a
// tensor, so sending the policy sends every clone of its device handle; the
// other fields are plain data.
unsafe impl<const O: usize, const A: usize, const I: usize, D: MovableDevice, const H: usize> Send
    for SacPolicy<O, A, I, D, H>
{
}

impl<const O: usize, const A: usize, const I: usize, const H: usize> SacPolicy<O, A, I, Cpu, H> {
    /// A policy on the CPU. Initial weights depend only on `cfg.seed`;
    /// action sampling uses `rng_seed`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] unless the action space is a bounded
    /// `Box`.
    pub fn new(
        cfg: SacConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = Cpu::seed_from_u64(cfg.seed);
        Self::on_device(dev, cfg, observation_space, action_space, rng_seed)
    }
}

#[cfg(feature = "cuda")]
impl<const O: usize, const A: usize, const I: usize, const H: usize> SacPolicy<O, A, I, Cuda, H> {
    /// A policy on CUDA device `ordinal`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] if the device cannot be opened or the
    /// action space is not a bounded `Box`.
    pub fn on_cuda(
        ordinal: usize,
        cfg: SacConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = crate::device::open_cuda(ordinal, cfg.seed)?;
        Self::on_device(dev, cfg, observation_space, action_space, rng_seed)
    }
}

impl<const O: usize, const A: usize, const I: usize, D: Device<f32>, const H: usize> SacPolicy<O, A, I, D, H> {
    fn on_device(
        dev: D,
        cfg: SacConfig,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        assert_eq!(I, O + A, "the critic input is [action, observation]");
        let bounds = ActionBounds::new(&action_space, "SAC")?;
        let actor = ActorNet::<O, A, H, D>::build(&dev);
        let critics: Vec<_> = (0..2).map(|_| CriticNet::<I, H, D>::build(&dev)).collect();
        let critic_params = critics.iter().map(|c| c.num_trainable_params()).sum();
        Ok(Self {
            actor_adam: nn::Adam::new(actor.num_trainable_params(), cfg.actor_lr as f32, 1e-8),
            critic_adam: nn::Adam::new(critic_params, cfg.critic_lr as f32, 1e-8),
            alpha_adam: nn::Adam::new(1, cfg.alpha_lr as f32, 1e-8),
            log_alpha: (cfg.initial_alpha as f32).ln(),
            target_entropy: cfg.target_entropy.map_or(-(A as f32), |h| h as f32),
            random_steps: random_steps_per_evaluator(cfg.random_timesteps, cfg.num_workers),
            cfg,
            target_critics: critics.clone(),
            actor,
            critics,
            dev,
            bounds,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            steps_explored: 0,
            observation_space,
            action_space,
        })
    }

    /// The entropy temperature α now.
    pub fn alpha(&self) -> f32 {
        self.log_alpha.exp()
    }

    fn num_actor_params(&self) -> usize {
        self.actor.num_trainable_params()
    }

    /// `n · A` standard-normal draws.
    fn normal(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.rng.sample(StandardNormal)).collect()
    }

    /// The target `y = R + γ^k (1 − terminated) (min_j Q'_j(s', u') − α log
    /// π(u'|s'))` of every row, `u' ~ π(·|s')`.
    fn td_targets(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let new_obs = batch.f32(fields::NEW_OBS)?;
        let (mean, raw) = self.actor.forward(obs_tensor::<O, D>(&self.dev, new_obs)?);
        let eps = self.normal(mean.shape().0 * A);
        let (u, logp) = squashed_sample(&self.dev, mean, raw, &eps);
        let x = critic_input::<O, A, I, D>(&self.dev, &u.as_vec(), new_obs)?;
        let (_, q_min) = q_values(&self.target_critics, &x);
        let alpha = self.alpha();
        let soft: Vec<f32> = q_min.iter().zip(logp.as_vec()).map(|(q, lp)| q - alpha * lp).collect();
        bellman_targets(batch, &soft)
    }

    /// The critics' summed MSE gradient on `batch` (critics' layout).
    fn critic_gradient(&mut self, batch: &SampleBatch, stats: &mut LearnerStats) -> Result<Vec<f32>, PolicyError> {
        let targets = self.td_targets(batch)?;
        let obs = batch.f32(fields::OBS)?;
        let u = self.bounds.to_normalized(batch.f32(fields::ACTIONS)?);
        let x = critic_input::<O, A, I, D>(&self.dev, &u, obs)?;
        critic_backward(&self.dev, &self.critics, x, &targets, stats)
    }

    /// The actor loss `mean(α log π(ũ|s) − min_j Q_j(s, ũ))` and its
    /// gradient (actor's layout), and the gradient of the temperature loss
    /// `−log α · mean(log π(ũ|s) + H̄)` with respect to `log α`.
    fn actor_gradient(
        &mut self,
        batch: &SampleBatch,
        stats: &mut LearnerStats,
    ) -> Result<(Vec<f32>, f32), PolicyError> {
        let obs = obs_tensor::<O, D>(&self.dev, batch.f32(fields::OBS)?)?;
        let n = obs.shape().0;
        let eps = self.normal(n * A);
        let (mean, raw) = self.actor.forward(obs.clone().traced(self.actor.alloc_grads()));
        let (u, logp) = squashed_sample(&self.dev, mean, raw, &eps);
        let logp_host = logp.as_vec();
        let q1 = self.critics[0].forward(critic_input_taped::<O, A, I, D>(u.with_empty_tape(), obs.clone()));
        let q2 = self.critics[1].forward(critic_input_taped::<O, A, I, D>(u, obs));
        let q = q1.minimum(q2).reshape_like(&(n,));
        let alpha = self.alpha();
        let loss = (logp * alpha - q).mean();
        let value = loss.as_vec()[0];
        if !value.is_finite() {
            return Err(PolicyError::NonFinite("actor loss".into()));
        }
        let grads = loss.backward();
        let mean_logp = logp_host.iter().map(|&l| l as f64).sum::<f64>() / n.max(1) as f64;
        let alpha_grad = if self.cfg.tune_alpha { -(mean_logp as f32 + self.target_entropy) } else { 0.0 };
        stats.set("actor_loss", value as f64);
        stats.set("entropy", -mean_logp);
        stats.set("alpha", alpha as f64);
        stats.set("alpha_loss", -(self.log_alpha as f64) * (mean_logp + self.target_entropy as f64));
        Ok((nn::flat_grads(&self.actor, &grads), alpha_grad))
    }

    /// Applies a gradient in [`get_weights`](PolicyGraph::get_weights)'s
    /// layout, then moves the target critics.
    fn step(&mut self, grad: &mut [f32], stats: &mut LearnerStats) -> Result<(), PolicyError> {
        let na = self.num_actor_params();
        let (actor_grad, rest) = grad.split_at_mut(na);
        let (critic_grad, alpha_grad) = rest.split_at_mut(self.critic_adam.num_params());
        let mut params = flat_params_of(&self.critics);
        let norm = adam_step(&mut self.critic_adam, &mut params, critic_grad, self.cfg.grad_clip)?;
        load_params_of(&mut self.critics, &params)?;
        stats.set("critic_grad_norm", norm as f64);
        let mut params = nn::flat_params(&self.actor);
        let norm = adam_step(&mut self.actor_adam, &mut params, actor_grad, self.cfg.grad_clip)?;
        nn::load_params(&mut self.actor, &params)?;
        stats.set("actor_grad_norm", norm as f64);
        if self.cfg.tune_alpha {
            let mut log_alpha = [self.log_alpha];
            self.alpha_adam.update(&mut log_alpha, alpha_grad)?;
            self.log_alpha = log_alpha[0];
        }
        for (target, online) in self.target_critics.iter_mut().zip(&self.critics) {
            nn::soft_update(target, online, self.cfg.tau as f32)?;
        }
        Ok(())
    }

    /// The full gradient (actor, critics, `log α`) on `batch`.
    fn gradient(&mut self, batch: &SampleBatch, stats: &mut LearnerStats) -> Result<Vec<f32>, PolicyError> {
        let critic_grad = self.critic_gradient(batch, stats)?;
        let (mut grad, alpha_grad) = self.actor_gradient(batch, stats)?;
        grad.extend(critic_grad);
        grad.push(alpha_grad);
        Ok(grad)
    }

    fn num_params(&self) -> usize {
        self.num_actor_params() + self.critic_adam.num_params() + 1
    }
}

/// What [`SacPolicy`] saves besides its weights.
#[derive(Serialize, Deserialize)]
struct SavedState {
    actor_adam: nn::Adam,
    critic_adam: nn::Adam,
    alpha_adam: nn::Adam,
    rng: ChaCha8Rng,
    target_critics: Vec<f32>,
    steps_explored: u64,
}

impl<const O: usize, const A: usize, const I: usize, D: Device<f32>, const H: usize> PolicyGraph
    for SacPolicy<O, A, I, D, H>
where
    Self: Send,
{
    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    /// When exploring, uniformly random actions for this evaluator's share
    /// of `random_timesteps`, then samples of the squashed Gaussian;
    /// otherwise `tanh(m(s))`. In env units.
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let (mean, raw) = self.actor.forward(obs_tensor::<O, D>(&self.dev, obs)?);
        let (mut u, raw) = (mean.as_vec(), raw.as_vec());
        if explore {
            for (row, raw) in u.chunks_exact_mut(A).zip(raw.chunks_exact(A)) {
                let random = self.steps_explored < self.random_steps;
                for (x, &r) in row.iter_mut().zip(raw) {
                    *x = if random {
                        // Uniform after the tanh below: draw the squashed
                        // value and take it back through atanh.
                        let v: f32 = self.rng.gen_range(-0.999_999..0.999_999);
                        v.atanh()
                    } else {
                        let eps: f32 = self.rng.sample(StandardNormal);
                        *x + squash_log_std(r).exp() * eps
                    };
                }
                self.steps_explored += 1;
            }
        }
        u.iter_mut().for_each(|x| *x = x.tanh());
        *out = SampleBatch::new();
        out.insert_f32(fields::ACTIONS, self.bounds.to_env(&u), A)?;
        Ok(())
    }

    /// n-step returns and each row's bootstrap discount.
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(n_step_returns(traj, self.cfg.n_step, self.cfg.gamma as f32)?)
    }

    /// One update of the critics, the actor and α on the (replayed) batch.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        let mut grad = self.gradient(batch, &mut stats)?;
        self.step(&mut grad, &mut stats)?;
        Ok(stats)
    }

    /// The gradients of the actor, the critics and `log α`, in the weights'
    /// layout.
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let mut stats = LearnerStats::default();
        let grad = self.gradient(batch, &mut stats)?;
        stats.set("grad_norm", rlx::policy::global_norm(&grad));
        Ok((grad, stats))
    }

    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        let expected = self.num_params();
        if grads.len() != expected {
            return Err(PolicyError::WrongLength { what: "gradients", expected, got: grads.len() });
        }
        self.step(&mut grads.to_vec(), &mut LearnerStats::default())
    }

    /// The actor's parameters, then each critic's, then `log α`.
    fn get_weights(&self) -> FlatWeights {
        let mut w = nn::flat_params(&self.actor);
        w.extend(flat_params_of(&self.critics));
        w.push(self.log_alpha);
        w
    }

    /// Sets the online networks and the target critics alike.
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        let expected = self.num_params();
        if weights.len() != expected {
            return Err(PolicyError::WrongLength { what: "weights", expected, got: weights.len() });
        }
        let (actor, rest) = weights.split_at(self.num_actor_params());
        let (critics, log_alpha) = rest.split_at(rest.len() - 1);
        nn::load_params(&mut self.actor, actor)?;
        load_params_of(&mut self.critics, critics)?;
        self.target_critics = self.critics.clone();
        self.log_alpha = log_alpha[0];
        Ok(())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        let saved = SavedState {
            actor_adam: self.actor_adam.clone(),
            critic_adam: self.critic_adam.clone(),
            alpha_adam: self.alpha_adam.clone(),
            rng: self.rng.clone(),
            target_critics: flat_params_of(&self.target_critics),
            steps_explored: self.steps_explored,
        };
        rlx::codec::encode_value(&saved).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let saved: SavedState = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a saved state of this policy: {e}")))?;
        let (na, nc) = (self.num_actor_params(), self.critic_adam.num_params());
        if saved.actor_adam.num_params() != na
            || saved.critic_adam.num_params() != nc
            || saved.target_critics.len() != nc
            || saved.alpha_adam.num_params() != 1
        {
            return Err(PolicyError::Other(format!(
                "the saved state is for other networks (this policy has {na} actor and {nc} critic parameters)"
            )));
        }
        load_params_of(&mut self.target_critics, &saved.target_critics)?;
        (self.actor_adam, self.critic_adam, self.alpha_adam) = (saved.actor_adam, saved.critic_adam, saved.alpha_adam);
        (self.rng, self.steps_explored) = (saved.rng, saved.steps_explored);
        Ok(())
    }
}

/// A SAC policy for the given spaces on the config's device.
///
/// # Errors
/// [`BuildError::Unsupported`] unless both spaces are `Box`es (the action
/// space bounded) with a compiled network size, or for a device this build
/// or machine lacks.
pub fn make_policy(
    cfg: &SacConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (obs_dim, action_dim) = continuous_dims("SAC", observation_space, action_space)?;
    let (o, a, cfg) = (observation_space.clone(), action_space.clone(), cfg.clone());
    dispatch_continuous_dims!(
        obs_dim,
        action_dim,
        |OBS, ACT, IN| build_on::<OBS, ACT, IN>(cfg, o, a, rng_seed),
        Err(no_network("SAC", obs_dim, action_dim))
    )
}

fn build_on<const O: usize, const A: usize, const I: usize>(
    cfg: SacConfig,
    o: Space,
    a: Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    match cfg.device {
        DeviceSpec::Cpu => Ok(Box::new(SacPolicy::<O, A, I>::new(cfg, o, a, rng_seed)?)),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(n) => Ok(Box::new(SacPolicy::<O, A, I, Cuda>::on_cuda(n, cfg, o, a, rng_seed)?)),
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
pub async fn build(make_env: EnvMaker, cfg: SacConfig) -> Result<Trainer, BuildError> {
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
    use rlx::postprocessing::N_STEP_DISCOUNTS;

    type Policy = SacPolicy<3, 1, 4>;

    fn spaces() -> (Space, Space) {
        (Space::uniform_box(-1.0, 1.0, vec![3]).unwrap(), Space::uniform_box(-2.0, 2.0, vec![1]).unwrap())
    }

    fn policy(cfg: SacConfig) -> Policy {
        let (o, a) = spaces();
        Policy::new(cfg, o, a, 0).unwrap()
    }

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

    #[test]
    fn squashed_gaussian_log_prob_matches_the_direct_formula() {
        let dev = Cpu::default();
        let mean = vec![0.3f32, -1.2, 0.0, 2.5, -0.7, 0.9];
        let raw = vec![-0.5f32, 0.2, 1.5, -2.0, 0.0, 0.7];
        let eps = vec![0.4f32, -1.1, 0.05, 1.8, -0.3, 2.2];
        let (u, logp) = squashed_sample(
            &dev,
            dev.tensor_from_vec(mean.clone(), (3, Const::<2>)),
            dev.tensor_from_vec(raw.clone(), (3, Const::<2>)),
            &eps,
        );
        let (u, logp) = (u.as_vec(), logp.as_vec());
        for (row, &logp) in logp.iter().enumerate() {
            let mut expected = 0.0f64;
            for j in 0..2 {
                let i = row * 2 + j;
                let log_std = squash_log_std(raw[i]) as f64;
                let std = log_std.exp();
                let x = mean[i] as f64 + std * eps[i] as f64;
                let a = x.tanh();
                assert!((u[i] as f64 - a).abs() < 1e-5);
                // The Gaussian density at x, then the change of variables a = tanh(x).
                let gauss = -((x - mean[i] as f64).powi(2)) / (2.0 * std * std)
                    - log_std
                    - 0.5 * (2.0 * std::f64::consts::PI).ln();
                expected += gauss - (1.0 - a * a).ln();
            }
            assert!((logp as f64 - expected).abs() < 1e-3, "row {row}: {logp} vs {expected}");
        }
        // A large pre-squash value stays finite (the naive log(1 − a²) is −inf).
        let (_, logp) = squashed_sample(
            &dev,
            dev.tensor_from_vec(vec![30.0f32], (1, Const::<1>)),
            dev.tensor_from_vec(vec![0.0f32], (1, Const::<1>)),
            &[0.0],
        );
        assert!(logp.as_vec()[0].is_finite());
    }

    #[test]
    fn targets_are_soft_bellman_with_the_min_of_twin_targets() {
        let mut p = policy(SacConfig { initial_alpha: 0.5, ..SacConfig::default() });
        let b = batch();
        let new_obs = b.f32(fields::NEW_OBS).unwrap().to_vec();
        let mut rng = p.rng.clone();
        let eps: Vec<f32> = (0..4).map(|_| rng.sample(StandardNormal)).collect();
        let (mean, raw) = p.actor.forward(obs_tensor::<3, Cpu>(&p.dev, &new_obs).unwrap());
        let (mean, raw) = (mean.as_vec(), raw.as_vec());
        let r = b.f32(fields::REWARDS).unwrap().to_vec();
        let targets = p.td_targets(&b).unwrap();
        for i in 0..4 {
            let (log_std, x) = (squash_log_std(raw[i]), mean[i] + squash_log_std(raw[i]).exp() * eps[i]);
            let a = x.tanh();
            let logp = -0.5 * eps[i] * eps[i] - log_std - 0.5 * (2.0 * std::f32::consts::PI).ln() - (1.0 - a * a).ln();
            let xin = critic_input::<3, 1, 4, Cpu>(&p.dev, &[a], &new_obs[i * 3..i * 3 + 3]).unwrap();
            let q1 = p.target_critics[0].forward(xin.clone()).as_vec()[0];
            let q2 = p.target_critics[1].forward(xin).as_vec()[0];
            let next = if i == 2 { 0.0 } else { 0.99 * (q1.min(q2) - 0.5 * logp) };
            assert!((targets[i] - (r[i] + next)).abs() < 1e-4, "row {i}: {} vs {}", targets[i], r[i] + next);
        }
    }

    #[test]
    fn alpha_tracks_the_target_entropy() {
        let b = batch();
        for (target_entropy, rises) in [(10.0, true), (-10.0, false)] {
            let mut p = policy(SacConfig { target_entropy: Some(target_entropy), ..SacConfig::default() });
            let before = p.alpha();
            let stats = p.learn_on_batch(&b).unwrap();
            assert_eq!(p.alpha() > before, rises, "target entropy {target_entropy}: {stats:?}");
            assert_eq!(stats.get("alpha"), Some(before as f64));
        }
        let mut fixed = policy(SacConfig { tune_alpha: false, initial_alpha: 0.2, ..SacConfig::default() });
        fixed.learn_on_batch(&b).unwrap();
        assert!((fixed.alpha() - 0.2).abs() < 1e-6);
    }

    #[test]
    fn learning_lowers_the_actor_loss_and_moves_targets_by_tau() {
        let mut p = policy(SacConfig { actor_lr: 1e-2, critic_lr: 1e-2, tau: 0.1, ..SacConfig::default() });
        let b = batch();
        let target0 = flat_params_of(&p.target_critics);
        let first = p.learn_on_batch(&b).unwrap();
        let (critics, targets) = (flat_params_of(&p.critics), flat_params_of(&p.target_critics));
        for i in 0..critics.len() {
            assert!((targets[i] - (0.1 * critics[i] + 0.9 * target0[i])).abs() < 1e-6, "param {i}");
        }
        let mut last = first.clone();
        for _ in 0..50 {
            last = p.learn_on_batch(&b).unwrap();
        }
        assert!(last.get("actor_loss").unwrap() < first.get("actor_loss").unwrap(), "{first:?} -> {last:?}");
    }

    #[test]
    fn gradient_split_equals_learn_step_and_state_round_trips() {
        let (mut x, mut y) = (policy(SacConfig::default()), policy(SacConfig::default()));
        let b = batch();
        for _ in 0..2 {
            let (g, _) = x.compute_gradients(&b).unwrap();
            x.apply_gradients(&g).unwrap();
            y.learn_on_batch(&b).unwrap();
            assert_eq!(x.get_weights(), y.get_weights());
        }
        let (g, _) = x.compute_gradients(&b).unwrap();
        assert!(x.apply_gradients(&g[1..]).is_err());

        let mut z = Policy::new(SacConfig::default(), spaces().0, spaces().1, 7).unwrap();
        z.set_weights(&y.get_weights()).unwrap();
        z.load_state(&y.save_state().unwrap()).unwrap();
        assert_eq!(z.alpha(), y.alpha());
        y.learn_on_batch(&b).unwrap();
        z.learn_on_batch(&b).unwrap();
        assert_eq!(y.get_weights(), z.get_weights(), "a restored policy continues exactly");
        assert!(z.load_state(b"junk").is_err());
    }

    #[test]
    fn acting_stays_in_bounds_and_bad_configs_name_the_key() {
        let mut p = policy(SacConfig { random_timesteps: 0, ..SacConfig::default() });
        let obs = vec![0.1f32; 3 * 20];
        let mut out = SampleBatch::new();
        p.compute_actions(&obs, false, &mut out).unwrap();
        let greedy = out.f32(fields::ACTIONS).unwrap().to_vec();
        assert!(greedy.iter().all(|&a| a == greedy[0]));
        p.compute_actions(&obs, true, &mut out).unwrap();
        let sampled = out.f32(fields::ACTIONS).unwrap();
        assert!(sampled.iter().all(|a| (-2.0..=2.0).contains(a)) && sampled.iter().any(|&a| a != sampled[0]));

        for (key, value) in [
            ("initial_alpha", serde_json::json!(0.0)),
            ("alpha_lr", serde_json::json!(-1.0)),
            ("tau", serde_json::json!(2.0)),
            ("learning_starts", serde_json::json!(1_000_000)),
        ] {
            let err = rlx::config::merge_json(&SacConfig::default(), &serde_json::json!({ key: value })).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
        let (o, _) = spaces();
        assert!(make_policy(&SacConfig::default(), &o, &Space::discrete(3), 0).is_err());
    }
}
