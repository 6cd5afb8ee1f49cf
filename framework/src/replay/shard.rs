//! Replay shards as supervised actors (Ape-X, Horgan et al. 2018).
//!
//! ```text
//! ActorPool<ReplayShard>  (one-for-one, at most `max_restarts` in `window_s`)
//!   ├── ReplayShard 0   a Replay buffer of buffer_size / num_shards
//!   └── ReplayShard 1
//! ```
//!
//! The shards run under the generic [`ActorPool`], as ES workers and PBT
//! members do.
//!
//! Each [`ReplayShard`] owns one [`Replay`] buffer: evaluators' batches go
//! into a shard (with their initial priorities), the learner's minibatches
//! come out of one, and priority updates go back to the shard they came
//! from. Shards are independent, so a shard that dies is restarted alone,
//! empty: what it held is gone. The driver-side [`ReplayShards`] knows how
//! many transitions each shard held (every add is acknowledged with the
//! shard's size), so when it finds a shard replaced it counts those as
//! lost: [`ReplayShards::lost_transitions`] is exact, and the optimizer
//! reports it in every result. Priority updates carry the shard's
//! generation, so updates computed on a dead shard's rows are dropped
//! instead of landing on the replacement's unrelated slots.

use super::{FrameLayout, PrioritizedReplayConfig, Replay, ReplayError, BATCH_INDEXES};
use crate::pool::{ActorPool, PoolError};
use crate::restart::RestartPolicy;
use crate::sample_batch::SampleBatch;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Messages a [`ReplayShard`] handles.
pub enum ShardMsg {
    /// Stores a batch, with initial priorities from these TD errors (one per
    /// row) if given; replies with the number of transitions now stored.
    Add(Arc<SampleBatch>, Option<Vec<f32>>, RpcReplyPort<Result<usize, ReplayError>>),
    /// Replays `n` transitions (β taken at `steps_sampled`).
    Sample {
        /// Rows to replay.
        n: usize,
        /// Env steps sampled so far, for the β schedule.
        steps_sampled: u64,
        /// Where the minibatch goes.
        reply: RpcReplyPort<Result<SampleBatch, ReplayError>>,
    },
    /// New priorities for replayed slots (no reply: the learner never
    /// waits for them).
    UpdatePriorities {
        /// The replayed rows' `batch_indexes`.
        indexes: Vec<i64>,
        /// Their TD errors after the update.
        td_errors: Vec<f32>,
    },
}

impl ractor::Message for ShardMsg {}

/// One replay buffer as an actor.
#[derive(Clone, Copy, Debug)]
pub struct ReplayShard;

/// How to build a [`ReplayShard`].
#[derive(Clone, Copy, Debug)]
pub struct ShardArgs {
    /// Transitions the shard holds.
    pub capacity: usize,
    /// Prioritized replay's settings; `None` replays uniformly.
    pub prioritized: Option<PrioritizedReplayConfig>,
    /// Seeds the shard's replay sampling.
    pub seed: u64,
    /// Frame sharing for image observations; `None` stores rows as they
    /// come (bytes for a `uint8` space, `f32` otherwise).
    pub frames: Option<FrameLayout>,
}

impl ShardArgs {
    /// The empty buffer a shard starts with.
    ///
    /// # Errors
    /// Buffer settings out of range.
    fn replay(&self) -> Result<Replay, ReplayError> {
        let mut replay = Replay::new(self.capacity, self.prioritized)?;
        if let Some(layout) = self.frames {
            replay.share_frames(layout)?;
        }
        Ok(replay)
    }
}

/// A shard's buffer and random generator.
pub struct ShardState {
    replay: Replay,
    rng: ChaCha8Rng,
}

impl Actor for ReplayShard {
    type Msg = ShardMsg;
    type State = ShardState;
    type Arguments = ShardArgs;

    async fn pre_start(&self, _: ActorRef<ShardMsg>, args: ShardArgs) -> Result<ShardState, ActorProcessingErr> {
        Ok(ShardState { replay: args.replay()?, rng: ChaCha8Rng::seed_from_u64(args.seed) })
    }

