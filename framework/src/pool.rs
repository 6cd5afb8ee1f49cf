//! The one supervisor: a supervised set of child actors of one kind.
//! Evaluators, env shards, replay shards, ES and ARS workers and PBT
//! members all run under it.
//!
//! ```text
//! PoolSupervisor  (one-for-one | one-for-all, at most N restarts in T s)
//!   ├── child 0     built from `args(0, generation)`
//!   ├── child 1
//!   └── ...
//! ```
//!
//! Children are known by an index (0, 1, … for an [`ActorPool`]; the
//! evaluators' own indices for an evaluator set), and a set can grow
//! ([`PoolRef::add`]: a node adds each evaluator a driver places on it). A
//! child that dies (a panic in its handler, a kill) is restarted by the
//! supervisor from `args(index, generation + 1)`. A caller holds a
//! [`PoolChild`] per child it talks to: it notices the death on its next
//! call, asks the supervisor for the replacement and sends the request
//! again, so a caller sees an answer, not the failure. The children's
//! requests must therefore be safe to repeat: they describe the work (which
//! perturbations, which weights) rather than continue a conversation; a
//! caller that must bring a replacement up to date first (an evaluator's
//! latest weights) uses [`PoolChild::try_call`] and [`PoolChild::recover`]
//! itself. Past the budget every call fails with
//! [`PoolError::BudgetExceeded`], naming the child and its last failure.
//!
//! [`ActorPool`] is the common case: one owner talking to all children.
//! A pool can live inside another actor's state: the child supervisors then
//! form a tree, and dropping the pool (the owner stopped or was killed)
//! stops its subtree.

use crate::restart::{FailureWindow, RestartPolicy, RestartStrategy};
use futures::future::join_all;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Builds child `index`'s start arguments for its `generation` (0 at
/// first, +1 per restart): a restarted child can pick up newer state (the
/// latest weights) or a fresh seed.
pub type ChildArgs<A> = Arc<dyn Fn(usize, u64) -> <A as Actor>::Arguments + Send + Sync>;

/// Why a pool call failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum PoolError {
    /// The supervisor gave up: more failures than its budget allows.
    #[error(
        "{pool} child {child} failed {failures} times within {window_s} s (at most {max_restarts} restarts allowed); last failure: {last_failure}"
    )]
    BudgetExceeded {
        /// What the pool holds, e.g. `"PBT member"`.
        pool: String,
        /// The child whose failure exhausted the budget.
        child: usize,
        /// Failures inside the window.
        failures: usize,
        /// The policy's `max_restarts`.
        max_restarts: usize,
        /// The policy's window.
        window_s: f64,
        /// Why the child failed (e.g. the panic message).
        last_failure: String,
    },
    /// A child could not be started (its `pre_start` failed).
    #[error("{pool} child {child} could not be started: {reason}")]
    Spawn {
        /// What the pool holds.
        pool: String,
        /// The child.
        child: usize,
        /// Why.
        reason: String,
    },
    /// No such child, or the supervisor is gone.
    #[error("{pool} child {child} is unreachable: {reason}")]
    Unreachable {
        /// What the pool holds.
        pool: String,
        /// The child.
        child: usize,
        /// Why.
        reason: String,
    },
}

/// A child's current actor, its generation and its restarts so far.
type Current<M> = (ActorRef<M>, u64, u64);

/// Where a lookup's answer goes.
type LookupReply<A> = RpcReplyPort<Result<Current<<A as Actor>::Msg>, PoolError>>;

/// Messages of a [`PoolSupervisor`].
pub enum PoolMsg<A: Actor> {
    /// The current actor of child `index`. If `dead` is that actor, the
    /// reply waits for its replacement.
    Lookup {
        /// The child.
        index: usize,
        /// The actor the caller found dead, if any.
        dead: Option<ActorId>,
        /// Where the answer goes.
        reply: LookupReply<A>,
    },
    /// Start one more child, `index`, from its `generation`.
    Add {
        /// The child; must not be in the set yet.
        index: usize,
        /// Its first generation.
        generation: u64,
        /// Where the outcome goes.
        reply: RpcReplyPort<Result<(), PoolError>>,
    },
    /// Stop child `index` and take it out of the set: no failure, no
    /// restart (an evaluator that moved elsewhere). Unknown indices are
    /// ignored.
    Remove {
        /// The child.
        index: usize,
        /// Answered once the child is out of the set.
        reply: RpcReplyPort<()>,
    },
}

