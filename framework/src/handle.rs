//! Evaluator handles: one async interface over evaluators wherever they live.
//!
//! Which home do I want?
//! - [`LocalEvaluator`]: the evaluator runs inside the caller's task. No
//!   messaging cost, no parallelism, no isolation: a panic in the env is
//!   caught and reported, but nothing restarts it.
//! - [`RactorEvaluator`](crate::actor::RactorEvaluator): the evaluator is a
//!   ractor actor under a supervisor. Evaluators sample in parallel, and one
//!   that crashes is restarted with the current weights within a restart
//!   budget. This is the default for `num_workers > 0`.
//! - Remote evaluators on other machines come with `rlx-cluster`.
//!
//! Optimizers only ever see `dyn EvaluatorHandle`.

use crate::env::EpisodeSummary;
use crate::evaluator::{EvaluatorError, EvaluatorState, GradientRollout, PolicyEvaluator, Rollout};
use crate::filter::RunningStat;
use crate::policy::FlatWeights;
use crate::protocol::{EvalReply, EvalRequest};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

/// Why a call through a handle failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum HandleError {
    /// The evaluator reported an error.
    #[error("evaluator {index} failed: {source}")]
    Failed {
        /// The evaluator's index (workers count from 1).
        index: usize,
        /// What went wrong.
        source: EvaluatorError,
    },
    /// The evaluator crashed more often than its supervisor's restart budget allows.
    #[error(
        "evaluator {index} failed {failures} times within {window_s} s (at most {max_restarts} restarts allowed); last failure: {last_failure}"
    )]
    RestartBudgetExceeded {
        /// The evaluator's index.
        index: usize,
        /// Failures counted inside the window.
        failures: usize,
        /// The supervisor's `max_restarts`.
        max_restarts: usize,
        /// The supervisor's window in seconds.
        window_s: f64,
        /// The last failure's reason (e.g. the panic message).
        last_failure: String,
    },
    /// The evaluator could not be (re)started.
    #[error("evaluator {index} could not be started: {reason}")]
    Spawn {
        /// The evaluator's index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// The evaluator's actor or its supervisor is gone.
    #[error("evaluator {index} is unreachable: {reason}")]
    Unreachable {
        /// The evaluator's index.
        index: usize,
        /// Why.
        reason: String,
    },
}

/// Counters an evaluator handle reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandleStats {
    /// Env steps returned through this handle.
    pub steps_sampled: u64,
    /// Times the evaluator behind this handle was restarted after a failure.
    pub restarts: u64,
    /// Restarts of the evaluator's env shards, as its rollouts reported
    /// them (those of a sample that was then lost with its evaluator are
    /// not among them).
    pub env_shard_restarts: u64,
}

impl HandleStats {
    /// Counts a rollout of `rows` rows that met `env_shard_restarts`.
    pub fn record(&mut self, rows: usize, env_shard_restarts: u64) {
        self.steps_sampled += rows as u64;
        self.env_shard_restarts += env_shard_restarts;
    }

    /// Counts what `reply` sampled, if anything.
    pub fn record_reply(&mut self, reply: &EvalReply) {
        match reply {
            EvalReply::Rollout(r) => self.record(r.batch.len(), r.env_shard_restarts),
            EvalReply::Gradients(g) => self.record(g.steps, g.env_shard_restarts),
            EvalReply::State(_) | EvalReply::Episodes(_) | EvalReply::Done => {}
        }
    }
}

/// The async interface to one evaluator, wherever it runs.
///
/// A home implements [`call`](Self::call) (and [`cast`](Self::cast)): it
/// hands the [`EvalRequest`] to [`PolicyEvaluator::serve`] wherever the
/// evaluator lives. The typed methods below are written once, here.
///
/// Every method takes `&self`, like ractor's `ActorRef`: a handle shared as
/// a [`SharedHandle`] is cheap to clone, and an asynchronous optimizer keeps
/// a request in flight by giving it a clone, while the handle stays where it
/// is for checkpoints and metrics. An evaluator serves its requests one at a
/// time, in the order they reach it.
#[async_trait]
pub trait EvaluatorHandle: Send + Sync {
    /// This evaluator's index (0 is the driver's local evaluator).
    fn index(&self) -> usize;

    /// Serves `request` and waits for the answer. Handles whose evaluator
    /// can be restarted keep the latest weights and filter statistics
    /// ([`LatestState`](crate::protocol::LatestState)) to bring a
    /// replacement up to date before they retry.
    ///
    /// # Errors
    /// The evaluator's error, or one of its home (unreachable, past its
    /// restart budget).
    async fn call(&self, request: EvalRequest) -> Result<EvalReply, HandleError>;

    /// Sends `request` without waiting for the answer; the evaluator serves
    /// it before its next request. A failure shows at the next call.
    fn cast(&self, request: EvalRequest);

    /// Counters for metrics.
    fn stats(&self) -> HandleStats;

    /// Samples a postprocessed batch ([`PolicyEvaluator::sample`]).
    async fn sample(&self) -> Result<Rollout, HandleError> {
        match self.call(EvalRequest::Sample).await? {
            EvalReply::Rollout(rollout) => Ok(rollout),
            other => Err(unexpected(self.index(), "Sample", &other)),
        }
    }

    /// Replaces the policy's weights.
    async fn set_weights(&self, weights: Arc<FlatWeights>) -> Result<(), HandleError> {
        self.call(EvalRequest::SetWeights(weights)).await.map(drop)
    }

    /// Sends new weights without waiting for the evaluator to apply them
    /// (it applies them before its next request). Used where waiting would
    /// wait for a straggler still busy with an abandoned request.
    fn push_weights(&self, weights: Arc<FlatWeights>) {
        self.cast(EvalRequest::PushWeights(weights));
    }

