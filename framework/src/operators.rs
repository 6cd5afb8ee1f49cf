//! Dataflow operators (after RLlib Flow, NeurIPS 2021) that optimizers'
//! `step()` functions are written in: plain async functions, so a new
//! optimizer is a few lines of ordinary code.

use crate::evaluator::Rollout;
use crate::evaluator_set::Evaluators;
use crate::handle::{EvaluatorHandle, HandleError, SharedHandle};
use crate::policy::FlatWeights;
use crate::sample_batch::{BatchError, SampleBatch};
use crate::vector_env::EpisodeSummary;
use futures::future::{join_all, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::Arc;

/// Bulk-synchronous parallel rollouts: every sampler samples once,
/// concurrently; returns when all have answered.
///
/// # Errors
/// The first evaluator that failed for good.
pub async fn parallel_rollouts(evaluators: &Evaluators) -> Result<Vec<Rollout>, HandleError> {
    let samplers = evaluators.samplers();
    join_all(samplers.iter().map(|h| h.sample())).await.into_iter().collect()
}

/// Merges the workers' observation-filter deltas into the driver's filter
/// and sends every worker the merged statistics (RLlib's filter
/// synchronization). Does nothing without a filter or without workers (the
/// driver's own filter then updated itself while sampling).
///
/// # Errors
/// The first worker that failed for good.
pub async fn sync_observation_filters(
    evaluators: &mut Evaluators,
    rollouts: &mut [Rollout],
) -> Result<(), HandleError> {
    if evaluators.num_workers() == 0 {
        return Ok(());
    }
    let statistics = {
        let mut local = evaluators.local_mut();
        let Some(filter) = local.observation_filter_mut() else { return Ok(()) };
        for delta in rollouts.iter_mut().filter_map(|r| r.filter_delta.take()) {
            // A worker whose delta has another width is faulty: fail the
            // step with its error instead of the driver with a panic.
            filter.merge_delta(&delta).map_err(|e| HandleError::Failed {
                index: 0,
                source: crate::EvaluatorError::Config(format!("a worker's rollout: {e}")),
            })?;
        }
        Arc::new(filter.global().clone())
    };
    join_all(evaluators.workers().iter().map(|w| w.set_filter_statistics(statistics.clone())))
        .await
        .into_iter()
        .collect()
}

/// Parallel rollouts that return once `min_count` samplers have answered
/// (straggler mitigation). The other requests are abandoned: their batches,
/// when they arrive, are dropped. Returns the rollouts and how many were
/// dropped.
///
/// # Errors
/// The first evaluator that failed for good.
pub async fn parallel_rollouts_first(
    evaluators: &Evaluators,
    min_count: usize,
) -> Result<(Vec<Rollout>, usize), HandleError> {
    let samplers = evaluators.samplers();
    let mut pending: FuturesUnordered<_> = samplers.iter().map(|h| h.sample()).collect();
    let total = pending.len();
    let mut rollouts = Vec::with_capacity(total);
    while rollouts.len() < min_count.clamp(1, total) {
        match pending.next().await {
            Some(r) => rollouts.push(r?),
            None => break,
        }
    }
    let dropped = total - rollouts.len();
    Ok((rollouts, dropped))
}

/// Concatenates the rollouts' batches and collects their episodes.
///
/// # Errors
/// If the batches have different fields.
pub fn concat_rollouts(rollouts: Vec<Rollout>) -> Result<(SampleBatch, Vec<EpisodeSummary>), BatchError> {
    let mut episodes = Vec::new();
    let mut batches = Vec::with_capacity(rollouts.len());
    for r in rollouts {
        episodes.extend(r.episodes);
        batches.push(r.batch);
    }
    Ok((SampleBatch::concat(&batches)?, episodes))
}

/// Standardizes each named field of `batch` to mean 0, std 1.
///
/// # Errors
/// If a field is missing or not `f32`.
pub fn standardize_fields(batch: &mut SampleBatch, fields: &[String]) -> Result<(), BatchError> {
    fields.iter().try_for_each(|f| batch.standardize(f))
}

/// Sends the local policy's weights to every worker without waiting for
/// them to be applied (see [`EvaluatorHandle::push_weights`](crate::EvaluatorHandle::push_weights)).
pub fn push_weights(evaluators: &Evaluators) {
    if evaluators.num_workers() == 0 {
        return;
    }
    let weights = Arc::new(evaluators.local().policy().get_weights());
    for w in evaluators.workers() {
        w.push_weights(weights.clone());
    }
}

/// Sends the local policy's weights to every worker, concurrently.
///
/// # Errors
/// The first worker that failed for good.
pub async fn broadcast_weights(evaluators: &Evaluators) -> Result<(), HandleError> {
    if evaluators.num_workers() == 0 {
        return Ok(());
    }
    let weights = Arc::new(evaluators.local().policy().get_weights());
    join_all(evaluators.workers().iter().map(|w| w.set_weights(weights.clone()))).await.into_iter().collect()
}

/// A request finished by [`InFlight`]: the handle it went to, the weights
/// version the evaluator used, and the result.
pub struct Completed<T> {
    /// The evaluator that served it, ready for its next request.
    pub worker: SharedHandle,
    /// Version of the weights the evaluator had when it served the request.
    pub version: u64,
    /// What the evaluator returned.
    pub result: Result<T, HandleError>,
}

/// Asynchronous requests to evaluators, completing as they are ready
/// (RLlib Flow's as-ready concurrency). Each request holds a clone of its
/// evaluator's handle, so requests stay in flight across optimizer steps
/// while the optimizer's own handles stay available for checkpoints and
/// metrics.
///
/// Each request runs as a tokio task of its own, so it goes on between
/// steps too. A request that only advanced while the optimizer polled it
/// could stop half-way at the end of a step still holding what it took (a
/// handle's lock while its evaluator moves between nodes), and a call the
/// trainer then made to that evaluator, such as a checkpoint's
/// `SaveState`, waited for it forever. Dropping the `InFlight` aborts the
/// requests still running.
pub struct InFlight<T> {
    requests: FuturesUnordered<BoxFuture<'static, Completed<T>>>,
}

/// A spawned request, aborted if dropped before it finished.
struct Task<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T: Send + 'static> Default for InFlight<T> {
    fn default() -> Self {
        Self { requests: FuturesUnordered::new() }
    }
}

