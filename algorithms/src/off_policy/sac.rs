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
//!   scaled to the action bounds as in [`crate::off_policy::ddpg`]. Its log-density is
//!   the Gaussian's minus the `tanh` Jacobian (the paper's appendix C):
//!   `log π(u|s) = Σ_i [log N(x_i; m_i, σ_i) − log(1 − tanh²(x_i))]`, with
//!   `log(1 − tanh² x) = 2 (log 2 − x − softplus(−2x))` for stability.
//!   Acting without exploration takes `tanh(m(s))`.
//! - **Twin critics and targets.** Both critics regress on
//!   `y = R + γ^k (1 − terminated) (min_j Q'_j(s', u') − α log π(u'|s'))`
//!   (CQL, with `min_q_weight` > 0, leaves out `− α log π`: see
//!   `backup_entropy`)
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
//! Execution: [`SyncReplayOptimizer`](rlx::SyncReplayOptimizer) with uniform replay; by default one
//! minibatch per sampled env step.
//!
//! Learner metrics (`learner.*`): `critic_loss`, `actor_loss`, `alpha`,
//! `alpha_loss`, `entropy` (`−mean log π` of the replayed states, a sample
//! estimate), `mean_q`, `mean_target_q`, `mean_td_error` (mean
//! `|Q_1 − y|`), `critic_grad_norm` and `actor_grad_norm` (before
//! clipping), `num_updates` and `replay_buffer_size`.

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{join_on_cpu, DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::sections::{Learning, Replay, Sampling};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::{to_vec, Input, Linear, Matrix, Mlp, ModelConfig, ParamId, Params};
use crate::off_policy::core::{
    self as core, bellman_targets, continuous_algorithm, critic_gradient, critic_input_taped, min_q, replay_trainer,
    soft_update_target, squash_log_std, squashed_log_std, step_groups, ActionBounds, Conservative, ContinuousBuild,
    ContinuousLearning, ContinuousPolicy, Critic, Networks, Sections,
};
use dfdx::prelude::*;
use rand::Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, check_count, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::export::{ActionHead, Layer, PolicyExport};
use rlx::gaussian_actions::GaussianActions;
use rlx::postprocessing::n_step_returns;
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space, Trainer};
use serde::{Deserialize, Serialize};

pub use crate::off_policy::core::{LOG_STD_MAX, LOG_STD_MIN};

/// SAC's configuration: the sampling, replay and learning sections, the
/// keys DDPG, TD3 and SAC share, and the entropy temperature's. Every key
/// is optional in `--config`; unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct SacConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Fragments, buffer, minibatches, n-step returns.
    #[serde(flatten)]
    pub replay: Replay,
    /// Random warm-up, learning rates, Polyak averaging (of the critics).
    #[serde(flatten)]
    pub continuous: ContinuousLearning,
    /// Adam learning rate of `log α`.
    pub alpha_lr: f64,
    /// The entropy temperature α at the start (fixed if `tune_alpha` is
    /// false).
    pub initial_alpha: f64,
    /// Learn α so that the policy's entropy tracks `target_entropy`.
    pub tune_alpha: bool,
    /// The entropy α is tuned towards; `null` is `−(action dimensions)`.
    pub target_entropy: Option<f64>,
    /// CQL (continuous; Kumar et al. 2020): the weight of the conservative
    /// penalty on each critic, for learning from `input` (RLlib's CQL uses
    /// 5). 0, the default, is plain SAC.
    pub min_q_weight: f64,
    /// CQL: actions drawn per replayed row for the penalty's log-sum-exp,
    /// in each of three sets (uniform, the policy's at `s`, the policy's at
    /// `s'`), as RLlib's `num_actions`.
    pub num_actions: usize,
    /// Whether the critics' target keeps the entropy term `−α log π(u'|s')`.
    /// `null`, the default, keeps it for plain SAC and drops it with CQL's
    /// penalty (`min_q_weight` > 0), as the CQL authors' code
    /// (`backup_entropy`), RLlib's CQL and d3rlpy's (`soft_q_backup`) do:
    /// with α still near its start of 1, the bonus lifted every target by
    /// the policy's entropy, and HalfCheetah's greedy return stayed near 0
    /// for the first 15,000 updates.
    pub backup_entropy: Option<bool>,
    /// γ, gradient clip (of each network), the actor's and the critics'
    /// hidden layers, device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for SacConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            replay: Replay { buffer_size: 100_000, train_batch_size: 256, ..Replay::default() },
            continuous: ContinuousLearning::default(),
            alpha_lr: 1e-3,
            initial_alpha: 1.0,
            tune_alpha: true,
            target_entropy: None,
            min_q_weight: 0.0,
            num_actions: 10,
            backup_entropy: None,
            learning: Learning { model: ModelConfig::relu(), ..Learning::default() },
        }
    }
}

