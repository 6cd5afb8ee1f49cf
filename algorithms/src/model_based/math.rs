//! The formulas of DreamerV3's losses (Hafner et al. 2023, arXiv:2301.04104),
//! each small enough to check by hand:
//!
//! - [`symlog`] and [`symexp`], which squash targets of any scale;
//! - [`TwoHot`]: regression as classification over 255 bins equally
//!   spaced in symlog space, and the expectation of a softmax over them;
//! - [`unimix`]: a categorical mixed with 1 % uniform, so that no class
//!   has probability 0 and no KL divergence is infinite;
//! - [`straight_through`]: a one-hot sample whose gradient is the
//!   probabilities';
//! - [`free_bits`]: the mask that stops a KL term's gradient below 1 nat;
//! - [`lambda_returns`] of imagined trajectories;
//! - [`ReturnScale`]: the 5th-to-95th percentile range of returns, as an
//!   exponential moving average, that divides the actor's advantages.

use crate::model::device::NetDevice;
use crate::model::Matrix;
use dfdx::prelude::*;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// `sign(x) · ln(|x| + 1)`: the identity near 0, logarithmic far from it.
pub fn symlog(x: f32) -> f32 {
    x.signum() * x.abs().ln_1p()
}

/// `sign(x) · (exp(|x|) − 1)`, the inverse of [`symlog`].
pub fn symexp(x: f32) -> f32 {
    x.signum() * x.abs().exp_m1()
}

/// Two-hot encoding over bins `b_0 < … < b_254` equally spaced from −20
/// to 20 in symlog space (the paper's choice, covering ±4.9e8). A value
/// `x` with `y = symlog(x)` between `b_k` and `b_{k+1}` puts weight
/// `(b_{k+1} − y)/(b_{k+1} − b_k)` on `k` and the rest on `k + 1`, so the
/// encoding's expectation over the bins is `y` exactly; values beyond the
/// outer bins put all weight on them.
#[derive(Clone, Debug, PartialEq)]
pub struct TwoHot {
    bins: Vec<f32>,
}

impl Default for TwoHot {
    fn default() -> Self {
        Self::new()
    }
}

impl TwoHot {
    /// Bins of the reward and value heads.
    pub const BINS: usize = 255;
    /// The outer bins, in symlog space.
    pub const LIMIT: f32 = 20.0;

    /// The paper's bins.
    pub fn new() -> Self {
        let n = Self::BINS;
        let step = 2.0 * Self::LIMIT / (n - 1) as f32;
        Self { bins: (0..n).map(|i| -Self::LIMIT + step * i as f32).collect() }
    }

    /// The bins, in symlog space.
    pub fn bins(&self) -> &[f32] {
        &self.bins
    }

    /// Writes the encoding of `x` (raw units) into `out` (`BINS` wide).
    pub fn encode(&self, x: f32, out: &mut [f32]) {
        out.fill(0.0);
        let y = symlog(x);
        let last = self.bins.len() - 1;
        if !(y > self.bins[0]) {
            out[0] = 1.0;
            return;
        }
        if y >= self.bins[last] {
            out[last] = 1.0;
            return;
        }
        let step = self.bins[1] - self.bins[0];
        let k = (((y - self.bins[0]) / step) as usize).min(last - 1);
        let above = (y - self.bins[k]) / step;
        out[k] = 1.0 - above;
        out[k + 1] = above;
    }

    /// The encodings of `xs`, row after row.
    pub fn encode_all(&self, xs: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; xs.len() * self.bins.len()];
        for (x, row) in xs.iter().zip(out.chunks_exact_mut(self.bins.len())) {
            self.encode(*x, row);
        }
        out
    }

    /// `symexp(Σ_i p_i b_i)`: the value a softmax `probs` over the bins
    /// predicts, in raw units. The learner takes it from the logits
    /// ([`predict`](Self::predict)); the tests check that against this.
    #[cfg(test)]
    pub fn expectation(&self, probs: &[f32]) -> f32 {
        symexp(probs.iter().zip(&self.bins).map(|(p, b)| p * b).sum())
    }

    /// `symexp(Σ_i p_i b_i)` of the softmax `p` of every row of `BINS`
    /// logits: a head's predictions, in raw units, recorded on the tape
    /// `T` if it is one (the actor of continuous actions learns through
    /// the reward and value heads).
    pub fn predict<D: NetDevice, T: Tape<f32, D>>(&self, logits: Matrix<D, T>) -> PerTrajectory<D, T> {
        symexp_of(D::softmax_mean_rows(logits, &self.bins))
    }
}

