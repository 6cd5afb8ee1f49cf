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
//!
//! Every so many evaluations a video of the first episode can be written
//! ([`Evaluation::with_videos`], the `record_video_interval` key): without
//! workers the driver's evaluator records its first copy's first episode
//! as it plays it; with workers the driver replays the first worker's
//! first episode on its own evaluator (the same weights, filter and seed,
//! so the same episode unless actions are sampled).

use crate::evaluator::evaluator_seed;
use crate::evaluator_set::Evaluators;
use crate::filter::RunningStat;
use crate::handle::HandleError;
use crate::optimizer::OptimizerError;
use crate::policy::FlatWeights;
use crate::video::VideoWriter;
use crate::EvaluatorError;
use std::path::{Path, PathBuf};
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

/// Which evaluations are recorded, and where the videos go.
#[derive(Clone, Debug, PartialEq)]
pub struct Videos {
    /// Record the evaluation after every `interval` iterations (a multiple
    /// of the evaluation interval).
    pub interval: u64,
    /// The videos' file extension: `gif` or `mp4` (see [`crate::video`]).
    pub format: String,
    /// Frames per second.
    pub fps: u32,
    /// The folder the videos are written into (`rlx train`: the run
    /// directory's `videos/`); nothing is recorded until it is set
    /// ([`Evaluation::record_videos_into`]).
    pub dir: Option<PathBuf>,
}

impl Videos {
    /// The file of the video recorded after iteration `iteration`.
    pub fn path(&self, dir: &Path, iteration: u64) -> PathBuf {
        dir.join(format!("iteration_{iteration:06}.{}", self.format))
    }
}

/// The evaluation evaluators and when to use them.
pub struct Evaluation {
    evaluators: Evaluators,
    settings: EvaluationSettings,
    videos: Option<Videos>,
}

impl Evaluation {
    /// Evaluates with `evaluators`: their workers play in parallel, or the
    /// local one when there are none.
    pub fn new(evaluators: Evaluators, settings: EvaluationSettings) -> Self {
        let settings = EvaluationSettings { interval: settings.interval.max(1), ..settings };
        Self { evaluators, settings, videos: None }
    }

    /// Records videos of the evaluations `videos` says (see the
    /// [module](self) docs).
    pub fn with_videos(mut self, videos: Videos) -> Self {
        self.videos = Some(videos);
        self
    }

    /// The video settings, if videos are recorded.
    pub fn videos(&self) -> Option<&Videos> {
        self.videos.as_ref()
    }

    /// Writes the videos into `dir` (created when the first is written).
    /// Does nothing for an evaluation without videos.
    pub fn record_videos_into(&mut self, dir: PathBuf) {
        if let Some(v) = self.videos.as_mut() {
            v.dir = Some(dir);
        }
    }

    /// The video file evaluation after `iteration` writes, if it records one.
    fn video_due(&self, iteration: u64) -> Result<Option<VideoWriter>, OptimizerError> {
        let Some(v) = &self.videos else { return Ok(None) };
        let Some(dir) = v.dir.as_deref().filter(|_| v.interval > 0 && iteration.is_multiple_of(v.interval)) else {
            return Ok(None);
        };
        let failed = |e: String| HandleError::Failed { index: 0, source: EvaluatorError::Video(e) };
        std::fs::create_dir_all(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
        Ok(Some(VideoWriter::create(&v.path(dir, iteration), v.fps).map_err(|e| failed(e.to_string()))?))
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
        let mut video = self.video_due(iteration)?;
        let failed = |source| HandleError::Failed { index: 0, source };
        if workers.is_empty() || video.is_some() {
            let mut local = self.evaluators.local();
            local.set_weights(&weights).map_err(failed)?;
            if let Some(stat) = &filter {
                local.set_filter_statistics(stat).map_err(failed)?;
            }
            if workers.is_empty() {
                let seed = evaluator_seed(s.seed, 0, round);
                episodes = match video.as_mut() {
                    Some(v) => local.evaluate_recorded(s.duration, seed, s.explore, v),
                    None => local.evaluate(s.duration, seed, s.explore),
                }
                .map_err(failed)?;
            } else if let Some(v) = video.as_mut() {
                // The first worker's first episode, replayed here.
                let seed = evaluator_seed(s.seed, workers[0].index(), round);
                local.evaluate_recorded(1, seed, s.explore, v).map_err(failed)?;
            }
        }
        if let Some(v) = video {
            v.finish().map_err(|e| failed(e.into()))?;
        }
        if !workers.is_empty() {
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
