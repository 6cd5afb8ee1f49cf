//! What DDPG, TD3 and SAC share: their config keys beyond the sections, action
//! bounds, critics `Q(s, a)` on `[action, observation]`, and Bellman
//! targets.
//!
//! Inside these policies actions are in **normalized units** `u ∈ [−1,
//! 1]^A`, scaled to the env's bounds only when acting: `a = low + (u + 1)/2
//! · (high − low)`. A critic reads the concatenation `[u, s]`, the action
//! first (dfdx merges a taped tensor only into an untaped one on its
//! right).

use crate::common::build_context::BuildContext;
use crate::common::deep_policy::{join_on_cpu, PolicyCore};
use crate::common::sections::{Learning, Replay, Sampling};
use crate::error::BuildError;
use crate::model::device::{on_device, NetDevice, OnDevice};
use crate::model::{Input, Linear, Matrix, Mlp, ModelConfig, ModelSupport, Params, Taped};
use dfdx::prelude::*;
use rlx::config::{check, ConfigError};
use rlx::env::EnvMaker;
use rlx::export::{ActionHead, PolicyExport};
use rlx::gaussian_actions::{GaussianActions, Squash};
use rlx::postprocessing::N_STEP_DISCOUNTS;
use rlx::{fields, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space, SyncReplayOptimizer, Trainer};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;

/// A stochastic actor's log standard deviation (SAC's, IQL's) is squashed
/// into `[LOG_STD_MIN, LOG_STD_MAX]` by `tanh` (as CleanRL) rather than
/// clipped, so it always has a gradient.
pub const LOG_STD_MIN: f32 = -5.0;
/// See [`LOG_STD_MIN`].
pub const LOG_STD_MAX: f32 = 2.0;

/// `LOG_STD_MIN + (tanh(raw) + 1)/2 · (LOG_STD_MAX − LOG_STD_MIN)`.
pub(crate) fn squash_log_std(raw: f32) -> f32 {
    LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (raw.tanh() + 1.0)
}

/// [`squash_log_std`] of every entry, on `raw`'s tape.
pub(crate) fn squashed_log_std<D: NetDevice, T: Tape<f32, D>>(raw: Matrix<D, T>) -> Matrix<D, T> {
    (raw.tanh() + 1.0) * (0.5 * (LOG_STD_MAX - LOG_STD_MIN)) + LOG_STD_MIN
}

/// The keys DDPG, TD3 and SAC share beyond the sampling, replay and
/// learning sections: the random warm-up, two learning rates and the
/// target networks' Polyak averaging.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default)]
pub struct ContinuousLearning {
    /// Env steps (all evaluators together) of uniformly random actions at
    /// the start, before the actor acts.
    pub random_timesteps: u64,
    /// Adam learning rate of the actor.
    pub actor_lr: f64,
    /// Adam learning rate of the critics.
    pub critic_lr: f64,
    /// Polyak coefficient τ of the target networks: `θ' ← τ θ + (1 − τ) θ'`.
    pub tau: f64,
}

impl Default for ContinuousLearning {
    fn default() -> Self {
        Self { random_timesteps: 1000, actor_lr: 1e-3, critic_lr: 1e-3, tau: 0.005 }
    }
}

impl ContinuousLearning {
    /// Range checks.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, lr) in [("actor_lr", self.actor_lr), ("critic_lr", self.critic_lr)] {
            check(key, lr, lr > 0.0 && lr.is_finite(), "must be > 0")?;
        }
        check("tau", self.tau, self.tau > 0.0 && self.tau <= 1.0, "must be in (0, 1]")
    }

    /// An evaluator's share of `random_timesteps`: each of the samplers
    /// takes about 1/samplers of the run's steps.
    pub(crate) fn random_steps_per_evaluator(&self, sampling: &Sampling) -> u64 {
        self.random_timesteps / sampling.samplers() as u64
    }
}

/// What building a DDPG/TD3 or SAC policy starts from: the config, the
/// env's spaces, the actors' input and action bounds.
pub(crate) struct ContinuousBuild<'a, C> {
    pub cfg: &'a C,
    pub obs: &'a Space,
    pub act: &'a Space,
    pub input: Input,
    pub bounds: ActionBounds,
    pub rng_seed: u64,
}

/// The sections of a DDPG/TD3 or SAC config that the family's shared code
/// reads.
pub(crate) struct Sections<'a> {
    pub sampling: &'a Sampling,
    pub replay: &'a Replay,
    pub learning: &'a Learning,
    pub continuous: &'a ContinuousLearning,
}

impl Sections<'_> {
    /// Range checks of the four sections for the algorithm `name`, whose
    /// networks are MLPs.
    ///
    /// # Errors
    /// The first out-of-range key.
    pub fn validate(&self, name: &'static str) -> Result<(), ConfigError> {
        self.learning.validate(ModelSupport::mlp(name))?;
        self.sampling.validate()?;
        self.replay.validate()?;
        self.continuous.validate()
    }
}

