//! Running-statistics filters on what the policy learns from: observations
//! normalized by a running mean/std whose statistics merge across
//! evaluators (RLlib's `MeanStdFilter`), and rewards scaled by the running
//! std of the discounted return ([`RewardScaler`], SB3's `VecNormalize`
//! with `norm_reward`).
//!
//! Each evaluator normalizes observations with the statistics it was last
//! given and, meanwhile, accumulates what it saw into a *delta*. After each
//! round the driver merges every evaluator's delta into the global
//! statistics and sends the result back, so all evaluators normalize alike
//! and no observation is counted twice. The statistics serialize, so they
//! are saved with the policy.

use serde::{Deserialize, Serialize};

/// Which observation filter an algorithm's evaluators use (RLlib's
/// `observation_filter` config key and values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObservationFilter {
    /// Observations reach the policy unchanged.
    #[default]
    NoFilter,
    /// A [`MeanStdFilter`] clipping at ±10, synchronized across evaluators.
    MeanStdFilter,
}

impl ObservationFilter {
    /// The filter for rows of width `dim`, if any.
    pub fn build(self, dim: usize) -> Option<MeanStdFilter> {
        match self {
            ObservationFilter::NoFilter => None,
            ObservationFilter::MeanStdFilter => Some(MeanStdFilter::new(dim, 10.0)),
        }
    }
}

/// Statistics that cannot be used: of another width than the filter's, or
/// inconsistent (they came from a damaged file or a faulty peer).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("filter statistics: {0}")]
pub struct FilterError(String);

/// Count, mean and sum of squared deviations per element (Welford), merged
/// with Chan et al.'s parallel formula. Deserializing checks that the
/// statistics are consistent (as many means as squared deviations, all
/// finite, deviations not negative), so statistics from a file or a peer
/// can be merged without a panic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawRunningStat")]
pub struct RunningStat {
    count: u64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

/// [`RunningStat`] as it travels, before its consistency is checked.
#[derive(Deserialize)]
struct RawRunningStat {
    count: u64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl TryFrom<RawRunningStat> for RunningStat {
    type Error = FilterError;

    fn try_from(raw: RawRunningStat) -> Result<Self, FilterError> {
        let RawRunningStat { count, mean, m2 } = raw;
        if mean.len() != m2.len() {
            return Err(FilterError(format!("{} means but {} squared deviations", mean.len(), m2.len())));
        }
        if let Some(i) = mean.iter().position(|m| !m.is_finite()) {
            return Err(FilterError(format!("mean {i} is {}", mean[i])));
        }
        if let Some(i) = m2.iter().position(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(FilterError(format!("squared deviation {i} is {}", m2[i])));
        }
        Ok(Self { count, mean, m2 })
    }
}

impl RunningStat {
    /// Empty statistics for rows of width `dim`.
    pub fn new(dim: usize) -> Self {
        Self { count: 0, mean: vec![0.0; dim], m2: vec![0.0; dim] }
    }

    /// Rows seen.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds one row.
    ///
    /// # Panics
    /// If the row's width differs.
    pub fn push(&mut self, row: &[f32]) {
        assert_eq!(row.len(), self.mean.len(), "row width");
        self.count += 1;
        let n = self.count as f64;
        for ((m, s), &x) in self.mean.iter_mut().zip(&mut self.m2).zip(row) {
            let x = x as f64;
            let delta = x - *m;
            *m += delta / n;
            *s += delta * (x - *m);
        }
    }

    /// The width of the rows these statistics are of.
    pub fn width(&self) -> usize {
        self.mean.len()
    }

    /// Checks that these statistics are of rows of width `dim`.
    ///
    /// # Errors
    /// A [`FilterError`] naming both widths.
    pub fn check_width(&self, dim: usize) -> Result<(), FilterError> {
        if self.mean.len() == dim {
            Ok(())
        } else {
            Err(FilterError(format!("of rows of width {}, but the filter's rows have width {dim}", self.mean.len())))
        }
    }

    /// Adds everything `other` has seen.
    ///
    /// # Errors
    /// If the widths differ (nothing is merged).
    pub fn merge(&mut self, other: &RunningStat) -> Result<(), FilterError> {
        other.check_width(self.mean.len())?;
        if other.count == 0 {
            return Ok(());
        }
        let (na, nb) = (self.count as f64, other.count as f64);
        let n = na + nb;
        for i in 0..self.mean.len() {
            let delta = other.mean[i] - self.mean[i];
            self.mean[i] += delta * nb / n;
            self.m2[i] += other.m2[i] + delta * delta * na * nb / n;
        }
        self.count += other.count;
        Ok(())
    }

