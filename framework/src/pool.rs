//! [`ActorPool`]: a supervised set of child actors of one kind, for any
//! component that hides its own parallelism (an ES evaluator's
//! perturbation workers, a population-based-training driver's members,
//! Ape-X's replay shards, an evaluator's env shards).
//!
//! ```text
//! PoolSupervisor  (one-for-one | one-for-all, at most N restarts in T s)
//!   ├── child 0     built from `args(0, generation)`
//!   ├── child 1
//!   └── ...
//! ```
//!
//! The caller holds an [`ActorPool`] and calls a child by index. A child
//! that dies (a panic in its handler, a kill) is restarted by the
//! supervisor from `args(index, generation + 1)`; the pool notices on its
//! next call to it, asks the supervisor for the replacement and sends the
//! request again, so a caller sees an answer, not the failure. The
//! children's requests must therefore be safe to repeat: they describe the
//! work (which perturbations, which weights) rather than continue a
//! conversation. Past the budget every call fails with
//! [`PoolError::BudgetExceeded`], naming the child and its last failure.
//!
//! A pool can live inside another actor's state: the child supervisors then
//! form a tree, and dropping the pool (the owner stopped or was killed)
//! stops its subtree.

use crate::restart::{FailureWindow, RestartPolicy, RestartStrategy};
use futures::future::join_all;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::marker::PhantomData;
use std::sync::Arc;

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

/// Where a lookup's answer goes: child's actor and generation.
type LookupReply<A> = RpcReplyPort<Result<(ActorRef<<A as Actor>::Msg>, u64), PoolError>>;

/// Messages of a [`PoolSupervisor`].
pub enum PoolMsg<A: Actor> {
    /// The current actor of child `index` and its generation. If `dead` is
    /// that actor, the reply waits for its replacement.
    Lookup {
        /// The child.
        index: usize,
        /// The actor the caller found dead, if any.
        dead: Option<ActorId>,
        /// Where the answer goes.
        reply: LookupReply<A>,
    },
}

impl<A: Actor> ractor::Message for PoolMsg<A> {}

/// Starts, watches and restarts the children of an [`ActorPool`].
pub struct PoolSupervisor<A>(PhantomData<fn() -> A>);

/// Arguments of a [`PoolSupervisor`].
pub struct PoolArgs<A: Actor> {
    name: String,
    actor: A,
    n: usize,
    args: ChildArgs<A>,
    restart: RestartPolicy,
}

struct Slot<A: Actor> {
    actor: Option<ActorRef<A::Msg>>,
    generation: u64,
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
}

