//! Action distributions: what a policy head's outputs mean for each action
//! space.
//!
//! | action space | distribution | head outputs |
//! |---|---|---|
//! | `Discrete(n)` | categorical over `softmax(logits)` | `n` logits |
//! | `MultiDiscrete(nvec)` | one independent categorical per element | `Σ nvec` logits |
//! | `Box` of `d` values | diagonal Gaussian `N(μ, σ²)`, `log σ` a learned parameter of its own (state-independent, as in PPO's MuJoCo setup) | `d` means |
//!
//! **Masks.** Where the env reports legal actions ([`rlx::Env::action_mask`]),
//! illegal logits are removed before anything is computed: sampling and
//! the greedy choice only see legal actions, and the learner's
//! log-probabilities and entropy are those of the masked distribution (an
//! illegal logit gets `−1e9`, whose probability is exactly 0 in `f32`).
//!
//! **Bounds.** A Gaussian sample is not clipped here: the batch keeps the
//! sample the log-probability belongs to, and the evaluator clips it to the
//! action space's bounds when stepping the env (as RLlib and Stable
//! Baselines3 do).

use crate::error::BuildError;
use crate::model::{Matrix, Taped};
use dfdx::prelude::*;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rlx::{Column, PolicyError, Space};

/// A taped vector (one value per row) on device `D`.
pub type TapedRows<D> = Tensor<(usize,), f32, D, Taped<D>>;

/// The logit an illegal action gets in the learner.
const MASKED_LOGIT: f32 = -1e9;

/// The distribution of a policy's actions.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionDist {
    /// `Discrete(n)`.
    Categorical {
        /// Actions.
        n: usize,
    },
    /// `MultiDiscrete(nvec)`: independent categoricals.
    MultiCategorical {
        /// Choices of each element.
        nvec: Vec<usize>,
    },
    /// `Box` of `dim` values: a diagonal Gaussian.
    DiagGaussian {
        /// Action dimensions.
        dim: usize,
    },
}

impl ActionDist {
    /// The distribution for `space`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] for an empty space.
    pub fn for_space(space: &Space, algorithm: &str) -> Result<Self, BuildError> {
        let dist = match space {
            Space::Discrete { n } => ActionDist::Categorical { n: *n as usize },
            Space::MultiDiscrete { nvec } => {
                ActionDist::MultiCategorical { nvec: nvec.iter().map(|&n| n as usize).collect() }
            }
            Space::Box { .. } => ActionDist::DiagGaussian { dim: space.flat_dim() },
            Space::Dict { .. } => {
                return Err(BuildError::Unsupported(format!(
                    "{algorithm} cannot act in the Dict action space {space}: Dict spaces are for observations"
                )))
            }
        };
        if dist.head_width() == 0 || matches!(&dist, ActionDist::MultiCategorical { nvec } if nvec.contains(&0)) {
            return Err(BuildError::Unsupported(format!("{algorithm} cannot act in the empty action space {space}")));
        }
        Ok(dist)
    }

    /// Outputs of the policy head per row.
    pub fn head_width(&self) -> usize {
        match self {
            ActionDist::Categorical { n } => *n,
            ActionDist::MultiCategorical { nvec } => nvec.iter().sum(),
            ActionDist::DiagGaussian { dim } => *dim,
        }
    }

    /// The element sizes a head row is split into (one for a categorical).
    fn segments(&self) -> Vec<usize> {
        match self {
            ActionDist::Categorical { n } => vec![*n],
            ActionDist::MultiCategorical { nvec } => nvec.clone(),
            ActionDist::DiagGaussian { .. } => Vec::new(),
        }
    }

