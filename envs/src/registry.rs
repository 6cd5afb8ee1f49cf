//! Envs by name, with the metadata Gymnasium's registry keeps.

use rlx::config::closest_n;
use rlx::{Env, EnvError};

/// A registered env.
#[derive(Clone, Copy)]
pub struct EnvSpec {
    /// The name it is made by, e.g. `"CartPole-v1"`.
    pub name: &'static str,
    /// One line for `rlx list`.
    pub description: &'static str,
    /// The mean return at which the env counts as solved (Gymnasium's
    /// `reward_threshold`), if it has one.
    pub reward_threshold: Option<f64>,
    make: fn() -> Box<dyn Env>,
}

const REGISTRY: &[EnvSpec] = &[EnvSpec {
    name: "CartPole-v1",
    description: "balance a pole on a cart; Box(4) obs, Discrete(2) actions, 500-step limit (Gymnasium 1.0)",
    reward_threshold: Some(475.0),
    make: || Box::new(crate::cartpole_v1()),
}];

/// Creates the env registered as `name`.
///
/// # Errors
/// [`EnvError::Unknown`] listing the closest registered names.
pub fn make(name: &str) -> Result<Box<dyn Env>, EnvError> {
    Ok((spec(name)?.make)())
}

/// The registration of `name`.
///
/// # Errors
/// [`EnvError::Unknown`] listing the closest registered names.
pub fn spec(name: &str) -> Result<&'static EnvSpec, EnvError> {
    REGISTRY.iter().find(|s| s.name == name).ok_or_else(|| EnvError::Unknown {
        name: name.to_string(),
        closest: closest_n(name, REGISTRY.iter().map(|s| s.name), 3),
    })
}

/// Every registered env.
pub fn specs() -> &'static [EnvSpec] {
    REGISTRY
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_names_suggest_close_ones() {
        let err = super::make("CartPole-v0").err().unwrap().to_string();
        assert!(err.contains("CartPole-v0") && err.contains("CartPole-v1"), "{err}");
        assert!(super::make("CartPole-v1").is_ok());
        assert_eq!(super::spec("CartPole-v1").unwrap().reward_threshold, Some(475.0));
    }
}
