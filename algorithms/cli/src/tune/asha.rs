//! Asynchronous successive halving (ASHA; Li et al., "A System for
//! Massively Parallel Hyperparameter Tuning", MLSys 2020), as Ray Tune's
//! `AsyncHyperBandScheduler` with one bracket.
//!
//! Rungs sit at `grace_period * reduction_factor^k` (below `max_t`) units
//! of the time attribute. When a trial first reaches a rung, its metric is
//! compared with what the trials that reached the rung before recorded:
//! below the `1 - 1/reduction_factor` quantile of those, it stops. So
//! roughly one trial in `reduction_factor` goes on past each rung, and no
//! trial waits for others to reach a rung.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The `scheduler` of an experiment file for `rlx tune`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AshaConfig {
    /// `asha`, the only scheduler (trials without one run to their stop
    /// criteria).
    #[serde(rename = "type")]
    pub kind: String,
    /// The result.json metric compared at the rungs, e.g.
    /// `episode_reward_mean` or `evaluation/episode_reward_mean`.
    pub metric: String,
    /// `max` or `min`.
    #[serde(default = "max")]
    pub mode: String,
    /// What the rungs count: `training_iteration` or `timesteps_total`.
    #[serde(default = "training_iteration")]
    pub time_attr: String,
    /// The first rung.
    #[serde(default = "one")]
    pub grace_period: f64,
    /// How much further each rung is, and one over the fraction that goes on.
    #[serde(default = "four")]
    pub reduction_factor: f64,
    /// No rung at or beyond this.
    #[serde(default = "hundred")]
    pub max_t: f64,
}

fn max() -> String {
    "max".into()
}
fn training_iteration() -> String {
    "training_iteration".into()
}
fn one() -> f64 {
    1.0
}
fn four() -> f64 {
    4.0
}
fn hundred() -> f64 {
    100.0
}

impl AshaConfig {
    /// Checks the values, naming the key.
    ///
    /// # Errors
    /// What is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.kind != "asha" {
            return Err(format!("scheduler.type `{}`: the scheduler is `asha`", self.kind));
        }
        if self.mode != "max" && self.mode != "min" {
            return Err(format!("scheduler.mode `{}`: `max` or `min`", self.mode));
        }
        if !matches!(self.time_attr.as_str(), "training_iteration" | "timesteps_total" | "time_total_s") {
            return Err(format!(
                "scheduler.time_attr `{}`: training_iteration, timesteps_total or time_total_s",
                self.time_attr
            ));
        }
        crate::retention::ScoreAttr::parse(&self.metric).map_err(|e| format!("scheduler.metric: {e}"))?;
        if !(self.grace_period > 0.0 && self.grace_period.is_finite()) {
            return Err(format!("scheduler.grace_period = {} must be > 0", self.grace_period));
        }
        if !(self.reduction_factor > 1.0 && self.reduction_factor.is_finite() && self.max_t.is_finite()) {
            return Err(format!("scheduler.reduction_factor = {} must be > 1", self.reduction_factor));
        }
        if self.max_t <= self.grace_period || self.max_t.is_nan() {
            return Err(format!("scheduler.max_t = {} must exceed grace_period {}", self.max_t, self.grace_period));
        }
        Ok(())
    }
}

/// One rung: its milestone and the metric each trial had on reaching it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rung {
    /// The time attribute's value where the rung sits.
    pub milestone: f64,
    /// Trial index → its metric there (larger is better; `min` is negated).
    pub recorded: BTreeMap<usize, f64>,
}

/// The scheduler's state (saved with the tuner's, for `--restore`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Asha {
    /// The configuration.
    pub config: AshaConfig,
    /// Highest milestone first.
    pub rungs: Vec<Rung>,
}

impl Asha {
    /// The rungs of `config`.
    pub fn new(config: AshaConfig) -> Self {
        let mut rungs = Vec::new();
        let mut t = config.grace_period;
        while t < config.max_t {
            rungs.push(Rung { milestone: t, recorded: BTreeMap::new() });
            t *= config.reduction_factor;
        }
        rungs.reverse();
        Self { config, rungs }
    }

    /// A result's time: its `time_attr` (0 if it has none).
    pub fn time_of(&self, result: &Value) -> f64 {
        result.get(&self.config.time_attr).and_then(Value::as_f64).unwrap_or(0.0)
    }