impl Validate for SacConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.sections().validate(Self::NAME)?;
        check("alpha_lr", self.alpha_lr, self.alpha_lr > 0.0 && self.alpha_lr.is_finite(), "must be > 0")?;
        let a = self.initial_alpha;
        check("initial_alpha", a, a > 0.0 && a.is_finite(), "must be > 0")?;
        if let Some(h) = self.target_entropy {
            check("target_entropy", h, h.is_finite(), "must be a finite number or null")?;
        }
        let w = self.min_q_weight;
        check("min_q_weight", w, w >= 0.0 && w.is_finite(), "must be >= 0 (0 is plain SAC)")?;
        check_count("num_actions", self.num_actions, 1, 1_000)?;
        Ok(())
    }
}

/// A reparameterized sample of the squashed Gaussian and its log-density.
///
/// # Shapes
/// `mean`, `raw_log_std` and the standard-normal draws `eps` are `[n, A]`;
/// returns the normalized action `tanh(mean + σ ε)` (`[n, A]`) and
/// `log π` (`[n]`), both on `mean`'s tape (`T` = `NoneTape` for targets).
fn squashed_sample<D: NetDevice, T: Tape<f32, D> + Merge<T>>(
    dev: &D,
    mean: Matrix<D, T>,
    raw_log_std: Matrix<D, T>,
    eps: &[f32],
) -> (Matrix<D, T>, Tensor<(usize,), f32, D, T>) {
    let shape = *mean.shape();
    let log_std = squashed_log_std(raw_log_std);
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

/// The Gaussian actor: hidden layers, then a mean head and a (pre-squash)
/// log-standard-deviation head.
struct Actor {
    mlp: Mlp,
    mean: Linear,
    log_std: Linear,
}

impl Actor {
    /// `(mean, raw log-std)` of every row of encoded observations.
    fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> (Matrix<D, T>, Matrix<D, T>) {
        let h = self.mlp.forward(p, x);
        let raw = self.log_std.forward(p, h.with_empty_tape());
        (self.mean.forward(p, h), raw)
    }
}

/// The random draws of one CQL penalty: uniform normalized actions, and
/// standard-normal draws for the policy's actions at `s` and at `s'`
/// (each `rows × num_actions × A`); empty without CQL.
struct CqlDraws {
    uniform: Vec<f32>,
    now: Vec<f32>,
    next: Vec<f32>,
}

impl CqlDraws {
    fn take<D: NetDevice>(core: &mut PolicyCore<D>, n: usize, on: bool) -> Self {
        if !on {
            return Self { uniform: Vec::new(), now: Vec::new(), next: Vec::new() };
        }
        let uniform = (0..n).map(|_| core.rng.gen_range(-1.0f32..1.0)).collect();
        Self { uniform, now: Sac::normal(core, n), next: Sac::normal(core, n) }
    }
}

/// SAC's part of the policy: the Gaussian actor, the twin critics, `log
/// α`. The weights are the actor's, each critic's, then `log α`; the
/// core's optimizers 0, 1 and 2 are the actor's, the critics' and `log
/// α`'s.
pub struct Sac {
    cfg: SacConfig,
    input: Input,
    bounds: ActionBounds,
    actor: Actor,
    critics: Vec<Critic>,
    log_alpha: ParamId,
    target_entropy: f32,
    /// This evaluator's share of `random_timesteps`.
    random_steps: u64,
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
}

const ACTOR: usize = 0;
const CRITICS: usize = 1;
const ALPHA: usize = 2;

impl Sac {
    /// The entropy temperature α now.
    pub fn alpha<D: NetDevice>(&self, p: &Params<D>) -> f32 {
        p.get(self.log_alpha).as_vec()[0].exp()
    }

    /// `n` standard-normal draws.
    fn normal<D: NetDevice>(core: &mut PolicyCore<D>, n: usize) -> Vec<f32> {
        (0..n).map(|_| core.rng.sample(StandardNormal)).collect()
    }

    /// Whether the targets keep `−α log π(u'|s')` (`backup_entropy`).
    fn backs_up_entropy(&self) -> bool {
        self.cfg.backup_entropy.unwrap_or(self.cfg.min_q_weight == 0.0)
    }

    /// The target `y = R + γ^k (1 − terminated) (min_j Q'_j(s', u') − α log
    /// π(u'|s'))` of every row (without the `α log π` term where
    /// [`Self::backs_up_entropy`] says so), `u' ~ π(·|s')` with the
    /// standard-normal draws `eps` (`rows × A`).
    fn td_targets<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        eps: &[f32],
    ) -> Result<Vec<f32>, PolicyError> {
        let new_obs = batch.values(fields::NEW_OBS)?;
        let s = self.input.encode_host(new_obs)?;
        let rows = batch.len();
        let (p, target) = (&core.params, core.target.as_ref().expect("SAC keeps target critics"));
        let dev = p.device();
        let (mean, raw) = self.actor.forward(p, dev.tensor_from_vec(s.clone(), (rows, self.input.features())));
        let (u, logp) = squashed_sample(dev, mean, raw, eps);
        let u = u.as_vec();
        let q_min = min_q(&self.critics, target, (&u, self.bounds.dim(), &s, self.input.features()), false)?;
        let alpha = if self.backs_up_entropy() { self.alpha(p) } else { 0.0 };
        let soft: Vec<f32> = q_min.iter().zip(logp.as_vec()).map(|(q, lp)| q - alpha * lp).collect();
        bellman_targets(batch, &soft)
    }

    /// The critics' half of an update: the targets, then the critics'
    /// summed MSE gradient (critics' span), with CQL's penalty if
    /// `min_q_weight` > 0 (`cql` holds its draws). With the penalty the
    /// critics' passes over every row's drawn actions are nearly all of
    /// an update, so the twins run side by side too, and the thread that
    /// finishes the actor's half takes one of them.
    fn critic_half<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        eps: &[f32],
        cql: &CqlDraws,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let targets = self.td_targets(core, batch, eps)?;
        let critics = (&self.input, &self.bounds);
        let conservative = self.conservative(core, batch, cql)?;
        let range = (core.range(CRITICS), conservative.is_some());
        critic_gradient(core, &self.critics, critics, batch, &targets, range, conservative.as_ref())
    }

    /// CQL's drawn actions for `batch` (none without `min_q_weight`): per
    /// row, `num_actions` uniform ones (density `2^−A` in the normalized
    /// box), then as many of the policy at `s` and at `s'`, each with its
    /// log-density, as in the CQL authors' code and RLlib's.
    fn conservative<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        draws: &CqlDraws,
    ) -> Result<Option<Conservative>, PolicyError> {
        if self.cfg.min_q_weight == 0.0 {
            return Ok(None);
        }
        let (rows, n, a) = (batch.len(), self.cfg.num_actions, self.bounds.dim());
        let p = &core.params;
        let dev = p.device();
        let mut policy = Vec::new();
        // The actor's outputs once per row, each repeated for the row's
        // `n` draws (its pass over `n` copies of every row cost a tenth of
        // an update at 256-wide layers).
        let repeat = |m: Matrix<D>| {
            let width = m.shape().1;
            let repeated: Vec<f32> =
                m.as_vec().chunks_exact(width).flat_map(|row| std::iter::repeat_n(row, n).flatten()).copied().collect();
            dev.tensor_from_vec(repeated, (rows * n, width))
        };
        for (field, eps) in [(fields::OBS, &draws.now), (fields::NEW_OBS, &draws.next)] {
            let s = self.input.encode(dev, batch.values(field)?)?;
            let (mean, raw) = self.actor.forward(p, s);
            let (u, logp) = squashed_sample(dev, repeat(mean), repeat(raw), eps);
            policy.push((u.as_vec(), logp.as_vec()));
        }
        let uniform_density = -(a as f32) * std::f32::consts::LN_2;
        let (mut actions, mut log_density) = (Vec::with_capacity(rows * 3 * n * a), Vec::with_capacity(rows * 3 * n));
        for r in 0..rows {
            actions.extend_from_slice(&draws.uniform[r * n * a..(r + 1) * n * a]);
            log_density.extend(std::iter::repeat_n(uniform_density, n));
            for (u, logp) in &policy {
                actions.extend_from_slice(&u[r * n * a..(r + 1) * n * a]);
                log_density.extend_from_slice(&logp[r * n..(r + 1) * n]);
            }
        }
        Ok(Some(Conservative { weight: self.cfg.min_q_weight as f32, n: 3 * n, actions, log_density }))
    }

    /// The actor loss `mean(α log π(ũ|s) − min_j Q_j(s, ũ))` and its
    /// gradient (actor's span), and the gradient of the temperature loss
    /// `−log α · mean(log π(ũ|s) + H̄)` with respect to `log α`.
    fn actor_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        eps: &[f32],
    ) -> Result<(Vec<f32>, f32, LearnerStats), PolicyError> {
        let mut stats = LearnerStats::default();
        let rows = batch.len();
        let p = &core.params;
        let dev = p.device();
        let s = self.input.encode(dev, batch.values(fields::OBS)?)?;
        let (mean, raw) = self.actor.forward(p, s.clone().leaky_traced());
        let (u, logp) = squashed_sample(dev, mean, raw, eps);
        let logp_host = logp.as_vec();
        let q1 = self.critics[0].forward_frozen(p, critic_input_taped(u.with_empty_tape(), s.clone()));
        let q2 = self.critics[1].forward_frozen(p, critic_input_taped(u, s));
        let q = q1.minimum(q2).reshape_like(&(rows,));
        let alpha = self.alpha(p);
        let (value, grad) = core.backward((logp * alpha - q).mean(), "actor loss", core.range(ACTOR))?;
        let log_alpha = alpha.ln();
        let mean_logp = logp_host.iter().map(|&l| l as f64).sum::<f64>() / rows.max(1) as f64;
        let alpha_grad = if self.cfg.tune_alpha { -(mean_logp as f32 + self.target_entropy) } else { 0.0 };
        stats.set("actor_loss", value as f64);
        stats.set("entropy", -mean_logp);
        stats.set("alpha", alpha as f64);
        stats.set("alpha_loss", -(log_alpha as f64) * (mean_logp + self.target_entropy as f64));
        Ok((grad, alpha_grad, stats))
    }
}

