//! Rows for learning, drawn from a dataset's episodes: streamed, shuffled
//! within a window, over and over.

use super::{reader::Episodes, ExperienceError, ExperienceReader};
use crate::sample_batch::SampleBatch;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A shuffle window stops growing at this many bytes of rows, whatever its
/// size in rows: 10,000 rows of CartPole are 0.6 MB, of 84×84×4 frames
/// (with `new_obs`) 565 MB.
pub const MAX_WINDOW_BYTES: usize = 256 << 20;

/// What an evaluator reads instead of stepping its envs (`input`).
///
/// Each pass over the dataset (an epoch) reads its files in a new random
/// order; their episodes are completed by the caller's postprocessing
/// (with the learning policy, as RLlib's `postprocess_inputs`: n-step
/// returns, advantages), then gathered into a window of at least `window`
/// rows (or [`MAX_WINDOW_BYTES`]) whose order is shuffled; batches are taken from the window in that
/// order, and the window refilled when it is used up. Memory holds at
/// most two windows' rows (while a window is shuffled) plus one episode,
/// or one piece of a long one, whatever the dataset's size.
///
/// Rows of the second and later passes are told apart
/// ([`repeated_rows`](Self::repeated_rows)): a replay buffer that still
/// holds the first pass whole need not store them again.
pub struct InputSource {
    reader: ExperienceReader,
    episodes: Episodes,
    window: usize,
    max_window_bytes: usize,
    rows: SampleBatch,
    next: usize,
    rng: ChaCha8Rng,
    epochs: u64,
    /// The pass the window's rows were read in (0: the first).
    window_pass: u64,
    /// Of the rows the last [`next_rows`](Self::next_rows) gave, those of
    /// a pass after the first.
    repeated: usize,
}

impl InputSource {
    /// Reads `reader`'s files with a shuffle window of `window` rows,
    /// shuffled by `seed`.
    pub fn new(reader: ExperienceReader, window: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let episodes = Self::pass(&reader, &mut rng);
        let (window, max_window_bytes) = (window.max(1), MAX_WINDOW_BYTES);
        let rows = SampleBatch::new();
        Self { reader, episodes, window, max_window_bytes, rows, next: 0, rng, epochs: 0, window_pass: 0, repeated: 0 }
    }

    /// A window that stops growing at `bytes` rather than
    /// [`MAX_WINDOW_BYTES`] (it always takes at least one episode).
    pub fn with_max_window_bytes(mut self, bytes: usize) -> Self {
        self.max_window_bytes = bytes;
        self
    }

    /// One pass over the files, in a random order.
    fn pass(reader: &ExperienceReader, rng: &mut ChaCha8Rng) -> Episodes {
        let mut files = reader.files().to_vec();
        files.shuffle(rng);
        reader.episodes_of(files)
    }

    /// Whole passes over the files so far.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// How many of the rows the last [`next_rows`](Self::next_rows) gave
    /// were read in a pass after the first: always its last rows (a call
    /// that crosses into the next pass gives the first pass's rows
    /// first), each one a row the dataset gave before.
    pub fn repeated_rows(&self) -> usize {
        self.repeated
    }

    /// The next `n` rows, each episode completed by `postprocess` when it
    /// is read; past the end of a pass, the next pass's rows.
    ///
    /// # Errors
    /// A file that cannot be read or holds a malformed line; an error of
    /// `postprocess`, or a dataset with no rows at all.
    pub fn next_rows<E: From<ExperienceError>>(
        &mut self,
        n: usize,
        mut postprocess: impl FnMut(&mut SampleBatch) -> Result<(), E>,
    ) -> Result<SampleBatch, E> {
        let mut out: Option<SampleBatch> = None;
        let mut taken = 0;
        self.repeated = 0;
        while taken < n {
            if self.next >= self.rows.len() {
                self.refill(&mut postprocess)?;
            }
            let k = (n - taken).min(self.rows.len() - self.next);
            if self.window_pass > 0 {
                self.repeated += k;
            }
            let piece = self.rows.slice(self.next..self.next + k);
            self.next += k;
            taken += k;
            match &mut out {
                Some(out) => out.append(&piece).map_err(|e| self.malformed(e.to_string()))?,
                None => out = Some(piece),
            }
        }
        Ok(out.unwrap_or_default())
    }

