//! Synthetic Atari transitions for measuring replay memory: what DQN's
//! evaluators hand the replay on Atari (84 × 84 frames, stacks of four,
//! channels last, n-step `new_obs`), from several env
//! copies at once, with random frames so that no two frames are alike.
//! Observations are bytes (`Column::U8`), as evaluators hand them on.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::sample_batch::fields;
use rlx::SampleBatch;
use std::collections::VecDeque;

/// Side of a preprocessed Atari frame.
pub const SIDE: usize = 84;
/// Frames per stacked observation.
pub const STACK: usize = 4;

/// Env copies stepping side by side, each a window of its latest frames.
pub struct AtariStream {
    copies: Vec<VecDeque<Vec<u8>>>,
    n_step: usize,
    rng: ChaCha8Rng,
}

impl AtariStream {
    /// `copies` env copies whose transitions bootstrap `n_step` frames on.
    pub fn new(copies: usize, n_step: usize, seed: u64) -> Self {
        Self { copies: vec![VecDeque::new(); copies], n_step, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// The next `rows` transitions, the copies taking turns; an episode
    /// ends after 1 to 2,000 frames and the next starts with its first
    /// frame repeated, as Gymnasium's frame stack pads.
    pub fn batch(&mut self, rows: usize) -> SampleBatch {
        let values = SIDE * SIDE * STACK;
        let (mut obs, mut new_obs) = (Vec::with_capacity(rows * values), Vec::with_capacity(rows * values));
        let mut made = 0;
        while made < rows {
            for c in 0..self.copies.len() {
                if made == rows {
                    break;
                }
                if self.copies[c].is_empty() || self.rng.gen_ratio(1, 1000) {
                    let first = self.frame();
                    self.copies[c] = std::iter::repeat_n(first, STACK).collect();
                }
                let frame = self.frame();
                let window = &mut self.copies[c];
                window.push_back(frame);
                if window.len() > STACK + self.n_step {
                    window.pop_front();
                }
                if window.len() == STACK + self.n_step {
                    stack(window.range(..STACK), &mut obs);
                    stack(window.range(self.n_step..), &mut new_obs);
                    made += 1;
                }
            }
        }
        let mut b = SampleBatch::new();
        b.insert_u8(fields::OBS, obs, values).unwrap();
        b.insert_u8(fields::NEW_OBS, new_obs, values).unwrap();
        b.insert_i64(fields::ACTIONS, (0..rows).map(|i| (i % 4) as i64).collect(), 1).unwrap();
        for field in [fields::REWARDS, fields::TERMINATEDS, fields::TRUNCATEDS, "n_step_discounts"] {
            b.insert_f32(field, vec![0.0; rows], 1).unwrap();
        }
        b
    }

    fn frame(&mut self) -> Vec<u8> {
        let mut f = vec![0u8; SIDE * SIDE];
        self.rng.fill(&mut f[..]);
        f
    }
}

/// Appends the frames as one channels-last observation.
fn stack<'a>(frames: impl Iterator<Item = &'a Vec<u8>>, out: &mut Vec<u8>) {
    let frames: Vec<&Vec<u8>> = frames.collect();
    for p in 0..SIDE * SIDE {
        out.extend(frames.iter().map(|f| f[p]));
    }
}
