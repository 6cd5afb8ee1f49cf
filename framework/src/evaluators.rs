//! [`Evaluators`]: the driver's local evaluator plus handles to the workers.
//!
//! The local evaluator (index 0) holds the policy the learner updates; with
//! `num_workers = 0` it also samples. Workers (indices 1..=num_workers) are
//! supervised ractor actors by default.

use crate::actor::{ActorEvaluatorSet, RestartPolicy};
use crate::evaluator::{EvaluatorError, EvaluatorFactory, PolicyEvaluator};
use crate::handle::{EvaluatorHandle, HandleError, LocalEvaluator};

/// The local evaluator and the worker handles an optimizer drives.
pub struct Evaluators {
    local: LocalEvaluator,
    workers: Vec<Box<dyn EvaluatorHandle>>,
    // Keeps the worker actors alive; dropping it stops them.
    _actors: Option<ActorEvaluatorSet>,
}

impl Evaluators {
    /// Builds the local evaluator and `num_workers` supervised actor
    /// evaluators from `factory`.
    ///
    /// # Errors
    /// If an evaluator cannot be built; the error names which.
    pub async fn spawn(
        factory: EvaluatorFactory,
        num_workers: usize,
        restart: RestartPolicy,
    ) -> Result<Self, HandleError> {
        let local = factory(0, 0).map_err(|source| HandleError::Failed { index: 0, source })?;
        let (actors, workers) = if num_workers == 0 {
            (None, Vec::new())
        } else {
            let (set, handles) = ActorEvaluatorSet::spawn(factory, (1..=num_workers).collect(), restart).await?;
            (Some(set), handles.into_iter().map(|h| Box::new(h) as Box<dyn EvaluatorHandle>).collect())
        };
        Ok(Self { local: LocalEvaluator::new(0, local), workers, _actors: actors })
    }

    /// Wraps evaluators built elsewhere (e.g. remote ones). Whoever owns the
    /// workers' actors must keep them alive.
    pub fn from_parts(local: PolicyEvaluator, workers: Vec<Box<dyn EvaluatorHandle>>) -> Self {
        Self { local: LocalEvaluator::new(0, local), workers, _actors: None }
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

    /// Number of worker evaluators (0 when the driver samples itself).
    pub fn num_workers(&self) -> usize {
        self.workers.len()
    }

    /// Restarts of worker evaluators so far.
    pub fn num_restarts(&self) -> u64 {
        self.workers.iter().map(|w| w.stats().restarts).sum()
    }

    /// Learns on `batch` with the local policy.
    ///
    /// # Errors
    /// The policy's error.
    pub fn learn_on_batch(&mut self, batch: &crate::SampleBatch) -> Result<crate::LearnerStats, EvaluatorError> {
        Ok(self.local_mut().policy_mut().learn_on_batch(batch)?)
    }
}