impl<D: NetDevice> PolicyAlgorithm<D> for Sac {
    type State = u64;

    /// The actor for export: one head layer of the means then the raw
    /// log standard deviations.
    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        let p = &core.params;
        let (inputs, a) = (self.actor.mean.inputs(), self.actor.mean.outputs());
        let ((wm, bm), (ws, bs)) = (self.actor.mean.exported_weights(p), self.actor.log_std.exported_weights(p));
        let weight = wm.chunks_exact(a).zip(ws.chunks_exact(a)).flat_map(|(m, s)| m.iter().chain(s)).copied().collect();
        let head = Layer::Dense { inputs, outputs: 2 * a, weight, bias: bm.into_iter().chain(bs).collect() };
        let (low, high) = self.bounds.low_high();
        Ok(PolicyExport {
            normalization: None,
            encoding: self.input.exported()?,
            body: self.actor.mlp.exported(p),
            recurrent: None,
            head: vec![head],
            value: None,
            action: ActionHead::SquashedGaussian { low, high, log_std_range: (LOG_STD_MIN, LOG_STD_MAX) },
        })
    }

    /// The squashed Gaussian it samples once its random steps are over:
    /// `tanh(u)`, `u ~ N(m(s), σ(s)²)`, scaled into the bounds.
    fn action_distribution(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let (mean, raw) = self.actor.forward(&core.params, self.input.encode(core.params.device(), obs)?);
        let std = to_vec(&raw).into_iter().map(|r| squash_log_std(r).exp()).collect();
        Ok(self.bounds.squashed_gaussian(to_vec(&mean), std))
    }

    /// When exploring, uniformly random actions for this evaluator's share
    /// of `random_timesteps`, then samples of the squashed Gaussian, each
    /// with its log-density (`action_logp`, what off-policy estimates
    /// weigh logged actions by); otherwise `tanh(m(s))`. In env units.
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let a = self.bounds.dim();
        let (mean, raw) = self.actor.forward(&core.params, self.input.encode(core.params.device(), input.obs)?);
        let mut u = to_vec(&mean);
        if !input.explore {
            u.iter_mut().for_each(|x| *x = x.tanh());
            return self.bounds.actions_batch(&u);
        }
        let std = to_vec(&raw).into_iter().map(|r| squash_log_std(r).exp()).collect();
        let dist = self.bounds.squashed_gaussian(u.clone(), std);
        let mut random_rows = Vec::with_capacity(u.len() / a.max(1));
        for (row, std) in u.chunks_exact_mut(a).zip(dist.std.chunks_exact(a)) {
            let random = self.steps_explored < self.random_steps;
            random_rows.push(random);
            for (x, &sd) in row.iter_mut().zip(std) {
                *x = if random {
                    // Uniform after the tanh below: draw the squashed
                    // value and take it back through atanh.
                    let v: f32 = core.rng.gen_range(-0.999_999..0.999_999);
                    v.atanh()
                } else {
                    let eps: f32 = core.rng.sample(StandardNormal);
                    *x + sd * eps
                };
            }
            self.steps_explored += 1;
        }
        u.iter_mut().for_each(|x| *x = x.tanh());
        let mut out = self.bounds.actions_batch(&u)?;
        // σ ≥ e⁻⁵ > 0, unless the actor's output is not a number.
        let mut logp = dist.log_density(out.f32(fields::ACTIONS)?).unwrap_or_else(|| vec![f32::NAN; random_rows.len()]);
        // A uniform draw's density is that of the box.
        let uniform = self.bounds.uniform_log_density();
        logp.iter_mut().zip(&random_rows).filter(|(_, &random)| random).for_each(|(lp, _)| *lp = uniform);
        out.insert_f32(fields::ACTION_LOGP, logp, 1)?;
        Ok(out)
    }

    /// n-step returns and each row's bootstrap discount.
    fn postprocess(&mut self, _core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(n_step_returns(traj, self.cfg.replay.n_step, self.cfg.learning.gamma as f32)?)
    }

    /// The gradients of the actor, the critics and `log α`, in the weights'
    /// layout. The critics' half and the actor's read the same weights and
    /// run side by side on the CPU ([`join_on_cpu`]).
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let n = batch.len() * self.bounds.dim();
        // Both halves' draws, in the order they have always been taken;
        // then CQL's, if it is on.
        let (target_eps, actor_eps) = (Self::normal(core, n), Self::normal(core, n));
        let cql = CqlDraws::take(core, n * self.cfg.num_actions, self.cfg.min_q_weight > 0.0);
        let (critic, actor) = join_on_cpu!(
            &*core,
            |c| self.critic_half(c, batch, &target_eps, &cql),
            self.actor_gradient(c, batch, &actor_eps)
        );
        let ((critic_grad, mut stats), (mut grad, alpha_grad, actor_stats)) = (critic?, actor?);
        stats.merge(actor_stats);
        grad.extend(critic_grad);
        grad.push(alpha_grad);
        Ok((grad, stats))
    }

    /// One step of the critics, the actor and (with `tune_alpha`) `log α`,
    /// then the target critics move by `tau`.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        step_groups(core, &[(CRITICS, "critic_grad_norm"), (ACTOR, "actor_grad_norm")], grad, &mut stats)?;
        if self.cfg.tune_alpha {
            let range = core.range(ALPHA);
            core.step(ALPHA, &mut grad[range])?;
        }
        soft_update_target(core, self.cfg.continuous.tau);
        Ok(stats)
    }

    fn state(&self) -> u64 {
        self.steps_explored
    }

    fn set_state(&mut self, steps_explored: u64) {
        self.steps_explored = steps_explored;
    }
}

