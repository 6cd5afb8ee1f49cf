//! The actor-critic policy shared by the policy-gradient family (PG, A2C,
//! A3C, PPO, IMPALA, APPO).
//!
//! Everything these algorithms have in common lives here: the network
//! (a policy body and head, a value head, built from the `model` key for
//! any observation space), the action distribution of any action space
//! ([`ActionDist`], with masks), bootstrapping a cut trajectory from
//! `V(s_T)`, minibatch epochs (over sequences for an LSTM), and everything
//! the [`PolicyCore`] does. What differs — how a trajectory is
//! postprocessed and the loss — is the algorithm's [`ActorCriticLoss`],
//! which each algorithm's file implements in a few lines.

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::distributions::{ActionDist, TapedRows};
use crate::common::sampling::{spawn_evaluators, PolicyMaker};
use crate::common::sections::SyncBatch;
use crate::common::sections::{ActorCriticLearner, Learning, OptimizerChoice, Sampling};
use crate::error::BuildError;
use crate::model::device::{on_device, DeviceSpec, NetDevice, OnDevice};
use crate::model::sequences::{self, SEQ_MASK};
use crate::model::{Body, HostNet, Linear, ModelConfig, ParamId, Params, Taped, Torso};
use dfdx::prelude::*;
use rand::Rng;
use rlx::env::EnvMaker;
use rlx::export::{ActionHead, PolicyExport, Recurrent, ValueNet};
use rlx::gaussian_actions::{GaussianActions, Squash};
use rlx::optimizer::{MultiDeviceConfig, MultiDeviceLearner, SyncSamplesConfig, SyncSamplesOptimizer};
use rlx::policy::bootstrap_needed;
use rlx::postprocessing::value_fit_stats;
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space, Values};
use rlx::{Evaluators, Trainer};
use std::sync::Arc;

pub use crate::common::deep_policy::Loss;

/// Marks the last row of every trajectory fragment (1.0), so losses that need
/// sequences (V-trace) can find the boundaries in a concatenated batch.
pub const TRAJ_ENDS: &str = "traj_ends";

/// Which rows of a learning pass count: all of them, or, over padded
/// sequences, the real ones ([`SEQ_MASK`]).
pub struct Rows<D: NetDevice> {
    mask: Option<(Tensor<(usize,), f32, D>, Vec<f32>)>,
    count: usize,
}

impl<D: NetDevice> Rows<D> {
    /// The mean of `x` over the rows that count.
    pub fn mean(&self, x: TapedRows<D>) -> Loss<D> {
        match &self.mask {
            None => x.mean(),
            Some((mask, _)) => (x * mask.clone()).sum() / self.count as f32,
        }
    }

    /// The mean of host values, one per row, over the rows that count.
    pub fn host_mean(&self, values: impl IntoIterator<Item = f64>) -> f64 {
        let sum: f64 = match &self.mask {
            None => values.into_iter().sum(),
            Some((_, mask)) => values.into_iter().zip(mask).map(|(v, &m)| v * m as f64).sum(),
        };
        sum / self.count.max(1) as f64
    }
}

/// What a loss sees of one forward pass over a minibatch.
pub struct Forward<D: NetDevice> {
    /// `log π(a|s)` of the taken actions, on the tape.
    pub logp: TapedRows<D>,
    /// The entropy of `π(·|s)` of every row, on the tape.
    pub entropy: TapedRows<D>,
    /// `V(s)` of every row, on the tape; zeros off the network where the
    /// loss does not use them ([`ActorCriticLoss::uses_values`]).
    pub values: TapedRows<D>,
    /// `V(s')` of the next observation with the current weights (no
    /// gradient) at the last row of every trajectory fragment (`traj_ends`),
    /// 0 elsewhere — where the next row's value is `values` itself — when the
    /// loss asks for it ([`ActorCriticLoss::NEEDS_NEXT_VALUES`]).
    pub next_values: Option<Vec<f32>>,
    /// Which rows count: take every mean with [`Rows::mean`].
    pub rows: Rows<D>,
    /// `log π(·|s)` of every action at every row (the log-softmax of the
    /// policy head, without the action mask), on the tape, when the loss
    /// asks for it ([`ActorCriticLoss::NEEDS_LOG_PROBS`]): AlphaZero's
    /// cross-entropy with the search's policy.
    pub log_probs: Option<crate::model::Matrix<D, Taped<D>>>,
}

