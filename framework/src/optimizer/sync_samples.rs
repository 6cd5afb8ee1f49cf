//! [`SyncSamplesOptimizer`]: bulk-synchronous sampling, the training step
//! of PG, A2C and PPO, and the two halves of a synchronous round
//! ([`sample_round`], [`publish_round`]) for an algorithm's own step.
//!
//! Every step: all evaluators sample in parallel, their observation filters
//! are synchronized, the batches are concatenated, the chosen fields are
//! standardized over the whole batch, the local policy learns on the result
//! (its `learn_on_batch`: one gradient step for PG and A2C, PPO's SGD epochs
//! over minibatches), or a [`MultiDeviceLearner`] splits each minibatch
//! over replicas, and the new weights are broadcast so the next round
//! samples on-policy.

use super::{MultiDeviceLearner, OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator_set::Evaluators;
use crate::operators;
use crate::policy::{FlatWeights, LearnerStats};
use crate::sample_batch::SampleBatch;
use crate::vector_env::EpisodeSummary;
use async_trait::async_trait;
use std::sync::Arc;

/// Settings of [`SyncSamplesOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncSamplesConfig {
    /// Float fields standardized over the whole train batch before learning
    /// (PG, A2C and PPO: `advantages`).
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
    /// Learner replicas over several devices; `None`: the driver's policy.
    devices: Option<MultiDeviceLearner>,
}

impl SyncSamplesOptimizer {
    /// Drives `evaluators` synchronously, learning on the driver's policy.
    pub fn new(config: SyncSamplesConfig) -> Self {
        Self { config, devices: None }
    }

    /// Learns with `devices` (minibatch SGD data-parallel over replicas of
    /// the driver's policy, RLlib's `LocalMultiGPUOptimizer`) when given.
    #[must_use]
    pub fn with_devices(mut self, devices: Option<MultiDeviceLearner>) -> Self {
        self.devices = devices;
        self
    }

    /// The multi-device learner, if any (e.g. to read its replicas' weights).
    pub fn devices(&self) -> Option<&MultiDeviceLearner> {
        self.devices.as_ref()
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
        // Every evaluator samples with the current weights; its rows come
        // with what the policy's `postprocess` added (advantages, targets).
        let mut round = sample_round(evaluators, self.config.min_sample_fraction).await?;
        // E.g. advantages, standardized over the whole train batch.
        operators::standardize_fields(&mut round.batch, &self.config.standardize_fields)?;
        // The policy's update on the batch, on the driver or over replicas.
        let learner = match &mut self.devices {
            None => evaluators.learn_on_batch(&round.batch)?,
            Some(devices) => devices.learn_on(evaluators, std::mem::take(&mut round.batch))?,
        };
        // The new weights to every evaluator: the next round is on-policy.
        publish_round(evaluators, round, learner).await
    }

    /// The replicas copy the restored weights (and the optimizer state
    /// restored after them) before the next step.
    fn weights_restored(&mut self, _: &Arc<FlatWeights>) {
        if let Some(devices) = &mut self.devices {
            devices.mark_out_of_sync();
        }
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        self.devices.iter().map(|_| MultiDeviceLearner::CHECKPOINT_GAP.to_string()).collect()
    }
}
