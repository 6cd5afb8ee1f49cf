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
//!   weights on the loss;
//! - with `num_atoms` > 1, a **distributional head** (C51, Bellemare et al.
//!   2017; [`distributional`](super::distributional)): a categorical
//!   distribution over `num_atoms` returns from `v_min` to `v_max` per
//!   action, learned by cross-entropy against the projected target
//!   distribution (dueling applies per atom, as in Rainbow);
//! - with `noisy`, **noisy nets** (Fortunato et al. 2018;
//!   [`NoisyLinear`]): the advantage and value heads carry learned
//!   factorized Gaussian noise, drawn afresh for every exploring action
//!   and every update (online and target networks separately), and left
//!   out when acting greedily. As in RLlib, ε-greedy still applies: set
//!   `exploration_initial_eps` and `exploration_final_eps` to 0 to explore
//!   by the noise alone, as Rainbow does.
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
//! Learner metrics (`learner.*`): `loss` (weighted Huber, or weighted
//! cross-entropy with `num_atoms` > 1), `mean_q` (`Q(s, a)` of the replayed
//! actions), `mean_td_error` (mean |TD error|; with `num_atoms` > 1 the
//! mean cross-entropy, which is also the replay priority),
//! `grad_norm` (before clipping), `num_target_updates`, `num_updates` and
//! `replay_buffer_size`.

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{DeepPolicy, PolicyAlgorithm, PolicyCore};
use crate::common::distributions::best_legal;
use crate::common::distributions::softmax_rows;
use crate::common::sections::{Learning, PrioritizedReplay, Replay, Sampling};
use crate::error::BuildError;
use crate::model::device::{on_device, NetDevice, OnDevice};
use crate::model::{to_vec, Matrix, ModelConfig, ModelSupport, Noise, NoisyLinear, Params, Torso};
use crate::q_learning::distributional::{cross_entropy, Support};
use dfdx::prelude::*;
use rand::Rng;
use rlx::config::{check, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::export::{ActionHead, Layer, PolicyExport};
use rlx::optimizer::SyncReplayConfig;
use rlx::postprocessing::{n_step_returns, N_STEP_DISCOUNTS};
use rlx::replay::{FrameLayout, LinearSchedule, TD_ERRORS, WEIGHTS};
use rlx::{
    fields, LearnerStats, PolicyError, PolicyEvaluator, PolicyGraph, PolicyInput, SampleBatch, Space,
    SyncReplayOptimizer, Trainer, Values,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// DQN's configuration: the sampling, replay and prioritized-replay
/// sections, the Q-learning keys Ape-X shares, and DQN's ε schedule. Every
/// key is optional in `--config`; unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct DqnConfig {
    /// Evaluators and their envs.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Fragments, buffer, minibatches, n-step returns.
    #[serde(flatten)]
    pub replay: Replay,
    /// Prioritized replay.
    #[serde(flatten)]
    pub prioritized: PrioritizedReplay,
    /// The learning rate, double Q, dueling head and target network.
    #[serde(flatten)]
    pub q_learning: QLearning,
    /// ε of ε-greedy exploration at the start.
    pub exploration_initial_eps: f64,
    /// ε after `exploration_timesteps`.
    pub exploration_final_eps: f64,
    /// Env steps (all evaluators together) over which ε anneals linearly.
    pub exploration_timesteps: u64,
    /// Evaluators compute each sampled row's TD error (the `td_errors`
    /// column), and replay stores the row with that priority instead of
    /// the buffer's maximum (Ape-X's worker-side prioritization).
    pub worker_side_prioritization: bool,
    /// CQL's conservative penalty (Kumar et al. 2020, CQL(H)), RLlib's
    /// `min_q_weight`: `α·E[log Σ_a' exp Q(s, a') − Q(s, a)]` is added to
    /// the loss, pushing down the Q-values of actions the data did not
    /// take. 0 (DQN's default) is plain DQN; the `CQL` run sets 1.
    pub min_q_weight: f64,
    /// γ, gradient clip, network, device.
    #[serde(flatten)]
    pub learning: Learning,
}

/// The Q-learning keys DQN and Ape-X share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct QLearning {
    /// Adam learning rate.
    pub lr: f64,
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
    /// Atoms of each action's return distribution (C51); 1 learns the
    /// expected return alone (plain DQN).
    pub num_atoms: u64,
    /// The lowest return the atoms cover (with `num_atoms` > 1).
    pub v_min: f64,
    /// The highest return the atoms cover (with `num_atoms` > 1).
    pub v_max: f64,
    /// Noisy nets: learned factorized Gaussian noise in the advantage and
    /// value heads.
    pub noisy: bool,
    /// The noise's initial scale: each `σ` starts at `sigma0 / √inputs`.
    pub sigma0: f64,
}

/// The most atoms a return distribution may have.
pub const MAX_ATOMS: u64 = 1024;

impl Default for QLearning {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            double_q: true,
            dueling: true,
            target_update_interval: 250,
            num_atoms: 1,
            v_min: -10.0,
            v_max: 10.0,
            noisy: false,
            sigma0: 0.5,
        }
    }
}

impl QLearning {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("lr", self.lr, self.lr > 0.0 && self.lr.is_finite(), "must be > 0")?;
        let t = self.target_update_interval;
        check("target_update_interval", t, t >= 1, "must be >= 1")?;
        let n = self.num_atoms;
        check("num_atoms", n, (1..=MAX_ATOMS).contains(&n), &format!("must be in [1, {MAX_ATOMS}]"))?;
        if n > 1 {
            // The atoms are f32: the bounds must be apart as f32s too.
            let (lo, hi) = (self.v_min as f32, self.v_max as f32);
            check("v_min", self.v_min, lo.is_finite(), "must be a finite f32")?;
            let ok = hi.is_finite() && hi > lo;
            check("v_max", self.v_max, ok, &format!("must be a finite f32 above v_min ({})", self.v_min))?;
        }
        check("sigma0", self.sigma0, self.sigma0 > 0.0 && self.sigma0.is_finite(), "must be > 0")
    }

    /// The atoms of the return distribution, or `None` for one Q-value per
    /// action.
    fn support(&self) -> Option<Support> {
        (self.num_atoms > 1).then(|| Support::new(self.v_min as f32, self.v_max as f32, self.num_atoms as usize))
    }
}

