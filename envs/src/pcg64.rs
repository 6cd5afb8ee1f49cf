//! NumPy's default generator, reproduced bit for bit: what
//! `np.random.default_rng(seed)` and Gymnasium's `env.np_random` are.
//!
//! Gymnasium seeds an env on `reset(seed=s)` with
//! `np.random.Generator(np.random.PCG64(np.random.SeedSequence(s)))`, and
//! the classic-control envs draw their start states with
//! `Generator.uniform`. With the same three steps here, a native env's
//! `reset(Some(s))` starts exactly where Gymnasium's does, so `CartPole-v1`
//! and `gym:CartPole-v1` play the same episodes for the same seeds.
//!
//! The three steps, as NumPy documents and implements them (NumPy 2.x,
//! `numpy/random/bit_generator.pyx` and `numpy/random/src/pcg64/pcg64.h`):
//!
//! 1. **SeedSequence** hashes the seed's 32-bit words into a pool of four
//!    words, then draws the generator's 128-bit state and increment from it
//!    (O'Neill's seed_seq hash, as NumPy adapted it).
//! 2. **PCG64** is a 128-bit linear congruential generator whose output is
//!    the XSL-RR permutation of the state (O'Neill, "PCG: A Family of
//!    Simple Fast Space-Efficient Statistically Good Algorithms for Random
//!    Number Generation", 2014).
//! 3. **uniform(low, high)** is `low + (high - low) * d`, with `d` the top
//!    53 bits of one 64-bit output scaled to [0, 1).
//!
//! `envs/tests/fixtures/numpy-pcg64.json`, recorded from NumPy by
//! `envs/scripts/record_resets.py`, checks all three.

use serde::{Deserialize, Serialize};

/// PCG64's multiplier, `0x2360ed051fc65da44385df649fccf645`.
const MULTIPLIER: u128 = (2_549_297_995_355_413_924 << 64) | 4_865_540_595_714_422_341;

/// NumPy's `Generator(PCG64(SeedSequence(seed)))`, with the draws the
/// classic-control envs use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcg64 {
    /// The LCG state, as two 64-bit halves (high, low): MessagePack has no
    /// 128-bit integers.
    state: [u64; 2],
    /// The LCG increment (always odd), as two 64-bit halves.
    increment: [u64; 2],
}

impl Pcg64 {
    /// The generator NumPy builds from the non-negative integer `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let words = seed_sequence_state(seed);
        let initial_state = (u128::from(words[0]) << 64) | u128::from(words[1]);
        let stream = (u128::from(words[2]) << 64) | u128::from(words[3]);
        // pcg_setseq_128_srandom_r: the increment selects the stream, and
        // the seed is added between two steps.
        let increment = (stream << 1) | 1;
        let mut rng = Self::from_parts(0, increment);
        rng.advance();
        rng.set_state(rng.state().wrapping_add(initial_state));
        rng.advance();
        rng
    }

    fn from_parts(state: u128, increment: u128) -> Self {
        Self { state: split(state), increment: split(increment) }
    }

    fn state(&self) -> u128 {
        join(self.state)
    }

    fn set_state(&mut self, state: u128) {
        self.state = split(state);
    }

    fn advance(&mut self) {
        let next = self.state().wrapping_mul(MULTIPLIER).wrapping_add(join(self.increment));
        self.set_state(next);
    }

    /// The next 64-bit output (`bit_generator.random_raw()`): step, then
    /// XSL-RR of the new state.
    pub fn next_u64(&mut self) -> u64 {
        self.advance();
        let state = self.state();
        let folded = ((state >> 64) as u64) ^ (state as u64);
        folded.rotate_right((state >> 122) as u32)
    }

    /// The next double in [0, 1) (`Generator.random()`): the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `Generator.uniform(low, high)`: one draw in [low, high).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }
}

fn split(x: u128) -> [u64; 2] {
    [(x >> 64) as u64, x as u64]
}

fn join(halves: [u64; 2]) -> u128 {
    (u128::from(halves[0]) << 64) | u128::from(halves[1])
}

// SeedSequence's constants (NumPy's `bit_generator.pyx`).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// `SeedSequence(seed).generate_state(4, np.uint64)`: the four 64-bit
/// words PCG64 is seeded with.
fn seed_sequence_state(seed: u64) -> [u64; 4] {
    // The seed as 32-bit words, least significant first; 0 is one word.
    let entropy: Vec<u32> = if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };

    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    // The entropy never exceeds the pool (two words at most), so the
    // pool-mixing step that folds in longer entropy never runs.
    let mut pool = [0u32; POOL_SIZE];
    for (i, word) in pool.iter_mut().enumerate() {
        *word = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
    }

    let mut hash_const = INIT_B;
    let mut words = [0u32; 2 * POOL_SIZE];
    for (i, out) in words.iter_mut().enumerate() {
        let mut v = pool[i % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *out = v ^ (v >> XSHIFT);
    }
    // Viewed as little-endian uint64: the lower word comes first.
    std::array::from_fn(|i| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32))
}

#[cfg(test)]
mod tests {
    use super::Pcg64;

    /// `np.random.default_rng(0).bit_generator.random_raw(3)` and
    /// `default_rng(12345).random(2)`, from NumPy 2.4.6 (more values, and
    /// larger seeds, are in the fixture test).
    #[test]
    fn matches_numpy_for_two_seeds() {
        let mut rng = Pcg64::from_seed(0);
        let raw: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(raw, [RAW_0[0], RAW_0[1], RAW_0[2]]);
        let mut rng = Pcg64::from_seed(12345);
        assert_eq!(rng.next_f64(), RANDOM_12345[0]);
        assert_eq!(rng.next_f64(), RANDOM_12345[1]);
    }

    const RAW_0: [u64; 3] = [11_749_869_230_777_074_271, 4_976_686_463_289_251_617, 755_828_109_848_996_024];
    const RANDOM_12345: [f64; 2] = [0.22733602246716966, 0.31675833970975287];
}
