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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncSamplesConfig {
    /// Float fields standardized over the whole train batch before learning
    /// (PPO: `advantages`).
    pub standardize_fields: Vec<String>,
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
        let mut rollouts = operators::parallel_rollouts(&mut self.evaluators).await?;
        operators::sync_observation_filters(&mut self.evaluators, &mut rollouts).await?;
        let (mut batch, episodes) = operators::concat_rollouts(rollouts)?;
        operators::standardize_fields(&mut batch, &self.config.standardize_fields)?;
        let learner = self.evaluators.learn_on_batch(&batch)?;
        operators::broadcast_weights(&mut self.evaluators).await?;
        Ok(StepStats { steps_sampled: batch.len() as u64, steps_trained: batch.len() as u64, episodes, learner })
    }

    fn evaluators(&self) -> &Evaluators {
        &self.evaluators
    }

    fn evaluators_mut(&mut self) -> &mut Evaluators {
        &mut self.evaluators
    }
}
