//! Off-policy estimates: the return a policy would get, estimated from
//! episodes another policy (the behaviour policy) logged, without playing
//! the env. A run from `input` reports them beside each evaluation, under
//! `off_policy_estimation` in `result.json`, as RLlib's old stack did.
//!
//! Each logged step may give the behaviour policy's probability (or
//! density) of the action it took, `μ(a|s) = exp(action_logp)`, and the
//! target policy (the one being trained) gives its own, `π(a|s)`. With
//! `ρ_t = π(a_t|s_t) / μ(a_t|s_t)` and `ρ_{0:t}` their product up to `t`,
//! each episode's value over its logged length is estimated by
//!
//! - **`is`**, per-decision importance sampling (Precup et al. 2000):
//!   `Σ_t γ^t ρ_{0:t} r_t`. Unbiased; its variance grows with the length.
//! - **`wis`**, weighted per-decision importance sampling: each `ρ_{0:t}`
//!   divided by its mean over the episodes at step `t`. Biased, lower
//!   variance.
//! - **`dm`**, the direct method with fitted Q evaluation (Le et al. 2019):
//!   `V̂(s_0) = E_{a~π}[Q̂(s_0, a)]`, where `Q̂` is fitted to the episodes by
//!   `Q̂(s,a) = r + γ E_{a'~π}[Q̂(s',a')]` (a [`FittedQ`]). It needs no
//!   `action_logp`, so it also serves data without one (Minari's, DQN's,
//!   DDPG's) and deterministic targets (DDPG, TD3).
//! - **`dr`**, doubly robust (Jiang & Li 2016): `V̂(s_t) + ρ_t (r_t + γ
//!   v_{t+1} − Q̂(s_t, a_t))`, backwards from `v_T = 0`, with the same `Q̂`.
//!
//! **Action features.** Every `Q̂` here is linear in features `b(a)` of the
//! action, `Q̂(s, a) = Σ_j b_j(a) φ_j(s)`, so that `E_{a~π}[Q̂(s, a)] = Σ_j
//! E_π[b_j(a)] φ_j(s)` needs only the target's expected features, exactly,
//! with no sampled actions. For `Discrete(n)` actions `b(a)` is the one-hot
//! of `a` (so `φ_j(s)` is `Q̂(s, j)` and `E_π[b]` is `π(·|s)`); for a `Box`
//! of `d` values it is `(1, a_1..a_d, a_1²..a_d²)`, a quadratic in each
//! value, whose expectation under the target's Gaussian
//! ([`GaussianActions`]) is its means and mean squares. `φ` is linear in
//! `(1, s)` for the default, [`LinearFqe`], solved exactly (the fixed
//! point of that regression, as LSTD-Q), which needs no training loop and
//! no learning rate; `rlx-algorithms` fits a network instead
//! (`off_policy_estimation_q_model: {"type": "neural"}`), as RLlib's FQE
//! does.
//!
//! Every estimate is of the discounted return over the episode as logged
//! (to its end: termination, truncation or the end of the writing run), so
//! that `v_behavior`, the logged discounted return, is its baseline.

use crate::experience::{Episodes, ExperienceReader};
use crate::gaussian_actions::{action_features, GaussianActions};
use crate::policy::PolicyGraph;
use crate::sample_batch::{fields, SampleBatch};
use crate::space::Space;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An off-policy estimator, by its config name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Estimator {
    /// Per-decision importance sampling.
    Is,
    /// Weighted per-decision importance sampling.
    Wis,
    /// The direct method, with fitted Q evaluation.
    Dm,
    /// Doubly robust, with the same fitted Q.
    Dr,
}

impl Estimator {
    /// Whether it weighs logged actions by both policies' probabilities
    /// (all but `dm`).
    pub fn weighs_actions(self) -> bool {
        self != Estimator::Dm
    }

    /// The config and `result.json` name.
    pub fn name(self) -> &'static str {
        match self {
            Estimator::Is => "is",
            Estimator::Wis => "wis",
            Estimator::Dm => "dm",
            Estimator::Dr => "dr",
        }
    }
}

/// One estimator's result: `off_policy_estimation.<name>` in `result.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Mean discounted return of the logged episodes.
    pub v_behavior: f64,
    /// The target policy's estimated mean discounted return.
    pub v_target: f64,
    /// Standard deviation of the per-episode estimates.
    pub v_target_std: f64,
    /// `v_target − v_behavior`.
    pub v_delta: f64,
    /// `v_target / v_behavior` (0 where `v_behavior` is 0).
    pub v_gain: f64,
    /// Episodes estimated from.
    pub episodes: u64,
}

