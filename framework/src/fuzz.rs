//! Fuzzing for every decoder that reads untrusted bytes: sample batches,
//! cluster messages, checkpoints.
//!
//! `cargo fuzz` needs nightly-only flags and CI has a stable toolchain, so
//! the fuzz tests run here, in `cargo test`: [`run`] feeds a decoder
//! [`FUZZ_CASES`] inputs, each a valid message (the corpus, built by the
//! test from real values) altered the ways disks and networks alter bytes
//! ([`mutate`]), and fails naming the seed of any input that panics. Every
//! input follows from its seed, so a failure replays with
//! `mutate(corpus[seed % corpus.len()], seed)`.
//!
//! The coverage-guided fuzzers in `fuzz/` (`cargo fuzz`, run by hand; see
//! `fuzz/README.md`) call the same decoders, and their minimized corpus is
//! committed under `fuzz/corpus/<target>`. [`run_target`] replays each of
//! those files as-is and adds them to the corpus the seeded mutations start
//! from ([`with_committed`]: a failing seed replays on that joined corpus),
//! so CI explores from what the coverage-guided fuzzer found.

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::codec;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

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

/// Set (to anything) to make [`write_seeds`] write the tests' in-code
/// messages into the committed corpus, to seed `cargo fuzz`.
pub const WRITE_CORPUS_VAR: &str = "RLX_FUZZ_WRITE_CORPUS";

/// The committed corpus of the `cargo fuzz` target `target`:
/// `fuzz/corpus/<target>` at the root of the workspace.
pub fn corpus_dir(target: &str) -> PathBuf {
    let framework = Path::new(env!("CARGO_MANIFEST_DIR"));
    framework.parent().unwrap_or(framework).join("fuzz").join("corpus").join(target)
}

/// With [`WRITE_CORPUS_VAR`] set, writes each of `messages` into
/// [`corpus_dir`]`(target)`, named by its SHA-256 (a message already there
/// is written again, unchanged); otherwise does nothing.
///
/// # Panics
/// If a file cannot be written.
pub fn write_seeds(target: &str, messages: &[Vec<u8>]) {
    if std::env::var_os(WRITE_CORPUS_VAR).is_none() {
        return;
    }
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for message in messages {
        let name: String = Sha256::digest(message).iter().take(20).map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("seed-{name}"));
        std::fs::write(&path, message).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Every file of the committed corpus of `target`, in name order, each
/// first fed to `decode` as-is.
///
/// # Panics
/// If the directory is missing or holds no file (a corpus that silently
/// went missing would leave CI fuzzing less than it says), or if `decode`
/// panics on a file (the message names it).
pub fn replay_corpus(target: &str, mut decode: impl FnMut(&[u8])) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the committed fuzz corpus {}: {e}", dir.display()))
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries.into_iter().filter(|p| p.is_file()).collect();
    paths.sort();
    assert!(!paths.is_empty(), "the committed fuzz corpus {} holds no file", dir.display());
    let mut corpus = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if catch_unwind(AssertUnwindSafe(|| decode(&bytes))).is_err() {
            panic!("the decoder panicked on the committed corpus file {}", path.display());
        }
        corpus.push(bytes);
    }
    corpus
}

/// The corpus [`run`] alters, from a test's in-code messages and the
/// committed files: the in-code messages repeated until there are about as
/// many as committed files, then the committed files. About half of the
/// inputs start from each, however large the committed corpus grows.
pub fn with_committed(in_code: &[Vec<u8>], committed: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let repeats = committed.len().div_ceil(in_code.len().max(1)).max(1);
    let mut corpus = Vec::with_capacity(in_code.len() * repeats + committed.len());
    for _ in 0..repeats {
        corpus.extend_from_slice(in_code);
    }
    corpus.extend_from_slice(committed);
    corpus
}

