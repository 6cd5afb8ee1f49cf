//! Rows for learning, drawn from a dataset's episodes: streamed, shuffled
//! within a window, over and over.

use super::{reader::Episodes, ExperienceError, ExperienceReader};
use crate::sample_batch::SampleBatch;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What an evaluator reads instead of stepping its envs (`input`).
///
/// Each pass over the dataset (an epoch) reads its files in a new random
/// order; their episodes are completed by the caller's postprocessing
/// (with the learning policy, as RLlib's `postprocess_inputs`: n-step
/// returns, advantages), then gathered into a window of at least `window`
/// rows whose order is shuffled; batches are taken from the window in that
/// order, and the window refilled when it is used up. Memory holds one
/// window (plus one episode, or one piece of a long one), whatever the
/// dataset's size.
pub struct InputSource {
    reader: ExperienceReader,
    episodes: Episodes,
    window: usize,
    rows: SampleBatch,
    next: usize,
    rng: ChaCha8Rng,
    epochs: u64,
}

impl InputSource {
    /// Reads `reader`'s files with a shuffle window of `window` rows,
    /// shuffled by `seed`.
    pub fn new(reader: ExperienceReader, window: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let episodes = Self::pass(&reader, &mut rng);
        Self { reader, episodes, window: window.max(1), rows: SampleBatch::new(), next: 0, rng, epochs: 0 }
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
        while taken < n {
            if self.next >= self.rows.len() {
                self.refill(&mut postprocess)?;
            }
            let k = (n - taken).min(self.rows.len() - self.next);
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

    /// Reads episodes until the window holds `window` rows (or one pass
    /// ends), then shuffles their order.
    fn refill<E: From<ExperienceError>>(
        &mut self,
        postprocess: &mut impl FnMut(&mut SampleBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut episodes = Vec::new();
        let (mut rows, mut restarted) = (0, false);
        while rows < self.window {
            match self.episodes.next() {
                Some(episode) => {
                    let mut batch = episode?.batch;
                    postprocess(&mut batch)?;
                    rows += batch.len();
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
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.shuffle(&mut self.rng);
        self.rows = all.gather(&order);
        self.next = 0;
        Ok(())
    }

    fn malformed(&self, message: String) -> ExperienceError {
        ExperienceError::Malformed { file: self.reader.dir().to_path_buf(), line: None, message }
    }
}
