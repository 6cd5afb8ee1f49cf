//! # IQL: implicit Q-learning
//!
//! Kostrikov, Nair & Levine, "Offline Reinforcement Learning with Implicit
//! Q-Learning", ICLR 2022 (arXiv:2110.06169), for continuous actions. No
//! loss ever evaluates an action the data did not take, so nothing
//! chases the values of unseen actions (what CQL's penalty fights
//! instead). Three losses on one minibatch of logged `(s, a, r, s')`:
//!
//! ```text
//! value   L_V = E[ |τ − 1(u < 0)| · u² ],   u = min_j Q'_j(s, a) − V(s)
//! critics L_Q = Σ_j E[ (r + γ^k (1 − terminated) V(s') − Q_j(s, a))² ]
//! actor   L_π = −E[ min(exp(β (min_j Q'_j(s, a) − V(s))), 100) · log π(a|s) ]
//! ```
//!
//! - **Expectile regression** (`expectile` τ, 0.7 as the paper's MuJoCo
//!   runs): with τ > 0.5, `V(s)` estimates an upper expectile of the
//!   logged actions' values, a maximum over the actions the data supports,
//!   so the critics' backup is a Q-learning backup without a `max` over
//!   actions.
//! - **Advantage-weighted regression** for the actor (`beta` β, the
//!   inverse temperature, 3 as the paper's MuJoCo runs; RLlib's IQL calls
//!   its temperature `beta` too): imitation of the logged actions, each
//!   weighted by `exp(β · advantage)`, the weights capped at 100 as in the
//!   paper's code.
//! - **The actor** is a Gaussian on normalized actions `u ∈ [−1, 1]^A`:
//!   mean `tanh(m(s))`, log standard deviation from its own head squashed
//!   into `[−5, 2]`. Acting without exploration takes the mean; with it, a
//!   draw clipped to the box. Unlike SAC's, the Gaussian is not squashed,
//!   so a logged action at the bounds has a finite log-density.
//! - Twin critics with Polyak-averaged targets (`tau`), as SAC's; the
//!   value network `V(s)` has no target.
//! - Each loss has its own Adam: `actor_lr`, `critic_lr`, `value_lr`.
//!
//! Execution: DDPG's and SAC's replay plan ([`SyncReplayOptimizer`]
//! (rlx::SyncReplayOptimizer)) over `input`, which is required: one
//! minibatch per row read, after `learning_starts` rows. Rows enter the
//! buffer in the files' order (shuffled within `input_shuffle_window`), so
//! to draw from the whole dataset from the first update, set
//! `learning_starts` to its rows.
//!
//! Learner metrics (`learner.*`): `value_loss`, `critic_loss`,
//! `actor_loss`, `mean_v`, `mean_q`, `mean_target_q`, `mean_td_error`,
//! `mean_advantage`, `mean_weight` (of the actor's rows, after the cap),
//! the three gradient norms, `num_updates` and `replay_buffer_size`.

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{join_on_cpu, DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::sections::{Learning, Replay, Sampling};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::{to_vec, Input, Linear, Matrix, Mlp, ModelConfig, Params};
use crate::off_policy::core::{
    self as core, bellman_targets, continuous_algorithm, critic_gradient, min_q, replay_trainer, soft_update_target,
    squashed_log_std, step_groups, tanh_actor_export, ActionBounds, ContinuousBuild, ContinuousLearning,
    ContinuousPolicy, Critic, Networks, Sections,
};
use crate::offline::marwil::require_input;
use dfdx::prelude::*;
use rand::Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::export::PolicyExport;
use rlx::gaussian_actions::GaussianActions;
use rlx::postprocessing::n_step_returns;
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space, Trainer};
use serde::{Deserialize, Serialize};

/// The cap on the actor's weights `exp(β · advantage)`, as the paper's code.
pub const MAX_WEIGHT: f32 = 100.0;