impl Default for DqnConfig {
    fn default() -> Self {
        Self {
            sampling: Sampling { num_workers: 0, ..Sampling::default() },
            replay: Replay {
                rollout_fragment_length: 4,
                training_intensity: Some(16.0),
                n_step: 3,
                ..Replay::default()
            },
            prioritized: PrioritizedReplay::default(),
            q_learning: QLearning::default(),
            exploration_initial_eps: 1.0,
            exploration_final_eps: 0.02,
            exploration_timesteps: 10_000,
            worker_side_prioritization: false,
            min_q_weight: 0.0,
            learning: Learning { grad_clip: Some(10.0), model: ModelConfig::relu(), ..Learning::default() },
        }
    }
}

impl Validate for DqnConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport {
            algorithm: Self::NAME,
            conv: true,
            lstm: false,
            custom: true,
            log_std: false,
        })?;
        self.sampling.validate()?;
        self.replay.validate()?;
        self.q_learning.validate()?;
        for (key, eps) in [
            ("exploration_initial_eps", self.exploration_initial_eps),
            ("exploration_final_eps", self.exploration_final_eps),
        ] {
            check(key, eps, (0.0..=1.0).contains(&eps), "must be in [0, 1]")?;
        }
        let w = self.min_q_weight;
        check("min_q_weight", w, w >= 0.0 && w.is_finite(), "must be >= 0")?;
        let plain = self.q_learning.num_atoms == 1 || w == 0.0;
        check("min_q_weight", w, plain, "must be 0 with num_atoms > 1: the penalty is on Q-values, not distributions")?;
        self.prioritized.validate()
    }
}

impl DqnConfig {
    /// ε over an evaluator's own env steps. Each of the samplers takes
    /// about 1/samplers of the run's steps, so its own count times the
    /// samplers tracks the run's.
    fn exploration(&self) -> LinearSchedule {
        LinearSchedule {
            start: self.exploration_initial_eps,
            end: self.exploration_final_eps,
            steps: self.exploration_timesteps / self.sampling.samplers() as u64,
        }
    }

    /// The replay optimizer's settings.
    fn replay(&self) -> SyncReplayConfig {
        self.replay.optimizer(self.sampling.seed, self.prioritized.config())
    }
}

/// The Q-network: the `model`'s layers, then an advantage head and a value
/// head, combined by the dueling formula (or the advantage head alone
/// without `dueling`). Each head gives one output per action, or with a
/// [`Support`] the logits of one distribution over the atoms per action;
/// dueling then applies to each atom's logits.
pub struct QNetwork<D: NetDevice> {
    torso: Torso<D>,
    advantage: NoisyLinear,
    value: NoisyLinear,
    actions: usize,
    dueling: bool,
    support: Option<Support>,
}

/// One draw of the heads' noise (noisy nets); nothing without `noisy`, or
/// where the network acts on its mean weights.
#[derive(Default)]
pub struct HeadNoise {
    advantage: Option<Noise>,
    value: Option<Noise>,
}

/// The noise of one update: the online and the target networks draw
/// their own.
#[derive(Default)]
struct UpdateNoise {
    online: HeadNoise,
    target: HeadNoise,
}

impl<D: NetDevice> QNetwork<D> {
    /// The network for `n` actions on observations of `obs`: tensors
    /// `q.torso.…`, `q.advantage` and `q.value` (and their `.sigma` with
    /// `noisy`).
    ///
    /// # Errors
    /// A model that does not fit the observation space.
    pub fn build(cfg: &DqnConfig, obs: &Space, actions: usize, p: &mut Params<D>) -> Result<Self, BuildError> {
        let q = &cfg.q_learning;
        let torso = Torso::build(&cfg.learning.model, obs, p, "q.torso")?;
        let (support, sigma0) = (q.support(), q.noisy.then_some(q.sigma0 as f32));
        let atoms = support.map_or(1, |s| s.atoms());
        let advantage = NoisyLinear::new(p, "q.advantage", torso.features(), actions * atoms, sigma0);
        let value = NoisyLinear::new(p, "q.value", torso.features(), atoms, sigma0);
        Ok(Self { torso, advantage, value, actions, dueling: q.dueling, support })
    }

    /// Outputs per action: 1, or the number of atoms.
    fn atoms(&self) -> usize {
        self.support.map_or(1, |s| s.atoms())
    }

    /// A fresh draw of the heads' noise (none without `noisy`).
    fn noise(&self, rng: &mut impl Rng) -> HeadNoise {
        HeadNoise { advantage: self.advantage.sample_noise(rng), value: self.value.sample_noise(rng) }
    }

    /// `Q(s, ·)` (or each action's atom logits, `[rows, actions · atoms]`)
    /// of every row on `params` (online or target), any tape.
    fn forward<T: crate::model::TapeKind<D>>(&self, p: &Params<D>, x: Matrix<D, T>, noise: &HeadNoise) -> Matrix<D, T> {
        let features = self.torso.forward(p, x);
        if !self.dueling {
            return self.advantage.forward(p, features, noise.advantage.as_ref());
        }
        let value = self.value.forward(p, features.with_empty_tape(), noise.value.as_ref());
        let adv = self.advantage.forward(p, features, noise.advantage.as_ref());
        let (rows, atoms) = (adv.shape().0, self.atoms());
        let shape = (rows, self.actions, atoms);
        let adv = adv.reshape_like(&shape);
        let mean = adv.with_empty_tape().mean::<(usize, usize), Axis<1>>().broadcast_like::<_, Axis<1>>(&shape);
        let value = value.broadcast_like::<(usize, usize, usize), Axis<1>>(&shape);
        (adv - mean + value).reshape_like(&(rows, self.actions * atoms))
    }