/// How the learner steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearnerSettings {
    /// Learning rate.
    pub lr: f64,
    /// The update rule.
    pub optimizer: OptimizerChoice,
    /// Epochs over each train batch.
    pub num_sgd_iter: usize,
    /// Shuffled minibatches of about this many rows; `None` takes the whole
    /// batch in order (needed by losses over sequences).
    pub sgd_minibatch_size: Option<usize>,
    /// Maximum global gradient norm.
    pub grad_clip: Option<f64>,
    /// Rows a forward and backward pass takes at a time, for a loss that
    /// is a mean over independent rows (BC, MARWIL): a larger minibatch
    /// is taken in chunks whose gradients are summed, each weighted by its
    /// share of the rows, before its one step (the same step up to
    /// rounding, with one chunk's activations alive at a time). `None`:
    /// the whole minibatch at once.
    pub chunk_rows: Option<usize>,
    /// Seeds the initial weights (identical on every evaluator).
    pub seed: u64,
    /// Where the policy's tensors live.
    pub device: DeviceSpec,
}

impl LearnerSettings {
    /// One gradient step per batch, on the whole batch in order, with the
    /// sections' learning rate, clip and device.
    pub fn new(actor_critic: &ActorCriticLearner, learning: &Learning, seed: u64) -> Self {
        Self {
            lr: actor_critic.lr,
            optimizer: actor_critic.optimizer,
            num_sgd_iter: 1,
            sgd_minibatch_size: None,
            grad_clip: learning.grad_clip,
            chunk_rows: None,
            seed,
            device: learning.device,
        }
    }
}

/// What a loss returns: the scalar to minimize, on the tape, and the
/// learner metrics it measured.
pub type LossOutput<D> = Result<(Loss<D>, LearnerStats), PolicyError>;

/// The fewest rows a minibatch needs for a loss whose rows are independent
/// ([`ActorCriticLoss::rows_independent`]) to be taken in two halves side
/// by side on the CPU.
pub const SIDE_BY_SIDE_ROWS: usize = 256;

/// The gradient and statistics of a batch of `rows` rows from those of
/// its parts (each with its row count): their sum, each weighted by its
/// share of the rows. The first part's gradient becomes the sum.
fn weighted_sum_of_parts(
    parts: impl IntoIterator<Item = ((Vec<f32>, LearnerStats), usize)>,
    rows: usize,
) -> (Vec<f32>, LearnerStats) {
    let (mut total, mut stats) = (Vec::new(), LearnerStats::default());
    for (i, ((grad, part_stats), part_rows)) in parts.into_iter().enumerate() {
        let share = part_rows as f64 / rows as f64;
        if i == 0 {
            total = grad;
            total.iter_mut().for_each(|t| *t *= share as f32);
        } else {
            total.iter_mut().zip(&grad).for_each(|(t, g)| *t += g * share as f32);
        }
        for (key, value) in part_stats.0 {
            stats.set(&key, stats.get(&key).unwrap_or(0.0) + value * share);
        }
    }
    (total, stats)
}

/// An algorithm's part of an actor-critic policy.
pub trait ActorCriticLoss: Clone + Send + Sync + 'static {
    /// Whether [`Forward::next_values`] must be computed.
    const NEEDS_NEXT_VALUES: bool = false;

    /// Whether [`Forward::log_probs`] must be computed.
    const NEEDS_LOG_PROBS: bool = false;

    /// Whether a synchronous step standardizes `advantages` over the batch
    /// first ([`sync_trainer`]).
    const STANDARDIZES_ADVANTAGES: bool = true;

    /// Whether the loss reads [`Forward::values`]. Where it does not (BC:
    /// no value loss, no advantage weights), the learner leaves the value
    /// network out of the forward and backward pass and `values` holds
    /// zeros: the value weights' gradient is 0, as a weight of 0 made it.
    fn uses_values(&self) -> bool {
        true
    }

    /// Whether the loss is a mean over rows that read nothing of each
    /// other (BC). Where it is, on the CPU, a minibatch of at least
    /// [`SIDE_BY_SIDE_ROWS`] rows is taken as two halves, one on each of
    /// two threads, their gradients summed with weights by their rows:
    /// the batch's gradient up to rounding (not where
    /// [`LearnerSettings::chunk_rows`] cuts it in chunks: those keep one
    /// chunk's activations alive at a time). By default `false`.
    fn rows_independent(&self) -> bool {
        false
    }

    /// The sections the learner reads: loss weights and learning rate;
    /// γ, gradient clip, network and device; and the sampling section (for
    /// the seed).
    fn sections(&self) -> (&ActorCriticLearner, &Learning, &Sampling);

    /// Learning rate, epochs, minibatches, clipping, seed. By default one
    /// gradient step per batch, on the whole batch in order.
    fn learner(&self) -> LearnerSettings {
        let (actor_critic, learning, sampling) = self.sections();
        LearnerSettings::new(actor_critic, learning, sampling.seed)
    }

    /// The network to build.
    fn model(&self) -> &ModelConfig {
        &self.sections().1.model
    }

    /// Adds the fields the loss needs (advantages, value targets...) to one
    /// trajectory fragment. `bootstrap` is `V(s_T)` of the observation after
    /// the last row, or 0 if the last row terminated the episode.
    ///
    /// # Errors
    /// A missing field.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError>;

    /// The loss on one minibatch, and statistics to report. Use `dev` to
    /// make tensors, but keep no clone of it (or of the tensors) past the
    /// call: the policy's `Send` rests on owning every clone of its device.
    /// By default the vanilla actor-critic loss ([`policy_gradient_loss`]:
    /// PG, A2C and A3C); PPO, IMPALA and APPO write their own.
    ///
    /// # Errors
    /// A missing field.
    fn loss<D: NetDevice>(&self, fwd: Forward<D>, mb: &SampleBatch, dev: &D) -> LossOutput<D> {
        policy_gradient_loss(fwd, mb, dev, self.sections().0)
    }
}