/// IQL's configuration: the sampling, replay and learning sections, the
/// learning rates and Polyak averaging DDPG, TD3 and SAC share, and IQL's
/// own keys. Every key is optional in `--config`; unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct IqlConfig {
    /// Evaluators and their envs; `input` is required.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Fragments, buffer, minibatches, n-step returns.
    #[serde(flatten)]
    pub replay: Replay,
    /// The actor's and the critics' learning rates, Polyak averaging of the
    /// target critics (`random_timesteps` is unused: IQL reads files).
    #[serde(flatten)]
    pub continuous: ContinuousLearning,
    /// Adam learning rate of the value network `V(s)`.
    pub value_lr: f64,
    /// τ of the value network's expectile regression, in (0, 1): 0.5 is
    /// the mean of the logged actions' values, towards 1 their maximum.
    pub expectile: f64,
    /// β, the inverse temperature of the actor's weights `exp(β ·
    /// advantage)`: 0 is behaviour cloning.
    pub beta: f64,
    /// γ, gradient clip (of each network), the networks' hidden layers,
    /// device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for IqlConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            replay: Replay { buffer_size: 1_000_000, train_batch_size: 256, ..Replay::default() },
            continuous: ContinuousLearning { random_timesteps: 0, actor_lr: 3e-4, critic_lr: 3e-4, tau: 0.005 },
            value_lr: 3e-4,
            expectile: 0.7,
            beta: 3.0,
            learning: Learning { model: ModelConfig::relu(), ..Learning::default() },
        }
    }
}

impl Validate for IqlConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.sections().validate(Self::NAME)?;
        check("value_lr", self.value_lr, self.value_lr > 0.0 && self.value_lr.is_finite(), "must be > 0")?;
        let t = self.expectile;
        check("expectile", t, t > 0.0 && t < 1.0, "must be in (0, 1); 0.5 is plain regression")?;
        check("beta", self.beta, self.beta >= 0.0 && self.beta.is_finite(), "must be >= 0 (0 is behaviour cloning)")
    }
}

/// The expectile loss `mean(|τ − 1(u < 0)| · u²)` of `u = target − v` for
/// every row, with the per-row weights `|τ − 1(u < 0)|`.
///
/// The weights are piecewise constant in `v`, so the gradient of the loss
/// is that of the weighted squares with the weights held fixed.
pub fn expectile_weights(targets: &[f32], v: &[f32], tau: f32) -> Vec<f32> {
    targets.iter().zip(v).map(|(y, v)| if y - v < 0.0 { 1.0 - tau } else { tau }).collect()
}

/// The actor's weights `min(exp(β · advantage), MAX_WEIGHT)`.
pub fn advantage_weights(advantages: &[f32], beta: f32) -> Vec<f32> {
    advantages.iter().map(|a| (beta * a).exp().min(MAX_WEIGHT)).collect()
}

/// The Gaussian actor: hidden layers, a mean head (before `tanh`) and a
/// log standard deviation (before squashing) that does not depend on the
/// state, as the paper's: weighted imitation narrows a state-dependent σ
/// onto the few heavily weighted actions, and the log-densities of the
/// others then blow up.
struct Actor {
    mlp: Mlp,
    mean: Linear,
    /// Read on a zero input: its bias alone is the (raw) log σ.
    log_std: Linear,
}

impl Actor {
    /// `(tanh(mean), log σ)` of every row of encoded observations.
    fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> (Matrix<D, T>, Matrix<D, T>) {
        let h = self.mlp.forward(p, x);
        let rows = h.shape().0;
        let zeros = p.device().zeros_like(&(rows, self.log_std.inputs()));
        let log_std = squashed_log_std(self.log_std.forward(p, zeros.retaped::<T>()));
        (self.mean.forward(p, h).tanh(), log_std)
    }
}

/// IQL's part of the policy: the Gaussian actor, the twin critics and the
/// value network. The weights are the actor's, each critic's, then the
/// value network's; the core's optimizers 0, 1 and 2 are theirs.
pub struct Iql {
    cfg: IqlConfig,
    input: Input,
    bounds: ActionBounds,
    actor: Actor,
    critics: Vec<Critic>,
    value: Critic,
}

const ACTOR: usize = 0;
const CRITICS: usize = 1;
const VALUE: usize = 2;

impl Iql {
    /// `V` of the observations in `batch`'s column `field`, no gradient.
    fn values<D: NetDevice>(&self, p: &Params<D>, batch: &SampleBatch, field: &str) -> Result<Vec<f32>, PolicyError> {
        let s = self.input.encode(p.device(), batch.values(field)?)?;
        Ok(self.value.forward(p, s).as_vec())
    }

