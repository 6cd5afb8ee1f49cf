//! [`SyncReplayOptimizer`]: off-policy learning from a replay buffer (DQN).
//!
//! One step runs rounds until `timesteps_per_iteration` env steps have been
//! sampled. In each round every evaluator samples a short fragment in
//! parallel and the rows go into the buffer; once it holds
//! `learning_starts` transitions, the local policy learns on minibatches
//! replayed from it (`training_intensity` replayed rows per sampled row),
//! prioritized replay gets each minibatch's new TD errors as priorities,
//! and the new weights go to every evaluator before the next round.
//!
//! Learning from a dataset (`input`) alone, the reader goes through the
//! files pass after pass. While the buffer still holds every row it was
//! given, a row a later pass gives again is counted (it owes its updates)
//! but not stored twice: a dataset that fits in the buffer is held once,
//! and minibatches are drawn from it evenly, as an offline library that
//! loads the whole dataset draws them. (Stored again, the rows of the pass
//! under way would be held twice as often as the others.) Once the buffer
//! has had to drop rows, repeats are stored like any row. A round that
//! stores nothing new, every row a repeat, means the buffer holds the
//! whole dataset: learning starts then, even below `learning_starts`.
//!
//! The target network is the policy's business (it counts its own updates),
//! so this optimizer runs any off-policy [`PolicyGraph`](crate::PolicyGraph)
//! that learns from single transitions.

