//! The book's Rust examples (`book/src/*.md`), compiled and run as doctests
//! of this crate: `cargo test -p rlx-benches --doc`. Every page with Rust
//! code blocks has one item here; its blocks are that item's doctests.
//! Hidden lines (`# ...`) in the book supply imports, `main` and stubs.

/// `book/src/traits.md`
#[doc = include_str!("../../book/src/traits.md")]
pub struct Traits;

/// `book/src/envs.md`
#[doc = include_str!("../../book/src/envs.md")]
pub struct Envs;

/// `book/src/env-tools.md`
#[doc = include_str!("../../book/src/env-tools.md")]
pub struct EnvTools;

/// `book/src/gymnasium.md`
#[doc = include_str!("../../book/src/gymnasium.md")]
pub struct Gymnasium;

/// `book/src/external.md`
#[doc = include_str!("../../book/src/external.md")]
pub struct External;

/// `book/src/evaluators.md`
#[doc = include_str!("../../book/src/evaluators.md")]
pub struct Evaluators;

/// `book/src/first-run.md`
#[doc = include_str!("../../book/src/first-run.md")]
pub struct FirstRun;

/// `book/src/nesting.md`
#[doc = include_str!("../../book/src/nesting.md")]
pub struct Nesting;

/// `book/src/optimizers.md`
#[doc = include_str!("../../book/src/optimizers.md")]
pub struct Optimizers;

/// `book/src/pg-family.md`
#[doc = include_str!("../../book/src/pg-family.md")]
pub struct PgFamily;

/// `book/src/sample-batch.md`
#[doc = include_str!("../../book/src/sample-batch.md")]
pub struct SampleBatch;

/// `book/src/tutorial.md`
#[doc = include_str!("../../book/src/tutorial.md")]
pub struct Tutorial;

/// `book/src/workflow.md`
#[doc = include_str!("../../book/src/workflow.md")]
pub struct Workflow;

/// `book/src/multi-agent.md`
#[doc = include_str!("../../book/src/multi-agent.md")]
pub struct MultiAgent;

/// `book/src/deploy.md`
#[doc = include_str!("../../book/src/deploy.md")]
pub struct Deploy;
