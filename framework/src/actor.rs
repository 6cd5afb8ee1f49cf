//! Evaluators as supervised **ractor** actors.
//!
//! ```text
//! PoolSupervisor<EvaluatorActor>  (restart policy: one-for-one | one-for-all,
//!   ├── EvaluatorActor 1            at most `max_restarts` in `window`)
//!   ├── EvaluatorActor 2
//!   └── ...
//! ```
//!
//! Each [`EvaluatorActor`] owns a [`PolicyEvaluator`] built by an
//! [`EvaluatorFactory`] in `pre_start` (a failed build is a spawn error, not a
//! later panic). The evaluators run under the generic supervisor of
//! [`crate::pool`], as every other supervised actor in rlx does. A panic
//! while sampling fails the actor; the supervisor records the failure and
//! starts a replacement from the factory with the next generation's seed.
//! The driver-side handle, [`RactorEvaluator`], notices the dead actor on
//! its next call, attaches to the replacement, pushes the latest weights it
//! sent, and retries — so optimizers carry on without knowing. Past the
//! budget (Erlang/OTP's intensity and period: more than `max_restarts`
//! failures within `window`) the supervisor gives up and every call returns
//! [`HandleError::RestartBudgetExceeded`], naming the evaluator whose
//! failure exhausted the budget and why it failed.

use crate::evaluator::{EvaluatorError, EvaluatorFactory, PolicyEvaluator};
use crate::handle::{lock, EvaluatorHandle, HandleError, HandleStats};
use crate::pool::{ChildArgs, Died, PoolChild, PoolError, PoolRef};
use crate::protocol::{EvalReply, EvalRequest, LatestState};
use crate::restart::RestartPolicy;
use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::{Arc, Mutex};

/// Messages an [`EvaluatorActor`] handles: the evaluator protocol.
pub enum EvaluatorMsg {
    /// Serve a request and answer.
    Call(EvalRequest, RpcReplyPort<Result<EvalReply, EvaluatorError>>),
    /// Serve a request without answering ([`EvalRequest::PushWeights`]).
    Cast(EvalRequest),
}

impl ractor::Message for EvaluatorMsg {}

/// An actor owning one [`PolicyEvaluator`].
#[derive(Clone, Copy, Debug)]
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
        // The handle knows the evaluator's index and fills it in a state.
        match msg {
            EvaluatorMsg::Call(request, reply) => answer(reply, state.serve(&request, 0))?,
            EvaluatorMsg::Cast(request) => {
                // A cast that fails (weights of the wrong length: a bug in
                // the driver) fails the actor so the supervisor reports it.
                state.serve(&request, 0)?;
            }
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

/// Driver-side handle to an [`EvaluatorActor`]; see the module docs for how
/// it recovers from restarts. Callable through `&self`: share it in an
/// `Arc` to keep several requests in flight.
pub struct RactorEvaluator {
    child: PoolChild<EvaluatorActor>,
    latest: Mutex<LatestState>,
    stats: Mutex<HandleStats>,
}

impl RactorEvaluator {
    fn new(child: PoolChild<EvaluatorActor>) -> Self {
        let stats = HandleStats { restarts: child.restarts(), ..HandleStats::default() };
        Self { child, latest: Mutex::default(), stats: Mutex::new(stats) }
    }

    /// The actor as this handle last saw it (for a fault test to kill it).
    pub fn actor(&self) -> ActorRef<EvaluatorMsg> {
        self.child.actor()
    }

    async fn recover(&self, died: Died) -> Result<(), HandleError> {
        self.child.recover(died).await.map_err(handle_error)?;
        lock(&self.stats).restarts = self.child.restarts();
        // If these calls fail too, the caller's loop recovers again (each
        // failure counts against the supervisor's budget, so this ends).
        let replay = lock(&self.latest).replay();
        for request in replay {
            let _ = self.child.try_call(|reply| EvaluatorMsg::Call(request.clone(), reply)).await;
        }
        Ok(())
    }
}

/// A pool failure as the handle error naming the evaluator.
fn handle_error(e: PoolError) -> HandleError {
    match e {
        PoolError::BudgetExceeded { child, failures, max_restarts, window_s, last_failure, .. } => {
            HandleError::RestartBudgetExceeded { index: child, failures, max_restarts, window_s, last_failure }
        }
        PoolError::Spawn { child, reason, .. } => HandleError::Spawn { index: child, reason },
        PoolError::Unreachable { child, reason, .. } => HandleError::Unreachable { index: child, reason },
    }
}

#[async_trait]
impl EvaluatorHandle for RactorEvaluator {
    fn index(&self) -> usize {
        self.child.index()
    }

    /// Calls the actor; if it died, attaches to its replacement, brings it
    /// up to date with the latest weights and filter, and calls again.
    async fn call(&self, request: EvalRequest) -> Result<EvalReply, HandleError> {
        lock(&self.latest).note(&request);
        loop {
            match self.child.try_call(|reply| EvaluatorMsg::Call(request.clone(), reply)).await {
                Ok(result) => {
                    let reply = result.map_err(|source| HandleError::Failed { index: self.child.index(), source })?;
                    lock(&self.stats).record_reply(&reply);
                    return Ok(reply);
                }
                // The reply port was dropped or the mailbox closed: the actor died.
                Err(died) => self.recover(died).await?,
            }
        }
    }

    fn cast(&self, request: EvalRequest) {
        lock(&self.latest).note(&request);
        // If the actor is gone, the next call recovers it and sends the
        // latest weights to the replacement.
        let _ = self.child.actor().cast(EvaluatorMsg::Cast(request));
    }

    fn stats(&self) -> HandleStats {
        *lock(&self.stats)
    }
}

/// A supervised set of evaluator actors. Dropping it stops the supervisor
/// and, with it, every evaluator.
pub struct RactorEvaluatorSet {
    pool: PoolRef<EvaluatorActor>,
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
        let args: ChildArgs<EvaluatorActor> =
            Arc::new(move |index, generation| EvaluatorArgs { factory: factory.clone(), index, generation });
        let pool = PoolRef::spawn("evaluator", EvaluatorActor, indices.clone(), args, policy).await;
        let set = Self { pool: pool.map_err(handle_error)? };
        let mut handles = Vec::with_capacity(indices.len());
        for index in indices {
            handles.push(RactorEvaluator::new(set.pool.attach(index).await.map_err(handle_error)?));
        }
        Ok((set, handles))
    }

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
        Ok(RactorEvaluator::new(self.pool.add(index, generation).await.map_err(handle_error)?))
    }

    /// Evaluator restarts so far, counted by the supervisor as they happen
    /// (a handle learns of a restart only on its next call).
    pub fn restarts(&self) -> u64 {
        self.pool.restarts()
    }

    /// Stops evaluator `index` and takes it out of the set, without
    /// counting a failure: it moved to another home. The index may be
    /// [`add`](Self::add)ed again later.
    pub async fn remove(&self, index: usize) {
        self.pool.remove(index).await;
    }
}

impl crate::placement::WorkerSet for RactorEvaluatorSet {
    fn restarts(&self) -> u64 {
        RactorEvaluatorSet::restarts(self)
    }
}

impl Drop for RactorEvaluatorSet {
    fn drop(&mut self) {
        self.pool.stop("evaluator set dropped");
    }
}
