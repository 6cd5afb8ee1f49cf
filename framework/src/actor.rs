//! Evaluators as supervised **ractor** actors.
//!
//! ```text
//! EvaluatorSupervisor  (restart policy: one-for-one | one-for-all,
//!   ├── EvaluatorActor 1   at most `max_restarts` in `window`)
//!   ├── EvaluatorActor 2
//!   └── ...
//! ```
//!
//! Each [`EvaluatorActor`] owns a [`PolicyEvaluator`] built by an
//! [`EvaluatorFactory`] in `pre_start` (a failed build is a spawn error, not a
//! later panic). A panic while sampling fails the actor; the supervisor
//! records the failure and starts a replacement from the factory with the next
//! generation's seed. The driver-side handle, [`RactorEvaluator`], notices the
//! dead actor on its next call, asks the supervisor for the replacement,
//! pushes the latest weights it sent, and retries — so optimizers carry on
//! without knowing. Past the budget (Erlang/OTP's intensity and period: more
//! than `max_restarts` failures within `window`) the supervisor gives up and
//! every call returns [`HandleError::RestartBudgetExceeded`], naming the
//! evaluator whose failure exhausted the budget and why it failed.

use crate::evaluator::{EvaluatorError, EvaluatorFactory, EvaluatorState, GradientRollout, PolicyEvaluator, Rollout};
use crate::filter::RunningStat;
use crate::handle::{EvaluatorHandle, HandleError, HandleStats};
use crate::policy::FlatWeights;
use crate::restart::{FailureWindow, RestartPolicy, RestartStrategy};
use async_trait::async_trait;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Messages an [`EvaluatorActor`] handles.
pub enum EvaluatorMsg {
    /// [`PolicyEvaluator::sample`].
    Sample(RpcReplyPort<Result<Rollout, EvaluatorError>>),
    /// [`PolicyEvaluator::set_weights`].
    SetWeights(Arc<FlatWeights>, RpcReplyPort<Result<(), EvaluatorError>>),
    /// [`PolicyEvaluator::set_weights`] without a reply.
    PushWeights(Arc<FlatWeights>),
    /// [`PolicyEvaluator::sample_and_compute_gradients`].
    SampleAndComputeGradients(RpcReplyPort<Result<GradientRollout, EvaluatorError>>),
    /// [`PolicyEvaluator::set_filter_statistics`].
    SetFilterStatistics(Arc<RunningStat>, RpcReplyPort<Result<(), EvaluatorError>>),
    /// Snapshot the evaluator for a checkpoint.
    SaveState(RpcReplyPort<Result<EvaluatorState, EvaluatorError>>),
    /// Restore a checkpoint's snapshot.
    LoadState(Arc<EvaluatorState>, RpcReplyPort<Result<(), EvaluatorError>>),
}

impl ractor::Message for EvaluatorMsg {}

/// An actor owning one [`PolicyEvaluator`].
pub struct EvaluatorActor;

/// Arguments to start an [`EvaluatorActor`].
pub struct EvaluatorArgs {
    /// Builds the evaluator.
    pub factory: EvaluatorFactory,
    /// Evaluator index (workers count from 1).
    pub index: usize,
    /// 0 on first start, +1 per restart.
    pub generation: u64,
}

impl Actor for EvaluatorActor {
    type Msg = EvaluatorMsg;
    type State = PolicyEvaluator;
    type Arguments = EvaluatorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: EvaluatorArgs,
    ) -> Result<PolicyEvaluator, ActorProcessingErr> {
        Ok((args.factory)(args.index, args.generation)?)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: EvaluatorMsg,
        state: &mut PolicyEvaluator,
    ) -> Result<(), ActorProcessingErr> {
        // A panic in here fails the actor and reaches the supervisor; a dropped
        // reply port tells the caller the actor died. So does an error that
        // escalates (the env shards below gave up): the supervisor restarts
        // this evaluator with new shards and the caller's handle retries.
        match msg {
            EvaluatorMsg::Sample(reply) => answer(reply, state.sample())?,
            EvaluatorMsg::SetWeights(w, reply) => {
                let _ = reply.send(state.set_weights(&w));
            }
            EvaluatorMsg::PushWeights(w) => {
                // Weights of the wrong length are a bug in the driver: fail the
                // actor so the supervisor reports it.
                state.set_weights(&w)?;
            }
            EvaluatorMsg::SampleAndComputeGradients(reply) => answer(reply, state.sample_and_compute_gradients())?,
            EvaluatorMsg::SetFilterStatistics(s, reply) => {
                state.set_filter_statistics(&s);
                let _ = reply.send(Ok(()));
            }
            EvaluatorMsg::SaveState(reply) => {
                // The handle knows the evaluator's index and fills it in.
                let _ = reply.send(Ok(state.save_state(0)));
            }
            EvaluatorMsg::LoadState(s, reply) => answer(reply, state.load_state(&s))?,
        }
        Ok(())
    }
}