/// A continuous-control config whose policy can be built on any device.
pub(crate) trait ContinuousPolicy: Sized {
    /// The algorithm's name, for errors.
    const NAME: &'static str;

    /// The sampling, replay, learning and shared continuous sections.
    fn sections(&self) -> Sections<'_>;

    /// The policy on `dev`.
    fn build<D: NetDevice>(b: ContinuousBuild<'_, Self>, dev: D) -> Result<Box<dyn PolicyGraph>, BuildError>;
}

/// What DDPG and SAC share around their own policy: `impl
/// ContinuousPolicy for $config` (its sections are the config's
/// `sampling`, `replay`, `learning` and `continuous` fields, and
/// `$policy(build, device)` builds the policy), the public `make_policy`,
/// the name `--run` takes, and `build`, the family's execution plan
/// ([`replay_trainer`]), after `before_build(NAME, &cfg.sampling)` where
/// one is given (an offline algorithm's check of its `input`).
macro_rules! continuous_algorithm {
    ($config:ident, $name:literal, $what:literal, $policy:ident $(, before_build: $check:path)?) => {
        algorithm_name!($config, $name);

        /// The execution plan: evaluators from `make_env` sampling
        /// `rollout_fragment_length` steps each per round, driven by
        /// [`SyncReplayOptimizer`](rlx::SyncReplayOptimizer).
        ///
        /// # Errors
        /// If the env cannot be built or has unsupported spaces, or an evaluator
        /// fails to start.
        pub async fn build(ctx: BuildContext, make_env: EnvMaker, cfg: $config) -> Result<Trainer, BuildError> {
            $($check($config::NAME, &cfg.sampling)?;)?
            replay_trainer(&ctx, make_env, cfg).await
        }

        #[doc = concat!("A ", $what, " policy for the given spaces on the config's device.")]
        ///
        /// # Errors
        /// [`BuildError::Unsupported`] unless the action space is a `Box` with
        /// finite bounds; a device this build or machine lacks.
        pub fn make_policy(
            cfg: &$config,
            obs: &Space,
            act: &Space,
            seed: u64,
        ) -> Result<Box<dyn PolicyGraph>, BuildError> {
            core::make_policy(cfg, obs, act, seed)
        }

        impl ContinuousPolicy for $config {
            const NAME: &'static str = $config::NAME;

            fn sections(&self) -> Sections<'_> {
                Sections {
                    sampling: &self.sampling,
                    replay: &self.replay,
                    learning: &self.learning,
                    continuous: &self.continuous,
                }
            }

            fn build<D: NetDevice>(b: ContinuousBuild<'_, Self>, dev: D) -> Result<Box<dyn PolicyGraph>, BuildError> {
                Ok(Box::new($policy(b, dev)?))
            }
        }
    };
}
pub(crate) use continuous_algorithm;

impl<C: ContinuousPolicy> OnDevice for ContinuousBuild<'_, C> {
    type Output = Box<dyn PolicyGraph>;

    fn run<D: NetDevice>(self, dev: D) -> Result<Self::Output, BuildError> {
        C::build(self, dev)
    }
}

/// The networks DDPG, TD3 and SAC all start with, in the weights' order:
/// the actor's hidden layers and its `N` linear heads (`actor.<head>`), then
/// the critics on `[u, s]` (`critic<j>`).
pub(crate) struct Networks<const N: usize> {
    pub hidden: Mlp,
    pub heads: [Linear; N],
    pub critics: Vec<Critic>,
    /// The actor's and the critics' spans of the weights.
    spans: (Range<usize>, Range<usize>),
}

impl<C: ContinuousPolicy> ContinuousBuild<'_, C> {
    /// The actor, with one head of the action's width per name in `heads`,
    /// and `critics` critics, on `p` (the policy's own weights follow them).
    pub(crate) fn networks<D: NetDevice, const N: usize>(
        &self,
        p: &mut Params<D>,
        heads: [&str; N],
        critics: usize,
    ) -> Networks<N> {
        let model = &self.cfg.sections().learning.model;
        let (f, a) = (self.input.features(), self.bounds.dim());
        let start = p.next_id();
        let hidden = Mlp::new(p, "actor.hidden", f, &model.fcnet_hiddens, model.fcnet_activation);
        let heads = heads.map(|h| Linear::new(p, &format!("actor.{h}"), hidden.features(), a));
        let critics_start = p.next_id();
        let critics = (0..critics).map(|j| Critic::new(p, &format!("critic{j}"), a + f, model)).collect();
        let spans = (p.range(start, critics_start), p.range(critics_start, p.next_id()));
        Networks { hidden, heads, critics, spans }
    }

    /// The policy core over `p`, with target copies of the weights and the
    /// actor's and the critics' Adam as its optimizers 0 and 1.
    pub(crate) fn core<D: NetDevice, const N: usize>(&self, p: Params<D>, n: &Networks<N>) -> PolicyCore<D> {
        let s = self.cfg.sections();
        let mut core = PolicyCore::new(p, self.obs.clone(), self.act.clone(), self.rng_seed).with_target();
        core.add_optimizer(n.spans.0.clone(), s.continuous.actor_lr, 1e-8, s.learning.grad_clip);
        core.add_optimizer(n.spans.1.clone(), s.continuous.critic_lr, 1e-8, s.learning.grad_clip);
        core
    }
}

