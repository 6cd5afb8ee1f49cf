//! Evaluation during training: every `interval` iterations, the learner's
//! current policy plays whole episodes on evaluators of its own, greedily
//! by default, and the iteration's [`TrainResult`](crate::TrainResult)
//! carries their statistics under `evaluation`.
//!
//! Papers report this, not the training episodes' mean: training episodes
//! include exploration (ε-greedy, sampled actions), and their 100-episode
//! window lags the policy. RLlib calls it `evaluation_interval`,
//! Stable-Baselines3 `EvalCallback`.
//!
//! The evaluation evaluators are separate from the training ones (their own
//! env copies, seeds and policy), so evaluating never changes what training
//! samples. Without workers the driver's evaluation evaluator plays after
//! the iteration, on the weights the iteration ended with. With workers
//! they play while the iteration trains, on the weights it started with,
//! as RLlib's `evaluation_parallel_to_training`.

use crate::evaluator::evaluator_seed;
use crate::evaluator_set::Evaluators;
use crate::filter::RunningStat;
use crate::handle::HandleError;
use crate::optimizer::OptimizerError;
use crate::policy::FlatWeights;
use std::sync::Arc;

pub use crate::metrics::{ArenaRecord, EvaluationResult, Outcomes};

/// When and how much to evaluate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvaluationSettings {
    /// Evaluate after every `interval` iterations (at least 1).
    pub interval: u64,
    /// Episodes per evaluation (at least 1).
    pub duration: usize,
    /// Sample actions instead of taking the most likely.
    pub explore: bool,
    /// Seed of the evaluation envs' resets; evaluation `k` (the one after
    /// iteration `k * interval`) of evaluator `i` resets its copies from
    /// [`evaluator_seed`]`(seed, i, k)`, so an evaluation's episodes are
    /// the same whatever else the run did, resumed or not.
    pub seed: u64,
}

/// The evaluation evaluators and when to use them.
pub struct Evaluation {
    evaluators: Evaluators,
    settings: EvaluationSettings,
}

impl Evaluation {
    /// Evaluates with `evaluators`: their workers play in parallel, or the
    /// local one when there are none.
    pub fn new(evaluators: Evaluators, settings: EvaluationSettings) -> Self {
        Self { evaluators, settings: EvaluationSettings { interval: settings.interval.max(1), ..settings } }
    }

    /// The settings.
    pub fn settings(&self) -> EvaluationSettings {
        self.settings
    }

    /// Whether the evaluator actors play while an iteration trains.
    pub fn in_parallel(&self) -> bool {
        self.evaluators.num_workers() > 0
    }

    /// Whether iteration `iteration` (from 1) is followed by an evaluation.
    pub fn due(&self, iteration: u64) -> bool {
        iteration.is_multiple_of(self.settings.interval)
    }

    /// Evaluator restarts after failures.
    pub fn num_restarts(&self) -> u64 {
        self.evaluators.num_restarts()
    }

    /// Plays the evaluation for iteration `iteration` with `weights` (and
    /// the training filter's statistics, if it has one), spreading the
    /// episodes over the workers (or the local evaluator without workers).
    ///
    /// # Errors
    /// An evaluator that fails past its restart budget, or weights that do
    /// not fit.
    pub async fn run(
        &self,
        iteration: u64,
        weights: Arc<FlatWeights>,
        filter: Option<Arc<RunningStat>>,
    ) -> Result<EvaluationResult, OptimizerError> {
        let s = self.settings;
        let round = iteration / s.interval;
        let workers = self.evaluators.workers();
        let mut episodes = Vec::with_capacity(s.duration);
        if workers.is_empty() {
            let mut local = self.evaluators.local();
            local.set_weights(&weights).map_err(|source| HandleError::Failed { index: 0, source })?;
            if let Some(stat) = &filter {
                local.set_filter_statistics(stat).map_err(|source| HandleError::Failed { index: 0, source })?;
            }
            let seed = evaluator_seed(s.seed, 0, round);
            episodes = local
                .evaluate(s.duration, seed, s.explore)
                .map_err(|source| HandleError::Failed { index: 0, source })?;
        } else {
            let n = workers.len();
            let calls = workers.iter().enumerate().filter_map(|(k, w)| {
                let share = s.duration / n + usize::from(k < s.duration % n);
                let (weights, filter) = (weights.clone(), filter.clone());
                let seed = evaluator_seed(s.seed, w.index(), round);
                let call = async move {
                    w.set_weights(weights).await?;
                    if let Some(stat) = filter {
                        w.set_filter_statistics(stat).await?;
                    }
                    w.evaluate(share, seed, s.explore).await
                };
                (share > 0).then_some(call)
            });
            for played in futures::future::join_all(calls).await {
                episodes.extend(played?);
            }
        }
        Ok(EvaluationResult::of(&episodes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector_env::EpisodeSummary;

    fn ep(r: f64, length: u64) -> EpisodeSummary {
        EpisodeSummary { episode_return: r, length, truncated: false, agent: None }
    }

    #[test]
    fn statistics_of_the_episodes() {
        let r = EvaluationResult::of(&[ep(10.0, 10), ep(30.0, 20), ep(20.0, 30)]);
        assert_eq!(r.episode_reward_mean, 20.0);
        assert_eq!((r.episode_reward_min, r.episode_reward_max), (10.0, 30.0));
        assert_eq!(r.episode_len_mean, 20.0);
        assert_eq!(r.episodes, 3);
        assert_eq!(EvaluationResult::of(&[]), EvaluationResult::default());
    }
}
