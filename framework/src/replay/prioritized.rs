//! [`PrioritizedReplayBuffer`]: proportional prioritized experience replay
//! (Schaul, Quan, Antonoglou & Silver, "Prioritized Experience Replay",
//! ICLR 2016).
//!
//! Transition `i` has priority `p_i = (|δ_i| + ε)^α` and is replayed with
//! probability `P(i) = p_i / Σ_k p_k`. The bias this introduces is corrected
//! by importance weights `w_i = (N · P(i))^(−β) / max_j w_j`, with β annealed
//! towards 1 over training ([`LinearSchedule`]). New transitions get the
//! largest priority seen so far, so each is replayed at least once soon,
//! unless the caller supplies initial priorities (Ape-X's evaluators do).

use super::{ReplayBuffer, ReplayError, SumTree, WEIGHTS};
use crate::sample_batch::SampleBatch;
use rand::Rng;

/// A value moving linearly from `start` to `end` over `steps` steps, then
/// staying at `end` (β annealing, ε-greedy exploration).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearSchedule {
    /// Value at step 0.
    pub start: f64,
    /// Value from `steps` on.
    pub end: f64,
    /// Steps to get there.
    pub steps: u64,
}

impl LinearSchedule {
    /// The value at step `t`.
    pub fn value(&self, t: u64) -> f64 {
        let frac = if self.steps == 0 { 1.0 } else { (t as f64 / self.steps as f64).min(1.0) };
        self.start + (self.end - self.start) * frac
    }
}

/// A [`ReplayBuffer`] sampled in proportion to priorities.
#[derive(Clone, Debug)]
pub struct PrioritizedReplayBuffer {
    buffer: ReplayBuffer,
    tree: SumTree,
    alpha: f64,
    eps: f64,
    /// Largest `|δ| + ε` seen, before the exponent.
    max_priority: f64,
}

impl PrioritizedReplayBuffer {
    /// An empty buffer for `capacity` transitions with priority exponent
    /// `alpha` (0 is uniform replay) and `eps` added to every |TD error|.
    ///
    /// # Errors
    /// A capacity of 0, `alpha` < 0, or `eps` < 0 (any of them non-finite).
    pub fn new(capacity: usize, alpha: f64, eps: f64) -> Result<Self, ReplayError> {
        if !(alpha >= 0.0 && alpha.is_finite()) || !(eps >= 0.0 && eps.is_finite()) {
            return Err(ReplayError::Invalid(format!("alpha and eps must be finite and >= 0, got {alpha} and {eps}")));
        }
        Ok(Self { buffer: ReplayBuffer::new(capacity)?, tree: SumTree::new(capacity), alpha, eps, max_priority: 1.0 })
    }

    /// The stored transitions.
    pub fn buffer(&self) -> &ReplayBuffer {
        &self.buffer
    }

    /// Transitions stored.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Slot `i`'s sampling priority `p_i` (after the exponent).
    ///
    /// # Panics
    /// If `i` is not a slot of the buffer.
    pub fn priority(&self, i: usize) -> f64 {
        self.tree.get(i)
    }

    /// As [`ReplayBuffer::share_frames`].
    ///
    /// # Errors
    /// As [`ReplayBuffer::share_frames`].
    pub fn share_frames(&mut self, layout: super::FrameLayout) -> Result<(), ReplayError> {
        self.buffer.share_frames(layout)
    }

    /// As [`ReplayBuffer::heap_bytes`], plus the sum tree's.
    pub fn heap_bytes(&self) -> usize {
        self.buffer.heap_bytes() + self.tree.heap_bytes()
    }