    /// Acts on every row of head outputs: the actions (`i64` for discrete
    /// spaces, `f32` for boxes) and their log-probabilities. `explore`
    /// samples; otherwise the most likely action (the mean of a Gaussian).
    ///
    /// # Errors
    /// A mask of the wrong width or one that leaves a row without legal
    /// actions, or a mask on a Gaussian.
    pub fn sample(
        &self,
        head: &[f32],
        log_std: Option<&[f32]>,
        mask: Option<&[f32]>,
        explore: bool,
        rng: &mut ChaCha8Rng,
    ) -> Result<(Column, Vec<f32>), PolicyError> {
        let width = self.head_width();
        let rows = head.len() / width;
        if let Some(m) = mask {
            if matches!(self, ActionDist::DiagGaussian { .. }) {
                return Err(PolicyError::Other("continuous actions cannot be masked".into()));
            }
            if m.len() != head.len() {
                return Err(PolicyError::WrongLength {
                    what: "action mask values",
                    expected: head.len(),
                    got: m.len(),
                });
            }
        }
        let mut logp = Vec::with_capacity(rows);
        if let ActionDist::DiagGaussian { dim } = self {
            let log_std =
                log_std.ok_or_else(|| PolicyError::Other("a Gaussian needs its log standard deviations".into()))?;
            let half_log_2pi = 0.5 * (2.0 * std::f32::consts::PI).ln();
            let mut actions = Vec::with_capacity(head.len());
            for row in head.chunks_exact(*dim) {
                let mut lp = 0.0;
                for (&mu, &ls) in row.iter().zip(log_std) {
                    let eps: f32 = if explore { rng.sample(StandardNormal) } else { 0.0 };
                    actions.push(mu + ls.exp() * eps);
                    lp += -0.5 * eps * eps - ls - half_log_2pi;
                }
                logp.push(lp);
            }
            return Ok((Column::F32 { data: actions, width: *dim }, logp));
        }
        let segments = self.segments();
        let mut actions = Vec::with_capacity(rows * segments.len());
        for (r, row) in head.chunks_exact(width).enumerate() {
            let mut lp = 0.0;
            let mut start = 0;
            for &n in &segments {
                let logits = &row[start..start + n];
                let chosen = match mask {
                    None => categorical(logits, |_| true, explore, rng),
                    Some(m) => categorical(logits, |i| m[r * width + start + i] != 0.0, explore, rng),
                };
                let (a, l) = chosen
                    .ok_or_else(|| PolicyError::Other(format!("row {r}: the action mask leaves no legal action")))?;
                actions.push(a as i64);
                lp += l;
                start += n;
            }
            logp.push(lp);
        }
        Ok((Column::I64 { data: actions, width: segments.len() }, logp))
    }

    /// `π(·|s)` of every row of head outputs, for one discrete choice: the
    /// softmax of each row's logits.
    ///
    /// # Errors
    /// Any other distribution.
    pub fn probabilities(&self, head: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let ActionDist::Categorical { n } = self else {
            return Err(PolicyError::Other(format!("action probabilities are for one discrete choice, not {self:?}")));
        };
        Ok(softmax_rows(head, *n))
    }