    async fn handle(&self, _: ActorRef<ShardMsg>, msg: ShardMsg, s: &mut ShardState) -> Result<(), ActorProcessingErr> {
        match msg {
            ShardMsg::Add(batch, td_errors, reply) => {
                let result = s.replay.add(&batch, td_errors.as_deref()).map(|()| s.replay.len());
                let _ = reply.send(result);
            }
            ShardMsg::Sample { n, steps_sampled, reply } => {
                let _ = reply.send(s.replay.sample(n, steps_sampled, &mut s.rng));
            }
            ShardMsg::UpdatePriorities { indexes, td_errors } => {
                if let Err(error) = s.replay.update_priorities_at(&indexes, &td_errors) {
                    tracing::warn!(%error, "replay shard rejected a priority update");
                }
            }
        }
        Ok(())
    }
}

/// What the driver knows of one shard.
struct ShardView {
    /// The generation the driver last saw answer.
    generation: u64,
    /// Transitions the shard acknowledged holding.
    stored: usize,
}

/// The driver's side of the replay shards: calls that survive a shard's
/// restart, and the count of transitions lost with dead shards.
pub struct ReplayShards {
    pool: ActorPool<ReplayShard>,
    shards: Vec<ShardView>,
    lost: u64,
}

impl ReplayShards {
    /// Starts `shards.len()` supervised shards.
    ///
    /// # Errors
    /// [`ReplayError::Invalid`] for bad buffer settings, or
    /// [`ReplayError::ShardLost`] if a shard cannot start.
    pub async fn spawn(shards: Vec<ShardArgs>, restart: RestartPolicy) -> Result<Self, ReplayError> {
        for args in &shards {
            args.replay()?;
        }
        let n = shards.len();
        // A replacement is seeded by its generation, so it does not replay
        // the same sequence as the shard it replaces.
        let args = Arc::new(move |i: usize, generation: u64| {
            let a: ShardArgs = shards[i];
            ShardArgs { seed: a.seed.wrapping_add(generation.wrapping_mul(0x9E37_79B9)), ..a }
        });
        let pool = ActorPool::spawn("replay shard", ReplayShard, n, args, restart).await.map_err(shard_lost)?;
        let views = (0..n).map(|_| ShardView { generation: 0, stored: 0 }).collect();
        Ok(Self { pool, shards: views, lost: 0 })
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether there are no shards.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Transitions each shard held at its last acknowledgement.
    pub fn sizes(&self) -> Vec<usize> {
        self.shards.iter().map(|s| s.stored).collect()
    }

    /// Transitions held by all shards together.
    pub fn total_stored(&self) -> usize {
        self.shards.iter().map(|s| s.stored).sum()
    }

    /// Transitions that died with a shard, over the whole run.
    pub fn lost_transitions(&self) -> u64 {
        self.lost
    }

    /// Shard restarts noticed so far.
    pub fn restarts(&self) -> u64 {
        self.pool.restarts()
    }

    /// Shard `i`'s current actor (to inspect it, or for a fault test to
    /// kill it).
    pub fn actor(&self, i: usize) -> ActorRef<ShardMsg> {
        self.pool.actor(i)
    }

    /// Shard `i`'s current generation: the restarts it has gone through.
    pub fn generation(&self, i: usize) -> u64 {
        self.shards[i].generation
    }

    /// Stores a batch in shard `i`, with initial priorities if given. If the
    /// shard died, its contents are counted as lost and the batch goes to
    /// its replacement.
    ///
    /// # Errors
    /// A batch the shard rejects, or a shard past its restart budget.
    pub async fn add(
        &mut self,
        i: usize,
        batch: Arc<SampleBatch>,
        td_errors: Option<Vec<f32>>,
    ) -> Result<(), ReplayError> {
        let add = |reply| ShardMsg::Add(batch.clone(), td_errors.clone(), reply);
        let stored = self.pool.call(i, add).await.map_err(shard_lost)?;
        self.count_losses(i);
        self.shards[i].stored = stored?;
        Ok(())
    }

    /// Replays `n` transitions from shard `i`, with the shard's generation
    /// (to send with the priority update).
    ///
    /// # Errors
    /// An empty shard, or a shard past its restart budget.
    pub async fn sample(&mut self, i: usize, n: usize, steps_sampled: u64) -> Result<(SampleBatch, u64), ReplayError> {
        let sample = |reply| ShardMsg::Sample { n, steps_sampled, reply };
        let batch = self.pool.call(i, sample).await.map_err(shard_lost)?;
        self.count_losses(i);
        Ok((batch?, self.shards[i].generation))
    }

    /// Sends new priorities for rows replayed from shard `i` at
    /// `generation`; dropped if the shard has been replaced since.
    pub fn update_priorities(&mut self, i: usize, generation: u64, batch: &SampleBatch, td_errors: Vec<f32>) {
        let Ok(indexes) = batch.i64(BATCH_INDEXES) else { return };
        if self.shards[i].generation != generation {
            return;
        }
        let msg = ShardMsg::UpdatePriorities { indexes: indexes.to_vec(), td_errors };
        // A dead shard is noticed (and its loss counted) at the next call.
        let _ = self.pool.actor(i).cast(msg);
    }

    /// After a call answered by a replacement of shard `i`, counts what died
    /// with the shard it replaced.
    fn count_losses(&mut self, i: usize) {
        let generation = self.pool.generation(i);
        let view = &mut self.shards[i];
        if generation != view.generation {
            self.lost += view.stored as u64;
            tracing::warn!(shard = i, lost = view.stored, "replay shard restarted empty; its transitions are lost");
            (view.stored, view.generation) = (0, generation);
        }
    }
}

/// A pool failure as the replay error naming the shard.
fn shard_lost(e: PoolError) -> ReplayError {
    match e {
        PoolError::BudgetExceeded { child, failures, last_failure, .. } => ReplayError::ShardLost {
            shard: child,
            reason: format!("{failures} failures within the restart window; last: {last_failure}"),
        },
        PoolError::Spawn { child, reason, .. } => {
            ReplayError::ShardLost { shard: child, reason: format!("could not start: {reason}") }
        }
        PoolError::Unreachable { child, reason, .. } => {
            ReplayError::ShardLost { shard: child, reason: format!("supervisor unreachable: {reason}") }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample_batch::fields;

    fn rows(n: usize) -> Arc<SampleBatch> {
        let mut b = SampleBatch::new();
        b.insert_f32(fields::OBS, (0..n).map(|i| i as f32).collect(), 1).unwrap();
        Arc::new(b)
    }

    async fn killed(shards: &ReplayShards, i: usize) {
        let actor = shards.actor(i).clone();
        actor.kill();
        while actor.get_status() != ractor::ActorStatus::Stopped {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shard_past_its_restart_budget_is_an_error_naming_it() {
        let args = ShardArgs { capacity: 100, prioritized: None, seed: 0, frames: None };
        let restart = RestartPolicy { max_restarts: 1, window_s: 60.0, ..RestartPolicy::default() };
        let mut shards = ReplayShards::spawn(vec![args; 2], restart).await.unwrap();
        shards.add(1, rows(10), None).await.unwrap();
        shards.add(0, rows(7), None).await.unwrap();
        // The first death is within budget: the batch goes to the empty
        // replacement and the 7 transitions are counted.
        killed(&shards, 0).await;
        shards.add(0, rows(3), None).await.unwrap();
        assert_eq!((shards.lost_transitions(), shards.restarts(), shards.sizes()), (7, 1, vec![3, 10]));
        // A second death within the window exceeds the budget.
        killed(&shards, 0).await;
        let err = shards.sample(0, 2, 0).await.unwrap_err();
        assert!(matches!(err, ReplayError::ShardLost { shard: 0, .. }), "{err}");
        assert!(err.to_string().contains("replay shard 0") && err.to_string().contains("2 failures"), "{err}");
    }
}