    /// Reads episodes until the window holds `window` rows or its bytes
    /// reach the cap (or one pass ends), then shuffles their order.
    fn refill<E: From<ExperienceError>>(
        &mut self,
        postprocess: &mut impl FnMut(&mut SampleBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        // The old window is used up: free it before reading the next, so
        // that memory never holds more than two windows' rows (the
        // episodes, then their shuffled copy).
        self.rows = SampleBatch::new();
        let mut episodes = Vec::new();
        let (mut rows, mut bytes, mut restarted) = (0, 0, false);
        while rows < self.window && bytes < self.max_window_bytes {
            match self.episodes.next() {
                Some(episode) => {
                    let mut batch = episode?.batch;
                    postprocess(&mut batch)?;
                    rows += batch.len();
                    bytes += batch.size_bytes();
                    episodes.push(batch);
                }
                None if restarted || rows > 0 => break,
                None => {
                    // One pass ended: start the next.
                    self.epochs += 1;
                    self.episodes = Self::pass(&self.reader, &mut self.rng);
                    restarted = true;
                }
            }
        }
        if rows == 0 {
            let files = self.reader.files().len();
            return Err(self.malformed(format!("its {files} file(s) hold no rows")).into());
        }
        let all = SampleBatch::concat(&episodes).map_err(|e| self.malformed(e.to_string()))?;
        drop(episodes);
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.shuffle(&mut self.rng);
        self.rows = all.gather(&order);
        self.next = 0;
        // A window never mixes passes: a pass's end closes it.
        self.window_pass = self.epochs;
        Ok(())
    }

    fn malformed(&self, message: String) -> ExperienceError {
        ExperienceError::Malformed { file: self.reader.dir().to_path_buf(), line: None, message }
    }
}

/// Where an evaluator's batches come from: datasets, and the env, each
/// with a weight (RLlib's `input` with probabilities). Each
/// [`pick`](Self::pick) draws one source with those odds, from a seeded
/// generator.
pub struct InputMix {
    /// `None` is the env.
    sources: Vec<(f64, Option<InputSource>)>,
    rng: ChaCha8Rng,
}

impl InputMix {
    /// Only `source`.
    pub fn only(source: InputSource) -> Self {
        Self::new(vec![(1.0, Some(source))], 0)
    }

    /// The sources by weight (`None` for the env), drawn by `seed`.
    /// Weights are relative: `[1, 3]` is a quarter and three quarters.
    pub fn new(sources: Vec<(f64, Option<InputSource>)>, seed: u64) -> Self {
        Self { sources, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// Whether some batches come from the env.
    pub fn has_env(&self) -> bool {
        self.sources.iter().any(|(w, s)| *w > 0.0 && s.is_none())
    }

    /// The dataset the next batch is read from, or `None` for the env.
    pub fn pick(&mut self) -> Option<&mut InputSource> {
        let i = self.draw();
        self.sources.get_mut(i).and_then(|(_, s)| s.as_mut())
    }

    /// The index of the next source, drawn with the weights' odds.
    fn draw(&mut self) -> usize {
        let total: f64 = self.sources.iter().map(|(w, _)| w).sum();
        let mut u = rand::Rng::gen::<f64>(&mut self.rng) * total;
        for (i, (w, _)) in self.sources.iter().enumerate() {
            if u < *w {
                return i;
            }
            u -= w;
        }
        // Rounding past the end: the last source with a weight.
        self.sources.iter().rposition(|(w, _)| *w > 0.0).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_drawn_with_their_weights() {
        let mut mix = InputMix::new(vec![(1.0, None), (0.0, None), (3.0, None)], 7);
        let mut counts = [0usize; 3];
        for _ in 0..4000 {
            counts[mix.draw()] += 1;
        }
        assert_eq!(counts[1], 0, "a weight of 0 is never drawn");
        assert!((900..1100).contains(&counts[0]) && counts[0] + counts[2] == 4000, "1 : 3 over 4,000: {counts:?}");
        assert!(mix.pick().is_none(), "no dataset here: the env");
    }
}
