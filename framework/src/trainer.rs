//! [`Trainer`]: runs an optimizer iteration by iteration and turns what each
//! step did into a [`TrainResult`]; [`StopCriteria`] says when to stop.

use crate::metrics::{EpisodeWindow, TrainResult};
use crate::optimizer::{OptimizerError, PolicyOptimizer};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Stop when any given metric reaches its value (`>=`), as `rllib train --stop`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopCriteria {
    /// Mean return over the last 100 episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode_reward_mean: Option<f64>,
    /// Env steps sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timesteps_total: Option<u64>,
    /// Iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_iteration: Option<u64>,
    /// Wall-clock seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_total_s: Option<f64>,
}

impl StopCriteria {
    /// Whether `result` meets any criterion.
    pub fn should_stop(&self, result: &TrainResult) -> bool {
        let reached = |goal: Option<f64>, value: Option<f64>| matches!((goal, value), (Some(g), Some(v)) if v >= g);
        reached(self.episode_reward_mean, result.episode_reward_mean)
            || reached(self.timesteps_total.map(|v| v as f64), Some(result.timesteps_total as f64))
            || reached(self.training_iteration.map(|v| v as f64), Some(result.training_iteration as f64))
            || reached(self.time_total_s, Some(result.time_total_s))
    }

    /// Whether no criterion is set (the run would never stop by itself).
    pub fn is_empty(&self) -> bool {
        *self == StopCriteria::default()
    }
}

/// Drives a [`PolicyOptimizer`] and keeps run-level counters.
pub struct Trainer {
    optimizer: Box<dyn PolicyOptimizer>,
    window: EpisodeWindow,
    last: TrainResult,
    started: Option<Instant>,
}

impl Trainer {
    /// A trainer over `optimizer`, with the 100-episode return window.
    pub fn new(optimizer: Box<dyn PolicyOptimizer>) -> Self {
        Self { optimizer, window: EpisodeWindow::new(100), last: TrainResult::default(), started: None }
    }

    /// Runs one iteration (one optimizer step) and reports it.
    ///
    /// # Errors
    /// The optimizer's error (e.g. an evaluator past its restart budget).
    pub async fn train(&mut self) -> Result<TrainResult, OptimizerError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let t0 = Instant::now();
        let step = self.optimizer.step().await?;
        let dt = t0.elapsed().as_secs_f64();
        self.window.extend(step.episodes.iter().copied());
        let prev = &self.last;
        let result = TrainResult {
            training_iteration: prev.training_iteration + 1,
            timesteps_total: prev.timesteps_total + step.steps_sampled,
            timesteps_this_iter: step.steps_sampled,
            num_env_steps_trained: prev.num_env_steps_trained + step.steps_trained,
            episodes_total: prev.episodes_total + step.episodes.len() as u64,
            episodes_this_iter: step.episodes.len() as u64,
            episode_reward_mean: self.window.mean_return(),
            episode_reward_min: self.window.min_return(),
            episode_reward_max: self.window.max_return(),
            episode_len_mean: self.window.mean_length(),
            time_this_iter_s: dt,
            time_total_s: started.elapsed().as_secs_f64(),
            env_steps_per_s: step.steps_sampled as f64 / dt.max(1e-9),
            num_evaluator_restarts: self.optimizer.evaluators().num_restarts(),
            learner: step.learner,
        };
        self.last = result.clone();
        Ok(result)
    }

    /// The optimizer (and through it the evaluators and the learner's policy).
    pub fn optimizer(&self) -> &dyn PolicyOptimizer {
        self.optimizer.as_ref()
    }

    /// The optimizer, mutably.
    pub fn optimizer_mut(&mut self) -> &mut dyn PolicyOptimizer {
        self.optimizer.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_on_any_criterion() {
        let stop = StopCriteria { episode_reward_mean: Some(475.0), timesteps_total: Some(1000), ..Default::default() };
        let mut r = TrainResult { timesteps_total: 10, ..Default::default() };
        assert!(!stop.should_stop(&r));
        r.episode_reward_mean = Some(480.0);
        assert!(stop.should_stop(&r));
        r.episode_reward_mean = Some(10.0);
        r.timesteps_total = 1000;
        assert!(stop.should_stop(&r));
        assert!(StopCriteria::default().is_empty());
        assert!(!StopCriteria::default().should_stop(&r));
    }
}