/// One logged episode with both policies' probabilities. Actions are
/// given by their features `b(a)`, `m` values a step (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoggedEpisode {
    /// Observations, `width` values per step.
    pub obs: Vec<f32>,
    /// The observations after each step.
    pub new_obs: Vec<f32>,
    /// `b(a_t)` of each action taken.
    pub action_features: Vec<f32>,
    /// The rewards.
    pub rewards: Vec<f32>,
    /// `log μ(a_t|s_t)` of each action taken; empty where the data has no
    /// `action_logp` (only `dm` estimates then).
    pub behaviour_logp: Vec<f32>,
    /// `log π(a_t|s_t)` of each action taken; empty for a deterministic
    /// target (only `dm` estimates then).
    pub target_logp: Vec<f32>,
    /// `E_π[b(a)|s_t]`: for discrete actions, `π(·|s_t)`.
    pub target: Vec<f32>,
    /// `E_π[b(a)|s_{t+1}]`.
    pub next_target: Vec<f32>,
}

impl LoggedEpisode {
    /// Steps logged.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether no step is logged.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// `ρ_t = π(a_t|s_t) / μ(a_t|s_t)` of each step; empty where either
    /// side has no probabilities.
    fn ratios(&self) -> Vec<f64> {
        match self.behaviour_logp.len() == self.len() && self.target_logp.len() == self.len() {
            true => self
                .target_logp
                .iter()
                .zip(&self.behaviour_logp)
                .map(|(&p, &m)| (f64::from(p) - f64::from(m)).exp())
                .collect(),
            false => Vec::new(),
        }
    }

    fn discounted_return(&self, gamma: f64) -> f64 {
        self.rewards.iter().rev().fold(0.0, |v, &r| f64::from(r) + gamma * v)
    }
}

/// The estimates of each of `methods` from `episodes`, for actions of `m`
/// features and observations of `width` values; `dm` and `dr` fit `q` to
/// the episodes first.
///
/// # Errors
/// `is`, `wis` or `dr` asked of an episode without both policies'
/// probabilities, or what `q` reports.
pub fn estimate(
    methods: &[Estimator],
    episodes: &[LoggedEpisode],
    (m, width): (usize, usize),
    gamma: f64,
    q: &mut dyn FittedQ,
) -> Result<BTreeMap<String, Estimate>, String> {
    let episodes: Vec<&LoggedEpisode> = episodes.iter().filter(|e| !e.is_empty()).collect();
    let behavior: Vec<f64> = episodes.iter().map(|e| e.discounted_return(gamma)).collect();
    let ratios: Vec<Vec<f64>> = episodes.iter().map(|e| e.ratios()).collect();
    if let Some(method) = methods.iter().find(|m| m.weighs_actions()) {
        if let Some(e) = episodes.iter().zip(&ratios).find(|(_, r)| r.is_empty()).map(|(e, _)| e) {
            let missing = if e.behaviour_logp.len() != e.len() { "the behaviour's" } else { "the target's" };
            return Err(format!(
                "{} weighs each logged action by both policies' probabilities, and {missing} are missing",
                method.name()
            ));
        }
    }
    // ρ_{0:t} of every episode at every step.
    let cumulative: Vec<Vec<f64>> = ratios
        .iter()
        .map(|r| {
            r.iter()
                .scan(1.0, |p, x| {
                    *p *= x;
                    Some(*p)
                })
                .collect()
        })
        .collect();
    if methods.iter().any(|m| matches!(m, Estimator::Dm | Estimator::Dr)) {
        q.fit(&episodes, (m, width), gamma)?;
    }
    // `Σ_j b_j φ_j(s)` of each row of `q_values` (`φ`) and of features `b`.
    let dot = |q_values: &[f64], features: &[f32]| -> Vec<f64> {
        q_values
            .chunks_exact(m)
            .zip(features.chunks_exact(m))
            .map(|(q, b)| q.iter().zip(b).map(|(q, &b)| q * f64::from(b)).sum())
            .collect()
    };
    let mut out = BTreeMap::new();
    for &method in methods {
        let per_episode: Vec<f64> = match method {
            Estimator::Is => episodes
                .iter()
                .zip(&cumulative)
                .map(|(e, w)| discounted(e.rewards.iter().zip(w).map(|(&r, w)| w * f64::from(r)), gamma))
                .collect(),
            Estimator::Wis => {
                let longest = episodes.iter().map(|e| e.len()).max().unwrap_or(0);
                let mean_weight: Vec<f64> = (0..longest)
                    .map(|t| {
                        let at_t: Vec<f64> = cumulative.iter().filter_map(|w| w.get(t).copied()).collect();
                        at_t.iter().sum::<f64>() / at_t.len() as f64
                    })
                    .collect();
                episodes
                    .iter()
                    .zip(&cumulative)
                    .map(|(e, w)| {
                        let terms = e.rewards.iter().zip(w).zip(&mean_weight).map(|((&r, w), m)| match *m > 0.0 {
                            true => w / m * f64::from(r),
                            false => 0.0,
                        });
                        discounted(terms, gamma)
                    })
                    .collect()
            }
            Estimator::Dm => episodes
                .iter()
                .map(|e| Ok(dot(&q.q_values(&e.obs[..width])?, &e.target[..m])[0]))
                .collect::<Result<_, String>>()?,
            Estimator::Dr => episodes
                .iter()
                .zip(&ratios)
                .map(|(e, rho)| {
                    let q_values = q.q_values(&e.obs)?;
                    let (v_hat, q_taken) = (dot(&q_values, &e.target), dot(&q_values, &e.action_features));
                    Ok((0..e.len())
                        .rev()
                        .fold(0.0, |v, t| v_hat[t] + rho[t] * (f64::from(e.rewards[t]) + gamma * v - q_taken[t])))
                })
                .collect::<Result<_, String>>()?,
        };
        out.insert(method.name().to_string(), summary(&behavior, &per_episode));
    }
    Ok(out)
}

