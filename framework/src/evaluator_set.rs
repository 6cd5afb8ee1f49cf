//! [`Evaluators`]: the driver's local evaluator plus handles to the workers.
//!
//! The local evaluator (index 0) holds the policy the learner updates; with
//! `num_workers = 0` it also samples. Workers (indices 1..=num_workers) are
//! supervised ractor actors by default.

use crate::actor::RactorEvaluatorSet;
use crate::evaluator::{EvaluatorError, EvaluatorFactory, PolicyEvaluator};
use crate::handle::{EvaluatorHandle, HandleError, LocalEvaluator, SharedHandle};
use crate::placement::{PlacedWorkers, Placement, WorkerSet};
use crate::restart::RestartPolicy;
use std::sync::{Arc, MutexGuard};

/// The local evaluator and the worker handles an optimizer drives.
pub struct Evaluators {
    local: Arc<LocalEvaluator>,
    workers: Vec<SharedHandle>,
    /// Keeps the worker actors alive (dropping it stops them) and counts restarts.
    actors: Option<Box<dyn WorkerSet>>,
}

impl Evaluators {
    /// Builds the local evaluator and `num_workers` supervised workers from
    /// `factory`, as ractor actors in this process.
    ///
    /// # Errors
    /// If an evaluator cannot be built; the error names which.
    pub async fn spawn(
        factory: EvaluatorFactory,
        num_workers: usize,
        restart: RestartPolicy,
    ) -> Result<Self, HandleError> {
        Self::spawn_placed(factory, num_workers, restart, None).await
    }

    /// [`spawn`](Self::spawn) with the workers wherever `placement` puts
    /// them (remote nodes, another actor backend); `None`: ractor actors in
    /// this process.
    ///
    /// # Errors
    /// If an evaluator cannot be built or placed; the error names which.
    pub async fn spawn_placed(
        factory: EvaluatorFactory,
        num_workers: usize,
        restart: RestartPolicy,
        placement: Option<Arc<dyn Placement>>,
    ) -> Result<Self, HandleError> {
        let local = factory(0, 0).map_err(|source| HandleError::Failed { index: 0, source })?;
        let indices: Vec<usize> = (1..=num_workers).collect();
        let (actors, workers) = match placement {
            Some(placement) => {
                let PlacedWorkers { handles, keep_alive } = placement.place(factory, indices, restart).await?;
                (Some(keep_alive), handles)
            }
            None if num_workers == 0 => (None, Vec::new()),
            None => {
                let (set, handles) = RactorEvaluatorSet::spawn(factory, indices, restart).await?;
                let set: Box<dyn WorkerSet> = Box::new(set);
                (Some(set), handles.into_iter().map(|h| Arc::new(h) as SharedHandle).collect())
            }
        };
        Ok(Self { local: Arc::new(LocalEvaluator::new(0, local)), workers, actors })
    }

    /// Wraps evaluators built elsewhere (e.g. remote ones). Whoever owns the
    /// workers' actors must keep them alive.
    pub fn from_parts(local: PolicyEvaluator, workers: Vec<SharedHandle>) -> Self {
        Self { local: Arc::new(LocalEvaluator::new(0, local)), workers, actors: None }
    }

    /// The driver's evaluator, whose policy the learner trains, for as long
    /// as the guard lives. Drop the guard before calling a handle: the
    /// driver's evaluator samples through one when there are no workers
    /// (see [`LocalEvaluator::evaluator`]).
    pub fn local(&self) -> MutexGuard<'_, PolicyEvaluator> {
        self.local.evaluator()
    }

    /// The driver's evaluator, mutably (the same guard as [`local`](Self::local)).
    pub fn local_mut(&mut self) -> MutexGuard<'_, PolicyEvaluator> {
        self.local.evaluator()
    }

    /// The driver's evaluator as a handle.
    pub fn local_handle(&self) -> SharedHandle {
        self.local.clone()
    }

    /// The worker handles.
    pub fn workers(&self) -> &[SharedHandle] {
        &self.workers
    }

    /// The handles that sample: the workers, or the driver's own evaluator
    /// when there are none. Optimizers sample through these alone, so
    /// `num_workers: 0` takes the same code path as any other count.
    pub fn samplers(&self) -> Vec<SharedHandle> {
        if self.workers.is_empty() {
            vec![self.local_handle()]
        } else {
            self.workers.clone()
        }
    }

    /// Number of worker evaluators (0 when the driver samples itself).
    pub fn num_workers(&self) -> usize {
        self.workers.len()
    }

    /// Restarts of worker evaluators so far: the supervisor's count for
    /// actor workers; otherwise what the handles report.
    pub fn num_restarts(&self) -> u64 {
        match &self.actors {
            Some(set) => set.restarts(),
            None => self.workers.iter().map(|w| w.stats().restarts).sum(),
        }
    }

    /// Env shard restarts the samplers' rollouts have reported so far.
    pub fn num_env_shard_restarts(&self) -> u64 {
        let workers: u64 = self.workers.iter().map(|w| w.stats().env_shard_restarts).sum();
        workers + self.local.stats().env_shard_restarts
    }

    /// Failures of the workers' deployment so far (lost nodes, re-placed
    /// evaluators); empty for workers in this process.
    pub fn failures(&self) -> Vec<String> {
        self.actors.as_ref().map(|a| a.failures()).unwrap_or_default()
    }

    /// Where the workers are, when a deployment placed them on nodes.
    pub fn cluster(&self) -> Option<crate::placement::ClusterStatus> {
        self.actors.as_ref().and_then(|a| a.cluster())
    }

    /// Learns on `batch` with the local policy.
    ///
    /// # Errors
    /// The policy's error.
    pub fn learn_on_batch(&mut self, batch: &crate::SampleBatch) -> Result<crate::LearnerStats, EvaluatorError> {
        Ok(self.local_mut().policy_mut().learn_on_batch(batch)?)
    }
}
