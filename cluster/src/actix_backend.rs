//! The actix backend (`"backend": "actix"`): each worker evaluator is an
//! actix [`SyncArbiter`] actor on its own OS thread, behind the same
//! [`EvaluatorHandle`] as the ractor actors.
//!
//! ```text
//! actix System (one thread; the arbiter that forwards to sync actors)
//!   ├── SyncArbiter ── thread ── SyncEvaluator 1
//!   └── SyncArbiter ── thread ── SyncEvaluator 2
//! ```
//!
//! Why a sync actor: sampling is CPU-bound, and a thread per evaluator
//! keeps it off the async runtime entirely. The actix System runs on the
//! process's tokio runtime when the binary shares it
//! ([`share_runtime`], as `rlx` does), so the process has one runtime.
//!
//! Supervision: a panic while sampling is caught in the actor, which
//! answers [`EvaluatorError::Panicked`] and stops (so does an error that
//! [escalates](EvaluatorError::escalates): its env shards gave up); the SyncArbiter then
//! builds a fresh one from the factory (next generation, next seed). The
//! handle counts the failure against the restart budget, brings the new
//! actor up to date with the latest weights and filter statistics, and
//! retries, as [`RactorEvaluator`](rlx::actor::RactorEvaluator) does. Only
//! one-for-one restarts exist here: evaluators share nothing.

use actix::prelude::*;
use futures::future::BoxFuture;
use rlx::handle::{lock, panic_message, HandleStats, SharedHandle};
use rlx::placement::{PlacedWorkers, Placement, WorkerSet};
use rlx::protocol::{EvalReply, EvalRequest, LatestState};
use rlx::restart::{FailureWindow, RestartPolicy, RestartStrategy};
use rlx::{EvaluatorError, EvaluatorFactory, EvaluatorHandle, HandleError, PolicyEvaluator};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

static RUNTIME: OnceLock<Arc<tokio::runtime::Runtime>> = OnceLock::new();
static SYSTEM: OnceLock<System> = OnceLock::new();

/// Lets the actix System run on this process's tokio runtime instead of a
/// runtime of its own. Call once, before the first actix evaluator.
pub fn share_runtime(runtime: Arc<tokio::runtime::Runtime>) {
    let _ = RUNTIME.set(runtime);
}

/// The process's actix System, started on first use on a thread of its own.
fn system() -> System {
    SYSTEM
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("rlx-actix-system".into())
                .spawn(move || {
                    let runner = match RUNTIME.get() {
                        Some(rt) => System::with_tokio_rt(|| rt.clone()),
                        None => System::new(),
                    };
                    let _ = tx.send(System::current());
                    let _ = runner.run();
                })
                .expect("spawn the actix system thread");
            rx.recv().expect("the actix system starts")
        })
        .clone()
}

/// The evaluator protocol's request as an actix message.
struct Request(EvalRequest);

impl Message for Request {
    type Result = Result<EvalReply, EvaluatorError>;
}

/// A sync actor owning one evaluator (or the error that kept it from being built).
struct SyncEvaluator {
    index: usize,
    evaluator: Result<PolicyEvaluator, EvaluatorError>,
}

impl Actor for SyncEvaluator {
    type Context = SyncContext<Self>;
}

impl Handler<Request> for SyncEvaluator {
    type Result = Result<EvalReply, EvaluatorError>;

    fn handle(&mut self, Request(request): Request, ctx: &mut SyncContext<Self>) -> Self::Result {
        let index = self.index;
        let evaluator = self.evaluator.as_mut().map_err(|e| e.clone())?;
        let run = AssertUnwindSafe(|| evaluator.serve(&request, index));
        match catch_unwind(run) {
            // The env shards below gave up: only a new evaluator brings new
            // ones. The handle counts it like a panic.
            Ok(Err(e)) if e.escalates() => {
                ctx.stop();
                Err(e)
            }
            Ok(result) => result,
            Err(panic) => {
                // The evaluator may be half-updated: replace it.
                ctx.stop();
                Err(EvaluatorError::Panicked(panic_message(&*panic)))
            }
        }
    }
}

/// Places workers as actix sync actors in this process.
#[derive(Default)]
pub struct ActixPlacement;

