//! Experience replay for off-policy algorithms: a uniform ring buffer
//! ([`ReplayBuffer`]) and proportional prioritized replay
//! ([`PrioritizedReplayBuffer`], Schaul et al. 2016) on a [`SumTree`].
//!
//! Both store transitions as one preallocated [`SampleBatch`] whose columns
//! are the fields of the first batch added: adding copies rows into slots,
//! with no allocation per transition, and sampling gathers rows into a new
//! batch with a `batch_indexes` column naming the slots (prioritized replay
//! also adds importance `weights`). n-step returns are a postprocessing step
//! ([`crate::postprocessing::n_step_returns`]) applied before adding.
//!
//! With [`ReplayBuffer::share_frames`], image observations are stored as
//! bytes, each distinct frame once ([`frames`]).

mod either;
pub mod frames;
mod prioritized;
mod shard;
mod store;
mod sum_tree;

pub use either::{PrioritizedReplayConfig, Replay};
pub use frames::FrameLayout;
pub use prioritized::{LinearSchedule, PrioritizedReplayBuffer};
pub use shard::{ReplayShard, ReplayShards, ShardArgs, ShardMsg};
pub use store::ReplayStore;
pub use sum_tree::SumTree;

use crate::sample_batch::{fields, BatchError, SampleBatch};
use frames::{FrameStore, Which};
use rand::Rng;

/// The slot of every replayed row, as an `i64` column.
pub const BATCH_INDEXES: &str = "batch_indexes";
/// Importance-sampling weight of every row replayed by prioritized replay.
pub const WEIGHTS: &str = "weights";
/// A sampled row's TD error under the weights that sampled it, computed by
/// the evaluator (Ape-X's worker-side prioritization): the initial priority
/// a replay shard stores it with.
pub const TD_ERRORS: &str = "td_errors";

/// Removes a batch's [`TD_ERRORS`] column and returns its values (the
/// initial priorities of its rows), if it has one.
///
/// # Errors
/// A `td_errors` column that is not one `f32` per row.
pub fn take_td_errors(batch: &mut SampleBatch) -> Result<Option<Vec<f32>>, ReplayError> {
    match batch.remove(TD_ERRORS) {
        None => Ok(None),
        Some(crate::sample_batch::Column::F32 { data, width: 1 }) => Ok(Some(data)),
        Some(other) => Err(ReplayError::Invalid(format!(
            "the `{TD_ERRORS}` column must hold one f32 per row, got a column of width {}",
            other.width()
        ))),
    }
}

/// Why a replay operation failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ReplayError {
    /// Sampling from a buffer that holds nothing.
    #[error("cannot sample from an empty replay buffer")]
    Empty,
    /// A parameter outside its range.
    #[error("replay buffer: {0}")]
    Invalid(String),
    /// A batch whose columns differ from the stored ones.
    #[error("cannot store this batch: {0}")]
    Batch(#[from] BatchError),
    /// A priority update for a slot that holds nothing.
    #[error("priority update for slot {index}, but the buffer holds {len} transitions")]
    NoSuchSlot {
        /// The slot.
        index: i64,
        /// Transitions stored.
        len: usize,
    },
    /// A replay shard actor failed more often than its restart budget
    /// allows, or could not be restarted.
    #[error("replay shard {shard} is lost: {reason}")]
    ShardLost {
        /// The shard's index.
        shard: usize,
        /// Why it could not be brought back.
        reason: String,
    },
    /// A TD error whose priority is NaN or infinite.
    #[error("TD error {value} of row or slot {index} gives no finite priority")]
    NonFinite {
        /// The row of the added batch, or the slot being updated.
        index: i64,
        /// The offending value.
        value: f32,
    },
}

/// A ring buffer of the last `capacity` transitions, sampled uniformly.
#[derive(Clone, Debug)]
pub struct ReplayBuffer {
    capacity: usize,
    storage: SampleBatch,
    /// The slot the next row goes to.
    next: usize,
    added: u64,
    /// With frame sharing, `obs` and `new_obs` live here and not in
    /// `storage`.
    frames: Option<FrameStore>,
}