/// A policy of config `cfg`'s algorithm for the given spaces, on the
/// config's device.
pub(crate) fn make_policy<C: ContinuousPolicy>(
    cfg: &C,
    obs: &Space,
    act: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (input, bounds) = continuous_spaces(C::NAME, obs, act)?;
    let s = cfg.sections();
    on_device(s.learning.device, s.sampling.seed, ContinuousBuild { cfg, obs, act, input, bounds, rng_seed })
}

/// The execution plan of DDPG, TD3 and SAC: evaluators from `make_env`,
/// each with a policy from `make_policy`, sampling
/// `rollout_fragment_length` steps each per round, driven by
/// [`SyncReplayOptimizer`].
pub(crate) async fn replay_trainer<C: ContinuousPolicy + Send + Sync + 'static>(
    ctx: &BuildContext,
    make_env: EnvMaker,
    cfg: C,
) -> Result<Trainer, BuildError> {
    let s = cfg.sections();
    let (settings, optimizer) = (s.replay.settings(s.sampling), s.replay.optimizer(s.sampling.seed, None));
    let make = Arc::new(move |o: &Space, a: &Space, seed, _| make_policy(&cfg, o, a, seed));
    let evaluators = crate::common::sampling::spawn_evaluators(ctx, make_env, make, settings).await?;
    let optimizer = SyncReplayOptimizer::new(optimizer).map_err(|e| BuildError::Unsupported(e.to_string()))?;
    Ok(Trainer::new(evaluators, Box::new(optimizer)))
}

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

    /// The lower and the upper bounds.
    pub(crate) fn low_high(&self) -> (Vec<f32>, Vec<f32>) {
        (self.low.clone(), self.high.clone())
    }

    /// Action dimensions.
    pub(crate) fn dim(&self) -> usize {
        self.low.len()
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

    /// The distribution in env units of a Gaussian `N(mean, std²)` over
    /// normalized actions, its draws clipped to the box (`std` 0:
    /// deterministic).
    pub(crate) fn gaussian(&self, mean: &[f32], std: &[f32]) -> GaussianActions {
        let w = self.low.len();
        let std = std.iter().enumerate().map(|(i, s)| s * 0.5 * (self.high[i % w] - self.low[i % w])).collect();
        let squash = Squash::Clip { low: self.low.clone(), high: self.high.clone() };
        GaussianActions { dim: w, mean: self.to_env(mean), std, squash }
    }

    /// The distribution in env units of `tanh(u)`, `u ~ N(mean, std²)`,
    /// scaled into the box: a squashed Gaussian policy's (SAC's).
    pub(crate) fn squashed_gaussian(&self, mean: Vec<f32>, std: Vec<f32>) -> GaussianActions {
        let squash = Squash::Tanh { low: self.low.clone(), high: self.high.clone() };
        GaussianActions { dim: self.low.len(), mean, std, squash }
    }

    /// `log` of the uniform density over the box, in env units.
    pub(crate) fn uniform_log_density(&self) -> f32 {
        -self.low.iter().zip(&self.high).map(|(l, h)| (h - l).ln()).sum::<f32>()
    }

    /// The `actions` column, in env units, of rows of normalized actions.
    pub(crate) fn actions_batch(&self, u: &[f32]) -> Result<SampleBatch, PolicyError> {
        let mut out = SampleBatch::new();
        out.insert_f32(fields::ACTIONS, self.to_env(u), self.dim())?;
        Ok(out)
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

/// The export of an actor whose greedy action is `tanh(head(mlp(s)))`
/// scaled to `bounds` (DDPG's, TD3's and IQL's).
///
/// # Errors
/// An input that has no description (`Dict` observations).
pub(crate) fn tanh_actor_export<D: NetDevice>(
    p: &Params<D>,
    (input, bounds): (&Input, &ActionBounds),
    (mlp, head): (&Mlp, &Linear),
) -> Result<PolicyExport, PolicyError> {
    let (low, high) = bounds.low_high();
    Ok(PolicyExport {
        normalization: None,
        encoding: input.exported()?,
        body: mlp.exported(p),
        recurrent: None,
        head: vec![head.exported(p)],
        value: None,
        action: ActionHead::Tanh { low, high },
    })
}

/// The observation encoding and action bounds of an env for `algorithm`,
/// or why it cannot run on it: continuous (`Box`) actions with finite
/// bounds, observations of any space (images flattened).
///
/// # Errors
/// [`BuildError::Unsupported`] naming the spaces.
pub(crate) fn continuous_spaces(
    algorithm: &str,
    obs: &Space,
    act: &Space,
) -> Result<(Input, ActionBounds), BuildError> {
    if !matches!(act, Space::Box { .. }) {
        return Err(BuildError::Unsupported(format!(
            "{algorithm} supports Box (continuous) actions; got {act} (observations {obs})"
        )));
    }
    Ok((Input::flat(obs), ActionBounds::new(act, algorithm)?))
}

/// A critic `Q(s, a)`: the `model`'s fully connected layers on `[u, s]`,
/// then one output.
#[derive(Clone, Debug, PartialEq)]
pub struct Critic {
    mlp: Mlp,
    out: Linear,
}

impl Critic {
    /// A critic on `inputs = A + obs features`, tensors `{name}.…`.
    pub fn new<D: NetDevice>(p: &mut Params<D>, name: &str, inputs: usize, model: &ModelConfig) -> Self {
        let mlp = Mlp::new(p, &format!("{name}.hidden"), inputs, &model.fcnet_hiddens, model.fcnet_activation);
        let out = Linear::new(p, &format!("{name}.out"), mlp.features(), 1);
        Self { mlp, out }
    }

    /// `Q` of every row of `x = [u, s]`, `(rows, 1)`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.out.forward(p, self.mlp.forward(p, x))
    }

    /// Scalars of the critic's weights (its span of the flat vector).
    pub fn num_params(&self) -> usize {
        self.mlp.layers().iter().chain([&self.out]).map(|l| (l.inputs() + 1) * l.outputs()).sum()
    }

    /// `Q(x)` as a function of the input alone, the critic's weights
    /// constants of the pass: for an actor's loss, which differentiates
    /// through the critic but never trains it ([`Linear::forward_frozen`]).
    pub fn forward_frozen<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.out.forward_frozen(p, self.mlp.forward_frozen(p, x))
    }
}

