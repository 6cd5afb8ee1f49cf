//! Replay shards as supervised actors (Ape-X, Horgan et al. 2018).
//!
//! ```text
//! ShardSupervisor  (one-for-one, at most `max_restarts` in `window_s`)
//!   ├── ReplayShard 0   a Replay buffer of buffer_size / num_shards
//!   └── ReplayShard 1
//! ```
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

use super::{PrioritizedReplayConfig, Replay, ReplayError, BATCH_INDEXES};
use crate::restart::{FailureWindow, RestartPolicy};
use crate::sample_batch::SampleBatch;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
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
        let replay = Replay::new(args.capacity, args.prioritized)?;
        Ok(ShardState { replay, rng: ChaCha8Rng::seed_from_u64(args.seed) })
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

/// Messages of the [`ShardSupervisor`].
pub enum ShardSupervisorMsg {
    /// The current actor of shard `index` and its generation (restarts so
    /// far). If `dead` is that actor, the reply waits for the replacement.
    Lookup {
        /// The shard.
        index: usize,
        /// The actor the caller found dead, if any.
        dead: Option<ActorId>,
        /// Where the answer goes.
        reply: RpcReplyPort<Result<(ActorRef<ShardMsg>, u64), ReplayError>>,
    },
}

impl ractor::Message for ShardSupervisorMsg {}

/// Restarts replay shards one-for-one within a restart budget.
pub struct ShardSupervisor;

/// Arguments of a [`ShardSupervisor`].
pub struct ShardSupervisorArgs {
    shards: Vec<ShardArgs>,
    restart: RestartPolicy,
}

struct ShardSlot {
    args: ShardArgs,
    actor: Option<ActorRef<ShardMsg>>,
    generation: u64,
    waiting: Vec<RpcReplyPort<Result<(ActorRef<ShardMsg>, u64), ReplayError>>>,
}

/// The supervisor's shards and failure record.
pub struct ShardSupervisorState {
    slots: Vec<ShardSlot>,
    failures: FailureWindow,
    gave_up: Option<ReplayError>,
}

impl ShardSupervisor {
    /// Starts shard `i`'s current generation, seeded by its generation so a
    /// replacement does not replay the same sequence.
    async fn spawn(
        myself: &ActorRef<ShardSupervisorMsg>,
        s: &mut ShardSupervisorState,
        i: usize,
    ) -> Result<(), ReplayError> {
        let slot = &s.slots[i];
        let args =
            ShardArgs { seed: slot.args.seed.wrapping_add(slot.generation.wrapping_mul(0x9E37_79B9)), ..slot.args };
        let (actor, _) = Actor::spawn_linked(None, ReplayShard, args, myself.get_cell())
            .await
            .map_err(|e| ReplayError::ShardLost { shard: i, reason: format!("could not start: {e}") })?;
        let slot = &mut s.slots[i];
        for reply in slot.waiting.drain(..) {
            let _ = reply.send(Ok((actor.clone(), slot.generation)));
        }
        slot.actor = Some(actor);
        Ok(())
    }

    fn give_up(s: &mut ShardSupervisorState, error: ReplayError) {
        tracing::error!(%error, "replay shard supervisor gives up");
        for slot in &mut s.slots {
            if let Some(actor) = slot.actor.take() {
                actor.stop(Some("supervisor gave up".into()));
            }
            for reply in slot.waiting.drain(..) {
                let _ = reply.send(Err(error.clone()));
            }
        }
        s.gave_up = Some(error);
    }
}

impl Actor for ShardSupervisor {
    type Msg = ShardSupervisorMsg;
    type State = ShardSupervisorState;
    type Arguments = ShardSupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ShardSupervisorMsg>,
        args: ShardSupervisorArgs,
    ) -> Result<ShardSupervisorState, ActorProcessingErr> {
        let slots = args
            .shards
            .into_iter()
            .map(|args| ShardSlot { args, actor: None, generation: 0, waiting: Vec::new() })
            .collect();
        let mut s = ShardSupervisorState { slots, failures: FailureWindow::new(args.restart), gave_up: None };
        for i in 0..s.slots.len() {
            Self::spawn(&myself, &mut s, i).await?;
        }
        Ok(s)
    }

    async fn post_stop(
        &self,
        _: ActorRef<ShardSupervisorMsg>,
        s: &mut ShardSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        for slot in &mut s.slots {
            if let Some(actor) = slot.actor.take() {
                actor.stop(Some("supervisor stopped".into()));
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<ShardSupervisorMsg>,
        msg: ShardSupervisorMsg,
        s: &mut ShardSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let ShardSupervisorMsg::Lookup { index, dead, reply } = msg;
        if let Some(error) = &s.gave_up {
            let _ = reply.send(Err(error.clone()));
            return Ok(());
        }
        let Some(slot) = s.slots.get_mut(index) else {
            let _ = reply.send(Err(ReplayError::ShardLost { shard: index, reason: "no such shard".into() }));
            return Ok(());
        };
        match &slot.actor {
            Some(actor) if Some(actor.get_id()) != dead => {
                let _ = reply.send(Ok((actor.clone(), slot.generation)));
            }
            // The caller saw the shard die before the supervision event
            // reached us: answer once the replacement runs.
            _ => slot.waiting.push(reply),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ShardSupervisorMsg>,
        event: SupervisionEvent,
        s: &mut ShardSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        if s.gave_up.is_some() {
            return Ok(());
        }
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("terminated: {}", reason.unwrap_or_else(|| "no reason given".into())))
            }
            _ => return Ok(()),
        };
        let Some(i) = s.slots.iter().position(|x| x.actor.as_ref().is_some_and(|a| a.get_id() == cell.get_id())) else {
            return Ok(());
        };
        s.slots[i].actor = None;
        tracing::warn!(shard = i, %reason, "replay shard failed; restarting it empty");
        if let Err(failures) = s.failures.record() {
            let reason = format!("{failures} failures within the restart window; last: {reason}");
            Self::give_up(s, ReplayError::ShardLost { shard: i, reason });
            return Ok(());
        }
        s.slots[i].generation += 1;
        if let Err(e) = Self::spawn(&myself, s, i).await {
            Self::give_up(s, e);
        }
        Ok(())
    }
}