    /// What the heads say about every row of `obs` on `params`, no
    /// gradient, row-major on the host: Q-values `[n, actions]`, or with a
    /// support each action's atom probabilities `[n, actions, atoms]`.
    /// Without atoms the dueling formula is applied on the host: for the
    /// few rows an evaluator acts on, that is cheaper than three more
    /// device operations.
    fn outputs(&self, p: &Params<D>, obs: Values<'_>, noise: &HeadNoise) -> Result<Vec<f32>, PolicyError> {
        let x = self.torso.input().encode(p.device(), obs)?;
        if self.support.is_some() {
            return Ok(softmax_rows(&to_vec(&self.forward(p, x, noise)), self.atoms()));
        }
        let features = self.torso.forward(p, x);
        if !self.dueling {
            return Ok(to_vec(&self.advantage.forward(p, features, noise.advantage.as_ref())));
        }
        let value = to_vec(&self.value.forward(p, features.clone(), noise.value.as_ref()));
        let mut q = to_vec(&self.advantage.forward(p, features, noise.advantage.as_ref()));
        for (row, v) in q.chunks_exact_mut(self.actions).zip(value) {
            let mean = row.iter().sum::<f32>() / self.actions as f32;
            row.iter_mut().for_each(|x| *x += v - mean);
        }
        Ok(q)
    }

    /// The network for export. The dueling formula is linear in the two
    /// heads' weights, so it folds into one layer:
    /// `W_Q[a] = W_A[a] − mean_b W_A[b] + W_V` (per atom), and alike for
    /// the biases. Noisy heads export their mean weights, which greedy
    /// acting uses.
    fn exported(&self, p: &Params<D>) -> Result<PolicyExport, PolicyError> {
        let (encoding, body) = self.torso.exported(p)?;
        let (actions, atoms) = (self.actions, self.atoms());
        let (inputs, outputs) = (self.advantage.inputs(), self.advantage.outputs());
        let (mut weight, mut bias) = self.advantage.exported_weights(p);
        if self.dueling {
            let (wv, bv) = self.value.exported_weights(p);
            // Rows of `weight` are inputs, columns `a · atoms + z`; the bias
            // is one more such row.
            let fold = |row: &mut [f32], v: &[f32]| {
                for z in 0..atoms {
                    let mean = (0..actions).map(|a| row[a * atoms + z]).sum::<f32>() / actions as f32;
                    (0..actions).for_each(|a| row[a * atoms + z] += v[z] - mean);
                }
            };
            for (row, v) in weight.chunks_exact_mut(outputs).zip(wv.chunks_exact(atoms)) {
                fold(row, v);
            }
            fold(&mut bias, &bv);
        }
        let support = self.support.map(|s| (0..atoms).map(|i| s.z(i)).collect());
        Ok(PolicyExport {
            normalization: None,
            encoding,
            body,
            recurrent: None,
            head: vec![Layer::Dense { inputs, outputs, weight, bias }],
            value: None,
            action: ActionHead::QValues { actions, support },
        })
    }

    /// Q-values of every row of `obs` on `params`, no gradient, row-major
    /// `[n, actions]` on the host (a distribution's mean with atoms).
    fn q_values(&self, p: &Params<D>, obs: Values<'_>, noise: &HeadNoise) -> Result<Vec<f32>, PolicyError> {
        let out = self.outputs(p, obs, noise)?;
        Ok(match self.support {
            Some(s) => s.means(&out),
            None => out,
        })
    }
}

/// DQN's part of the policy: the Q-network, ε-greedy exploration and the
/// target-network schedule.
pub struct Dqn<D: NetDevice> {
    cfg: DqnConfig,
    net: QNetwork<D>,
    exploration: LinearSchedule,
    state: DqnState,
    /// The TD errors of the last [`gradient`](PolicyAlgorithm::gradient)
    /// pass, which prioritized replay takes as the new priorities.
    last_td: Vec<f32>,
}

/// What DQN saves besides the core's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DqnState {
    /// Env steps this policy has acted on with exploration.
    steps_explored: u64,
    /// Gradient updates applied.
    updates: u64,
    /// Copies of the online network into the target network.
    num_target_updates: u64,
}

impl<D: NetDevice> Dqn<D> {
    /// ε now.
    pub fn epsilon(&self) -> f64 {
        self.exploration.value(self.state.steps_explored)
    }

    /// The bootstrapped target `R + γ^k (1 − terminated) Q_target(s', a*)`
    /// of every row, with `a*` the best legal action of `s'` by the online
    /// network (double Q) or the target network. With atoms, each row's
    /// target is instead the target network's distribution at `a*`,
    /// shifted and projected onto the atoms (`[n, atoms]`).
    fn td_targets(
        &self,
        core: &PolicyCore<D>,
        batch: &SampleBatch,
        noise: &UpdateNoise,
    ) -> Result<Vec<f32>, PolicyError> {
        let a = self.net.actions;
        let new_obs = batch.values(fields::NEW_OBS)?;
        let (rewards, terminated) = (batch.f32(fields::REWARDS)?, batch.f32(fields::TERMINATEDS)?);
        let discounts = batch.f32(N_STEP_DISCOUNTS)?;
        let target = core.target.as_ref().expect("DQN keeps a target network");
        let next = self.net.outputs(target, new_obs, &noise.target)?;
        let q_target = match self.net.support {
            Some(s) => std::borrow::Cow::Owned(s.means(&next)),
            None => std::borrow::Cow::Borrowed(&next),
        };
        let q_select = if self.cfg.q_learning.double_q {
            std::borrow::Cow::Owned(self.net.q_values(&core.params, new_obs, &noise.online)?)
        } else {
            q_target.clone()
        };
        let masks = batch.get(fields::NEW_ACTION_MASK).map(|_| batch.f32(fields::NEW_ACTION_MASK)).transpose()?;
        let mut targets = Vec::with_capacity(batch.len() * self.net.atoms());
        for i in 0..batch.len() {
            let mask = masks.map(|m| &m[i * a..(i + 1) * a]);
            let best = i * a + argmax(&q_select[i * a..(i + 1) * a], mask);
            let discount = discounts[i] * (1.0 - terminated[i]);
            match self.net.support {
                Some(s) => targets.extend(s.project(&next[best * s.atoms()..][..s.atoms()], rewards[i], discount)),
                None => targets.push(rewards[i] + discount * q_target[best]),
            }
        }
        Ok(targets)
    }

