//! [`SyncBatchReplayOptimizer`]: replay of whole sample batches, so that a
//! policy learning from sequences (a recurrent network, a loss over
//! trajectories) sees its rows in the order they were sampled.
//!
//! Every step all evaluators sample in parallel and each returned batch is
//! stored as it is, the oldest dropped past `buffer_size` rows. Once
//! `learning_starts` rows are stored, batches drawn uniformly (with
//! replacement) are concatenated until they hold `train_batch_size` rows;
//! the local policy learns on the result and the new weights are broadcast.

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator_set::Evaluators;
use crate::operators;
use crate::replay::ReplayError;
use crate::sample_batch::SampleBatch;
use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// Settings of [`SyncBatchReplayOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncBatchReplayConfig {
    /// Rows kept, counted in whole batches (the oldest batch goes once the
    /// rest hold this many).
    pub buffer_size: usize,
    /// Rows stored before learning starts.
    pub learning_starts: usize,
    /// Rows per train batch (at least; whole batches are never cut).
    pub train_batch_size: usize,
    /// Seeds the choice of batches.
    pub seed: u64,
}

/// Sample, store whole batches, learn on replayed whole batches, broadcast.
pub struct SyncBatchReplayOptimizer {
    config: SyncBatchReplayConfig,
    batches: VecDeque<SampleBatch>,
    rows: usize,
    rng: ChaCha8Rng,
}

impl SyncBatchReplayOptimizer {
    /// Drives `evaluators` with an empty buffer.
    ///
    /// # Errors
    /// A buffer or train batch size of 0.
    pub fn new(config: SyncBatchReplayConfig) -> Result<Self, ReplayError> {
        if config.buffer_size == 0 || config.train_batch_size == 0 {
            return Err(ReplayError::Invalid("buffer_size and train_batch_size must be >= 1".into()));
        }
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Ok(Self { config, batches: VecDeque::new(), rows: 0, rng })
    }

    /// Rows stored.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    fn store(&mut self, batch: SampleBatch) {
        self.rows += batch.len();
        self.batches.push_back(batch);
        while self.batches.len() > 1 && self.rows - self.batches[0].len() >= self.config.buffer_size {
            let oldest = self.batches.pop_front().expect("more than one batch");
            self.rows -= oldest.len();
        }
    }

    /// Whole stored batches drawn uniformly, concatenated in draw order.
    fn replay(&mut self) -> Result<SampleBatch, OptimizerError> {
        let mut picked = Vec::new();
        let mut rows = 0;
        while rows < self.config.train_batch_size {
            let batch = &self.batches[self.rng.gen_range(0..self.batches.len())];
            rows += batch.len().max(1);
            picked.push(batch.clone());
        }
        Ok(SampleBatch::concat(&picked)?)
    }
}

#[async_trait]
impl PolicyOptimizer for SyncBatchReplayOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let rollouts = operators::parallel_rollouts(evaluators).await?;
        let mut out = StepStats::default();
        for rollout in rollouts {
            out.steps_sampled += rollout.batch.len() as u64;
            out.episodes.extend(rollout.episodes);
            self.store(rollout.batch);
        }
        if self.rows >= self.config.learning_starts {
            let batch = self.replay()?;
            out.learner = evaluators.learn_on_batch(&batch)?;
            out.steps_trained = batch.len() as u64;
            operators::broadcast_weights(evaluators).await?;
        }
        out.learner.set("replay_buffer_size", self.rows as f64);
        Ok(out)
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec![format!(
            "the batch replay buffer ({} rows) is not saved; a restored run refills {} rows before it learns again",
            self.rows, self.config.learning_starts
        )]
    }
}