impl<A: Actor> ractor::Message for PoolMsg<A> {}

/// Starts, watches and restarts the children of a pool.
pub struct PoolSupervisor<A>(PhantomData<fn() -> A>);

/// Arguments of a [`PoolSupervisor`].
pub struct PoolArgs<A: Actor> {
    name: String,
    actor: A,
    indices: Vec<usize>,
    args: ChildArgs<A>,
    restart: RestartPolicy,
    restarts: Arc<AtomicU64>,
}

struct Slot<A: Actor> {
    index: usize,
    actor: Option<ActorRef<A::Msg>>,
    generation: u64,
    restarts: u64,
    waiting: Vec<LookupReply<A>>,
}

/// The supervisor's children and failure record.
pub struct PoolState<A: Actor> {
    name: String,
    actor: A,
    args: ChildArgs<A>,
    restart: RestartPolicy,
    slots: Vec<Slot<A>>,
    failures: FailureWindow,
    gave_up: Option<PoolError>,
    restarts: Arc<AtomicU64>,
}

impl<A: Actor + Clone> PoolSupervisor<A> {
    async fn spawn_child(myself: &ActorRef<PoolMsg<A>>, s: &mut PoolState<A>, i: usize) -> Result<(), PoolError> {
        let (index, generation) = (s.slots[i].index, s.slots[i].generation);
        let args = (s.args)(index, generation);
        let (actor, _) = Actor::spawn_linked(None, s.actor.clone(), args, myself.get_cell())
            .await
            .map_err(|e| PoolError::Spawn { pool: s.name.clone(), child: index, reason: spawn_reason(&e) })?;
        let slot = &mut s.slots[i];
        for reply in slot.waiting.drain(..) {
            let _ = reply.send(Ok((actor.clone(), slot.generation, slot.restarts)));
        }
        slot.actor = Some(actor);
        Ok(())
    }

    fn give_up(s: &mut PoolState<A>, error: PoolError) {
        tracing::error!(%error, "supervisor gives up");
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

    /// Records a failure of slot `i` and restarts as the policy says.
    async fn on_failure(myself: &ActorRef<PoolMsg<A>>, s: &mut PoolState<A>, i: usize, reason: String) {
        let index = s.slots[i].index;
        tracing::warn!(pool = %s.name, child = index, %reason, "child failed; restarting");
        if let Err(failures) = s.failures.record() {
            let (max_restarts, window_s) = (s.restart.max_restarts, s.restart.window_s);
            let pool = s.name.clone();
            let error = PoolError::BudgetExceeded {
                pool,
                child: index,
                failures,
                max_restarts,
                window_s,
                last_failure: reason,
            };
            Self::give_up(s, error);
            return;
        }
        let restart: Vec<usize> = match s.restart.strategy {
            RestartStrategy::OneForOne => vec![i],
            RestartStrategy::OneForAll => (0..s.slots.len()).collect(),
        };
        for &j in &restart {
            if let Some(actor) = s.slots[j].actor.take() {
                actor.stop(Some(format!("one-for-all restart after child {index} failed")));
            }
            s.slots[j].generation += 1;
            s.slots[j].restarts += 1;
            s.restarts.fetch_add(1, Ordering::Relaxed);
        }
        for j in restart {
            if let Err(e) = Self::spawn_child(myself, s, j).await {
                Self::give_up(s, e);
                break;
            }
        }
    }
}

impl<A: Actor + Clone> Actor for PoolSupervisor<A> {
    type Msg = PoolMsg<A>;
    type State = PoolState<A>;
    type Arguments = PoolArgs<A>;

    async fn pre_start(
        &self,
        myself: ActorRef<PoolMsg<A>>,
        a: PoolArgs<A>,
    ) -> Result<PoolState<A>, ActorProcessingErr> {
        let slot = |index| Slot { index, actor: None, generation: 0, restarts: 0, waiting: Vec::new() };
        let mut s = PoolState {
            name: a.name,
            actor: a.actor,
            args: a.args,
            restart: a.restart,
            slots: a.indices.into_iter().map(slot).collect(),
            failures: FailureWindow::new(a.restart),
            gave_up: None,
            restarts: a.restarts,
        };
        for i in 0..s.slots.len() {
            Self::spawn_child(&myself, &mut s, i).await?;
        }
        Ok(s)
    }

