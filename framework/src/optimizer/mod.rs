//! Policy optimizers: *how* sampling, learning and weight sync are
//! distributed, independent of the algorithm's math.
//!
//! An optimizer's [`step`](PolicyOptimizer::step) is short imperative async
//! code over the shared [`operators`](crate::operators), run on the
//! evaluators the [`Trainer`](crate::Trainer) owns and passes in. Swapping
//! the optimizer changes the execution strategy without touching the
//! policy graph.
//!
//! RLlib Flow (Liang et al., NeurIPS 2021) showed that an algorithm's
//! distributed execution reads best as a few lines over shared operators
//! (sample, concatenate, learn, broadcast) next to the algorithm's math.
//! The built-in deep algorithms all run on the optimizers of this module (PG,
//! A2C and PPO on [`SyncSamplesOptimizer`], A3C on
//! [`AsyncGradientsOptimizer`], DQN and the off-policy family on
//! [`SyncReplayOptimizer`], IMPALA and APPO on [`AsyncSamplesOptimizer`],
//! Ape-X on [`AsyncReplayOptimizer`]); an algorithm whose step is its own
//! (ES, ARS, PBT) implements [`PolicyOptimizer`] in its own folder.

mod async_gradients;
mod async_replay;
mod async_samples;
mod multi_device;
mod sync_batch_replay;
mod sync_replay;
mod sync_samples;

pub use async_gradients::{AsyncGradientsConfig, AsyncGradientsOptimizer};
pub use async_replay::{AsyncReplayConfig, AsyncReplayOptimizer};
pub use async_samples::{AsyncSamplesConfig, AsyncSamplesOptimizer};
pub use multi_device::{MultiDeviceConfig, MultiDeviceLearner};
pub use sync_batch_replay::{SyncBatchReplayConfig, SyncBatchReplayOptimizer};
pub use sync_replay::{SyncReplayConfig, SyncReplayOptimizer};
pub use sync_samples::{publish_round, sample_round, SampleRound, SyncSamplesConfig, SyncSamplesOptimizer};

use crate::evaluator::EvaluatorError;
use crate::evaluator_set::Evaluators;
use crate::handle::HandleError;
use crate::policy::FlatWeights;
use crate::policy::LearnerStats;
use crate::replay::ReplayError;
use crate::sample_batch::BatchError;
use crate::vector_env::EpisodeSummary;
use async_trait::async_trait;
use std::sync::Arc;

/// What one optimizer step did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Env steps sampled by all evaluators.
    pub steps_sampled: u64,
    /// Env steps the learner trained on.
    pub steps_trained: u64,
    /// Episodes that finished while sampling.
    pub episodes: Vec<EpisodeSummary>,
    /// The learner's statistics.
    pub learner: LearnerStats,
}

/// Why an optimizer step failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum OptimizerError {
    /// An evaluator failed for good (e.g. past its restart budget).
    #[error(transparent)]
    Evaluator(#[from] HandleError),
    /// The learner failed.
    #[error("learner failed: {0}")]
    Learner(#[from] EvaluatorError),
    /// Batches from different evaluators could not be combined.
    #[error("cannot combine sample batches: {0}")]
    Batch(#[from] BatchError),
    /// Storing into or replaying from a replay buffer failed.
    #[error("replay: {0}")]
    Replay(#[from] ReplayError),
}

/// Decides how an algorithm samples, learns and syncs weights, over the
/// evaluators the [`Trainer`](crate::Trainer) owns.
#[async_trait]
pub trait PolicyOptimizer: Send {
    /// One round of sampling and learning over `evaluators`: the driver's
    /// own (whose policy the learner trains) and the workers.
    ///
    /// # Errors
    /// An evaluator that failed for good, or a learner error.
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError>;

    /// Called when a checkpoint's weights have been set on every evaluator
    /// (the driver's and the workers'), for an optimizer that keeps the
    /// learner's weights elsewhere too: a learner thread, learner replicas,
    /// a population. The default does nothing.
    fn weights_restored(&mut self, weights: &Arc<FlatWeights>) {
        let _ = weights;
    }

    /// What a checkpoint of this optimizer leaves out, in words (empty: a
    /// restore continues exactly, as far as the optimizer is concerned).
    fn checkpoint_gaps(&self) -> Vec<String> {
        Vec::new()
    }

    /// An evaluation the step just ran itself (AlphaZero's arena), for the
    /// iteration's `evaluation` when the trainer ran none. The default has
    /// none.
    fn take_evaluation(&mut self) -> Option<crate::metrics::EvaluationResult> {
        None
    }
}

/// What a checkpoint of an asynchronous optimizer leaves out: each
/// evaluator's request in flight is answered to the running optimizer, and
/// its rows are not in the checkpoint.
const IN_FLIGHT_GAP: &str =
    "each evaluator's request in flight (asynchronous sampling) is not saved: its rows go to the running optimizer, not to the checkpoint";

/// The statistics of several learner updates as one: values averaged over
/// the updates, counters (`num_*`) the last update's, and `num_updates`.
fn summarize_updates(all: &[LearnerStats]) -> LearnerStats {
    let mut out = LearnerStats::mean(all);
    if let Some(last) = all.last() {
        for (key, &value) in last.0.iter().filter(|(k, _)| k.starts_with("num_")) {
            out.set(key, value);
        }
    }
    out.set("num_updates", all.len() as f64);
    out
}
