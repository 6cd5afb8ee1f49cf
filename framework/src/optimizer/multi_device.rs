//! [`MultiDeviceLearner`]: a learner's minibatch SGD data-parallel over
//! several replicas of the policy (RLlib's `LocalMultiGPUOptimizer`, Liang
//! et al. 2018, §4; named here for what it does, since a CPU thread counts
//! as a device), which [`SyncSamplesOptimizer::with_devices`](super::SyncSamplesOptimizer::with_devices)
//! runs after synchronous sampling.
//!
//! Each step the train batch is handed once to every replica (an `Arc`, so
//! CPU replicas share it without a copy). For each minibatch, every replica
//! computes the gradient of its shard of the rows, the gradients are
//! averaged weighted by shard size, and every replica applies the same
//! average. Because the built-in losses are means over rows, the average is
//! the gradient of the whole minibatch: the result equals single-device SGD
//! up to floating-point rounding, and since every replica starts from the
//! same weights and optimizer state and applies the same update, the
//! replicas stay identical.
//!
//! Replica 0 is the driver's own policy (the one checkpoints and weight
//! broadcasts read); the others run on their own OS threads.

use super::OptimizerError;
use crate::evaluator::EvaluatorError;
use crate::evaluator_set::Evaluators;
use crate::policy::{global_norm, FlatWeights, LearnerStats, PolicyError, PolicyGraph};
use crate::postprocessing::value_fit_stats;
use crate::sample_batch::{minibatch_rows, SampleBatch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How the multi-device learner runs SGD over a train batch.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiDeviceConfig {
    /// Epochs over each train batch.
    pub num_sgd_iter: usize,
    /// Rows per minibatch (split across the devices); `None` takes the whole
    /// batch, in order, as one minibatch.
    pub sgd_minibatch_size: Option<usize>,
    /// Seeds the minibatch shuffling.
    pub seed: u64,
}

enum Command {
    Load(Arc<SampleBatch>),
    Gradient(Vec<usize>),
    Apply(Arc<Vec<f32>>),
    Sync { weights: FlatWeights, state: Option<Vec<u8>> },
    Weights,
}

enum Reply {
    Gradient(Result<(Vec<f32>, LearnerStats), PolicyError>),
    Done(Result<(), PolicyError>),
    Weights(FlatWeights),
}

/// A policy replica on its own thread.
struct Replica {
    index: usize,
    commands: Sender<Command>,
    replies: Receiver<Reply>,
    /// Replies owed for commands sent: after an error part-way through a
    /// step, [`MultiDeviceLearner`] reads them off, so the next step never
    /// takes a stale reply for its own.
    owed: Cell<usize>,
    thread: Option<JoinHandle<()>>,
}

impl Replica {
    fn spawn(index: usize, mut policy: Box<dyn PolicyGraph>) -> std::io::Result<Self> {
        let (commands, inbox) = channel::<Command>();
        let (outbox, replies) = channel();
        let thread = std::thread::Builder::new().name(format!("rlx-replica-{index}")).spawn(move || {
            let mut batch = Arc::new(SampleBatch::new());
            for command in inbox {
                let reply = match command {
                    Command::Load(b) => {
                        batch = b;
                        continue;
                    }
                    Command::Gradient(rows) => Reply::Gradient(policy.compute_gradients(&batch.gather(&rows))),
                    Command::Apply(grad) => Reply::Done(policy.apply_gradients(&grad)),
                    Command::Sync { weights, state } => Reply::Done(
                        policy.set_weights(&weights).and_then(|()| state.map_or(Ok(()), |s| policy.load_state(&s))),
                    ),
                    Command::Weights => Reply::Weights(policy.get_weights()),
                };
                if outbox.send(reply).is_err() {
                    break;
                }
            }
        })?;
        Ok(Self { index, commands, replies, owed: Cell::new(0), thread: Some(thread) })
    }

    fn send(&self, command: Command) -> Result<(), PolicyError> {
        let replies = !matches!(command, Command::Load(_));
        self.commands.send(command).map_err(|_| self.died())?;
        self.owed.set(self.owed.get() + usize::from(replies));
        Ok(())
    }

    fn recv(&self) -> Result<Reply, PolicyError> {
        let reply = self.replies.recv().map_err(|_| self.died())?;
        self.owed.set(self.owed.get().saturating_sub(1));
        Ok(reply)
    }

    /// Reads off every reply still owed (a dead replica owes none).
    fn drain(&self) {
        while self.owed.get() > 0 {
            if self.recv().is_err() {
                self.owed.set(0);
            }
        }
    }

    fn recv_done(&self) -> Result<(), PolicyError> {
        match self.recv()? {
            Reply::Done(result) => result.map_err(|e| PolicyError::Other(format!("replica {}: {e}", self.index))),
            _ => Err(self.out_of_step()),
        }
    }

    fn died(&self) -> PolicyError {
        PolicyError::Other(format!("learner replica {} stopped (its policy panicked)", self.index))
    }

    fn out_of_step(&self) -> PolicyError {
        PolicyError::Other(format!("learner replica {} answered out of step", self.index))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        let (closed, _) = channel();
        self.commands = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Data-parallel minibatch SGD over the driver's policy and `n − 1` more
/// replicas of it.
pub struct MultiDeviceLearner {
    replicas: Vec<Replica>,
    config: MultiDeviceConfig,
    rng: ChaCha8Rng,
    /// Set when the driver's policy changed outside this learner (start,
    /// checkpoint restore): the replicas copy its weights and state before
    /// the next step.
    needs_sync: bool,
}

impl MultiDeviceLearner {
    /// A learner over the driver's policy plus `replicas` (built like it, on
    /// the other devices). Weights and optimizer state are copied from the
    /// driver's policy before the first step.
    ///
    /// # Errors
    /// `num_sgd_iter` or `sgd_minibatch_size` of 0, or a thread that cannot
    /// start.
    pub fn new(replicas: Vec<Box<dyn PolicyGraph>>, config: MultiDeviceConfig) -> Result<Self, PolicyError> {
        if config.num_sgd_iter == 0 || config.sgd_minibatch_size == Some(0) {
            return Err(PolicyError::Other(format!(
                "multi-device learner: num_sgd_iter and sgd_minibatch_size must be >= 1, got {config:?}"
            )));
        }
        let replicas = replicas
            .into_iter()
            .enumerate()
            .map(|(i, p)| Replica::spawn(i + 1, p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PolicyError::Other(format!("cannot start a learner replica thread: {e}")))?;
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Ok(Self { replicas, config, rng, needs_sync: true })
    }

    /// Devices in use: the driver's policy and the replicas.
    pub fn num_devices(&self) -> usize {
        self.replicas.len() + 1
    }

    /// Makes the replicas copy `policy`'s weights and state before the next
    /// step (after anything but this learner changed it).
    pub fn mark_out_of_sync(&mut self) {
        self.needs_sync = true;
    }

    /// Every replica's weights, driver's policy excluded (to check that they
    /// never diverge).
    ///
    /// # Errors
    /// A replica that stopped.
    pub fn replica_weights(&self) -> Result<Vec<FlatWeights>, PolicyError> {
        self.replicas.iter().for_each(|r| drop(r.send(Command::Weights)));
        let weights = self
            .replicas
            .iter()
            .map(|r| match r.recv()? {
                Reply::Weights(w) => Ok(w),
                _ => Err(r.out_of_step()),
            })
            .collect();
        self.replicas.iter().for_each(Replica::drain);
        weights
    }

    fn sync_from(&mut self, policy: &dyn PolicyGraph) -> Result<(), PolicyError> {
        let (weights, state) = (policy.get_weights(), policy.save_state());
        for r in &self.replicas {
            r.send(Command::Sync { weights: weights.clone(), state: state.clone() })?;
        }
        self.replicas.iter().try_for_each(Replica::recv_done)?;
        self.needs_sync = false;
        Ok(())
    }

    /// [`learn`](Self::learn) on the driver's policy, with the number of
    /// devices among the statistics.
    ///
    /// # Errors
    /// As [`learn`](Self::learn).
    pub fn learn_on(
        &mut self,
        evaluators: &mut Evaluators,
        batch: SampleBatch,
    ) -> Result<LearnerStats, OptimizerError> {
        let mut stats = self.learn(evaluators.local_mut().policy_mut(), batch).map_err(EvaluatorError::from)?;
        stats.set("num_devices", self.num_devices() as f64);
        Ok(stats)
    }

    /// What a checkpoint cannot restore exactly.
    pub const CHECKPOINT_GAP: &'static str = "the multi-device learner's minibatch shuffling restarts from its seed";

    /// `num_sgd_iter` epochs of data-parallel minibatch SGD on `batch`,
    /// with `policy` (the driver's) as replica 0. Statistics are averaged
    /// over shards (weighted by rows) and minibatches; `grad_norm` is the
    /// norm of the averaged gradient before clipping.
    ///
    /// # Errors
    /// A policy error on any replica, or a replica that stopped.
    pub fn learn(&mut self, policy: &mut dyn PolicyGraph, batch: SampleBatch) -> Result<LearnerStats, PolicyError> {
        if batch.is_empty() {
            return Err(PolicyError::Other("the multi-device learner got an empty train batch".into()));
        }
        let result = self.learn_epochs(policy, batch);
        if result.is_err() {
            // Some replicas may have applied the last update and others not,
            // and replies may be owed: read them off, and copy the driver's
            // policy to every replica before the next step.
            self.replicas.iter().for_each(Replica::drain);
            self.needs_sync = true;
        }
        result
    }

    fn learn_epochs(&mut self, policy: &mut dyn PolicyGraph, batch: SampleBatch) -> Result<LearnerStats, PolicyError> {
        if self.needs_sync {
            self.sync_from(policy)?;
        }
        let batch = Arc::new(batch);
        for r in &self.replicas {
            r.send(Command::Load(batch.clone()))?;
        }
        let mut all = Vec::new();
        for _epoch in 0..self.config.num_sgd_iter {
            let minibatches = match self.config.sgd_minibatch_size {
                Some(size) => minibatch_rows(batch.len(), size, self.rng.gen()),
                None => vec![(0..batch.len()).collect()],
            };
            for rows in minibatches {
                all.push(self.sgd_step(policy, &batch, &rows)?);
            }
        }
        let mut stats = LearnerStats::mean(&all);
        value_fit_stats(&batch, &mut stats);
        Ok(stats)
    }

    /// One data-parallel SGD step on the minibatch `rows`.
    fn sgd_step(
        &mut self,
        policy: &mut dyn PolicyGraph,
        batch: &SampleBatch,
        rows: &[usize],
    ) -> Result<LearnerStats, PolicyError> {
        let shards = split_evenly(rows, self.num_devices());
        // A device whose shard is empty (a minibatch smaller than the device
        // count) computes nothing but still applies the update.
        let remote: Vec<(&Replica, &[usize])> =
            self.replicas.iter().zip(&shards[1..]).filter(|(_, s)| !s.is_empty()).map(|(r, s)| (r, *s)).collect();
        for (r, shard) in &remote {
            r.send(Command::Gradient(shard.to_vec()))?;
        }
        let mut parts = Vec::with_capacity(shards.len());
        if !shards[0].is_empty() {
            parts.push((shards[0].len(), policy.compute_gradients(&batch.gather(shards[0]))?));
        }
        for (r, shard) in &remote {
            match r.recv()? {
                Reply::Gradient(result) => {
                    let part = result.map_err(|e| PolicyError::Other(format!("replica {}: {e}", r.index)))?;
                    parts.push((shard.len(), part));
                }
                _ => return Err(r.out_of_step()),
            }
        }
        let (average, mut stats) = weighted_average(&parts, rows.len())?;
        stats.set("grad_norm", global_norm(&average));
        let average = Arc::new(average);
        for r in &self.replicas {
            r.send(Command::Apply(average.clone()))?;
        }
        policy.apply_gradients(&average)?;
        self.replicas.iter().try_for_each(Replica::recv_done)?;
        Ok(stats)
    }
}

/// `rows` cut into `n` contiguous shards whose lengths differ by at most one.
fn split_evenly(rows: &[usize], n: usize) -> Vec<&[usize]> {
    (0..n).map(|i| &rows[i * rows.len() / n..(i + 1) * rows.len() / n]).collect()
}

/// The row-weighted average of the shards' gradients and statistics.
fn weighted_average(
    parts: &[(usize, (Vec<f32>, LearnerStats))],
    total_rows: usize,
) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
    let len = parts[0].1 .0.len();
    let mut average = vec![0.0f32; len];
    let mut stats = std::collections::BTreeMap::<String, f64>::new();
    for (rows, (grad, shard_stats)) in parts {
        if grad.len() != len {
            return Err(PolicyError::WrongLength { what: "gradients", expected: len, got: grad.len() });
        }
        let w = *rows as f32 / total_rows as f32;
        average.iter_mut().zip(grad).for_each(|(a, &g)| *a += w * g);
        for (k, v) in &shard_stats.0 {
            *stats.entry(k.clone()).or_default() += v * *rows as f64 / total_rows as f64;
        }
    }
    Ok((average, LearnerStats(stats)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_rows_evenly() {
        let rows: Vec<usize> = (0..10).collect();
        let shards = split_evenly(&rows, 3);
        assert_eq!(shards.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![3, 3, 4]);
        assert_eq!(shards.concat(), rows);
        let shards = split_evenly(&rows[..1], 2);
        assert_eq!((shards[0].len(), shards[1].len()), (0, 1));
    }

    #[test]
    fn weighted_average_weights_by_rows() {
        let mut s = LearnerStats::default();
        s.set("loss", 1.0);
        let mut t = LearnerStats::default();
        t.set("loss", 4.0);
        let parts = vec![(1, (vec![1.0, 0.0], s)), (3, (vec![5.0, 4.0], t))];
        let (avg, stats) = weighted_average(&parts, 4).unwrap();
        assert_eq!(avg, vec![4.0, 3.0]);
        assert_eq!(stats.get("loss"), Some(3.25));
        let bad = vec![(1, (vec![1.0], LearnerStats::default())), (1, (vec![1.0, 2.0], LearnerStats::default()))];
        assert!(matches!(weighted_average(&bad, 2), Err(PolicyError::WrongLength { .. })));
    }
}