/// One value per row, as a tensor without a tape.
pub type Column<D> = Tensor<(usize,), f32, D>;

/// A column of `batch` as a tensor.
///
/// # Errors
/// If the field is missing or not `f32`.
pub fn column<D: NetDevice>(dev: &D, batch: &SampleBatch, field: &str) -> Result<Column<D>, PolicyError> {
    Ok(dev.tensor_from_vec(batch.f32(field)?.to_vec(), (batch.len(),)))
}

/// The vanilla actor-critic loss shared by PG, A2C and A3C:
///
/// ```text
/// L = −E[log π(a|s)·Â]  +  c_v·½E[(V(s) − V_target)²]  −  c_e·H[π(·|s)]
/// ```
///
/// with `Â` = `advantages` and `V_target` = `value_targets` from
/// postprocessing.
///
/// # Errors
/// A missing field.
pub fn policy_gradient_loss<D: NetDevice>(
    fwd: Forward<D>,
    mb: &SampleBatch,
    dev: &D,
    weights: &ActorCriticLearner,
) -> LossOutput<D> {
    let (advantages, value_targets) = (column(dev, mb, fields::ADVANTAGES)?, column(dev, mb, fields::VALUE_TARGETS)?);
    let Forward { logp, entropy, values, rows, .. } = fwd;
    let policy_loss = rows.mean(logp * advantages).negate();
    let vf_loss = rows.mean((values - value_targets).square()) * 0.5;
    let mut stats = LearnerStats::default();
    Ok((weighted_sum(weights, policy_loss, vf_loss, rows.mean(entropy), &mut stats), stats))
}

/// `policy_loss + c_v·vf_loss − c_e·entropy` with the weights of `w`: the
/// scalar every actor-critic loss minimizes. Records the three terms as
/// the metrics `policy_loss`, `vf_loss` and `entropy`.
pub fn weighted_sum<D: NetDevice>(
    w: &ActorCriticLearner,
    policy_loss: Loss<D>,
    vf_loss: Loss<D>,
    entropy: Loss<D>,
    stats: &mut LearnerStats,
) -> Loss<D> {
    stats.set("policy_loss", policy_loss.as_vec()[0] as f64);
    stats.set("vf_loss", vf_loss.as_vec()[0] as f64);
    stats.set("entropy", entropy.as_vec()[0] as f64);
    policy_loss + vf_loss * w.vf_loss_coeff as f32 - entropy * w.entropy_coeff as f32
}

/// The network: a policy body and head, a value head on the policy body
/// or on a torso of its own, and for a Gaussian its log standard
/// deviations.
pub struct ActorCriticNet<D: NetDevice> {
    pi: Body<D>,
    pi_head: Linear,
    vf: Option<Torso<D>>,
    vf_head: Linear,
    log_std: Option<ParamId>,
    dist: ActionDist,
}

