//! The sample-batch codec (`rlx::codec::decode`), as `fuzzed_batches_never_panic`
//! in `framework/src/codec.rs` calls it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = rlx::codec::decode(bytes);
});
