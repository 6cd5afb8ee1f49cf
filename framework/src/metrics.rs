//! Per-iteration metrics: [`TrainResult`] and the 100-episode window behind
//! its episode statistics.
//!
//! Field names follow RLlib's so existing dashboards and habits carry over
//! (`episode_reward_mean`, `timesteps_total`, ...). Each one is explained in
//! the book's metrics page.

use crate::policy::LearnerStats;
use crate::vector_env::EpisodeSummary;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The most recent finished episodes, for smoothed return statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeWindow {
    capacity: usize,
    episodes: VecDeque<EpisodeSummary>,
}

impl EpisodeWindow {
    /// A window over the last `capacity` episodes (100 in RLlib's metrics
    /// and in Gymnasium's "solved" thresholds).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), episodes: VecDeque::with_capacity(capacity) }
    }

    /// Adds finished episodes, dropping the oldest beyond capacity.
    pub fn extend(&mut self, episodes: impl IntoIterator<Item = EpisodeSummary>) {
        for e in episodes {
            if self.episodes.len() == self.capacity {
                self.episodes.pop_front();
            }
            self.episodes.push_back(e);
        }
    }

    /// Number of episodes in the window.
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// Whether no episode has finished yet.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    fn stat(&self, f: impl Fn(&EpisodeSummary) -> f64, reduce: impl Fn(f64, f64) -> f64) -> Option<f64> {
        self.episodes.iter().map(f).reduce(reduce)
    }

    /// Mean return, `None` before the first episode ends.
    pub fn mean_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, |a, b| a + b).map(|s| s / self.len() as f64)
    }

    /// Lowest return in the window.
    pub fn min_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, f64::min)
    }

    /// Highest return in the window.
    pub fn max_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, f64::max)
    }

    /// Mean episode length.
    pub fn mean_length(&self) -> Option<f64> {
        self.stat(|e| e.length as f64, |a, b| a + b).map(|s| s / self.len() as f64)
    }
}

/// What one training iteration reports. One JSON object per line of
/// `result.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainResult {
    /// Iterations completed, starting at 1.
    pub training_iteration: u64,
    /// Env steps sampled since the start of the run.
    pub timesteps_total: u64,
    /// Env steps sampled in this iteration.
    pub timesteps_this_iter: u64,
    /// Env steps the learner trained on since the start of the run.
    pub num_env_steps_trained: u64,
    /// Episodes finished since the start of the run.
    pub episodes_total: u64,
    /// Episodes finished in this iteration.
    pub episodes_this_iter: u64,
    /// Mean return over the last 100 episodes (`null` until one finishes).
    pub episode_reward_mean: Option<f64>,
    /// Lowest return over the last 100 episodes.
    pub episode_reward_min: Option<f64>,
    /// Highest return over the last 100 episodes.
    pub episode_reward_max: Option<f64>,
    /// Mean length over the last 100 episodes.
    pub episode_len_mean: Option<f64>,
    /// Wall time of this iteration, seconds.
    pub time_this_iter_s: f64,
    /// Wall time since the start of the run, seconds.
    pub time_total_s: f64,
    /// Env steps sampled per second of wall time in this iteration
    /// (sampling and learning together).
    pub env_steps_per_s: f64,
    /// Evaluator restarts after failures since the start of the run.
    pub num_evaluator_restarts: u64,
    /// The learner's statistics (losses, entropy, KL...), averaged over the
    /// iteration's minibatches.
    pub learner: LearnerStats,
    /// What failed in the evaluators' deployment since the start of the run
    /// (refused or lost nodes, re-placed evaluators), oldest first.
    ///
    /// Checkpoints store results as MessagePack arrays, where only
    /// trailing fields may be missing: this one and the next are optional
    /// when reading (checkpoints written before they existed still load),
    /// and only the last may be left out when writing.
    #[serde(default)]
    pub evaluator_failures: Vec<String>,
    /// The evaluation after this iteration, if one ran (see
    /// [`crate::evaluation`]): greedy episodes on evaluators of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<crate::evaluation::EvaluationResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checkpoints encode results inside other structs as MessagePack
    /// arrays: a result with and without failures must round-trip there.
    #[test]
    fn results_round_trip_in_checkpoint_encoding_with_and_without_failures() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Wrapped {
            last: TrainResult,
            after: Vec<u32>,
        }
        let mut learner = LearnerStats::default();
        learner.set("kl", 0.5);
        let evaluation =
            crate::evaluation::EvaluationResult { episode_reward_mean: 7.5, episodes: 2, ..Default::default() };
        for (failures, evaluation) in [
            (vec![], None),
            (vec!["node 127.0.0.1:1 lost".to_string()], None),
            (vec![], Some(evaluation.clone())),
            (vec!["node 127.0.0.1:1 lost".to_string()], Some(evaluation)),
        ] {
            let w = Wrapped {
                last: TrainResult {
                    training_iteration: 3,
                    learner: learner.clone(),
                    evaluator_failures: failures,
                    evaluation,
                    ..Default::default()
                },
                after: vec![7],
            };
            let bytes = crate::codec::encode_value(&w).unwrap();
            assert_eq!(crate::codec::decode_value::<Wrapped>(&bytes).unwrap(), w);
        }
    }

    fn ep(r: f64) -> EpisodeSummary {
        EpisodeSummary { episode_return: r, length: r as u64, truncated: false }
    }

    #[test]
    fn window_keeps_the_last_episodes() {
        let mut w = EpisodeWindow::new(3);
        assert_eq!(w.mean_return(), None);
        w.extend([ep(1.0), ep(2.0), ep(3.0), ep(10.0)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w.mean_return(), Some(5.0));
        assert_eq!(w.min_return(), Some(2.0));
        assert_eq!(w.max_return(), Some(10.0));
        assert_eq!(w.mean_length(), Some(5.0));
    }
}
