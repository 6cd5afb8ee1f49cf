//! # DreamerV3: a world model, and behaviour learned in imagination
//!
//! Hafner, Pasukonis, Ba and Lillicrap, "Mastering Diverse Domains
//! through World Models", 2023 (arXiv:2301.04104). The agent learns a
//! model of its env from replayed episodes ([`super::world_model`]) and
//! trains its actor and critic on trajectories the model imagines, never
//! on the env's own steps: fewer env steps for the same return, paid for
//! with computation.
//!
//! Every update, on `batch_size_B` sequences of `batch_length_T` steps
//! drawn from the [`EpisodeReplay`]:
//!
//! 1. **World model.** Its loss on the sequences; the posterior state of
//!    every step is kept.
//! 2. **Imagination.** From each of those `B · T` states the model rolls
//!    `horizon_H` steps forward with the prior and the actor's sampled
//!    actions, predicting rewards `r̂_k` and continue flags `ĉ_k`.
//! 3. **Critic.** λ-returns ([`lambda_returns`]) of the imagined
//!    trajectories are its targets, as two-hot categoricals over symlog
//!    bins; a second cross-entropy pulls it towards a slow copy of itself
//!    (an average with decay `critic_ema_decay`):
//!    `L_critic = −Σ_k w_k (ln p_ψ(R^λ_k | s_k) + ln p_ψ(v_slow(s_k) | s_k))`.
//! 4. **Actor.** Returns scaled by their range ([`ReturnScale`]), with an
//!    entropy bonus. Discrete actions learn by REINFORCE on the advantages:
//!    `L_actor = −Σ_k w_k (sg((R^λ_k − v(s_k)) / max(1, S)) ln π(a_k | s_k) + η H[π(· | s_k)])`;
//!    continuous ones through the model (the paper's choice for them, and
//!    RLlib's): their actions are reparameterized samples, imagination is
//!    recorded on a tape, and the actor ascends the advantages themselves,
//!    `L_actor = −Σ_k w_k ((R^λ_k − v(s_k)) / max(1, S) + η H[π(· | sg(s_k))])`.
//!    As in the paper's code, the actor sees each imagined state as a
//!    constant (`π(· | sg(s_k))`: the gradient reaches it through the
//!    rewards and values its actions lead to, not through its own
//!    later inputs), and an action beyond the box is scaled back onto it
//!    by a constant, `a / sg(max(1, |a|))`, which keeps its gradient where
//!    a clip would zero it.
//!
//! `ĉ_k` is the continue head's probability, a constant of the pass, and
//! `w_k = Π_{i ≤ k} ĉ_i` weighs each imagined step by the chance that the
//! episode is still going (the first flag is the real one).
//!
//! Acting filters: the policy's recurrent state is `[h, z, a, 1]` (the
//! model state, the last action, and a flag that is 0 only in the zero
//! state an episode starts from), so evaluators carry it from step to step
//! and the replay stitches fragments into episodes by it.
//!
//! Execution: [`SyncReplayOptimizer`] over the [`EpisodeReplay`], with
//! `training_ratio` replayed rows per env step (RLlib's meaning: 1024 with
//! `B · T = 1024` is one update per env step).
//!
//! Learner metrics (`learner.*`): the world model's `world_model_loss`,
//! `decoder_loss`, `reward_loss`, `continue_loss`, `kl` and
//! `dynamics_loss` (the KL clipped at the free nats); `actor_loss`,
//! `critic_loss`, `entropy`, `return_scale`, `imagined_return`,
//! `imagined_reward`; each network's `*_grad_norm`; and the seconds an
//! update spends on each part, `world_model_s`, `imagination_s` and
//! `behaviour_s` (the actor's and critic's losses).

use super::episode_replay::{EpisodeReplay, IS_FIRST, PREV_ACTIONS};
use super::math::{lambda_returns, mode_one_hot, sample_one_hot, symlog, unimix, PerTrajectory, ReturnScale, TwoHot};
use super::networks::DenseStack;
use super::world_model::{Observed, Sequences, Sizes, Starts, WorldModel, UNIMIX};
use crate::common::build_context::{BuildContext, PolicyMaker};
use crate::common::deep_policy::{join_on_cpu, DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::distributions::softmax_rows;
use crate::common::sampling::spawn_evaluators;
use crate::common::sections::{limits, Sampling};
use crate::error::BuildError;
use crate::model::device::{on_device, DeviceSpec, NetDevice, OnDevice};
use crate::model::{Input, Matrix, Params, Taped};
use crate::off_policy::core::ActionBounds;
use dfdx::prelude::*;
use rand::Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, check_count, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::export::{ActionHead, Layer, PolicyExport, Recurrent};
use rlx::optimizer::SyncReplayConfig;
use rlx::{fields, Column, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space};
use rlx::{SyncReplayOptimizer, Trainer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

// ---------------------------------------------------------------- config

/// The model sizes of RLlib's DreamerV3 (`model_size`): the paper's XS to
/// XL (its table B) and RLlib's smaller debugging sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelSize {
    /// 16 units, 4 × 4 latents.
    #[serde(rename = "nano")]
    Nano,
    /// 32 units, 8 × 8 latents.
    #[serde(rename = "micro")]
    Micro,
    /// 64 units, 16 × 16 latents.
    #[serde(rename = "mini")]
    Mini,
    /// 128 units, 32 × 32 latents.
    XXS,
    /// 256 units, one hidden layer, a GRU of 256.
    XS,
    /// 512 units, two layers.
    S,
    /// 640 units, three layers, a GRU of 1024.
    M,
    /// 768 units, four layers, a GRU of 2048.
    L,
    /// 1024 units, five layers, a GRU of 4096.
    XL,
}

impl ModelSize {
    /// The widths of each size (RLlib's table: `rllib/algorithms/dreamerv3/utils`).
    pub fn sizes(self) -> Sizes {
        let (units, layers, gru_units, latent, cnn_depth) = match self {
            Self::Nano => (16, 1, 16, 4, 2),
            Self::Micro => (32, 1, 32, 8, 4),
            Self::Mini => (64, 1, 64, 16, 8),
            Self::XXS => (128, 1, 128, 32, 16),
            Self::XS => (256, 1, 256, 32, 24),
            Self::S => (512, 2, 512, 32, 32),
            Self::M => (640, 3, 1024, 32, 48),
            Self::L => (768, 4, 2048, 32, 64),
            Self::XL => (1024, 5, 4096, 32, 96),
        };
        Sizes { units, layers, gru_units, categoricals: latent, classes: latent, cnn_depth }
    }
}

/// DreamerV3's configuration; the keys RLlib's DreamerV3 has keep its
/// names. Every key is optional in `--config`; unknown keys are errors.
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct DreamerV3Config {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// The networks' size: `nano`, `micro`, `mini`, `XXS`, `XS`, `S`, `M`,
    /// `L` or `XL` (RLlib's names and widths).
    pub model_size: ModelSize,
    /// Replayed rows trained on per env step sampled: 1024 with `B · T =
    /// 1024` is one update per env step (RLlib's default; the paper's
    /// "replay ratio" of 512 counts differently).
    pub training_ratio: f64,
    /// Sequences per update, `B`.
    pub batch_size_B: usize,
    /// Steps of each sequence, `T`.
    pub batch_length_T: usize,
    /// Steps imagined from every state, `H`.
    pub horizon_H: usize,
    /// Discount γ of imagined returns.
    pub gamma: f64,
    /// λ of the λ-returns.
    pub gae_lambda: f64,
    /// η, the weight of the actor's entropy.
    pub entropy_scale: f64,
    /// Decay of the return scale's moving average.
    pub return_normalization_decay: f64,
    /// Decay of the slow critic's moving average of the critic's weights.
    pub critic_ema_decay: f64,
    /// Adam learning rate of the world model.
    pub world_model_lr: f64,
    /// Adam learning rate of the actor.
    pub actor_lr: f64,
    /// Adam learning rate of the critic.
    pub critic_lr: f64,
    /// Global gradient norm the world model's gradient is clipped to.
    pub world_model_grad_clip_by_global_norm: f64,
    /// Global gradient norm the critic's gradient is clipped to.
    pub critic_grad_clip_by_global_norm: f64,
    /// Global gradient norm the actor's gradient is clipped to.
    pub actor_grad_clip_by_global_norm: f64,
    /// Whether observations are symlog-squashed before the encoder (and
    /// as the decoder's target); `null`: yes unless they are images.
    pub symlog_obs: Option<bool>,
    /// Rows (observations) the episode replay holds; the oldest episodes
    /// leave first.
    pub buffer_size: usize,
    /// Rows stored before learning starts; `null` (the default): one
    /// batch, `batch_size_B × batch_length_T` rows, as RLlib samples before
    /// its first update.
    pub learning_starts: Option<usize>,
    /// Env steps of every env copy each evaluator samples per round.
    pub rollout_fragment_length: usize,
    /// Env steps sampled per training iteration (one line of results).
    pub timesteps_per_iteration: usize,
    /// Where the networks live: `"cpu"`, or `"cuda"` / `"cuda:N"`.
    pub device: DeviceSpec,
}

impl Default for DreamerV3Config {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            model_size: ModelSize::XS,
            training_ratio: 1024.0,
            batch_size_B: 16,
            batch_length_T: 64,
            horizon_H: 15,
            gamma: 0.997,
            gae_lambda: 0.95,
            entropy_scale: 3e-4,
            return_normalization_decay: 0.99,
            critic_ema_decay: 0.98,
            world_model_lr: 1e-4,
            actor_lr: 3e-5,
            critic_lr: 3e-5,
            world_model_grad_clip_by_global_norm: 1000.0,
            critic_grad_clip_by_global_norm: 100.0,
            actor_grad_clip_by_global_norm: 100.0,
            symlog_obs: None,
            buffer_size: 1_000_000,
            learning_starts: None,
            rollout_fragment_length: 1,
            timesteps_per_iteration: 1000,
            device: DeviceSpec::Cpu,
        }
    }
}