/// One value for each of a batch of rows (imagined trajectories).
pub type PerTrajectory<D, T = NoneTape> = Tensor<(usize,), f32, D, T>;

/// [`symexp`] of every entry, recorded on the tape `T` if it is one. `|y|`
/// is `y` times its sign (a constant), so that the derivative is
/// `exp(|y|)` at 0 too, where dfdx's `abs` has none.
pub fn symexp_of<D: NetDevice, T: Tape<f32, D>>(y: PerTrajectory<D, T>) -> PerTrajectory<D, T> {
    let dev = y.device().clone();
    let sign = dev.tensor_from_vec(y.as_vec().iter().map(|v| v.signum()).collect(), *y.shape());
    ((y * sign.clone()).exp() - 1.0) * sign
}

/// Softmax probabilities of each row of `rows × classes` logits, mixed
/// with `mix` of the uniform distribution: `(1 − mix) · softmax + mix /
/// classes` (DreamerV3's "unimix", 1 %).
pub fn unimix<D: NetDevice, T: Tape<f32, D>>(logits: Matrix<D, T>, mix: f32) -> Matrix<D, T> {
    let classes = logits.shape().1 as f32;
    D::softmax_rows(logits) * (1.0 - mix) + mix / classes
}

/// One draw per row of the categoricals `probs` (rows of `classes`,
/// summing to 1), as one-hot rows.
pub fn sample_one_hot(probs: &[f32], classes: usize, rng: &mut impl Rng) -> Vec<f32> {
    let mut out = vec![0.0; probs.len()];
    for (p, o) in probs.chunks_exact(classes).zip(out.chunks_exact_mut(classes)) {
        let mut u = rng.gen::<f32>() * p.iter().sum::<f32>();
        let mut pick = classes - 1;
        for (k, &pk) in p.iter().enumerate() {
            if u < pk {
                pick = k;
                break;
            }
            u -= pk;
        }
        o[pick] = 1.0;
    }
    out
}

/// The arg max of each row of `classes` scores (probabilities or logits),
/// one-hot; the first of equals, as ONNX's `ArgMax`.
pub fn mode_one_hot(probs: &[f32], classes: usize) -> Vec<f32> {
    let mut out = vec![0.0; probs.len()];
    for (p, o) in probs.chunks_exact(classes).zip(out.chunks_exact_mut(classes)) {
        let best = (1..classes).fold(0, |best, k| if p[k] > p[best] { k } else { best });
        o[best] = 1.0;
    }
    out
}

/// The straight-through sample `one_hot + probs − sg(probs)`: its value
/// is the one-hot draw, its gradient the probabilities' (Bengio et al.
/// 2013), so the loss of whatever reads the sample trains the logits.
pub fn straight_through<D: NetDevice, T: Tape<f32, D>>(probs: Matrix<D, T>, one_hot: &[f32]) -> Matrix<D, T> {
    let shape = *probs.shape();
    let offset: Vec<f32> = one_hot.iter().zip(probs.as_vec()).map(|(o, p)| o - p).collect();
    let dev = probs.device().clone();
    probs + dev.tensor_from_vec(offset, shape)
}

/// `1.0` where a KL divergence exceeds `free` nats, `0.0` elsewhere: the
/// loss `max(free, KL)` has the KL's gradient where it is above `free`
/// and none below ("free bits", Kingma et al. 2016), so the model is not
/// pushed to encode less than `free` nats per step.
pub fn free_bits(kl: &[f32], free: f32) -> Vec<f32> {
    kl.iter().map(|&k| if k > free { 1.0 } else { 0.0 }).collect()
}

