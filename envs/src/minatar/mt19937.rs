//! The Mersenne Twister as NumPy's legacy `np.random.RandomState` drives it.
//!
//! MinAtar draws every random number from a `RandomState`, so reproducing its
//! trajectories step for step needs the same generator, seeded the same way,
//! and the same legacy algorithms on top of the raw 32-bit outputs:
//!
//! | NumPy (legacy) | here | how |
//! |---|---|---|
//! | `RandomState(seed)`, `0 <= seed < 2**32` | [`Mt19937::new`] | `init_genrand(seed)` |
//! | `RandomState([k0, k1, ...])` | [`Mt19937::from_key`] | `init_by_array(key)` |
//! | `rand()`, `random_sample()` | [`Mt19937::random_sample`] | 53 bits from two draws: `((a >> 5) * 2**26 + (b >> 6)) / 2**53` |
//! | `randint(low, high)` (dtype `int64`) | [`Mt19937::randint`] | masked rejection sampling on `high - 1 - low` |
//! | `choice(n)` (uniform, with replacement) | [`Mt19937::choice`] | `randint(0, n)` |
//!
//! Seeds of 2³² and above, which `RandomState(seed)` rejects,
//! [`Mt19937::from_u64_seed`] maps to the key `[seed & 0xffffffff, seed >> 32]`,
//! what `RandomState([lo, hi])` does with them. The fixture test
//! `minatar_reference` checks all of this against NumPy's own outputs.

use serde::{Deserialize, Serialize};

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// A 32-bit Mersenne Twister (MT19937) with NumPy's `RandomState` methods.
///
/// It serializes its whole state, so that MinAtar envs saved in a
/// checkpoint draw the same numbers after a restore.
#[derive(Clone, Serialize, Deserialize)]
#[serde(into = "SavedMt19937", try_from = "SavedMt19937")]
pub struct Mt19937 {
    state: [u32; N],
    pos: usize,
}

/// How [`Mt19937`] is serialized (serde has no impls for arrays this long).
#[derive(Serialize, Deserialize)]
struct SavedMt19937 {
    state: Vec<u32>,
    pos: usize,
}

impl From<Mt19937> for SavedMt19937 {
    fn from(g: Mt19937) -> Self {
        Self { state: g.state.to_vec(), pos: g.pos }
    }
}

impl TryFrom<SavedMt19937> for Mt19937 {
    type Error = String;

    fn try_from(saved: SavedMt19937) -> Result<Self, String> {
        let len = saved.state.len();
        match saved.state.try_into() {
            Ok(state) if saved.pos <= N => Ok(Self { state, pos: saved.pos }),
            _ => Err(format!("not an MT19937 state: {len} words at position {}", saved.pos)),
        }
    }
}

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937").field("pos", &self.pos).finish_non_exhaustive()
    }
}