    /// The critics' loss and gradient (their span) against `r + γ V(s')`:
    /// `V(s')` is computed here, on the critics' side of the update, which
    /// is otherwise the lighter one.
    fn critic_half<E: NetDevice>(
        &self,
        core: &PolicyCore<E>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let next_v = self.values(&core.params, batch, fields::NEW_OBS)?;
        let targets = bellman_targets(batch, &next_v)?;
        let spaces = (&self.input, &self.bounds);
        critic_gradient(core, &self.critics, spaces, batch, &targets, (core.range(CRITICS), false), None)
    }

    /// The value loss and its gradient (the value network's span):
    /// expectile regression of `V(s)` on the target critics' `q_target`.
    fn value_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        q_target: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>, LearnerStats), PolicyError> {
        let p = &core.params;
        let dev = p.device();
        let rows = batch.len();
        let s = self.input.encode(dev, batch.values(fields::OBS)?)?;
        let v = self.value.forward(p, s.leaky_traced()).reshape_like(&(rows,));
        let v_host = v.as_vec();
        let weights = expectile_weights(q_target, &v_host, self.cfg.expectile as f32);
        let y = dev.tensor_from_vec(q_target.to_vec(), (rows,));
        let loss = ((v - y).square() * dev.tensor_from_vec(weights, (rows,))).mean();
        let (loss, grad) = core.backward(loss, "value loss", core.range(VALUE))?;
        let mut stats = LearnerStats::default();
        stats.set("value_loss", loss as f64);
        stats.set("mean_v", v_host.iter().map(|&v| v as f64).sum::<f64>() / rows.max(1) as f64);
        Ok((grad, v_host, stats))
    }

    /// The actor loss `−mean(w · log π(a|s))` with the given weights, and
    /// its gradient (the actor's span).
    fn actor_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        weights: Vec<f32>,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let p = &core.params;
        let dev = p.device();
        let rows = batch.len();
        let a = self.bounds.dim();
        let s = self.input.encode(dev, batch.values(fields::OBS)?)?;
        let u = dev.tensor_from_vec(self.bounds.to_normalized(batch.f32(fields::ACTIONS)?), (rows, a));
        let (mean, log_std) = self.actor.forward(p, s.leaky_traced());
        // log N(u; μ, σ) = −((u − μ)/σ)²/2 − log σ − log(2π)/2 per dimension.
        let z = (mean.negate() + u) * log_std.with_empty_tape().negate().exp();
        let half_log_2pi = 0.5 * (2.0 * std::f32::consts::PI).ln();
        let logp = ((z.square() * -0.5 - log_std) - half_log_2pi).sum::<(usize,), Axis<1>>();
        let w = dev.tensor_from_vec(weights, (rows,));
        let (loss, grad) = core.backward((logp * w).mean().negate(), "actor loss", core.range(ACTOR))?;
        let mut stats = LearnerStats::default();
        stats.set("actor_loss", loss as f64);
        Ok((grad, stats))
    }
}

impl Iql {
    /// The value loss's gradient, then the actor's with the weights the
    /// new advantages `q_target − V(s)` give: `(actor's, value's, stats)`.
    fn value_and_actor_gradients<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        q_target: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>, LearnerStats), PolicyError> {
        let (value_grad, v, mut stats) = self.value_gradient(core, batch, q_target)?;
        let advantages: Vec<f32> = q_target.iter().zip(&v).map(|(q, v)| q - v).collect();
        let weights = advantage_weights(&advantages, self.cfg.beta as f32);
        let n = advantages.len().max(1) as f64;
        stats.set("mean_advantage", advantages.iter().map(|&a| a as f64).sum::<f64>() / n);
        stats.set("mean_weight", weights.iter().map(|&w| w as f64).sum::<f64>() / n);
        let (actor_grad, actor_stats) = self.actor_gradient(core, batch, weights)?;
        stats.merge(actor_stats);
        Ok((actor_grad, value_grad, stats))
    }
}

impl<D: NetDevice> PolicyAlgorithm<D> for Iql {
    type State = ();