/// λ-returns `R_0 … R_{H−1}` of imagined trajectories, from each step's
/// `(r_{k+1}, c_{k+1}, v_{k+1})`, `k = 0 … H − 1`: the reward and continue
/// flag predicted on arriving in a state, and the state's value:
///
/// ```text
/// R_H = v_H
/// R_k = r_{k+1} + γ c_{k+1} ((1 − λ) v_{k+1} + λ R_{k+1})
/// ```
///
/// Without a tape these are the critic's targets; with one, the actor of
/// continuous actions learns through them. Every input's tape ends on
/// `R_0`'s; the others carry none.
pub fn lambda_returns<D: NetDevice, T: Tape<f32, D>>(
    steps: Vec<(PerTrajectory<D, T>, PerTrajectory<D, T>, PerTrajectory<D, T>)>,
    gamma: f32,
    lambda: f32,
) -> Vec<PerTrajectory<D, T>> {
    let mut out = Vec::with_capacity(steps.len());
    let mut later: Option<PerTrajectory<D, T>> = None;
    for (r, c, v) in steps.into_iter().rev() {
        let ahead = match later.take() {
            None => v,
            Some(next) => v * (1.0 - lambda) + next * lambda,
        };
        let ret = r + c * ahead * gamma;
        out.push(ret.with_empty_tape());
        later = Some(ret);
    }
    out.reverse();
    if let Some(first) = later {
        out[0] = first;
    }
    out
}

/// The `q`-quantile (0 ≤ q ≤ 1) of `xs`, interpolating linearly between
/// order statistics (NumPy's default).
pub fn percentile(xs: &[f32], q: f32) -> f32 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f32::total_cmp);
    let at = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f32;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f32)
}

/// DreamerV3's return scale `S`: an exponential moving average (decay
/// `return_normalization_decay`) of the range between the 5th and 95th
/// percentiles of the λ-returns; advantages are divided by `max(1, S)`,
/// so large returns are scaled down and small ones are not blown up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReturnScale {
    /// The average so far; `None` before the first batch.
    pub range: Option<f32>,
}

