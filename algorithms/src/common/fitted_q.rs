//! The `Q̂` that the direct-method and doubly-robust off-policy estimates
//! fit to logged episodes (`off_policy_estimation_q_model`): the
//! framework's exact linear fit, or a network trained by fitted Q
//! evaluation (Le et al. 2019), as RLlib's `FQETorchModel` is.
//!
//! The network maps a state to one output per action feature, `φ(s)`,
//! and `Q̂(s, a) = b(a) · φ(s)` (the framework's features: the one-hot of
//! a discrete action, so one output per action as in DQN; `(1, a, a²)` of
//! a continuous one, a quadratic in each action value whose coefficients
//! bend with the state). Its fit is a sequence of regressions. Each
//! iteration freezes the network's own values of the next states into
//! targets `y = r + γ E_{a'~π}[Q̂(s',a')]` (no bootstrap past an episode's
//! last logged step; each target kept within the least and the most that
//! the logged rewards add up to over the longest episode, since no
//! policy's value lies outside and an off-policy fit can otherwise run
//! away), then takes one pass of Adam over the steps in shuffled
//! minibatches on `(Q̂(s,a) − y)²`. It stops after `iterations`, or
//! sooner once an iteration moves the logged steps' `Q̂(s,a)` by less
//! than `tolerance` of their size. The network is kept between estimates:
//! the target policy changes little from one evaluation to the next, so
//! each fit starts near its answer.
//!
//! A linear `Q̂` is only as good as a linear fit of `Q^π`; a network fits
//! values that bend with the state (the tests' bandit pays `s²`), at the
//! cost of a training loop and its settings.

use crate::common::update_rules::Adam;
use crate::model::{Activation, Linear, Mlp, Params};
use dfdx::prelude::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, check_count, ConfigError};
use rlx::filter::RunningStat;
use rlx::off_policy_estimation::{FittedQ, LinearFqe, LoggedEpisode};
use serde::{Deserialize, Serialize};

/// Which `Q̂` `dm` and `dr` fit (`off_policy_estimation_q_model`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum QModelConfig {
    /// `{"type": "linear"}`: linear in `b(a) ⊗ (1, s)`, solved
    /// exactly ([`LinearFqe`]).
    #[default]
    Linear,
    /// `{"type": "neural", ...}`: a network fitted by fitted Q evaluation.
    Neural(NeuralFqeConfig),
}

/// The network's settings (`{"type": "neural"}` with any of these keys).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NeuralFqeConfig {
    /// Hidden layers (ReLU), then one output per action feature.
    pub hiddens: Vec<usize>,
    /// Fitted Q iterations per estimate at the most: one pass over the
    /// logged steps each.
    pub iterations: usize,
    /// Stop once an iteration moves the logged steps' `Q̂(s, a)` by less
    /// than this share of their size.
    pub tolerance: f64,
    /// Adam's learning rate.
    pub lr: f64,
    /// Steps per gradient step.
    pub minibatch_size: usize,
    /// Seeds the network's weights and the minibatches' order.
    pub seed: u64,
}

impl Default for NeuralFqeConfig {
    fn default() -> Self {
        Self { hiddens: vec![64, 64], iterations: 100, tolerance: 1e-3, lr: 1e-3, minibatch_size: 256, seed: 0 }
    }
}

impl QModelConfig {
    /// The key these settings are read from.
    pub const KEY: &'static str = "off_policy_estimation_q_model";

