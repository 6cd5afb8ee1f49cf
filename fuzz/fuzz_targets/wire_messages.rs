//! Every cluster message a node or a driver decodes, each input decoded as
//! each of them, as `fuzzed_messages_never_panic` in `cluster/src/wire.rs`
//! does.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rlx_cluster::wire::{decode, EvalProtocol, EvalRequest, Protocol, SpawnProtocol, SpawnerRequest};

fuzz_target!(|bytes: &[u8]| {
    let _ = decode::<EvalRequest>(bytes);
    if let Ok(Ok((reply, _))) = decode::<<EvalProtocol as Protocol>::Reply>(bytes) {
        let _ = reply.into_reply(rlx::codec::MAX_DECODED_BYTES);
    }
    let _ = decode::<SpawnerRequest>(bytes);
    let _ = decode::<<SpawnProtocol as Protocol>::Reply>(bytes);
});