    /// The noise of one update: fresh draws for the online and the target
    /// networks (nothing without `noisy`).
    fn update_noise(&self, core: &mut PolicyCore<D>) -> UpdateNoise {
        UpdateNoise { online: self.net.noise(&mut core.rng), target: self.net.noise(&mut core.rng) }
    }
}

/// The batch's actions as indices into `a` actions.
///
/// # Errors
/// An action outside `0..a`, or no `actions` column of `i64`.
fn taken_actions(batch: &SampleBatch, a: usize) -> Result<Vec<usize>, PolicyError> {
    let actions = batch.i64(fields::ACTIONS)?;
    if let Some(&bad) = actions.iter().find(|&&x| !(0..a as i64).contains(&x)) {
        return Err(PolicyError::Other(format!("action {bad} is outside the {a} actions of this network")));
    }
    Ok(actions.iter().map(|&x| x as usize).collect())
}

/// The index of the largest entry among the legal ones (the first of
/// ties); every entry is legal without a mask.
fn argmax(row: &[f32], mask: Option<&[f32]>) -> usize {
    best_legal(row, |i| mask.is_none_or(|m| m[i] != 0.0)).unwrap_or(0)
}

impl<D: NetDevice> PolicyAlgorithm<D> for Dqn<D> {
    type State = DqnState;