/// What the driver knows of one shard.
struct ShardView {
    actor: ActorRef<ShardMsg>,
    generation: u64,
    /// Transitions the shard acknowledged holding.
    stored: usize,
}

/// The driver's side of the replay shards: calls that survive a shard's
/// restart, and the count of transitions lost with dead shards.
pub struct ReplayShards {
    supervisor: ActorRef<ShardSupervisorMsg>,
    shards: Vec<ShardView>,
    lost: u64,
    restarts: u64,
}

impl ReplayShards {
    /// Starts `shards.len()` supervised shards.
    ///
    /// # Errors
    /// [`ReplayError::Invalid`] for bad buffer settings, or
    /// [`ReplayError::ShardLost`] if a shard cannot start.
    pub async fn spawn(shards: Vec<ShardArgs>, restart: RestartPolicy) -> Result<Self, ReplayError> {
        for args in &shards {
            Replay::new(args.capacity, args.prioritized)?;
        }
        let n = shards.len();
        let (supervisor, _) = Actor::spawn(None, ShardSupervisor, ShardSupervisorArgs { shards, restart })
            .await
            .map_err(|e| ReplayError::ShardLost { shard: 0, reason: format!("supervisor did not start: {e}") })?;
        let mut views = Vec::with_capacity(n);
        for index in 0..n {
            let (actor, generation) = lookup(&supervisor, index, None).await?;
            views.push(ShardView { actor, generation, stored: 0 });
        }
        Ok(Self { supervisor, shards: views, lost: 0, restarts: 0 })
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
        self.restarts
    }

    /// Shard `i`'s current actor (to inspect it, or for a fault test to
    /// kill it).
    pub fn actor(&self, i: usize) -> &ActorRef<ShardMsg> {
        &self.shards[i].actor
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
        loop {
            let (b, td) = (batch.clone(), td_errors.clone());
            match self.shards[i].actor.call(|reply| ShardMsg::Add(b, td, reply), None).await {
                Ok(ractor::rpc::CallResult::Success(result)) => {
                    self.shards[i].stored = result?;
                    return Ok(());
                }
                _ => self.recover(i).await?,
            }
        }
    }

    /// Replays `n` transitions from shard `i`, with the shard's generation
    /// (to send with the priority update).
    ///
    /// # Errors
    /// An empty shard, or a shard past its restart budget.
    pub async fn sample(&mut self, i: usize, n: usize, steps_sampled: u64) -> Result<(SampleBatch, u64), ReplayError> {
        loop {
            let call = self.shards[i].actor.call(|reply| ShardMsg::Sample { n, steps_sampled, reply }, None).await;
            match call {
                Ok(ractor::rpc::CallResult::Success(result)) => return Ok((result?, self.shards[i].generation)),
                _ => self.recover(i).await?,
            }
        }
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
        let _ = self.shards[i].actor.cast(msg);
    }

    /// Finds shard `i`'s replacement, counting what died with it.
    async fn recover(&mut self, i: usize) -> Result<(), ReplayError> {
        let dead = self.shards[i].actor.get_id();
        let (actor, generation) = lookup(&self.supervisor, i, Some(dead)).await?;
        let view = &mut self.shards[i];
        if generation != view.generation {
            self.lost += view.stored as u64;
            self.restarts += generation - view.generation;
            tracing::warn!(shard = i, lost = view.stored, "replay shard restarted empty; its transitions are lost");
            view.stored = 0;
        }
        (view.actor, view.generation) = (actor, generation);
        Ok(())
    }
}

impl Drop for ReplayShards {
    fn drop(&mut self) {
        self.supervisor.stop(None);
    }
}

async fn lookup(
    supervisor: &ActorRef<ShardSupervisorMsg>,
    index: usize,
    dead: Option<ActorId>,
) -> Result<(ActorRef<ShardMsg>, u64), ReplayError> {
    let unreachable =
        |e: String| ReplayError::ShardLost { shard: index, reason: format!("supervisor unreachable: {e}") };
    match supervisor.call(|reply| ShardSupervisorMsg::Lookup { index, dead, reply }, None).await {
        Ok(ractor::rpc::CallResult::Success(result)) => result,
        Ok(_) => Err(unreachable("no reply".into())),
        Err(e) => Err(unreachable(e.to_string())),
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
        let args = ShardArgs { capacity: 100, prioritized: None, seed: 0 };
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