    /// Samples and computes a gradient on the samples, without applying it.
    async fn sample_and_compute_gradients(&self) -> Result<GradientRollout, HandleError> {
        match self.call(EvalRequest::SampleAndComputeGradients).await? {
            EvalReply::Gradients(g) => Ok(g),
            other => Err(unexpected(self.index(), "SampleAndComputeGradients", &other)),
        }
    }

    /// Replaces the observation filter's statistics with the driver's
    /// merged ones (no-op for an evaluator without a filter).
    async fn set_filter_statistics(&self, statistics: Arc<RunningStat>) -> Result<(), HandleError> {
        self.call(EvalRequest::SetFilterStatistics(statistics)).await.map(drop)
    }

    /// A snapshot of the evaluator for a checkpoint
    /// ([`PolicyEvaluator::save_state`]).
    async fn save_state(&self) -> Result<EvaluatorState, HandleError> {
        match self.call(EvalRequest::SaveState).await? {
            EvalReply::State(mut state) => {
                state.index = self.index();
                Ok(state)
            }
            other => Err(unexpected(self.index(), "SaveState", &other)),
        }
    }

    /// Restores a snapshot ([`PolicyEvaluator::load_state`]).
    async fn load_state(&self, state: Arc<EvaluatorState>) -> Result<(), HandleError> {
        self.call(EvalRequest::LoadState(state)).await.map(drop)
    }

    /// Writes out the episodes sampled so far and stops writing
    /// ([`PolicyEvaluator::finish_output`]).
    async fn finish_output(&self) -> Result<(), HandleError> {
        self.call(EvalRequest::FinishOutput).await.map(drop)
    }

    /// Plays whole episodes for evaluation ([`PolicyEvaluator::evaluate`]).
    async fn evaluate(&self, episodes: usize, seed: u64, explore: bool) -> Result<Vec<EpisodeSummary>, HandleError> {
        match self.call(EvalRequest::Evaluate { episodes, seed, explore }).await? {
            EvalReply::Episodes(episodes) => Ok(episodes),
            other => Err(unexpected(self.index(), "Evaluate", &other)),
        }
    }
}

/// A handle shared by whoever needs to call the evaluator: the optimizer's
/// list of workers, and each request in flight.
pub type SharedHandle = Arc<dyn EvaluatorHandle>;

/// Locks a home's bookkeeping (latest weights, counters). Homes never
/// hold it across an await, so a lock poisoned by a caught panic still
/// holds whole values and is used as it is.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A reply of the wrong kind: a home that answered another request.
fn unexpected(index: usize, request: &str, reply: &EvalReply) -> HandleError {
    let kind = match reply {
        EvalReply::Rollout(_) => "a rollout",
        EvalReply::Gradients(_) => "gradients",
        EvalReply::State(_) => "a state",
        EvalReply::Episodes(_) => "episodes",
        EvalReply::Done => "nothing",
    };
    HandleError::Failed { index, source: EvaluatorError::Config(format!("{request} was answered with {kind}")) }
}

/// An evaluator living in the driver's task, behind a lock so that the
/// learner can reach its policy and the same evaluator can sample as a
/// handle (`num_workers: 0`).
pub struct LocalEvaluator {
    index: usize,
    evaluator: Mutex<PolicyEvaluator>,
    stats: Mutex<HandleStats>,
}

impl LocalEvaluator {
    /// Wraps an evaluator.
    pub fn new(index: usize, evaluator: PolicyEvaluator) -> Self {
        Self { index, evaluator: Mutex::new(evaluator), stats: Mutex::default() }
    }

    /// The evaluator (e.g. for the learner to reach its policy), for as
    /// long as the guard lives. Like `RefCell::borrow_mut`, it panics if
    /// the evaluator is already borrowed: holding a guard while calling the
    /// evaluator's handle (or taking a second guard) is a bug in the
    /// caller, and a panic names it where a lock would hang.
    pub fn evaluator(&self) -> MutexGuard<'_, PolicyEvaluator> {
        match self.evaluator.try_lock() {
            Ok(guard) => guard,
            // A panic while sampling was caught and reported; the evaluator lives on.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                panic!("the driver's evaluator is already borrowed (a guard from Evaluators::local is still alive)")
            }
        }
    }

    /// Runs `f` on the evaluator, turning a panic into [`EvaluatorError::Panicked`].
    fn guarded<T>(&self, f: impl FnOnce(&mut PolicyEvaluator) -> Result<T, EvaluatorError>) -> Result<T, HandleError> {
        let index = self.index;
        let mut evaluator = self.evaluator();
        match catch_unwind(AssertUnwindSafe(|| f(&mut evaluator))) {
            Ok(r) => r.map_err(|source| HandleError::Failed { index, source }),
            Err(panic) => Err(HandleError::Failed { index, source: EvaluatorError::Panicked(panic_message(&*panic)) }),
        }
    }
}

/// The message of a caught panic payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[async_trait]
impl EvaluatorHandle for LocalEvaluator {
    fn index(&self) -> usize {
        self.index
    }

    async fn call(&self, request: EvalRequest) -> Result<EvalReply, HandleError> {
        let index = self.index;
        let reply = self.guarded(|e| e.serve(&request, index))?;
        lock(&self.stats).record_reply(&reply);
        Ok(reply)
    }

    fn cast(&self, request: EvalRequest) {
        // Served at once; an error surfaces as the policy's error on the
        // next call, as the actor home would.
        let _ = self.guarded(|e| e.serve(&request, self.index));
    }

    fn stats(&self) -> HandleStats {
        *lock(&self.stats)
    }
}