impl ReplayBuffer {
    /// An empty buffer for `capacity` transitions.
    ///
    /// # Errors
    /// A capacity of 0.
    pub fn new(capacity: usize) -> Result<Self, ReplayError> {
        if capacity == 0 {
            return Err(ReplayError::Invalid("capacity must be >= 1".into()));
        }
        Ok(Self { capacity, storage: SampleBatch::new(), next: 0, added: 0, frames: None })
    }

    /// Stores the `obs` and `new_obs` columns from now on as bytes of
    /// `layout`'s images, each distinct plane once ([`frames`]); they are
    /// rebuilt exactly when sampled. Every row added must then hold images
    /// of `layout` with byte values (`b / 255`).
    ///
    /// # Errors
    /// [`ReplayError::Invalid`] once something is stored, or for a layout
    /// with a side of 0.
    pub fn share_frames(&mut self, layout: FrameLayout) -> Result<(), ReplayError> {
        if !self.is_empty() {
            return Err(ReplayError::Invalid("frame sharing must be set up before anything is stored".into()));
        }
        if layout.values() == 0 {
            return Err(ReplayError::Invalid(format!("frame sharing needs images of at least 1×1×1, got {layout:?}")));
        }
        self.frames = Some(FrameStore::new(layout, self.capacity));
        Ok(())
    }

    /// Bytes the stored transitions take on the heap: the columns' values
    /// in use (their room for the whole capacity is reserved up front, and
    /// untouched until filled), and with frame sharing the frame store.
    pub fn heap_bytes(&self) -> usize {
        self.storage.size_bytes() + self.frames.as_ref().map_or(0, FrameStore::heap_bytes)
    }