/// Sends `result` to the caller, or fails the actor with an error that
/// [escalates](EvaluatorError::escalates) (dropping the reply port).
fn answer<T>(
    reply: RpcReplyPort<Result<T, EvaluatorError>>,
    result: Result<T, EvaluatorError>,
) -> Result<(), ActorProcessingErr> {
    match result {
        Err(e) if e.escalates() => Err(e.into()),
        result => {
            let _ = reply.send(result);
            Ok(())
        }
    }
}

/// Messages the [`EvaluatorSupervisor`] handles.
pub enum SupervisorMsg {
    /// The current actor of evaluator `index`, and its restart count. If
    /// `dead` is that actor, the reply waits for the replacement.
    Lookup {
        /// Evaluator index.
        index: usize,
        /// The actor the caller found dead, if any.
        dead: Option<ActorId>,
        /// Where to send the answer.
        reply: RpcReplyPort<Result<(ActorRef<EvaluatorMsg>, u64), HandleError>>,
    },
    /// Start one more evaluator, `index`, under this supervisor (a node
    /// adds each evaluator a driver places on it to that driver's set).
    Add {
        /// Evaluator index; must not be in the set yet.
        index: usize,
        /// Its first generation (seeds differ per generation).
        generation: u64,
        /// Where to send the outcome.
        reply: RpcReplyPort<Result<(), HandleError>>,
    },
}

impl ractor::Message for SupervisorMsg {}

/// Supervises a set of [`EvaluatorActor`]s with a [`RestartPolicy`].
pub struct EvaluatorSupervisor;

/// Arguments to start an [`EvaluatorSupervisor`].
pub struct SupervisorArgs {
    /// Builds each evaluator.
    pub factory: EvaluatorFactory,
    /// Indices of the evaluators to run.
    pub indices: Vec<usize>,
    /// Restart strategy and budget.
    pub policy: RestartPolicy,
    /// Incremented on every restart, for metrics that must not lag.
    pub restarts: Arc<AtomicU64>,
}

struct Slot {
    index: usize,
    actor: Option<ActorRef<EvaluatorMsg>>,
    generation: u64,
    restarts: u64,
    waiting: Vec<RpcReplyPort<Result<(ActorRef<EvaluatorMsg>, u64), HandleError>>>,
}

/// The supervisor's state.
pub struct SupervisorState {
    factory: EvaluatorFactory,
    policy: RestartPolicy,
    slots: Vec<Slot>,
    failures: FailureWindow,
    gave_up: Option<HandleError>,
    restarts: Arc<AtomicU64>,
}

async fn spawn_slot(
    supervisor: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    slot: usize,
) -> Result<(), HandleError> {
    let s = &state.slots[slot];
    let args = EvaluatorArgs { factory: state.factory.clone(), index: s.index, generation: s.generation };
    let (actor, _) = Actor::spawn_linked(None, EvaluatorActor, args, supervisor.get_cell())
        .await
        .map_err(|e| HandleError::Spawn { index: s.index, reason: e.to_string() })?;
    let s = &mut state.slots[slot];
    for reply in s.waiting.drain(..) {
        let _ = reply.send(Ok((actor.clone(), s.restarts)));
    }
    s.actor = Some(actor);
    Ok(())
}