    /// The Gaussian's mean, as greedy acting takes it.
    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        tanh_actor_export(&core.params, (&self.input, &self.bounds), (&self.actor.mlp, &self.actor.mean))
    }

    /// The Gaussian it draws from when exploring, clipped to the box, in
    /// env units (a logged action on a bound gets the Gaussian's density
    /// there: see [`Squash::Clip`](rlx::gaussian_actions::Squash)).
    fn action_distribution(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let (mean, log_std) = self.actor.forward(&core.params, self.input.encode(core.params.device(), obs)?);
        let std: Vec<f32> = to_vec(&log_std).into_iter().map(f32::exp).collect();
        Ok(self.bounds.gaussian(&to_vec(&mean), &std))
    }

    /// The Gaussian's mean; when exploring, a draw clipped to the box. In
    /// env units.
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let x = self.input.encode(core.params.device(), input.obs)?;
        let (mean, log_std) = self.actor.forward(&core.params, x);
        let mut u = to_vec(&mean);
        if input.explore {
            for (u, log_std) in u.iter_mut().zip(to_vec(&log_std)) {
                let eps: f32 = core.rng.sample(StandardNormal);
                *u = (*u + log_std.exp() * eps).clamp(-1.0, 1.0);
            }
        }
        self.bounds.actions_batch(&u)
    }

    /// n-step returns and each row's bootstrap discount.
    fn postprocess(&mut self, _core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(n_step_returns(traj, self.cfg.replay.n_step, self.cfg.learning.gamma as f32)?)
    }

    /// The three gradients, in the weights' layout. The target critics'
    /// `min_j Q'_j(s, a)` and `V(s)` feed the value and the actor losses,
    /// `V(s')` the critics' targets; the critics' half (with `V(s')`) runs
    /// beside the value's and the actor's on the CPU ([`join_on_cpu`]).
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let target = core.target.as_ref().expect("IQL keeps target critics");
        let u = self.bounds.to_normalized(batch.f32(fields::ACTIONS)?);
        let s = self.input.encode_host(batch.values(fields::OBS)?)?;
        let q_target = min_q(&self.critics, target, (&u, self.bounds.dim(), &s, self.input.features()), true)?;
        let (critics, value_and_actor) =
            join_on_cpu!(&*core, |c| self.critic_half(c, batch), self.value_and_actor_gradients(c, batch, &q_target));
        let ((critic_grad, mut stats), (mut grad, value_grad, value_stats)) = (critics?, value_and_actor?);
        stats.merge(value_stats);
        grad.extend(critic_grad);
        grad.extend(value_grad);
        Ok((grad, stats))
    }

    /// One step of the critics, the value network and the actor, then the
    /// target critics move by `tau`.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        let groups = [(CRITICS, "critic_grad_norm"), (VALUE, "value_grad_norm"), (ACTOR, "actor_grad_norm")];
        step_groups(core, &groups, grad, &mut stats)?;
        soft_update_target(core, self.cfg.continuous.tau);
        Ok(stats)
    }

    fn state(&self) {}

    fn set_state(&mut self, (): ()) {}
}

/// The policy's networks and optimizers on `dev`: the actor and twin
/// critics as SAC's, then the value network with the core's third
/// optimizer.
fn policy<D: NetDevice>(b: ContinuousBuild<'_, IqlConfig>, dev: D) -> Result<DeepPolicy<Iql, D>, BuildError> {
    let cfg = b.cfg;
    let mut p = Params::new(dev);
    let networks = b.networks(&mut p, ["mean", "log_std"], 2);
    let value_start = p.next_id();
    let value = Critic::new(&mut p, "value", b.input.features(), &cfg.learning.model);
    let value_range = p.range(value_start, p.next_id());
    let mut core = b.core(p, &networks);
    core.add_optimizer(value_range, cfg.value_lr, 1e-8, cfg.learning.grad_clip);
    let Networks { hidden, heads: [mean, log_std], critics, .. } = networks;
    let iql = Iql {
        cfg: cfg.clone(),
        input: b.input,
        bounds: b.bounds,
        actor: Actor { mlp: hidden, mean, log_std },
        critics,
        value,
    };
    Ok(DeepPolicy::new(core, iql))
}

