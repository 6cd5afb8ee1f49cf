//! Why a trainer or a policy could not be built.

use rlx::config::ConfigError;
use rlx::{EnvError, HandleError};

/// Why a trainer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No algorithm by that name.
    #[error("unknown algorithm `{name}`{}; available: {available}", closest.first().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default())]
    UnknownAlgorithm {
        /// The requested name.
        name: String,
        /// Close names.
        closest: Vec<String>,
        /// Every known name, comma-separated.
        available: String,
    },
    /// The config is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The env is unknown or failed to build.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The algorithm cannot handle this env.
    #[error("{0}")]
    Unsupported(String),
    /// An evaluator failed to start.
    #[error(transparent)]
    Evaluator(#[from] HandleError),
}
