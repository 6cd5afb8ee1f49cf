//! Where worker evaluators live: the hook that lets a deployment (remote
//! nodes, another actor backend) place them without any algorithm or
//! optimizer knowing.
//!
//! [`Evaluators::spawn_placed`](crate::Evaluators::spawn_placed) asks the
//! [`Placement`] it is given for its workers; without one, they are
//! supervised ractor actors in this process
//! ([`RactorEvaluatorSet`](crate::actor::RactorEvaluatorSet)). A deployment
//! hands its placement to the build, which passes it down in its build
//! context:
//!
//! ```text
//! build_trainer_placed("PPO", make_env, &config, cluster)
//!   └── ppo::build(ctx, ..) → spawn_evaluators(&ctx, ..) → Evaluators::spawn_placed(.., ctx.placement)
//!         └── cluster.place(..)
//! ```
//!
//! An algorithm passes its context on and knows nothing of where its
//! workers run.

use crate::evaluator::EvaluatorFactory;
use crate::handle::{HandleError, SharedHandle};
use crate::restart::RestartPolicy;
use futures::future::BoxFuture;

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
