//! A policy's distribution over a continuous (`Box`) action, as off-policy
//! estimates need it: the density of a logged action, and the mean of a
//! quadratic in the action.
//!
//! Every continuous policy in rlx draws each action value from a Gaussian
//! `u ~ N(mean, std²)`, independently of the others, and then takes `u`
//! as it is (PPO, BC, MARWIL: the env clips it), squashes it into the
//! bounds, `a = low + (tanh(u) + 1)/2 · (high − low)` (SAC, CQL), or
//! clips it to them (IQL). A deterministic policy (DDPG, TD3) has `std =
//! 0`: it has a mean but no density.

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
    /// What is done to the draw to make the action.
    pub squash: Squash,
}

/// How a Gaussian draw `u` becomes the action (bounds of `d` values).
#[derive(Clone, Debug, PartialEq)]
pub enum Squash {
    /// The draw is the action.
    None,
    /// `a = low + (tanh(u) + 1)/2 · (high − low)`.
    Tanh {
        /// Lower bounds.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
    },
    /// `a = clamp(u, low, high)`. The moments are the clipped draw's; the
    /// density is the Gaussian's inside the box, and an action on a bound
    /// gets the Gaussian's density there (not the mass beyond it).
    Clip {
        /// Lower bounds.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
    },
}

impl Squash {
    /// The bounds, if any.
    fn bounds(&self) -> Option<(&[f32], &[f32])> {
        match self {
            Squash::None => None,
            Squash::Tanh { low, high } | Squash::Clip { low, high } => Some((low, high)),
        }
    }
}

/// Standard-normal quadrature: `z` on an even grid over ±6, weighted by
/// the density and normalized (the tests check the squashed moments
/// against a direct integral of the density, to 1e-3).
const GRID: usize = 121;

impl GaussianActions {
    /// Checks that the vectors hold `rows` rows of `d` values.
    ///
    /// # Errors
    /// Vectors of other lengths, named.
    pub fn check(&self, rows: usize, d: usize) -> Result<(), String> {
        let bounds = self.squash.bounds().map_or(d, |(l, h)| l.len().min(h.len()));
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
    /// units, as many rows as the distribution's), summed over the
    /// values. A squashed action on or beyond a bound is taken a hair
    /// inside it. `None` where a standard deviation is 0.
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
                            Squash::None | Squash::Clip { .. } => (f64::from(a), 0.0),
                            Squash::Tanh { low, high } => {
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
                        Squash::None => (mu, mu * mu + sd * sd),
                        Squash::Tanh { low, high } => {
                            let (c, h) = (0.5 * f64::from(high[i] + low[i]), 0.5 * f64::from(high[i] - low[i]));
                            let (t, t2) = normal_expectation(mu, sd, |u| {
                                let t = u.tanh();
                                (t, t * t)
                            });
                            (c + h * t, c * c + 2.0 * c * h * t + h * h * t2)
                        }
                        Squash::Clip { low, high } => clipped_moments(mu, sd, f64::from(low[i]), f64::from(high[i])),
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

/// `(E[a], E[a²])` of `a = clamp(u, low, high)`, `u ~ N(mu, sd²)`, in
/// closed form: the mass beyond each bound sits on it, and inside the box
/// `∫ u φ` and `∫ u² φ` are `μ ΔΦ + σ (φ(α) − φ(β))` and `(μ² + σ²) ΔΦ +
/// σ ((μ + low) φ(α) − (μ + high) φ(β))`, with `α, β` the bounds in
/// standard units.
fn clipped_moments(mu: f64, sd: f64, low: f64, high: f64) -> (f64, f64) {
    if sd == 0.0 {
        let a = mu.clamp(low, high);
        return (a, a * a);
    }
    let (alpha, beta) = ((low - mu) / sd, (high - mu) / sd);
    let density = |z: f64| (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let (below, above) = (normal_cdf(alpha), 1.0 - normal_cdf(beta));
    let inside = 1.0 - below - above;
    let first = mu * inside + sd * (density(alpha) - density(beta));
    let second = (mu * mu + sd * sd) * inside + sd * ((mu + low) * density(alpha) - (mu + high) * density(beta));
    (low * below + high * above + first, low * low * below + high * high * above + second)
}

/// `Φ(z)`, the standard normal's distribution function, through the error
/// function's rational approximation of Abramowitz and Stegun (7.1.26),
/// good to 1.5e-7.
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    0.5 * (1.0 + erf.copysign(z))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Densities integrate to 1 and their means match the quadrature's,
    /// plain and squashed (Pendulum's bounds of ±2); a clipped draw's
    /// moments match a direct integral over the Gaussian.
    #[test]
    fn densities_integrate_to_one_and_agree_with_the_expected_features() {
        let pendulum = (vec![-2.0f32], vec![2.0f32]);
        let (low, high) = pendulum.clone();
        for squash in [Squash::None, Squash::Tanh { low, high }] {
            let n = 200_000;
            let dist = GaussianActions { dim: 1, mean: vec![0.7; n], std: vec![0.8; n], squash: squash.clone() };
            let (lo, hi) = squash.bounds().map_or((-8.0, 8.0), |(l, h)| (f64::from(l[0]), f64::from(h[0])));
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
        // Clipped: E[clamp(u)] and E[clamp(u)²] for u ~ N(1.5, 1²) in ±2,
        // by a fine sum over u.
        let (low, high) = pendulum;
        let clipped = GaussianActions { dim: 1, mean: vec![1.5], std: vec![1.0], squash: Squash::Clip { low, high } };
        let (step, mut mean, mut square) = (1e-4, 0.0, 0.0);
        for j in 0..200_000 {
            let u = 1.5 - 10.0 + (f64::from(j) + 0.5) * step;
            let p = (-0.5 * (u - 1.5) * (u - 1.5)).exp() / (2.0 * std::f64::consts::PI).sqrt() * step;
            let a = u.clamp(-2.0, 2.0);
            (mean, square) = (mean + p * a, square + p * a * a);
        }
        let features = clipped.expected_features();
        assert!((f64::from(features[1]) - mean).abs() < 1e-4, "{features:?} against {mean}");
        assert!((f64::from(features[2]) - square).abs() < 1e-4, "{features:?} against {square}");
        assert!(f64::from(features[1]) < 1.5 - 0.1, "the clip pulls the mean in: {features:?}");
        let deterministic =
            GaussianActions { dim: 1, mean: vec![0.5, -1.0], std: vec![0.0, 0.0], squash: Squash::None };
        assert_eq!(deterministic.log_density(&[0.5, -1.0]), None);
        assert_eq!(deterministic.expected_features(), vec![1.0, 0.5, 0.25, 1.0, -1.0, 1.0]);
        assert_eq!(action_features(&[2.0, -1.0], 2), vec![1.0, 2.0, -1.0, 4.0, 1.0]);
    }
}