    /// The mean per element.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The (population) standard deviation per element; 1 before two rows.
    pub fn std(&self) -> Vec<f64> {
        (0..self.m2.len()).map(|i| self.variance(i).sqrt()).collect()
    }

    /// The (population) variance of element `i`; 1 before two rows.
    ///
    /// # Panics
    /// If `i` is not below the width.
    pub fn variance(&self, i: usize) -> f64 {
        if self.count < 2 {
            1.0
        } else {
            self.m2[i] / self.count as f64
        }
    }
}

/// Normalizes observations to roughly zero mean and unit variance, clipping
/// the result to `±clip`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanStdFilter {
    /// Statistics the filter normalizes with (global, as last synchronized).
    global: RunningStat,
    /// What this copy saw since the last synchronization.
    delta: RunningStat,
    /// Normalized values are clipped to `[-clip, clip]`.
    clip: f64,
}

impl MeanStdFilter {
    /// A filter for rows of width `dim`, clipping at `clip` (RLlib uses 10).
    pub fn new(dim: usize, clip: f64) -> Self {
        Self { global: RunningStat::new(dim), delta: RunningStat::new(dim), clip }
    }

    /// Records each row of `obs` (`[n, dim]`), then normalizes it in place.
    /// The row updates the statistics first, as RLlib's filter does.
    pub fn apply(&mut self, obs: &mut [f32]) {
        let dim = self.global.mean.len();
        for row in obs.chunks_exact_mut(dim) {
            self.global.push(row);
            self.delta.push(row);
            self.normalize_row(row);
        }
    }

    /// Normalizes without recording (evaluation).
    pub fn normalize(&self, obs: &mut [f32]) {
        for row in obs.chunks_exact_mut(self.global.mean.len()) {
            self.normalize_row(row);
        }
    }

    /// Element by element, without collecting the std into a vector: this
    /// runs for every observation sampled, and needs no allocation. The
    /// floats are those of [`RunningStat::std`].
    fn normalize_row(&self, row: &mut [f32]) {
        for (i, (x, m)) in row.iter_mut().zip(&self.global.mean).enumerate() {
            let s = self.global.variance(i).sqrt();
            *x = ((*x as f64 - m) / (s + 1e-8)).clamp(-self.clip, self.clip) as f32;
        }
    }

    /// Normalized values are clipped to `[-clip, clip]`.
    pub fn clip(&self) -> f64 {
        self.clip
    }

    /// Takes what this copy saw since the last call (for the driver to merge).
    pub fn take_delta(&mut self) -> RunningStat {
        let dim = self.delta.mean.len();
        std::mem::replace(&mut self.delta, RunningStat::new(dim))
    }

    /// Merges a worker's delta into this (the driver's) filter.
    ///
    /// # Errors
    /// A delta of another width (nothing is merged).
    pub fn merge_delta(&mut self, delta: &RunningStat) -> Result<(), FilterError> {
        self.global.merge(delta)
    }

    /// Replaces the statistics with the driver's (keeping nothing of the
    /// delta, which the driver has already merged).
    ///
    /// # Errors
    /// Statistics of another width (the filter keeps its own).
    pub fn set_global(&mut self, global: &RunningStat) -> Result<(), FilterError> {
        global.check_width(self.global.mean.len())?;
        self.global = global.clone();
        self.delta = RunningStat::new(global.mean.len());
        Ok(())
    }