impl Placement for ActixPlacement {
    fn place(
        &self,
        factory: EvaluatorFactory,
        indices: Vec<usize>,
        restart: RestartPolicy,
    ) -> BoxFuture<'static, Result<PlacedWorkers, HandleError>> {
        let placed = place(factory, indices, restart);
        Box::pin(async move { placed })
    }
}

fn place(factory: EvaluatorFactory, indices: Vec<usize>, restart: RestartPolicy) -> Result<PlacedWorkers, HandleError> {
    if restart.strategy == RestartStrategy::OneForAll {
        return Err(HandleError::Spawn {
            index: indices.first().copied().unwrap_or(0),
            reason: "the actix backend restarts one-for-one only; use the ractor backend for one_for_all".into(),
        });
    }
    System::set_current(system());
    // The factory runs on the sync actor's thread, outside the runtime;
    // entering it there lets an evaluator start env shards on it.
    let runtime = tokio::runtime::Handle::try_current().ok();
    let restarts = Arc::new(AtomicU64::new(0));
    let window = Arc::new(Mutex::new(FailureWindow::new(restart)));
    let mut handles: Vec<SharedHandle> = Vec::with_capacity(indices.len());
    for index in indices {
        let generation = Arc::new(AtomicU64::new(0));
        let (factory, runtime) = (factory.clone(), runtime.clone());
        // SyncArbiter calls this at the start and after every stop.
        let addr = SyncArbiter::start(1, move || {
            let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
            SyncEvaluator { index, evaluator: factory(index, generation.fetch_add(1, Ordering::Relaxed)) }
        });
        handles.push(Arc::new(ActixEvaluator {
            index,
            addr,
            policy: restart,
            window: window.clone(),
            restarts: restarts.clone(),
            latest: Mutex::default(),
            stats: Mutex::default(),
        }));
    }
    Ok(PlacedWorkers { handles, keep_alive: Box::new(ActixWorkers { restarts }) })
}

/// Counts the restarts of a set of actix workers (dropping every handle stops them).
struct ActixWorkers {
    restarts: Arc<AtomicU64>,
}

impl WorkerSet for ActixWorkers {
    fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// The handle to one actix sync evaluator.
pub struct ActixEvaluator {
    index: usize,
    addr: Addr<SyncEvaluator>,
    policy: RestartPolicy,
    window: Arc<Mutex<FailureWindow>>,
    restarts: Arc<AtomicU64>,
    latest: Mutex<LatestState>,
    stats: Mutex<HandleStats>,
}

impl ActixEvaluator {
    async fn send(&self, request: EvalRequest) -> Result<Result<EvalReply, EvaluatorError>, HandleError> {
        self.addr
            .send(Request(request))
            .await
            .map_err(|e| HandleError::Unreachable { index: self.index, reason: format!("actix evaluator: {e}") })
    }

    async fn restarted(&self, reason: String) -> Result<(), HandleError> {
        let recorded = self.window.lock().expect("window lock").record();
        if let Err(failures) = recorded {
            return Err(HandleError::RestartBudgetExceeded {
                index: self.index,
                failures,
                max_restarts: self.policy.max_restarts,
                window_s: self.policy.window_s,
                last_failure: reason,
            });
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        lock(&self.stats).restarts += 1;
        let replay = lock(&self.latest).replay();
        for request in replay {
            let _ = self.send(request).await;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl EvaluatorHandle for ActixEvaluator {
    fn index(&self) -> usize {
        self.index
    }

    /// Sends the request; after a panic, counts it, updates the rebuilt
    /// actor and retries.
    async fn call(&self, request: EvalRequest) -> Result<EvalReply, HandleError> {
        lock(&self.latest).note(&request);
        loop {
            match self.send(request.clone()).await? {
                Err(EvaluatorError::Panicked(reason)) => self.restarted(reason).await?,
                Err(e) if e.escalates() => self.restarted(e.to_string()).await?,
                Err(source) => return Err(HandleError::Failed { index: self.index, source }),
                Ok(reply) => {
                    lock(&self.stats).record_reply(&reply);
                    return Ok(reply);
                }
            }
        }
    }

    fn cast(&self, request: EvalRequest) {
        lock(&self.latest).note(&request);
        // Served before the actor's next request (its mailbox is FIFO).
        self.addr.do_send(Request(request));
    }

    fn stats(&self) -> HandleStats {
        *lock(&self.stats)
    }
}
