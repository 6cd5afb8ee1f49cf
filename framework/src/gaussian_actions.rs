//! A policy's distribution over a continuous (`Box`) action, as off-policy
//! estimates need it: the density of a logged action, and the mean of a
//! quadratic in the action.
//!
//! Every continuous policy in rlx draws each action value from a Gaussian
//! `u ~ N(mean, std²)`, independently of the others, and then either
//! takes `u` as it is (PPO, BC, MARWIL, IQL) or squashes it into the
//! bounds, `a = low + (tanh(u) + 1)/2 · (high − low)` (SAC, CQL). A
//! deterministic policy (DDPG, TD3) has `std = 0`: it has a mean but no
//! density.

use crate::sample_batch::{fields, SampleBatch};

/// The distribution of a `Box` action at each of some rows of
/// observations: `d` values a row in each vector.
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianActions {
    /// Action values per row.
    pub dim: usize,
    /// The Gaussian's mean of each value.
    pub mean: Vec<f32>,
    /// Its standard deviation; 0 for a deterministic policy.
    pub std: Vec<f32>,
    /// `Some((low, high))` (`d` values each): the draw is squashed into
    /// the bounds by `tanh`. `None`: the draw is the action.
    pub squash: Option<(Vec<f32>, Vec<f32>)>,
}

/// Standard-normal quadrature: `z` on an even grid over ±6, weighted by
/// the density and normalized. `E[f(μ + σz)]` of a smooth `f` to well
/// under 1e-6.
const GRID: usize = 121;

impl GaussianActions {
    /// Checks that the vectors hold `rows` rows of `d` values.
    ///
    /// # Errors
    /// Vectors of other lengths, named.
    pub fn check(&self, rows: usize, d: usize) -> Result<(), String> {
        let bounds = self.squash.as_ref().map_or(d, |(l, h)| l.len().min(h.len()));
        if self.dim != d || self.mean.len() != rows * d || self.std.len() != rows * d || bounds != d {
            return Err(format!(
                "the policy's action distribution has {} means and {} standard deviations of {} values a row, \
                 and {bounds} bounds, for {rows} rows of {d} action values",
                self.mean.len(),
                self.std.len(),
                self.dim
            ));
        }
        Ok(())
    }

    /// Whether every value has a density (no standard deviation is 0).
    pub fn has_density(&self) -> bool {
        self.std.iter().all(|&s| s > 0.0)
    }

    /// `log π(a|s)` of each row of `actions` (`d` values a row, env
    /// units, as many rows as the distribution's), summed over the values. A squashed action on or beyond a
    /// bound is taken a hair inside it. `None` where a standard deviation
    /// is 0.
    pub fn log_density(&self, actions: &[f32]) -> Option<Vec<f32>> {
        if !self.has_density() {
            return None;
        }
        let d = self.dim.max(1);
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let logp = actions
            .chunks_exact(d)
            .enumerate()
            .map(|(r, row)| {
                row.iter()
                    .enumerate()
                    .map(|(i, &a)| {
                        let (mu, sd) = (f64::from(self.mean[r * d + i]), f64::from(self.std[r * d + i]));
                        let (u, log_jacobian) = match &self.squash {
                            None => (f64::from(a), 0.0),
                            Some((low, high)) => {
                                let half = 0.5 * f64::from(high[i] - low[i]);
                                let t =
                                    ((f64::from(a) - f64::from(low[i])) / half - 1.0).clamp(-1.0 + 1e-6, 1.0 - 1e-6);
                                // da/du = half · (1 − tanh²u).
                                (t.atanh(), (half * (1.0 - t * t)).ln())
                            }
                        };
                        let z = (u - mu) / sd;
                        -0.5 * z * z - sd.ln() - half_log_2pi - log_jacobian
                    })
                    .sum::<f64>() as f32
            })
            .collect();
        Some(logp)
    }

