//! Shared helpers for the rlx criterion benchmarks.