/// The most updates one sampled env step may ask for.
pub const MAX_UPDATES_PER_STEP: f64 = 1000.0;

impl Validate for DreamerV3Config {
    fn validate(&self) -> Result<(), ConfigError> {
        self.sampling.validate()?;
        check_count("batch_size_B", self.batch_size_B, 1, 1 << 16)?;
        check_count("batch_length_T", self.batch_length_T, 1, 1 << 16)?;
        check_count("horizon_H", self.horizon_H, 1, 10_000)?;
        let batch = self.batch_rows();
        let ratio = self.training_ratio;
        check("training_ratio", ratio, ratio > 0.0 && ratio.is_finite(), "must be > 0")?;
        check(
            "training_ratio",
            ratio,
            ratio / batch as f64 <= MAX_UPDATES_PER_STEP,
            &format!(
                "asks for more than {MAX_UPDATES_PER_STEP} updates per env step with batches of batch_size_B × \
                 batch_length_T = {batch} rows (training_ratio is replayed rows per env step)"
            ),
        )?;
        for (key, x) in [("gamma", self.gamma), ("gae_lambda", self.gae_lambda)] {
            check(key, x, (0.0..=1.0).contains(&x), "must be in [0, 1]")?;
        }
        for (key, x) in [
            ("return_normalization_decay", self.return_normalization_decay),
            ("critic_ema_decay", self.critic_ema_decay),
        ] {
            check(key, x, (0.0..1.0).contains(&x), "must be in [0, 1)")?;
        }
        check(
            "entropy_scale",
            self.entropy_scale,
            self.entropy_scale >= 0.0 && self.entropy_scale.is_finite(),
            "must be >= 0",
        )?;
        for (key, x) in [
            ("world_model_lr", self.world_model_lr),
            ("actor_lr", self.actor_lr),
            ("critic_lr", self.critic_lr),
            ("world_model_grad_clip_by_global_norm", self.world_model_grad_clip_by_global_norm),
            ("critic_grad_clip_by_global_norm", self.critic_grad_clip_by_global_norm),
            ("actor_grad_clip_by_global_norm", self.actor_grad_clip_by_global_norm),
        ] {
            check(key, x, x > 0.0 && x.is_finite(), "must be > 0")?;
        }
        check_count("buffer_size", self.buffer_size, 1, limits::MAX_BUFFER_SIZE)?;
        check(
            "buffer_size",
            self.buffer_size,
            self.buffer_size >= self.batch_length_T,
            &format!("must hold one sequence of batch_length_T = {} rows", self.batch_length_T),
        )?;
        let ls = self.learning_starts();
        let why = match self.learning_starts {
            Some(_) => "must be <= buffer_size (or learning never starts)".to_string(),
            None => format!(
                "(by default batch_size_B × batch_length_T = {batch} rows) must be <= buffer_size (or learning \
                 never starts): set learning_starts or a larger buffer_size"
            ),
        };
        check("learning_starts", ls, ls <= self.buffer_size, &why)?;
        check_count("rollout_fragment_length", self.rollout_fragment_length, 1, limits::MAX_BATCH_ROWS)?;
        check_count("timesteps_per_iteration", self.timesteps_per_iteration, 1, limits::MAX_BATCH_ROWS)?;
        self.device.check_available()
    }
}

impl DreamerV3Config {
    /// Rows in one update's batch: `batch_size_B × batch_length_T`.
    pub fn batch_rows(&self) -> usize {
        self.batch_size_B * self.batch_length_T
    }

    /// Rows stored before the first update: `learning_starts`, or one
    /// batch ([`batch_rows`](Self::batch_rows)).
    pub fn learning_starts(&self) -> usize {
        self.learning_starts.unwrap_or(self.batch_rows())
    }
}

algorithm_name!(DreamerV3Config, "DreamerV3");

// ---------------------------------------------------------------- policy

/// The env's actions as the model and the actor see them.
#[derive(Clone, Debug, PartialEq)]
enum Actions {
    /// `n` choices: one-hot inputs, a categorical actor.
    Discrete(usize),
    /// A box, normalized to `[−1, 1]`: a Gaussian actor with a `tanh` mean.
    Continuous(ActionBounds),
}

impl Actions {
    /// Values of one action as the model reads it.
    fn inputs(&self) -> usize {
        match self {
            Actions::Discrete(n) => *n,
            Actions::Continuous(b) => b.dim(),
        }
    }

    /// Outputs of the actor's head: logits, or means and pre-squash
    /// standard deviations.
    fn head(&self) -> usize {
        match self {
            Actions::Discrete(n) => *n,
            Actions::Continuous(b) => 2 * b.dim(),
        }
    }

    /// Stored env actions (an index, or env units) as model inputs.
    fn to_inputs(&self, raw: &[f32]) -> Vec<f32> {
        match self {
            Actions::Discrete(n) => {
                let mut out = vec![0.0; raw.len() * n];
                for (row, &a) in out.chunks_exact_mut(*n).zip(raw) {
                    row[(a.max(0.0) as usize).min(n - 1)] = 1.0;
                }
                out
            }
            Actions::Continuous(b) => b.to_normalized(raw),
        }
    }
}

/// The smallest standard deviation of a continuous action, and the range
/// above it: `σ = 0.1 + 0.9 · sigmoid(x + 2)` (the paper's bounds).
const STD_MIN: f32 = 0.1;

/// DreamerV3's part of the policy: the world model, actor and critic. The
/// weights are the world model's, the actor's, then the critic's; the
/// core's optimizers 0, 1 and 2 are theirs; the core's target copy holds
/// the slow critic.
pub struct Dreamer {
    cfg: DreamerV3Config,
    input: Input,
    symlog_obs: bool,
    actions: Actions,
    world: WorldModel,
    actor: DenseStack,
    critic: DenseStack,
    two_hot: TwoHot,
    scale: ReturnScale,
}

