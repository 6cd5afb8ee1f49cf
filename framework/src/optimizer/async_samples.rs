//! [`AsyncSamplesOptimizer`]: asynchronous sampling with a learner thread
//! (IMPALA, Espeholt et al. 2018).
//!
//! ```text
//! workers ──batches──▶ [aggregators] ──▶ bounded queue ──▶ learner thread
//!    ▲                                                        │
//!    └──── weights, every `broadcast_interval` batches ◀──────┘
//! ```
//!
//! Workers sample continuously with the weights they last received, which
//! may be a few learner updates old: the loss must correct for it (V-trace).
//! The driver forwards each batch towards the learner and immediately asks
//! that worker for its next one; every `broadcast_interval` batches of a
//! worker it first sends the learner's latest weights. The learner runs on
//! its own OS thread, concatenating batches to `train_batch_size` rows and
//! learning; the queue in front of it is bounded, so a slow learner slows
//! sampling instead of growing memory. With `num_aggregation_workers > 0`,
//! that many aggregation actors (nested under the optimizer) do the
//! concatenation in parallel and hand the learner whole train batches.
//!
//! Staleness is measured, not hidden: every batch carries the version of the
//! weights that sampled it, and the learner reports `policy_lag_mean` and
//! `policy_lag_max` (learner updates between sampling and training).

