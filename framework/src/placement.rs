//! Where worker evaluators live: the hook that lets a deployment (remote
//! nodes, another actor backend) place them without any algorithm or
//! optimizer knowing.
//!
//! [`Evaluators::spawn`](crate::Evaluators::spawn) asks the [`Placement`] in
//! scope for its workers; with none in scope, they are supervised ractor
//! actors in this process ([`RactorEvaluatorSet`](crate::actor::RactorEvaluatorSet)).
//! A deployment runs the algorithm's build inside [`with_placement`]:
//!
//! ```text
//! with_placement(cluster, build_trainer("PPO", "CartPole-v1", &config))
//!   └── ppo::build → spawn_evaluators → Evaluators::spawn → cluster.place(..)
//! ```
//!
//! A task-local, rather than a parameter threaded through every algorithm's
//! build function, keeps the fourteen algorithms free of deployment code.

use crate::evaluator::EvaluatorFactory;
use crate::handle::{HandleError, SharedHandle};
use crate::restart::RestartPolicy;
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;

/// Workers placed by a [`Placement`]: their handles, and whatever keeps
/// them alive (dropping it stops them).
pub struct PlacedWorkers {
    /// One handle per requested index, in order.
    pub handles: Vec<SharedHandle>,
    /// Owns the workers' actors; also counts their restarts.
    pub keep_alive: Box<dyn WorkerSet>,
}

/// What owns a set of placed workers.
pub trait WorkerSet: Send + Sync {
    /// Restarts (and re-placements) of the workers so far.
    fn restarts(&self) -> u64;

    /// Failures worth a line in the results (e.g. a lost node), oldest first.
    fn failures(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Decides where worker evaluators run.
pub trait Placement: Send + Sync {
    /// Starts one worker per index (each built by `factory`, which any
    /// process running the same algorithm build can reproduce) and returns
    /// their handles.
    fn place(
        &self,
        factory: EvaluatorFactory,
        indices: Vec<usize>,
        restart: RestartPolicy,
    ) -> BoxFuture<'static, Result<PlacedWorkers, HandleError>>;
}

tokio::task_local! {
    static PLACEMENT: Arc<dyn Placement>;
}

/// Runs `build` with `placement` deciding where its evaluators live.
pub async fn with_placement<F: Future>(placement: Arc<dyn Placement>, build: F) -> F::Output {
    PLACEMENT.scope(placement, build).await
}

/// The placement in scope, if any.
pub fn current() -> Option<Arc<dyn Placement>> {
    PLACEMENT.try_with(Arc::clone).ok()
}
