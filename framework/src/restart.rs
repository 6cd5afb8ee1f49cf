//! Supervisors' restart policies: which children restart when one fails,
//! and how many failures in how long a window are tolerated (Erlang/OTP's
//! strategy, intensity and period). Every supervisor in rlx — evaluators,
//! env shards, replay shards, actor pools, worker nodes — takes a
//! [`RestartPolicy`] and counts failures with a [`FailureWindow`].

use crate::config::{check, ConfigError};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Which children a supervisor restarts when one fails (as in Erlang/OTP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartStrategy {
    /// Restart only the child that failed.
    #[default]
    OneForOne,
    /// Restart every child when one fails (for children that share state).
    OneForAll,
}

/// A supervisor's restart policy: strategy plus budget.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartPolicy {
    /// One-for-one or one-for-all.
    #[serde(default)]
    pub strategy: RestartStrategy,
    /// At most this many restarts within `window_s` seconds; one more
    /// failure and the supervisor gives up.
    pub max_restarts: usize,
    /// The window, in seconds.
    pub window_s: f64,
}

impl Default for RestartPolicy {
    /// One-for-one, at most 3 restarts in 60 s.
    fn default() -> Self {
        Self { strategy: RestartStrategy::OneForOne, max_restarts: 3, window_s: 60.0 }
    }
}

impl RestartPolicy {
    /// Range checks for a policy given under the config key `key` (e.g.
    /// `"restart"`): the window must be a positive number of seconds.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming `key.window_s`.
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        let w = self.window_s;
        check(&format!("{key}.window_s"), w, w > 0.0 && w.is_finite(), "must be > 0")
    }
}

/// The failures inside a [`RestartPolicy`]'s window (Erlang/OTP's restart
/// intensity and period), for every supervisor in rlx.
#[derive(Debug)]
pub struct FailureWindow {
    policy: RestartPolicy,
    failures: VecDeque<Instant>,
}

impl FailureWindow {
    /// An empty window for `policy`.
    pub fn new(policy: RestartPolicy) -> Self {
        Self { policy, failures: VecDeque::new() }
    }

    /// Records a failure now. `Err` carries the failures inside the window
    /// when they exceed `max_restarts`: the supervisor must give up.
    pub fn record(&mut self) -> Result<(), usize> {
        let now = Instant::now();
        let window = Duration::from_secs_f64(self.policy.window_s);
        self.failures.push_back(now);
        while self.failures.front().is_some_and(|t| now.duration_since(*t) > window) {
            self.failures.pop_front();
        }
        if self.failures.len() > self.policy.max_restarts {
            Err(self.failures.len())
        } else {
            Ok(())
        }
    }
}