impl<D: NetDevice> ActorCriticNet<D> {
    /// The network `model` asks for, for the given spaces: tensors `pi.…`,
    /// `vf.…` and `log_std`.
    ///
    /// # Errors
    /// A model that does not fit the spaces, or an empty action space.
    pub fn build(
        algorithm: &str,
        model: &ModelConfig,
        obs: &Space,
        act: &Space,
        p: &mut Params<D>,
    ) -> Result<Self, BuildError> {
        let dist = ActionDist::for_space(act, algorithm)?;
        let pi = Body::build(model, obs, p, "pi")?;
        // A Gaussian's means start near zero, so early actions are the
        // log-std's noise (as CleanRL's 0.01-scaled actor head).
        let scale = if matches!(dist, ActionDist::DiagGaussian { .. }) { 0.01 } else { 1.0 };
        let pi_head = Linear::scaled(p, "pi.head", pi.features(), dist.head_width(), scale);
        let vf =
            if model.vf_share_layers || model.use_lstm { None } else { Some(Torso::build(model, obs, p, "vf.torso")?) };
        let vf_head = Linear::new(p, "vf.head", vf.as_ref().map_or(pi.features(), Torso::features), 1);
        let log_std = match &dist {
            ActionDist::DiagGaussian { dim } => {
                Some(p.constant("log_std", &[*dim], &vec![model.log_std_init as f32; *dim]))
            }
            _ if model.log_std_init != 0.0 => {
                return Err(BuildError::Unsupported(format!(
                    "model.log_std_init is {}, but {algorithm}'s actions here are not continuous ({act:?}): \
                     only a Gaussian policy has a log standard deviation",
                    model.log_std_init
                )))
            }
            _ => None,
        };
        Ok(Self { pi, pi_head, vf, vf_head, log_std, dist })
    }

    /// The policy's and the value's layers as [`HostNet`]s, for acting on
    /// the CPU without dfdx's tensors; `None` on another device, or for a
    /// network with convolutions, a custom torso or an LSTM.
    fn host(&self, p: &Params<D>) -> Option<HostActing> {
        let on_cpu = (p.device() as &dyn std::any::Any).is::<Cpu>();
        let Torso::Mlp { mlp, .. } = &self.pi.torso else { return None };
        if !on_cpu || self.pi.lstm.is_some() {
            return None;
        }
        let vf = match &self.vf {
            None => None,
            Some(Torso::Mlp { mlp, .. }) => Some(mlp),
            Some(_) => return None,
        };
        Some(HostActing {
            version: p.version(),
            pi: HostNet::new(p, Some(mlp), None),
            pi_head: HostNet::new(p, None, Some(&self.pi_head)),
            vf: HostNet::new(p, vf, Some(&self.vf_head)),
            vf_on_features: vf.is_none(),
        })
    }

    /// The network for export: the body, the policy head, the value and
    /// the action distribution.
    fn exported(&self, p: &Params<D>) -> Result<PolicyExport, PolicyError> {
        let (encoding, body, lstm) = self.pi.exported(p)?;
        let value_layers = match &self.vf {
            Some(torso) => torso.exported(p)?.1,
            None => Vec::new(),
        };
        let value = ValueNet {
            on_features: self.vf.is_none(),
            layers: value_layers.into_iter().chain([self.vf_head.exported(p)]).collect(),
        };
        let action = match &self.dist {
            ActionDist::Categorical { n } => ActionHead::Categorical { nvec: vec![*n] },
            ActionDist::MultiCategorical { nvec } => ActionHead::Categorical { nvec: nvec.clone() },
            ActionDist::DiagGaussian { .. } => {
                let id = self.log_std.ok_or_else(|| PolicyError::Other("a Gaussian without log_std".into()))?;
                ActionHead::Gaussian { log_std: crate::model::to_vec(p.get(id)) }
            }
        };
        let head = vec![self.pi_head.exported(p)];
        let recurrent = lstm.map(Recurrent::Lstm);
        Ok(PolicyExport { normalization: None, encoding, body, recurrent, head, value: Some(value), action })
    }

    /// `V(s)` of observation rows without gradient, from `state` for an
    /// LSTM.
    fn values(&self, p: &Params<D>, obs: Values<'_>, state: Option<&[f32]>) -> Result<Vec<f32>, PolicyError> {
        let features = match &self.vf {
            Some(torso) => torso.forward(p, torso.input().encode(p.device(), obs)?),
            None => self.pi.act(p, obs, state)?.0,
        };
        Ok(crate::model::to_vec(&self.vf_head.forward(p, features)))
    }
}

/// [`ActorCriticNet`]'s fully connected layers copied to the host
/// ([`HostNet`]), current while `version` is the weights' version.
struct HostActing {
    version: u64,
    pi: HostNet,
    pi_head: HostNet,
    /// The value's layers and head, or its head alone on the policy's
    /// features when they share layers (`vf_on_features`).
    vf: HostNet,
    vf_on_features: bool,
}

