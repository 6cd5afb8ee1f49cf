//! [`ReplayStore`]: what [`SyncReplayOptimizer`](crate::SyncReplayOptimizer)
//! needs of a replay, so that one optimizer drives transition replay
//! ([`Replay`]) and replays of another shape (DreamerV3's sequences of
//! whole episodes) alike.

use super::{Replay, ReplayError};
use crate::sample_batch::SampleBatch;
use rand_chacha::ChaCha8Rng;

/// A replay an optimizer adds sampled batches to and draws training
/// batches from.
pub trait ReplayStore: Send + 'static {
    /// Stores a postprocessed batch; `td_errors` (one per row) are initial
    /// priorities for a replay that has them.
    ///
    /// # Errors
    /// A batch the replay cannot store.
    fn add(&mut self, batch: &SampleBatch, td_errors: Option<&[f32]>) -> Result<(), ReplayError>;

    /// A training batch of `n` rows (`steps_sampled`: env steps so far, for
    /// schedules).
    ///
    /// # Errors
    /// [`ReplayError::Empty`], or an `n` the replay cannot draw.
    fn sample(&self, n: usize, steps_sampled: u64, rng: &mut ChaCha8Rng) -> Result<SampleBatch, ReplayError>;

    /// Rows stored.
    fn len(&self) -> usize;

    /// Whether nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the stored rows take on the heap.
    fn heap_bytes(&self) -> usize;

    /// Whether sampling follows priorities (then the optimizer gives each
    /// replayed batch's TD errors back through
    /// [`update_priorities`](Self::update_priorities)).
    fn is_prioritized(&self) -> bool {
        false
    }

    /// New priorities for a replayed batch's rows.
    ///
    /// # Errors
    /// As the replay's own.
    fn update_priorities(&mut self, batch: &SampleBatch, td_errors: &[f32]) -> Result<(), ReplayError> {
        let _ = (batch, td_errors);
        Ok(())
    }
}

impl ReplayStore for Replay {
    fn add(&mut self, batch: &SampleBatch, td_errors: Option<&[f32]>) -> Result<(), ReplayError> {
        Replay::add(self, batch, td_errors)
    }

    fn sample(&self, n: usize, steps_sampled: u64, rng: &mut ChaCha8Rng) -> Result<SampleBatch, ReplayError> {
        Replay::sample(self, n, steps_sampled, rng)
    }

    fn len(&self) -> usize {
        Replay::len(self)
    }

    fn heap_bytes(&self) -> usize {
        Replay::heap_bytes(self)
    }

    fn is_prioritized(&self) -> bool {
        Replay::is_prioritized(self)
    }

    fn update_priorities(&mut self, batch: &SampleBatch, td_errors: &[f32]) -> Result<(), ReplayError> {
        Replay::update_priorities(self, batch, td_errors)
    }
}