const WORLD: usize = 0;
const ACTOR: usize = 1;
const CRITIC: usize = 2;

impl Dreamer {
    /// Observation rows as the encoder reads them.
    fn features<'a>(&self, obs: impl Into<rlx::Values<'a>>) -> Result<Vec<f32>, PolicyError> {
        let mut x = self.input.encode_host(obs)?;
        if self.symlog_obs {
            x.iter_mut().for_each(|v| *v = symlog(*v));
        }
        Ok(x)
    }

    /// Width of the recurrent state: `[h, z, a, started]`.
    fn state_width(&self) -> usize {
        self.world.sizes().features() + self.actions.inputs() + 1
    }

    /// Actions from the actor's outputs `head`: the env's (an index, or
    /// in `[−1, 1]`) and the model's inputs. Greedy actions are the most
    /// probable class, or the Gaussian's mean.
    fn choose<D: NetDevice>(&self, head: Matrix<D>, explore: bool, rng: &mut impl Rng) -> (Vec<f32>, Vec<f32>) {
        match &self.actions {
            Actions::Discrete(k) => {
                let head = head.as_vec();
                let one_hot = if explore {
                    let probs = mixed_softmax(&head, *k);
                    sample_one_hot(&probs, *k, rng)
                } else {
                    // The most probable action is the largest logit's.
                    mode_one_hot(&head, *k)
                };
                let index: Vec<f32> =
                    one_hot.chunks_exact(*k).map(|o| o.iter().position(|&x| x == 1.0).unwrap_or(0) as f32).collect();
                (index, one_hot)
            }
            Actions::Continuous(b) => {
                let (mean, std) = gaussian(head, b.dim());
                let sample = if explore {
                    let eps = standard_normal(&std, rng);
                    mean + std * eps
                } else {
                    mean
                };
                let clipped = sample.clamp(-1.0, 1.0).as_vec();
                (clipped.clone(), clipped)
            }
        }
    }

    /// `ln π(a|s)` and the entropy of every row of a discrete actor's
    /// outputs `head`, for the actions `taken` (indices).
    fn log_prob_and_entropy<D: NetDevice>(
        &self,
        head: Matrix<D, Taped<D>>,
        taken: &[f32],
    ) -> (PerTrajectory<D, Taped<D>>, PerTrajectory<D, Taped<D>>) {
        let (shape, dev) = (*head.shape(), head.device().clone());
        let probs = unimix(head, UNIMIX);
        let log = probs.with_empty_tape().ln();
        let entropy = (log.with_empty_tape() * probs).sum::<(usize,), Axis<1>>().negate();
        let one_hot = dev.tensor_from_vec(self.actions.to_inputs(taken), shape);
        ((log * one_hot).sum::<(usize,), Axis<1>>(), entropy)
    }

    /// The sequences of a replayed batch (`B · T` rows, time-major).
    fn sequences(&self, batch: &SampleBatch) -> Result<Sequences, PolicyError> {
        let expected = self.cfg.batch_rows();
        if batch.len() != expected {
            return Err(PolicyError::WrongLength {
                what: "replayed rows (batch_size_B × batch_length_T)",
                expected,
                got: batch.len(),
            });
        }
        Ok(Sequences {
            x: self.features(batch.values(fields::OBS)?)?,
            prev_actions: self.actions.to_inputs(batch.f32(PREV_ACTIONS)?),
            rewards: batch.f32(fields::REWARDS)?.to_vec(),
            terminals: batch.f32(fields::TERMINATEDS)?.to_vec(),
            first: batch.f32(IS_FIRST)?.to_vec(),
            batch: self.cfg.batch_size_B,
        })
    }
}

/// `½ ln 2π`.
const HALF_LN_2PI: f32 = 0.918_938_5;

/// The mean `tanh(x_μ)` and standard deviation `σ_min + (1 − σ_min) ·
/// sigmoid(x_σ + 2)` of every row of a continuous actor's outputs `head`
/// (`[x_μ, x_σ]`, `dims` each).
fn gaussian<D: NetDevice, T: Tape<f32, D>>(head: Matrix<D, T>, dims: usize) -> (Matrix<D, T>, Matrix<D, T>) {
    let mean = head.with_empty_tape().slice((.., 0..dims)).tanh();
    let std = ((head.slice((.., dims..2 * dims)) + 2.0).sigmoid() * (1.0 - STD_MIN)) + STD_MIN;
    (mean, std)
}

/// The entropy of every row's diagonal Gaussian, from `ln σ`.
fn gaussian_entropy<D: NetDevice, T: Tape<f32, D>>(log_std: Matrix<D, T>) -> PerTrajectory<D, T> {
    let dims = log_std.shape().1 as f32;
    log_std.sum::<(usize,), Axis<1>>() + dims * (HALF_LN_2PI + 0.5)
}

/// Draws of `N(0, 1)` in the shape of `like`, as constants of the pass
/// (the reparameterization's `ε`).
fn standard_normal<D: NetDevice, T: Tape<f32, D>>(like: &Matrix<D, T>, rng: &mut impl Rng) -> Matrix<D> {
    let shape = *like.shape();
    let eps = (0..shape.0 * shape.1).map(|_| rng.sample(StandardNormal)).collect();
    like.device().tensor_from_vec(eps, shape)
}

/// The softmax of each row of `width` logits mixed with [`UNIMIX`] uniform.
fn mixed_softmax(logits: &[f32], width: usize) -> Vec<f32> {
    softmax_rows(logits, width).into_iter().map(|p| (1.0 - UNIMIX) * p + UNIMIX / width as f32).collect()
}

// ---------------------------------------------------------------- imagination and losses

/// Trajectories the world model imagined from every replayed state, step
/// after step (entry `k · n + i`), and their λ-returns.
struct Dream {
    /// `[h, z]` of steps `0 … H`.
    feats: Vec<f32>,
    /// The indices of the discrete actions taken at steps `0 … H − 1`,
    /// which REINFORCE reads (none for continuous actions).
    actions: Vec<f32>,
    /// The constants `1 / max(1, |a|)` that scaled each continuous
    /// action of steps `0 … H − 1` into the box (none for discrete ones).
    shrink: Vec<f32>,
    /// Predicted rewards and continue flags of steps `0 … H` (step 0's
    /// continue flag is the real one).
    rewards: Vec<f32>,
    continues: Vec<f32>,
    /// The critic's values of steps `0 … H`, the slow critic's of `0 … H − 1`.
    values: Vec<f32>,
    slow_values: Vec<f32>,
    /// λ-returns `R_k` and weights `w_k` of steps `0 … H − 1`.
    returns: Vec<f32>,
    weights: Vec<f32>,
    /// Trajectories.
    n: usize,
}

impl Dream {
    /// `w_k = Π_{i ≤ k} ĉ_i` of steps `0 … H − 1`.
    fn step_weights(&self, horizon: usize) -> Vec<f32> {
        let mut w = self.continues[..self.n].to_vec();
        for k in 1..horizon {
            let next: Vec<f32> =
                (0..self.n).map(|i| w[(k - 1) * self.n + i] * self.continues[k * self.n + i]).collect();
            w.extend(next);
        }
        w
    }
}

/// What the actor of continuous actions learns through: the λ-returns,
/// the critic's values and the actor's entropies of steps `0 … H − 1` on
/// the imagination's tape `T`, and the rest of that tape (the steps the
/// returns depend on).
struct Trace<D: NetDevice, T: Tape<f32, D>> {
    returns: Vec<PerTrajectory<D, T>>,
    values: Vec<PerTrajectory<D, T>>,
    entropy: Vec<PerTrajectory<D, T>>,
    rest: T,
}