/// An actor-critic policy's algorithm part: the loss `L` and the network.
pub struct ActorCritic<L, D: NetDevice> {
    loss_fn: L,
    net: ActorCriticNet<D>,
    /// The network on the host for acting, when it is on the CPU and fully
    /// connected.
    host: Option<HostActing>,
}

impl<L: ActorCriticLoss, D: NetDevice> ActorCritic<L, D> {
    /// The algorithm's loss (and its config).
    pub fn loss_fn(&self) -> &L {
        &self.loss_fn
    }

    fn recurrent(&self) -> bool {
        self.net.pi.lstm.is_some()
    }

    /// `V(s')` of `new_obs` at the rows that end a fragment, 0 elsewhere.
    fn values_at_ends(&self, p: &Params<D>, mb: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let ends = mb.f32(TRAJ_ENDS)?;
        let rows: Vec<usize> = (0..mb.len()).filter(|&t| ends[t] != 0.0).collect();
        let mut out = vec![0.0; mb.len()];
        if rows.is_empty() {
            return Ok(out);
        }
        for (&t, v) in rows.iter().zip(self.next_values(p, mb, &rows)?) {
            out[t] = v;
        }
        Ok(out)
    }

    /// `V(s')` of `batch`'s `new_obs` at `rows`, from the recurrent state
    /// the policy left there (`state_out`): bytes stay bytes until the
    /// network reads them.
    fn next_values(&self, p: &Params<D>, batch: &SampleBatch, rows: &[usize]) -> Result<Vec<f32>, PolicyError> {
        let new_obs = batch.values(fields::NEW_OBS)?;
        let obs = new_obs.gather(new_obs.len() / batch.len().max(1), rows);
        let obs = obs.values().ok_or_else(|| PolicyError::Other("`new_obs` holds no observation values".into()))?;
        let state = if self.recurrent() {
            let s = batch.f32(fields::STATE_OUT)?;
            let w = s.len() / batch.len();
            Some(rows.iter().flat_map(|&t| s[t * w..(t + 1) * w].iter().copied()).collect::<Vec<f32>>())
        } else {
            None
        };
        self.net.values(p, obs, state.as_deref())
    }

    /// Forward pass with the tape, loss and backward on a minibatch (padded
    /// sequences for an LSTM): the flat, unclipped gradient.
    fn backward(
        &self,
        core: &PolicyCore<D>,
        mb: &SampleBatch,
        seqs: Option<&crate::model::SeqLayout<'_>>,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let (p, n) = (&core.params, mb.len());
        let dev = p.device();
        let obs = mb.values(fields::OBS)?;
        let next_values = if L::NEEDS_NEXT_VALUES { Some(self.values_at_ends(p, mb)?) } else { None };
        let features = self.net.pi.learn(p, obs, seqs)?;
        let values = if !self.loss_fn.uses_values() {
            dev.zeros_like(&(n,)).leaky_traced()
        } else {
            let vf_features = match &self.net.vf {
                Some(torso) => torso.forward(p, torso.input().encode(dev, obs)?.leaky_traced()),
                None => features.with_empty_tape(),
            };
            self.net.vf_head.forward(p, vf_features).reshape_like(&(n,))
        };
        let logits = self.net.pi_head.forward(p, features);
        // The network's tape goes with whichever of the two the loss uses
        // (both reach the logits' gradient; `Forward::log_probs` is only
        // computed for a loss that uses it).
        let (logits, log_probs) = if L::NEEDS_LOG_PROBS {
            (logits.with_empty_tape(), Some(logits.log_softmax::<Axis<1>>()))
        } else {
            (logits, None)
        };
        let log_std = self.net.log_std.map(|id| p.get(id).retaped::<Taped<D>>());
        let actions = mb.get(fields::ACTIONS).ok_or_else(|| PolicyError::Other("the batch has no `actions`".into()))?;
        let mask = mb.get(fields::ACTION_MASK).map(|_| mb.f32(fields::ACTION_MASK)).transpose()?;
        let (logp, entropy) = self.net.dist.logp_entropy(logits, log_std, actions, mask)?;
        let rows = match mb.get(SEQ_MASK) {
            None => Rows { mask: None, count: n },
            Some(_) => {
                let m = mb.f32(SEQ_MASK)?.to_vec();
                let count = m.iter().filter(|&&x| x != 0.0).count();
                Rows { mask: Some((dev.tensor_from_vec(m.clone(), (n,)), m)), count }
            }
        };
        let fwd = Forward { logp, entropy, values, next_values, rows, log_probs };
        let (loss, mut stats) = self.loss_fn.loss(fwd, mb, dev)?;
        let (total, grad) = core.backward(loss, "loss", 0..core.num_params())?;
        stats.set("total_loss", total as f64);
        Ok((grad, stats))
    }