/// The critic input `[u, s]` of every row, from normalized actions `u`
/// (`[n, A]`) and encoded observations `s` (`[n, F]`).
///
/// # Errors
/// If the two have different numbers of rows.
pub(crate) fn critic_input<D: NetDevice>(
    dev: &D,
    u: &[f32],
    a: usize,
    s: &[f32],
    f: usize,
) -> Result<Matrix<D>, PolicyError> {
    let n = s.len() / f.max(1);
    if u.len() != n * a || s.len() != n * f {
        return Err(PolicyError::Other(format!(
            "{} action values do not match {n} observation rows of {f} (actions are {a} wide)",
            u.len()
        )));
    }
    let mut x = Vec::with_capacity(n * (a + f));
    for (u, s) in u.chunks_exact(a).zip(s.chunks_exact(f)) {
        x.extend_from_slice(u);
        x.extend_from_slice(s);
    }
    Ok(dev.tensor_from_vec(x, (n, a + f)))
}

/// [`critic_input`] for actions on a gradient tape (the actor's output),
/// so that `∂Q/∂u` flows back into the actor.
pub(crate) fn critic_input_taped<D: NetDevice>(u: Matrix<D, Taped<D>>, s: Matrix<D>) -> Matrix<D, Taped<D>> {
    (u, s).concat_along(Axis::<1>)
}

/// The rows of a critic's input on the host: normalized actions, their
/// width, observations, their width ([`critic_input`]).
pub(crate) type CriticRows<'a> = (&'a [f32], usize, &'a [f32], usize);

/// Q-values of the rows `x` under each critic on `p` (no gradient), then
/// their element-wise minimum; twin critics side by side on the CPU when
/// `side_by_side` (an update whose other core is free, as in
/// [`critic_gradient`]).
pub(crate) fn min_q<D: NetDevice>(
    critics: &[Critic],
    p: &Params<D>,
    x: CriticRows<'_>,
    side_by_side: bool,
) -> Result<Vec<f32>, PolicyError> {
    let each = match critics {
        [a, b] if side_by_side => {
            let (a, b) = join_on_cpu!(p, |p| q_values(a, p, x), q_values(b, p, x));
            vec![a?, b?]
        }
        _ => critics.iter().map(|c| q_values(c, p, x)).collect::<Result<Vec<_>, _>>()?,
    };
    Ok((0..each[0].len()).map(|i| each.iter().map(|q| q[i]).fold(f32::INFINITY, f32::min)).collect())
}

/// `critic`'s Q-values of the rows `x` on `p`, no gradient.
fn q_values<D: NetDevice>(
    critic: &Critic,
    p: &Params<D>,
    (u, a, s, f): CriticRows<'_>,
) -> Result<Vec<f32>, PolicyError> {
    Ok(critic.forward(p, critic_input(p.device(), u, a, s, f)?).as_vec())
}