impl Dreamer {
    /// Rolls the model `horizon_H` steps from `starts` with the actor's
    /// sampled actions, predicting every step's reward, continue flag and
    /// value, then the λ-returns. On the tape `T` (continuous actions) the
    /// rollout is recorded for the actor to learn through; without one
    /// (discrete actions, which learn by REINFORCE) it costs no gradient
    /// bookkeeping.
    fn imagine<D: NetDevice, T: Tape<f32, D>>(
        &self,
        core: &mut PolicyCore<D>,
        starts: &Starts,
    ) -> (Dream, Trace<D, T>) {
        self.imagine_holding(core, starts, None)
    }

    /// [`imagine`](Self::imagine), what it treats as constants (the states
    /// the actor sees, the actions' scale factors) taken from `held` if
    /// given: the objective is then a function of the actor's weights
    /// whose derivative is the tape's gradient, which finite differences
    /// can check.
    fn imagine_holding<D: NetDevice, T: Tape<f32, D>>(
        &self,
        core: &mut PolicyCore<D>,
        starts: &Starts,
        held: Option<&Dream>,
    ) -> (Dream, Trace<D, T>) {
        let (p, rng) = (&core.params, &mut core.rng);
        let dev = p.device().clone();
        let sizes = self.world.sizes();
        let (n, horizon, f) = (starts.terminals.len(), self.cfg.horizon_H, sizes.features());
        let mut h = dev.tensor_from_vec(starts.h.clone(), (n, sizes.gru_units)).retaped::<T>();
        let mut z = dev.tensor_from_vec(starts.z.clone(), (n, sizes.latent())).retaped::<T>();
        let mut dream = Dream {
            feats: Vec::with_capacity((horizon + 1) * n * f),
            actions: Vec::new(),
            shrink: Vec::new(),
            rewards: vec![0.0; n],
            continues: starts.terminals.iter().map(|d| 1.0 - d).collect(),
            values: Vec::new(),
            slow_values: Vec::new(),
            returns: Vec::new(),
            weights: Vec::new(),
            n,
        };
        let (mut steps, mut entropy, mut rest) = (Vec::with_capacity(horizon), Vec::with_capacity(horizon), None);
        let mut values = Vec::with_capacity(horizon);
        for k in 0..=horizon {
            let feat = (h.with_empty_tape(), z.with_empty_tape()).concat_along(Axis::<1>);
            let state = feat.as_vec();
            dream.feats.extend_from_slice(&state);
            let value = self.two_hot.predict(self.critic.forward_with(p, feat.with_empty_tape(), false));
            let value_now = value.as_vec();
            dream.values.extend_from_slice(&value_now);
            if k < horizon {
                // The actor's baseline; step 0's is a constant (a replayed state).
                values.push(if k == 0 {
                    dev.tensor_from_vec(value_now, (n,)).retaped::<T>()
                } else {
                    value.with_empty_tape()
                });
            }
            if k > 0 {
                // Step 0's reward is not used and its flag is the replayed one.
                let (reward, cont) = self.world.reward_and_continue(p, feat.with_empty_tape());
                dream.rewards.extend(reward.as_vec());
                dream.continues.extend_from_slice(&cont);
                steps.push((reward, dev.tensor_from_vec(cont, (n,)).retaped(), value));
            }
            let (_, feat_tape) = feat.split_tape();
            if k == horizon {
                rest = Some(h.split_tape().1.merge(z.split_tape().1).merge(feat_tape));
                break;
            }
            // The actor sees the state as a constant (a new leaf): sg(s_k).
            let seen = match held {
                Some(d) => d.feats[k * n * f..(k + 1) * n * f].to_vec(),
                None => state,
            };
            let head = self.actor.forward(p, dev.tensor_from_vec(seen, (n, f)).retaped::<T>());
            // Step k's factors (continuous actions only).
            let held_shrink = held.filter(|d| !d.shrink.is_empty()).map(|d| {
                let per = d.shrink.len() / horizon;
                &d.shrink[k * per..(k + 1) * per]
            });
            let (a, taken, ent) = self.dream_action(head, held_shrink, &mut dream.shrink, rng);
            dream.actions.extend(taken);
            entropy.extend(ent);
            let (a, a_tape) = a.split_tape();
            (h, z) = self.world.imagine_step(p, (h, z, a.put_tape(a_tape.merge(feat_tape))), rng);
        }
        let returns = lambda_returns(steps, self.cfg.gamma as f32, self.cfg.gae_lambda as f32);
        dream.returns = returns.iter().flat_map(|r| r.as_vec()).collect();
        dream.weights = dream.step_weights(horizon);
        let slow = core.target.as_ref().expect("DreamerV3 keeps a slow critic");
        let first = dev.tensor_from_vec(dream.feats[..horizon * n * f].to_vec(), (horizon * n, f));
        dream.slow_values = self.two_hot.predict(self.critic.forward(slow, first)).as_vec();
        let rest = rest.expect("the rollout ends at step horizon_H");
        (dream, Trace { returns, values, entropy, rest })
    }

    /// The actor's action from its outputs `head` in a dream: the model's
    /// input, and what the actor's loss reads. A discrete action gives its
    /// index (REINFORCE recomputes the probabilities from the stored
    /// states). A continuous action is the reparameterized `tanh(x_μ) + σ
    /// ε`, so on a tape its input to the model depends on the actor's
    /// weights; it gives the entropy of each row, on that tape. Beyond the
    /// box it is scaled back onto it, `a / sg(max(1, |a|))` (as the paper's
    /// code does): a clip would give an action pushed against a bound no
    /// gradient at all, and the actor, pulled by the returns only where a
    /// sample fell inside, would narrow its σ towards the minimum. The
    /// factors are pushed onto `shrink`, or taken from `held`.
    fn dream_action<D: NetDevice, T: Tape<f32, D>>(
        &self,
        head: Matrix<D, T>,
        held: Option<&[f32]>,
        shrink: &mut Vec<f32>,
        rng: &mut impl Rng,
    ) -> (Matrix<D, T>, Vec<f32>, Option<PerTrajectory<D, T>>) {
        let (n, dev) = (head.shape().0, head.device().clone());
        match &self.actions {
            Actions::Discrete(k) => {
                let (index, inputs) = self.choose(head.retaped::<NoneTape>(), true, rng);
                (dev.tensor_from_vec(inputs, (n, *k)).retaped::<T>(), index, None)
            }
            Actions::Continuous(b) => {
                let (mean, std) = gaussian(head, b.dim());
                let entropy = gaussian_entropy(std.with_empty_tape().ln());
                let eps = standard_normal(&std, rng);
                let a = mean + std * eps;
                let factors = match held {
                    Some(h) => h.to_vec(),
                    None => a.as_vec().iter().map(|x| 1.0 / x.abs().max(1.0)).collect(),
                };
                shrink.extend_from_slice(&factors);
                let shape = *a.shape();
                (a * dev.tensor_from_vec(factors, shape), Vec::new(), Some(entropy))
            }
        }
    }

    /// The first `H · n` rows of the dream's features, taped.
    fn dreamed_states<D: NetDevice>(&self, dev: &D, dream: &Dream) -> Matrix<D, Taped<D>> {
        let (rows, f) = (self.cfg.horizon_H * dream.n, self.world.sizes().features());
        dev.tensor_from_vec(dream.feats[..rows * f].to_vec(), (rows, f)).retaped()
    }

