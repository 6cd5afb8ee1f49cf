//! [`AsyncReplayOptimizer`]: distributed prioritized experience replay
//! (Ape-X, Horgan et al., ICLR 2018).
//!
//! ```text
//!  evaluators ──batch + initial priorities──▶ a random replay shard (actor)
//!      ▲                                           │ replayed minibatch
//!      │ weights every max_weight_sync_delay       ▼
//!      │ steps of that evaluator            learner thread
//!      └──────────────────────────────────────────┤
//!                        new priorities ──▶ the shard it came from
//! ```
//!
//! Evaluators sample continuously with the weights they last received and
//! compute each row's TD error themselves, so a batch reaches its shard
//! already prioritized (the Ape-X paper's point: the learner never spends
//! time on priorities of new data). The driver forwards each batch to a
//! shard chosen at random and immediately asks that evaluator for its next
//! one. Once the shards hold `learning_starts` transitions, the driver keeps
//! up to `learner_queue_size` replayed minibatches (taken from the shards in
//! turn) queued for the learner thread, which learns, recomputes the
//! minibatch's TD errors and publishes its weights; the driver sends the
//! priorities back to the shard.
//!
//! `training_intensity`, when set, holds replay to that many replayed rows
//! per sampled row in both directions: the learner gets no more, and an
//! evaluator whose batch arrives while the learner is more than
//! `learner_queue_size` minibatches behind waits (its next request is held
//! back) until the learner catches up. Results then do not depend on how
//! fast sampling is next to learning, which on a small machine with cheap
//! envs would otherwise be most of the story. Unset, sampling and learning
//! both run flat out, as in the paper.
//!
//! Replay shards are supervised actors ([`ReplayShards`]): a shard that
//! dies is restarted empty, and the transitions it held are counted in
//! `learner.replay_lost_transitions` of every later result.

