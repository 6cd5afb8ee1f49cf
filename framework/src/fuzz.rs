//! Fuzzing for every decoder that reads untrusted bytes: sample batches,
//! cluster messages, checkpoints.
//!
//! `cargo fuzz` needs a nightly toolchain and CI has a stable one, so the
//! fuzz tests run here, in `cargo test`: [`run`] feeds a decoder
//! [`FUZZ_CASES`] inputs, each a valid message (the corpus, built by the
//! test from real values) altered the ways disks and networks alter bytes
//! ([`mutate`]), and fails naming the seed of any input that panics. Every
//! input follows from its seed, so a failure replays with
//! `mutate(corpus[seed % corpus.len()], seed)`.

use crate::codec;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Inputs per fuzz target in `cargo test`.
pub const FUZZ_CASES: u64 = 100_000;

/// `original` altered by one to four edits drawn from `seed`: a flipped
/// bit, a byte set at random, a cut, a run of its own bytes repeated
/// elsewhere, random bytes inserted, or a run set to boundary values
/// (0, 0x7f, 0x80, 0xff: lengths and markers at their limits).
pub fn mutate(original: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = original.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let len = b.len();
        match rng.gen_range(0..6) {
            0 if len > 0 => b[rng.gen_range(0..len)] ^= 1 << rng.gen_range(0..8),
            1 if len > 0 => b[rng.gen_range(0..len)] = rng.gen(),
            2 => b.truncate(rng.gen_range(0..=len)),
            3 if len > 0 => {
                let from = rng.gen_range(0..len);
                let run = b[from..(from + rng.gen_range(1..=64)).min(len)].to_vec();
                let at = rng.gen_range(0..=len);
                b.splice(at..at, run);
            }
            4 => {
                let junk: Vec<u8> = (0..rng.gen_range(1..=16)).map(|_| rng.gen()).collect();
                let at = rng.gen_range(0..=len);
                b.splice(at..at, junk);
            }
            5 if len > 0 => {
                let from = rng.gen_range(0..len);
                let value = [0x00, 0x7f, 0x80, 0xff][rng.gen_range(0..4)];
                let end = (from + rng.gen_range(1..=8)).min(len);
                b[from..end].iter_mut().for_each(|x| *x = value);
            }
            _ => {}
        }
    }
    b
}

/// A framed message ([`codec::encode_value`]) altered either as bytes or,
/// for odd seeds, inside: its MessagePack payload is altered and framed
/// again, which reaches the decoder behind the LZ4 layer.
pub fn mutate_framed(framed: &[u8], seed: u64) -> Vec<u8> {
    match codec::unframe(framed) {
        Ok(payload) if seed % 2 == 1 => codec::frame(&mutate(&payload, seed)).unwrap_or_default(),
        _ => mutate(framed, seed),
    }
}

/// Feeds `decode` [`FUZZ_CASES`] inputs: `alter(corpus[seed % n], seed)`
/// for seeds `0..FUZZ_CASES`. What `decode` returns is its own business
/// (errors are expected); a panic is the failure.
///
/// # Panics
/// If `decode` panics on an input (the message names the seed), or the
/// corpus is empty.
pub fn run(corpus: &[Vec<u8>], alter: fn(&[u8], u64) -> Vec<u8>, mut decode: impl FnMut(&[u8])) {
    assert!(!corpus.is_empty(), "a fuzz corpus needs at least one message");
    let mut failed = None;
    for seed in 0..FUZZ_CASES {
        let input = alter(&corpus[(seed % corpus.len() as u64) as usize], seed);
        if catch_unwind(AssertUnwindSafe(|| decode(&input))).is_err() {
            failed = Some((seed, input));
            break;
        }
    }
    if let Some((seed, input)) = failed {
        let head: String = input.iter().take(64).map(|b| format!("{b:02x}")).collect();
        panic!("the decoder panicked on seed {seed} ({} bytes, starting {head})", input.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_follow_from_the_seed_and_alter_the_input() {
        let original: Vec<u8> = (0..=255).collect();
        assert_eq!(mutate(&original, 7), mutate(&original, 7));
        let altered = (0..1000).filter(|&s| mutate(&original, s) != original).count();
        assert!(altered > 900, "{altered} of 1000 mutations changed the input");
        let framed = codec::encode_value(&vec![1.5f32; 100]).unwrap();
        assert!(codec::unframe(&mutate_framed(&framed, 3)).is_ok(), "odd seeds alter inside the frame");
    }
}
