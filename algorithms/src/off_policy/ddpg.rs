//! # Deep Deterministic Policy Gradient (DDPG), with TD3's improvements
//!
//! Lillicrap et al., "Continuous control with deep reinforcement learning",
//! ICLR 2016: a deterministic actor `μ(s)` trained by the deterministic
//! policy gradient `∇_θ Q(s, μ_θ(s))` (Silver et al. 2014) through a critic
//! `Q(s, a)` learned by Q-learning from replay, with slowly moving target
//! copies of both networks. TD3 (Fujimoto, van Hoof & Meger, "Addressing
//! Function Approximation Error in Actor-Critic Methods", ICML 2018) is this
//! policy with three flags on (see [`crate::off_policy::td3`]):
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
//! Execution: [`SyncReplayOptimizer`](rlx::SyncReplayOptimizer) with uniform replay; by default one
//! minibatch per sampled env step.
//!
//! Learner metrics (`learner.*`): `critic_loss`, `actor_loss` (on the
//! updates that move the actor), `mean_q` (`Q_1(s, a)` of replayed actions),
//! `mean_target_q` (`y`), `mean_td_error` (mean `|Q_1 − y|`),
//! `critic_grad_norm` and `actor_grad_norm` (before clipping),
//! `num_actor_updates`, `num_updates` and `replay_buffer_size`.

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{join_on_cpu, DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::sections::{Learning, Replay, Sampling};
use crate::error::BuildError;
use crate::model::device::NetDevice;
use crate::model::{to_vec, Input, Linear, Mlp, ModelConfig, Params};
use crate::off_policy::core::{
    self as core, bellman_targets, continuous_algorithm, critic_gradient, critic_input_taped, min_q, replay_trainer,
    soft_update_target, step_groups, tanh_actor_export, ActionBounds, ContinuousBuild, ContinuousLearning,
    ContinuousPolicy, Critic, Networks, Sections,
};
use dfdx::prelude::*;
use rand::Rng;
use rand_distr::StandardNormal;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::export::PolicyExport;
use rlx::gaussian_actions::GaussianActions;
use rlx::postprocessing::n_step_returns;
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space, Trainer, Values};
use serde::{Deserialize, Serialize};

/// DDPG's configuration (TD3's too, with other defaults): the sampling,
/// replay and learning sections, the keys DDPG, TD3 and SAC share, and
/// TD3's three tricks. Every key is optional in `--config`; unknown keys
/// are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct DdpgConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Fragments, buffer, minibatches, n-step returns.
    #[serde(flatten)]
    pub replay: Replay,
    /// Random warm-up, learning rates, Polyak averaging.
    #[serde(flatten)]
    pub continuous: ContinuousLearning,
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
    /// γ, gradient clip (of each network), the actor's and the critics'
    /// hidden layers, device.
    #[serde(flatten)]
    pub learning: Learning,
}

impl Default for DdpgConfig {
    /// DDPG as the TD3 paper's re-tuned baseline ("OurDDPG"): Gaussian
    /// exploration, one critic, no delay, no smoothing.
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            replay: Replay { buffer_size: 100_000, train_batch_size: 256, ..Replay::default() },
            continuous: ContinuousLearning::default(),
            twin_q: false,
            policy_delay: 1,
            smooth_target_policy: false,
            target_noise: 0.2,
            target_noise_clip: 0.5,
            exploration_noise: 0.1,
            learning: Learning { model: ModelConfig::relu(), ..Learning::default() },
        }
    }
}

impl Validate for DdpgConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.sections().validate(Self::NAME)?;
        check("policy_delay", self.policy_delay, self.policy_delay >= 1, "must be >= 1")?;
        for (key, v) in [
            ("target_noise", self.target_noise),
            ("target_noise_clip", self.target_noise_clip),
            ("exploration_noise", self.exploration_noise),
        ] {
            check(key, v, v >= 0.0 && v.is_finite(), "must be >= 0")?;
        }
        Ok(())
    }
}