/// `Σ_t γ^t x_t`.
fn discounted(terms: impl DoubleEndedIterator<Item = f64>, gamma: f64) -> f64 {
    terms.rev().fold(0.0, |v, x| x + gamma * v)
}

fn summary(behavior: &[f64], per_episode: &[f64]) -> Estimate {
    let n = per_episode.len().max(1) as f64;
    let v_behavior = behavior.iter().sum::<f64>() / n;
    let v_target = per_episode.iter().sum::<f64>() / n;
    let var = per_episode.iter().map(|v| (v - v_target).powi(2)).sum::<f64>() / n;
    Estimate {
        v_behavior,
        v_target,
        v_target_std: var.sqrt(),
        v_delta: v_target - v_behavior,
        v_gain: if v_behavior == 0.0 { 0.0 } else { v_target / v_behavior },
        episodes: per_episode.len() as u64,
    }
}

/// A `Q̂` of the target policy for `dm` and `dr`, fitted to logged
/// episodes by fitted Q evaluation (Le et al. 2019): [`LinearFqe`] here,
/// a network in `rlx-algorithms`. It is linear in the action's features,
/// `Q̂(s, a) = Σ_j b_j(a) φ_j(s)` (see the module docs), and keeps what it
/// fitted between calls, so a model that trains may start from its last
/// fit.
pub trait FittedQ: Send {
    /// Refuses, saying why, a dataset of actions of `m` features and
    /// observations of `width` values that this model cannot fit.
    ///
    /// # Errors
    /// As said.
    fn check(&self, m: usize, width: usize) -> Result<(), String>;

    /// Fits `Q̂(s,a) = r + γ E_{a'~π}[Q̂(s',a')]` over every step of
    /// `episodes` (`E_π[b(a')|s']` is each step's `next_target`), with no
    /// bootstrap past an episode's last step.
    ///
    /// # Errors
    /// A fit that failed (a loss that is not finite, say).
    fn fit(&mut self, episodes: &[&LoggedEpisode], shape: (usize, usize), gamma: f64) -> Result<(), String>;

    /// `φ(s)` of each row of `obs`: `m` values a row, row after row (for
    /// discrete actions, `Q̂(s, ·)`).
    ///
    /// # Errors
    /// No fit yet, or the model's error.
    fn q_values(&self, obs: &[f32]) -> Result<Vec<f64>, String>;
}

/// `Q̂(s, a) = w · (b(a) ⊗ (1, s))`, fitted exactly: the default
/// [`FittedQ`].
#[derive(Debug, Default)]
pub struct LinearFqe {
    w: Vec<f64>,
    width: usize,
}

