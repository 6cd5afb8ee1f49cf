//! # rlx-cluster: multi-node training (not built yet)
//!
//! This crate will hold `rlx node` (a ractor_cluster node server with a
//! spawner actor), remote evaluator handles that implement
//! `rlx::EvaluatorHandle` over the wire format in `rlx::codec`, and the
//! supervision tree across nodes. Until then, evaluators run in the driver
//! or as supervised local ractor actors (`rlx::actor`).