impl<T: Send + 'static> InFlight<T> {
    /// Sends `worker` the weights (if any, with their version) and then the
    /// request `call`, e.g. `|w| w.sample()`.
    pub fn send<F>(&mut self, worker: SharedHandle, weights: Option<(Arc<FlatWeights>, u64)>, version: u64, call: F)
    where
        F: for<'a> FnOnce(&'a dyn EvaluatorHandle) -> BoxFuture<'a, Result<T, HandleError>> + Send + 'static,
    {
        let index = worker.index();
        let spare = worker.clone();
        let mut task = Task(tokio::spawn(async move {
            let version = match weights {
                Some((w, v)) => match worker.set_weights(w).await {
                    Ok(()) => v,
                    Err(e) => return Completed { worker, version, result: Err(e) },
                },
                None => version,
            };
            let result = call(worker.as_ref()).await;
            Completed { worker, version, result }
        }));
        self.requests.push(Box::pin(async move {
            (&mut task.0).await.unwrap_or_else(|e| Completed {
                worker: spare,
                version,
                result: Err(HandleError::Unreachable { index, reason: format!("its request's task ended: {e}") }),
            })
        }));
    }

    /// The next request to finish; `None` if none is in flight.
    pub async fn next(&mut self) -> Option<Completed<T>> {
        self.requests.next().await
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// Concatenates incoming batches until they hold at least `min_size` rows
/// (RLlib Flow's `ConcatBatches`), remembering a tag per batch (e.g. the
/// weights version that sampled it) with its row count.
pub struct ConcatBatches<T> {
    min_size: usize,
    pending: Vec<SampleBatch>,
    tags: Vec<(T, usize)>,
    rows: usize,
}

impl<T> ConcatBatches<T> {
    /// Emits batches of at least `min_size` rows.
    pub fn new(min_size: usize) -> Self {
        Self { min_size, pending: Vec::new(), tags: Vec::new(), rows: 0 }
    }

    /// Adds a batch; once `min_size` rows are pending, returns their
    /// concatenation and the tags of its parts.
    ///
    /// # Errors
    /// If the batches have different fields.
    pub fn push(&mut self, batch: SampleBatch, tag: T) -> Result<Option<(SampleBatch, Vec<(T, usize)>)>, BatchError> {
        self.rows += batch.len();
        self.tags.push((tag, batch.len()));
        self.pending.push(batch);
        if self.rows < self.min_size {
            return Ok(None);
        }
        let batch = SampleBatch::concat(&self.pending)?;
        self.pending.clear();
        self.rows = 0;
        Ok(Some((batch, std::mem::take(&mut self.tags))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::HandleStats;
    use crate::protocol::{EvalReply, EvalRequest};
    use std::time::Duration;

    /// A handle that serves nothing: the requests below bring their work.
    struct Idle(usize);

    #[async_trait::async_trait]
    impl EvaluatorHandle for Idle {
        fn index(&self) -> usize {
            self.0
        }
        async fn call(&self, _: EvalRequest) -> Result<EvalReply, HandleError> {
            Err(HandleError::Unreachable { index: self.0, reason: "idle".into() })
        }
        fn cast(&self, _: EvalRequest) {}
        fn stats(&self) -> HandleStats {
            HandleStats::default()
        }
    }

    /// A request still running when a step has what it needs goes on by
    /// itself, and lets go of what it holds (here a lock, as a cluster
    /// handle holds its own while its evaluator moves between nodes)
    /// without the optimizer polling it: a call between steps, such as a
    /// checkpoint's, gets the lock. Before, it waited forever (an IMPALA
    /// driver stalled this way in the chaos run of 2026-12-01).
    #[tokio::test]
    async fn a_request_left_in_flight_between_steps_still_finishes() {
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        let mut in_flight = InFlight::<u32>::default();
        let held = lock.clone();
        in_flight.send(Arc::new(Idle(1)), None, 0, move |_| {
            Box::pin(async move {
                let _guard = held.lock().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(1)
            })
        });
        in_flight.send(Arc::new(Idle(2)), None, 0, |_| Box::pin(async { Ok(2) }));
        let first = in_flight.next().await.expect("two in flight");
        assert_eq!((first.worker.index(), first.result.unwrap()), (2, 2));
        // The step ends here, with request 1 holding the lock.
        let got = tokio::time::timeout(Duration::from_secs(5), lock.lock()).await;
        assert!(got.is_ok(), "the request left in flight kept its lock");
        drop(got);
        let second = in_flight.next().await.expect("one in flight");
        assert_eq!((second.worker.index(), second.result.unwrap()), (1, 1));
        assert!(in_flight.is_empty());
    }

    #[test]
    fn concat_batches_emits_at_the_minimum_size_with_tags() {
        let batch = |n: usize| {
            let mut b = SampleBatch::new();
            b.insert_f32("x", vec![1.0; n], 1).unwrap();
            b
        };
        let mut c = ConcatBatches::new(5);
        assert!(c.push(batch(2), 'a').unwrap().is_none());
        assert!(c.push(batch(2), 'b').unwrap().is_none());
        let (out, tags) = c.push(batch(3), 'c').unwrap().unwrap();
        assert_eq!(out.len(), 7);
        assert_eq!(tags, vec![('a', 2), ('b', 2), ('c', 3)]);
        assert!(c.push(batch(1), 'd').unwrap().is_none());
    }
}