    /// The statistics used for normalizing.
    pub fn global(&self) -> &RunningStat {
        &self.global
    }
}

/// Scales each reward by the running standard deviation of the discounted
/// return, clipping the result at `±clip`: the reward normalization of
/// Stable-Baselines3's `VecNormalize` (`norm_reward`), which
/// rl-baselines3-zoo's PPO settings for MuJoCo use. Rewards of very
/// different sizes (HalfCheetah's run to hundreds per episode) then reach
/// the value function on a scale near 1, without moving the optimum: every
/// reward is divided by the same positive number at a time.
///
/// Each copy keeps its discounted return `R ← γR + r`, reset when its
/// episode ends; after each step the copies' returns are added to the
/// statistics and then the rewards divided by their std. A row that is no
/// transition of its own (a player waiting for its turn, whose reward
/// completes its last move) adds its reward to `R` undiscounted and adds
/// nothing to the statistics; a row cut by an env shard's restart resets
/// `R`. The statistics are per evaluator (not merged across evaluators as
/// the observation filter's are; each estimates the same quantity) and are
/// saved in its state, so a restored run scales as the original did. An
/// evaluator actor restarted after a failure, or a PBT trial that copies
/// another's weights, starts its statistics afresh (only the observation
/// filter travels with the weights). Only the rewards the learner sees are
/// scaled: episode returns in results stay the env's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawRewardScaler")]
pub struct RewardScaler {
    gamma: f64,
    clip: f64,
    /// Each copy's discounted return so far in its episode.
    returns: Vec<f64>,
    /// Statistics of the discounted returns seen.
    stat: RunningStat,
}

/// [`RewardScaler`] as it is read from a checkpoint, before its checks.
#[derive(Deserialize)]
struct RawRewardScaler {
    gamma: f64,
    clip: f64,
    returns: Vec<f64>,
    stat: RunningStat,
}

impl TryFrom<RawRewardScaler> for RewardScaler {
    type Error = FilterError;

    fn try_from(raw: RawRewardScaler) -> Result<Self, FilterError> {
        let RawRewardScaler { gamma, clip, returns, stat } = raw;
        if !(0.0..=1.0).contains(&gamma) {
            return Err(FilterError(format!("reward scaler: gamma {gamma} is not in [0, 1]")));
        }
        if !(clip.is_finite() && clip > 0.0) {
            return Err(FilterError(format!("reward scaler: clip {clip} is not a positive number")));
        }
        if let Some(i) = returns.iter().position(|r| !r.is_finite()) {
            return Err(FilterError(format!("reward scaler: copy {i}'s return is {}", returns[i])));
        }
        stat.check_width(1)?;
        Ok(Self { gamma, clip, returns, stat })
    }
}

impl RewardScaler {
    /// A scaler for `copies` env copies, discounting by `gamma` and
    /// clipping at `clip` (SB3 uses 10).
    pub fn new(copies: usize, gamma: f64, clip: f64) -> Self {
        Self { gamma, clip, returns: vec![0.0; copies], stat: RunningStat::new(1) }
    }

    /// Scales one step's rewards of every copy in place (`rewards[i]` is
    /// copy `i`'s); `ended[i]` says copy `i`'s episode ended with this step
    /// (terminated, truncated, or cut by a restart), and `step[i]` whether
    /// the row is a transition of its own (false for a player waiting for
    /// its turn, or a row cut by a restart).
    ///
    /// # Errors
    /// If the slices do not have one entry per copy, or a reward is not
    /// finite (nothing is changed).
    pub fn apply(&mut self, rewards: &mut [f32], ended: &[bool], step: &[bool]) -> Result<(), FilterError> {
        let n = self.returns.len();
        if rewards.len() != n || ended.len() != n || step.len() != n {
            return Err(FilterError(format!(
                "reward scaling: {} rewards, {} end flags and {} step flags for {n} env copies",
                rewards.len(),
                ended.len(),
                step.len()
            )));
        }
        if let Some(i) = rewards.iter().position(|r| !r.is_finite()) {
            return Err(FilterError(format!("reward scaling: env copy {i}'s reward is {}", rewards[i])));
        }
        for ((ret, &r), &counted) in self.returns.iter_mut().zip(rewards.iter()).zip(step) {
            if counted {
                *ret = *ret * self.gamma + r as f64;
                self.stat.push(&[*ret as f32]);
            } else {
                *ret += r as f64;
            }
        }
        let scale = self.std();
        for r in rewards.iter_mut() {
            *r = (*r as f64 / scale).clamp(-self.clip, self.clip) as f32;
        }
        for (ret, &end) in self.returns.iter_mut().zip(ended) {
            if end {
                *ret = 0.0;
            }
        }
        Ok(())
    }

    /// What rewards are divided by now: the std of the discounted returns
    /// (1 before two have been seen), with SB3's 1e-8 under the root.
    pub fn std(&self) -> f64 {
        (self.stat.variance(0) + 1e-8).sqrt()
    }

    /// The env copies this scaler is for.
    pub fn copies(&self) -> usize {
        self.returns.len()
    }