    /// The actor's loss and gradient for discrete actions: REINFORCE (see
    /// the module docs).
    fn reinforce_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        dream: &Dream,
        scale: f32,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let p = &core.params;
        let dev = p.device();
        let (returns, weights) = (&dream.returns, &dream.weights);
        let rows = returns.len();
        let head = self.actor.forward(p, self.dreamed_states(dev, dream));
        let (log_prob, entropy) = self.log_prob_and_entropy(head, &dream.actions);
        let advantage: Vec<f32> = (0..rows).map(|i| weights[i] * (returns[i] - dream.values[i]) / scale).collect();
        let eta = self.cfg.entropy_scale as f32;
        let bonus: Vec<f32> = weights.iter().map(|w| w * eta).collect();
        let mut stats = LearnerStats::default();
        stats.set("entropy", entropy.as_vec().iter().map(|&e| f64::from(e)).sum::<f64>() / rows as f64);
        let objective =
            log_prob * dev.tensor_from_vec(advantage, (rows,)) + entropy * dev.tensor_from_vec(bonus, (rows,));
        let (loss, grad) = core.backward(objective.mean().negate(), "actor loss", core.range(ACTOR))?;
        stats.set("actor_loss", f64::from(loss));
        Ok((grad, stats))
    }

    /// The actor's loss and gradient for continuous actions: the advantages
    /// themselves, differentiated through the imagined steps of the model
    /// (dynamics backpropagation, the paper's choice for continuous actions
    /// and RLlib's):
    /// `L_actor = −Σ_k w_k ((R^λ_k − v(s_k)) / max(1, S) + η H[π(· | s_k)])`.
    /// The gradient reaches the actor's weights through every action it
    /// took in the dream; only the actor's span of it is kept.
    fn actor_gradient_through_model<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        dream: &Dream,
        trace: Trace<D, Taped<D>>,
        scale: f32,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let dev = core.params.device().clone();
        let (n, eta, rows) = (dream.n, self.cfg.entropy_scale as f32, dream.weights.len().max(1));
        let mut entropy = 0.0f64;
        let mut objective: Option<Tensor<Rank0, f32, D, Taped<D>>> = None;
        let steps = trace.returns.into_iter().zip(trace.values).zip(trace.entropy);
        for (k, ((ret, value), ent)) in steps.enumerate() {
            entropy += ent.as_vec().iter().map(|&e| f64::from(e)).sum::<f64>();
            let w = dev.tensor_from_vec(dream.weights[k * n..(k + 1) * n].to_vec(), (n,));
            let step = (((ret - value) / scale + ent * eta) * w).sum::<Rank0, _>();
            objective = Some(match objective {
                None => step,
                Some(sum) => sum + step,
            });
        }
        let objective = objective.expect("horizon_H is at least 1");
        let (loss, tape) = (objective / rows as f32).negate().split_tape();
        let loss = loss.put_tape(tape.merge(trace.rest));
        let (loss, grad) = core.backward(loss, "actor loss", core.range(ACTOR))?;
        let mut stats = LearnerStats::default();
        stats.set("entropy", entropy / rows as f64);
        stats.set("actor_loss", f64::from(loss));
        Ok((grad, stats))
    }

    /// The critic's loss and gradient (see the module docs).
    fn critic_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        dream: &Dream,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let p = &core.params;
        let dev = p.device();
        let (returns, weights) = (&dream.returns, &dream.weights);
        let rows = returns.len();
        let log_p = D::log_softmax_rows(self.critic.forward(p, self.dreamed_states(dev, dream)));
        let mut targets = self.two_hot.encode_all(returns);
        let slow = self.two_hot.encode_all(&dream.slow_values[..rows]);
        let bins = TwoHot::BINS;
        for (i, (t, s)) in targets.iter_mut().zip(slow).enumerate() {
            *t = (*t + s) * weights[i / bins];
        }
        let targets = dev.tensor_from_vec(targets, (rows, bins));
        let loss = (log_p * targets).sum::<(usize,), Axis<1>>().mean().negate();
        let (loss, grad) = core.backward(loss, "critic loss", core.range(CRITIC))?;
        let mut stats = LearnerStats::default();
        stats.set("critic_loss", f64::from(loss));
        Ok((grad, stats))
    }
}

impl<D: NetDevice> PolicyAlgorithm<D> for Dreamer {
    type State = ReturnScale;

    /// One step of filtering and acting for every row (see the module docs).
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let x = self.features(input.obs)?;
        let n = x.len() / self.input.features().max(1);
        let (width, sizes, a) = (self.state_width(), self.world.sizes(), self.actions.inputs());
        let state = match input.state {
            Some(s) if s.len() == n * width => s.to_vec(),
            Some(s) => {
                return Err(PolicyError::WrongLength {
                    what: "recurrent state values",
                    expected: n * width,
                    got: s.len(),
                })
            }
            None => vec![0.0; n * width],
        };
        let column = |from: usize, w: usize| -> Vec<f32> {
            state.chunks_exact(width).flat_map(|r| r[from..from + w].to_vec()).collect()
        };
        let (g, latent) = (sizes.gru_units, sizes.latent());
        let (p, rng) = (&core.params, &mut core.rng);
        let dev = p.device().clone();
        let h = dev.tensor_from_vec(column(0, g), (n, g));
        let z = dev.tensor_from_vec(column(g, latent), (n, latent));
        let prev = dev.tensor_from_vec(column(g + latent, a), (n, a));
        let obs = dev.tensor_from_vec(x, (n, self.input.features()));
        let (h, z) = self.world.observe_step(p, (h, z, prev), obs, (input.explore, rng));
        let feat = (h.clone(), dev.tensor_from_vec(z.clone(), (n, latent))).concat_along(Axis::<1>);
        let head = self.actor.forward(p, feat);
        let (env_actions, inputs) = self.choose(head, input.explore, rng);
        let h = h.as_vec();
        let mut next = Vec::with_capacity(n * width);
        for i in 0..n {
            next.extend_from_slice(&h[i * g..(i + 1) * g]);
            next.extend_from_slice(&z[i * latent..(i + 1) * latent]);
            next.extend_from_slice(&inputs[i * a..(i + 1) * a]);
            next.push(1.0);
        }
        let mut out = SampleBatch::new();
        match &self.actions {
            Actions::Discrete(_) => out.insert(
                fields::ACTIONS,
                Column::I64 { data: env_actions.iter().map(|&i| i as i64).collect(), width: 1 },
            )?,
            Actions::Continuous(b) => out.insert_f32(fields::ACTIONS, b.to_env(&env_actions), b.dim())?,
        }
        out.insert_f32(fields::STATE_OUT, next, width)?;
        Ok(out)
    }

    /// Transitions go to the replay as they are.
    fn postprocess(&mut self, _: &mut PolicyCore<D>, _: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(())
    }

    /// The world model's, the actor's and the critic's gradients, in the
    /// weights' layout. The actor's and the critic's read the same dream;
    /// with discrete actions they run side by side on the CPU.
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let t0 = Instant::now();
        let seqs = self.sequences(batch)?;
        let (loss, starts, mut stats) = self.world.loss(&core.params, &seqs, &mut core.rng)?;
        let (_, mut grad) = core.backward(loss, "world model loss", core.range(WORLD))?;
        let t1 = Instant::now();
        let (dream, trace) = match self.actions {
            Actions::Discrete(_) => (self.imagine::<D, NoneTape>(core, &starts).0, None),
            Actions::Continuous(_) => {
                let (dream, trace) = self.imagine::<D, Taped<D>>(core, &starts);
                (dream, Some(trace))
            }
        };
        let t2 = Instant::now();
        let n = dream.n;
        let scale = self.scale.update(&dream.returns, self.cfg.return_normalization_decay as f32);
        let this = &*self;
        let (actor, critic) = match trace {
            None => join_on_cpu!(core, |c| this.reinforce_gradient(c, &dream, scale), this.critic_gradient(c, &dream)),
            Some(trace) => {
                (this.actor_gradient_through_model(core, &dream, trace, scale), this.critic_gradient(core, &dream))
            }
        };
        let ((actor_grad, actor_stats), (critic_grad, critic_stats)) = (actor?, critic?);
        grad.extend(actor_grad);
        grad.extend(critic_grad);
        stats.merge(actor_stats);
        stats.merge(critic_stats);
        let mean = |v: &[f32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len().max(1) as f64;
        stats.set("world_model_s", (t1 - t0).as_secs_f64());
        stats.set("imagination_s", (t2 - t1).as_secs_f64());
        stats.set("behaviour_s", t2.elapsed().as_secs_f64());
        stats.set("return_scale", f64::from(scale));
        stats.set("imagined_return", mean(&dream.returns));
        stats.set("imagined_reward", mean(&dream.rewards[n..]));
        Ok((grad, stats))
    }

    /// One step of each network's Adam, then the slow critic moves by
    /// `1 − critic_ema_decay`.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        for (group, key) in [(WORLD, "world_model_grad_norm"), (ACTOR, "actor_grad_norm"), (CRITIC, "critic_grad_norm")]
        {
            let range = core.range(group);
            stats.set(key, f64::from(core.step(group, &mut grad[range])?));
        }
        let params = core.params.clone();
        let tau = 1.0 - self.cfg.critic_ema_decay as f32;
        core.target.as_mut().expect("DreamerV3 keeps a slow critic").soft_update(&params, tau);
        Ok(stats)
    }

    fn recurrent_state_size(&self) -> usize {
        self.state_width()
    }

    /// Greedy acting as it runs here: the world model's filtering step
    /// (the posterior's most likely `z`), then the actor's most likely
    /// action; the state in and out is [`act`](Self::act)'s.
    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        let p = &core.params;
        let symlog = self.symlog_obs.then_some(Layer::Symlog);
        let action = match &self.actions {
            Actions::Discrete(n) => ActionHead::Categorical { nvec: vec![*n] },
            Actions::Continuous(b) => {
                let (low, high) = b.low_high();
                ActionHead::TanhMeanGaussian { low, high, min_std: STD_MIN }
            }
        };
        Ok(PolicyExport {
            normalization: None,
            encoding: self.input.exported()?,
            body: symlog.into_iter().chain(self.world.exported_encoder(p)).collect(),
            recurrent: Some(Recurrent::Latent(self.world.exported_step(p, self.actions.inputs()))),
            head: self.actor.exported(p),
            value: None,
            action,
        })
    }

    fn state(&self) -> ReturnScale {
        self.scale
    }

    fn set_state(&mut self, scale: ReturnScale) {
        self.scale = scale;
    }
}