    /// The greedy policy: probability 1 on the best action of each row.
    fn action_probabilities(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let a = self.net.actions;
        let q = self.net.q_values(&core.params, obs.into(), &HeadNoise::default())?;
        let mut probs = vec![0.0; q.len()];
        for (row, out) in q.chunks_exact(a).zip(probs.chunks_exact_mut(a)) {
            out[argmax(row, None)] = 1.0;
        }
        Ok(probs)
    }

    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        self.net.exported(&core.params)
    }

    /// The best legal action, replaced by a uniformly random legal one
    /// with probability ε when exploring.
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError> {
        let a = self.net.actions;
        let noise = if input.explore { self.net.noise(&mut core.rng) } else { HeadNoise::default() };
        let q = self.net.q_values(&core.params, input.obs.into(), &noise)?;
        if let Some(m) = input.action_mask {
            if m.len() != q.len() {
                return Err(PolicyError::WrongLength { what: "action mask values", expected: q.len(), got: m.len() });
            }
        }
        let eps = self.epsilon();
        let mut actions = Vec::with_capacity(q.len() / a);
        let mut legal = Vec::with_capacity(a);
        for (r, row) in q.chunks_exact(a).enumerate() {
            let mask = input.action_mask.map(|m| &m[r * a..(r + 1) * a]);
            legal.clear();
            legal.extend((0..a).filter(|&i| mask.is_none_or(|m| m[i] != 0.0)));
            if legal.is_empty() {
                return Err(PolicyError::Other(format!("row {r}: the action mask leaves no legal action")));
            }
            let action = if input.explore && core.rng.gen::<f64>() < eps {
                legal[core.rng.gen_range(0..legal.len())]
            } else {
                argmax(row, mask)
            };
            actions.push(action as i64);
        }
        if input.explore {
            self.state.steps_explored += actions.len() as u64;
        }
        let mut out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        Ok(out)
    }

    /// n-step returns and each row's bootstrap discount; with
    /// `worker_side_prioritization`, each row's TD error under the weights
    /// that sampled it.
    fn postprocess(&mut self, core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        n_step_returns(traj, self.cfg.replay.n_step, self.cfg.learning.gamma as f32)?;
        if self.cfg.worker_side_prioritization {
            let td = self.td_errors(core, traj)?;
            traj.insert_f32(TD_ERRORS, td, 1)?;
        }
        Ok(())
    }

    /// The importance-weighted Huber loss (δ = 1) of the TD errors, or
    /// with atoms the importance-weighted cross-entropy of the projected
    /// target distributions.
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let (n, a) = (batch.len(), self.net.actions);
        let noise = self.update_noise(core);
        let targets = self.td_targets(core, batch, &noise)?;
        let weights = match batch.f32(WEIGHTS) {
            Ok(w) => w.to_vec(),
            Err(_) => vec![1.0; n],
        };
        let actions = taken_actions(batch, a)?;
        let p = &core.params;
        let dev = p.device();
        let x = self.net.torso.input().encode(dev, batch.values(fields::OBS)?)?;
        let out = self.net.forward(p, x.leaky_traced(), &noise.online);
        // CQL's penalty per row, and its mean for the metrics.
        let mut cql_penalty = None;
        let (per_row, q_host) = match self.net.support {
            None => {
                let taken = dev.tensor_from_vec(actions, (n,));
                let weight = self.cfg.min_q_weight as f32;
                let (q_taken, penalty) = if weight > 0.0 {
                    // CQL(H): the soft maximum of Q(s, ·) above Q(s, a).
                    // `out` is used thrice: the copies' empty tapes merge
                    // into its own, which holds the forward pass.
                    let q_taken = out.with_empty_tape().select(taken.clone());
                    let penalty = out.with_empty_tape().logsumexp::<(usize,), Axis<1>>() - out.select(taken);
                    (q_taken, Some(penalty))
                } else {
                    (out.select(taken), None)
                };
                let q_host = q_taken.as_vec();
                self.last_td.clear();
                self.last_td.extend(q_host.iter().zip(&targets).map(|(q, y)| q - y));
                let huber = q_taken.huber_error(dev.tensor_from_vec(targets, (n,)), 1.0);
                cql_penalty = penalty.map(|p| (p * weight, weight));
                (huber, q_host)
            }
            Some(s) => {
                let z = s.atoms();
                let taken = actions.iter().enumerate().map(|(i, &act)| i * a + act).collect();
                let rows = out.reshape_like(&(n * a, z)).gather(dev.tensor_from_vec(taken, (n,)));
                let log_p = rows.log_softmax::<Axis<1>>();
                let probs: Vec<f32> = log_p.as_vec().iter().map(|l| l.exp()).collect();
                self.last_td = cross_entropy(&targets, &probs, z);
                let m = dev.tensor_from_vec(targets, (n, z));
                ((log_p * m).sum::<(usize,), Axis<1>>().negate(), s.means(&probs))
            }
        };
        let mut loss = (per_row * dev.tensor_from_vec(weights, (n,))).mean();
        // The penalty is on the data's distribution: no importance weights.
        let mut cql_mean = None;
        if let Some((penalty, weight)) = cql_penalty {
            let mean = penalty.mean();
            cql_mean = Some(f64::from(mean.as_vec()[0] / weight));
            loss = loss + mean;
        }
        let (total, grad) = core.backward(loss, "loss", 0..core.num_params())?;
        let mut stats = LearnerStats::default();
        stats.set("loss", total as f64);
        stats.set("mean_q", q_host.iter().map(|&q| q as f64).sum::<f64>() / n as f64);
        stats.set("mean_td_error", self.last_td.iter().map(|d| d.abs() as f64).sum::<f64>() / n as f64);
        if let Some(penalty) = cql_mean {
            stats.set("cql_penalty", penalty);
        }
        Ok((grad, stats))
    }

    /// Clips, takes one Adam step, and copies the online network into the
    /// target network every `target_update_interval` updates.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        let mut stats = core.step_all(grad)?;
        self.state.updates += 1;
        if self.state.updates % self.cfg.q_learning.target_update_interval == 0 {
            core.target = Some(core.params.clone());
            self.state.num_target_updates += 1;
        }
        stats.set("num_target_updates", self.state.num_target_updates as f64);
        Ok(stats)
    }

    /// The learning pass's own TD errors: no second pass over the batch.
    fn learn_with_td_errors(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        self.learn(core, batch).map(|stats| (stats, std::mem::take(&mut self.last_td)))
    }

    /// Each row's TD error under the mean weights (the cross-entropy with
    /// atoms).
    fn td_errors(&mut self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let (a, z) = (self.net.actions, self.net.atoms());
        let targets = self.td_targets(core, batch, &UpdateNoise::default())?;
        let out = self.net.outputs(&core.params, batch.values(fields::OBS)?, &HeadNoise::default())?;
        let taken = taken_actions(batch, a)?.into_iter().enumerate().map(|(i, act)| (i * a + act) * z);
        if z == 1 {
            return Ok(targets.iter().zip(taken).map(|(y, at)| out[at] - y).collect());
        }
        let probs: Vec<f32> = taken.flat_map(|at| out[at..at + z].iter().copied()).collect();
        Ok(cross_entropy(&targets, &probs, z))
    }

    fn state(&self) -> DqnState {
        self.state
    }

    fn set_state(&mut self, state: DqnState) {
        self.state = state;
    }
}

/// A DQN policy for the given spaces on the config's device.
///
/// # Errors
/// [`BuildError::Unsupported`] unless the action space is `Discrete`;
/// [`BuildError::Config`] for a `model` that does not fit the observation
/// space; a device this build or machine lacks.
pub fn make_policy(
    cfg: &DqnConfig,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let Space::Discrete { n } = action_space else {
        return Err(BuildError::Unsupported(format!(
            "DQN (and CQL, DQN's offline form) needs a Discrete action space (one Q-value per action); got \
             {action_space}: for continuous actions use DDPG, TD3 or SAC, and offline, SAC with `min_q_weight` \
             (continuous CQL) and `input`"
        )));
    };
    let build = Build { cfg, obs: observation_space, act: action_space, actions: *n as usize, rng_seed };
    on_device(cfg.learning.device, cfg.sampling.seed, build)
}

struct Build<'a> {
    cfg: &'a DqnConfig,
    obs: &'a Space,
    act: &'a Space,
    actions: usize,
    rng_seed: u64,
}

impl OnDevice for Build<'_> {
    type Output = Box<dyn PolicyGraph>;

    fn run<D: NetDevice>(self, dev: D) -> Result<Self::Output, BuildError> {
        Ok(Box::new(self.policy(dev)?))
    }
}

impl Build<'_> {
    fn policy<D: NetDevice>(self, dev: D) -> Result<DeepPolicy<Dqn<D>, D>, BuildError> {
        let mut params = Params::new(dev);
        let net = QNetwork::build(self.cfg, self.obs, self.actions, &mut params)?;
        let mut core = PolicyCore::new(params, self.obs.clone(), self.act.clone(), self.rng_seed).with_target();
        core.add_optimizer(0..core.num_params(), self.cfg.q_learning.lr, 1e-8, self.cfg.learning.grad_clip);
        let dqn = Dqn {
            exploration: self.cfg.exploration(),
            cfg: self.cfg.clone(),
            net,
            state: DqnState::default(),
            last_td: Vec::new(),
        };
        Ok(DeepPolicy::new(core, dqn))
    }
}

algorithm_name!(DqnConfig, "DQN");