impl FittedQ for LinearFqe {
    /// Refuses more than [`MAX_FEATURES`] features: the normal equations
    /// are a dense square of that side.
    fn check(&self, m: usize, width: usize) -> Result<(), String> {
        let features = m * (width + 1);
        match features > MAX_FEATURES {
            true => Err(format!(
                "the linear fitted Q of dm and dr has {features} features ({m} action features × ({width} \
                 observation values + 1)), more than the {MAX_FEATURES} it solves for: use is or wis, or \
                 \"off_policy_estimation_q_model\": {{\"type\": \"neural\"}}"
            )),
            false => Ok(()),
        }
    }

    /// The fixed point of `Q̂(s,a) ← r + γ E_π[Q̂(s',a')]` over every
    /// logged step, with a small ridge so that features the data never
    /// varies stay at 0.
    fn fit(&mut self, episodes: &[&LoggedEpisode], (m, width): (usize, usize), gamma: f64) -> Result<(), String> {
        let d = m * (width + 1);
        let (mut a, mut b) = (vec![0.0f64; d * d], vec![0.0f64; d]);
        let mut phi = vec![0.0f64; d];
        let mut next = vec![0.0f64; d];
        let mut steps = 0usize;
        for e in episodes {
            for t in 0..e.len() {
                phi.fill(0.0);
                features(&mut phi, &e.obs[t * width..(t + 1) * width], &e.action_features[t * m..(t + 1) * m]);
                next.fill(0.0);
                if t + 1 < e.len() {
                    features(&mut next, &e.new_obs[t * width..(t + 1) * width], &e.next_target[t * m..(t + 1) * m]);
                }
                for i in (0..d).filter(|&i| phi[i] != 0.0) {
                    for j in 0..d {
                        a[i * d + j] += phi[i] * (phi[j] - gamma * next[j]);
                    }
                    b[i] += phi[i] * f64::from(e.rewards[t]);
                }
                steps += 1;
            }
        }
        let ridge = 1e-6 * steps.max(1) as f64;
        for i in 0..d {
            a[i * d + i] += ridge;
        }
        *self = Self { w: solve(a, b, d), width };
        Ok(())
    }

    fn q_values(&self, obs: &[f32]) -> Result<Vec<f64>, String> {
        if self.w.is_empty() {
            return Err("the linear fitted Q has not been fitted".into());
        }
        let block = self.width + 1;
        Ok(obs
            .chunks_exact(self.width.max(1))
            .flat_map(|s| {
                self.w
                    .chunks_exact(block)
                    .map(move |w| w[0] + s.iter().zip(&w[1..]).map(|(&x, w)| f64::from(x) * w).sum::<f64>())
            })
            .collect())
    }
}

/// Adds `b ⊗ (1, s)` to `phi`.
fn features(phi: &mut [f64], s: &[f32], b: &[f32]) {
    for (block, &b) in phi.chunks_exact_mut(s.len() + 1).zip(b).filter(|(_, &b)| b != 0.0) {
        let b = f64::from(b);
        block[0] += b;
        for (x, &v) in block[1..].iter_mut().zip(s) {
            *x += b * f64::from(v);
        }
    }
}