    /// `E[(1, a, a²)]` of each row: `1 + 2d` values a row (the constant,
    /// then each value's mean, then each value's mean square), the
    /// features a continuous fitted Q is linear in.
    pub fn expected_features(&self) -> Vec<f32> {
        let d = self.dim.max(1);
        let mut out = Vec::with_capacity(self.mean.len() / d * (1 + 2 * d));
        for (mean, std) in self.mean.chunks_exact(d).zip(self.std.chunks_exact(d)) {
            let moments: Vec<(f64, f64)> = mean
                .iter()
                .zip(std)
                .enumerate()
                .map(|(i, (&mu, &sd))| {
                    let (mu, sd) = (f64::from(mu), f64::from(sd));
                    match &self.squash {
                        None => (mu, mu * mu + sd * sd),
                        Some((low, high)) => {
                            let (c, h) = (0.5 * f64::from(high[i] + low[i]), 0.5 * f64::from(high[i] - low[i]));
                            let (t, t2) = normal_expectation(mu, sd, |u| {
                                let t = u.tanh();
                                (t, t * t)
                            });
                            (c + h * t, c * c + 2.0 * c * h * t + h * h * t2)
                        }
                    }
                })
                .collect();
            out.push(1.0);
            out.extend(moments.iter().map(|&(m, _)| m as f32));
            out.extend(moments.iter().map(|&(_, m2)| m2 as f32));
        }
        out
    }
}

/// `(1, a, a²)` of each row of `actions` (`d` values a row): the features
/// of a logged continuous action, in the layout of
/// [`GaussianActions::expected_features`].
pub fn action_features(actions: &[f32], d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(actions.len() / d.max(1) * (1 + 2 * d));
    for row in actions.chunks_exact(d.max(1)) {
        out.push(1.0);
        out.extend_from_slice(row);
        out.extend(row.iter().map(|a| a * a));
    }
    out
}

/// `(E[f₁(u)], E[f₂(u)])` for `u ~ N(mu, sd²)`, by the grid quadrature.
fn normal_expectation(mu: f64, sd: f64, f: impl Fn(f64) -> (f64, f64)) -> (f64, f64) {
    if sd == 0.0 {
        return f(mu);
    }
    let (mut total, mut e1, mut e2) = (0.0, 0.0, 0.0);
    for j in 0..GRID {
        let z = -6.0 + 12.0 * j as f64 / (GRID - 1) as f64;
        let w = (-0.5 * z * z).exp();
        let (a, b) = f(mu + sd * z);
        total += w;
        e1 += w * a;
        e2 += w * b;
    }
    (e1 / total, e2 / total)
}

/// The logged actions of `batch` as `f32` rows of `d` values.
///
/// # Errors
/// No `actions` column, or one of another width.
pub fn logged_box_actions(batch: &SampleBatch, d: usize) -> Result<Vec<f32>, String> {
    let actions = batch.f32(fields::ACTIONS).map_err(|e| e.to_string())?;
    if actions.len() != batch.len() * d {
        return Err(format!("{} logged action values for {} rows of {d}", actions.len(), batch.len()));
    }
    Ok(actions.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Densities integrate to 1 and their means match the quadrature's,
    /// plain and squashed (Pendulum's bounds of ±2).
    #[test]
    fn densities_integrate_to_one_and_agree_with_the_expected_features() {
        for squash in [None, Some((vec![-2.0f32], vec![2.0f32]))] {
            let n = 200_000;
            let dist = GaussianActions { dim: 1, mean: vec![0.7; n], std: vec![0.8; n], squash: squash.clone() };
            let (lo, hi) = squash.as_ref().map_or((-8.0, 8.0), |(l, h)| (f64::from(l[0]), f64::from(h[0])));
            let step = (hi - lo) / n as f64;
            let grid: Vec<f32> = (0..n).map(|j| (lo + (j as f64 + 0.5) * step) as f32).collect();
            let density: Vec<f64> = dist.log_density(&grid).unwrap().iter().map(|&l| f64::from(l).exp()).collect();
            let mass: f64 = density.iter().sum::<f64>() * step;
            let mean: f64 = density.iter().zip(&grid).map(|(p, &a)| p * f64::from(a)).sum::<f64>() * step;
            let square: f64 = density.iter().zip(&grid).map(|(p, &a)| p * f64::from(a).powi(2)).sum::<f64>() * step;
            let features = dist.expected_features();
            assert!((mass - 1.0).abs() < 1e-3, "{squash:?}: mass {mass}");
            assert!((f64::from(features[1]) - mean).abs() < 1e-3, "{squash:?}: {features:?} against {mean}");
            assert!((f64::from(features[2]) - square).abs() < 1e-3, "{squash:?}: {features:?} against {square}");
        }
        let deterministic = GaussianActions { dim: 1, mean: vec![0.5, -1.0], std: vec![0.0, 0.0], squash: None };
        assert_eq!(deterministic.log_density(&[0.5, -1.0]), None);
        assert_eq!(deterministic.expected_features(), vec![1.0, 0.5, 0.25, 1.0, -1.0, 1.0]);
        assert_eq!(action_features(&[2.0, -1.0], 2), vec![1.0, 2.0, -1.0, 4.0, 1.0]);
    }
}