    /// Stores every row of `batch`. With `td_errors` (one per row) each
    /// row's priority comes from its error; without, from the largest seen.
    ///
    /// # Errors
    /// Columns that differ from the stored ones, a `td_errors` of the wrong
    /// length, or a non-finite error; nothing is stored then.
    pub fn add(&mut self, batch: &SampleBatch, td_errors: Option<&[f32]>) -> Result<Vec<usize>, ReplayError> {
        if let Some(errors) = td_errors {
            if errors.len() != batch.len() {
                return Err(ReplayError::Invalid(format!(
                    "{} initial TD errors for a batch of {} rows",
                    errors.len(),
                    batch.len()
                )));
            }
        }
        // Every priority is checked before anything is stored.
        let priorities = td_errors
            .map(|errors| {
                errors
                    .iter()
                    .enumerate()
                    .map(|(row, &e)| self.priority_of(row as i64, e))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let slots = self.buffer.add(batch)?;
        for (row, &slot) in slots.iter().enumerate() {
            let (raw, p) = match &priorities {
                Some(ps) => ps[row],
                None => (self.max_priority, self.max_priority.powf(self.alpha)),
            };
            self.max_priority = self.max_priority.max(raw);
            self.tree.set(slot, p);
        }
        Ok(slots)
    }

    /// `(|δ| + ε, (|δ| + ε)^α)`, or an error naming `index` if either is
    /// not a finite number.
    fn priority_of(&self, index: i64, td_error: f32) -> Result<(f64, f64), ReplayError> {
        let raw = td_error.abs() as f64 + self.eps;
        let p = raw.powf(self.alpha);
        if raw.is_finite() && p.is_finite() {
            Ok((raw, p))
        } else {
            Err(ReplayError::NonFinite { index, value: td_error })
        }
    }

    /// `n` transitions drawn in proportion to priority (stratified: one
    /// from each of `n` equal slices of the total priority, as in the
    /// paper), with `batch_indexes` and importance `weights` for exponent
    /// `beta`.
    ///
    /// # Errors
    /// [`ReplayError::Empty`] if nothing is stored or every priority is 0;
    /// `beta` outside [0, 1].
    pub fn sample(&self, n: usize, beta: f64, rng: &mut impl Rng) -> Result<SampleBatch, ReplayError> {
        if !(0.0..=1.0).contains(&beta) {
            return Err(ReplayError::Invalid(format!("beta must be in [0, 1], got {beta}")));
        }
        let (total, Some(min)) = (self.tree.total(), self.tree.min_positive()) else {
            return Err(ReplayError::Empty);
        };
        let segment = total / n.max(1) as f64;
        let slots = (0..n)
            .map(|k| self.tree.find((k as f64 + rng.gen::<f64>()) * segment).ok_or(ReplayError::Empty))
            .collect::<Result<Vec<_>, _>>()?;
        // w_i = (N·P(i))^−β normalized by the largest possible weight, that
        // of the least likely transition: w_i = (p_i / p_min)^−β.
        let weights = slots.iter().map(|&s| (self.tree.get(s) / min).powf(-beta) as f32).collect();
        let mut out = self.buffer.gather(&slots);
        out.insert_f32(WEIGHTS, weights, 1).expect("one weight per sampled row");
        Ok(out)
    }

    /// Sets the priorities of replayed slots from their new TD errors.
    ///
    /// # Errors
    /// A slot that holds nothing or a non-finite error; the earlier updates
    /// in the call are kept.
    pub fn update_priorities(&mut self, batch_indexes: &[i64], td_errors: &[f32]) -> Result<(), ReplayError> {
        if batch_indexes.len() != td_errors.len() {
            return Err(ReplayError::Invalid(format!(
                "{} slots but {} TD errors",
                batch_indexes.len(),
                td_errors.len()
            )));
        }
        for (&index, &value) in batch_indexes.iter().zip(td_errors) {
            if index < 0 || index as usize >= self.len() {
                return Err(ReplayError::NoSuchSlot { index, len: self.len() });
            }
            let (raw, p) = self.priority_of(index, value)?;
            self.max_priority = self.max_priority.max(raw);
            self.tree.set(index as usize, p);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rows;
    use super::super::BATCH_INDEXES;
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn replays_in_proportion_with_the_papers_weights() {
        let (alpha, eps, beta) = (0.6, 0.01, 0.4);
        let mut buf = PrioritizedReplayBuffer::new(8, alpha, eps).unwrap();
        let errors = [0.5f32, 2.0, 0.0, 1.0, 4.0];
        buf.add(&rows(0, 5), Some(&errors)).unwrap();
        let p: Vec<f64> = errors.iter().map(|&e| (e.abs() as f64 + eps).powf(alpha)).collect();
        let total: f64 = p.iter().sum();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let draws = 100_000;
        let s = buf.sample(draws, beta, &mut rng).unwrap();
        let mut counts = [0usize; 5];
        let n = p.len() as f64;
        let max_w = p.iter().map(|&pi| (n * pi / total).powf(-beta)).fold(0.0, f64::max);
        for ((&slot, &w), &a) in
            s.i64(BATCH_INDEXES).unwrap().iter().zip(s.f32(WEIGHTS).unwrap()).zip(s.i64("actions").unwrap())
        {
            assert_eq!(slot, a);
            let i = slot as usize;
            counts[i] += 1;
            // The paper's formula, brute force.
            let expected = (n * p[i] / total).powf(-beta) / max_w;
            assert!((w as f64 - expected).abs() < 1e-5, "slot {i}: weight {w} vs {expected}");
        }
        for (i, &c) in counts.iter().enumerate() {
            let expected = p[i] / total;
            assert!((c as f64 / draws as f64 - expected).abs() < 0.01, "slot {i}: {counts:?} vs {p:?}");
        }
    }

    #[test]
    fn updates_new_transitions_and_wraparound() {
        let mut buf = PrioritizedReplayBuffer::new(4, 1.0, 0.0).unwrap();
        buf.add(&rows(0, 4), None).unwrap();
        assert!((0..4).all(|i| buf.priority(i) == 1.0), "new transitions get the max priority");
        buf.update_priorities(&[0, 1, 2, 3], &[0.0, 0.0, 3.0, -1.0]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let s = buf.sample(1000, 1.0, &mut rng).unwrap();
        assert!(s.i64(BATCH_INDEXES).unwrap().iter().all(|&i| i == 2 || i == 3), "zero priority replayed");
        // Overwriting slot 0 gives the new row the largest priority seen (3).
        assert_eq!(buf.add(&rows(4, 5), None).unwrap(), vec![0]);
        assert_eq!(buf.priority(0), 3.0);
        // Bad updates are errors that name the slot.
        assert_eq!(buf.update_priorities(&[7], &[1.0]).unwrap_err(), ReplayError::NoSuchSlot { index: 7, len: 4 });
        assert!(matches!(buf.update_priorities(&[1], &[f32::NAN]), Err(ReplayError::NonFinite { index: 1, .. })));
        assert!(buf.sample(4, 1.5, &mut rng).is_err());
        assert!(buf.add(&rows(5, 7), Some(&[1.0])).is_err());
        assert!(PrioritizedReplayBuffer::new(4, -1.0, 0.0).is_err());
    }

    #[test]
    fn all_zero_priorities_cannot_be_sampled() {
        let mut buf = PrioritizedReplayBuffer::new(4, 1.0, 0.0).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(buf.sample(2, 0.5, &mut rng).unwrap_err(), ReplayError::Empty);
        buf.add(&rows(0, 2), Some(&[0.0, 0.0])).unwrap();
        assert_eq!(buf.sample(2, 0.5, &mut rng).unwrap_err(), ReplayError::Empty);
    }

    #[test]
    fn linear_schedule() {
        let s = LinearSchedule { start: 0.4, end: 1.0, steps: 100 };
        assert_eq!(s.value(0), 0.4);
        assert!((s.value(50) - 0.7).abs() < 1e-12);
        assert_eq!(s.value(1000), 1.0);
        assert_eq!(LinearSchedule { start: 0.0, end: 1.0, steps: 0 }.value(0), 1.0);
    }
}
