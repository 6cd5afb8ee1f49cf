//! Shared helpers for the rlx criterion benchmarks.
//!
//! Set `RLX_BENCH_QUICK=1` to run every suite for a moment only (CI checks
//! that the benchmarks build and run; the figures come from full runs).

/// The book's Rust examples, compiled as doctests of this crate.
#[cfg(doctest)]
mod book;

use std::time::Duration;

/// Whether the quick mode is on.
pub fn quick() -> bool {
    std::env::var_os("RLX_BENCH_QUICK").is_some_and(|v| v != "0")
}

/// Criterion settings: a short run in quick mode.
pub fn criterion() -> criterion_config::Config {
    if quick() {
        criterion_config::Config {
            warm_up: Duration::from_millis(100),
            measurement: Duration::from_millis(500),
            samples: 10,
        }
    } else {
        criterion_config::Config { warm_up: Duration::from_secs(2), measurement: Duration::from_secs(10), samples: 20 }
    }
}

/// Plain numbers, so this crate's library does not depend on criterion.
pub mod criterion_config {
    use std::time::Duration;

    /// Warm-up time, measurement time and sample count.
    pub struct Config {
        /// Warm-up time.
        pub warm_up: Duration,
        /// Measurement time.
        pub measurement: Duration,
        /// Number of samples.
        pub samples: usize,
    }
}

/// A multi-threaded tokio runtime with one worker per core, as the `rlx`
/// binary uses.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}
