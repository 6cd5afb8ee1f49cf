//! A process-wide "stop requested" flag: the first Ctrl-C of `rlx train`
//! sets it, and code that waits on something outside the process (an
//! external env's server waiting for its first client) checks it, so that
//! the run stops instead of waiting on.
//!
//! A training iteration normally finishes on its own and the command line
//! stops after it; only waits with no end of their own need this flag.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// How an error caused by the request begins, so that the command line
/// tells such a stop from a failure that merely followed a Ctrl-C.
pub const STOPPED: &str = "stopped on request";

/// Asks every open-ended wait in the process to give up.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether [`request`] was called.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
