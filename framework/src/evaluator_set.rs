//! [`Evaluators`]: the driver's local evaluator plus handles to the workers.
//!
//! The local evaluator (index 0) holds the policy the learner updates; with
//! `num_workers = 0` it also samples. Workers (indices 1..=num_workers) are
//! supervised ractor actors by default.

use crate::actor::RactorEvaluatorSet;
use crate::evaluator::{EvaluatorError, EvaluatorFactory, PolicyEvaluator};
use crate::handle::{EvaluatorHandle, HandleError, HandleStats, LocalEvaluator};
use crate::placement::{self, PlacedWorkers, WorkerSet};
use crate::restart::RestartPolicy;
use std::collections::BTreeMap;

/// The local evaluator and the worker handles an optimizer drives.
pub struct Evaluators {
    local: LocalEvaluator,
    workers: Vec<Box<dyn EvaluatorHandle>>,
    /// Counters of workers lent out to in-flight requests, as last seen.
    lent: BTreeMap<usize, HandleStats>,
    /// Keeps the worker actors alive (dropping it stops them) and counts restarts.
    actors: Option<Box<dyn WorkerSet>>,
}

impl Evaluators {
    /// Builds the local evaluator and `num_workers` supervised workers from
    /// `factory`: ractor actors in this process, or wherever the
    /// [`Placement`](crate::placement::Placement) in scope puts them.
    ///
    /// # Errors
    /// If an evaluator cannot be built; the error names which.
    pub async fn spawn(
        factory: EvaluatorFactory,
        num_workers: usize,
        restart: RestartPolicy,
    ) -> Result<Self, HandleError> {
        let local = factory(0, 0).map_err(|source| HandleError::Failed { index: 0, source })?;
        let indices: Vec<usize> = (1..=num_workers).collect();
        let (actors, workers) = match placement::current() {
            Some(placement) => {
                let PlacedWorkers { handles, keep_alive } = placement.place(factory, indices, restart).await?;
                (Some(keep_alive), handles)
            }
            None if num_workers == 0 => (None, Vec::new()),
            None => {
                let (set, handles) = RactorEvaluatorSet::spawn(factory, indices, restart).await?;
                let set: Box<dyn WorkerSet> = Box::new(set);
                (Some(set), handles.into_iter().map(|h| Box::new(h) as Box<dyn EvaluatorHandle>).collect())
            }
        };
        Ok(Self { local: LocalEvaluator::new(0, local), workers, lent: BTreeMap::new(), actors })
    }

    /// Wraps evaluators built elsewhere (e.g. remote ones). Whoever owns the
    /// workers' actors must keep them alive.
    pub fn from_parts(local: PolicyEvaluator, workers: Vec<Box<dyn EvaluatorHandle>>) -> Self {
        Self { local: LocalEvaluator::new(0, local), workers, lent: BTreeMap::new(), actors: None }
    }

    /// The driver's evaluator, whose policy the learner trains.
    pub fn local(&self) -> &PolicyEvaluator {
        self.local.evaluator()
    }

    /// The driver's evaluator, mutably.
    pub fn local_mut(&mut self) -> &mut PolicyEvaluator {
        self.local.evaluator_mut()
    }

    /// The driver's evaluator as a handle.
    pub fn local_handle(&mut self) -> &mut LocalEvaluator {
        &mut self.local
    }

    /// The worker handles.
    pub fn workers(&mut self) -> &mut [Box<dyn EvaluatorHandle>] {
        &mut self.workers
    }

    /// The handles that sample: the workers, or the local evaluator when
    /// there are none.
    pub fn samplers(&mut self) -> Vec<&mut dyn EvaluatorHandle> {
        if self.workers.is_empty() {
            vec![&mut self.local as &mut dyn EvaluatorHandle]
        } else {
            self.workers.iter_mut().map(|w| w.as_mut() as &mut dyn EvaluatorHandle).collect()
        }
    }

    /// Number of worker evaluators (0 when the driver samples itself),
    /// including those lent out.
    pub fn num_workers(&self) -> usize {
        self.workers.len() + self.lent.len()
    }

    /// Restarts of worker evaluators so far: the supervisor's count for
    /// actor workers; otherwise what the handles last reported.
    pub fn num_restarts(&self) -> u64 {
        match &self.actors {
            Some(set) => set.restarts(),
            None => self.worker_stats().map(|s| s.restarts).sum(),
        }
    }

    /// Env shard restarts the samplers' rollouts have reported so far.
    pub fn num_env_shard_restarts(&self) -> u64 {
        self.worker_stats().map(|s| s.env_shard_restarts).sum::<u64>() + self.local.stats().env_shard_restarts
    }

    /// Every worker's counters: the handles at home as they are now, those
    /// lent out as last seen.
    fn worker_stats(&self) -> impl Iterator<Item = HandleStats> + '_ {
        self.workers.iter().map(|w| w.stats()).chain(self.lent.values().copied())
    }

    /// Failures of the workers' deployment so far (lost nodes, re-placed
    /// evaluators); empty for workers in this process.
    pub fn failures(&self) -> Vec<String> {
        self.actors.as_ref().map(|a| a.failures()).unwrap_or_default()
    }

    /// Lends every worker handle out, for asynchronous optimizers that keep
    /// requests in flight across steps (each request owns its handle).
    /// Return them with [`return_worker`](Self::return_worker).
    pub fn take_workers(&mut self) -> Vec<Box<dyn EvaluatorHandle>> {
        for w in &self.workers {
            self.lent.insert(w.index(), w.stats());
        }
        std::mem::take(&mut self.workers)
    }

    /// Takes back a lent worker handle.
    pub fn return_worker(&mut self, worker: Box<dyn EvaluatorHandle>) {
        self.lent.remove(&worker.index());
        self.workers.push(worker);
        self.workers.sort_by_key(|w| w.index());
    }

    /// Updates the counters of a worker that is still lent out.
    pub fn note_lent_stats(&mut self, index: usize, stats: HandleStats) {
        self.lent.insert(index, stats);
    }

    /// Books the finished request of a lent worker: records its counters
    /// and, if the request failed, takes the worker back and returns the
    /// error (the optimizer's step then fails with it).
    ///
    /// # Errors
    /// The request's error.
    pub fn finish_request<T>(
        &mut self,
        worker: Box<dyn EvaluatorHandle>,
        result: Result<T, HandleError>,
    ) -> Result<(Box<dyn EvaluatorHandle>, T), HandleError> {
        self.note_lent_stats(worker.index(), worker.stats());
        match result {
            Ok(value) => Ok((worker, value)),
            Err(e) => {
                self.return_worker(worker);
                Err(e)
            }
        }
    }

    /// Learns on `batch` with the local policy.
    ///
    /// # Errors
    /// The policy's error.
    pub fn learn_on_batch(&mut self, batch: &crate::SampleBatch) -> Result<crate::LearnerStats, EvaluatorError> {
        Ok(self.local_mut().policy_mut().learn_on_batch(batch)?)
    }
}