    async fn post_stop(&self, _: ActorRef<PoolMsg<A>>, s: &mut PoolState<A>) -> Result<(), ActorProcessingErr> {
        for slot in &mut s.slots {
            if let Some(actor) = slot.actor.take() {
                actor.stop(Some("supervisor stopped".into()));
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<PoolMsg<A>>,
        msg: PoolMsg<A>,
        s: &mut PoolState<A>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(error) = s.gave_up.clone() {
            match msg {
                PoolMsg::Lookup { reply, .. } => drop(reply.send(Err(error))),
                PoolMsg::Add { reply, .. } => drop(reply.send(Err(error))),
                PoolMsg::Remove { reply, .. } => drop(reply.send(())),
            }
            return Ok(());
        }
        match msg {
            PoolMsg::Add { index, generation, reply } => {
                if s.slots.iter().any(|x| x.index == index) {
                    let reason = "a child with this index is already in the set".to_string();
                    let _ = reply.send(Err(PoolError::Spawn { pool: s.name.clone(), child: index, reason }));
                    return Ok(());
                }
                s.slots.push(Slot { index, actor: None, generation, restarts: 0, waiting: Vec::new() });
                let result = Self::spawn_child(&myself, s, s.slots.len() - 1).await;
                if result.is_err() {
                    s.slots.pop();
                }
                let _ = reply.send(result);
            }
            PoolMsg::Remove { index, reply } => {
                // Out of the slots first, so its termination is no failure.
                if let Some(i) = s.slots.iter().position(|x| x.index == index) {
                    let mut slot = s.slots.remove(i);
                    if let Some(actor) = slot.actor.take() {
                        actor.stop(Some("moved elsewhere".into()));
                    }
                }
                let _ = reply.send(());
            }
            PoolMsg::Lookup { index, dead, reply } => {
                let Some(slot) = s.slots.iter_mut().find(|x| x.index == index) else {
                    let reason = "no such child".to_string();
                    let _ = reply.send(Err(PoolError::Unreachable { pool: s.name.clone(), child: index, reason }));
                    return Ok(());
                };
                match &slot.actor {
                    Some(actor) if Some(actor.get_id()) != dead => {
                        let _ = reply.send(Ok((actor.clone(), slot.generation, slot.restarts)));
                    }
                    // The caller saw the child die before the supervision
                    // event reached us: answer once the replacement runs.
                    _ => slot.waiting.push(reply),
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<PoolMsg<A>>,
        event: SupervisionEvent,
        s: &mut PoolState<A>,
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
        // Only a slot's current actor counts; children this supervisor
        // stopped itself (one-for-all) were already taken out of their slots.
        if let Some(i) = s.slots.iter().position(|x| x.actor.as_ref().is_some_and(|a| a.get_id() == cell.get_id())) {
            s.slots[i].actor = None;
            Self::on_failure(&myself, s, i, reason).await;
        }
        Ok(())
    }
}

/// ractor wraps the `pre_start` error; the innermost message (a pool error
/// naming its child, or the child's own) is the one worth showing.
fn spawn_reason(e: &ractor::SpawnErr) -> String {
    match e {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// A cheap, cloneable handle on a pool's supervisor: attaches callers to
/// children, adds children, counts restarts. Dropping it does not stop the
/// supervisor; [`ActorPool`] and the evaluator set stop theirs on drop.
pub struct PoolRef<A: Actor> {
    name: Arc<str>,
    supervisor: ActorRef<PoolMsg<A>>,
    restarts: Arc<AtomicU64>,
}

impl<A: Actor> Clone for PoolRef<A> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), supervisor: self.supervisor.clone(), restarts: self.restarts.clone() }
    }
}

impl<A: Actor + Clone> PoolRef<A> {
    /// Starts a supervisor and, under it, child `i` of `indices` from
    /// `args(i, 0)`, with `restart`'s strategy and budget. `name` says what
    /// the children are in errors and logs (e.g. `"ES worker"`).
    ///
    /// # Errors
    /// [`PoolError::Spawn`] naming the first child whose `pre_start` failed.
    pub async fn spawn(
        name: &str,
        actor: A,
        indices: Vec<usize>,
        args: ChildArgs<A>,
        restart: RestartPolicy,
    ) -> Result<Self, PoolError> {
        let first = indices.first().copied().unwrap_or(0);
        let restarts = Arc::new(AtomicU64::new(0));
        let pool_args = PoolArgs { name: name.to_string(), actor, indices, args, restart, restarts: restarts.clone() };
        let (supervisor, _) = Actor::spawn(None, PoolSupervisor::<A>(PhantomData), pool_args).await.map_err(|e| {
            // The supervisor's pre_start fails with the error of the child
            // that could not start, which names it.
            match &e {
                ractor::SpawnErr::StartupFailed(inner) => inner.downcast_ref::<PoolError>().cloned(),
                _ => None,
            }
            .unwrap_or_else(|| PoolError::Spawn {
                pool: name.to_string(),
                child: first,
                reason: spawn_reason(&e),
            })
        })?;
        Ok(Self { name: name.into(), supervisor, restarts })
    }

    /// A caller's handle on child `index`.
    ///
    /// # Errors
    /// No such child, or the supervisor gave up.
    pub async fn attach(&self, index: usize) -> Result<PoolChild<A>, PoolError> {
        let current = lookup(self, index, None).await?;
        Ok(PoolChild { pool: self.clone(), index, current: Mutex::new(current) })
    }

    /// Starts child `index` from `generation` under this supervisor, so its
    /// strategy and budget cover it too, and attaches to it.
    ///
    /// # Errors
    /// The supervisor gave up, `index` is taken, or the child cannot start.
    pub async fn add(&self, index: usize, generation: u64) -> Result<PoolChild<A>, PoolError> {
        let unreachable = |reason: String| PoolError::Unreachable { pool: self.name.to_string(), child: index, reason };
        match self.supervisor.call(|reply| PoolMsg::Add { index, generation, reply }, None).await {
            Ok(CallResult::Success(result)) => result?,
            Ok(_) => return Err(unreachable("the supervisor did not answer".into())),
            Err(e) => return Err(unreachable(format!("the supervisor is gone: {e}"))),
        }
        self.attach(index).await
    }

    /// Restarts so far, counted by the supervisor as they happen (a caller
    /// learns of a restart only on its next call).
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Stops child `index` and takes it out of the set without counting a
    /// failure, so the index may be added again later. Returns once it is
    /// out (at once if the supervisor is gone).
    pub async fn remove(&self, index: usize) {
        let _ = self.supervisor.call(|reply| PoolMsg::Remove { index, reply }, None).await;
    }

    /// Stops the supervisor and its children.
    pub fn stop(&self, reason: &str) {
        self.supervisor.stop(Some(reason.to_string()));
    }
}

/// A child that died under a call: the actor that answered no more.
#[derive(Clone, Copy, Debug)]
pub struct Died(ActorId);

/// A caller's side of one child: calls that survive the child's restarts.
/// Callable through `&self` from several tasks at once: the child as last
/// seen sits behind a lock that is never held across an await.
pub struct PoolChild<A: Actor> {
    pool: PoolRef<A>,
    index: usize,
    current: Mutex<Current<A::Msg>>,
}

impl<A: Actor + Clone> PoolChild<A> {
    /// The child's index.
    pub fn index(&self) -> usize {
        self.index
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Current<A::Msg>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The child's actor as this handle last saw it (to inspect it, or for
    /// a fault test to kill it).
    pub fn actor(&self) -> ActorRef<A::Msg> {
        self.seen().0.clone()
    }

    /// The generation this handle last saw answer.
    pub fn generation(&self) -> u64 {
        self.seen().1
    }

    /// The child's restarts, as of the last replacement this handle saw.
    pub fn restarts(&self) -> u64 {
        self.seen().2
    }

    /// Sends the request `msg` builds and waits for the answer;
    /// [`Died`] if the child died (pass it to [`recover`](Self::recover),
    /// then try again).
    pub async fn try_call<T: Send + 'static>(&self, msg: impl Fn(RpcReplyPort<T>) -> A::Msg) -> Result<T, Died> {
        let actor = self.actor();
        match actor.call(msg, None).await {
            Ok(CallResult::Success(answer)) => Ok(answer),
            _ => Err(Died(actor.get_id())),
        }
    }

    /// Waits for the replacement of the child that `died` and attaches to
    /// it. Callers that saw the same death at once all attach to the same
    /// replacement.
    ///
    /// # Errors
    /// The supervisor gave up, or is gone.
    pub async fn recover(&self, died: Died) -> Result<(), PoolError> {
        let current = lookup(&self.pool, self.index, Some(died.0)).await?;
        let mut seen = self.seen();
        // Keep a newer replacement another caller attached to meanwhile.
        if seen.1 <= current.1 {
            *seen = current;
        }
        Ok(())
    }

    /// [`try_call`](Self::try_call), recovering and sending again until the
    /// child answers or the supervisor gives up.
    ///
    /// # Errors
    /// The supervisor gave up, or is gone.
    pub async fn call<T: Send + 'static>(&self, msg: impl Fn(RpcReplyPort<T>) -> A::Msg) -> Result<T, PoolError> {
        loop {
            match self.try_call(&msg).await {
                Ok(answer) => return Ok(answer),
                Err(died) => self.recover(died).await?,
            }
        }
    }
}

async fn lookup<A: Actor>(
    pool: &PoolRef<A>,
    index: usize,
    dead: Option<ActorId>,
) -> Result<Current<A::Msg>, PoolError> {
    let unreachable = |reason: String| PoolError::Unreachable { pool: pool.name.to_string(), child: index, reason };
    match pool.supervisor.call(|reply| PoolMsg::Lookup { index, dead, reply }, None).await {
        Ok(CallResult::Success(result)) => result,
        Ok(_) => Err(unreachable("the supervisor did not answer".into())),
        Err(e) => Err(unreachable(format!("the supervisor is gone: {e}"))),
    }
}

/// One owner talking to all children `0..n` of a supervised pool. Dropping
/// it stops the supervisor and its children.
pub struct ActorPool<A: Actor> {
    pool: PoolRef<A>,
    children: Vec<PoolChild<A>>,
}

impl<A: Actor + Clone> ActorPool<A> {
    /// Starts `n` children of `actor`, child `i` from `args(i, 0)`, under a
    /// supervisor with `restart`'s strategy and budget. `name` says what
    /// the children are in errors and logs (e.g. `"ES worker"`).
    ///
    /// # Errors
    /// [`PoolError::Spawn`] if a child's `pre_start` fails.
    pub async fn spawn(
        name: &str,
        actor: A,
        n: usize,
        args: ChildArgs<A>,
        restart: RestartPolicy,
    ) -> Result<Self, PoolError> {
        let pool = PoolRef::spawn(name, actor, (0..n).collect(), args, restart).await?;
        let mut children = Vec::with_capacity(n);
        for index in 0..n {
            children.push(pool.attach(index).await?);
        }
        Ok(Self { pool, children })
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether the pool has no children.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Child `i`'s actor as this pool last saw it (to inspect it, or for a
    /// fault test to kill it): after a restart, the replacement shows here
    /// once a call has reached it.
    pub fn actor(&self, i: usize) -> ActorRef<A::Msg> {
        self.children[i].actor()
    }

    /// Child `i`'s generation as this pool last saw it: the restarts it has
    /// gone through (a call answered by a replacement updates it).
    pub fn generation(&self, i: usize) -> u64 {
        self.children[i].generation()
    }

    /// Restarts this pool has noticed (each child's, summed).
    pub fn restarts(&self) -> u64 {
        self.children.iter().map(PoolChild::restarts).sum()
    }

    /// Sends child `i` the request `msg` builds and waits for the answer;
    /// if the child died, waits for its replacement and sends it again.
    ///
    /// # Errors
    /// The supervisor gave up, or the child cannot be reached.
    pub async fn call<T: Send + 'static>(
        &self,
        i: usize,
        msg: impl Fn(RpcReplyPort<T>) -> A::Msg + Sync,
    ) -> Result<T, PoolError> {
        let name = self.pool.name.to_string();
        let child = self.children.get(i).ok_or_else(|| PoolError::Unreachable {
            pool: name,
            child: i,
            reason: "no such child".into(),
        })?;
        child.call(msg).await
    }

    /// [`call`](Self::call) on every child at once; the answers come in
    /// child order.
    ///
    /// # Errors
    /// The first child that failed for good.
    pub async fn call_all<T: Send + 'static>(
        &self,
        msg: impl Fn(usize, RpcReplyPort<T>) -> A::Msg + Sync,
    ) -> Result<Vec<T>, PoolError> {
        let msg = &msg;
        let calls = self.children.iter().enumerate().map(|(i, c)| async move { c.call(|r| msg(i, r)).await });
        join_all(calls).await.into_iter().collect()
    }
}

impl<A: Actor> Drop for ActorPool<A> {
    fn drop(&mut self) {
        self.pool.supervisor.stop(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubles numbers; panics on 13 (an unlucky env).
    #[derive(Clone)]
    struct Doubler;

    enum DoublerMsg {
        Double(i64, RpcReplyPort<(i64, u64)>),
    }

    impl ractor::Message for DoublerMsg {}

    impl Actor for Doubler {
        type Msg = DoublerMsg;
        type State = u64;
        type Arguments = u64;

        async fn pre_start(&self, _: ActorRef<DoublerMsg>, generation: u64) -> Result<u64, ActorProcessingErr> {
            Ok(generation)
        }

        async fn handle(
            &self,
            _: ActorRef<DoublerMsg>,
            msg: DoublerMsg,
            generation: &mut u64,
        ) -> Result<(), ActorProcessingErr> {
            let DoublerMsg::Double(x, reply) = msg;
            assert!(x != 13, "13 is unlucky");
            let _ = reply.send((2 * x, *generation));
            Ok(())
        }
    }

    fn pool_args() -> ChildArgs<Doubler> {
        Arc::new(|_, generation| generation)
    }

    #[tokio::test]
    async fn a_killed_child_is_replaced_and_the_call_answered() {
        let policy = RestartPolicy { max_restarts: 3, ..Default::default() };
        let pool = ActorPool::spawn("doubler", Doubler, 3, pool_args(), policy).await.unwrap();
        assert_eq!(pool.call_all(|i, r| DoublerMsg::Double(i as i64, r)).await.unwrap(), vec![(0, 0), (2, 0), (4, 0)]);
        pool.actor(1).kill();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // Child 1 answers from its replacement (generation 1); the others are untouched.
        assert_eq!(pool.call_all(|i, r| DoublerMsg::Double(i as i64, r)).await.unwrap(), vec![(0, 0), (2, 1), (4, 0)]);
        assert_eq!(pool.restarts(), 1);
    }

    #[tokio::test]
    async fn one_for_all_restarts_every_child() {
        let policy = RestartPolicy { strategy: RestartStrategy::OneForAll, max_restarts: 3, window_s: 60.0 };
        let pool = ActorPool::spawn("doubler", Doubler, 2, pool_args(), policy).await.unwrap();
        pool.actor(0).kill();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(pool.call_all(|i, r| DoublerMsg::Double(i as i64, r)).await.unwrap(), vec![(0, 1), (2, 1)]);
        assert_eq!(pool.restarts(), 2);
    }

    #[tokio::test]
    async fn a_child_failing_past_the_budget_is_an_error_naming_it() {
        let policy = RestartPolicy { max_restarts: 2, ..Default::default() };
        let pool = ActorPool::spawn("doubler", Doubler, 2, pool_args(), policy).await.unwrap();
        let err = pool.call(1, |r| DoublerMsg::Double(13, r)).await.unwrap_err();
        match &err {
            PoolError::BudgetExceeded { pool, child, failures, max_restarts, last_failure, .. } => {
                assert_eq!((pool.as_str(), *child, *failures, *max_restarts), ("doubler", 1, 3, 2));
                assert!(last_failure.contains("13 is unlucky"), "{last_failure}");
            }
            other => panic!("expected BudgetExceeded, got {other:?}"),
        }
        assert!(err.to_string().contains("doubler child 1 failed 3 times"), "{err}");
    }
}