/// The execution plan: evaluators from `make_env` sampling
/// `rollout_fragment_length` steps each per round, driven by
/// [`SyncReplayOptimizer`].
///
/// # Errors
/// If the env cannot be built or has unsupported spaces, or an evaluator
/// fails to start.
pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: DqnConfig) -> Result<Trainer, BuildError> {
    let sampling = cfg.replay.settings(&cfg.sampling);
    let replay = cfg.replay();
    let policy_cfg = cfg.clone();
    let make_policy = Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(&policy_cfg, o, a, seed));
    let evaluators = crate::common::sampling::spawn_evaluators(&ctx, make_env, make_policy, sampling).await?;
    let frames = frame_layout(&evaluators.local());
    let mut optimizer = SyncReplayOptimizer::new(replay).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    if let Some(layout) = frames {
        optimizer = optimizer.share_frames(layout).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    }
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

/// How replay stores the observations `evaluator` samples: as shared
/// frames of bytes ([`FrameLayout`]) for images of `uint8` (a rank-3 `Box`
/// of [`Dtype::U8`](rlx::Dtype::U8)) left unfiltered, as rows as they
/// come otherwise (`None`: bytes for any other `uint8` space, `f32`
/// else).
pub(crate) fn frame_layout(evaluator: &PolicyEvaluator) -> Option<FrameLayout> {
    evaluator.observation_filter().is_none().then(|| FrameLayout::of(evaluator.policy().observation_space()))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::replay::BATCH_INDEXES;

    type Policy = DeepPolicy<Dqn<Cpu>, Cpu>;

    fn spaces() -> (Space, Space) {
        (Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), Space::discrete(2))
    }

    fn policy(cfg: DqnConfig, rng_seed: u64) -> Policy {
        let (o, a) = spaces();
        let dev = Cpu::seed_from_u64(cfg.sampling.seed);
        Build { cfg: &cfg, obs: &o, act: &a, actions: 2, rng_seed }.policy(dev).unwrap()
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

    fn q(p: &Policy, params: &Params<Cpu>, obs: &[f32]) -> Vec<f32> {
        p.algorithm().net.q_values(params, obs.into(), &HeadNoise::default()).unwrap()
    }

    fn target(p: &Policy) -> &Params<Cpu> {
        p.core().target.as_ref().unwrap()
    }

    #[test]
    fn targets_follow_the_bellman_equation() {
        for (double_q, dueling) in [(true, true), (false, true), (true, false), (false, false)] {
            let mut p = policy(
                DqnConfig {
                    q_learning: QLearning { double_q, dueling, ..QLearning::default() },
                    ..DqnConfig::default()
                },
                0,
            );
            let b = batch(&mut p);
            let new_obs = b.f32(fields::NEW_OBS).unwrap();
            let (q_t, q_o) = (q(&p, target(&p), new_obs), q(&p, &p.core().params, new_obs));
            let targets = p.algorithm().td_targets(p.core(), &b, &UpdateNoise::default()).unwrap();
            for i in 0..4 {
                let pick =
                    if double_q { argmax(&q_o[i * 2..i * 2 + 2], None) } else { argmax(&q_t[i * 2..i * 2 + 2], None) };
                let r = b.f32(fields::REWARDS).unwrap()[i];
                let expected = if i == 2 { r } else { r + 0.99 * q_t[i * 2 + pick] };
                assert!((targets[i] - expected).abs() < 1e-6, "{double_q} {dueling} row {i}");
            }
            // The taped loss path sees the same TD errors as td_errors().
            let td = p.td_errors(&b).unwrap();
            let (_, stats) = p.compute_gradients(&b).unwrap();
            let mean_abs = td.iter().map(|x| x.abs() as f64).sum::<f64>() / 4.0;
            assert!((stats.get("mean_td_error").unwrap() - mean_abs).abs() < 1e-5);
            // Learning hands back those same TD errors, from before its
            // update, without a second pass; afterwards they have moved.
            let (_, learned) = p.learn_with_td_errors(&b).unwrap();
            assert!(td.iter().zip(&learned).all(|(a, b)| (a - b).abs() < 1e-6), "{td:?} {learned:?}");
            assert!(p.td_errors(&b).unwrap() != td, "the weights changed");
        }
    }

    #[test]
    fn dueling_q_is_value_plus_centered_advantage() {
        let p = policy(DqnConfig::default(), 0);
        let (net, params) = (&p.algorithm().net, &p.core().params);
        let obs = [0.1f32, -0.2, 0.3, 0.05];
        let features = net.torso.forward(params, net.torso.input().encode(params.device(), &obs).unwrap());
        let (adv, v) = (
            net.advantage.forward(params, features.clone(), None).as_vec(),
            net.value.forward(params, features, None).as_vec()[0],
        );
        let q = q(&p, params, &obs);
        let mean = (adv[0] + adv[1]) / 2.0;
        assert!((q[0] - (v + adv[0] - mean)).abs() < 1e-6 && (q[1] - (v + adv[1] - mean)).abs() < 1e-6);
    }

    #[test]
    fn masked_actions_are_never_taken_nor_bootstrapped_from() {
        let mut p = policy(DqnConfig { exploration_initial_eps: 0.5, ..DqnConfig::default() }, 0);
        let obs: Vec<f32> = (0..4 * 64).map(|i| (i as f32 * 0.13).sin()).collect();
        // Row r allows only action r % 2.
        let mask: Vec<f32> = (0..64).flat_map(|r| if r % 2 == 0 { [1.0, 0.0] } else { [0.0, 1.0] }).collect();
        for explore in [false, true] {
            let mut out = SampleBatch::new();
            let input = PolicyInput { obs: &obs, action_mask: Some(&mask), state: None, explore };
            p.compute_actions_from_input(&input, &mut out).unwrap();
            let actions = out.i64(fields::ACTIONS).unwrap();
            assert!(actions.iter().enumerate().all(|(r, &a)| a == (r % 2) as i64), "explore {explore}: {actions:?}");
        }
        let mut b = batch(&mut p);
        let new_obs = b.f32(fields::NEW_OBS).unwrap().to_vec();
        let q_t = q(&p, target(&p), &new_obs);
        // Only the worse next action is legal: the target must use it.
        let worse: Vec<f32> =
            (0..4).flat_map(|i| if q_t[2 * i] < q_t[2 * i + 1] { [1.0, 0.0] } else { [0.0, 1.0] }).collect();
        b.insert_f32(fields::NEW_ACTION_MASK, worse.clone(), 2).unwrap();
        let targets = p.algorithm().td_targets(p.core(), &b, &UpdateNoise::default()).unwrap();
        let r = b.f32(fields::REWARDS).unwrap();
        let next = q_t.iter().zip(&worse).map(|(q, m)| q * m).collect::<Vec<_>>();
        for i in [0, 1, 3] {
            let expected = r[i] + 0.99 * (next[2 * i] + next[2 * i + 1]);
            assert!((targets[i] - expected).abs() < 1e-6, "row {i}");
        }
    }

    /// C51 with 5 atoms on [-2, 2] (so targets are clamped and projected)
    /// and noisy heads.
    fn rainbow(double_q: bool) -> DqnConfig {
        let q_learning =
            QLearning { num_atoms: 5, v_min: -2.0, v_max: 2.0, noisy: true, double_q, ..QLearning::default() };
        DqnConfig { q_learning, exploration_initial_eps: 0.0, exploration_final_eps: 0.0, ..DqnConfig::default() }
    }

    #[test]
    fn distributional_targets_are_the_projected_target_distribution_at_the_best_action() {
        for double_q in [true, false] {
            let mut p = policy(rainbow(double_q), 0);
            let b = batch(&mut p);
            let new_obs = b.f32(fields::NEW_OBS).unwrap();
            let net = &p.algorithm().net;
            let support = net.support.unwrap();
            let none = HeadNoise::default();
            let probs_t = net.outputs(target(&p), new_obs.into(), &none).unwrap();
            assert_eq!(probs_t.len(), 4 * 2 * 5);
            let (q_t, q_o) = (support.means(&probs_t), q(&p, &p.core().params, new_obs));
            let targets = p.algorithm().td_targets(p.core(), &b, &UpdateNoise::default()).unwrap();
            let (r, ends) = (b.f32(fields::REWARDS).unwrap(), b.f32(fields::TERMINATEDS).unwrap());
            for i in 0..4 {
                let pick = argmax(if double_q { &q_o[i * 2..i * 2 + 2] } else { &q_t[i * 2..i * 2 + 2] }, None);
                let at = (i * 2 + pick) * 5;
                let expected = support.project(&probs_t[at..at + 5], r[i], 0.99 * (1.0 - ends[i]));
                assert_eq!(&targets[i * 5..i * 5 + 5], expected.as_slice(), "double_q {double_q} row {i}");
                assert!((expected.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            }
            // Row 2 ended with reward -1: all mass on the atom at -1.
            assert_eq!(&targets[10..15], &[0.0, 1.0, 0.0, 0.0, 0.0]);
            // The loss is the cross-entropy, which is also the TD error
            // prioritized replay reads; learning lowers it.
            let td = p.td_errors(&b).unwrap();
            let probs = p.algorithm().net.outputs(&p.core().params, b.values(fields::OBS).unwrap(), &none).unwrap();
            let actions = b.i64(fields::ACTIONS).unwrap();
            for i in 0..4 {
                let at = (i * 2 + actions[i] as usize) * 5;
                let ce: f32 = (0..5).map(|k| -targets[i * 5 + k] * probs[at + k].ln()).sum();
                assert!((td[i] - ce).abs() < 1e-5, "row {i}: {} against {ce}", td[i]);
            }
            let first = p.learn_on_batch(&b).unwrap();
            let loss = |s: &LearnerStats| s.get("loss").unwrap();
            let mut last = first.clone();
            for _ in 0..20 {
                last = p.learn_on_batch(&b).unwrap();
            }
            assert!(loss(&last) < loss(&first) * 0.9, "cross-entropy {} -> {}", loss(&first), loss(&last));
        }
    }

    #[test]
    fn noisy_heads_explore_by_their_noise_and_act_greedily_on_their_means() {
        let mut cfg = rainbow(true);
        cfg.q_learning.sigma0 = 4.0;
        let mut p = policy(cfg, 0);
        let obs: Vec<f32> = (0..4 * 64).map(|i| (i as f32 * 0.29).cos()).collect();
        let act = |p: &mut Policy, explore| {
            let mut out = SampleBatch::new();
            p.compute_actions(&obs, explore, &mut out).unwrap();
            out.i64(fields::ACTIONS).unwrap().to_vec()
        };
        let greedy = act(&mut p, false);
        assert_eq!(act(&mut p, false), greedy, "greedy acting draws no noise");
        // ε is 0: any departure from the greedy actions is the noise's.
        let explored: Vec<Vec<i64>> = (0..4).map(|_| act(&mut p, true)).collect();
        assert!(explored.iter().any(|a| a != &greedy), "the noise changes some actions");
        assert!(explored.windows(2).any(|w| w[0] != w[1]), "each exploring call draws fresh noise");
        // The σ weights train: an update moves them.
        let sigma = |p: &Policy| {
            let named = p.core().params.named();
            named
                .into_iter()
                .filter(|(name, _, _)| name.contains(".sigma."))
                .flat_map(|(_, _, v)| v)
                .collect::<Vec<f32>>()
        };
        let before = sigma(&p);
        assert_eq!(before.len(), (64 * 2 * 5 + 2 * 5) + (64 * 5 + 5), "σ of both heads, with atoms");
        let b = batch(&mut p);
        p.learn_on_batch(&b).unwrap();
        assert!(sigma(&p) != before);
    }

    #[test]
    fn learning_moves_q_towards_the_target_and_syncs_the_target_network() {
        let mut p = policy(
            DqnConfig {
                q_learning: QLearning { target_update_interval: 3, lr: 1e-2, ..QLearning::default() },
                ..DqnConfig::default()
            },
            0,
        );
        let b = batch(&mut p);
        let before: f32 = p.td_errors(&b).unwrap().iter().map(|x| x * x).sum();
        let target_before = target(&p).to_vec();
        p.learn_on_batch(&b).unwrap();
        p.learn_on_batch(&b).unwrap();
        assert_eq!(target(&p).to_vec(), target_before, "no copy before the interval");
        let stats = p.learn_on_batch(&b).unwrap();
        assert_eq!(target(&p).to_vec(), p.get_weights(), "copied at the interval");
        assert_eq!(stats.get("num_target_updates"), Some(1.0));
        let after: f32 = p.td_errors(&b).unwrap().iter().map(|x| x * x).sum();
        assert!(after < before, "squared TD error {before} -> {after}");
    }

    #[test]
    fn gradient_split_equals_learn_step() {
        let (mut x, mut y) = (policy(DqnConfig::default(), 0), policy(DqnConfig::default(), 0));
        let b = batch(&mut x);
        let (g, _) = x.compute_gradients(&b).unwrap();
        x.apply_gradients(&g).unwrap();
        y.learn_on_batch(&b).unwrap();
        assert_eq!(x.get_weights(), y.get_weights());
        assert!(x.apply_gradients(&g[1..]).is_err());
    }

    #[test]
    fn importance_weights_scale_the_gradient() {
        let mut p = policy(DqnConfig::default(), 0);
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
        let mut p = policy(cfg, 0);
        let obs = vec![0.1f32; 4 * 50];
        let mut out = SampleBatch::new();
        assert_eq!(p.algorithm().epsilon(), 1.0);
        p.compute_actions(&obs, false, &mut out).unwrap();
        assert_eq!(p.algorithm().epsilon(), 1.0, "greedy acting does not advance the schedule");
        let greedy = out.i64(fields::ACTIONS).unwrap().to_vec();
        assert!(greedy.iter().all(|&a| a == greedy[0]));
        p.compute_actions(&obs, true, &mut out).unwrap();
        let explored = out.i64(fields::ACTIONS).unwrap();
        assert!(explored.iter().any(|&a| a != greedy[0]), "ε = 1 explores");
        assert!((p.algorithm().epsilon() - 0.55).abs() < 1e-9);
        p.compute_actions(&obs, true, &mut out).unwrap();
        assert!((p.algorithm().epsilon() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn state_round_trips_and_bad_input_is_an_error() {
        for mut cfg in [DqnConfig::default(), rainbow(true)] {
            cfg.q_learning.target_update_interval = 1000;
            let mut p = policy(cfg.clone(), 0);
            let b = batch(&mut p);
            p.learn_on_batch(&b).unwrap();
            let mut q = policy(cfg, 9);
            q.set_weights(&p.get_weights()).unwrap();
            q.load_state(&p.save_state().unwrap()).unwrap();
            assert_eq!(target(&q).to_vec(), target(&p).to_vec());
            p.learn_on_batch(&b).unwrap();
            q.learn_on_batch(&b).unwrap();
            assert_eq!(p.get_weights(), q.get_weights(), "a restored policy continues exactly");
            assert!(q.load_state(b"junk").is_err());
        }
        let mut p = policy(DqnConfig::default(), 0);
        let b = batch(&mut p);

        let mut bad = b.clone();
        bad.insert_i64(fields::ACTIONS, vec![0, 1, 2, 0], 1).unwrap();
        assert!(p.learn_on_batch(&bad).unwrap_err().to_string().contains("action 2"));
        assert!(p.td_errors(&bad).unwrap_err().to_string().contains("action 2"), "not a panic");
        let mut missing = SampleBatch::new();
        missing.insert_f32(fields::OBS, vec![0.0; 4], 4).unwrap();
        assert!(p.learn_on_batch(&missing).is_err());
        let err = rlx::config::merge_json(&DqnConfig::default(), &serde_json::json!({"n_step": 0})).unwrap_err();
        assert!(err.to_string().contains("n_step"), "{err}");
        let err =
            rlx::config::merge_json(&DqnConfig::default(), &serde_json::json!({"final_prioritized_replay_beta": 2.0}))
                .unwrap_err();
        assert!(err.to_string().contains("final_prioritized_replay_beta"), "{err}");
        for (bad, key) in [
            (serde_json::json!({"num_atoms": 0}), "num_atoms"),
            (serde_json::json!({"num_atoms": 5000}), "num_atoms"),
            (serde_json::json!({"num_atoms": 51, "v_min": 10.0, "v_max": 10.0}), "v_max"),
            (serde_json::json!({"num_atoms": 51, "v_min": 1.0, "v_max": 1.00000001}), "v_max"),
            (serde_json::json!({"num_atoms": 51, "v_min": -1e300, "v_max": 1.0}), "v_min"),
            (serde_json::json!({"noisy": true, "sigma0": 0.0}), "sigma0"),
        ] {
            let err = rlx::config::merge_json(&DqnConfig::default(), &bad).unwrap_err();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        let err = rlx::config::merge_json(&DqnConfig::default(), &serde_json::json!({"model": {"use_lstm": true}}))
            .unwrap_err();
        assert!(err.to_string().contains("model.use_lstm"), "{err}");
        let err = make_policy(&DqnConfig::default(), &spaces().0, &Space::uniform_box(-1.0, 1.0, vec![2]).unwrap(), 0)
            .err()
            .unwrap();
        assert!(err.to_string().contains("Discrete action space"), "{err}");
    }
}