    /// `backward` on a batch of whole trajectories: as it is, or for an
    /// LSTM cut into padded sequences.
    fn backward_on(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        seqs: Option<Vec<std::ops::Range<usize>>>,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        match seqs {
            None => {
                let n = batch.len();
                let chunk = self.loss_fn.learner().chunk_rows.filter(|&c| c < n);
                let cpu = (self as &dyn std::any::Any).downcast_ref::<ActorCritic<L, Cpu>>().zip(core.as_cpu());
                // Not with chunks: they bound the activations alive at once.
                let halves =
                    cpu.filter(|_| chunk.is_none() && self.loss_fn.rows_independent() && n >= SIDE_BY_SIDE_ROWS);
                match (halves, chunk) {
                    (Some((policy, core)), _) => {
                        let (first, second) = (batch.slice(0..n / 2), batch.slice(n / 2..n));
                        let (a, b) = crate::model::side_by_side_pair(
                            || policy.backward(core, &first, None),
                            || policy.backward(core, &second, None),
                        );
                        Ok(weighted_sum_of_parts([(a?, first.len()), (b?, second.len())], n))
                    }
                    (None, Some(chunk)) => self.backward_in_chunks(core, batch, chunk),
                    (None, None) => self.backward(core, batch, None),
                }
            }
            Some(seqs) => {
                let padded = sequences::pad(batch, &seqs, TRAJ_ENDS)?;
                let layout = crate::model::SeqLayout {
                    num_seqs: padded.num_seqs,
                    max_len: padded.max_len,
                    initial_state: &padded.initial_state,
                };
                self.backward(core, &padded.batch, Some(&layout))
            }
        }
    }

    /// The gradient of `batch` taken `chunk` rows at a time (see
    /// [`LearnerSettings::chunk_rows`]); its statistics are the chunks'
    /// weighted by their rows.
    fn backward_in_chunks(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        chunk: usize,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let n = batch.len();
        let mut parts = Vec::new();
        for start in (0..n).step_by(chunk.max(1)) {
            let part = batch.slice(start..(start + chunk).min(n));
            parts.push((self.backward(core, &part, None)?, part.len()));
        }
        Ok(weighted_sum_of_parts(parts, n))
    }

    /// The batch's sequences for an LSTM (`None` without one).
    fn sequences(&self, batch: &SampleBatch) -> Result<Option<Vec<std::ops::Range<usize>>>, PolicyError> {
        if !self.recurrent() {
            return Ok(None);
        }
        Ok(Some(sequences::cut(batch.f32(TRAJ_ENDS)?, self.loss_fn.model().max_seq_len)))
    }
}

impl<L: ActorCriticLoss, D: NetDevice> ActorCritic<L, D> {
    /// The policy head's outputs, the values and the recurrent state out
    /// for `input`. On the CPU, a fully connected network acts through its
    /// copy on the host ([`HostNet`]), taken again when the weights change.
    #[allow(clippy::type_complexity)]
    fn heads(
        &mut self,
        core: &PolicyCore<D>,
        input: &PolicyInput<'_>,
    ) -> Result<(Vec<f32>, Vec<f32>, Option<Vec<f32>>), PolicyError> {
        let p = &core.params;
        if self.host.as_ref().is_none_or(|h| h.version != p.version()) {
            self.host = self.net.host(p);
        }
        // The policy's and the value's torsos encode observations alike.
        let encoding = self.net.pi.torso.input();
        let (logits, values, state_out) = match &self.host {
            Some(host) => {
                let x = encoding.encode_host(input.obs)?;
                let rows = x.len() / encoding.features().max(1);
                let features = host.pi.forward(&x, rows);
                let values = host.vf.forward(if host.vf_on_features { &features } else { &x }, rows);
                (host.pi_head.forward(&features, rows), values, None)
            }
            None => {
                let x = encoding.encode(p.device(), input.obs)?;
                let values = match &self.net.vf {
                    Some(torso) => Some(self.net.vf_head.forward(p, torso.forward(p, x.clone()))),
                    None => None,
                };
                let (features, state_out) = self.net.pi.act_on(p, x, input.state)?;
                let values = values.unwrap_or_else(|| self.net.vf_head.forward(p, features.clone()));
                let logits = crate::model::to_vec(&self.net.pi_head.forward(p, features));
                (logits, crate::model::to_vec(&values), state_out)
            }
        };
        Ok((logits, values, state_out))
    }
}