impl EvaluatorSupervisor {
    /// Records a failure of `slot` and restarts according to the policy.
    async fn on_failure(myself: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, slot: usize, reason: String) {
        let index = state.slots[slot].index;
        tracing::warn!(evaluator = index, %reason, "evaluator failed");
        if let Err(failures) = state.failures.record() {
            Self::give_up(
                state,
                HandleError::RestartBudgetExceeded {
                    index,
                    failures,
                    max_restarts: state.policy.max_restarts,
                    window_s: state.policy.window_s,
                    last_failure: reason,
                },
            );
            return;
        }
        let to_restart: Vec<usize> = match state.policy.strategy {
            RestartStrategy::OneForOne => vec![slot],
            RestartStrategy::OneForAll => (0..state.slots.len()).collect(),
        };
        for &i in &to_restart {
            if let Some(actor) = state.slots[i].actor.take() {
                // Siblings stopped for one-for-all; the failed one is already dead.
                actor.stop(Some("restarted by supervisor".into()));
            }
            state.slots[i].generation += 1;
            state.slots[i].restarts += 1;
            state.restarts.fetch_add(1, Ordering::Relaxed);
        }
        for i in to_restart {
            if let Err(e) = spawn_slot(myself, state, i).await {
                Self::give_up(state, e);
                return;
            }
        }
    }

    fn give_up(state: &mut SupervisorState, error: HandleError) {
        tracing::error!(%error, "evaluator supervisor gives up");
        for s in &mut state.slots {
            if let Some(actor) = s.actor.take() {
                actor.stop(Some("supervisor gave up".into()));
            }
            for reply in s.waiting.drain(..) {
                let _ = reply.send(Err(error.clone()));
            }
        }
        state.gave_up = Some(error);
    }
}

impl Actor for EvaluatorSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let slots = args
            .indices
            .iter()
            .map(|&index| Slot { index, actor: None, generation: 0, restarts: 0, waiting: Vec::new() })
            .collect();
        let mut state = SupervisorState {
            factory: args.factory,
            policy: args.policy,
            slots,
            failures: FailureWindow::new(args.policy),
            gave_up: None,
            restarts: args.restarts,
        };
        for i in 0..state.slots.len() {
            spawn_slot(&myself, &mut state, i).await?;
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        for s in &mut state.slots {
            if let Some(actor) = s.actor.take() {
                actor.stop(Some("supervisor stopped".into()));
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Add { index, generation, reply } => {
                if let Some(err) = &state.gave_up {
                    let _ = reply.send(Err(err.clone()));
                    return Ok(());
                }
                if state.slots.iter().any(|s| s.index == index) {
                    let reason = "an evaluator with this index is already in the set".into();
                    let _ = reply.send(Err(HandleError::Spawn { index, reason }));
                    return Ok(());
                }
                state.slots.push(Slot { index, actor: None, generation, restarts: 0, waiting: Vec::new() });
                let slot = state.slots.len() - 1;
                let result = spawn_slot(&myself, state, slot).await;
                if result.is_err() {
                    state.slots.pop();
                }
                let _ = reply.send(result);
            }
            SupervisorMsg::Lookup { index, dead, reply } => {
                if let Some(err) = &state.gave_up {
                    let _ = reply.send(Err(err.clone()));
                    return Ok(());
                }
                let Some(slot) = state.slots.iter_mut().find(|s| s.index == index) else {
                    let _ = reply.send(Err(HandleError::Unreachable { index, reason: "no such evaluator".into() }));
                    return Ok(());
                };
                match &slot.actor {
                    Some(actor) if Some(actor.get_id()) != dead => {
                        let _ = reply.send(Ok((actor.clone(), slot.restarts)));
                    }
                    // The caller saw the current actor die before we did: answer
                    // once the supervision event has produced the replacement.
                    _ => slot.waiting.push(reply),
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        if state.gave_up.is_some() {
            return Ok(());
        }
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("terminated: {}", reason.unwrap_or_else(|| "no reason given".into())))
            }
            _ => return Ok(()),
        };
        // Only the current actor of a slot counts; actors we stopped ourselves
        // (one-for-all siblings) were already taken out of their slots.
        let slot = state.slots.iter().position(|s| s.actor.as_ref().is_some_and(|a| a.get_id() == cell.get_id()));
        if let Some(slot) = slot {
            state.slots[slot].actor = None;
            Self::on_failure(&myself, state, slot, reason).await;
        }
        Ok(())
    }
}

