//! What an algorithm adds to the shared optimizer: its [`UpdateRule`], and
//! the pieces ES's and ARS's rules share (fitness shaping, the weighted
//! sum of noise slices).

use super::noise::NoiseTable;
use super::workers::PairResult;
use rlx::LearnerStats;

/// An algorithm's way of turning evaluated pairs into new weights.
pub trait UpdateRule: Send {
    /// The new θ from the pairs evaluated around `theta`, with statistics.
    fn update(&mut self, theta: &[f32], results: &[PairResult], noise: &NoiseTable) -> (Vec<f32>, LearnerStats);

    /// What a checkpoint of the rule leaves out, in words.
    fn checkpoint_gaps(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Centered ranks (Salimans et al. 2017, §2.2): each value replaced by its
/// rank scaled to [−0.5, 0.5], so the update ignores the returns' scale and
/// outliers.
pub fn centered_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let denom = (x.len().max(2) - 1) as f64;
    // Equal values share their average rank, so ties (every CartPole
    // episode at 500) push θ nowhere.
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && x[order[end]] == x[order[start]] {
            end += 1;
        }
        let rank = (start + end - 1) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank / denom - 0.5;
        }
        start = end;
    }
    ranks
}

/// `Σ_i w_i ε_i` over the pairs' noise slices.
pub fn weighted_noise_sum(results: &[PairResult], weights: &[f64], noise: &NoiseTable, dim: usize) -> Vec<f64> {
    let mut sum = vec![0.0f64; dim];
    for (r, &w) in results.iter().zip(weights) {
        for (s, &e) in sum.iter_mut().zip(noise.get(r.noise_offset, dim)) {
            *s += w * e as f64;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centered_ranks_span_minus_half_to_half_and_keep_order() {
        assert_eq!(centered_ranks(&[10.0, -3.0, 500.0]), vec![0.0, -0.5, 0.5]);
        assert_eq!(centered_ranks(&[500.0, 500.0, 500.0]), vec![0.0, 0.0, 0.0]);
        assert_eq!(centered_ranks(&[1.0, 2.0, 2.0, 3.0]), vec![-0.5, 0.0, 0.0, 0.5]);
    }
}