/// The policy's networks and optimizers on `dev`; `log α` follows the
/// critics in the weights and has the core's third optimizer.
fn policy<D: NetDevice>(b: ContinuousBuild<'_, SacConfig>, dev: D) -> Result<DeepPolicy<Sac, D>, BuildError> {
    let cfg = b.cfg;
    let mut p = Params::new(dev);
    let networks = b.networks(&mut p, ["mean", "log_std"], 2);
    let alpha_start = p.next_id();
    let log_alpha = p.constant("log_alpha", &[1], &[(cfg.initial_alpha as f32).ln()]);
    let alpha_range = p.range(alpha_start, p.next_id());
    let mut core = b.core(p, &networks);
    core.add_optimizer(alpha_range, cfg.alpha_lr, 1e-8, None);
    let Networks { hidden, heads: [mean, log_std], critics, .. } = networks;
    let sac = Sac {
        target_entropy: cfg.target_entropy.map_or(-(b.bounds.dim() as f32), |h| h as f32),
        random_steps: cfg.continuous.random_steps_per_evaluator(&cfg.sampling),
        cfg: cfg.clone(),
        input: b.input,
        bounds: b.bounds,
        actor: Actor { mlp: hidden, mean, log_std },
        critics,
        log_alpha,
        steps_explored: 0,
    };
    Ok(DeepPolicy::new(core, sac))
}

