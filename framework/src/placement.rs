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

    /// Where the workers are, for a deployment across nodes; `None` for
    /// workers in this process.
    fn cluster(&self) -> Option<ClusterStatus> {
        None
    }
}

/// A cluster's state as the results show it (`result.json`'s `cluster`
/// object, the progress line's `nodes a/b`, TensorBoard's `cluster/*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterStatus {
    /// Nodes admitted and answering now.
    pub nodes_alive: u64,
    /// Nodes the run knows of: those given at start and those that joined.
    pub nodes_known: u64,
    /// Node losses so far (a node lost twice counts twice).
    pub nodes_lost: u64,
    /// Nodes admitted again after they were lost, so far.
    pub readmissions: u64,
    /// Worker evaluators running on nodes now.
    pub evaluators_on_nodes: u64,
    /// Worker evaluators running in the driver's process now (no node
    /// had room for them).
    pub evaluators_local: u64,
    /// Worker evaluators the run asked for: the count placement keeps
    /// meeting on nodes.
    pub evaluators_target: u64,
    /// Wall time so far during which fewer than `evaluators_target`
    /// evaluators ran on nodes, seconds.
    pub seconds_below_target: f64,
    /// Evaluators moved between homes while their old home still worked
    /// (out of the driver, or off a crowded node), so far.
    pub moves: u64,
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