use super::{OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator::{EvaluatorError, Rollout};
use crate::evaluator_set::Evaluators;
use crate::handle::HandleError;
use crate::operators::{Completed, ConcatBatches, InFlight};
use crate::policy::{FlatWeights, LearnerStats, PolicyGraph};
use crate::sample_batch::SampleBatch;
use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Settings of [`AsyncSamplesOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct AsyncSamplesConfig {
    /// Rows per learner update.
    pub train_batch_size: usize,
    /// Batches that may wait for the learner before sampling is held back.
    pub learner_queue_size: usize,
    /// A worker receives fresh weights every this many of its batches.
    pub broadcast_interval: usize,
    /// Env steps sampled per `step()` (one reporting iteration).
    pub steps_per_iteration: usize,
    /// Aggregation actors concatenating batches for the learner (0: the
    /// learner thread concatenates).
    pub num_aggregation_workers: usize,
}

/// A batch on its way to the learner, with the weights versions that
/// sampled its parts and their row counts (lag accounting).
struct Item {
    batch: SampleBatch,
    versions: Vec<(u64, usize)>,
}

/// What the learner thread reports after each update.
struct LearnerReport {
    stats: LearnerStats,
    steps_trained: u64,
}

/// The learner's latest weights and their version (updates so far),
/// shared between the learner thread and the driver.
#[derive(Clone)]
pub(super) struct Published(Arc<Mutex<(Arc<FlatWeights>, u64)>>);

impl Published {
    /// `weights` as version 0.
    pub(super) fn new(weights: FlatWeights) -> Self {
        Self(Arc::new(Mutex::new((Arc::new(weights), 0))))
    }

    /// The latest weights and their version.
    pub(super) fn latest(&self) -> (Arc<FlatWeights>, u64) {
        let guard = self.0.lock().expect("learner lock");
        (guard.0.clone(), guard.1)
    }

    /// The latest version.
    pub(super) fn version(&self) -> u64 {
        self.0.lock().expect("learner lock").1
    }

    /// Publishes `weights` as the next version.
    pub(super) fn publish(&self, weights: Arc<FlatWeights>) {
        let mut guard = self.0.lock().expect("learner lock");
        *guard = (weights, guard.1 + 1);
    }
}

/// Weights the learner thread must adopt before its next update (a
/// restored checkpoint's).
pub(super) type Pending = Arc<Mutex<Option<Arc<FlatWeights>>>>;

/// Restored weights for a learner thread: adopted before its next update,
/// and published at once (as a new version) for the next weight sync.
pub(super) fn hand_to_learner(pending: &Pending, published: &Published, weights: Arc<FlatWeights>) {
    *pending.lock().expect("learner lock") = Some(weights.clone());
    published.publish(weights);
}

/// Asynchronous sampling, a learner thread, weights every k batches.
pub struct AsyncSamplesOptimizer {
    config: AsyncSamplesConfig,
    in_flight: InFlight<Rollout>,
    batches_since_weights: HashMap<usize, usize>,
    to_learner: Option<mpsc::Sender<Item>>,
    aggregators: Vec<ActorRef<AggregatorMsg>>,
    next_aggregator: usize,
    reports: std::sync::mpsc::Receiver<Result<LearnerReport, EvaluatorError>>,
    published: Published,
    pending: Pending,
}

/// The learner thread: concatenates queued batches to `batch_size` rows,
/// learns, publishes the new weights, reports. Ends when the queue closes
/// or learning fails (after reporting the error).
fn run_learner(
    mut learner: Box<dyn PolicyGraph>,
    mut queue: mpsc::Receiver<Item>,
    batch_size: usize,
    published: Published,
    pending: Pending,
    reports: std::sync::mpsc::Sender<Result<LearnerReport, EvaluatorError>>,
) {
    let mut concat = ConcatBatches::new(batch_size);
    while let Some(item) = queue.blocking_recv() {
        let (batch, tags) = match concat.push(item.batch, item.versions) {
            Ok(None) => continue,
            Ok(Some(ready)) => ready,
            Err(e) => {
                let _ = reports.send(Err(e.into()));
                return;
            }
        };
        if let Some(w) = pending.lock().expect("learner lock").take() {
            if let Err(e) = learner.set_weights(&w) {
                let _ = reports.send(Err(e.into()));
                return;
            }
        }
        let version = published.version();
        let lags: Vec<(u64, usize)> =
            tags.into_iter().flat_map(|(v, _)| v).map(|(v, n)| (version - v.min(version), n)).collect();
        let mut stats = match learner.learn_on_batch(&batch) {
            Ok(stats) => stats,
            Err(e) => {
                let _ = reports.send(Err(e.into()));
                return;
            }
        };
        published.publish(Arc::new(learner.get_weights()));
        let rows: usize = lags.iter().map(|l| l.1).sum();
        let mean = lags.iter().map(|&(l, n)| l as f64 * n as f64).sum::<f64>() / rows.max(1) as f64;
        stats.set("policy_lag_mean", mean);
        stats.set("policy_lag_max", lags.iter().map(|l| l.0).max().unwrap_or(0) as f64);
        if reports.send(Ok(LearnerReport { stats, steps_trained: batch.len() as u64 })).is_err() {
            return;
        }
    }
}

impl AsyncSamplesOptimizer {
    /// Starts the learner thread with `learner` (a policy with the same
    /// initial weights as the evaluators') and, if configured, the
    /// aggregation actors.
    ///
    /// # Errors
    /// If an aggregation actor fails to start.
    pub async fn new(learner: Box<dyn PolicyGraph>, config: AsyncSamplesConfig) -> Result<Self, HandleError> {
        let (tx, rx) = mpsc::channel::<Item>(config.learner_queue_size.max(1));
        let (report_tx, reports) = std::sync::mpsc::channel();
        let published = Published::new(learner.get_weights());
        let (shared, batch_size) = (published.clone(), config.train_batch_size);
        let pending: Pending = Arc::default();
        let learner_pending = pending.clone();
        // Detached: it ends when the queue closes (the optimizer is dropped).
        std::thread::Builder::new()
            .name("rlx-learner".into())
            .spawn(move || run_learner(learner, rx, batch_size, shared, learner_pending, report_tx))
            .map_err(|e| HandleError::Spawn { index: 0, reason: format!("learner thread: {e}") })?;
        let mut aggregators = Vec::new();
        for _ in 0..config.num_aggregation_workers {
            let args = AggregatorArgs { to_learner: tx.clone(), batch_size };
            let (actor, _) = Actor::spawn(None, Aggregator, args)
                .await
                .map_err(|e| HandleError::Spawn { index: 0, reason: format!("aggregation actor: {e}") })?;
            aggregators.push(actor);
        }
        Ok(Self {
            config,
            in_flight: InFlight::default(),
            batches_since_weights: HashMap::new(),
            to_learner: Some(tx),
            aggregators,
            next_aggregator: 0,
            reports,
            published,
            pending,
        })
    }

    fn latest(&self) -> (Arc<FlatWeights>, u64) {
        self.published.latest()
    }

    /// Hands a batch to an aggregator (round-robin) or straight to the learner.
    async fn forward(&mut self, batch: SampleBatch, version: u64) -> Result<(), OptimizerError> {
        let result = self.send_to_learner(batch, version).await;
        if result.is_err() {
            // The learner thread ended: report why, if it said.
            if let Ok(Err(cause)) = self.reports.try_recv() {
                return Err(cause.into());
            }
        }
        result
    }

    async fn send_to_learner(&mut self, batch: SampleBatch, version: u64) -> Result<(), OptimizerError> {
        let gone = || OptimizerError::Learner(EvaluatorError::Config("the learner thread stopped".into()));
        if self.aggregators.is_empty() {
            let tx = self.to_learner.as_ref().ok_or_else(gone)?;
            let versions = vec![(version, batch.len())];
            tx.send(Item { batch, versions }).await.map_err(|_| gone())
        } else {
            let i = self.next_aggregator % self.aggregators.len();
            self.next_aggregator += 1;
            ractor::call!(self.aggregators[i], AggregatorMsg::Add, batch, version).map_err(|e| {
                OptimizerError::Evaluator(HandleError::Unreachable {
                    index: 0,
                    reason: format!("aggregation actor {i}: {e}"),
                })
            })
        }
    }

    /// Collects the learner's reports so far.
    fn drain_reports(&mut self, out: &mut StepStats, all: &mut Vec<LearnerStats>) -> Result<(), OptimizerError> {
        while let Ok(report) = self.reports.try_recv() {
            let report = report?;
            out.steps_trained += report.steps_trained;
            all.push(report.stats);
        }
        Ok(())
    }

    /// Counts a rollout and hands its batch to the learner.
    async fn take(&mut self, rollout: Rollout, version: u64, out: &mut StepStats) -> Result<(), OptimizerError> {
        out.steps_sampled += rollout.batch.len() as u64;
        out.episodes.extend(rollout.episodes);
        self.forward(rollout.batch, version).await
    }

    /// The latest weights if evaluator `i` has sampled
    /// `broadcast_interval` batches since it last got some.
    fn weights_due(&mut self, i: usize) -> Option<(Arc<FlatWeights>, u64)> {
        let batches = self.batches_since_weights.entry(i).or_default();
        *batches += 1;
        if *batches < self.config.broadcast_interval {
            return None;
        }
        *batches = 0;
        Some(self.latest())
    }
}

#[async_trait]
impl PolicyOptimizer for AsyncSamplesOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let (mut out, mut all) = (StepStats::default(), Vec::new());
        if self.in_flight.is_empty() {
            let latest = self.latest();
            for w in evaluators.samplers() {
                self.in_flight.send(w, Some(latest.clone()), latest.1, |w| w.sample());
            }
        }
        while (out.steps_sampled as usize) < self.config.steps_per_iteration {
            let Completed { worker, version, result } =
                self.in_flight.next().await.expect("every sampler has a request in flight");
            self.take(result?, version, &mut out).await?;
            let weights = self.weights_due(worker.index());
            self.in_flight.send(worker, weights, version, |w| w.sample());
            self.drain_reports(&mut out, &mut all)?;
        }
        // Keep the driver's copy current for checkpoints and evaluation.
        let (weights, _) = self.latest();
        evaluators.local_mut().set_weights(&weights)?;
        out.learner = LearnerStats::mean(&all);
        Ok(out)
    }

    /// Hands the weights to the learner thread (adopted before its next
    /// update) and publishes them, so later broadcasts send them.
    fn weights_restored(&mut self, weights: &Arc<FlatWeights>) {
        hand_to_learner(&self.pending, &self.published, weights.clone());
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec![
            "the learner thread's optimizer state (Adam moments) and the batches queued for it are not saved".into(),
            super::IN_FLIGHT_GAP.into(),
        ]
    }
}

impl Drop for AsyncSamplesOptimizer {
    fn drop(&mut self) {
        // Stopping the aggregators and dropping our sender closes the queue;
        // the learner thread ends after its current update.
        for a in &self.aggregators {
            a.stop(None);
        }
    }
}

/// Messages of an aggregation actor.
pub enum AggregatorMsg {
    /// A batch sampled with weights `version`; the reply says it was queued.
    Add(SampleBatch, u64, ractor::RpcReplyPort<()>),
}

impl ractor::Message for AggregatorMsg {}

/// Concatenates batches into train batches for the learner.
pub struct Aggregator;

/// Arguments of an [`Aggregator`].
pub struct AggregatorArgs {
    to_learner: mpsc::Sender<Item>,
    batch_size: usize,
}

/// An aggregator's pending batches.
pub struct AggregatorState {
    to_learner: mpsc::Sender<Item>,
    concat: ConcatBatches<u64>,
}

impl Actor for Aggregator {
    type Msg = AggregatorMsg;
    type State = AggregatorState;
    type Arguments = AggregatorArgs;

    async fn pre_start(
        &self,
        _: ActorRef<AggregatorMsg>,
        args: AggregatorArgs,
    ) -> Result<AggregatorState, ActorProcessingErr> {
        Ok(AggregatorState { to_learner: args.to_learner, concat: ConcatBatches::new(args.batch_size) })
    }

    async fn handle(
        &self,
        _: ActorRef<AggregatorMsg>,
        msg: AggregatorMsg,
        s: &mut AggregatorState,
    ) -> Result<(), ActorProcessingErr> {
        let AggregatorMsg::Add(batch, version, reply) = msg;
        if let Some((batch, versions)) = s.concat.push(batch, version)? {
            // Waits while the learner's queue is full: backpressure.
            s.to_learner.send(Item { batch, versions }).await.map_err(|_| "the learner thread stopped")?;
        }
        let _ = reply.send(());
        Ok(())
    }
}