    /// Whether a result has reached `max_t`: its trial has used its budget.
    pub fn at_max_t(&self, result: &Value) -> bool {
        self.time_of(result) >= self.config.max_t
    }

    /// Takes a trial's result at time `time` with its latest value of the
    /// metric (`None`: none reported yet, so nothing is decided or
    /// recorded). Returns whether the trial goes on.
    pub fn on_result(&mut self, trial: usize, time: f64, value: Option<f64>) -> bool {
        let sign = if self.config.mode == "min" { -1.0 } else { 1.0 };
        let Some(value) = value.filter(|v| v.is_finite()).map(|v| sign * v) else { return true };
        // A trial at max_t has finished its budget: its own stop criterion
        // ends it. Stopping it here raced its normal exit and marked a
        // finished trial as stopped early.
        if time >= self.config.max_t {
            return true;
        }
        let quantile = 1.0 - 1.0 / self.config.reduction_factor;
        // Only the highest rung reached counts, once (Ray's rule): a trial
        // that jumped over a rung does not fill it in later.
        let Some(rung) = self.rungs.iter_mut().find(|r| time >= r.milestone) else { return true };
        if rung.recorded.contains_key(&trial) {
            return true;
        }
        let cutoff = percentile(rung.recorded.values().copied().collect(), quantile);
        rung.recorded.insert(trial, value);
        cutoff.is_none_or(|c| value >= c)
    }
}

/// The `q` quantile of `values` with linear interpolation (NumPy's
/// default), `None` for none.
fn percentile(mut values: Vec<f64>, q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = q * (values.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(values[lo] + (values[hi] - values[lo]) * (rank - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: &str) -> AshaConfig {
        AshaConfig {
            kind: "asha".into(),
            metric: "episode_reward_mean".into(),
            mode: mode.into(),
            time_attr: "training_iteration".into(),
            grace_period: 1.0,
            reduction_factor: 2.0,
            max_t: 10.0,
        }
    }

    #[test]
    fn rungs_and_cutoffs_as_in_the_paper() {
        let mut asha = Asha::new(config("max"));
        let milestones: Vec<f64> = asha.rungs.iter().map(|r| r.milestone).collect();
        assert_eq!(milestones, [8.0, 4.0, 2.0, 1.0]);
        // At rung 1, the first trial always goes on; later ones need the median.
        assert!(asha.on_result(0, 1.0, Some(10.0)));
        assert!(!asha.on_result(1, 1.0, Some(5.0)), "below the median of [10]");
        assert!(asha.on_result(2, 1.0, Some(20.0)));
        assert!(asha.on_result(3, 1.0, None), "no metric yet: nothing decided");
        assert!(!asha.rungs[3].recorded.contains_key(&3), "nor recorded");
        // Between rungs nothing is decided; each rung once per trial.
        assert!(asha.on_result(0, 1.5, Some(0.0)));
        assert!(asha.on_result(2, 2.0, Some(30.0)));
        assert!(!asha.on_result(0, 2.0, Some(25.0)), "below the median of [30]");
        // A trial that jumps from below rung 2 to past rung 4 records at 4
        // only, and never fills in rung 2 later.
        assert!(asha.on_result(5, 5.0, Some(1.0)), "the first at rung 4 goes on");
        assert!(asha.on_result(5, 6.0, Some(1.0)));
        assert!(!asha.rungs[2].recorded.contains_key(&5));
        assert_eq!(percentile(vec![1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        // A trial first seen at max_t (it jumped over rung 8) has finished
        // and is not stopped, however low, nor recorded.
        assert!(asha.on_result(6, 10.0, Some(-100.0)));
        assert!(!asha.rungs[0].recorded.contains_key(&6));
        // min: lower is better.
        let mut asha = Asha::new(config("min"));
        assert!(asha.on_result(0, 1.0, Some(10.0)));
        assert!(asha.on_result(1, 1.0, Some(5.0)));
        assert!(!asha.on_result(2, 1.0, Some(50.0)));
    }

    #[test]
    fn bad_settings_are_named() {
        let mut c = config("max");
        c.reduction_factor = 1.0;
        assert!(c.check().unwrap_err().contains("reduction_factor"));
        let mut c = config("best");
        assert!(c.check().unwrap_err().contains("mode"));
        c = config("max");
        c.metric = "episode_reward_maen".into();
        assert!(c.check().unwrap_err().contains("did you mean"));
    }
}