    /// Checks the network's settings.
    ///
    /// # Errors
    /// A setting out of range, named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let QModelConfig::Neural(c) = self else { return Ok(()) };
        let key = |setting: &str| format!("{}.{setting}", Self::KEY);
        for &h in &c.hiddens {
            check_count(&key("hiddens"), h, 1, 4096)?;
        }
        check_count(&key("iterations"), c.iterations, 1, 100_000)?;
        check(&key("tolerance"), c.tolerance, c.tolerance >= 0.0 && c.tolerance.is_finite(), "must be >= 0")?;
        check(&key("lr"), c.lr, c.lr > 0.0 && c.lr.is_finite(), "must be > 0")?;
        check_count(&key("minibatch_size"), c.minibatch_size, 1, 1 << 20)
    }

    /// A fresh model of this kind.
    pub fn build(&self) -> Box<dyn FittedQ> {
        match self {
            QModelConfig::Linear => Box::<LinearFqe>::default(),
            QModelConfig::Neural(c) => Box::new(NeuralFqe { cfg: c.clone(), net: None }),
        }
    }
}

/// `Q̂` as a network (see the module docs).
pub struct NeuralFqe {
    cfg: NeuralFqeConfig,
    /// Built at the first fit, when the spaces are known.
    net: Option<Net>,
}

/// The network, its optimizer and its inputs' standardization.
struct Net {
    params: Params<Cpu>,
    body: Mlp,
    head: Linear,
    adam: Adam,
    /// Each observation value's mean and `1 / std` over the first fit's
    /// steps.
    shift: Vec<f32>,
    scale: Vec<f32>,
    /// Action features.
    m: usize,
    width: usize,
    rng: ChaCha8Rng,
}

/// Every logged step, flat.
struct Steps {
    obs: Vec<f32>,
    new_obs: Vec<f32>,
    /// `b(a)` of each step's action.
    actions: Vec<f32>,
    rewards: Vec<f32>,
    /// `E_π[b(a')|s']` of each step, zeros after an episode's last step.
    next_target: Vec<f32>,
}

impl Steps {
    fn of(episodes: &[&LoggedEpisode], m: usize) -> Self {
        let mut s = Steps { obs: vec![], new_obs: vec![], actions: vec![], rewards: vec![], next_target: vec![] };
        for e in episodes {
            s.obs.extend_from_slice(&e.obs);
            s.new_obs.extend_from_slice(&e.new_obs);
            s.actions.extend_from_slice(&e.action_features);
            s.rewards.extend_from_slice(&e.rewards);
            let bootstrapped = e.len().saturating_sub(1) * m;
            s.next_target.extend_from_slice(&e.next_target[..bootstrapped]);
            s.next_target.extend(std::iter::repeat_n(0.0, e.len() * m - bootstrapped));
        }
        s
    }
}

impl Net {
    fn new(cfg: &NeuralFqeConfig, m: usize, width: usize, obs: &[f32]) -> Self {
        let mut params = Params::new(Cpu::seed_from_u64(cfg.seed));
        let body = Mlp::new(&mut params, "fqe", width, &cfg.hiddens, Activation::Relu);
        let head = Linear::new(&mut params, "fqe.q", body.features(), m);
        let mut stats = RunningStat::new(width);
        obs.chunks_exact(width.max(1)).for_each(|row| stats.push(row));
        let shift = stats.mean().iter().map(|&m| m as f32).collect();
        let scale = stats.std().iter().map(|&sd| if sd > 1e-6 { sd.recip() as f32 } else { 1.0 }).collect();
        let adam = Adam::new(params.len(), cfg.lr as f32, 1e-8);
        Self { params, body, head, adam, shift, scale, m, width, rng: ChaCha8Rng::seed_from_u64(cfg.seed) }
    }

    /// The standardized rows of `obs` at `rows`, as a matrix.
    fn input(&self, obs: &[f32], rows: impl Iterator<Item = usize>) -> Tensor<(usize, usize), f32, Cpu> {
        let w = self.width;
        let mut x = Vec::new();
        for r in rows {
            x.extend(obs[r * w..(r + 1) * w].iter().zip(&self.shift).zip(&self.scale).map(|((x, m), s)| (x - m) * s));
        }
        let n = x.len() / w.max(1);
        self.params.device().tensor_from_vec(x, (n, w))
    }

