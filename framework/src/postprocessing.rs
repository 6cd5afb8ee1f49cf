//! Trajectory postprocessing: discounted returns and generalized advantage
//! estimation (GAE, Schulman et al. 2016).
//!
//! Both work on one trajectory fragment of a single env copy (no episode
//! boundary inside). How the fragment ended decides the bootstrap value:
//! `0` after a terminal state, the value estimate `V(s_T)` of the last
//! observation after a truncation (time limit) or when the fragment was cut
//! mid-episode. Treating a time limit as terminal biases every value
//! estimate near the limit; this module never does.

use crate::sample_batch::{fields, BatchError, SampleBatch};

/// `out[t] = x[t] + gamma * x[t+1] + gamma^2 * x[t+2] + ...`
pub fn discount_cumsum(x: &[f32], gamma: f32) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    let mut acc = 0.0f64;
    for t in (0..x.len()).rev() {
        acc = x[t] as f64 + gamma as f64 * acc;
        out[t] = acc as f32;
    }
    out
}

/// GAE(γ, λ) advantages and value targets for one trajectory fragment.
///
/// `values[t]` estimates `V(s_t)`; `bootstrap` is `V(s_T)` of the
/// observation after the last step (0 if that step terminated the episode).
///
/// ```text
/// δ_t = r_t + γ V(s_{t+1}) − V(s_t)
/// A_t = δ_t + γλ A_{t+1}
/// value_target_t = A_t + V(s_t)
/// ```
///
/// # Panics
/// If `rewards` and `values` differ in length.
pub fn gae(rewards: &[f32], values: &[f32], bootstrap: f32, gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(rewards.len(), values.len(), "one value estimate per reward");
    let n = rewards.len();
    let mut advantages = vec![0.0f32; n];
    let mut last_adv = 0.0f64;
    let (gamma, lambda) = (gamma as f64, lambda as f64);
    for t in (0..n).rev() {
        let next_value = if t + 1 < n { values[t + 1] } else { bootstrap } as f64;
        let delta = rewards[t] as f64 + gamma * next_value - values[t] as f64;
        last_adv = delta + gamma * lambda * last_adv;
        advantages[t] = last_adv as f32;
    }
    let targets = advantages.iter().zip(values).map(|(a, v)| a + v).collect();
    (advantages, targets)
}

/// How [`compute_advantages`] estimates advantages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AdvantageEstimator {
    /// GAE(γ, λ) with the critic's `vf_preds`.
    Gae {
        /// Discount.
        gamma: f32,
        /// GAE mixing parameter.
        lambda: f32,
    },
    /// Plain discounted returns (REINFORCE), no critic.
    DiscountedReturns {
        /// Discount.
        gamma: f32,
    },
}

/// Adds `advantages` and `value_targets` columns to a single-trajectory batch.
///
/// Needs `rewards` (and `vf_preds` for GAE). `bootstrap` is the value of the
/// observation after the last row: 0 if the last row terminated the episode.
///
/// # Errors
/// If a needed column is missing or not `f32`.
pub fn compute_advantages(
    traj: &mut SampleBatch,
    bootstrap: f32,
    estimator: AdvantageEstimator,
) -> Result<(), BatchError> {
    let rewards = traj.f32(fields::REWARDS)?;
    let (advantages, targets) = match estimator {
        AdvantageEstimator::Gae { gamma, lambda } => {
            gae(rewards, traj.f32(fields::VF_PREDS)?, bootstrap, gamma, lambda)
        }
        AdvantageEstimator::DiscountedReturns { gamma } => {
            let mut r = rewards.to_vec();
            if let Some(last) = r.last_mut() {
                *last += gamma * bootstrap;
            }
            let returns = discount_cumsum(&r, gamma);
            (returns.clone(), returns)
        }
    };
    traj.insert_f32(fields::ADVANTAGES, advantages, 1)?;
    traj.insert_f32(fields::VALUE_TARGETS, targets, 1)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn discounted_returns_by_hand() {
        // 1 + 0.9*2 + 0.81*3 = 5.23 ; 2 + 0.9*3 = 4.7 ; 3
        close(&discount_cumsum(&[1.0, 2.0, 3.0], 0.9), &[5.23, 4.7, 3.0]);
        close(&discount_cumsum(&[1.0, 1.0], 0.0), &[1.0, 1.0]);
        assert!(discount_cumsum(&[], 0.9).is_empty());
    }

    #[test]
    fn gae_terminated_trajectory_by_hand() {
        // gamma 0.5, lambda 0.5, rewards [1, 1], values [0.5, 1.0], terminal: bootstrap 0.
        // delta_1 = 1 + 0 - 1.0 = 0            A_1 = 0
        // delta_0 = 1 + 0.5*1.0 - 0.5 = 1.0    A_0 = 1.0 + 0.25*0 = 1.0
        let (adv, tgt) = gae(&[1.0, 1.0], &[0.5, 1.0], 0.0, 0.5, 0.5);
        close(&adv, &[1.0, 0.0]);
        close(&tgt, &[1.5, 1.0]);
    }

    #[test]
    fn gae_truncated_trajectory_bootstraps_from_last_value() {
        // Same as above, but truncated with V(s_T) = 2:
        // delta_1 = 1 + 0.5*2 - 1.0 = 1.0      A_1 = 1.0
        // delta_0 = 1.0                         A_0 = 1.0 + 0.25*1.0 = 1.25
        let (adv, tgt) = gae(&[1.0, 1.0], &[0.5, 1.0], 2.0, 0.5, 0.5);
        close(&adv, &[1.25, 1.0]);
        close(&tgt, &[1.75, 2.0]);
    }

    #[test]
    fn gae_with_lambda_one_is_discounted_return_minus_value() {
        let rewards = [0.3, -1.0, 2.0, 0.5];
        let values = [0.1, 0.2, -0.3, 0.4];
        let (adv, _) = gae(&rewards, &values, 0.7, 0.95, 1.0);
        let mut r = rewards.to_vec();
        r[3] += 0.95 * 0.7;
        let returns = discount_cumsum(&r, 0.95);
        let expected: Vec<f32> = returns.iter().zip(values).map(|(g, v)| g - v).collect();
        close(&adv, &expected);
    }

    #[test]
    fn compute_advantages_adds_columns() {
        let mut traj = SampleBatch::new();
        traj.insert_f32(fields::REWARDS, vec![1.0, 1.0], 1).unwrap();
        traj.insert_f32(fields::VF_PREDS, vec![0.5, 1.0], 1).unwrap();
        compute_advantages(&mut traj, 2.0, AdvantageEstimator::Gae { gamma: 0.5, lambda: 0.5 }).unwrap();
        close(traj.f32(fields::ADVANTAGES).unwrap(), &[1.25, 1.0]);
        close(traj.f32(fields::VALUE_TARGETS).unwrap(), &[1.75, 2.0]);
        compute_advantages(&mut traj, 0.0, AdvantageEstimator::DiscountedReturns { gamma: 0.5 }).unwrap();
        close(traj.f32(fields::ADVANTAGES).unwrap(), &[1.5, 1.0]);
    }
}