use super::{summarize_updates, OptimizerError, PolicyOptimizer, StepStats};
use crate::evaluator::Rollout;
use crate::evaluator_set::Evaluators;
use crate::operators;
use crate::policy::LearnerStats;
use crate::replay::{take_td_errors, PrioritizedReplayConfig, Replay, ReplayError, ReplayStore};
use async_trait::async_trait;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Settings of [`SyncReplayOptimizer`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncReplayConfig {
    /// Transitions the buffer holds; the oldest are overwritten.
    pub buffer_size: usize,
    /// Prioritized replay's settings; `None` replays uniformly.
    pub prioritized: Option<PrioritizedReplayConfig>,
    /// Transitions stored before learning starts.
    pub learning_starts: usize,
    /// Rows per replayed minibatch.
    pub train_batch_size: usize,
    /// Replayed rows trained on per sampled row (RLlib's
    /// `training_intensity`): 8 with minibatches of 32 is one update per 4
    /// env steps.
    pub training_intensity: f64,
    /// Env steps sampled per [`step`](PolicyOptimizer::step) (one training
    /// iteration).
    pub timesteps_per_iteration: usize,
    /// Seeds the replay sampling.
    pub seed: u64,
}

/// Sample into a buffer, learn from replayed minibatches, broadcast.
///
/// The buffer is a transition [`Replay`] unless another [`ReplayStore`] is
/// given ([`with_replay`](Self::with_replay)).
pub struct SyncReplayOptimizer<R = Replay> {
    config: SyncReplayConfig,
    replay: R,
    rng: ChaCha8Rng,
    steps_sampled: u64,
    /// Fractional minibatches owed to `training_intensity`.
    owed_updates: f64,
    /// Rows given to the buffer (repeats left out): while at most
    /// `buffer_size`, the buffer holds every one of them.
    rows_stored: u64,
    /// A round's rows were all repeats, left out: the buffer holds the
    /// whole dataset, and learning starts even below `learning_starts`.
    holds_inputs_whole: bool,
}

impl SyncReplayOptimizer<Replay> {
    /// An empty transition buffer (uniform, or prioritized as configured).
    ///
    /// # Errors
    /// A buffer size of 0 or below `learning_starts`, prioritized settings
    /// out of range, or a minibatch size or intensity that is not positive.
    pub fn new(config: SyncReplayConfig) -> Result<Self, ReplayError> {
        let replay = Replay::new(config.buffer_size, config.prioritized)?;
        Self::with_replay(config, replay)
    }

    /// Stores image observations as shared frames of `layout`
    /// ([`ReplayBuffer::share_frames`](crate::replay::ReplayBuffer::share_frames)).
    ///
    /// # Errors
    /// Once the buffer holds something.
    pub fn share_frames(mut self, layout: crate::replay::FrameLayout) -> Result<Self, ReplayError> {
        self.replay.share_frames(layout)?;
        Ok(self)
    }
}

impl<R: ReplayStore> SyncReplayOptimizer<R> {
    /// The optimizer over `replay` (empty; `config.buffer_size` and
    /// `prioritized` are the replay's business).
    ///
    /// # Errors
    /// As [`new`](SyncReplayOptimizer::new), the buffer's own settings aside.
    pub fn with_replay(config: SyncReplayConfig, replay: R) -> Result<Self, ReplayError> {
        if config.train_batch_size == 0 || !(config.training_intensity > 0.0 && config.training_intensity.is_finite()) {
            return Err(ReplayError::Invalid(format!(
                "train_batch_size must be >= 1 and training_intensity > 0, got {} and {}",
                config.train_batch_size, config.training_intensity
            )));
        }
        if config.learning_starts > config.buffer_size {
            return Err(ReplayError::Invalid(format!(
                "learning_starts ({}) exceeds buffer_size ({}): learning would never start",
                config.learning_starts, config.buffer_size
            )));
        }
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Ok(Self { config, replay, rng, steps_sampled: 0, owed_updates: 0.0, rows_stored: 0, holds_inputs_whole: false })
    }

    /// The replay buffer.
    pub fn replay(&self) -> &R {
        &self.replay
    }

    /// The rows of `rollouts`, concatenated, that go into the buffer: all
    /// (`None`) unless some are a dataset's repeats and the buffer still
    /// holds every row it was given, new ones included; then the others.
    fn rows_to_store(&mut self, rollouts: &[Rollout]) -> Option<Vec<usize>> {
        let rows: usize = rollouts.iter().map(|r| r.batch.len()).sum();
        let repeated: usize = rollouts.iter().map(|r| r.repeated_rows.min(r.batch.len())).sum();
        let fits = self.rows_stored + (rows - repeated) as u64 <= self.config.buffer_size as u64;
        if repeated == 0 || !fits {
            return None;
        }
        // Every evaluator past its first pass: the dataset is all in.
        // (Shares of the files differ in size: one evaluator's repeats
        // alone do not say so.)
        self.holds_inputs_whole |= repeated == rows;
        let mut fresh = Vec::with_capacity(rows - repeated);
        let mut start = 0;
        for r in rollouts {
            let len = r.batch.len();
            fresh.extend(start..start + len - r.repeated_rows.min(len));
            start += len;
        }
        Some(fresh)
    }

    /// One replayed minibatch: learn, and re-prioritize its rows by the
    /// TD errors of that learning pass.
    fn learn_from_replay(&mut self, evaluators: &mut Evaluators) -> Result<LearnerStats, OptimizerError> {
        let minibatch = self.replay.sample(self.config.train_batch_size, self.steps_sampled, &mut self.rng)?;
        if !self.replay.is_prioritized() {
            return Ok(evaluators.learn_on_batch(&minibatch)?);
        }
        let (stats, td_errors) = evaluators
            .local_mut()
            .policy_mut()
            .learn_with_td_errors(&minibatch)
            .map_err(crate::EvaluatorError::from)?;
        self.replay.update_priorities(&minibatch, &td_errors)?;
        Ok(stats)
    }

    /// Runs the updates `rows` new samples owe at `training_intensity`;
    /// whether any ran.
    fn learn_owed(
        &mut self,
        evaluators: &mut Evaluators,
        rows: u64,
        out: &mut StepStats,
        learner: &mut Vec<LearnerStats>,
    ) -> Result<bool, OptimizerError> {
        self.owed_updates += rows as f64 * self.config.training_intensity / self.config.train_batch_size as f64;
        let mut learned = false;
        while self.owed_updates >= 1.0 {
            self.owed_updates -= 1.0;
            learner.push(self.learn_from_replay(evaluators)?);
            out.steps_trained += self.config.train_batch_size as u64;
            learned = true;
        }
        Ok(learned)
    }
}

#[async_trait]
impl<R: ReplayStore> PolicyOptimizer for SyncReplayOptimizer<R> {
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let mut out = StepStats::default();
        let mut learner = Vec::new();
        while out.steps_sampled < self.config.timesteps_per_iteration as u64 {
            let rollouts = operators::parallel_rollouts(evaluators).await?;
            let fresh = self.rows_to_store(&rollouts);
            let (batch, episodes) = operators::concat_rollouts(rollouts)?;
            let rows = batch.len() as u64;
            let mut stored = match fresh {
                Some(fresh) => batch.gather(&fresh),
                None => batch,
            };
            // Evaluators that computed TD errors give initial priorities.
            let td_errors = take_td_errors(&mut stored)?;
            self.replay.add(&stored, td_errors.as_deref())?;
            self.rows_stored += stored.len() as u64;
            (self.steps_sampled, out.steps_sampled) = (self.steps_sampled + rows, out.steps_sampled + rows);
            out.episodes.extend(episodes);
            let ready = self.replay.len() >= self.config.learning_starts || self.holds_inputs_whole;
            if ready && self.learn_owed(evaluators, rows, &mut out, &mut learner)? {
                operators::broadcast_weights(evaluators).await?;
            }
        }
        out.learner = summarize_updates(&learner);
        out.learner.set("replay_buffer_size", self.replay.len() as f64);
        out.learner.set("replay_buffer_bytes", self.replay.heap_bytes() as f64);
        Ok(out)
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        let mut gaps = vec![format!(
            "the replay buffer ({} transitions) is not saved; a restored run refills {} before it learns again",
            self.replay.len(),
            self.config.learning_starts
        )];
        if self.replay.is_prioritized() {
            gaps.push("prioritized replay's β schedule restarts from its initial value".into());
        }
        gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SampleBatch;

    fn optimizer(buffer_size: usize) -> SyncReplayOptimizer {
        let config = SyncReplayConfig {
            buffer_size,
            prioritized: None,
            learning_starts: buffer_size,
            train_batch_size: 4,
            training_intensity: 4.0,
            timesteps_per_iteration: 10,
            seed: 0,
        };
        SyncReplayOptimizer::new(config).unwrap()
    }

    fn rollout(rows: usize, repeated_rows: usize) -> Rollout {
        let mut batch = SampleBatch::new();
        batch.insert_f32("x", vec![0.0; rows], 1).unwrap();
        Rollout { batch, repeated_rows, ..Rollout::default() }
    }

    #[test]
    fn repeats_are_left_out_while_everything_given_is_held() {
        let mut o = optimizer(20);
        // No repeats: all rows, nothing gathered.
        assert_eq!(o.rows_to_store(&[rollout(3, 0), rollout(4, 0)]), None);
        // Three evaluators' batches, end to end: each one's last rows are
        // its repeats.
        let kept = o.rows_to_store(&[rollout(3, 1), rollout(4, 0), rollout(2, 2)]);
        assert_eq!(kept, Some(vec![0, 1, 3, 4, 5, 6]));
        assert!(!o.holds_inputs_whole, "one evaluator repeating says nothing of another's share");
        assert_eq!(o.rows_to_store(&[rollout(3, 3), rollout(2, 2)]), Some(vec![]));
        assert!(o.holds_inputs_whole, "a round of repeats only: the dataset is all in");
        // Once the new rows would not fit, repeats are stored too.
        o.rows_stored = 18;
        assert_eq!(o.rows_to_store(&[rollout(4, 1)]), None);
    }
}