continuous_algorithm!(SacConfig, "SAC", "SAC", policy);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::off_policy::core::{critic_input, fixtures::*};

    type Policy = DeepPolicy<Sac, Cpu>;

    fn policy_with(cfg: SacConfig, rng_seed: u64) -> Policy {
        on_cpu(&cfg, rng_seed, super::policy)
    }

    fn policy(cfg: SacConfig) -> Policy {
        policy_with(cfg, 0)
    }

    fn alpha(p: &Policy) -> f32 {
        p.algorithm().alpha(&p.core().params)
    }

    fn critics(p: &Policy) -> (Vec<f32>, Vec<f32>) {
        let r = p.core().range(CRITICS);
        (p.core().params.read(r.clone()), p.core().target.as_ref().unwrap().read(r))
    }

    #[test]
    fn squashed_gaussian_log_prob_matches_the_direct_formula() {
        let dev = Cpu::default();
        let mean = vec![0.3f32, -1.2, 0.0, 2.5, -0.7, 0.9];
        let raw = vec![-0.5f32, 0.2, 1.5, -2.0, 0.0, 0.7];
        let eps = vec![0.4f32, -1.1, 0.05, 1.8, -0.3, 2.2];
        let (u, logp) = squashed_sample(
            &dev,
            dev.tensor_from_vec(mean.clone(), (3usize, 2usize)),
            dev.tensor_from_vec(raw.clone(), (3usize, 2usize)),
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
            dev.tensor_from_vec(vec![30.0f32], (1usize, 1usize)),
            dev.tensor_from_vec(vec![0.0f32], (1usize, 1usize)),
            &[0.0],
        );
        assert!(logp.as_vec()[0].is_finite());
    }

    /// The target is soft (with `−α log π`) for plain SAC and hard with
    /// CQL's penalty, unless `backup_entropy` says otherwise.
    #[test]
    fn targets_are_bellman_with_the_min_of_twin_targets_and_the_entropy_where_asked() {
        for (min_q_weight, backup_entropy, entropy_weight) in
            [(0.0, None, 0.5), (5.0, None, 0.0), (5.0, Some(true), 0.5), (0.0, Some(false), 0.0)]
        {
            let p = policy(SacConfig { initial_alpha: 0.5, min_q_weight, backup_entropy, ..SacConfig::default() });
            let b = batch();
            let new_obs = b.f32(fields::NEW_OBS).unwrap().to_vec();
            let mut rng = p.core().rng.clone();
            let eps: Vec<f32> = (0..4).map(|_| rng.sample(StandardNormal)).collect();
            let params = p.core().params.clone();
            let target = p.core().target.clone().unwrap();
            let (mean, raw) = p
                .algorithm()
                .actor
                .forward(&params, params.device().tensor_from_vec(new_obs.clone(), (4usize, 3usize)));
            let (mean, raw) = (mean.as_vec(), raw.as_vec());
            let r = b.f32(fields::REWARDS).unwrap().to_vec();
            let targets = p.algorithm().td_targets(p.core(), &b, &eps).unwrap();
            for i in 0..4 {
                let (log_std, x) = (squash_log_std(raw[i]), mean[i] + squash_log_std(raw[i]).exp() * eps[i]);
                let a = x.tanh();
                let logp =
                    -0.5 * eps[i] * eps[i] - log_std - 0.5 * (2.0 * std::f32::consts::PI).ln() - (1.0 - a * a).ln();
                let xin = critic_input(params.device(), &[a], 1, &new_obs[i * 3..i * 3 + 3], 3).unwrap();
                let q1 = p.algorithm().critics[0].forward(&target, xin.clone()).as_vec()[0];
                let q2 = p.algorithm().critics[1].forward(&target, xin).as_vec()[0];
                let next = if i == 2 { 0.0 } else { 0.99 * (q1.min(q2) - entropy_weight * logp) };
                let case = format!("min_q_weight {min_q_weight}, backup_entropy {backup_entropy:?}, row {i}");
                assert!((targets[i] - (r[i] + next)).abs() < 1e-4, "{case}: {} vs {}", targets[i], r[i] + next);
                // The entropy term is large enough here to tell the cases apart.
                assert!((0.5 * 0.99 * logp).abs() > 1e-2 || i == 2, "{case}: log π {logp}");
            }
        }
    }

    /// CQL's penalty makes the critics conservative: after the same
    /// updates on the same logged rows, the logged actions' values stand
    /// further above other actions' than plain SAC's.
    #[test]
    fn min_q_weight_pushes_unlogged_actions_below_the_logged_ones() {
        let gap = |min_q_weight: f64| {
            let cfg = SacConfig { min_q_weight, ..SacConfig::default() };
            let mut p = policy(cfg);
            let b = batch();
            let mut stats = LearnerStats::default();
            for _ in 0..300 {
                stats = p.learn_on_batch(&b).unwrap();
            }
            let sac = p.algorithm();
            let obs = b.f32(fields::OBS).unwrap();
            let logged = sac.bounds.to_normalized(b.f32(fields::ACTIONS).unwrap());
            let q = min_q(&sac.critics, &p.core().params, (&logged, 1, obs, 3), false).unwrap();
            // Every row's value at 9 actions across the box.
            let grid: Vec<f32> = (0..4).flat_map(|_| (0..9).map(|i| -1.0 + 0.25 * i as f32)).collect();
            let rows: Vec<f32> = obs.chunks(3).flat_map(|r| std::iter::repeat_n(r, 9).flatten()).copied().collect();
            let q_grid = min_q(&sac.critics, &p.core().params, (&grid, 1, &rows, 3), false).unwrap();
            let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
            (mean(&q) - mean(&q_grid), stats)
        };
        let ((plain, plain_stats), (conservative, stats)) = (gap(0.0), gap(5.0));
        assert!(plain_stats.get("cql_penalty").is_none() && stats.get("cql_penalty").is_some(), "{stats:?}");
        assert!(conservative > plain + 1.0, "logged minus other actions' Q: SAC {plain}, CQL {conservative}");
    }

    #[test]
    fn the_halves_side_by_side_equal_the_halves_one_after_the_other() {
        // On the CPU the critics' and the actor's halves run on two threads;
        // the gradient is the one they give in turn on one thread.
        let mut p = policy(SacConfig::default());
        assert!(p.core().as_cpu().is_some(), "the CPU path is the one under test");
        let b = batch();
        let mut rng = p.core().rng.clone();
        let mut draws = || -> Vec<f32> { (0..4).map(|_| rng.sample(StandardNormal)).collect() };
        let (target_eps, actor_eps) = (draws(), draws());
        let no_cql = CqlDraws { uniform: Vec::new(), now: Vec::new(), next: Vec::new() };
        let (critic, _) = p.algorithm().critic_half(p.core(), &b, &target_eps, &no_cql).unwrap();
        let (mut expected, alpha, _) = p.algorithm().actor_gradient(p.core(), &b, &actor_eps).unwrap();
        expected.extend(critic);
        expected.push(alpha);
        let (got, stats) = p.compute_gradients(&b).unwrap();
        assert_eq!(got, expected);
        assert!(stats.get("critic_loss").is_some() && stats.get("actor_loss").is_some(), "{stats:?}");
    }

    /// Off-policy estimates average a fitted Q over the distribution the
    /// policy reports: its moments must be those of the actions it draws.
    #[test]
    fn the_reported_action_distribution_is_the_one_it_samples() {
        let mut p = policy(SacConfig::default());
        let s = [0.3f32, -0.6, 0.9];
        let burn = p.algorithm().random_steps as usize;
        assert!(burn > 0, "SAC's default plays uniformly random actions first");
        let mut random = SampleBatch::new();
        p.compute_actions(&s.repeat(burn), true, &mut random).unwrap();
        // Uniform over [−2, 2]: a density of ¼.
        let uniform = random.f32(fields::ACTION_LOGP).unwrap();
        assert!(uniform.iter().all(|&l| (l + 4f32.ln()).abs() < 1e-6), "{uniform:?}");
        let n = 40_000;
        let mut out = SampleBatch::new();
        p.compute_actions(&s.repeat(n), true, &mut out).unwrap();
        let a = out.f32(fields::ACTIONS).unwrap();
        let mean = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        let square = a.iter().map(|&x| f64::from(x * x)).sum::<f64>() / n as f64;
        let dist = p.action_distribution(&s).unwrap();
        let b = dist.expected_features();
        // Each drawn action comes with its density under that distribution.
        let logp = out.f32(fields::ACTION_LOGP).unwrap();
        let first = GaussianActions { mean: dist.mean.repeat(4), std: dist.std.repeat(4), ..dist.clone() };
        let reported = first.log_density(&a[..4]).unwrap();
        assert!(logp[..4].iter().zip(&reported).all(|(x, y)| (x - y).abs() < 1e-4), "{logp:?} {reported:?}");
        assert!(dist.std[0] > 0.1, "a spread worth testing: {dist:?}");
        assert!((mean - f64::from(b[1])).abs() < 0.02, "drawn mean {mean}, reported {b:?}");
        assert!((square - f64::from(b[2])).abs() < 0.03, "drawn mean square {square}, reported {b:?}");
    }

    #[test]
    fn alpha_tracks_the_target_entropy() {
        let b = batch();
        for (target_entropy, rises) in [(10.0, true), (-10.0, false)] {
            let mut p = policy(SacConfig { target_entropy: Some(target_entropy), ..SacConfig::default() });
            let before = alpha(&p);
            let stats = p.learn_on_batch(&b).unwrap();
            assert_eq!(alpha(&p) > before, rises, "target entropy {target_entropy}: {stats:?}");
            assert_eq!(stats.get("alpha"), Some(before as f64));
        }
        let mut fixed = policy(SacConfig { tune_alpha: false, initial_alpha: 0.2, ..SacConfig::default() });
        fixed.learn_on_batch(&b).unwrap();
        assert!((alpha(&fixed) - 0.2).abs() < 1e-6);
    }

    #[test]
    fn learning_lowers_the_actor_loss_and_moves_targets_by_tau() {
        let mut p = policy(SacConfig {
            continuous: ContinuousLearning {
                actor_lr: 1e-2,
                critic_lr: 1e-2,
                tau: 0.1,
                ..ContinuousLearning::default()
            },
            ..SacConfig::default()
        });
        let b = batch();
        let target0 = critics(&p).1;
        let first = p.learn_on_batch(&b).unwrap();
        let (critics, targets) = critics(&p);
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

        let mut z = policy_with(SacConfig::default(), 7);
        z.set_weights(&y.get_weights()).unwrap();
        z.load_state(&y.save_state().unwrap()).unwrap();
        assert_eq!(alpha(&z), alpha(&y));
        y.learn_on_batch(&b).unwrap();
        z.learn_on_batch(&b).unwrap();
        assert_eq!(y.get_weights(), z.get_weights(), "a restored policy continues exactly");
        assert!(z.load_state(b"junk").is_err());
    }

    #[test]
    fn acting_stays_in_bounds_and_bad_configs_name_the_key() {
        let mut p = policy(SacConfig {
            continuous: ContinuousLearning { random_timesteps: 0, ..ContinuousLearning::default() },
            ..SacConfig::default()
        });
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
        // Any width: 3 action dimensions in [0, 1].
        let three = Space::uniform_box(0.0, 1.0, vec![3]).unwrap();
        let mut p =
            make_policy(&SacConfig::default(), &Space::uniform_box(-1.0, 1.0, vec![11]).unwrap(), &three, 0).unwrap();
        p.compute_actions(&[0.2; 22], true, &mut out).unwrap();
        assert!(out.f32(fields::ACTIONS).unwrap().iter().all(|a| (0.0..=1.0).contains(a)));
    }
}