/// The deterministic actor `μ(s) = tanh(head(mlp(s)))`, in normalized
/// units.
struct Actor {
    mlp: Mlp,
    head: Linear,
}

/// DDPG's (and TD3's) part of the policy: the actor, one or two critics,
/// Gaussian exploration, and the update schedule. The weights are the
/// actor's, then each critic's; the core's optimizers 0 and 1 are the
/// actor's and the critics'.
pub struct Ddpg {
    cfg: DdpgConfig,
    input: Input,
    bounds: ActionBounds,
    actor: Actor,
    critics: Vec<Critic>,
    /// This evaluator's share of `random_timesteps`.
    random_steps: u64,
    state: DdpgState,
}

/// What DDPG saves besides the core's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DdpgState {
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
    /// Critic updates applied.
    updates: u64,
    /// Actor (and target) updates applied.
    actor_updates: u64,
}

const ACTOR: usize = 0;
const CRITICS: usize = 1;

impl Ddpg {
    /// The normalized actions `μ(s) ∈ [−1, 1]^A` of every row of `obs` under
    /// `p` (online or target), no gradient.
    fn actions<D: NetDevice>(&self, p: &Params<D>, obs: Values<'_>) -> Result<Vec<f32>, PolicyError> {
        let x = self.input.encode(p.device(), obs)?;
        Ok(to_vec(&self.actor.head.forward(p, self.actor.mlp.forward(p, x)).tanh()))
    }

    /// The target `y = R + γ^k (1 − terminated) min_j Q'_j(s', u')` of every
    /// row, with `u' = μ'(s')`, smoothed with clipped noise from the
    /// standard-normal draws `eps` (`rows × A`, empty without smoothing);
    /// twin target critics side by side when `alone`.
    fn td_targets<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        eps: &[f32],
        alone: bool,
    ) -> Result<Vec<f32>, PolicyError> {
        let target = core.target.as_ref().expect("DDPG keeps target networks");
        let new_obs = batch.values(fields::NEW_OBS)?;
        let mut next = self.actions(target, new_obs)?;
        if self.cfg.smooth_target_policy {
            let (sigma, c) = (self.cfg.target_noise as f32, self.cfg.target_noise_clip as f32);
            debug_assert_eq!(eps.len(), next.len(), "one draw per action value");
            for (u, eps) in next.iter_mut().zip(eps) {
                *u = (*u + (sigma * eps).clamp(-c, c)).clamp(-1.0, 1.0);
            }
        }
        let s = self.input.encode_host(new_obs)?;
        let x = (next.as_slice(), self.bounds.dim(), s.as_slice(), self.input.features());
        bellman_targets(batch, &min_q(&self.critics, target, x, alone)?)
    }

    /// The target smoothing's standard-normal draws for `batch`: none
    /// without smoothing.
    fn target_noise<D: NetDevice>(&self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Vec<f32> {
        let n = if self.cfg.smooth_target_policy { batch.len() * self.bounds.dim() } else { 0 };
        (0..n).map(|_| core.rng.sample(StandardNormal)).collect()
    }

    /// The critics' summed MSE gradient on `batch` (critics' span), with
    /// the target smoothing's draws `eps`; twin critics side by side when
    /// `alone` (no actor's half beside it).
    fn critic_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        eps: &[f32],
        alone: bool,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let targets = self.td_targets(core, batch, eps, alone)?;
        let critics = (&self.input, &self.bounds);
        critic_gradient(core, &self.critics, critics, batch, &targets, (core.range(CRITICS), alone), None)
    }

    /// The actor loss `−mean Q_1(s, μ(s))` and its gradient (actor's span).
    fn actor_gradient<D: NetDevice>(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let p = &core.params;
        let s = self.input.encode(p.device(), batch.values(fields::OBS)?)?;
        let u = self.actor.head.forward(p, self.actor.mlp.forward(p, s.clone().leaky_traced())).tanh();
        let q = self.critics[0].forward_frozen(p, critic_input_taped(u, s));
        let (value, grad) = core.backward(q.mean() * -1.0, "actor loss", core.range(ACTOR))?;
        let mut stats = LearnerStats::default();
        stats.set("actor_loss", value as f64);
        Ok((grad, stats))
    }

    /// Both gradients, in the weights' layout: the critics' and the
    /// actor's read the same weights and run side by side on the CPU
    /// ([`join_on_cpu`]).
    fn both_gradients<D: NetDevice>(
        &self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let eps = self.target_noise(core, batch);
        let (critic, actor) =
            join_on_cpu!(&*core, |c| self.critic_gradient(c, batch, &eps, false), self.actor_gradient(c, batch));
        let ((critic_grad, mut stats), (mut grad, actor_stats)) = (critic?, actor?);
        stats.merge(actor_stats);
        grad.extend(critic_grad);
        Ok((grad, stats))
    }

    /// Whether the next update moves the actor.
    fn actor_due(&self) -> bool {
        (self.state.updates + 1).is_multiple_of(self.cfg.policy_delay)
    }
}

