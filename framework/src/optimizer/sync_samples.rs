//! [`SyncSamplesOptimizer`]: bulk-synchronous sampling (A2C, PPO).
//!
//! Every step: all evaluators sample in parallel, their observation filters
//! are synchronized, the batches are concatenated, the local policy learns
//! on the result, and the new weights are broadcast so the next round
//! samples on-policy.

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluators::Evaluators;
use crate::operators;
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

#[async_trait]
impl PolicyOptimizer for SyncSamplesOptimizer {
    async fn step(&mut self) -> Result<StepStats, OptimizerError> {
        let waiting_for_all = self.config.min_sample_fraction >= 1.0;
        let (mut rollouts, dropped) = if waiting_for_all {
            (operators::parallel_rollouts(&mut self.evaluators).await?, 0)
        } else {
            let samplers = self.evaluators.num_workers().max(1);
            let min_count = (self.config.min_sample_fraction * samplers as f64).ceil() as usize;
            operators::parallel_rollouts_first(&mut self.evaluators, min_count).await?
        };
        operators::sync_observation_filters(&mut self.evaluators, &mut rollouts).await?;
        let (mut batch, episodes) = operators::concat_rollouts(rollouts)?;
        operators::standardize_fields(&mut batch, &self.config.standardize_fields)?;
        let mut learner = self.evaluators.learn_on_batch(&batch)?;
        if waiting_for_all {
            operators::broadcast_weights(&mut self.evaluators).await?;
        } else {
            // A straggler is still busy with the abandoned request: do not wait for it.
            operators::push_weights(&mut self.evaluators);
            learner.set("straggler_batches_dropped", dropped as f64);
        }
        Ok(StepStats { steps_sampled: batch.len() as u64, steps_trained: batch.len() as u64, episodes, learner })
    }

    fn evaluators(&self) -> &Evaluators {
        &self.evaluators
    }

    fn evaluators_mut(&mut self) -> &mut Evaluators {
        &mut self.evaluators
    }
}
