//! Observation filters: a running mean/std normalizer whose statistics merge
//! across evaluators (RLlib's `MeanStdFilter`).
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
#[error("observation filter statistics: {0}")]
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
        self.m2.iter().map(|s| if self.count < 2 { 1.0 } else { (s / self.count as f64).sqrt() }).collect()
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

    fn normalize_row(&self, row: &mut [f32]) {
        let std = self.global.std();
        for ((x, m), s) in row.iter_mut().zip(&self.global.mean).zip(std) {
            *x = ((*x as f64 - m) / (s + 1e-8)).clamp(-self.clip, self.clip) as f32;
        }
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

    #[test]
    fn normalized_values_are_clipped() {
        let mut f = MeanStdFilter::new(1, 2.0);
        let mut xs: Vec<f32> = vec![0.0, 1.0, 0.0, 1.0, 100.0];
        f.apply(&mut xs);
        assert!(xs.iter().all(|x| x.abs() <= 2.0));
    }
}