/// Driver-side handle to an [`EvaluatorActor`]; see the module docs for how
/// it recovers from restarts.
pub struct RactorEvaluator {
    index: usize,
    actor: ActorRef<EvaluatorMsg>,
    supervisor: ActorRef<SupervisorMsg>,
    latest_weights: Option<Arc<FlatWeights>>,
    latest_filter: Option<Arc<RunningStat>>,
    stats: HandleStats,
}

impl RactorEvaluator {
    async fn lookup(
        supervisor: &ActorRef<SupervisorMsg>,
        index: usize,
        dead: Option<ActorId>,
    ) -> Result<(ActorRef<EvaluatorMsg>, u64), HandleError> {
        supervisor
            .call(|reply| SupervisorMsg::Lookup { index, dead, reply }, None)
            .await
            .map_err(|e| HandleError::Unreachable { index, reason: format!("supervisor: {e}") })?
            .success_or(HandleError::Unreachable { index, reason: "supervisor stopped".into() })?
    }

    /// A new handle to evaluator `index` of `supervisor`'s set.
    async fn attach(supervisor: &ActorRef<SupervisorMsg>, index: usize) -> Result<Self, HandleError> {
        let (actor, restarts) = Self::lookup(supervisor, index, None).await?;
        Ok(Self {
            index,
            actor,
            supervisor: supervisor.clone(),
            latest_weights: None,
            latest_filter: None,
            stats: HandleStats { restarts, ..HandleStats::default() },
        })
    }

    /// Calls the actor; if it died, fetches its replacement, brings it up to
    /// date with the latest weights, and calls again.
    async fn call<T: Send + 'static>(
        &mut self,
        make: impl Fn(RpcReplyPort<Result<T, EvaluatorError>>) -> EvaluatorMsg + Send + Sync,
    ) -> Result<T, HandleError> {
        loop {
            match self.actor.call(&make, None).await {
                Ok(ractor::rpc::CallResult::Success(result)) => {
                    return result.map_err(|source| HandleError::Failed { index: self.index, source })
                }
                // The reply port was dropped or the mailbox closed: the actor died.
                _ => self.recover().await?,
            }
        }
    }

    async fn recover(&mut self) -> Result<(), HandleError> {
        let (actor, restarts) = Self::lookup(&self.supervisor, self.index, Some(self.actor.get_id())).await?;
        self.actor = actor;
        self.stats.restarts = restarts;
        // If these calls fail too, the caller's loop recovers again (each
        // failure counts against the supervisor's budget, so this ends).
        if let Some(w) = self.latest_weights.clone() {
            let _ = self.actor.call(|reply| EvaluatorMsg::SetWeights(w.clone(), reply), None).await;
        }
        if let Some(s) = self.latest_filter.clone() {
            let _ = self.actor.call(|reply| EvaluatorMsg::SetFilterStatistics(s.clone(), reply), None).await;
        }
        Ok(())
    }
}

#[async_trait]
impl EvaluatorHandle for RactorEvaluator {
    fn index(&self) -> usize {
        self.index
    }

    async fn sample(&mut self) -> Result<Rollout, HandleError> {
        let rollout = self.call(EvaluatorMsg::Sample).await?;
        self.stats.record(rollout.batch.len(), rollout.env_shard_restarts);
        Ok(rollout)
    }

    async fn set_weights(&mut self, weights: Arc<FlatWeights>) -> Result<(), HandleError> {
        self.latest_weights = Some(weights.clone());
        self.call(move |reply| EvaluatorMsg::SetWeights(weights.clone(), reply)).await
    }

    fn push_weights(&mut self, weights: Arc<FlatWeights>) {
        self.latest_weights = Some(weights.clone());
        // If the actor is gone, the next call recovers it and sends these
        // weights to the replacement.
        let _ = self.actor.cast(EvaluatorMsg::PushWeights(weights));
    }