impl ReturnScale {
    /// Folds in a batch of returns; returns the divisor `max(1, S)`.
    pub fn update(&mut self, returns: &[f32], decay: f32) -> f32 {
        let range = percentile(returns, 0.95) - percentile(returns, 0.05);
        let s = match self.range {
            None => range,
            Some(s) => decay * s + (1.0 - decay) * range,
        };
        self.range = Some(s);
        s.max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn symlog_and_symexp_invert_each_other() {
        assert_eq!(symlog(0.0), 0.0);
        assert!((symlog(1.0) - 2f32.ln()).abs() < 1e-7);
        assert!((symlog(-99.0) + 100f32.ln()).abs() < 1e-6);
        for x in [-1e6f32, -3.5, -1e-3, 0.0, 2e-4, 0.7, 42.0, 3e5] {
            let back = symexp(symlog(x));
            assert!((back - x).abs() <= 1e-5 * (1.0 + x.abs()), "{x} -> {back}");
        }
    }

    #[test]
    fn two_hot_puts_weight_on_the_neighbouring_bins_and_its_expectation_is_the_value() {
        let th = TwoHot::new();
        assert_eq!(th.bins().len(), 255);
        assert_eq!((th.bins()[0], th.bins()[127], th.bins()[254]), (-20.0, 0.0, 20.0));
        let mut row = vec![0.0; 255];
        // symlog(e − 1) = 1: bins are 40/254 apart, so 1 lies between bins
        // 133 (0.9449) and 134 (1.1024), 0.35 of the way.
        th.encode(std::f32::consts::E - 1.0, &mut row);
        let step = 40.0 / 254.0;
        let above = (1.0 - th.bins()[133]) / step;
        assert!((row[134] - above).abs() < 1e-5 && (row[133] - (1.0 - above)).abs() < 1e-5, "{above}");
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(row.iter().filter(|&&w| w > 0.0).count(), 2);
        for x in [-250.0f32, -1.0, 0.0, 0.01, 3.0, 475.0, 1e4] {
            th.encode(x, &mut row);
            let back = th.expectation(&row);
            assert!((back - x).abs() <= 1e-3 * (1.0 + x.abs()), "{x} -> {back}");
        }
        // From logits: the softmax's expectation.
        let logits: Vec<f32> = (0..255).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        let total: f32 = logits.iter().map(|l| l.exp()).sum();
        let probs: Vec<f32> = logits.iter().map(|l| l.exp() / total).collect();
        let b = th.expectation(&probs);
        // A second row far out: nearly all weight on bin 191 (10.08 in symlog units).
        let mut far = vec![-50.0f32; 255];
        far[191] = 50.0;
        let rows = [logits.clone(), far].concat();
        let predicted = th.predict(Cpu::default().tensor_from_vec(rows, (2usize, 255usize))).as_vec();
        assert!((predicted[0] - b).abs() <= 1e-4 * (1.0 + b.abs()), "{predicted:?} vs {b}");
        let e10 = symexp(th.bins()[191]);
        assert!((predicted[1] - e10).abs() <= 1e-4 * e10, "{predicted:?} vs {e10}");
        // Beyond the outer bins: all weight on them.
        th.encode(1e12, &mut row);
        assert_eq!(row[254], 1.0);
        th.encode(f32::NEG_INFINITY, &mut row);
        assert_eq!(row[0], 1.0);
    }

    #[test]
    fn unimix_keeps_every_class_at_least_a_share_of_one_percent() {
        let dev = Cpu::default();
        let logits = dev.tensor_from_vec(vec![50.0f32, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0], (2usize, 4usize));
        let p = unimix(logits, 0.01).as_vec();
        assert!((p[0] - (0.99 + 0.0025)).abs() < 1e-5 && (p[1] - 0.0025).abs() < 1e-6, "{p:?}");
        assert!((p[4..].iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let draws = sample_one_hot(&[0.1, 0.0, 0.9], 3, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(draws.iter().sum::<f32>(), 1.0);
        assert_eq!(draws[1], 0.0);
    }

    #[test]
    fn the_straight_through_sample_is_the_draw_with_the_probabilities_gradient() {
        // Loss Σ w ⊙ z: through the sample, its gradient with respect to
        // the logits is that of Σ w ⊙ probs, while its value is Σ w ⊙ one-hot.
        let dev = Cpu::default();
        let logits = vec![0.3f32, -1.0, 2.0, 0.5, 0.1, -0.4];
        let w = dev.tensor_from_vec(vec![1.0f32, -2.0, 0.5, 3.0, 0.0, -1.0], (2usize, 3usize));
        let one_hot = [0.0, 1.0, 0.0, 1.0, 0.0, 0.0];
        let x = dev.tensor_from_vec(logits.clone(), (2usize, 3usize));
        let z = straight_through(unimix(x.clone().leaky_traced(), 0.01), &one_hot);
        assert!(z.as_vec().iter().zip(one_hot).all(|(a, b)| (a - b).abs() < 1e-6), "{:?}", z.as_vec());
        let grads = (z * w.clone()).sum::<Rank0, _>().backward();
        let through = grads.get(&x).as_vec();
        let y = dev.tensor_from_vec(logits, (2usize, 3usize));
        let grads = (unimix(y.clone().leaky_traced(), 0.01) * w).sum::<Rank0, _>().backward();
        let direct = grads.get(&y).as_vec();
        assert!(direct.iter().any(|g| g.abs() > 0.1), "{direct:?}");
        for (a, b) in through.iter().zip(&direct) {
            assert!((a - b).abs() < 1e-6, "{through:?} vs {direct:?}");
        }
    }

    #[test]
    fn the_mode_is_each_categoricals_most_likely_class_the_first_of_equals() {
        let probs = [0.1, 0.7, 0.2, 0.4, 0.2, 0.4, 0.0, 0.0, 1.0];
        assert_eq!(mode_one_hot(&probs, 3), vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn free_bits_stop_the_gradient_below_one_nat() {
        assert_eq!(free_bits(&[0.2, 1.0, 1.5, 7.0], 1.0), vec![0.0, 0.0, 1.0, 1.0]);
    }

    /// λ-returns of `n` trajectories given time-major host values of
    /// steps `0 … H`, as the host numbers.
    fn returns_of(rewards: &[f32], continues: &[f32], values: &[f32], n: usize, gamma: f32, lambda: f32) -> Vec<f32> {
        let dev = Cpu::default();
        let at = |xs: &[f32], k: usize| dev.tensor_from_vec(xs[k * n..(k + 1) * n].to_vec(), (n,));
        let steps = (1..values.len() / n).map(|k| (at(rewards, k), at(continues, k), at(values, k))).collect();
        lambda_returns(steps, gamma, lambda).iter().flat_map(|r| r.as_vec()).collect()
    }

    #[test]
    fn lambda_returns_by_hand() {
        // One trajectory of 2 steps, γ = 0.9, λ = 0.5.
        let (r, c, v) = ([0.0, 1.0, 2.0], [1.0, 1.0, 0.5], [10.0, 4.0, 6.0]);
        let out = returns_of(&r, &c, &v, 1, 0.9, 0.5);
        let r2 = 6.0;
        let r1 = 2.0 + 0.9 * 0.5 * (0.5 * 6.0 + 0.5 * r2);
        let r0 = 1.0 + 0.9 * 1.0 * (0.5 * 4.0 + 0.5 * r1);
        assert_eq!(out.len(), 2);
        assert!((out[1] - r1).abs() < 1e-6 && (out[0] - r0).abs() < 1e-6, "{out:?} vs {r0} {r1}");
        // λ = 1 is the discounted return to the end, bootstrapped once.
        let out = returns_of(&r, &c, &v, 1, 0.9, 1.0);
        assert!((out[0] - (1.0 + 0.9 * (2.0 + 0.9 * 0.5 * 6.0))).abs() < 1e-5);
        // Two trajectories side by side, time-major.
        let out = returns_of(&[0.0, 0.0, 1.0, 2.0], &[1.0; 4], &[0.0, 0.0, 5.0, 7.0], 2, 1.0, 0.0);
        assert_eq!(out, vec![6.0, 9.0]);
    }

    #[test]
    fn the_first_lambda_return_carries_the_gradient_of_every_step() {
        // R_0 = r_1 + γ c_1 ((1 − λ) v_1 + λ (r_2 + γ c_2 v_2)), one trajectory.
        let (gamma, lambda) = (0.9f32, 0.5f32);
        let dev = Cpu::default();
        let leaf = |x: f32| dev.tensor_from_vec(vec![x], (1usize,));
        let (r1, c1, v1, r2, c2, v2) = (leaf(1.0), leaf(0.8), leaf(4.0), leaf(2.0), leaf(0.5), leaf(6.0));
        let traced = |t: &PerTrajectory<Cpu>| t.clone().leaky_traced();
        let steps = vec![(traced(&r1), traced(&c1), traced(&v1)), (traced(&r2), traced(&c2), traced(&v2))];
        let mut out = lambda_returns(steps, gamma, lambda);
        assert_eq!(out.len(), 2);
        let r0 = out.swap_remove(0);
        let grads = r0.sum::<Rank0, _>().backward();
        let g = |t: &PerTrajectory<Cpu>| grads.get(t).as_vec()[0];
        let bootstrap = (1.0 - lambda) * 4.0 + lambda * (2.0 + gamma * 0.5 * 6.0);
        for (what, got, want) in [
            ("r_1", g(&r1), 1.0),
            ("c_1", g(&c1), gamma * bootstrap),
            ("v_1", g(&v1), gamma * 0.8 * (1.0 - lambda)),
            ("r_2", g(&r2), gamma * 0.8 * lambda),
            ("c_2", g(&c2), gamma * 0.8 * lambda * gamma * 6.0),
            ("v_2", g(&v2), gamma * 0.8 * lambda * gamma * 0.5),
        ] {
            assert!((got - want).abs() < 1e-5, "dR_0/d{what}: {got} vs {want}");
        }
    }

    #[test]
    fn the_return_scale_is_an_average_of_the_percentile_range_and_never_below_one() {
        let xs: Vec<f32> = (0..=100).map(|i| i as f32).collect();
        assert!((percentile(&xs, 0.05) - 5.0).abs() < 1e-5 && (percentile(&xs, 0.95) - 95.0).abs() < 1e-5);
        assert!((percentile(&[1.0, 2.0], 0.5) - 1.5).abs() < 1e-6);
        let mut s = ReturnScale::default();
        assert!((s.update(&xs, 0.99) - 90.0).abs() < 1e-4);
        let small: Vec<f32> = xs.iter().map(|x| x / 100.0).collect();
        let expected = 0.99 * 90.0 + 0.01 * 0.9;
        assert!((s.update(&small, 0.99) - expected).abs() < 1e-3);
        let mut fresh = ReturnScale::default();
        assert_eq!(fresh.update(&small, 0.99), 1.0, "small returns are not scaled up");
    }
}