    /// Takes a saved scaler's statistics and returns, keeping this one's
    /// γ and clip (the run's config, which a restore may have changed).
    ///
    /// # Errors
    /// A saved scaler for another number of env copies (nothing changes).
    pub fn restore(&mut self, saved: &RewardScaler) -> Result<(), FilterError> {
        if saved.copies() != self.copies() {
            return Err(FilterError(format!(
                "a saved reward scaler for {} env copies does not fit one for {}",
                saved.copies(),
                self.copies()
            )));
        }
        self.returns.clone_from(&saved.returns);
        self.stat = saved.stat.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_stat_matches_two_pass_and_merges_exactly() {
        let rows: Vec<[f32; 2]> = (0..100).map(|i| [i as f32, (i as f32 * 0.7).sin() * 3.0 + 1.0]).collect();
        let mut all = RunningStat::new(2);
        rows.iter().for_each(|r| all.push(r));
        let mean0 = rows.iter().map(|r| r[0] as f64).sum::<f64>() / 100.0;
        let var0 = rows.iter().map(|r| (r[0] as f64 - mean0).powi(2)).sum::<f64>() / 100.0;
        assert!((all.mean()[0] - mean0).abs() < 1e-9 && (all.std()[0] - var0.sqrt()).abs() < 1e-9);
        let (mut a, mut b) = (RunningStat::new(2), RunningStat::new(2));
        rows[..37].iter().for_each(|r| a.push(r));
        rows[37..].iter().for_each(|r| b.push(r));
        a.merge(&b).unwrap();
        assert_eq!(a.count(), 100);
        for i in 0..2 {
            assert!((a.mean()[i] - all.mean()[i]).abs() < 1e-9);
            assert!((a.std()[i] - all.std()[i]).abs() < 1e-9);
        }
    }

    #[test]
    fn filters_on_two_workers_synchronize_to_the_global_statistics() {
        let mut driver = MeanStdFilter::new(1, 10.0);
        let mut w1 = driver.clone();
        let mut w2 = driver.clone();
        let mut x1: Vec<f32> = (0..50).map(|i| i as f32).collect();
        let mut x2: Vec<f32> = (50..100).map(|i| i as f32).collect();
        w1.apply(&mut x1);
        w2.apply(&mut x2);
        driver.merge_delta(&w1.take_delta()).unwrap();
        driver.merge_delta(&w2.take_delta()).unwrap();
        assert_eq!(driver.global().count(), 100);
        assert!((driver.global().mean()[0] - 49.5).abs() < 1e-9);
        w1.set_global(driver.global()).unwrap();
        let mut probe = [49.5f32];
        w1.normalize(&mut probe);
        assert!(probe[0].abs() < 1e-6);
        // Serialized with the policy and restored unchanged.
        let json = serde_json::to_string(&driver).unwrap();
        assert_eq!(serde_json::from_str::<MeanStdFilter>(&json).unwrap(), driver);
    }

    /// Statistics from a faulty peer or a damaged file are errors, never a
    /// panic or an out-of-bounds index, and leave the filter as it was.
    #[test]
    fn statistics_of_another_width_or_inconsistent_ones_are_refused() {
        let mut driver = MeanStdFilter::new(3, 10.0);
        let mut wide = RunningStat::new(4);
        wide.push(&[1.0, 2.0, 3.0, 4.0]);
        let before = driver.clone();
        let err = driver.merge_delta(&wide).unwrap_err().to_string();
        assert!(err.contains("width 4") && err.contains("width 3"), "{err}");
        assert!(driver.set_global(&wide).is_err());
        assert_eq!(driver, before);
        let ragged = r#"{"count": 5, "mean": [0.0, 1.0, 2.0], "m2": [1.0]}"#;
        let err = serde_json::from_str::<RunningStat>(ragged).unwrap_err().to_string();
        assert!(err.contains("3 means but 1 squared deviations"), "{err}");
        let negative = r#"{"count": 5, "mean": [0.0], "m2": [-1.0]}"#;
        assert!(serde_json::from_str::<RunningStat>(negative).is_err());
        let bytes = crate::codec::encode_value(&RunningStat::new(2)).unwrap();
        assert_eq!(crate::codec::decode_value::<RunningStat>(&bytes).unwrap(), RunningStat::new(2));
    }

    /// The scaler against a direct computation of SB3's `VecNormalize`
    /// reward normalization: per copy `R ← γR + r`, the population variance
    /// of every return so far, `r / sqrt(var + 1e-8)` clipped, `R` reset
    /// at an episode's end.
    #[test]
    fn reward_scaler_divides_by_the_std_of_the_discounted_return() {
        let (gamma, copies) = (0.9, 2);
        let mut scaler = RewardScaler::new(copies, gamma, 10.0);
        let mut returns = vec![0.0f64; copies];
        let mut seen: Vec<f64> = Vec::new();
        for t in 0..40 {
            let raw: Vec<f32> = (0..copies).map(|i| ((t * 7 + i * 3) % 11) as f32 - 3.0).collect();
            let ended: Vec<bool> = (0..copies).map(|i| (t + i) % 13 == 12).collect();
            let mut scaled = raw.clone();
            scaler.apply(&mut scaled, &ended, &[true; 2]).unwrap();
            for i in 0..copies {
                returns[i] = returns[i] * gamma + raw[i] as f64;
                seen.push(returns[i] as f32 as f64);
            }
            let mean = seen.iter().sum::<f64>() / seen.len() as f64;
            let var = seen.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / seen.len() as f64;
            let std = if seen.len() < 2 { 1.0 } else { (var + 1e-8).sqrt() };
            for i in 0..copies {
                let expected = (raw[i] as f64 / std).clamp(-10.0, 10.0);
                assert!((scaled[i] as f64 - expected).abs() < 1e-5, "step {t} copy {i}: {} vs {expected}", scaled[i]);
                if ended[i] {
                    returns[i] = 0.0;
                }
            }
        }
        // After 100 zero rewards a spike is about sqrt(100) = 10 stds:
        // clipped to 5, not passed through.
        let mut flat = RewardScaler::new(1, 0.99, 5.0);
        for _ in 0..100 {
            flat.apply(&mut [0.0], &[false], &[true]).unwrap();
        }
        let mut spike = [1.0f32];
        flat.apply(&mut spike, &[false], &[true]).unwrap();
        assert_eq!(spike[0], 5.0);
        let err = flat.apply(&mut [1.0, 2.0], &[false], &[true]).unwrap_err().to_string();
        assert!(err.contains("2 rewards, 1 end flags and 1 step flags for 1 env copies"), "{err}");
        let err = flat.apply(&mut [f32::NAN], &[false], &[true]).unwrap_err().to_string();
        assert!(err.contains("env copy 0's reward is NaN"), "{err}");
        // A waiting player's row adds its reward undiscounted and is not
        // counted; the scaler's statistics do not move.
        let before = flat.clone();
        let mut waiting = [2.0f32];
        flat.apply(&mut waiting, &[false], &[false]).unwrap();
        assert_eq!(flat.stat, before.stat);
        assert_eq!(flat.returns[0], before.returns[0] + 2.0);
        // A restore keeps the configured γ and clip.
        let mut other = RewardScaler::new(1, 0.5, 3.0);
        other.restore(&flat).unwrap();
        assert_eq!((other.gamma, other.clip, other.stat.count()), (0.5, 3.0, flat.stat.count()));
        assert!(other.restore(&scaler).is_err());
        // Saved with the evaluator's state and restored unchanged; a
        // damaged one is refused by name.
        let bytes = crate::codec::encode_value(&scaler).unwrap();
        assert_eq!(crate::codec::decode_value::<RewardScaler>(&bytes).unwrap(), scaler);
        let json = serde_json::to_value(&scaler).unwrap();
        let mut bad = json.clone();
        bad["gamma"] = serde_json::json!(1.5);
        let err = serde_json::from_value::<RewardScaler>(bad).unwrap_err().to_string();
        assert!(err.contains("gamma 1.5 is not in [0, 1]"), "{err}");
        let mut bad = json;
        bad["stat"] = serde_json::to_value(RunningStat::new(3)).unwrap();
        assert!(serde_json::from_value::<RewardScaler>(bad).is_err());
    }

    #[test]
    fn normalized_values_are_clipped() {
        let mut f = MeanStdFilter::new(1, 2.0);
        let mut xs: Vec<f32> = vec![0.0, 1.0, 0.0, 1.0, 100.0];
        f.apply(&mut xs);
        assert!(xs.iter().all(|x| x.abs() <= 2.0));
    }
}