use super::async_samples::{hand_to_learner, Pending, Published};
use super::{summarize_updates, OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator::{EvaluatorError, Rollout};
use crate::evaluator_set::Evaluators;
use crate::handle::{panic_message, SharedHandle};
use crate::operators::{Completed, InFlight};
use crate::policy::{FlatWeights, LearnerStats, PolicyGraph};
use crate::replay::{take_td_errors, FrameLayout, PrioritizedReplayConfig, ReplayError, ReplayShards, ShardArgs};
use crate::restart::{RestartPolicy, RestartStrategy};
use crate::sample_batch::SampleBatch;
use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Settings of [`AsyncReplayOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct AsyncReplayConfig {
    /// Replay shard actors.
    pub num_replay_shards: usize,
    /// Transitions all shards hold together (each holds an equal share).
    pub buffer_size: usize,
    /// Prioritized replay's settings; `None` replays uniformly.
    pub prioritized: Option<PrioritizedReplayConfig>,
    /// Transitions stored (all shards) before learning starts.
    pub learning_starts: usize,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// Replayed rows per sampled row, enforced both ways (see the module
    /// docs); `None`: sampling and learning each run as fast as they can.
    pub training_intensity: Option<f64>,
    /// An evaluator receives the learner's weights after sampling this many
    /// env steps since it last did.
    pub max_weight_sync_delay: usize,
    /// Replayed minibatches queued for the learner thread.
    pub learner_queue_size: usize,
    /// Env steps sampled per [`step`](PolicyOptimizer::step).
    pub timesteps_per_iteration: usize,
    /// How the shards are restarted.
    pub shard_restart: RestartPolicy,
    /// Seeds the shard choice and the shards' sampling.
    pub seed: u64,
    /// Store image observations as shared frames of bytes
    /// ([`ReplayBuffer::share_frames`](crate::replay::ReplayBuffer::share_frames));
    /// `None` stores rows as they come (bytes for a `uint8` space, `f32`
    /// otherwise).
    pub frames: Option<FrameLayout>,
}

impl AsyncReplayConfig {
    fn check(&self) -> Result<(), ReplayError> {
        let bad = |what: String| Err(ReplayError::Invalid(what));
        if self.num_replay_shards == 0 || self.buffer_size < self.num_replay_shards {
            return bad(format!(
                "num_replay_shards ({}) must be >= 1 and buffer_size ({}) at least one transition per shard",
                self.num_replay_shards, self.buffer_size
            ));
        }
        let room = self.buffer_size / self.num_replay_shards * self.num_replay_shards;
        if self.learning_starts > room {
            return bad(format!(
                "learning_starts ({}) exceeds what {} shards of buffer_size / num_replay_shards hold ({room}): learning would never start",
                self.learning_starts, self.num_replay_shards
            ));
        }
        if self.shard_restart.strategy != RestartStrategy::OneForOne {
            return bad("replay shards are independent: shard_restart.strategy must be one_for_one".into());
        }
        if self.train_batch_size == 0 || self.learner_queue_size == 0 || self.max_weight_sync_delay == 0 {
            return bad("train_batch_size, learner_queue_size and max_weight_sync_delay must be >= 1".into());
        }
        if let Some(ti) = self.training_intensity.filter(|ti| !(*ti > 0.0 && ti.is_finite())) {
            return bad(format!("training_intensity must be > 0, got {ti}"));
        }
        Ok(())
    }
}

/// A replayed minibatch on its way to the learner, with the shard (and its
/// generation) its priorities go back to.
struct Replayed {
    batch: SampleBatch,
    shard: usize,
    generation: u64,
}

/// What the learner thread sends back after each update.
struct LearnerReport {
    replayed: Replayed,
    td_errors: Option<Vec<f32>>,
    stats: LearnerStats,
}

/// Ape-X: evaluators into replay shards, a learner thread out of them.
pub struct AsyncReplayOptimizer {
    config: AsyncReplayConfig,
    shards: ReplayShards,
    rng: ChaCha8Rng,
    in_flight: InFlight<Rollout>,
    /// Evaluators held back while the learner catches up, with the weights
    /// version they last had.
    parked: Vec<(SharedHandle, u64)>,
    steps_since_sync: HashMap<usize, usize>,
    to_learner: std::sync::mpsc::Sender<Replayed>,
    reports: mpsc::UnboundedReceiver<Result<LearnerReport, EvaluatorError>>,
    published: Published,
    pending: Pending,
    /// Minibatches handed to the learner and not yet reported.
    outstanding: usize,
    steps_sampled: u64,
    /// Env steps sampled while the shards held `learning_starts`: the
    /// clock `training_intensity` runs on (it stops while shards lost to a
    /// failure refill, so no backlog of owed updates builds up).
    steps_while_learning: u64,
    rows_replayed: u64,
    rows_trained: u64,
    next_replay_shard: usize,
}

/// The learner thread: learn on each replayed minibatch, recompute its TD
/// errors (prioritized replay), publish the weights, report. A panic in the
/// policy is reported as an error; the thread ends when the queue closes or
/// after an error.
fn run_learner(
    mut policy: Box<dyn PolicyGraph>,
    queue: std::sync::mpsc::Receiver<Replayed>,
    reports: mpsc::UnboundedSender<Result<LearnerReport, EvaluatorError>>,
    published: Published,
    pending: Pending,
    prioritized: bool,
) {
    while let Ok(replayed) = queue.recv() {
        let update = catch_unwind(AssertUnwindSafe(|| -> Result<_, EvaluatorError> {
            if let Some(w) = pending.lock().expect("learner lock").take() {
                policy.set_weights(&w)?;
            }
            let (stats, td_errors) = if prioritized {
                let (stats, td) = policy.learn_with_td_errors(&replayed.batch)?;
                (stats, Some(td))
            } else {
                (policy.learn_on_batch(&replayed.batch)?, None)
            };
            Ok((stats, td_errors, policy.get_weights()))
        }));
        let report = match update {
            Ok(Ok((stats, td_errors, weights))) => {
                published.publish(Arc::new(weights));
                Ok(LearnerReport { replayed, td_errors, stats })
            }
            Ok(Err(e)) => Err(e),
            Err(panic) => Err(EvaluatorError::Panicked(format!("learner: {}", panic_message(&*panic)))),
        };
        let failed = report.is_err();
        if reports.send(report).is_err() || failed {
            return;
        }
    }
}

impl AsyncReplayOptimizer {
    /// Starts the replay shards and the learner thread with `learner` (a
    /// policy with the same initial weights as the evaluators').
    ///
    /// # Errors
    /// Settings out of range, or a shard that fails to start.
    pub async fn new(learner: Box<dyn PolicyGraph>, config: AsyncReplayConfig) -> Result<Self, OptimizerError> {
        config.check()?;
        let capacity = config.buffer_size / config.num_replay_shards;
        let shard_args = (0..config.num_replay_shards)
            .map(|i| ShardArgs {
                capacity,
                prioritized: config.prioritized,
                seed: config.seed.wrapping_add(1 + i as u64),
                frames: config.frames,
            })
            .collect();
        let shards = ReplayShards::spawn(shard_args, config.shard_restart).await?;
        let (to_learner, queue) = std::sync::mpsc::channel();
        let (report_tx, reports) = mpsc::unbounded_channel();
        let published = Published::new(learner.get_weights());
        let pending: Pending = Arc::default();
        let (shared, learner_pending, prioritized) = (published.clone(), pending.clone(), config.prioritized.is_some());
        // Detached: it ends when the queue closes (the optimizer is dropped).
        std::thread::Builder::new()
            .name("rlx-apex-learner".into())
            .spawn(move || run_learner(learner, queue, report_tx, shared, learner_pending, prioritized))
            .map_err(|e| EvaluatorError::Config(format!("cannot start the learner thread: {e}")))?;
        Ok(Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            shards,
            in_flight: InFlight::default(),
            parked: Vec::new(),
            steps_since_sync: HashMap::new(),
            to_learner,
            reports,
            published,
            pending,
            outstanding: 0,
            steps_sampled: 0,
            steps_while_learning: 0,
            rows_replayed: 0,
            rows_trained: 0,
            next_replay_shard: 0,
        })
    }

    /// The replay shards (their sizes, restarts and lost transitions; a
    /// fault test kills one through [`ReplayShards::actor`]).
    pub fn shards(&self) -> &ReplayShards {
        &self.shards
    }

    fn latest(&self) -> (Arc<FlatWeights>, u64) {
        self.published.latest()
    }

    /// Stores a sampled batch in a random shard, with the evaluator's TD
    /// errors as initial priorities when it computed them.
    async fn store(&mut self, mut batch: SampleBatch) -> Result<(), OptimizerError> {
        let td_errors = take_td_errors(&mut batch)?;
        let shard = self.rng.gen_range(0..self.shards.len());
        self.shards.add(shard, Arc::new(batch), td_errors).await?;
        Ok(())
    }

    /// Queues replayed minibatches for the learner, up to
    /// `learner_queue_size` outstanding and within `training_intensity`.
    async fn feed(&mut self) -> Result<(), OptimizerError> {
        if self.shards.total_stored() < self.config.learning_starts {
            return Ok(());
        }
        let n = self.config.train_batch_size;
        while self.outstanding < self.config.learner_queue_size {
            if let Some(ti) = self.config.training_intensity {
                if (self.rows_replayed + n as u64) as f64 > ti * self.steps_while_learning as f64 {
                    break;
                }
            }
            let count = self.shards.len();
            let sizes = self.shards.sizes();
            let next = (0..count).map(|k| (self.next_replay_shard + k) % count).find(|&i| sizes[i] > 0);
            let Some(shard) = next else { break };
            self.next_replay_shard = shard + 1;
            let (batch, generation) = match self.shards.sample(shard, n, self.steps_sampled).await {
                Ok(replayed) => replayed,
                // The shard was found restarted (empty); its loss is counted.
                Err(ReplayError::Empty) => break,
                Err(e) => return Err(e.into()),
            };
            if self.to_learner.send(Replayed { batch, shard, generation }).is_err() {
                return Err(self.learner_gone());
            }
            self.outstanding += 1;
            self.rows_replayed += n as u64;
        }
        Ok(())
    }

    /// Why the learner thread stopped, if it said; a generic error if not.
    fn learner_gone(&mut self) -> OptimizerError {
        while let Ok(report) = self.reports.try_recv() {
            if let Err(cause) = report {
                return cause.into();
            }
        }
        EvaluatorError::Config("the learner thread stopped".into()).into()
    }

    /// Books a learner report: priorities back to their shard, statistics.
    fn on_report(
        &mut self,
        report: Result<LearnerReport, EvaluatorError>,
        out: &mut StepStats,
        all: &mut Vec<LearnerStats>,
    ) -> Result<(), OptimizerError> {
        let LearnerReport { replayed, td_errors, stats } = report?;
        self.outstanding -= 1;
        out.steps_trained += replayed.batch.len() as u64;
        self.rows_trained += replayed.batch.len() as u64;
        if let Some(td) = td_errors {
            self.shards.update_priorities(replayed.shard, replayed.generation, &replayed.batch, td);
        }
        all.push(stats);
        Ok(())
    }

    /// Counts a sampled rollout and returns its batch.
    fn count(&mut self, rollout: Rollout, out: &mut StepStats) -> SampleBatch {
        let rows = rollout.batch.len() as u64;
        (self.steps_sampled, out.steps_sampled) = (self.steps_sampled + rows, out.steps_sampled + rows);
        if self.shards.total_stored() >= self.config.learning_starts {
            self.steps_while_learning += rows;
        }
        out.episodes.extend(rollout.episodes);
        rollout.batch
    }

    /// The latest weights if evaluator `index` has sampled
    /// `max_weight_sync_delay` steps since it last got some.
    fn weights_due(&mut self, index: usize) -> Option<(Arc<FlatWeights>, u64)> {
        let steps = self.steps_since_sync.entry(index).or_default();
        if *steps < self.config.max_weight_sync_delay {
            return None;
        }
        *steps = 0;
        Some(self.latest())
    }

    /// Whether the learner has fallen more than `learner_queue_size`
    /// minibatches behind `training_intensity`, so sampling should wait.
    /// Never while nothing is queued for it (e.g. after a lost shard took
    /// the buffers below `learning_starts`): only its reports would end the
    /// wait.
    fn learner_behind(&self) -> bool {
        let Some(ti) = self.config.training_intensity else {
            return false;
        };
        if self.outstanding == 0 {
            return false;
        }
        let owed = ti * self.steps_while_learning as f64 - self.rows_trained as f64;
        owed > ((self.config.learner_queue_size + 1) * self.config.train_batch_size) as f64
    }

    /// Asks `worker` for its next batch, with new weights if due.
    fn request(&mut self, worker: SharedHandle, version: u64) {
        let weights = self.weights_due(worker.index());
        self.in_flight.send(worker, weights, version, |w| w.sample());
    }

    /// Sends the held-back evaluators their next requests once the learner
    /// has caught up.
    fn unpark(&mut self) {
        if self.learner_behind() {
            return;
        }
        for (worker, version) in std::mem::take(&mut self.parked) {
            self.request(worker, version);
        }
    }

    /// Stores a worker's batch; the worker samples its next one meanwhile,
    /// unless the learner must catch up first.
    async fn on_sampled(&mut self, done: Completed<Rollout>, out: &mut StepStats) -> Result<(), OptimizerError> {
        let Completed { worker, version, result } = done;
        let rollout = result?;
        *self.steps_since_sync.entry(worker.index()).or_default() += rollout.batch.len();
        let batch = self.count(rollout, out);
        if self.learner_behind() {
            self.parked.push((worker, version));
        } else {
            self.request(worker, version);
        }
        self.store(batch).await
    }

    /// The iteration's learner metrics with the replay buffer's.
    fn learner_stats(&self, all: &[LearnerStats]) -> LearnerStats {
        let mut learner = summarize_updates(all);
        learner.set("replay_buffer_size", self.shards.total_stored() as f64);
        learner.set("replay_shard_restarts", self.shards.restarts() as f64);
        learner.set("replay_lost_transitions", self.shards.lost_transitions() as f64);
        learner.set("learner_queue", self.outstanding as f64);
        learner
    }
}

#[async_trait]
impl PolicyOptimizer for AsyncReplayOptimizer {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let (mut out, mut all) = (StepStats::default(), Vec::new());
        self.unpark();
        if self.in_flight.is_empty() && self.parked.is_empty() {
            let latest = self.latest();
            for w in evaluators.samplers() {
                self.in_flight.send(w, Some(latest.clone()), latest.1, |w| w.sample());
            }
        }
        while out.steps_sampled < self.config.timesteps_per_iteration as u64 {
            tokio::select! {
                Some(done) = self.in_flight.next() => self.on_sampled(done, &mut out).await?,
                Some(report) = self.reports.recv() => self.on_report(report, &mut out, &mut all)?,
                // Every evaluator parked and the learner gone.
                else => return Err(self.learner_gone()),
            }
            self.feed().await?;
            self.unpark();
        }
        // Keep the driver's copy current for checkpoints and evaluation.
        let (weights, _) = self.latest();
        evaluators.local_mut().set_weights(&weights)?;
        out.learner = self.learner_stats(&all);
        Ok(out)
    }

    /// Hands the weights to the learner thread (adopted before its next
    /// update) and publishes them for the next weight sync.
    fn weights_restored(&mut self, weights: &Arc<FlatWeights>) {
        hand_to_learner(&self.pending, &self.published, weights.clone());
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec![
            format!(
                "the replay shards ({} transitions) are not saved; a restored run refills {} before it learns again",
                self.shards.total_stored(),
                self.config.learning_starts
            ),
            "the learner thread's optimizer state (Adam moments) and target network are not saved".into(),
            "prioritized replay's β schedule and the training_intensity clock restart from zero".into(),
            super::IN_FLIGHT_GAP.into(),
        ]
    }
}