continuous_algorithm!(IqlConfig, "IQL", "IQL", policy, before_build: require_input);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::off_policy::core::fixtures::{batch, on_cpu, spaces};
    use rlx::postprocessing::N_STEP_DISCOUNTS;

    type Policy = DeepPolicy<Iql, Cpu>;

    /// An IQL policy of 16×16 networks on [`spaces`].
    fn policy(cfg: IqlConfig) -> Policy {
        let model = ModelConfig { fcnet_hiddens: vec![16, 16], ..ModelConfig::relu() };
        let cfg = IqlConfig { learning: Learning { model, ..cfg.learning }, ..cfg };
        on_cpu(&cfg, 0, super::policy)
    }

    #[test]
    fn the_expectile_weights_and_the_advantage_weights_by_hand() {
        // u = target − v: positive residuals weigh τ, negative 1 − τ.
        assert_eq!(expectile_weights(&[1.0, -1.0, 0.0], &[0.0, 0.0, 0.0], 0.7), vec![0.7, 1.0 - 0.7, 0.7]);
        let w = advantage_weights(&[0.0, 1.0, -1.0, 10.0], 3.0);
        assert_eq!(w[0], 1.0);
        assert!((w[1] - 3f32.exp()).abs() < 1e-4 && (w[2] - (-3f32).exp()).abs() < 1e-6);
        assert_eq!(w[3], MAX_WEIGHT, "capped");
        assert!(advantage_weights(&[5.0, -5.0], 0.0).iter().all(|&w| w == 1.0), "β = 0 is behaviour cloning");
    }

    #[test]
    fn the_value_loss_is_the_expectile_loss_and_the_actor_loss_the_weighted_log_density() {
        let p = policy(IqlConfig::default());
        let (core, iql, b) = (p.core(), p.algorithm(), batch());
        let q = [0.3, -0.2, 1.5, -2.0];
        let (_, v, stats) = iql.value_gradient(core, &b, &q).unwrap();
        let expectile = |u: f32| if u < 0.0 { 1.0 - 0.7 } else { 0.7 } * u * u;
        let by_hand = q.iter().zip(&v).map(|(q, v)| expectile(q - v)).sum::<f32>() / 4.0;
        assert!((stats.get("value_loss").unwrap() - by_hand as f64).abs() < 1e-6, "{stats:?} {by_hand}");

        // log π(a|s) of the logged actions by hand, from the actor's mean
        // and log σ read on the host.
        let weights = vec![1.0, 2.0, 0.5, 4.0];
        let (grad, stats) = iql.actor_gradient(core, &b, weights.clone()).unwrap();
        let s = iql.input.encode(core.params.device(), b.values(fields::OBS).unwrap()).unwrap();
        let (mean, log_std) = iql.actor.forward(&core.params, s);
        let (mean, log_std) = (mean.as_vec(), log_std.as_vec());
        let u = iql.bounds.to_normalized(b.f32(fields::ACTIONS).unwrap());
        let half_log_2pi = 0.5 * (2.0 * std::f32::consts::PI).ln();
        let logp = |i: usize| {
            let z = (u[i] - mean[i]) / log_std[i].exp();
            -0.5 * z * z - log_std[i] - half_log_2pi
        };
        let loss = -(0..4).map(|i| weights[i] * logp(i)).sum::<f32>() / 4.0;
        assert!((stats.get("actor_loss").unwrap() - loss as f64).abs() < 1e-5, "{stats:?} {loss}");
        assert!(grad.iter().filter(|g| g.abs() > 1e-4).count() > 20, "the actor's loss has a gradient");
        // The actor's span ends with the log-σ head's bias, the whole of
        // its (state-independent) log σ: it learns too.
        assert!(grad.last().is_some_and(|g| g.abs() > 1e-4), "{:?}", &grad[grad.len() - 3..]);
        assert!(log_std.iter().all(|&l| l == log_std[0]), "σ does not depend on the state: {log_std:?}");
    }

    #[test]
    fn the_actor_gradient_matches_finite_differences_through_both_paths_of_log_sigma() {
        // log σ reaches the loss twice: in z = (u − μ)/σ (through
        // `with_empty_tape`) and as −log σ. Without the first path the
        // log-σ bias's gradient would be that of the second alone.
        let mut p = policy(IqlConfig::default());
        let b = batch();
        let weights = vec![1.0, 2.0, 0.5, 4.0];
        let (core, iql) = p.parts_mut();
        let (grad, _) = iql.actor_gradient(core, &b, weights.clone()).unwrap();
        let actor = core.range(ACTOR);
        let loss = |core: &PolicyCore<Cpu>| -> f64 {
            iql.actor_gradient(core, &b, weights.clone()).unwrap().1.get("actor_loss").unwrap()
        };
        let last = grad.len() - 1;
        for j in [last, last / 2, 0] {
            let (at, eps) = (actor.start + j, 1e-2);
            let mut w = core.params.to_vec();
            w[at] += eps;
            core.params.load(&w).unwrap();
            let up = loss(core);
            w[at] -= 2.0 * eps;
            core.params.load(&w).unwrap();
            let down = loss(core);
            w[at] += eps;
            core.params.load(&w).unwrap();
            let numeric = (up - down) / (2.0 * f64::from(eps));
            let taped = f64::from(grad[j]);
            assert!(
                (numeric - taped).abs() <= 0.02 * taped.abs() + 1e-4,
                "weight {j} of the actor: taped {taped}, finite differences {numeric}"
            );
        }
        // The −log σ path alone: −mean(w) · d log σ/d bias. The whole
        // gradient differs from it, so the z path carried its share.
        let (lo, hi) = (crate::off_policy::core::LOG_STD_MIN, crate::off_policy::core::LOG_STD_MAX);
        let raw = core.params.to_vec()[actor.start + last];
        let dlog_std = 0.5 * (hi - lo) * (1.0 - raw.tanh().powi(2));
        let second_path_only = weights.iter().sum::<f32>() / 4.0 * dlog_std;
        assert!((grad[last] - second_path_only).abs() > 0.05, "{} vs {second_path_only}", grad[last]);
    }

    /// One state, two logged actions, each ending its episode: −2 paid 0
    /// and +2 paid 1.
    fn two_actions() -> SampleBatch {
        let mut b = SampleBatch::new();
        let obs = [0.2, -0.1, 0.4, 0.2, -0.1, 0.4];
        b.insert_f32(fields::OBS, obs.to_vec(), 3).unwrap();
        b.insert_f32(fields::NEW_OBS, obs.to_vec(), 3).unwrap();
        b.insert_f32(fields::ACTIONS, vec![-2.0, 2.0], 1).unwrap();
        b.insert_f32(fields::REWARDS, vec![0.0, 1.0], 1).unwrap();
        b.insert_f32(fields::TERMINATEDS, vec![1.0, 1.0], 1).unwrap();
        b.insert_f32(fields::TRUNCATEDS, vec![0.0, 0.0], 1).unwrap();
        b.insert_f32(N_STEP_DISCOUNTS, vec![0.99; 2], 1).unwrap();
        b
    }

    #[test]
    fn updates_lift_v_to_the_upper_expectile_and_the_actor_to_the_better_action() {
        // V(s) learns the 0.9-expectile of {0, 1}, 0.9 (the τ-expectile
        // of two equally likely values 0 and 1 is τ), and the weighted
        // actor moves its mean towards +2, where BC (β = 0) stays between
        // the two logged actions.
        let run = |beta: f64| {
            let continuous = ContinuousLearning { actor_lr: 3e-3, critic_lr: 3e-3, ..IqlConfig::default().continuous };
            let mut p = policy(IqlConfig { expectile: 0.9, beta, value_lr: 3e-3, continuous, ..IqlConfig::default() });
            let b = two_actions();
            let mut stats = LearnerStats::default();
            for _ in 0..1500 {
                stats = p.learn_on_batch(&b).unwrap();
            }
            let v = p.algorithm().values(&p.core().params, &b, fields::OBS).unwrap()[0];
            let mut out = SampleBatch::new();
            p.compute_actions(&b.f32(fields::OBS).unwrap()[..3], false, &mut out).unwrap();
            (v, out.f32(fields::ACTIONS).unwrap()[0], stats)
        };
        let (v, iql_action, stats) = run(3.0);
        assert!((0.8..0.97).contains(&v), "V should reach the 0.9-expectile of {{0, 1}}, 0.9: {v}, {stats:?}");
        let (_, bc_action, _) = run(0.0);
        assert!(iql_action > 1.0 && iql_action > bc_action + 0.5, "IQL's greedy action {iql_action}, BC's {bc_action}");
    }

    #[test]
    fn iql_needs_input_and_a_box_and_names_its_keys() {
        let cfg = IqlConfig::default();
        let (o, a) = spaces();
        assert!(core::make_policy(&cfg, &o, &a, 0).is_ok());
        for (key, value) in [("expectile", 1.0), ("beta", -1.0), ("value_lr", 0.0)] {
            let err = rlx::config::merge_json(&cfg, &serde_json::json!({ key: value })).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
        let err = require_input(IqlConfig::NAME, &cfg.sampling).unwrap_err();
        assert!(err.to_string().contains("IQL learns from files"), "{err}");
        let err = core::make_policy(&cfg, &o, &Space::discrete(2), 0).err().unwrap();
        assert!(err.to_string().contains("Box"), "{err}");
    }
}