/// `x` with `A x = b` (`A` is `d × d`, row-major), by Gaussian elimination
/// with partial pivoting; a singular direction gets 0.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>, d: usize) -> Vec<f64> {
    for col in 0..d {
        let pivot = (col..d).max_by(|&i, &j| a[i * d + col].abs().total_cmp(&a[j * d + col].abs())).unwrap_or(col);
        if a[pivot * d + col].abs() < 1e-300 {
            continue;
        }
        if pivot != col {
            for j in 0..d {
                a.swap(col * d + j, pivot * d + j);
            }
            b.swap(col, pivot);
        }
        for row in col + 1..d {
            let f = a[row * d + col] / a[col * d + col];
            if f != 0.0 {
                for j in col..d {
                    a[row * d + j] -= f * a[col * d + j];
                }
                b[row] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; d];
    for row in (0..d).rev() {
        let diag = a[row * d + row];
        if diag.abs() < 1e-300 {
            continue;
        }
        let rest: f64 = (row + 1..d).map(|j| a[row * d + j] * x[j]).sum();
        x[row] = (b[row] - rest) / diag;
    }
    x
}

/// The most features (`action features × (observation values + 1)`) the
/// [`LinearFqe`] solves for: its normal equations are a dense square of
/// that side.
pub const MAX_FEATURES: usize = 2048;

/// The logged actions of `batch` as `f32` rows of `d` values.
///
/// # Errors
/// No `actions` column, or one of another width.
fn logged_box_actions(batch: &SampleBatch, d: usize) -> Result<Vec<f32>, String> {
    let actions = batch.f32(fields::ACTIONS).map_err(|e| e.to_string())?;
    if actions.len() != batch.len() * d {
        return Err(format!("{} logged action values for {} rows of {d}", actions.len(), batch.len()));
    }
    Ok(actions.to_vec())
}

/// Why a deterministic target cannot be weighed.
const DETERMINISTIC: &str = "the target policy is deterministic (a standard deviation of 0): it has no density for \
                             is, wis and dr to weigh logged actions by; dm needs none";

/// What a run from `input` estimates at each evaluation: `episodes`
/// episodes read in turn from the dataset (over and over), with the
/// current policy as the target.
pub struct OffPolicyEstimation {
    methods: Vec<Estimator>,
    episodes: usize,
    /// Episodes in one whole pass over the dataset, once one has ended.
    pass_len: Option<usize>,
    /// Episodes read since the current pass began.
    read_in_pass: usize,
    gamma: f64,
    actions: Actions,
    width: usize,
    /// The `Q̂` of `dm` and `dr`, refitted at each estimate.
    q: Box<dyn FittedQ>,
    reader: ExperienceReader,
    stream: Episodes,
}

/// The dataset's actions.
#[derive(Clone, Copy, Debug)]
enum Actions {
    /// One choice of `n`: features are the one-hot.
    Discrete(usize),
    /// A `Box` of `d` values: features are `(1, a, a²)`.
    Continuous(usize),
}

impl Actions {
    /// Features per action.
    fn features(self) -> usize {
        match self {
            Actions::Discrete(n) => n,
            Actions::Continuous(d) => 1 + 2 * d,
        }
    }
}

impl OffPolicyEstimation {
    /// Estimates with `methods` from `episodes` episodes of `reader`'s at a
    /// time, discounting by `gamma`; `dm` and `dr` fit `q`.
    ///
    /// # Errors
    /// `is`, `wis` or `dr` on a dataset without the behaviour policy's
    /// `action_logp` (as Minari's and DQN's output), actions that are
    /// neither one discrete choice nor a `Box`, or a dataset `q` cannot
    /// fit.
    pub fn new(
        methods: Vec<Estimator>,
        episodes: usize,
        gamma: f64,
        reader: ExperienceReader,
        q: Box<dyn FittedQ>,
    ) -> Result<Self, String> {
        let info = reader.info();
        let weighing: Vec<&str> = methods.iter().filter(|m| m.weighs_actions()).map(|m| m.name()).collect();
        if !weighing.is_empty() && !info.columns.contains_key(fields::ACTION_LOGP) {
            return Err(format!(
                "off-policy estimates {} weigh each logged action by the behaviour policy's probability, \
                 but {} has no `{}` column (Minari's, DQN's, DDPG's and TD3's data hold none): dm needs none",
                weighing.join(", "),
                reader.dir().display(),
                fields::ACTION_LOGP
            ));
        }
        let actions = match &info.action_space {
            Space::Discrete { n } => Actions::Discrete(*n as usize),
            space @ Space::Box { .. } => Actions::Continuous(space.flat_dim()),
            other => {
                let names = methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
                return Err(format!(
                    "off-policy estimates ({names}) take one discrete choice or a Box of actions; the dataset's \
                     action space is {other}"
                ));
            }
        };
        let width = info.columns.get(fields::OBS).map_or(0, |c| c.width);
        if methods.iter().any(|m| matches!(m, Estimator::Dm | Estimator::Dr)) {
            q.check(actions.features(), width)?;
        }
        let stream = reader.episodes();
        Ok(Self {
            methods,
            episodes: episodes.max(1),
            pass_len: None,
            read_in_pass: 0,
            gamma,
            actions,
            width,
            q,
            reader,
            stream,
        })
    }

    /// Checks, before training, that `policy` gives what the estimators
    /// need, on one row of zero observations: probabilities for discrete
    /// actions, a distribution for continuous ones, with a density where
    /// `is`, `wis` or `dr` weigh by it.
    ///
    /// # Errors
    /// What the policy lacks, named.
    pub fn check_target(&self, policy: &mut dyn PolicyGraph) -> Result<(), String> {
        let zeros = vec![0.0; self.width];
        match self.actions {
            Actions::Discrete(_) => policy.action_probabilities(&zeros).map(drop).map_err(|e| e.to_string()),
            Actions::Continuous(d) => {
                let dist = policy.action_distribution(&zeros).map_err(|e| e.to_string())?;
                dist.check(1, d)?;
                match dist.has_density() || !self.weighs() {
                    true => Ok(()),
                    false => Err(DETERMINISTIC.into()),
                }
            }
        }
    }

    /// Whether any of the methods weighs logged actions by probabilities.
    fn weighs(&self) -> bool {
        self.methods.iter().any(|m| m.weighs_actions())
    }

    /// The estimates from the next episodes, with `policy` as the target:
    /// its [`PolicyGraph::action_probabilities`] for discrete actions, its
    /// [`PolicyGraph::action_distribution`] for continuous ones.
    ///
    /// # Errors
    /// A file that cannot be read, or the policy's error.
    pub fn run(&mut self, policy: &mut dyn PolicyGraph) -> Result<BTreeMap<String, Estimate>, String> {
        let mut logged = Vec::with_capacity(self.episodes);
        let mut restarted = false;
        // A dataset of fewer episodes than asked for gives each once.
        while logged.len() < self.episodes.min(self.pass_len.unwrap_or(usize::MAX)) {
            let batch = match self.stream.next() {
                Some(episode) => episode.map_err(|e| e.to_string())?.batch,
                None if restarted => break,
                None => {
                    self.pass_len = Some(self.read_in_pass);
                    self.read_in_pass = 0;
                    self.stream = self.reader.episodes();
                    restarted = true;
                    continue;
                }
            };
            self.read_in_pass += 1;
            logged.push(self.logged(&batch, policy)?);
        }
        estimate(&self.methods, &logged, (self.actions.features(), self.width), self.gamma, self.q.as_mut())
    }

    fn logged(&self, batch: &SampleBatch, policy: &mut dyn PolicyGraph) -> Result<LoggedEpisode, String> {
        let e = |e: crate::sample_batch::BatchError| e.to_string();
        let obs = batch.values(fields::OBS).map_err(e)?.to_f32().into_owned();
        let new_obs = batch.values(fields::NEW_OBS).map_err(e)?.to_f32().into_owned();
        let rows = batch.len();
        if obs.len() != rows * self.width || new_obs.len() != obs.len() {
            return Err(format!("observations of {} values for {rows} rows of {}", obs.len(), self.width));
        }
        let (action_features, target_logp, target, next_target) = match self.actions {
            Actions::Discrete(k) => {
                let probabilities = |obs: &[f32], policy: &mut dyn PolicyGraph| {
                    let p = policy.action_probabilities(obs).map_err(|e| e.to_string())?;
                    match p.len() == rows * k {
                        true => Ok(p),
                        false => {
                            Err(format!("the policy gave {} probabilities for {rows} rows of {k} actions", p.len()))
                        }
                    }
                };
                let (target, next_target) = (probabilities(&obs, policy)?, probabilities(&new_obs, policy)?);
                let actions = batch.i64(fields::ACTIONS).map_err(e)?;
                if actions.len() != rows {
                    return Err(format!("{} logged actions for {rows} rows of one discrete choice", actions.len()));
                }
                let actions: Vec<usize> = actions
                    .iter()
                    .map(|&a| {
                        usize::try_from(a).ok().filter(|&a| a < k).ok_or_else(|| format!("a logged action of {a}"))
                    })
                    .collect::<Result<_, _>>()?;
                let mut onehot = vec![0.0; rows * k];
                actions.iter().enumerate().for_each(|(t, &a)| onehot[t * k + a] = 1.0);
                let target_logp = actions.iter().enumerate().map(|(t, &a)| target[t * k + a].ln()).collect();
                (onehot, target_logp, target, next_target)
            }
            Actions::Continuous(d) => {
                let distribution = |obs: &[f32], policy: &mut dyn PolicyGraph| {
                    let dist = policy.action_distribution(obs).map_err(|e| e.to_string())?;
                    dist.check(rows, d).map(|()| dist)
                };
                let (now, next): (GaussianActions, GaussianActions) =
                    (distribution(&obs, policy)?, distribution(&new_obs, policy)?);
                let actions = logged_box_actions(batch, d)?;
                let target_logp = match now.log_density(&actions) {
                    Some(logp) => logp,
                    None if self.weighs() => return Err(DETERMINISTIC.into()),
                    None => Vec::new(),
                };
                (action_features(&actions, d), target_logp, now.expected_features(), next.expected_features())
            }
        };
        let rewards = batch.f32(fields::REWARDS).map_err(e)?.to_vec();
        if rewards.len() != rows {
            return Err(format!("{} logged rewards for {rows} rows", rewards.len()));
        }
        let behaviour_logp = match batch.f32(fields::ACTION_LOGP) {
            Ok(logp) => logp.to_vec(),
            Err(_) if !self.weighs() => Vec::new(),
            Err(err) => return Err(err.to_string()),
        };
        Ok(LoggedEpisode { obs, new_obs, action_features, rewards, behaviour_logp, target_logp, target, next_target })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gaussian_actions::Squash;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const ALL: [Estimator; 4] = [Estimator::Is, Estimator::Wis, Estimator::Dm, Estimator::Dr];

    /// A bandit of three arms paying N(mean, 1) in one-step episodes:
    /// logged by `mu`, evaluated for `pi`.
    fn bandit(n: usize, seed: u64) -> Vec<LoggedEpisode> {
        let (means, mu, pi) = ([1.0f32, 0.0, 2.0], [0.5f32, 0.3, 0.2], vec![0.1f32, 0.2, 0.7]);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let u: f32 = rng.gen();
                let a = if u < mu[0] {
                    0
                } else if u < mu[0] + mu[1] {
                    1
                } else {
                    2
                };
                // A sum of 12 uniforms less 6: mean 0, variance 1.
                let noise: f32 = (0..12).map(|_| rng.gen::<f32>()).sum::<f32>() - 6.0;
                LoggedEpisode {
                    obs: vec![0.5],
                    new_obs: vec![0.5],
                    action_features: onehot(a, 3),
                    rewards: vec![means[a] + noise],
                    behaviour_logp: vec![mu[a].ln()],
                    target_logp: vec![pi[a].ln()],
                    target: pi.clone(),
                    next_target: pi.clone(),
                }
            })
            .collect()
    }

    /// `method`'s mean absolute error from `truth` over `seeds` datasets
    /// of `n` episodes each (`(n, seeds)`), with actions of `m` features
    /// and one observation value, by the linear fit.
    fn mean_error(
        method: Estimator,
        data: fn(usize, u64) -> Vec<LoggedEpisode>,
        (n, seeds): (usize, u64),
        m: usize,
        truth: f64,
    ) -> f64 {
        let error = |seed| {
            let e = estimate(&[method], &data(n, seed), (m, 1), 0.99, &mut LinearFqe::default()).unwrap();
            (e[method.name()].v_target - truth).abs()
        };
        (0..seeds).map(error).sum::<f64>() / seeds as f64
    }

    /// The target's true value: 0.1·1 + 0.2·0 + 0.7·2.
    const TRUE_VALUE: f64 = 1.5;

    /// `a`'s features among `n` discrete actions.
    fn onehot(a: usize, n: usize) -> Vec<f32> {
        (0..n).map(|i| if i == a { 1.0 } else { 0.0 }).collect()
    }

    /// One-step episodes of a continuous bandit: `s` uniform in [−1, 1],
    /// the behaviour draws `a ~ N(0, 1)`, the reward is `1 − a² + 2as`
    /// plus N(0, 0.1²) noise. The target draws `a ~ N(s/2, ½²)`, worth
    /// `1 − (s²/4 + ¼) + s²` at `s`: `1` on average over `s` (`E[s²] =
    /// ⅓`). The reward is in the span of the features `(1, a, a²) ⊗ (1,
    /// s)`, so the fitted Q can be exact.
    fn continuous_bandit(n: usize, seed: u64) -> Vec<LoggedEpisode> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Box and Muller's draw.
        let normal = |rng: &mut ChaCha8Rng| -> f32 {
            let (u, v): (f32, f32) = (rng.gen_range(1e-7..1.0), rng.gen());
            (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
        };
        (0..n)
            .map(|_| {
                let s: f32 = rng.gen_range(-1.0..1.0);
                let a = normal(&mut rng);
                let reward = 1.0 - a * a + 2.0 * a * s + 0.1 * normal(&mut rng);
                let behaviour = GaussianActions { dim: 1, mean: vec![0.0], std: vec![1.0], squash: Squash::None };
                let target = GaussianActions { dim: 1, mean: vec![s / 2.0], std: vec![0.5], squash: Squash::None };
                LoggedEpisode {
                    obs: vec![s],
                    new_obs: vec![s],
                    action_features: action_features(&[a], 1),
                    rewards: vec![reward],
                    behaviour_logp: behaviour.log_density(&[a]).unwrap(),
                    target_logp: target.log_density(&[a]).unwrap(),
                    target: target.expected_features(),
                    next_target: target.expected_features(),
                }
            })
            .collect()
    }

    #[test]
    fn continuous_actions_are_estimated_and_the_error_shrinks_with_the_data() {
        for method in ALL {
            let error = |n: usize| mean_error(method, continuous_bandit, (n, 20), 3, 1.0);
            let (small, large) = (error(100), error(5000));
            assert!(small > large, "{method:?}: mean errors {small} {large}");
            assert!(large < 0.05, "{method:?}: mean error {large} on 5,000 episodes");
        }
        // The behaviour's own value: E[1 − a²] = 0.
        let e = &estimate(&[Estimator::Dm], &continuous_bandit(20_000, 1), (3, 1), 0.99, &mut LinearFqe::default())
            .unwrap()["dm"];
        assert!(e.v_behavior.abs() < 0.03, "{e:?}");
        // Without the target's density, the weighing estimators refuse.
        let mut deterministic = continuous_bandit(10, 1);
        deterministic.iter_mut().for_each(|e| e.target_logp.clear());
        let err = estimate(&[Estimator::Dr], &deterministic, (3, 1), 0.99, &mut LinearFqe::default()).unwrap_err();
        assert!(err.contains("dr") && err.contains("target"), "{err}");
        assert!(estimate(&[Estimator::Dm], &deterministic, (3, 1), 0.99, &mut LinearFqe::default()).is_ok());
    }

    #[test]
    fn every_estimator_s_error_shrinks_as_the_logged_bandit_data_grows() {
        for method in ALL {
            let error = |n: usize| mean_error(method, bandit, (n, 30), 3, TRUE_VALUE);
            let (small, medium, large) = (error(30), error(300), error(3000));
            assert!(small > medium && medium > large, "{method:?}: mean errors {small} {medium} {large}");
            assert!(large < 0.06, "{method:?}: mean error {large} on 3,000 episodes");
        }
        // The behaviour's own value: 0.5·1 + 0.3·0 + 0.2·2 = 0.9.
        let e = &estimate(&[Estimator::Is], &bandit(20_000, 1), (3, 1), 0.99, &mut LinearFqe::default()).unwrap()["is"];
        assert!((e.v_behavior - 0.9).abs() < 0.03, "{e:?}");
        assert!((e.v_delta - (e.v_target - e.v_behavior)).abs() < 1e-12 && e.episodes == 20_000);
    }

    /// Two steps: the first pays nothing, the second pays 1 for action 1.
    /// With the target equal to the behaviour, every estimator gives the
    /// logged mean, the importance-sampling ones exactly.
    #[test]
    fn on_policy_data_estimates_the_logged_return_and_fitted_q_carries_rewards_back() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let probs = vec![0.5f32, 0.5];
        let episodes: Vec<LoggedEpisode> = (0..4000)
            .map(|_| {
                let (a0, a1) = (rng.gen_range(0..2usize), rng.gen_range(0..2usize));
                LoggedEpisode {
                    obs: vec![0.0, 1.0],
                    new_obs: vec![1.0, 2.0],
                    action_features: [onehot(a0, 2), onehot(a1, 2)].concat(),
                    rewards: vec![0.0, if a1 == 1 { 1.0 } else { 0.0 }],
                    behaviour_logp: vec![0.5f32.ln(); 2],
                    target_logp: vec![0.5f32.ln(); 2],
                    target: [probs.clone(), probs.clone()].concat(),
                    next_target: [probs.clone(), probs.clone()].concat(),
                }
            })
            .collect();
        let estimates = estimate(&ALL, &episodes, (2, 1), 0.9, &mut LinearFqe::default()).unwrap();
        let logged = estimates["is"].v_behavior;
        // Every ratio is 1 (to f32 rounding): importance sampling gives the
        // logged mean.
        assert!((estimates["is"].v_target - logged).abs() < 1e-6 && (estimates["wis"].v_target - logged).abs() < 1e-6);
        // The direct method values the start from Q̂ alone, which must
        // carry the second step's reward back: 0.9 · 0.5.
        for (name, e) in &estimates {
            assert!((e.v_target - 0.45).abs() < 0.02, "{name}: {e:?}");
        }
    }

    #[test]
    fn the_solver_solves_and_leaves_unseen_directions_at_zero() {
        let x = solve(vec![2.0, 1.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0, 0.0], vec![3.0, 5.0, 0.0], 3);
        assert!((x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12 && x[2] == 0.0, "{x:?}");
    }
}