impl<L: ActorCriticLoss, D: NetDevice> PolicyAlgorithm<D> for ActorCritic<L, D> {
    type State = ();

    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let (logits, values, state_out) = self.heads(core, input)?;
        let p = &core.params;
        let log_std = self.net.log_std.map(|id| crate::model::to_vec(p.get(id)));
        let (actions, logp) =
            self.net.dist.sample(&logits, log_std.as_deref(), input.action_mask, input.explore, &mut core.rng)?;
        let mut out = SampleBatch::new();
        out.insert(fields::ACTIONS, actions)?;
        out.insert_f32(fields::ACTION_LOGP, logp, 1)?;
        out.insert_f32(fields::VF_PREDS, values, 1)?;
        if let Some(state) = state_out {
            out.insert_f32(fields::STATE_OUT, state, self.net.pi.state_size())?;
        }
        Ok(out)
    }

    /// The softmax of the policy head (one discrete choice).
    fn action_probabilities(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let (logits, _, _) = self.heads(core, &PolicyInput::obs(obs, false))?;
        self.net.dist.probabilities(&logits)
    }

    /// The Gaussian it samples from (a `Box` of actions): the head's means
    /// and `exp(log_std)`, unsquashed, in env units.
    fn action_distribution(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let (&ActionDist::DiagGaussian { dim }, Some(id)) = (&self.net.dist, self.net.log_std) else {
            return Err(PolicyError::Other(format!(
                "an action distribution is for a Box of actions, not {:?}",
                self.net.dist
            )));
        };
        let (mean, _, _) = self.heads(core, &PolicyInput::obs(obs, false))?;
        let log_std = crate::model::to_vec(core.params.get(id));
        let std = log_std.iter().map(|l| l.exp()).cycle().take(mean.len()).collect();
        Ok(GaussianActions { dim, mean, std, squash: Squash::None })
    }

    /// The softmax of the policy head and the value head (one discrete
    /// choice): what AlphaZero's search asks.
    fn policy_and_value(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>), PolicyError> {
        let (logits, values, _) = self.heads(core, &PolicyInput::obs(obs, false))?;
        Ok((self.net.dist.probabilities(&logits)?, values))
    }

    fn recurrent_state_size(&self) -> usize {
        self.net.pi.state_size()
    }

    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        self.net.exported(&core.params)
    }

    fn postprocess(&mut self, core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let bootstrap =
            if bootstrap_needed(traj)? { self.next_values(&core.params, traj, &[traj.len() - 1])?[0] } else { 0.0 };
        let mut ends = vec![0.0; traj.len()];
        if let Some(last) = ends.last_mut() {
            *last = 1.0;
        }
        traj.insert_f32(TRAJ_ENDS, ends, 1)?;
        self.loss_fn.postprocess(traj, bootstrap)
    }

    /// The gradient of the whole batch in one pass (A3C's workers, the
    /// multi-device learner's shards).
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let seqs = self.sequences(batch)?;
        self.backward_on(core, batch, seqs)
    }

    /// `num_sgd_iter` epochs of minibatch steps (over shuffled sequences
    /// for an LSTM).
    fn learn(&mut self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let settings = self.loss_fn.learner();
        let seqs = self.sequences(batch)?;
        let mut all = Vec::new();
        for _epoch in 0..settings.num_sgd_iter {
            let mut sgd_step = |core: &mut PolicyCore<D>, (mut grad, mut stats): (Vec<f32>, LearnerStats)| {
                stats.merge(core.step_all(&mut grad)?);
                all.push(stats);
                Ok::<_, PolicyError>(())
            };
            match (settings.sgd_minibatch_size, &seqs) {
                (Some(size), None) => {
                    let shuffle_seed = core.rng.gen();
                    for mb in batch.minibatches(size, shuffle_seed) {
                        let step = self.backward_on(core, &mb, None)?;
                        sgd_step(core, step)?;
                    }
                }
                (Some(size), Some(seqs)) => {
                    for group in sequences::groups(seqs, size, core.rng.gen()) {
                        let step = self.backward_on(core, batch, Some(group))?;
                        sgd_step(core, step)?;
                    }
                }
                (None, seqs) => {
                    let step = self.backward_on(core, batch, seqs.clone())?;
                    sgd_step(core, step)?;
                }
            }
        }
        let mut stats = LearnerStats::mean(&all);
        value_fit_stats(batch, &mut stats);
        Ok(stats)
    }

    fn state(&self) -> Self::State {}

    fn set_state(&mut self, (): Self::State) {}
}