/// `R + γ^k (1 − terminated) · next_value` of every row.
pub(crate) fn bellman_targets(batch: &SampleBatch, next_value: &[f32]) -> Result<Vec<f32>, PolicyError> {
    let (rewards, terminated) = (batch.f32(fields::REWARDS)?, batch.f32(fields::TERMINATEDS)?);
    let discounts = batch.f32(N_STEP_DISCOUNTS)?;
    Ok((0..batch.len()).map(|i| rewards[i] + discounts[i] * (1.0 - terminated[i]) * next_value[i]).collect())
}

/// CQL(H)'s conservative penalty on a critic (Kumar et al., NeurIPS 2020,
/// for continuous actions as in their code and RLlib's):
///
/// ```text
/// weight · E_s[ log Σ_k exp(Q(s, u_k) − log p(u_k)) − Q(s, a_data) ]
/// ```
///
/// a log-sum-exp over `n` actions `u_k` drawn per replayed row, each less
/// the log-density it was drawn with (an importance-sampled estimate of
/// `log ∫ exp Q(s, u) du`), which pushes down the values of actions the
/// data did not take.
pub(crate) struct Conservative {
    /// The penalty's weight (`min_q_weight`).
    pub weight: f32,
    /// Actions per row.
    pub n: usize,
    /// Normalized actions, `n` per row, row after row (`rows × n × A`).
    pub actions: Vec<f32>,
    /// The log-density each was drawn with (`rows × n`).
    pub log_density: Vec<f32>,
}

/// The summed MSE loss `Σ_j mean (Q_j(s, a) − y)²` of `critics` on
/// `core`'s weights over the replayed `(s, a)` of `batch` (observations
/// encoded by `input`, actions normalized by `bounds`), with `mean_q`,
/// `mean_td_error` (of the first critic), `critic_loss` and
/// `mean_target_q` in the returned stats, and its gradient for `range`
/// (the critics' span of the weights, one critic after the other).
///
/// Each critic's gradient depends only on its own loss, so each is
/// differentiated on its own (the floats are those of differentiating the
/// sum), and with `twins_side_by_side` twin critics run side by side on
/// the CPU ([`join_on_cpu`]). That is for an update whose other core is
/// free: TD3's updates without the actor's half; beside the actor's half,
/// a third thread on two cores only waits for one.
///
/// With `conservative`, CQL's penalty ([`Conservative`]) is added to each
/// critic's loss (reported as `cql_penalty`, the first critic's, before its
/// weight); `None` is plain TD.
pub(crate) fn critic_gradient<D: NetDevice>(
    core: &PolicyCore<D>,
    critics: &[Critic],
    (input, bounds): (&Input, &ActionBounds),
    batch: &SampleBatch,
    targets: &[f32],
    (range, twins_side_by_side): (std::ops::Range<usize>, bool),
    conservative: Option<&Conservative>,
) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
    let sizes: Vec<usize> = critics.iter().map(Critic::num_params).collect();
    if sizes.iter().sum::<usize>() != range.len() {
        return Err(PolicyError::Other(format!(
            "the critics hold {} weights, but their span of the weights is {} long",
            sizes.iter().sum::<usize>(),
            range.len()
        )));
    }
    let u = bounds.to_normalized(batch.f32(fields::ACTIONS)?);
    let s = input.encode_host(batch.values(fields::OBS)?)?;
    let x = (u.as_slice(), bounds.dim(), s.as_slice(), input.features());
    let span = |j: usize| {
        let at = range.start + sizes[..j].iter().sum::<usize>();
        at..at + sizes[j]
    };
    let each = match critics {
        [a, b] if twins_side_by_side => {
            let (a, b) = join_on_cpu!(
                core,
                |c| one_critic_gradient(c, a, x, targets, span(0), conservative),
                one_critic_gradient(c, b, x, targets, span(1), conservative)
            );
            vec![a?, b?]
        }
        _ => critics
            .iter()
            .enumerate()
            .map(|(j, c)| one_critic_gradient(core, c, x, targets, span(j), conservative))
            .collect::<Result<_, _>>()?,
    };
    let n = targets.len();
    let mut stats = LearnerStats::default();
    let q = &each.first().expect("at least one critic").2;
    stats.set("mean_q", q.iter().map(|&q| q as f64).sum::<f64>() / n as f64);
    let td = q.iter().zip(targets).map(|(q, y)| (q - y).abs() as f64).sum::<f64>();
    stats.set("mean_td_error", td / n as f64);
    stats.set("critic_loss", each.iter().map(|(loss, ..)| loss).sum::<f32>() as f64);
    stats.set("mean_target_q", targets.iter().map(|&y| y as f64).sum::<f64>() / n.max(1) as f64);
    if let Some(penalty) = each.first().and_then(|(.., penalty)| *penalty) {
        stats.set("cql_penalty", penalty as f64);
    }
    let mut grad = Vec::with_capacity(each.iter().map(|(_, g, ..)| g.len()).sum());
    each.iter().for_each(|(_, g, ..)| grad.extend_from_slice(g));
    Ok((grad, stats))
}

