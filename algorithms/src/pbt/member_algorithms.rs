//! What PBT needs of the algorithms its members run, handed in rather than
//! imported: the registry lists PBT, so PBT reading the registry back
//! would be an import circle. The registry's `Registry` implements
//! [`MemberAlgorithms`] and passes itself to PBT's build, config check and
//! policy; a test can pass a table of its own.

use crate::common::build_context::PolicyLookup;
use crate::error::BuildError;
use futures::future::BoxFuture;
use rlx::env::EnvMaker;
use rlx::Trainer;
use serde_json::Value;

/// The algorithms a PBT member may run, by name: their names and default
/// configs (to check PBT's config and pick the default mutations), their
/// policies ([`PolicyLookup::make_policy`], to check member configs and
/// hold the best member's weights), and their trainers (one per member).
pub trait MemberAlgorithms: PolicyLookup {
    /// Every algorithm's name, PBT's own included (PBT leaves itself out).
    fn names(&self) -> Vec<&'static str>;

    /// `algorithm`'s default config as JSON (`rlx config ALGORITHM`);
    /// `None` for an unknown name.
    fn default_config(&self, algorithm: &str) -> Option<Value>;

    /// A trainer of `algorithm` on `make_env`, with `config` merged over
    /// its defaults, its evaluators in this process.
    ///
    /// # Errors
    /// An unknown algorithm, a bad config, an env the algorithm cannot
    /// handle, or an evaluator that fails to start.
    fn build(
        &self,
        algorithm: &str,
        make_env: EnvMaker,
        config: &Value,
    ) -> BoxFuture<'static, Result<Trainer, BuildError>>;
}