impl<A: Actor + Clone> PoolSupervisor<A> {
    async fn spawn_child(myself: &ActorRef<PoolMsg<A>>, s: &mut PoolState<A>, i: usize) -> Result<(), PoolError> {
        let args = (s.args)(i, s.slots[i].generation);
        let (actor, _) = Actor::spawn_linked(None, s.actor.clone(), args, myself.get_cell())
            .await
            .map_err(|e| PoolError::Spawn { pool: s.name.clone(), child: i, reason: e.to_string() })?;
        let slot = &mut s.slots[i];
        for reply in slot.waiting.drain(..) {
            let _ = reply.send(Ok((actor.clone(), slot.generation)));
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
        let slots = (0..a.n).map(|_| Slot { actor: None, generation: 0, waiting: Vec::new() }).collect();
        let mut s = PoolState {
            name: a.name,
            actor: a.actor,
            args: a.args,
            restart: a.restart,
            slots,
            failures: FailureWindow::new(a.restart),
            gave_up: None,
        };
        for i in 0..a.n {
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
        _: ActorRef<PoolMsg<A>>,
        msg: PoolMsg<A>,
        s: &mut PoolState<A>,
    ) -> Result<(), ActorProcessingErr> {
        let PoolMsg::Lookup { index, dead, reply } = msg;
        if let Some(error) = &s.gave_up {
            let _ = reply.send(Err(error.clone()));
            return Ok(());
        }
        let Some(slot) = s.slots.get_mut(index) else {
            let reason = format!("the pool has {} children", s.slots.len());
            let _ = reply.send(Err(PoolError::Unreachable { pool: s.name.clone(), child: index, reason }));
            return Ok(());
        };
        match &slot.actor {
            Some(actor) if Some(actor.get_id()) != dead => {
                let _ = reply.send(Ok((actor.clone(), slot.generation)));
            }
            // The caller saw the child die before the supervision event
            // reached us: answer once the replacement runs.
            _ => slot.waiting.push(reply),
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
        let Some(i) = s.slots.iter().position(|x| x.actor.as_ref().is_some_and(|a| a.get_id() == cell.get_id())) else {
            // A child this supervisor stopped itself (one-for-all).
            return Ok(());
        };
        s.slots[i].actor = None;
        tracing::warn!(pool = %s.name, child = i, %reason, "child failed; restarting");
        if let Err(failures) = s.failures.record() {
            let error = PoolError::BudgetExceeded {
                pool: s.name.clone(),
                child: i,
                failures,
                max_restarts: s.restart.max_restarts,
                window_s: s.restart.window_s,
                last_failure: reason,
            };
            Self::give_up(s, error);
            return Ok(());
        }
        let restart: Vec<usize> = match s.restart.strategy {
            RestartStrategy::OneForOne => vec![i],
            RestartStrategy::OneForAll => (0..s.slots.len()).collect(),
        };
        for &j in &restart {
            if let Some(actor) = s.slots[j].actor.take() {
                actor.stop(Some(format!("one-for-all restart after child {i} failed")));
            }
            s.slots[j].generation += 1;
        }
        for j in restart {
            if let Err(e) = Self::spawn_child(&myself, s, j).await {
                Self::give_up(s, e);
                break;
            }
        }
        Ok(())
    }
}

/// What the caller knows of one child.
struct ChildView<M> {
    actor: ActorRef<M>,
    generation: u64,
}

/// The caller's side of a supervised pool: calls that survive a child's
/// restart. Dropping it stops the supervisor and its children.
pub struct ActorPool<A: Actor> {
    name: String,
    supervisor: ActorRef<PoolMsg<A>>,
    children: Vec<ChildView<A::Msg>>,
    restarts: u64,
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
        let pool_args = PoolArgs { name: name.to_string(), actor, n, args, restart };
        let (supervisor, _) = Actor::spawn(None, PoolSupervisor::<A>(PhantomData), pool_args)
            .await
            .map_err(|e| PoolError::Spawn { pool: name.to_string(), child: 0, reason: e.to_string() })?;
        let mut children = Vec::with_capacity(n);
        for index in 0..n {
            let (actor, generation) = lookup(&supervisor, name, index, None).await?;
            children.push(ChildView { actor, generation });
        }
        Ok(Self { name: name.to_string(), supervisor, children, restarts: 0 })
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
    pub fn actor(&self, i: usize) -> &ActorRef<A::Msg> {
        &self.children[i].actor
    }

    /// Child `i`'s generation as this pool last saw it: the restarts it has
    /// gone through (a call answered by a replacement updates it).
    pub fn generation(&self, i: usize) -> u64 {
        self.children[i].generation
    }

    /// Restarts this pool has noticed (each child's generations, summed).
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Sends child `i` the request `msg` builds and waits for the answer;
    /// if the child died, waits for its replacement and sends it again.
    ///
    /// # Errors
    /// The supervisor gave up, or the child cannot be reached.
    pub async fn call<T: Send + 'static>(
        &mut self,
        i: usize,
        msg: impl Fn(RpcReplyPort<T>) -> A::Msg + Sync,
    ) -> Result<T, PoolError> {
        let (supervisor, name) = (&self.supervisor, self.name.as_str());
        let view = self.children.get_mut(i).ok_or_else(|| PoolError::Unreachable {
            pool: name.to_string(),
            child: i,
            reason: "no such child".into(),
        })?;
        let (answer, restarts) = call_child(supervisor, name, i, view, &msg).await?;
        self.restarts += restarts;
        Ok(answer)
    }

    /// [`call`](Self::call) on every child at once; the answers come in
    /// child order.
    ///
    /// # Errors
    /// The first child that failed for good.
    pub async fn call_all<T: Send + 'static>(
        &mut self,
        msg: impl Fn(usize, RpcReplyPort<T>) -> A::Msg + Sync,
    ) -> Result<Vec<T>, PoolError> {
        let (supervisor, name, msg) = (&self.supervisor, self.name.as_str(), &msg);
        let n = self.children.len();
        let calls = self
            .children
            .iter_mut()
            .enumerate()
            .map(|(i, view)| async move { call_child(supervisor, name, i, view, &|reply| msg(i, reply)).await });
        let mut answers = Vec::with_capacity(n);
        for result in join_all(calls).await {
            let (answer, restarts) = result?;
            self.restarts += restarts;
            answers.push(answer);
        }
        Ok(answers)
    }
}

/// One call with retries on the child's replacement; returns the answer and
/// the restarts noticed.
async fn call_child<A: Actor, T: Send + 'static>(
    supervisor: &ActorRef<PoolMsg<A>>,
    name: &str,
    i: usize,
    view: &mut ChildView<A::Msg>,
    msg: &(dyn Fn(RpcReplyPort<T>) -> A::Msg + Sync),
) -> Result<(T, u64), PoolError> {
    let mut restarts = 0;
    loop {
        if let Ok(CallResult::Success(answer)) = view.actor.call(msg, None).await {
            return Ok((answer, restarts));
        }
        let dead = view.actor.get_id();
        let (actor, generation) = lookup(supervisor, name, i, Some(dead)).await?;
        restarts += generation.saturating_sub(view.generation);
        *view = ChildView { actor, generation };
    }
}

impl<A: Actor> Drop for ActorPool<A> {
    fn drop(&mut self) {
        self.supervisor.stop(None);
    }
}

async fn lookup<A: Actor>(
    supervisor: &ActorRef<PoolMsg<A>>,
    name: &str,
    index: usize,
    dead: Option<ActorId>,
) -> Result<(ActorRef<A::Msg>, u64), PoolError> {
    let unreachable = |reason: String| PoolError::Unreachable { pool: name.to_string(), child: index, reason };
    match supervisor.call(|reply| PoolMsg::Lookup { index, dead, reply }, None).await {
        Ok(CallResult::Success(result)) => result,
        Ok(_) => Err(unreachable("the supervisor did not answer".into())),
        Err(e) => Err(unreachable(format!("the supervisor is gone: {e}"))),
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
        let mut pool = ActorPool::spawn("doubler", Doubler, 3, pool_args(), policy).await.unwrap();
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
        let mut pool = ActorPool::spawn("doubler", Doubler, 2, pool_args(), policy).await.unwrap();
        pool.actor(0).kill();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(pool.call_all(|i, r| DoublerMsg::Double(i as i64, r)).await.unwrap(), vec![(0, 1), (2, 1)]);
        assert_eq!(pool.restarts(), 2);
    }

    #[tokio::test]
    async fn a_child_failing_past_the_budget_is_an_error_naming_it() {
        let policy = RestartPolicy { max_restarts: 2, ..Default::default() };
        let mut pool = ActorPool::spawn("doubler", Doubler, 2, pool_args(), policy).await.unwrap();
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