impl<D: NetDevice> PolicyAlgorithm<D> for Ddpg {
    type State = DdpgState;

    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        tanh_actor_export(&core.params, (&self.input, &self.bounds), (&self.actor.mlp, &self.actor.head))
    }

    /// `μ(s)` in env units, deterministic (standard deviations of 0): `dm`
    /// can value it, the estimators that weigh by densities cannot.
    fn action_distribution(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let u = self.actions(&core.params, obs.into())?;
        Ok(self.bounds.gaussian(&u, &vec![0.0; u.len()]))
    }

    /// `μ(s)` in env units; when exploring, uniformly random actions for
    /// this evaluator's share of `random_timesteps`, then `μ(s)` plus
    /// Gaussian noise, clipped to the bounds.
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let a = self.bounds.dim();
        let mut u = self.actions(&core.params, input.obs.into())?;
        if input.explore {
            let sigma = self.cfg.exploration_noise as f32;
            for row in u.chunks_exact_mut(a) {
                let random = self.state.steps_explored < self.random_steps;
                for x in row {
                    *x = if random {
                        core.rng.gen_range(-1.0..=1.0)
                    } else {
                        let eps: f32 = core.rng.sample(StandardNormal);
                        (*x + sigma * eps).clamp(-1.0, 1.0)
                    };
                }
                self.state.steps_explored += 1;
            }
        }
        self.bounds.actions_batch(&u)
    }

    /// n-step returns and each row's bootstrap discount.
    fn postprocess(&mut self, _core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(n_step_returns(traj, self.cfg.replay.n_step, self.cfg.learning.gamma as f32)?)
    }

    /// The actor's and the critics' gradients, in the weights' layout
    /// (`apply` uses the actor's part every `policy_delay`-th time).
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        self.both_gradients(core, batch)
    }

    /// The critics always; the actor and the targets every
    /// `policy_delay`-th update.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        let mut stats = LearnerStats::default();
        if self.actor_due() {
            step_groups(core, &[(CRITICS, "critic_grad_norm"), (ACTOR, "actor_grad_norm")], grad, &mut stats)?;
            soft_update_target(core, self.cfg.continuous.tau);
            self.state.actor_updates += 1;
        } else {
            step_groups(core, &[(CRITICS, "critic_grad_norm")], grad, &mut stats)?;
        }
        self.state.updates += 1;
        stats.set("num_actor_updates", self.state.actor_updates as f64);
        Ok(stats)
    }

    /// One update: the critics, and every `policy_delay`-th time the actor
    /// and the targets (the actor's gradient is only computed then).
    fn learn(&mut self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (mut grad, mut stats) = if self.actor_due() {
            self.both_gradients(core, batch)?
        } else {
            let eps = self.target_noise(core, batch);
            let (critic_grad, stats) = self.critic_gradient(core, batch, &eps, true)?;
            let mut grad = vec![0.0; core.range(ACTOR).len()];
            grad.extend(critic_grad);
            (grad, stats)
        };
        stats.merge(self.apply(core, &mut grad)?);
        Ok(stats)
    }

    fn state(&self) -> DdpgState {
        self.state
    }

    fn set_state(&mut self, state: DdpgState) {
        self.state = state;
    }
}

