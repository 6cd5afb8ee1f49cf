//! [`SyncSamplesOptimizer`]: bulk-synchronous sampling (A2C, PPO).
//!
//! Every step: all evaluators sample in parallel, their observation filters
//! are synchronized, the batches are concatenated, the local policy learns
//! on the result, and the new weights are broadcast so the next round
//! samples on-policy.

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluators::Evaluators;
use crate::operators;
use crate::policy::LearnerStats;
use crate::sample_batch::SampleBatch;
use crate::vector_env::EpisodeSummary;
use async_trait::async_trait;

/// Settings of [`SyncSamplesOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncSamplesConfig {
    /// Float fields standardized over the whole train batch before learning
    /// (PPO: `advantages`).
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
    evaluators: Evaluators,
    config: SyncSamplesConfig,
}

impl SyncSamplesOptimizer {
    /// Drives `evaluators` synchronously.
    pub fn new(evaluators: Evaluators, config: SyncSamplesConfig) -> Self {
        Self { evaluators, config }
    }
}

/// A gathered train batch: rows from every evaluator that returned in time,
/// concatenated, filters synchronized, fields standardized.
pub(super) struct Gathered {
    pub batch: SampleBatch,
    pub episodes: Vec<EpisodeSummary>,
    /// Late batches dropped by straggler mitigation (`None`: waited for all).
    pub dropped: Option<usize>,
}

/// The sampling half of a synchronous step, shared with
/// [`MultiDeviceOptimizer`](super::MultiDeviceOptimizer).
pub(super) async fn gather(
    evaluators: &mut Evaluators,
    config: &SyncSamplesConfig,
) -> Result<Gathered, OptimizerError> {
    let (mut rollouts, dropped) = if config.min_sample_fraction >= 1.0 {
        (operators::parallel_rollouts(evaluators).await?, None)
    } else {
        let samplers = evaluators.num_workers().max(1);
        let min_count = (config.min_sample_fraction * samplers as f64).ceil() as usize;
        let (rollouts, dropped) = operators::parallel_rollouts_first(evaluators, min_count).await?;
        (rollouts, Some(dropped))
    };
    operators::sync_observation_filters(evaluators, &mut rollouts).await?;
    let (mut batch, episodes) = operators::concat_rollouts(rollouts)?;
    operators::standardize_fields(&mut batch, &config.standardize_fields)?;
    Ok(Gathered { batch, episodes, dropped })
}

/// The publishing half: new weights to every evaluator, and the step's stats.
pub(super) async fn publish(
    evaluators: &mut Evaluators,
    gathered: Gathered,
    mut learner: LearnerStats,
) -> Result<StepStats, OptimizerError> {
    match gathered.dropped {
        None => operators::broadcast_weights(evaluators).await?,
        Some(dropped) => {
            // A straggler is still busy with the abandoned request: do not wait for it.
            operators::push_weights(evaluators);
            learner.set("straggler_batches_dropped", dropped as f64);
        }
    }
    let rows = gathered.batch.len() as u64;
    Ok(StepStats { steps_sampled: rows, steps_trained: rows, episodes: gathered.episodes, learner })
}

#[async_trait]
impl PolicyOptimizer for SyncSamplesOptimizer {
    async fn step(&mut self) -> Result<StepStats, OptimizerError> {
        let gathered = gather(&mut self.evaluators, &self.config).await?;
        let learner = self.evaluators.learn_on_batch(&gathered.batch)?;
        publish(&mut self.evaluators, gathered, learner).await
    }

    fn evaluators(&self) -> &Evaluators {
        &self.evaluators
    }

    fn evaluators_mut(&mut self) -> &mut Evaluators {
        &mut self.evaluators
    }
}