/// One critic's loss on the rows `x` (normalized actions, their width,
/// observations, their width): the MSE against `targets`, plus CQL's
/// penalty if `conservative` is given. Returns the loss, its gradient for
/// `range` (the critic's span of the weights), the Q-values, and the
/// penalty before its weight.
fn one_critic_gradient<D: NetDevice>(
    core: &PolicyCore<D>,
    critic: &Critic,
    (u, a, s, f): CriticRows<'_>,
    targets: &[f32],
    range: std::ops::Range<usize>,
    conservative: Option<&Conservative>,
) -> Result<(f32, Vec<f32>, Vec<f32>, Option<f32>), PolicyError> {
    let dev = core.params.device();
    let Some(c) = conservative else {
        let x = critic_input(dev, u, a, s, f)?;
        let y = dev.tensor_from_vec(targets.to_vec(), (targets.len(), 1));
        let q = critic.forward(&core.params, x.leaky_traced());
        let q_host = q.as_vec();
        let (loss, grad) = core.backward((q - y).square().mean(), "critic loss", range)?;
        return Ok((loss, grad, q_host, None));
    };
    // Each row's logged action, then its n drawn actions, all beside the
    // row's observation: one pass of the critic, read as rows × (1 + n).
    let rows = targets.len();
    let per = 1 + c.n;
    if c.actions.len() != rows * c.n * a || c.log_density.len() != rows * c.n {
        return Err(PolicyError::Other(format!(
            "CQL: {} drawn action values and {} densities for {rows} rows of {} actions",
            c.actions.len(),
            c.log_density.len(),
            c.n
        )));
    }
    let mut all_u = Vec::with_capacity(rows * per * a);
    let mut all_s = Vec::with_capacity(rows * per * f);
    let (mut offsets, mut first) = (Vec::with_capacity(rows * per), Vec::with_capacity(rows * per));
    for r in 0..rows {
        all_u.extend_from_slice(&u[r * a..(r + 1) * a]);
        all_u.extend_from_slice(&c.actions[r * c.n * a..(r + 1) * c.n * a]);
        for _ in 0..per {
            all_s.extend_from_slice(&s[r * f..(r + 1) * f]);
        }
        // The logged action takes no part in the log-sum-exp.
        offsets.push(-1e30);
        offsets.extend(c.log_density[r * c.n..(r + 1) * c.n].iter().map(|&lp| -lp));
        first.push(1.0);
        first.extend(std::iter::repeat_n(0.0, c.n));
    }
    let x = critic_input(dev, &all_u, a, &all_s, f)?;
    let q = critic.forward(&core.params, x.leaky_traced()).reshape_like(&(rows, per));
    let q_data = (q.with_empty_tape() * dev.tensor_from_vec(first, (rows, per))).sum::<(usize,), Axis<1>>();
    let lse = (q + dev.tensor_from_vec(offsets, (rows, per))).logsumexp::<(usize,), Axis<1>>();
    let (q_host, lse_host) = (q_data.as_vec(), lse.as_vec());
    let penalty = lse_host.iter().zip(&q_host).map(|(l, q)| l - q).sum::<f32>() / rows.max(1) as f32;
    let y = dev.tensor_from_vec(targets.to_vec(), (rows,));
    let mse = (q_data.with_empty_tape() - y).square().mean();
    let loss = mse + (lse - q_data).mean() * c.weight;
    let (loss, grad) = core.backward(loss, "critic loss", range)?;
    Ok((loss, grad, q_host, Some(penalty)))
}

/// One step of each of `groups` on its span of `grad` (the whole weights'
/// gradient), each norm before clipping recorded under its key; side by
/// side where they are large enough ([`PolicyCore::step_groups`]).
///
/// # Errors
/// A non-finite gradient, or one of the wrong length.
pub(crate) fn step_groups<D: NetDevice>(
    core: &mut PolicyCore<D>,
    groups: &[(usize, &str)],
    grad: &mut [f32],
    stats: &mut LearnerStats,
) -> Result<(), PolicyError> {
    let which: Vec<usize> = groups.iter().map(|&(group, _)| group).collect();
    let norms = core.step_groups(&which, grad)?;
    for (&(_, key), norm) in groups.iter().zip(norms) {
        stats.set(key, norm as f64);
    }
    Ok(())
}