/// One fuzz target in `cargo test`: [`write_seeds`] of `in_code`, every
/// committed corpus file as-is ([`replay_corpus`]), then [`run`] on the
/// in-code messages and the committed files together
/// ([`with_committed`]). Returns the number of committed files.
///
/// # Panics
/// As [`replay_corpus`] and [`run`].
pub fn run_target(
    target: &str,
    in_code: &[Vec<u8>],
    alter: fn(&[u8], u64) -> Vec<u8>,
    mut decode: impl FnMut(&[u8]),
) -> usize {
    write_seeds(target, in_code);
    let committed = replay_corpus(target, &mut decode);
    run(&with_committed(in_code, &committed), alter, decode);
    committed.len()
}

/// Separates `metadata.json` from `state.bin` in an input of the
/// checkpoint target (JSON text holds no raw NUL).
pub const CHECKPOINT_SEPARATOR: u8 = 0;

/// An input of the checkpoint target: `metadata.json`, a NUL byte and
/// `state.bin`; `metadata.json` alone when there is no `state.bin`.
pub fn checkpoint_input(metadata: &[u8], state: Option<&[u8]>) -> Vec<u8> {
    let mut input = metadata.to_vec();
    if let Some(state) = state {
        input.push(CHECKPOINT_SEPARATOR);
        input.extend_from_slice(state);
    }
    input
}

/// `metadata.json` and `state.bin` of a checkpoint target's input: split
/// at the first NUL byte; with none, the whole input is `metadata.json`
/// and `state.bin` is missing.
pub fn split_checkpoint_input(input: &[u8]) -> (&[u8], Option<&[u8]>) {
    match input.iter().position(|&b| b == CHECKPOINT_SEPARATOR) {
        Some(at) => (&input[..at], Some(&input[at + 1..])),
        None => (input, None),
    }
}

/// The checkpoint target: [`Checkpoint::parse`] of a
/// [`checkpoint_input`] as if its files had matched their `SHA256SUMS`
/// (a rewritten `SHA256SUMS`, the only way damaged bytes get this far).
///
/// # Errors
/// Whatever [`Checkpoint::parse`] says about the bytes.
pub fn parse_checkpoint_input(input: &[u8]) -> Result<Checkpoint, CheckpointError> {
    let (metadata, state) = split_checkpoint_input(input);
    Checkpoint::parse(Path::new("checkpoint_000001"), metadata, state, true)
}

/// A [`checkpoint_input`] with its `metadata.json` altered ([`mutate`]).
pub fn mutate_checkpoint_metadata(input: &[u8], seed: u64) -> Vec<u8> {
    let (metadata, state) = split_checkpoint_input(input);
    checkpoint_input(&mutate(metadata, seed), state)
}

/// A [`checkpoint_input`] with its `state.bin` altered
/// ([`mutate_framed`]; a missing one is made from nothing).
pub fn mutate_checkpoint_state(input: &[u8], seed: u64) -> Vec<u8> {
    let (metadata, state) = split_checkpoint_input(input);
    checkpoint_input(metadata, Some(&mutate_framed(state.unwrap_or_default(), seed)))
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

    #[test]
    fn checkpoint_inputs_split_where_they_were_joined() {
        let input = checkpoint_input(b"{}", Some(b"\0state"));
        assert_eq!(split_checkpoint_input(&input), (&b"{}"[..], Some(&b"\0state"[..])));
        assert_eq!(split_checkpoint_input(&checkpoint_input(b"{}", None)), (&b"{}"[..], None));
        let altered = mutate_checkpoint_state(&input, 4);
        assert_eq!(split_checkpoint_input(&altered).0, b"{}", "the metadata is kept");
        assert!(corpus_dir("x").ends_with("fuzz/corpus/x"));
        let (a, b) = (vec![1u8], vec![2u8]);
        let in_code = std::slice::from_ref(&a);
        assert_eq!(with_committed(in_code, &[b.clone(), b.clone()]), [a.clone(), a.clone(), b.clone(), b]);
        assert_eq!(with_committed(in_code, &[]), in_code);
    }
}