impl Mt19937 {
    /// The generator of `np.random.RandomState(seed)` for an integer seed
    /// (Matsumoto & Nishimura's `init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Self { state, pos: N }
    }

    /// The generator of `np.random.RandomState(key)` for a non-empty array of
    /// 32-bit integers (`init_by_array`). An empty key is treated as `[0]`.
    pub fn from_key(key: &[u32]) -> Self {
        let key: &[u32] = if key.is_empty() { &[0] } else { key };
        let mut g = Self::new(19_650_218);
        let mt = &mut g.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        g.pos = N;
        g
    }

    /// The generator NumPy would build for `seed`: [`new`](Self::new) for
    /// seeds below 2³² (as `RandomState(seed)`), otherwise
    /// [`from_key`](Self::from_key) with the seed's low and high 32-bit words
    /// (as `RandomState([seed & 0xffffffff, seed >> 32])`).
    pub fn from_u64_seed(seed: u64) -> Self {
        match u32::try_from(seed) {
            Ok(s) => Self::new(s),
            Err(_) => Self::from_key(&[seed as u32, (seed >> 32) as u32]),
        }
    }

    fn generate(&mut self) {
        let mt = &mut self.state;
        for i in 0..N {
            let y = (mt[i] & UPPER_MASK) | (mt[(i + 1) % N] & LOWER_MASK);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            mt[i] = mt[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// The next raw 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.generate();
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Two raw outputs as one 64-bit value, the first in the high word.
    pub fn next_u64(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        let lo = self.next_u32() as u64;
        (hi << 32) | lo
    }

    /// A double uniform in `[0, 1)`, as `RandomState.random_sample()` and
    /// `RandomState.rand()`.
    pub fn random_sample(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// An integer uniform in `low..high`, as `RandomState.randint(low, high)`
    /// with the default `int64` dtype; `None` where NumPy raises
    /// (`high <= low`).
    pub fn randint(&mut self, low: i64, high: i64) -> Option<i64> {
        if high <= low {
            return None;
        }
        let rng = (high as i128 - 1 - low as i128) as u64;
        let v = if rng == 0 {
            0
        } else if rng <= u32::MAX as u64 {
            if rng == u32::MAX as u64 {
                self.next_u32() as u64
            } else {
                let mask = u32::MAX >> (rng as u32).leading_zeros();
                loop {
                    let v = (self.next_u32() & mask) as u64;
                    if v <= rng {
                        break v;
                    }
                }
            }
        } else if rng == u64::MAX {
            self.next_u64()
        } else {
            let mask = u64::MAX >> rng.leading_zeros();
            loop {
                let v = self.next_u64() & mask;
                if v <= rng {
                    break v;
                }
            }
        };
        Some((low as i128 + v as i128) as i64)
    }

    /// An index uniform in `0..n`, as `RandomState.choice(n)` (or the choice
    /// of one element of a length-`n` sequence) with no weights; `None` for
    /// `n == 0`, where NumPy raises.
    pub fn choice(&mut self, n: usize) -> Option<usize> {
        self.randint(0, i64::try_from(n).ok()?).map(|i| i as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_outputs_of_the_original_implementation() {
        // mt19937ar.c's published test: init_by_array({0x123, 0x234, 0x345, 0x456}).
        let mut g = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let first: Vec<u32> = (0..5).map(|_| g.next_u32()).collect();
        assert_eq!(first, [1067595299, 955945823, 477289528, 4107218783, 4228976476]);
        // init_genrand(5489), the C++ std::mt19937 default: the 10000th output.
        let mut g = Mt19937::new(5489);
        let last = (0..10_000).map(|_| g.next_u32()).last().unwrap();
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn matches_numpy_random_state() {
        // np.random.RandomState(0): rand(), randint(2) x3, randint(-5, 1000).
        let mut g = Mt19937::new(0);
        assert_eq!(g.random_sample(), 0.5488135039273248);
        let ints: Vec<i64> = (0..3).map(|_| g.randint(0, 2).unwrap()).collect();
        assert_eq!(ints, NUMPY_SEED0_INTS);
        assert_eq!(g.randint(-5, 1000), Some(NUMPY_SEED0_WIDE));
        assert_eq!(g.randint(3, 3), None);
        assert_eq!(g.randint(7, 8), Some(7));
        assert_eq!(g.choice(0), None);
    }

    // From NumPy 2.4.6; envs/tests/fixtures/MinAtar-mt19937.json has many more.
    const NUMPY_SEED0_INTS: [i64; 3] = [1, 0, 1];
    const NUMPY_SEED0_WIDE: i64 = 758;

    #[test]
    fn serde_round_trip_continues_the_stream() {
        use rlx::env::{decode_state, encode_state};
        let mut g = Mt19937::new(7);
        for _ in 0..1000 {
            g.next_u32();
        }
        let mut restored: Mt19937 = decode_state("test", &encode_state(&g)).unwrap();
        assert!((0..2000).all(|_| g.next_u32() == restored.next_u32()));
        let short = encode_state(&SavedMt19937 { state: vec![1, 2, 3], pos: 0 });
        assert!(decode_state::<Mt19937>("test", &short).is_err());
        let past_end = encode_state(&SavedMt19937 { state: vec![0; N], pos: N + 1 });
        assert!(decode_state::<Mt19937>("test", &past_end).is_err());
    }

    #[test]
    fn seeds_beyond_32_bits_use_the_array_form() {
        let mut a = Mt19937::from_u64_seed(1 << 32 | 7);
        let mut b = Mt19937::from_key(&[7, 1]);
        assert!((0..100).all(|_| a.next_u32() == b.next_u32()));
        let mut a = Mt19937::from_u64_seed(42);
        let mut b = Mt19937::new(42);
        assert!((0..100).all(|_| a.next_u32() == b.next_u32()));
    }
}
