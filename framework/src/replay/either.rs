//! [`Replay`]: a uniform or a prioritized buffer behind one interface, so
//! an optimizer (or an Ape-X replay shard) holds either without caring
//! which.

use super::{FrameLayout, LinearSchedule, PrioritizedReplayBuffer, ReplayBuffer, ReplayError, BATCH_INDEXES};
use crate::sample_batch::SampleBatch;
use rand::Rng;

/// Prioritized replay's settings (Schaul et al. 2016).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrioritizedReplayConfig {
    /// Priority exponent α (0 is uniform).
    pub alpha: f64,
    /// Importance-weight exponent β over env steps sampled, annealed
    /// towards 1.
    pub beta: LinearSchedule,
    /// Added to every |TD error| so no transition is never replayed.
    pub eps: f64,
}

/// Either buffer.
#[derive(Clone, Debug)]
pub enum Replay {
    /// Uniform sampling.
    Uniform(ReplayBuffer),
    /// Proportional prioritized sampling with its β schedule.
    Prioritized(PrioritizedReplayBuffer, LinearSchedule),
}

impl Replay {
    /// An empty buffer for `capacity` transitions, prioritized when
    /// `prioritized` is given.
    ///
    /// # Errors
    /// A capacity of 0 or parameters out of range.
    pub fn new(capacity: usize, prioritized: Option<PrioritizedReplayConfig>) -> Result<Self, ReplayError> {
        Ok(match prioritized {
            None => Replay::Uniform(ReplayBuffer::new(capacity)?),
            Some(p) => {
                for (what, b) in [("start", p.beta.start), ("end", p.beta.end)] {
                    if !(0.0..=1.0).contains(&b) {
                        return Err(ReplayError::Invalid(format!("beta {what} must be in [0, 1], got {b}")));
                    }
                }
                Replay::Prioritized(PrioritizedReplayBuffer::new(capacity, p.alpha, p.eps)?, p.beta)
            }
        })
    }

    /// Stores image observations as shared frames of `layout`
    /// ([`ReplayBuffer::share_frames`]).
    ///
    /// # Errors
    /// Once something is stored.
    pub fn share_frames(&mut self, layout: FrameLayout) -> Result<(), ReplayError> {
        match self {
            Replay::Uniform(b) => b.share_frames(layout),
            Replay::Prioritized(b, _) => b.share_frames(layout),
        }
    }

    /// Bytes the stored transitions take on the heap.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Replay::Uniform(b) => b.heap_bytes(),
            Replay::Prioritized(b, _) => b.heap_bytes(),
        }
    }

    /// Transitions stored.
    pub fn len(&self) -> usize {
        match self {
            Replay::Uniform(b) => b.len(),
            Replay::Prioritized(b, _) => b.len(),
        }
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether sampling follows priorities.
    pub fn is_prioritized(&self) -> bool {
        matches!(self, Replay::Prioritized(..))
    }

    /// Stores `batch`; `td_errors` (one per row) set initial priorities in
    /// a prioritized buffer and are ignored by a uniform one.
    ///
    /// # Errors
    /// As [`ReplayBuffer::add`] and [`PrioritizedReplayBuffer::add`].
    pub fn add(&mut self, batch: &SampleBatch, td_errors: Option<&[f32]>) -> Result<(), ReplayError> {
        match self {
            Replay::Uniform(b) => b.add(batch).map(drop),
            Replay::Prioritized(b, _) => b.add(batch, td_errors).map(drop),
        }
    }

    /// `n` transitions with `batch_indexes`, and with importance `weights`
    /// when prioritized (β taken at `steps_sampled`).
    ///
    /// # Errors
    /// [`ReplayError::Empty`].
    pub fn sample(&self, n: usize, steps_sampled: u64, rng: &mut impl Rng) -> Result<SampleBatch, ReplayError> {
        match self {
            Replay::Uniform(b) => b.sample(n, rng),
            Replay::Prioritized(b, beta) => b.sample(n, beta.value(steps_sampled), rng),
        }
    }

    /// New priorities for the rows of a replayed `batch` from their TD
    /// errors; a uniform buffer ignores them.
    ///
    /// # Errors
    /// A batch without `batch_indexes`, or as
    /// [`PrioritizedReplayBuffer::update_priorities`].
    pub fn update_priorities(&mut self, batch: &SampleBatch, td_errors: &[f32]) -> Result<(), ReplayError> {
        match self {
            Replay::Uniform(_) => Ok(()),
            Replay::Prioritized(..) => self.update_priorities_at(batch.i64(BATCH_INDEXES)?, td_errors),
        }
    }

    /// New priorities for the slots `batch_indexes` (a replayed batch's
    /// column) from their TD errors; a uniform buffer ignores them.
    ///
    /// # Errors
    /// As [`PrioritizedReplayBuffer::update_priorities`].
    pub fn update_priorities_at(&mut self, batch_indexes: &[i64], td_errors: &[f32]) -> Result<(), ReplayError> {
        match self {
            Replay::Uniform(_) => Ok(()),
            Replay::Prioritized(b, _) => b.update_priorities(batch_indexes, td_errors),
        }
    }
}