    /// `log π(a|s)` of the taken `actions` and the entropy of `π(·|s)`, one
    /// value per row, on the tape. `log_std` is the Gaussian's parameter.
    ///
    /// # Errors
    /// Actions of the wrong kind, width or range, or a mask of the wrong
    /// width.
    pub fn logp_entropy<D: crate::model::device::NetDevice>(
        &self,
        head: Matrix<D, Taped<D>>,
        log_std: Option<Tensor<(usize,), f32, D, Taped<D>>>,
        actions: &Column,
        mask: Option<&[f32]>,
    ) -> Result<(TapedRows<D>, TapedRows<D>), PolicyError> {
        let dev = head.device().clone();
        let (rows, width) = *head.shape();
        if let ActionDist::DiagGaussian { dim } = self {
            let Column::F32 { data, width: w } = actions else {
                return Err(PolicyError::Other(format!("Gaussian actions must be f32, got {}", actions.kind_name())));
            };
            if *w != *dim || data.len() != rows * dim {
                return Err(PolicyError::Other(format!("{} action values are not {rows} rows of {dim}", data.len())));
            }
            let log_std =
                log_std.ok_or_else(|| PolicyError::Other("a Gaussian needs its log standard deviations".into()))?;
            let shape = (rows, *dim);
            let log_std_rows = log_std.with_empty_tape().broadcast_like::<(usize, usize), Axis<0>>(&shape);
            let a = dev.tensor_from_vec(data.clone(), shape);
            // z = (a − μ) / σ; log N(a; μ, σ) = −z²/2 − log σ − log(2π)/2.
            let z = (head.negate() + a) * log_std_rows.with_empty_tape().negate().exp();
            let half_log_2pi = 0.5 * (2.0 * std::f32::consts::PI).ln();
            let logp = ((z.square() * -0.5 - log_std_rows) - half_log_2pi).sum::<(usize,), Axis<1>>();
            // H = Σ_i log σ_i + d (1 + log 2π) / 2, the same for every row.
            let entropy = (log_std.sum::<(), Axis<0>>() + *dim as f32 * (0.5 + half_log_2pi)).broadcast_like(&(rows,));
            return Ok((logp, entropy));
        }
        let segments = self.segments();
        let (data, w) = match actions {
            Column::I64 { data, width: w } => (data, *w),
            other => {
                return Err(PolicyError::Other(format!("discrete actions must be i64, got {}", other.kind_name())))
            }
        };
        if w != segments.len() || data.len() != rows * w {
            return Err(PolicyError::Other(format!(
                "{} action values are not {rows} rows of {}",
                data.len(),
                segments.len()
            )));
        }
        let logits = match mask {
            None => head,
            Some(m) if m.len() == rows * width => {
                let bias: Vec<f32> = m.iter().map(|&legal| if legal != 0.0 { 0.0 } else { MASKED_LOGIT }).collect();
                head + dev.tensor_from_vec(bias, (rows, width))
            }
            Some(m) => {
                return Err(PolicyError::WrongLength {
                    what: "action mask values",
                    expected: rows * width,
                    got: m.len(),
                })
            }
        };
        let mut logits = Some(logits);
        let mut total: Option<(TapedRows<D>, TapedRows<D>)> = None;
        let mut start = 0;
        for (j, &n) in segments.iter().enumerate() {
            let mut chosen = Vec::with_capacity(rows);
            for r in 0..rows {
                let a = data[r * w + j];
                if a < 0 || a as usize >= n {
                    return Err(PolicyError::Other(format!("action {a} of row {r} is outside 0..{n}")));
                }
                chosen.push(a as usize);
            }
            // One categorical's logits: a copy on an empty tape, but the last
            // takes the tape.
            let part = if j + 1 < segments.len() {
                logits.as_ref().expect("taken last").with_empty_tape()
            } else {
                logits.take().expect("the last segment")
            };
            let part = if segments.len() == 1 { part } else { part.slice((.., start..start + n)).realize() };
            let log_probs = part.log_softmax::<Axis<1>>();
            let entropy =
                (log_probs.with_empty_tape().exp() * log_probs.with_empty_tape()).sum::<(usize,), Axis<1>>().negate();
            let logp = log_probs.select(dev.tensor_from_vec(chosen, (rows,)));
            total = Some(match total {
                None => (logp, entropy),
                Some((l, e)) => (l + logp, e + entropy),
            });
            start += n;
        }
        Ok(total.expect("at least one element"))
    }
}

/// The softmax of each row of `atoms` logits, on the host (a categorical
/// policy's probabilities, C51's atoms, DreamerV3's latents).
pub fn softmax_rows(logits: &[f32], atoms: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(logits.len());
    for row in logits.chunks_exact(atoms) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let start = out.len();
        out.extend(row.iter().map(|x| (x - max).exp()));
        let sum: f32 = out[start..].iter().sum();
        out[start..].iter_mut().for_each(|p| *p /= sum);
    }
    out
}

/// Samples (inverse CDF, one uniform draw) or picks the most likely of the
/// legal `logits`: the action and its log-probability under the softmax
/// over legal actions; `None` if no action is legal.
fn categorical(
    logits: &[f32],
    legal: impl Fn(usize) -> bool,
    explore: bool,
    rng: &mut ChaCha8Rng,
) -> Option<(usize, f32)> {
    let last = (0..logits.len()).rev().find(|&i| legal(i))?;
    let max = (0..logits.len()).filter(|&i| legal(i)).map(|i| logits[i]).fold(f32::NEG_INFINITY, f32::max);
    let sum_exp: f32 = (0..logits.len()).filter(|&i| legal(i)).map(|i| (logits[i] - max).exp()).sum();
    let log_z = max + sum_exp.ln();
    let a = if explore {
        let u: f32 = rng.gen::<f32>() * sum_exp;
        let mut acc = 0.0;
        (0..logits.len())
            .position(|i| {
                if legal(i) {
                    acc += (logits[i] - max).exp();
                }
                legal(i) && u < acc
            })
            .unwrap_or(last)
    } else {
        best_legal(logits, &legal)?
    };
    Some((a, logits[a] - log_z))
}

