//! Truncated backpropagation through time: a batch's rows cut into
//! sequences of at most `max_seq_len` steps and padded to a common length.
//!
//! A recurrent policy's batch is a concatenation of trajectory fragments,
//! each in time order, every row carrying the state it was acted on with
//! ([`fields::STATE_IN`]). The learner cuts each fragment into pieces of at
//! most `max_seq_len` rows, starts each piece from its first row's stored
//! state (the state the behaviour policy had, as RLlib and R2D2's "stored
//! state" do), and unrolls all pieces of a minibatch side by side. Pieces
//! shorter than the longest are padded with copies of their last row,
//! which [`SEQ_MASK`] marks as 0 so that no loss counts them.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::{fields, PolicyError, SampleBatch};
use std::ops::Range;

/// 1.0 on the rows of a padded batch that are real, 0.0 on padding.
pub const SEQ_MASK: &str = "seq_mask";

/// Rows `0..ends.len()` cut into sequences: one ends where `ends` is
/// non-zero (a trajectory fragment's last row) or after `max_len` rows.
pub fn cut(ends: &[f32], max_len: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (t, &end) in ends.iter().enumerate() {
        if end != 0.0 || t + 1 - start == max_len || t + 1 == ends.len() {
            out.push(start..t + 1);
            start = t + 1;
        }
    }
    out
}

/// The sequences shuffled by `seed` and split into groups of about `size`
/// rows (at least one group), for minibatches.
pub fn groups(seqs: &[Range<usize>], size: usize, seed: u64) -> Vec<Vec<Range<usize>>> {
    let rows: usize = seqs.iter().map(Range::len).sum();
    let count = (rows / size.max(1)).clamp(1, seqs.len().max(1));
    let mut order = seqs.to_vec();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    (0..count).map(|i| order[i * order.len() / count..(i + 1) * order.len() / count].to_vec()).collect()
}

/// Sequences padded side by side: `num_seqs × max_len` rows, sequence
/// after sequence.
pub struct Padded {
    /// The rows, with [`SEQ_MASK`], and `ends_field` set on each
    /// sequence's last real row and on every padding row.
    pub batch: SampleBatch,
    /// Sequences.
    pub num_seqs: usize,
    /// Rows of each.
    pub max_len: usize,
    /// [`fields::STATE_IN`] of each sequence's first row.
    pub initial_state: Vec<f32>,
}

/// Pads `seqs` of `batch`. `ends_field` (a trajectory-end column the
/// losses read, if the batch has it) is rewritten to mark where each
/// sequence's real rows end, so a loss over sequences treats every piece
/// as a fragment that bootstraps at its end.
///
/// # Errors
/// A batch without [`fields::STATE_IN`], or no sequences.
pub fn pad(batch: &SampleBatch, seqs: &[Range<usize>], ends_field: &str) -> Result<Padded, PolicyError> {
    let max_len = seqs.iter().map(Range::len).max().ok_or_else(|| PolicyError::Other("no sequences to pad".into()))?;
    let state = batch.f32(fields::STATE_IN)?;
    let width = state.len() / batch.len().max(1);
    let mut rows = Vec::with_capacity(seqs.len() * max_len);
    let mut mask = Vec::with_capacity(seqs.len() * max_len);
    let mut ends = Vec::with_capacity(seqs.len() * max_len);
    let mut initial_state = Vec::with_capacity(seqs.len() * width);
    for seq in seqs {
        initial_state.extend_from_slice(&state[seq.start * width..(seq.start + 1) * width]);
        for t in 0..max_len {
            let real = t < seq.len();
            rows.push(if real { seq.start + t } else { seq.end - 1 });
            mask.push(if real { 1.0 } else { 0.0 });
            ends.push(if t + 1 >= seq.len() { 1.0 } else { 0.0 });
        }
    }
    let mut padded = batch.gather(&rows);
    padded.insert_f32(SEQ_MASK, mask, 1)?;
    if padded.contains(ends_field) {
        padded.insert_f32(ends_field, ends, 1)?;
    }
    Ok(Padded { batch: padded, num_seqs: seqs.len(), max_len, initial_state })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_end_at_fragment_ends_and_at_max_len() {
        let ends = [0., 0., 0., 0., 0., 1., 0., 1., 0., 0.];
        assert_eq!(cut(&ends, 3), vec![0..3, 3..6, 6..8, 8..10]);
        assert_eq!(cut(&ends, 100), vec![0..6, 6..8, 8..10]);
        let g = groups(&cut(&ends, 3), 4, 7);
        assert_eq!(g.len(), 2);
        let mut all: Vec<_> = g.concat();
        all.sort_by_key(|r| r.start);
        assert_eq!(all, cut(&ends, 3), "every sequence once");
    }

    #[test]
    fn padding_repeats_the_last_row_masked_and_marks_ends() {
        let mut b = SampleBatch::new();
        b.insert_f32(fields::REWARDS, vec![1., 2., 3., 4., 5.], 1).unwrap();
        b.insert_f32(fields::STATE_IN, (0..10).map(|i| i as f32).collect(), 2).unwrap();
        b.insert_f32("ends", vec![0., 0., 1., 0., 1.], 1).unwrap();
        let p = pad(&b, &[0..3, 3..5], "ends").unwrap();
        assert_eq!((p.num_seqs, p.max_len), (2, 3));
        assert_eq!(p.batch.f32(fields::REWARDS).unwrap(), &[1., 2., 3., 4., 5., 5.]);
        assert_eq!(p.batch.f32(SEQ_MASK).unwrap(), &[1., 1., 1., 1., 1., 0.]);
        assert_eq!(p.batch.f32("ends").unwrap(), &[0., 0., 1., 0., 1., 1.]);
        assert_eq!(p.initial_state, vec![0., 1., 6., 7.]);
    }
}
