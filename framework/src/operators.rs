//! Dataflow operators (after RLlib Flow, NeurIPS 2021) that optimizers'
//! `step()` functions are written in: plain async functions, so a new
//! optimizer is a few lines of ordinary code.

use crate::evaluator::Rollout;
use crate::evaluators::Evaluators;
use crate::handle::HandleError;
use crate::sample_batch::{BatchError, SampleBatch};
use crate::vector_env::EpisodeSummary;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::Arc;

/// Bulk-synchronous parallel rollouts: every sampler samples once,
/// concurrently; returns when all have answered.
///
/// # Errors
/// The first evaluator that failed for good.
pub async fn parallel_rollouts(evaluators: &mut Evaluators) -> Result<Vec<Rollout>, HandleError> {
    join_all(evaluators.samplers().into_iter().map(|h| h.sample())).await.into_iter().collect()
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
    let Some(filter) = evaluators.local_mut().observation_filter_mut() else { return Ok(()) };
    for delta in rollouts.iter_mut().filter_map(|r| r.filter_delta.take()) {
        filter.merge_delta(&delta);
    }
    let statistics = Arc::new(filter.global().clone());
    join_all(evaluators.workers().iter_mut().map(|w| w.set_filter_statistics(statistics.clone())))
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
    evaluators: &mut Evaluators,
    min_count: usize,
) -> Result<(Vec<Rollout>, usize), HandleError> {
    let mut pending: FuturesUnordered<_> = evaluators.samplers().into_iter().map(|h| h.sample()).collect();
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
pub fn push_weights(evaluators: &mut Evaluators) {
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
pub async fn broadcast_weights(evaluators: &mut Evaluators) -> Result<(), HandleError> {
    if evaluators.num_workers() == 0 {
        return Ok(());
    }
    let weights = Arc::new(evaluators.local().policy().get_weights());
    join_all(evaluators.workers().iter_mut().map(|w| w.set_weights(weights.clone()))).await.into_iter().collect()
}