/// The index of the largest legal value, the first of ties; `None` if no
/// index is legal. Greedy acting (here and in DQN) and DQN's target pick
/// actions with it.
pub(crate) fn best_legal(values: &[f32], legal: impl Fn(usize) -> bool) -> Option<usize> {
    let first = (0..values.len()).find(|&i| legal(i))?;
    Some((0..values.len()).filter(|&i| legal(i)).fold(first, |best, i| if values[i] > values[best] { i } else { best }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn masked_actions_are_never_chosen_and_logp_is_of_the_masked_softmax() {
        let dist = ActionDist::Categorical { n: 4 };
        let head = [2.0, 1.0, 0.5, 3.0];
        let mask = [1.0, 0.0, 1.0, 0.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut seen = [0usize; 4];
        for _ in 0..2000 {
            let (a, lp) = dist.sample(&head, None, Some(&mask), true, &mut rng).unwrap();
            let Column::I64 { data, .. } = a else { panic!() };
            seen[data[0] as usize] += 1;
            let z = (2.0f32.exp() + 0.5f32.exp()).ln();
            assert!((lp[0] - (head[data[0] as usize] - z)).abs() < 1e-5);
        }
        assert_eq!((seen[1], seen[3]), (0, 0), "{seen:?}");
        assert!(seen[0] > 1500 && seen[2] > 100, "{seen:?}");
        let (greedy, _) = dist.sample(&head, None, Some(&mask), false, &mut rng).unwrap();
        assert_eq!(greedy, Column::I64 { data: vec![0], width: 1 }, "the best legal action, not the best one");
        let err = dist.sample(&head, None, Some(&[0.0; 4]), true, &mut rng).unwrap_err();
        assert!(err.to_string().contains("no legal action"), "{err}");
    }

    #[test]
    fn taped_logp_and_entropy_match_the_host_computation() {
        let dev = Cpu::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let head: Vec<f32> = (0..3 * 5).map(|i| (i as f32 * 0.7).sin()).collect();
        // MultiDiscrete [2, 3] with a mask, and a Gaussian of 5 dimensions.
        let multi = ActionDist::MultiCategorical { nvec: vec![2, 3] };
        let mask: Vec<f32> = (0..15).map(|i| if i % 5 == 3 { 0.0 } else { 1.0 }).collect();
        let (actions, logp) = multi.sample(&head, None, Some(&mask), true, &mut rng).unwrap();
        let x = dev.tensor_from_vec(head.clone(), (3usize, 5usize)).leaky_traced();
        let (taped, entropy) = multi.logp_entropy(x, None, &actions, Some(&mask)).unwrap();
        let taped = taped.as_vec();
        assert!(logp.iter().zip(&taped).all(|(a, b)| (a - b).abs() < 1e-5), "{logp:?} vs {taped:?}");
        let h = entropy.as_vec();
        assert!(h.iter().all(|&h| h > 0.0 && h < 2.0f32.ln() + 2.0f32.ln() + 1e-5), "two legal of 3 and 2 of 2: {h:?}");

        let gauss = ActionDist::DiagGaussian { dim: 5 };
        let log_std = [-0.5f32, 0.0, 0.3, -1.0, 0.1];
        let (actions, logp) = gauss.sample(&head, Some(&log_std), None, true, &mut rng).unwrap();
        let x = dev.tensor_from_vec(head, (3usize, 5usize)).leaky_traced();
        let ls = dev.tensor_from_vec(log_std.to_vec(), (5usize,)).leaky_traced();
        let (taped, entropy) = gauss.logp_entropy(x, Some(ls), &actions, None).unwrap();
        let taped = taped.as_vec();
        assert!(logp.iter().zip(&taped).all(|(a, b)| (a - b).abs() < 1e-4), "{logp:?} vs {taped:?}");
        let expected: f32 = log_std.iter().sum::<f32>() + 2.5 * (1.0 + (2.0 * std::f32::consts::PI).ln());
        assert!(entropy.as_vec().iter().all(|h| (h - expected).abs() < 1e-4));
        let (greedy, _) = gauss.sample(&[0.25; 5], Some(&log_std), None, false, &mut rng).unwrap();
        assert_eq!(greedy, Column::F32 { data: vec![0.25; 5], width: 5 }, "greedy is the mean");
    }
}