/// The policy's networks and optimizers on `dev`.
fn policy<D: NetDevice>(b: ContinuousBuild<'_, DdpgConfig>, dev: D) -> Result<DeepPolicy<Ddpg, D>, BuildError> {
    let mut p = Params::new(dev);
    let networks = b.networks(&mut p, ["out"], if b.cfg.twin_q { 2 } else { 1 });
    let core = b.core(p, &networks);
    let Networks { hidden, heads: [head], critics, .. } = networks;
    let ddpg = Ddpg {
        random_steps: b.cfg.continuous.random_steps_per_evaluator(&b.cfg.sampling),
        cfg: b.cfg.clone(),
        input: b.input,
        bounds: b.bounds,
        actor: Actor { mlp: hidden, head },
        critics,
        state: DdpgState::default(),
    };
    Ok(DeepPolicy::new(core, ddpg))
}

continuous_algorithm!(DdpgConfig, "DDPG", "DDPG/TD3", policy);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::off_policy::core::{critic_input, fixtures::*};

    type Policy = DeepPolicy<Ddpg, Cpu>;

    fn policy(cfg: DdpgConfig) -> Policy {
        on_cpu(&cfg, 0, super::policy)
    }

    fn td3() -> DdpgConfig {
        crate::off_policy::td3::Td3Config::default().0
    }

    /// The actor's and the critics' weights, online and target.
    fn parts(p: &Policy) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let core = p.core();
        let (a, c) = (core.range(ACTOR), core.range(CRITICS));
        let target = core.target.as_ref().unwrap();
        (core.params.read(a.clone()), core.params.read(c.clone()), target.read(a), target.read(c))
    }

    #[test]
    fn td3_targets_use_the_min_of_twin_targets_and_clipped_smoothing_noise() {
        let mut p = policy(DdpgConfig { target_noise: 10.0, target_noise_clip: 0.3, ..td3() });
        assert_eq!(p.algorithm().critics.len(), 2);
        let b = batch();
        let new_obs = b.f32(fields::NEW_OBS).unwrap().to_vec();
        let target = p.core().target.clone().unwrap();
        let mu = p.algorithm().actions(&target, (&new_obs).into()).unwrap();
        // Replay the policy's noise draws: with σ = 10 every draw is clipped
        // to ±0.3.
        let mut rng = p.core().rng.clone();
        let smoothed: Vec<f32> = mu
            .iter()
            .map(|&u| {
                let eps: f32 = rng.sample(StandardNormal);
                (u + (10.0 * eps).clamp(-0.3, 0.3)).clamp(-1.0, 1.0)
            })
            .collect();
        assert!(smoothed.iter().zip(&mu).all(|(s, m)| (s - m).abs() <= 0.3 + 1e-6 && (s - m).abs() > 0.0));
        let x = critic_input(target.device(), &smoothed, 1, &new_obs, 3).unwrap();
        let critics = &p.algorithm().critics;
        let (q1, q2) = (critics[0].forward(&target, x.clone()).as_vec(), critics[1].forward(&target, x).as_vec());
        let (core, algo) = p.parts_mut();
        let eps = algo.target_noise(core, &b);
        let targets = algo.td_targets(core, &b, &eps, true).unwrap();
        let r = b.f32(fields::REWARDS).unwrap();
        for i in 0..4 {
            let next = if i == 2 { 0.0 } else { 0.99 * q1[i].min(q2[i]) };
            assert!((targets[i] - (r[i] + next)).abs() < 1e-5, "row {i}: {} vs {}", targets[i], r[i] + next);
        }
        // Without smoothing and twin critics: the single target critic at μ'(s').
        let mut p = policy(DdpgConfig::default());
        let target = p.core().target.clone().unwrap();
        let x = critic_input(target.device(), &mu, 1, &new_obs, 3).unwrap();
        let q = p.algorithm().critics[0].forward(&target, x).as_vec();
        let (core, algo) = p.parts_mut();
        let eps = algo.target_noise(core, &b);
        let targets = algo.td_targets(core, &b, &eps, true).unwrap();
        assert!((targets[3] - (2.0 + 0.99 * q[3])).abs() < 1e-5, "truncation bootstraps");
    }

    #[test]
    fn soft_update_moves_targets_by_tau_and_the_actor_waits_for_the_delay() {
        let mut p = policy(DdpgConfig {
            continuous: ContinuousLearning { tau: 0.1, ..ContinuousLearning::default() },
            policy_delay: 2,
            ..td3()
        });
        let b = batch();
        let (actor0, critic0, target_actor0, target_critic0) = parts(&p);
        let stats = p.learn_on_batch(&b).unwrap();
        let (actor1, critic1, target_actor1, target_critic1) = parts(&p);
        assert_eq!(actor1, actor0, "the actor waits");
        assert_eq!(
            (target_actor1, target_critic1),
            (target_actor0.clone(), target_critic0.clone()),
            "the targets wait"
        );
        assert_ne!(critic1, critic0, "the critics move");
        assert!(stats.get("actor_loss").is_none() && stats.get("critic_loss").is_some());
        let stats = p.learn_on_batch(&b).unwrap();
        assert_eq!(stats.get("num_actor_updates"), Some(1.0));
        assert!(stats.get("actor_loss").is_some());
        let (actor, critics, target_actor, target_critics) = parts(&p);
        assert_ne!(actor, actor0, "the actor moves on the second update");
        for i in 0..actor.len() {
            assert!((target_actor[i] - (0.1 * actor[i] + 0.9 * target_actor0[i])).abs() < 1e-6, "param {i}");
        }
        for i in 0..critics.len() {
            assert!(
                (target_critics[i] - (0.1 * critics[i] + 0.9 * target_critic0[i])).abs() < 1e-6,
                "critic param {i}"
            );
        }
    }

    #[test]
    fn learning_reduces_the_critic_loss_and_raises_q_of_the_actor() {
        let mut p = policy(DdpgConfig {
            continuous: ContinuousLearning {
                critic_lr: 1e-2,
                actor_lr: 1e-2,
                tau: 1.0,
                ..ContinuousLearning::default()
            },
            ..DdpgConfig::default()
        });
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
                assert_eq!(parts(&x).2, parts(&y).2);
            }
            let (g, _) = x.compute_gradients(&b).unwrap();
            assert!(x.apply_gradients(&g[1..]).is_err());
        }
    }

    #[test]
    fn exploration_is_random_then_noisy_and_greedy_is_deterministic() {
        let cfg = DdpgConfig {
            continuous: ContinuousLearning { random_timesteps: 10, ..ContinuousLearning::default() },
            exploration_noise: 0.0,
            ..DdpgConfig::default()
        };
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
        let mut p = policy(DdpgConfig {
            continuous: ContinuousLearning { random_timesteps: 0, ..ContinuousLearning::default() },
            exploration_noise: 0.1,
            ..DdpgConfig::default()
        });
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
        let mut q = policy(cfg);
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
        // Any width: 7 observations, 3 action dimensions.
        let wide = Space::uniform_box(-1.0, 1.0, vec![7]).unwrap();
        let three = Space::uniform_box(-1.0, 1.0, vec![3]).unwrap();
        let mut p = make_policy(&DdpgConfig::default(), &wide, &three, 0).unwrap();
        p.compute_actions(&[0.5; 14], true, &mut missing).unwrap();
        assert_eq!(missing.f32(fields::ACTIONS).unwrap().len(), 6);
        for (key, value) in [("use_lstm", serde_json::json!(true)), ("conv_filters", serde_json::json!([[8, 3, 1]]))] {
            let err = rlx::config::merge_json(&DdpgConfig::default(), &serde_json::json!({"model": { key: value }}))
                .unwrap_err();
            assert!(err.to_string().contains(&format!("model.{key}")), "{err}");
        }
    }
}