/// An actor-critic policy with loss `loss` for the given spaces, on the
/// device its config names.
///
/// # Errors
/// [`BuildError::Config`] for a `model` that does not fit the spaces; a
/// device this build or machine does not have.
pub fn make_policy<L: ActorCriticLoss>(
    algorithm: &str,
    loss: &L,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    make_policy_on(algorithm, loss, observation_space, action_space, rng_seed, loss.learner().device)
}

/// [`make_policy`] on a given device (a replica of a multi-device learner).
///
/// # Errors
/// As [`make_policy`].
pub fn make_policy_on<L: ActorCriticLoss>(
    algorithm: &str,
    loss: &L,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
    device: DeviceSpec,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let build = Build { algorithm, loss, obs: observation_space, act: action_space, rng_seed };
    on_device(device, loss.learner().seed, build)
}

struct Build<'a, L> {
    algorithm: &'a str,
    loss: &'a L,
    obs: &'a Space,
    act: &'a Space,
    rng_seed: u64,
}

impl<L: ActorCriticLoss> OnDevice for Build<'_, L> {
    type Output = Box<dyn PolicyGraph>;

    fn run<D: NetDevice>(self, dev: D) -> Result<Self::Output, BuildError> {
        let mut params = Params::new(dev);
        let net = ActorCriticNet::build(self.algorithm, self.loss.model(), self.obs, self.act, &mut params)?;
        let learner = self.loss.learner();
        let mut core = PolicyCore::new(params, self.obs.clone(), self.act.clone(), self.rng_seed);
        let all = 0..core.num_params();
        match learner.optimizer {
            OptimizerChoice::Adam => core.add_optimizer(all, learner.lr, 1e-5, learner.grad_clip),
            OptimizerChoice::Rmsprop => core.add_rmsprop(all, learner.lr, 0.99, 1e-5, learner.grad_clip),
        };
        Ok(Box::new(DeepPolicy::new(core, ActorCritic { loss_fn: self.loss.clone(), net, host: None })))
    }
}

/// Policies of the actor-critic algorithm `name` with `loss`, for
/// [`spawn_evaluators`](crate::common::sampling::spawn_evaluators).
pub fn actor_critic_policies<L: ActorCriticLoss>(name: &'static str, loss: L) -> PolicyMaker {
    Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(name, &loss, o, a, seed))
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
    let (obs, act) = evaluators.local().spaces();
    let replicas = (1..num_devices)
        .map(|i| make_policy_on(name, loss, &obs, &act, 0, learner.device.replica(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let config = MultiDeviceConfig {
        num_sgd_iter: learner.num_sgd_iter,
        sgd_minibatch_size: learner.sgd_minibatch_size,
        seed: learner.seed,
    };
    let learner = MultiDeviceLearner::new(replicas, config).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Some(learner))
}
/// The synchronous execution plan of PG, A2C and PPO: evaluators with
/// `loss`'s policies (`name`'s), sampling as `batch` says, running the
/// framework's [`SyncSamplesOptimizer`]. Each round the advantages are
/// standardized over the whole train batch before the policy's update
/// (`learn_on_batch`: one gradient step for PG and A2C, PPO's SGD epochs),
/// split over `num_devices` replicas when more than one.
///
/// # Errors
/// An env that cannot be built or has unsupported spaces, a device that
/// cannot be opened, an evaluator that fails to start.
pub async fn sync_trainer<L: ActorCriticLoss>(
    ctx: &BuildContext,
    name: &'static str,
    make_env: EnvMaker,
    loss: L,
    batch: &SyncBatch,
    num_devices: usize,
) -> Result<Trainer, BuildError> {
    let (_, learning, sampling) = loss.sections();
    let settings = batch.settings(sampling, learning.gamma);
    let evaluators = spawn_evaluators(ctx, make_env, actor_critic_policies(name, loss.clone()), settings).await?;
    let devices = multi_device_learner(name, &loss, &evaluators, num_devices)?;
    let step = SyncSamplesConfig {
        standardize_fields: if L::STANDARDIZES_ADVANTAGES { vec![fields::ADVANTAGES.to_string()] } else { Vec::new() },
        min_sample_fraction: batch.min_sample_fraction,
    };
    Ok(Trainer::new(evaluators, Box::new(SyncSamplesOptimizer::new(step).with_devices(devices))))
}