    /// Transitions stored (at most the capacity).
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }

    /// The most transitions it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Transitions ever added, including those since overwritten.
    pub fn num_added(&self) -> u64 {
        self.added
    }

    /// Stores every row of `batch`, overwriting the oldest once full, and
    /// returns the slot each row went to (a batch larger than the capacity
    /// overwrites its own first rows).
    ///
    /// # Errors
    /// [`ReplayError::Batch`] if its columns differ from the stored ones;
    /// nothing is stored then.
    pub fn add(&mut self, batch: &SampleBatch) -> Result<Vec<usize>, ReplayError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let Some(frames) = &self.frames else {
            return self.add_rows(batch);
        };
        // Every image is checked before anything is stored.
        let n = batch.len();
        let obs = frames.encode(fields::OBS, batch.values(fields::OBS)?, n)?;
        let new_obs = frames.encode(fields::NEW_OBS, batch.values(fields::NEW_OBS)?, n)?;
        let mut rest = SampleBatch::new();
        for (field, column) in batch.columns().filter(|(f, _)| *f != fields::OBS && *f != fields::NEW_OBS) {
            rest.insert(field, column.clone())?;
        }
        if rest.is_empty() {
            return Err(ReplayError::Invalid("a batch needs columns besides `obs` and `new_obs`".into()));
        }
        let slots = self.add_rows(&rest)?;
        let (frames, size) = (self.frames.as_mut().expect("checked above"), obs.len() / n);
        for (row, &slot) in slots.iter().enumerate() {
            frames.put(slot, &obs[row * size..(row + 1) * size], &new_obs[row * size..(row + 1) * size]);
        }
        Ok(slots)
    }

    /// [`add`](Self::add) of the columns `storage` keeps.
    fn add_rows(&mut self, batch: &SampleBatch) -> Result<Vec<usize>, ReplayError> {
        if self.storage.fields().next().is_none() {
            self.storage = SampleBatch::with_capacity_like(batch, self.capacity);
        }
        let mut slots = Vec::with_capacity(batch.len());
        let mut row = 0;
        while row < batch.len() {
            let filling = self.storage.len() < self.capacity;
            let room = if filling { self.capacity - self.storage.len() } else { self.capacity - self.next };
            let k = room.min(batch.len() - row);
            if filling {
                self.storage.append_rows(batch, row..row + k)?;
            } else {
                self.storage.overwrite_rows(self.next, batch, row..row + k)?;
            }
            slots.extend(self.next..self.next + k);
            self.next = (self.next + k) % self.capacity;
            row += k;
        }
        self.added += batch.len() as u64;
        Ok(slots)
    }

    /// The rows in `slots`, in order, with a `batch_indexes` column.
    ///
    /// # Panics
    /// If a slot is out of range.
    pub fn gather(&self, slots: &[usize]) -> SampleBatch {
        let mut out = self.storage.gather(slots);
        if let Some(frames) = &self.frames {
            let width = frames.layout().values();
            for (field, which) in [(fields::OBS, Which::Obs), (fields::NEW_OBS, Which::NewObs)] {
                out.insert_u8(field, frames.rows(slots, which), width).expect("one image per gathered row");
            }
        }
        let indexes = slots.iter().map(|&s| s as i64).collect();
        out.insert_i64(BATCH_INDEXES, indexes, 1).expect("one index per gathered row");
        out
    }

    /// `n` transitions drawn uniformly with replacement.
    ///
    /// # Errors
    /// [`ReplayError::Empty`].
    pub fn sample(&self, n: usize, rng: &mut impl Rng) -> Result<SampleBatch, ReplayError> {
        if self.is_empty() {
            return Err(ReplayError::Empty);
        }
        let slots: Vec<usize> = (0..n).map(|_| rng.gen_range(0..self.len())).collect();
        Ok(self.gather(&slots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Rows numbered `from..to`: `obs` = [i, −i], `actions` = i.
    pub(crate) fn rows(from: usize, to: usize) -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_f32("obs", (from..to).flat_map(|i| [i as f32, -(i as f32)]).collect(), 2).unwrap();
        b.insert_i64("actions", (from..to).map(|i| i as i64).collect(), 1).unwrap();
        b
    }

    #[test]
    fn wraps_around_oldest_first() {
        let mut buf = ReplayBuffer::new(10).unwrap();
        assert_eq!(buf.add(&rows(0, 4)).unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(buf.add(&rows(4, 8)).unwrap(), vec![4, 5, 6, 7]);
        // Fills slots 8 and 9, then overwrites the oldest (0 and 1).
        assert_eq!(buf.add(&rows(8, 12)).unwrap(), vec![8, 9, 0, 1]);
        assert_eq!((buf.len(), buf.num_added()), (10, 12));
        let all = buf.gather(&(0..10).collect::<Vec<_>>());
        assert_eq!(all.i64("actions").unwrap(), &[10, 11, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(&all.f32("obs").unwrap()[..4], &[10.0, -10.0, 11.0, -11.0]);
        assert_eq!(all.i64(BATCH_INDEXES).unwrap(), &(0..10).collect::<Vec<i64>>()[..]);
        // A batch larger than the buffer keeps its own last rows.
        let slots = buf.add(&rows(100, 125)).unwrap();
        assert_eq!(slots.len(), 25);
        let mut kept = buf.gather(&(0..10).collect::<Vec<_>>()).i64("actions").unwrap().to_vec();
        kept.sort();
        assert_eq!(kept, (115..125).collect::<Vec<i64>>());
    }

    #[test]
    fn samples_only_stored_rows_uniformly() {
        let mut buf = ReplayBuffer::new(8).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(buf.sample(4, &mut rng).unwrap_err(), ReplayError::Empty);
        buf.add(&rows(0, 5)).unwrap();
        let draws = 50_000;
        let s = buf.sample(draws, &mut rng).unwrap();
        let mut counts = [0usize; 5];
        for (&a, &i) in s.i64("actions").unwrap().iter().zip(s.i64(BATCH_INDEXES).unwrap()) {
            assert_eq!(a, i, "row and slot agree");
            counts[a as usize] += 1;
        }
        for c in counts {
            assert!((c as f64 / draws as f64 - 0.2).abs() < 0.01, "{counts:?}");
        }
    }

    #[test]
    fn rejects_bad_input_and_keeps_what_it_has() {
        assert!(ReplayBuffer::new(0).is_err());
        let mut buf = ReplayBuffer::new(4).unwrap();
        buf.add(&rows(0, 2)).unwrap();
        let mut other = SampleBatch::new();
        other.insert_f32("rewards", vec![1.0], 1).unwrap();
        let err = buf.add(&other).unwrap_err();
        assert!(matches!(err, ReplayError::Batch(_)), "{err}");
        assert_eq!(buf.len(), 2);
        assert_eq!(buf.add(&SampleBatch::new()).unwrap(), Vec::<usize>::new());
    }
}
