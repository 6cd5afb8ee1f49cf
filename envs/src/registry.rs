//! Envs by name.

use rlx::config::closest_n;
use rlx::{Env, EnvError};

type Maker = fn() -> Box<dyn Env>;

const REGISTRY: &[(&str, &str, Maker)] =
    &[("CartPole-v1", "balance a pole on a cart; Discrete(2), 500-step limit (Gymnasium 1.0)", || {
        Box::new(crate::cartpole_v1())
    })];

/// Creates the env registered as `name`.
///
/// # Errors
/// [`EnvError::Unknown`] listing the closest registered names.
pub fn make(name: &str) -> Result<Box<dyn Env>, EnvError> {
    REGISTRY.iter().find(|(n, _, _)| *n == name).map(|(_, _, make)| make()).ok_or_else(|| EnvError::Unknown {
        name: name.to_string(),
        closest: closest_n(name, REGISTRY.iter().map(|(n, _, _)| *n), 3),
    })
}

/// Registered env names, each with a one-line description.
pub fn names() -> Vec<(&'static str, &'static str)> {
    REGISTRY.iter().map(|(n, d, _)| (*n, *d)).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_names_suggest_close_ones() {
        let err = super::make("CartPole-v0").err().unwrap().to_string();
        assert!(err.contains("CartPole-v0") && err.contains("CartPole-v1"), "{err}");
        assert!(super::make("CartPole-v1").is_ok());
    }
}