/// What building a policy starts from.
struct Build<'a> {
    cfg: &'a DreamerV3Config,
    obs: &'a Space,
    act: &'a Space,
    input: Input,
    observed: Observed,
    actions: Actions,
    rng_seed: u64,
}

impl Build<'_> {
    /// The shared core (weights, optimizers, slow critic) and DreamerV3's
    /// part of the policy, with networks of `sizes`.
    ///
    /// # Errors
    /// Images too small for the encoder.
    fn parts<D: NetDevice>(self, dev: D, sizes: Sizes) -> Result<(PolicyCore<D>, Dreamer), BuildError> {
        let mut p = Params::new(dev);
        let world_start = p.next_id();
        let world = WorldModel::new(&mut p, sizes, self.observed, self.actions.inputs())
            .map_err(|e| BuildError::Unsupported(format!("{e} ({})", self.obs)))?;
        let actor_start = p.next_id();
        let stack = (sizes.layers, sizes.units);
        let actor = DenseStack::new(&mut p, "actor", sizes.features(), stack, self.actions.head(), false);
        let critic_start = p.next_id();
        let critic = DenseStack::new(&mut p, "critic", sizes.features(), stack, TwoHot::BINS, true);
        let spans =
            [p.range(world_start, actor_start), p.range(actor_start, critic_start), p.range(critic_start, p.next_id())];
        let cfg = self.cfg;
        let mut core = PolicyCore::new(p, self.obs.clone(), self.act.clone(), self.rng_seed).with_target();
        let rates = [
            (cfg.world_model_lr, cfg.world_model_grad_clip_by_global_norm),
            (cfg.actor_lr, cfg.actor_grad_clip_by_global_norm),
            (cfg.critic_lr, cfg.critic_grad_clip_by_global_norm),
        ];
        // Adam's ε: 1e-8 for the world model, 1e-5 for the actor and the
        // critic (the paper's code and RLlib).
        for ((span, (lr, clip)), eps) in spans.into_iter().zip(rates).zip([1e-8, 1e-5, 1e-5]) {
            core.add_optimizer(span, lr, eps, Some(clip));
        }
        let is_image = matches!(self.observed, Observed::Images(_));
        let dreamer = Dreamer {
            cfg: cfg.clone(),
            symlog_obs: cfg.symlog_obs.unwrap_or(!is_image),
            input: self.input,
            actions: self.actions,
            world,
            actor,
            critic,
            two_hot: TwoHot::new(),
            scale: ReturnScale::default(),
        };
        Ok((core, dreamer))
    }
}

impl OnDevice for Build<'_> {
    type Output = Box<dyn PolicyGraph>;

    fn run<D: NetDevice>(self, dev: D) -> Result<Self::Output, BuildError> {
        let sizes = self.cfg.model_size.sizes();
        let (core, dreamer) = self.parts(dev, sizes)?;
        Ok(Box::new(DeepPolicy::new(core, dreamer)))
    }
}

/// A DreamerV3 policy for the given spaces, on the config's device.
///
/// # Errors
/// Observations the encoder cannot take (a `Dict`), actions other than
/// one discrete choice or a bounded box, or a device this build or
/// machine lacks.
pub fn make_policy(
    cfg: &DreamerV3Config,
    obs: &Space,
    act: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let observed = match obs {
        Space::Dict { .. } => {
            return Err(BuildError::Unsupported(format!(
                "DreamerV3's encoder takes vectors, discrete values and images, not a Dict observation ({obs})"
            )))
        }
        Space::Box { shape, .. } if shape.len() == 3 => {
            // Images too small to encode are refused by the world model.
            Observed::Images((shape[0], shape[1], shape[2]))
        }
        _ => Observed::Vectors(Input::flat(obs).features()),
    };
    let actions = match act {
        Space::Discrete { n } => Actions::Discrete(*n as usize),
        Space::Box { .. } => Actions::Continuous(ActionBounds::new(act, DreamerV3Config::NAME)?),
        other => {
            return Err(BuildError::Unsupported(format!(
                "DreamerV3 acts in one discrete choice or a bounded box, not {other}"
            )))
        }
    };
    let build = Build { cfg, obs, act, input: Input::flat(obs), observed, actions, rng_seed };
    on_device(cfg.device, cfg.sampling.seed, build)
}

// ---------------------------------------------------------------- training step