    /// `φ(s)` of every row of `obs`.
    fn q(&self, obs: &[f32]) -> Vec<f32> {
        let rows = obs.len() / self.width.max(1);
        let mut out = Vec::with_capacity(rows * self.m);
        for start in (0..rows).step_by(4096) {
            let x = self.input(obs, start..(start + 4096).min(rows));
            out.extend(self.head.forward(&self.params, self.body.forward(&self.params, x)).as_vec());
        }
        out
    }

    /// One pass of Adam over `steps` in shuffled minibatches, regressing
    /// `Q̂(s, a) = b(a) · φ(s)` on `targets`.
    fn regress(&mut self, steps: &Steps, targets: &[f32], minibatch: usize) -> Result<(), String> {
        let mut order: Vec<usize> = (0..targets.len()).collect();
        order.shuffle(&mut self.rng);
        for rows in order.chunks(minibatch) {
            let dev = self.params.device().clone();
            let n = rows.len();
            let m = self.m;
            let taken: Vec<f32> = rows.iter().flat_map(|&r| &steps.actions[r * m..(r + 1) * m]).copied().collect();
            let y = dev.tensor_from_vec(rows.iter().map(|&r| targets[r]).collect(), (n,));
            let x = self.input(&steps.obs, rows.iter().copied()).leaky_traced();
            let q = self.head.forward(&self.params, self.body.forward(&self.params, x));
            let q_taken = (q * dev.tensor_from_vec(taken, (n, m))).sum::<(usize,), Axis<1>>();
            let loss = (q_taken - y).square().mean();
            if !loss.as_vec()[0].is_finite() {
                return Err("the neural fitted Q's loss is not finite".into());
            }
            let grad = self.params.grads(&mut loss.backward(), 0..self.params.len());
            let mut weights = self.params.to_vec();
            self.adam.update(&mut weights, &grad).map_err(|e| e.to_string())?;
            self.params.load(&weights).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// The least and the most that the logged rewards can add up to over the
/// longest logged episode, discounted: no policy's `Q` lies outside, and
/// the fit keeps its bootstrap targets inside. Off-policy fitted Q
/// iteration with a network can otherwise run away from the data (on
/// Pendulum it reached +5·10⁶ where every reward is negative).
fn return_bounds(episodes: &[&LoggedEpisode], gamma: f64) -> (f32, f32) {
    let longest = episodes.iter().map(|e| e.len()).max().unwrap_or(0);
    let horizon: f64 = (0..longest).map(|t| gamma.powi(t as i32)).sum();
    let rewards = episodes.iter().flat_map(|e| &e.rewards).map(|&r| f64::from(r));
    let (least, most) = rewards.fold((0.0f64, 0.0f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    ((least * horizon) as f32, (most * horizon) as f32)
}

impl FittedQ for NeuralFqe {
    /// Any spaces: the network takes the observation's values as they are.
    fn check(&self, _m: usize, _width: usize) -> Result<(), String> {
        Ok(())
    }

    fn fit(&mut self, episodes: &[&LoggedEpisode], (m, width): (usize, usize), gamma: f64) -> Result<(), String> {
        let steps = Steps::of(episodes, m);
        let net = self.net.get_or_insert_with(|| Net::new(&self.cfg, m, width, &steps.obs));
        if (net.m, net.width) != (m, width) {
            return Err(format!(
                "the neural fitted Q was built for {} action features and {} values, not {m} and {width}",
                net.m, net.width
            ));
        }
        // `b(a) · φ(s)` of each row.
        let dot = |phi: &[f32], b: &[f32]| -> Vec<f32> {
            phi.chunks_exact(m).zip(b.chunks_exact(m)).map(|(q, b)| q.iter().zip(b).map(|(q, b)| q * b).sum()).collect()
        };
        let taken = |q: Vec<f32>| dot(&q, &steps.actions);
        let (low, high) = return_bounds(episodes, gamma);
        let mut last = taken(net.q(&steps.obs));
        for _ in 0..self.cfg.iterations {
            let next_q = net.q(&steps.new_obs);
            let targets: Vec<f32> = steps
                .rewards
                .iter()
                .zip(dot(&next_q, &steps.next_target))
                .map(|(r, v)| (r + gamma as f32 * v).clamp(low, high))
                .collect();
            net.regress(&steps, &targets, self.cfg.minibatch_size)?;
            let now = taken(net.q(&steps.obs));
            let moved: f64 = now.iter().zip(&last).map(|(a, b)| f64::from((a - b).abs())).sum();
            let size: f64 = now.iter().map(|a| f64::from(a.abs())).sum();
            if moved <= self.cfg.tolerance * size {
                break;
            }
            last = now;
        }
        Ok(())
    }

    fn q_values(&self, obs: &[f32]) -> Result<Vec<f64>, String> {
        let net = self.net.as_ref().ok_or("the neural fitted Q has not been fitted")?;
        Ok(net.q(obs).into_iter().map(f64::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use rlx::off_policy_estimation::{estimate, Estimator};

    /// One-step episodes: `s` uniform in [−1, 1], action 1 pays `s²` and
    /// action 0 nothing; the behaviour picks either with probability ½,
    /// the target takes 1 where `|s| > ½`. The target's value is
    /// `∫_{½}^{1} s² ds = 7/24`; a `Q̂` linear in `s` sees no slope in a
    /// symmetric `s²` and values action 1 at its mean, `1/3`, everywhere.
    fn parabola(n: usize, seed: u64) -> Vec<LoggedEpisode> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let s: f32 = rng.gen_range(-1.0..1.0);
                let a = rng.gen_range(0..2usize);
                let target: Vec<f32> = if s.abs() > 0.5 { vec![0.0, 1.0] } else { vec![1.0, 0.0] };
                LoggedEpisode {
                    obs: vec![s],
                    new_obs: vec![s],
                    action_features: if a == 1 { vec![0.0, 1.0] } else { vec![1.0, 0.0] },
                    rewards: vec![if a == 1 { s * s } else { 0.0 }],
                    behaviour_logp: vec![0.5f32.ln()],
                    target_logp: vec![target[a].ln()],
                    next_target: target.clone(),
                    target,
                }
            })
            .collect()
    }

    fn neural(iterations: usize) -> Box<dyn FittedQ> {
        QModelConfig::Neural(NeuralFqeConfig { iterations, ..NeuralFqeConfig::default() }).build()
    }

    #[test]
    fn a_network_fits_a_value_that_bends_where_the_linear_fit_cannot() {
        let data = parabola(4000, 1);
        let truth = 7.0 / 24.0;
        let dm = |q: &mut dyn FittedQ| estimate(&[Estimator::Dm], &data, (2, 1), 0.9, q).unwrap()["dm"].v_target;
        let (linear, network) = (dm(QModelConfig::Linear.build().as_mut()), dm(neural(30).as_mut()));
        // The linear fit values the target's choice at 1/3 where it takes
        // action 1 (half the states) and 0 elsewhere: 1/6.
        assert!((linear - 1.0 / 6.0).abs() < 0.02, "linear dm {linear}");
        assert!((network - truth).abs() < 0.02, "neural dm {network}, true value {truth}");
    }

    /// One-step episodes with a continuous action: `s` uniform in [−1, 1],
    /// the behaviour draws `a ~ N(0, 1)`, the reward is `1 − a² + 2as²`.
    /// The target draws `a ~ N(s², ½²)`, worth `¾ + s⁴` at `s`, `0.95` on
    /// average. A `Q̂` linear in `s` fits the coefficient of `a`, `2s²`, by
    /// its mean `⅔` and values the target at `0.55 + 2/9 ≈ 0.772`.
    #[test]
    fn a_network_fits_a_continuous_action_s_value_where_the_linear_fit_cannot() {
        use rlx::gaussian_actions::{action_features, GaussianActions, Squash};
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let data: Vec<LoggedEpisode> = (0..4000)
            .map(|_| {
                let s: f32 = rng.gen_range(-1.0..1.0);
                let a: f32 = rng.sample(rand_distr::StandardNormal);
                let target = GaussianActions { dim: 1, mean: vec![s * s], std: vec![0.5], squash: Squash::None };
                LoggedEpisode {
                    obs: vec![s],
                    new_obs: vec![s],
                    action_features: action_features(&[a], 1),
                    rewards: vec![1.0 - a * a + 2.0 * a * s * s],
                    behaviour_logp: vec![],
                    target_logp: target.log_density(&[a]).unwrap(),
                    target: target.expected_features(),
                    next_target: target.expected_features(),
                }
            })
            .collect();
        let dm = |q: &mut dyn FittedQ| estimate(&[Estimator::Dm], &data, (3, 1), 0.9, q).unwrap()["dm"].v_target;
        let (linear, network) = (dm(QModelConfig::Linear.build().as_mut()), dm(neural(30).as_mut()));
        assert!((linear - (0.55 + 2.0 / 9.0)).abs() < 0.03, "linear dm {linear}");
        assert!((network - 0.95).abs() < 0.04, "neural dm {network}, true value 0.95");
    }

    /// Ten steps of `s_t = t/10`; the last pays 1 whatever the action. The
    /// start's value is `γ⁹`: the fit must carry the reward back nine
    /// steps through its own targets.
    #[test]
    fn fitted_q_iteration_carries_a_late_reward_back_to_the_start() {
        let episodes: Vec<LoggedEpisode> = (0..50)
            .map(|_| LoggedEpisode {
                obs: (0..10).map(|t| t as f32 / 10.0).collect(),
                new_obs: (1..11).map(|t| t as f32 / 10.0).collect(),
                action_features: (0..10).flat_map(|t| if t % 2 == 1 { [0.0, 1.0] } else { [1.0, 0.0] }).collect(),
                rewards: (0..10).map(|t| if t == 9 { 1.0 } else { 0.0 }).collect(),
                behaviour_logp: vec![0.5f32.ln(); 10],
                target_logp: vec![0.5f32.ln(); 10],
                target: vec![0.5; 20],
                next_target: vec![0.5; 20],
            })
            .collect();
        let mut q = neural(300);
        let e = estimate(&[Estimator::Dm, Estimator::Dr], &episodes, (2, 1), 0.9, q.as_mut()).unwrap();
        let truth = 0.9f64.powi(9);
        assert!((e["dm"].v_target - truth).abs() < 0.03, "dm {:?}, true value {truth}", e["dm"]);
        // Every ratio is 1: dr is the logged return plus `V̂(s_t) −
        // Q̂(s_t, a_t)` terms, each zero for a `Q̂` that has learned that
        // the action does not matter.
        assert!((e["dr"].v_target - truth).abs() < 0.03, "dr {:?}", e["dr"]);
        // Fitted again on the same episodes, it starts from its answer.
        let again = estimate(&[Estimator::Dm], &episodes, (2, 1), 0.9, q.as_mut()).unwrap();
        assert!((again["dm"].v_target - e["dm"].v_target).abs() < 0.01);
    }

    #[test]
    fn settings_out_of_range_are_refused_by_name() {
        let bad = |v: serde_json::Value| {
            let c: QModelConfig = serde_json::from_value(v).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(serde_json::json!({"type": "neural", "hiddens": [0]})).contains("hiddens"));
        assert!(bad(serde_json::json!({"type": "neural", "lr": -1.0})).contains("lr"));
        assert!(bad(serde_json::json!({"type": "neural", "iterations": 0})).contains("iterations"));
        let unknown = serde_json::from_value::<QModelConfig>(serde_json::json!({"type": "neural", "hidens": [8]}));
        assert!(unknown.unwrap_err().to_string().contains("hidens"));
        let kind = serde_json::from_value::<QModelConfig>(serde_json::json!({"type": "tabular"}));
        assert!(kind.unwrap_err().to_string().contains("tabular"));
    }
}