/// Moves the target networks towards the online ones by Polyak averaging,
/// `θ' ← τ θ + (1 − τ) θ'`.
pub(crate) fn soft_update_target<D: NetDevice>(core: &mut PolicyCore<D>, tau: f64) {
    let params = core.params.clone();
    core.target.as_mut().expect("DDPG, TD3 and SAC keep target networks").soft_update(&params, tau as f32);
}

/// Fixtures for the DDPG and SAC unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{continuous_spaces, ContinuousBuild, ContinuousPolicy};
    use crate::error::BuildError;
    use dfdx::prelude::Cpu;
    use rlx::postprocessing::N_STEP_DISCOUNTS;
    use rlx::{fields, SampleBatch, Space};

    /// The policy `policy` builds from `cfg` for [`spaces`], on a CPU seeded
    /// by the config.
    pub(crate) fn on_cpu<C: ContinuousPolicy, P>(
        cfg: &C,
        rng_seed: u64,
        policy: impl FnOnce(ContinuousBuild<'_, C>, Cpu) -> Result<P, BuildError>,
    ) -> P {
        let (o, a) = spaces();
        let (input, bounds) = continuous_spaces(C::NAME, &o, &a).unwrap();
        let dev = Cpu::seed_from_u64(cfg.sections().sampling.seed);
        policy(ContinuousBuild { cfg, obs: &o, act: &a, input, bounds, rng_seed }, dev).unwrap()
    }

    /// A 3-value observation and a 1-value action in `[-2, 2]`.
    pub(crate) fn spaces() -> (Space, Space) {
        (Space::uniform_box(-1.0, 1.0, vec![3]).unwrap(), Space::uniform_box(-2.0, 2.0, vec![1]).unwrap())
    }

    /// Four transitions of [`spaces`] with hand-picked rewards and ends.
    pub(crate) fn batch() -> SampleBatch {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_bounds_round_trip() {
        let b = ActionBounds::new(&Space::bounded(vec![-2.0, 0.0], vec![2.0, 1.0], vec![2]).unwrap(), "X").unwrap();
        assert_eq!(b.to_env(&[-1.0, -1.0, 0.0, 1.0]), vec![-2.0, 0.0, 0.0, 1.0]);
        assert_eq!(b.to_normalized(&[-2.0, 0.0, 0.0, 1.0, 5.0, -3.0]), vec![-1.0, -1.0, 0.0, 1.0, 1.0, -1.0]);
        let unbounded = Space::uniform_box(f32::NEG_INFINITY, f32::INFINITY, vec![1]).unwrap();
        assert!(ActionBounds::new(&unbounded, "X").unwrap_err().to_string().contains("finite bounds"));
    }

    /// Twin critics of 16×16 for [`fixtures::spaces`], seeded by `seed`.
    fn twin_critics(seed: u64) -> (Input, ActionBounds, Vec<Critic>, PolicyCore<Cpu>) {
        let (o, a) = fixtures::spaces();
        let (input, bounds) = continuous_spaces("SAC", &o, &a).unwrap();
        let mut p = Params::new(Cpu::seed_from_u64(seed));
        let model = ModelConfig { fcnet_hiddens: vec![16, 16], ..ModelConfig::default() };
        let critics: Vec<Critic> = (0..2).map(|j| Critic::new(&mut p, &format!("critic{j}"), 1 + 3, &model)).collect();
        (input, bounds, critics, PolicyCore::new(p, o, a, 0))
    }

    #[test]
    fn twin_critics_side_by_side_and_one_by_one_give_the_summed_losses_gradient() {
        // critic_gradient differentiates each critic's loss on its own
        // (side by side, or one after the other); both must give, bit for
        // bit, the gradient of the summed loss differentiated at once.
        let (input, bounds, critics, core) = twin_critics(5);
        let batch = fixtures::batch();
        let targets = [0.5, -1.0, 2.0, 0.0];
        let range = 0..core.num_params();
        let run = |side_by_side| {
            let spaces = (&input, &bounds);
            critic_gradient(&core, &critics, spaces, &batch, &targets, (range.clone(), side_by_side), None).unwrap()
        };
        let ((side_by_side, stats), (one_by_one, _)) = (run(true), run(false));
        let u = bounds.to_normalized(batch.f32(fields::ACTIONS).unwrap());
        let x = critic_input(core.params.device(), &u, 1, batch.f32(fields::OBS).unwrap(), 3).unwrap();
        let y = core.params.device().tensor_from_vec(targets.to_vec(), (4usize, 1usize));
        let loss = |c: &Critic| (c.forward(&core.params, x.clone().leaky_traced()) - y.clone()).square().mean();
        let (value, summed) =
            core.backward(loss(&critics[0]) + loss(&critics[1]), "critic loss", range.clone()).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&side_by_side), bits(&summed));
        assert_eq!(bits(&one_by_one), bits(&summed));
        assert!((stats.get("critic_loss").unwrap() - value as f64).abs() < 1e-6);
        assert!(summed.iter().filter(|g| g.abs() > 1e-3).count() > 100, "the check compared vanishing gradients");
        // A span that does not match the critics is an error, not a panic.
        let short = (0..range.end - 1, true);
        let err = critic_gradient(&core, &critics, (&input, &bounds), &batch, &targets, short, None).unwrap_err();
        assert!(err.to_string().contains("span of the weights"), "{err}");
    }

    #[test]
    fn the_conservative_penalty_is_the_log_sum_exp_of_drawn_actions_less_the_logged_q() {
        let (input, bounds, critics, core) = twin_critics(9);
        let batch = fixtures::batch();
        let targets = [0.5, -1.0, 2.0, 0.0];
        // Three drawn actions per row, with made-up log-densities.
        let drawn: Vec<f32> = (0..12).map(|i| ((i as f32) * 0.61).sin()).collect();
        let log_density: Vec<f32> = (0..12).map(|i| -0.7 + 0.1 * i as f32).collect();
        let c = Conservative { weight: 2.0, n: 3, actions: drawn.clone(), log_density: log_density.clone() };
        let range = 0..core.num_params();
        let spaces = (&input, &bounds);
        let (grad, stats) =
            critic_gradient(&core, &critics, spaces, &batch, &targets, (range.clone(), false), Some(&c)).unwrap();
        // CQL runs the twins side by side: the same gradient, bit for bit.
        let (beside, _) =
            critic_gradient(&core, &critics, spaces, &batch, &targets, (range.clone(), true), Some(&c)).unwrap();
        assert!(grad.iter().zip(&beside).all(|(a, b)| a.to_bits() == b.to_bits()));
        // By hand, with each critic's Q-values on the host.
        let obs = batch.f32(fields::OBS).unwrap();
        let u = bounds.to_normalized(batch.f32(fields::ACTIONS).unwrap());
        let repeated: Vec<f32> = obs.chunks(3).flat_map(|row| std::iter::repeat_n(row, 3).flatten()).copied().collect();
        let mut total = 0.0;
        for (j, critic) in critics.iter().enumerate() {
            let q = q_values(critic, &core.params, (&u, 1, obs, 3)).unwrap();
            let q_drawn = q_values(critic, &core.params, (&drawn, 1, &repeated, 3)).unwrap();
            let penalty: f32 = (0..4)
                .map(|r| {
                    let terms = (0..3).map(|k| q_drawn[r * 3 + k] - log_density[r * 3 + k]);
                    let max = terms.clone().fold(f32::NEG_INFINITY, f32::max);
                    max + terms.map(|t| (t - max).exp()).sum::<f32>().ln() - q[r]
                })
                .sum::<f32>()
                / 4.0;
            let mse = q.iter().zip(&targets).map(|(q, y)| (q - y).powi(2)).sum::<f32>() / 4.0;
            if j == 0 {
                assert!((stats.get("cql_penalty").unwrap() - penalty as f64).abs() < 1e-5, "{stats:?} {penalty}");
                assert!((stats.get("mean_q").unwrap() - q.iter().sum::<f32>() as f64 / 4.0).abs() < 1e-5);
            }
            total += mse + 2.0 * penalty;
        }
        assert!((stats.get("critic_loss").unwrap() - total as f64).abs() < 1e-4, "{stats:?} {total}");
        // The penalty changes the gradient: without it, it is plain TD's.
        let (plain, _) = critic_gradient(&core, &critics, spaces, &batch, &targets, (range, false), None).unwrap();
        assert!(grad.iter().zip(&plain).any(|(g, p)| (g - p).abs() > 1e-3));
        // Drawn actions that do not fit the rows are named.
        let short = Conservative { actions: drawn[..11].to_vec(), ..c };
        let err =
            critic_gradient(&core, &critics, spaces, &batch, &targets, (0..core.num_params(), false), Some(&short));
        assert!(err.unwrap_err().to_string().contains("CQL: 11 drawn action values"));
    }

    #[test]
    fn critic_input_puts_the_action_first_and_the_taped_path_agrees() {
        let dev = Cpu::seed_from_u64(0);
        let x = critic_input(&dev, &[0.5, -0.5], 1, &[1.0, 2.0, 3.0, 4.0], 2).unwrap();
        assert_eq!(x.as_vec(), vec![0.5, 1.0, 2.0, -0.5, 3.0, 4.0]);
        let u = dev.tensor_from_vec(vec![0.5, -0.5], (2usize, 1usize));
        let s = dev.tensor_from_vec(vec![1.0, 2.0, 3.0, 4.0], (2usize, 2usize));
        assert_eq!(critic_input_taped(u.leaky_traced(), s).as_vec(), x.as_vec());
        assert!(critic_input(&dev, &[0.5], 1, &[1.0, 2.0, 3.0, 4.0], 2).is_err());
    }
}
