//! Checkpoint loading past its checksums: `metadata.json`, a NUL byte,
//! `state.bin` (`rlx::fuzz::parse_checkpoint_input`), as
//! `fuzzed_checkpoint_files_never_panic` in `algorithms/tests/checkpoint.rs`
//! calls it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let _ = rlx::fuzz::parse_checkpoint_input(input);
});