/// The execution plan: evaluators acting with the model's filtered state,
/// sampling `rollout_fragment_length` steps of every env copy per round
/// into the [`EpisodeReplay`]; [`SyncReplayOptimizer`] trains on `B × T`
/// sequence batches at `training_ratio` replayed rows per env step.
///
/// # Errors
/// `input` (DreamerV3 learns from its own episodes), an env whose spaces
/// the networks cannot take, or an evaluator that fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: DreamerV3Config) -> Result<Trainer, BuildError> {
    if cfg.sampling.input.is_some() {
        return Err(BuildError::Unsupported(
            "DreamerV3 learns from the episodes its evaluators play, stitched by their recurrent state; it does not \
             read `input` datasets"
                .into(),
        ));
    }
    let settings = cfg.sampling.fragments(cfg.rollout_fragment_length);
    let policy_cfg = cfg.clone();
    let make: PolicyMaker = Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(&policy_cfg, o, a, seed));
    let evaluators = spawn_evaluators(&ctx, make_env, make, settings).await?;
    let replay =
        EpisodeReplay::new(cfg.buffer_size, cfg.batch_length_T).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    let config = SyncReplayConfig {
        buffer_size: cfg.buffer_size,
        prioritized: None,
        learning_starts: cfg.learning_starts(),
        train_batch_size: cfg.batch_rows(),
        training_intensity: cfg.training_ratio,
        timesteps_per_iteration: cfg.timesteps_per_iteration,
        seed: cfg.sampling.seed,
    };
    let optimizer =
        SyncReplayOptimizer::with_replay(config, replay).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rlx::replay::ReplayStore;

    fn tiny() -> DreamerV3Config {
        DreamerV3Config {
            model_size: ModelSize::Nano,
            batch_size_B: 4,
            batch_length_T: 8,
            horizon_H: 5,
            ..DreamerV3Config::default()
        }
    }

    /// Episodes of a 1-d walk: the observation shows the step count
    /// (`observe`), each step pays `pay` of the action taken, and episodes
    /// end after 6 steps.
    fn walk(
        policy: &mut dyn PolicyGraph,
        replay: &mut EpisodeReplay,
        episodes: usize,
        (observe, pay): (fn(usize) -> Vec<f32>, fn(f32) -> f32),
    ) {
        for _ in 0..episodes {
            let mut state = vec![0.0; policy.recurrent_state_size()];
            let mut batch = SampleBatch::new();
            for t in 0..6 {
                let obs = observe(t);
                let width = obs.len();
                let mut out = SampleBatch::new();
                policy
                    .compute_actions_from_input(
                        &PolicyInput { obs: &obs, action_mask: None, state: Some(&state), explore: true },
                        &mut out,
                    )
                    .unwrap();
                let action = first_action(&out);
                let next = out.f32(fields::STATE_OUT).unwrap().to_vec();
                let mut row = SampleBatch::new();
                row.insert_f32(fields::OBS, obs, width).unwrap();
                row.insert_f32(fields::NEW_OBS, observe(t + 1), width).unwrap();
                row.insert(fields::ACTIONS, out.get(fields::ACTIONS).unwrap().clone()).unwrap();
                row.insert_f32(fields::REWARDS, vec![pay(action)], 1).unwrap();
                row.insert_f32(fields::TERMINATEDS, vec![if t == 5 { 1.0 } else { 0.0 }], 1).unwrap();
                row.insert_f32(fields::TRUNCATEDS, vec![0.0], 1).unwrap();
                row.insert_f32(fields::STATE_IN, state.clone(), state.len()).unwrap();
                row.insert_f32(fields::STATE_OUT, next.clone(), state.len()).unwrap();
                batch.append(&row).unwrap();
                state = next;
            }
            replay.add(&batch, None).unwrap();
        }
    }

    /// The walk's step `t` as two features.
    fn count(t: usize) -> Vec<f32> {
        vec![t as f32 / 6.0, 1.0]
    }

    /// The walk's step `t` as a 6 × 6 image of one channel, lit at row and
    /// column `t` (the step after the last at the top left).
    fn pixels(t: usize) -> Vec<f32> {
        let mut image = vec![0.0; 36];
        image[(t % 6) * 7] = 1.0;
        image
    }

    /// The greedy action of the walk's first step.
    fn greedy_first_action(policy: &mut dyn PolicyGraph) -> f32 {
        let state = vec![0.0; policy.recurrent_state_size()];
        let mut out = SampleBatch::new();
        let input = PolicyInput { obs: &[0.0, 1.0], action_mask: None, state: Some(&state), explore: false };
        policy.compute_actions_from_input(&input, &mut out).unwrap();
        first_action(&out)
    }

    /// The first row's action: an index, or a continuous value.
    fn first_action(out: &SampleBatch) -> f32 {
        match out.get(fields::ACTIONS).unwrap() {
            Column::I64 { data, .. } => data[0] as f32,
            Column::F32 { data, .. } => data[0],
            other => panic!("actions as {}", other.kind_name()),
        }
    }

    fn spaces() -> (Space, Space) {
        (Space::uniform_box(0.0, 1.0, vec![2]).unwrap(), Space::discrete(2))
    }

    #[test]
    fn the_world_model_learns_the_walk_and_a_restored_policy_continues_exactly() {
        let cfg = DreamerV3Config { world_model_lr: 3e-3, ..tiny() };
        let (o, a) = spaces();
        let mut policy = make_policy(&cfg, &o, &a, 0).unwrap();
        assert_eq!(policy.recurrent_state_size(), 16 + 16 + 2 + 1);
        let mut replay = EpisodeReplay::new(1000, 8).unwrap();
        walk(policy.as_mut(), &mut replay, 10, (count, |a| a));
        assert_eq!(replay.len(), 70);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut losses = Vec::new();
        for _ in 0..150 {
            let batch = replay.sample(32, 0, &mut rng).unwrap();
            let stats = policy.learn_on_batch(&batch).unwrap();
            losses.push(
                stats.get("decoder_loss").unwrap()
                    + stats.get("reward_loss").unwrap()
                    + stats.get("continue_loss").unwrap(),
            );
            for key in ["actor_loss", "critic_loss", "entropy", "return_scale", "world_model_grad_norm", "kl"] {
                assert!(stats.get(key).is_some_and(f64::is_finite), "{key}: {stats:?}");
            }
        }
        let (first, last) = (losses[..10].iter().sum::<f64>() / 10.0, losses[140..].iter().sum::<f64>() / 10.0);
        assert!(last < 0.3 * first, "the world model's prediction loss fell only from {first} to {last}");
        // A policy built from the checkpoint's weights and state takes the
        // same next update.
        let mut restored = make_policy(&cfg, &o, &a, 0).unwrap();
        restored.set_weights(&policy.get_weights()).unwrap();
        restored.load_state(&policy.save_state().unwrap()).unwrap();
        let batch = replay.sample(32, 0, &mut rng).unwrap();
        policy.learn_on_batch(&batch).unwrap();
        restored.learn_on_batch(&batch).unwrap();
        assert_eq!(policy.get_weights(), restored.get_weights());
    }

    #[test]
    fn the_world_model_learns_the_walk_seen_as_pixels() {
        // The walk as 6 × 6 images: the convolutional encoder and decoder
        // learn to predict the lit pixel.
        let cfg = DreamerV3Config { world_model_lr: 3e-3, ..tiny() };
        let o = Space::uniform_box(0.0, 1.0, vec![6, 6, 1]).unwrap();
        let mut policy = make_policy(&cfg, &o, &Space::discrete(2), 0).unwrap();
        let mut replay = EpisodeReplay::new(1000, 8).unwrap();
        walk(policy.as_mut(), &mut replay, 10, (pixels, |a| a));
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut losses = Vec::new();
        for _ in 0..300 {
            let batch = replay.sample(32, 0, &mut rng).unwrap();
            losses.push(policy.learn_on_batch(&batch).unwrap().get("decoder_loss").unwrap());
        }
        // Predicting every pixel's mean image would leave 5/6.
        let (first, last) = (losses[..10].iter().sum::<f64>() / 10.0, losses[290..].iter().sum::<f64>() / 10.0);
        assert!(last < 0.3, "the decoder's loss on the pixels fell only from {first} to {last}");
        assert!(policy.export().is_ok());
        let small = Space::uniform_box(0.0, 1.0, vec![3, 8, 1]).unwrap();
        let err = make_policy(&cfg, &small, &Space::discrete(2), 0).err().unwrap().to_string();
        assert!(err.contains("at least 4 × 4 pixels, not 3 × 8 (Box(0, 1, [3, 8, 1]))"), "{err}");
    }

    #[test]
    fn a_continuous_actor_learns_through_the_model_to_take_the_action_that_pays() {
        // Each step pays the action (in [−2, 2]) over 2: the best greedy
        // action is 2. The actor learns it in imagination only, through the
        // reward head and the dynamics, while the world model learns the
        // walk from the episodes the exploring policy plays. (60 rounds:
        // with imagined steps weighed by the continue head's probability
        // rather than its 0/1 flag, the greedy action stood at 1.38 after
        // 40 and at 1.91 after 60.)
        let cfg = DreamerV3Config { world_model_lr: 1e-3, actor_lr: 1e-3, critic_lr: 1e-3, ..tiny() };
        let (o, _) = spaces();
        let act = Space::uniform_box(-2.0, 2.0, vec![1]).unwrap();
        let mut policy = make_policy(&cfg, &o, &act, 0).unwrap();
        let before = greedy_first_action(policy.as_mut());
        let mut replay = EpisodeReplay::new(10_000, 8).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for round in 0..60 {
            walk(policy.as_mut(), &mut replay, 2, (count, |a| a / 2.0));
            for _ in 0..10 {
                let batch = replay.sample(32, 0, &mut rng).unwrap();
                let stats = policy.learn_on_batch(&batch).unwrap();
                for key in ["actor_loss", "critic_loss", "entropy", "actor_grad_norm"] {
                    assert!(stats.get(key).is_some_and(f64::is_finite), "round {round}, {key}: {stats:?}");
                }
            }
        }
        let after = greedy_first_action(policy.as_mut());
        assert!(after > 1.5, "the greedy action went from {before} to {after}, not towards 2");
    }

    #[test]
    fn the_actor_gradient_through_the_model_matches_finite_differences() {
        // With one class per categorical the latents are constant (the
        // straight-through estimate is then exact), and with the continue
        // head's output at +5 every ĉ is σ(5), so the weights w_k do not
        // move with the actor. With the states the actor sees and the
        // actions' scale factors held at the taped dream's (the constants
        // of its pass), the objective Σ w_k (R_k − v_k) is then a smooth
        // function of the actor's weights whose derivative the tape must
        // give.
        let cfg = DreamerV3Config { entropy_scale: 0.0, horizon_H: 3, ..tiny() };
        let sizes = Sizes { classes: 1, ..ModelSize::Nano.sizes() };
        let (o, _) = spaces();
        let act = Space::uniform_box(-2.0, 2.0, vec![2]).unwrap();
        let actions = Actions::Continuous(ActionBounds::new(&act, DreamerV3Config::NAME).unwrap());
        let observed = Observed::Vectors(Input::flat(&o).features());
        let build = Build { cfg: &cfg, obs: &o, act: &act, input: Input::flat(&o), observed, actions, rng_seed: 3 };
        let (mut core, dreamer) = build.parts(Cpu::default(), sizes).unwrap();
        // Weights at random everywhere (the reward and critic heads start
        // at 0, which has no gradient), then the continue head's output at +5.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let random: Vec<f32> = (0..core.num_params()).map(|_| rng.gen_range(-0.5..0.5)).collect();
        core.params.load(&random).unwrap();
        let mut named = core.params.named();
        for (name, _, values) in named.iter_mut().filter(|(name, _, _)| name.starts_with("wm.continue.out")) {
            let out = if name.ends_with("bias") { 5.0 } else { 0.0 };
            values.iter_mut().for_each(|x| *x = out);
        }
        core.params.load_named(&named).unwrap();
        let n = 6;
        let starts = Starts {
            h: (0..n * sizes.gru_units).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            z: vec![1.0; n * sizes.latent()],
            terminals: vec![0.0; n],
        };
        let draws = core.rng.clone();
        let (dream, trace) = dreamer.imagine::<Cpu, Taped<Cpu>>(&mut core, &starts);
        let sigmoid_5 = 1.0 / (1.0 + (-5.0f32).exp());
        assert!(dream.continues[n..].iter().all(|&c| (c - sigmoid_5).abs() < 1e-6));
        assert!(dream.shrink.iter().any(|&c| c < 1.0), "no action left the box: the scaling is not checked");
        let (grad, _) = dreamer.actor_gradient_through_model(&core, &dream, trace, 1.0).unwrap();
        let objective = |core: &mut PolicyCore<Cpu>| {
            core.rng = draws.clone();
            let (d, _) = dreamer.imagine_holding::<Cpu, NoneTape>(core, &starts, Some(&dream));
            let total: f64 = (0..d.returns.len()).map(|i| f64::from(d.weights[i] * (d.returns[i] - d.values[i]))).sum();
            total / d.returns.len() as f64
        };
        let actor = core.range(ACTOR);
        // The eight largest components, each by central differences.
        let mut order: Vec<usize> = (0..grad.len()).collect();
        order.sort_by(|&a, &b| grad[b].abs().total_cmp(&grad[a].abs()));
        assert!(grad[order[0]].abs() > 1e-3, "no gradient reached the actor: {:?}", &grad[..8]);
        for &j in &order[..8] {
            let at = actor.start + j;
            let mut w = core.params.to_vec();
            let eps = 1e-2;
            w[at] += eps;
            core.params.load(&w).unwrap();
            let up = objective(&mut core);
            w[at] -= 2.0 * eps;
            core.params.load(&w).unwrap();
            let down = objective(&mut core);
            w[at] += eps;
            core.params.load(&w).unwrap();
            let numeric = (up - down) / (2.0 * eps as f64);
            let taped = -f64::from(grad[j]);
            assert!(
                (numeric - taped).abs() <= 0.05 * taped.abs() + 1e-4,
                "weight {j} of the actor: taped {taped}, finite differences {numeric}"
            );
        }
    }

    #[test]
    fn continuous_actions_stay_in_bounds_and_bad_spaces_and_configs_are_named() {
        let (o, _) = spaces();
        let act = Space::uniform_box(-2.0, 2.0, vec![2]).unwrap();
        let mut policy = make_policy(&tiny(), &o, &act, 0).unwrap();
        let mut out = SampleBatch::new();
        let width = policy.recurrent_state_size();
        let state = vec![0.0; 3 * width];
        for explore in [true, false] {
            let input =
                PolicyInput { obs: &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], action_mask: None, state: Some(&state), explore };
            policy.compute_actions_from_input(&input, &mut out).unwrap();
            assert!(out.f32(fields::ACTIONS).unwrap().iter().all(|x| (-2.0..=2.0).contains(x)));
            let next = out.f32(fields::STATE_OUT).unwrap();
            assert!((0..3).all(|i| next[(i + 1) * width - 1] == 1.0), "every row's state says it started");
        }
        let dict = Space::Dict { entries: vec![("a".into(), o.clone())] };
        let e = make_policy(&tiny(), &dict, &Space::discrete(2), 0).err().unwrap().to_string();
        assert!(e.contains("not a Dict observation"), "{e}");
        let e = make_policy(&tiny(), &o, &Space::MultiDiscrete { nvec: vec![2, 2] }, 0).err().unwrap().to_string();
        assert!(e.contains("one discrete choice or a bounded box"), "{e}");
        for (key, value, says) in [
            ("model_size", serde_json::json!("XXL"), "XXL"),
            ("training_ratio", serde_json::json!(0.0), "must be > 0"),
            ("training_ratio", serde_json::json!(1e7), "updates per env step"),
            ("buffer_size", serde_json::json!(10), "one sequence"),
            ("horizon_H", serde_json::json!(0), "horizon_H"),
        ] {
            let e = rlx::config::merge_json(&DreamerV3Config::default(), &serde_json::json!({ key: value }))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains(says), "{key}: {e}");
        }
    }

    /// Unset, `learning_starts` is one `B × T` batch, RLlib's rule: 1,024
    /// rows at the default `16 × 64`, 512 at `16 × 32`; a buffer smaller
    /// than that batch is refused by naming the default it came from.
    #[test]
    fn learning_starts_is_one_batch_unless_set() {
        let at = |json: serde_json::Value| {
            rlx::config::merge_json(&DreamerV3Config::default(), &json).map(|c: DreamerV3Config| c.learning_starts())
        };
        assert_eq!(at(serde_json::json!({})).unwrap(), 1024);
        assert_eq!(at(serde_json::json!({"batch_length_T": 32})).unwrap(), 512);
        assert_eq!(at(serde_json::json!({"batch_length_T": 32, "learning_starts": 100})).unwrap(), 100);
        assert_eq!(at(serde_json::json!({"learning_starts": null})).unwrap(), 1024);
        let e = at(serde_json::json!({"buffer_size": 600})).unwrap_err().to_string();
        assert!(e.contains("learning_starts") && e.contains("batch_size_B × batch_length_T = 1024"), "{e}");
    }
}