    async fn sample_and_compute_gradients(&mut self) -> Result<GradientRollout, HandleError> {
        let out = self.call(EvaluatorMsg::SampleAndComputeGradients).await?;
        self.stats.record(out.steps, out.env_shard_restarts);
        Ok(out)
    }

    async fn set_filter_statistics(&mut self, statistics: Arc<RunningStat>) -> Result<(), HandleError> {
        self.latest_filter = Some(statistics.clone());
        self.call(move |reply| EvaluatorMsg::SetFilterStatistics(statistics.clone(), reply)).await
    }

    fn stats(&self) -> HandleStats {
        self.stats
    }

    async fn save_state(&mut self) -> Result<EvaluatorState, HandleError> {
        let mut state = self.call(EvaluatorMsg::SaveState).await?;
        state.index = self.index;
        Ok(state)
    }

    async fn load_state(&mut self, state: Arc<EvaluatorState>) -> Result<(), HandleError> {
        self.call(move |reply| EvaluatorMsg::LoadState(state.clone(), reply)).await
    }
}

/// A supervised set of evaluator actors. Dropping it stops the supervisor
/// and, with it, every evaluator.
pub struct RactorEvaluatorSet {
    supervisor: ActorRef<SupervisorMsg>,
    restarts: Arc<AtomicU64>,
}

impl RactorEvaluatorSet {
    /// Spawns a supervisor and, under it, one evaluator actor per index,
    /// returning the set and a handle per evaluator.
    ///
    /// # Errors
    /// If an evaluator cannot be built (e.g. an unknown env): the factory's
    /// error, naming the evaluator.
    pub async fn spawn(
        factory: EvaluatorFactory,
        indices: Vec<usize>,
        policy: RestartPolicy,
    ) -> Result<(Self, Vec<RactorEvaluator>), HandleError> {
        let first = indices.first().copied().unwrap_or(0);
        let restarts = Arc::new(AtomicU64::new(0));
        let args = SupervisorArgs { factory, indices: indices.clone(), policy, restarts: restarts.clone() };
        let (supervisor, _) = Actor::spawn(None, EvaluatorSupervisor, args)
            .await
            .map_err(|e| HandleError::Spawn { index: first, reason: ractor_spawn_reason(&e) })?;
        let set = Self { supervisor: supervisor.clone(), restarts };
        let mut handles = Vec::with_capacity(indices.len());
        for index in indices {
            handles.push(RactorEvaluator::attach(&supervisor, index).await?);
        }
        Ok((set, handles))
    }
}

impl RactorEvaluatorSet {
    /// Starts evaluator `index` under this set's supervisor, so that its
    /// restart policy (one-for-all included) and budget cover it too.
    /// `generation` is its first generation: an evaluator that already ran
    /// elsewhere (re-placed from a lost node) starts past the generations it
    /// used there, so its envs do not replay the same seeds.
    ///
    /// # Errors
    /// The supervisor has given up, `index` is taken, or the evaluator
    /// cannot be built.
    pub async fn add(&self, index: usize, generation: u64) -> Result<RactorEvaluator, HandleError> {
        self.supervisor
            .call(|reply| SupervisorMsg::Add { index, generation, reply }, None)
            .await
            .map_err(|e| HandleError::Unreachable { index, reason: format!("supervisor: {e}") })?
            .success_or(HandleError::Unreachable { index, reason: "supervisor stopped".into() })??;
        RactorEvaluator::attach(&self.supervisor, index).await
    }

    /// Evaluator restarts so far, counted by the supervisor as they happen
    /// (a handle learns of a restart only on its next call).
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

impl crate::placement::WorkerSet for RactorEvaluatorSet {
    fn restarts(&self) -> u64 {
        RactorEvaluatorSet::restarts(self)
    }
}

fn ractor_spawn_reason(e: &ractor::SpawnErr) -> String {
    // ractor wraps the pre_start error; show the innermost message.
    match e {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

impl Drop for RactorEvaluatorSet {
    fn drop(&mut self) {
        self.supervisor.stop(Some("evaluator set dropped".into()));
    }
}
