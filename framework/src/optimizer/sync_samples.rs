//! [`SyncSamplesOptimizer`]: bulk-synchronous sampling (PG, A2C), and the
//! two halves of a synchronous round ([`sample_round`], [`publish_round`])
//! that algorithms such as PPO use in their own training step.
//!
//! Every step: all evaluators sample in parallel, their observation filters
//! are synchronized, the batches are concatenated, the local policy learns
//! on the result, and the new weights are broadcast so the next round
//! samples on-policy.

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator_set::Evaluators;
use crate::operators;
use crate::policy::LearnerStats;
use crate::sample_batch::SampleBatch;
use crate::vector_env::EpisodeSummary;
use async_trait::async_trait;

/// Settings of [`SyncSamplesOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncSamplesConfig {
    /// Float fields standardized over the whole train batch before learning
    /// (PG and A2C: `advantages`).
    pub standardize_fields: Vec<String>,
    /// Straggler mitigation: learn once this fraction of the evaluators has
    /// returned its batch (rounded up, at least one); the late batches are
    /// dropped and counted. 1.0 waits for every evaluator.
    pub min_sample_fraction: f64,
}

impl Default for SyncSamplesConfig {
    fn default() -> Self {
        Self { standardize_fields: Vec::new(), min_sample_fraction: 1.0 }
    }
}

/// Gather from all evaluators in parallel, concat, learn, broadcast.
pub struct SyncSamplesOptimizer {
    config: SyncSamplesConfig,
}

impl SyncSamplesOptimizer {
    /// Drives `evaluators` synchronously.
    pub fn new(config: SyncSamplesConfig) -> Self {
        Self { config }
    }
}

/// One synchronous sampling round: the rows of every evaluator that
/// returned in time, concatenated, with the observation filters
/// synchronized.
#[derive(Debug, Default)]
pub struct SampleRound {
    /// The train batch (an algorithm may take it out to learn on it).
    pub batch: SampleBatch,
    /// Rows sampled this round.
    pub rows: usize,
    /// Episodes that ended this round.
    pub episodes: Vec<EpisodeSummary>,
    /// Late batches dropped by straggler mitigation (`None`: waited for all).
    pub dropped: Option<usize>,
}

/// Every evaluator samples with the weights it has (the driver's own when
/// there are no workers); with `min_sample_fraction` < 1, only the first
/// that share of them is waited for and the rest are dropped.
///
/// # Errors
/// An evaluator that failed for good, or batches that do not concatenate.
pub async fn sample_round(
    evaluators: &mut Evaluators,
    min_sample_fraction: f64,
) -> Result<SampleRound, OptimizerError> {
    let (mut rollouts, dropped) = if min_sample_fraction >= 1.0 {
        (operators::parallel_rollouts(evaluators).await?, None)
    } else {
        let samplers = evaluators.num_workers().max(1);
        let min_count = (min_sample_fraction * samplers as f64).ceil() as usize;
        let (rollouts, dropped) = operators::parallel_rollouts_first(evaluators, min_count).await?;
        (rollouts, Some(dropped))
    };
    operators::sync_observation_filters(evaluators, &mut rollouts).await?;
    let (batch, episodes) = operators::concat_rollouts(rollouts)?;
    Ok(SampleRound { rows: batch.len(), batch, episodes, dropped })
}

/// Ends a round: the driver's new weights to every evaluator (pushed
/// without waiting when a straggler may still be busy), and the round's
/// statistics with the learner's.
///
/// # Errors
/// An evaluator that failed for good.
pub async fn publish_round(
    evaluators: &mut Evaluators,
    round: SampleRound,
    mut learner: LearnerStats,
) -> Result<StepStats, OptimizerError> {
    match round.dropped {
        None => operators::broadcast_weights(evaluators).await?,
        Some(dropped) => {
            operators::push_weights(evaluators);
            learner.set("straggler_batches_dropped", dropped as f64);
        }
    }
    let rows = round.rows as u64;
    Ok(StepStats { steps_sampled: rows, steps_trained: rows, episodes: round.episodes, learner })
}

#[async_trait]
impl PolicyOptimizer for SyncSamplesOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let mut round = sample_round(evaluators, self.config.min_sample_fraction).await?;
        operators::standardize_fields(&mut round.batch, &self.config.standardize_fields)?;
        let learner = evaluators.learn_on_batch(&round.batch)?;
        publish_round(evaluators, round, learner).await
    }
}
