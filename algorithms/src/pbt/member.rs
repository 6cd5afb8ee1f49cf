//! The population's members: one supervised actor per member, each
//! holding a whole [`Trainer`] of the member algorithm, rebuilt from a
//! snapshot ([`MemberSpec`]) when it exploits or restarts.

use super::member_algorithms::MemberAlgorithms;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rlx::env::EnvMaker;
use rlx::filter::MeanStdFilter;
use rlx::{EpisodeSummary, EvaluatorError, FlatWeights, OptimizerError, TrainResult, Trainer};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a member is built from: the driver's latest snapshot of it.
#[derive(Clone, Debug)]
pub struct MemberSpec {
    /// The member algorithm's config overrides (shared config, seed and
    /// explored hyperparameters).
    pub config: Value,
    /// Weights to start from (`None`: the algorithm's initialization).
    pub weights: Option<Arc<FlatWeights>>,
    /// Observation-filter statistics to start from, if the member filters.
    pub filter: Option<MeanStdFilter>,
    /// The member's own iterations trained up to these weights.
    pub iteration: u64,
}

/// What a member reports after training.
#[derive(Clone, Debug)]
pub struct MemberReport {
    /// The result of its last iteration.
    pub result: TrainResult,
    /// Every episode it finished in these iterations.
    pub episodes: Vec<EpisodeSummary>,
    /// Env steps it sampled in these iterations.
    pub steps_sampled: u64,
    /// Env steps it trained on in these iterations.
    pub steps_trained: u64,
    /// Iterations it trained in this request.
    pub iterations: u64,
    /// Its own iterations so far.
    pub iteration: u64,
    /// Its weights now.
    pub weights: Arc<FlatWeights>,
    /// Its observation filter now, if it filters.
    pub filter: Option<MeanStdFilter>,
}

impl MemberReport {
    /// The ranking score: the mean return of the episodes finished in this
    /// request, else the trainer's 100-episode mean, else `None`.
    pub fn score(&self) -> Option<f64> {
        if self.episodes.is_empty() {
            return self.result.episode_reward_mean;
        }
        Some(self.episodes.iter().map(|e| e.episode_return).sum::<f64>() / self.episodes.len() as f64)
    }
}

/// Messages of a [`PbtMember`]. Each describes its work completely, so a
/// restarted member can be sent it again.
pub enum MemberMsg {
    /// Train `iterations` iterations, starting from `spec` (a member whose
    /// own iteration count differs, i.e. a replacement started from an
    /// older snapshot, first rebuilds from `spec`).
    Train {
        /// Where the member should be.
        spec: MemberSpec,
        /// Iterations to train.
        iterations: u64,
        /// The report.
        reply: RpcReplyPort<Result<MemberReport, OptimizerError>>,
    },
    /// Rebuild from `spec` (exploit, or restoring a checkpoint).
    Reset(MemberSpec, RpcReplyPort<Result<(), OptimizerError>>),
    /// The member's current weights.
    Weights(RpcReplyPort<Arc<FlatWeights>>),
}

impl ractor::Message for MemberMsg {}

/// A population member: an actor owning a whole [`Trainer`] of the member
/// algorithm (with its own evaluators), built in `pre_start`.
#[derive(Clone)]
pub struct PbtMember {
    /// The table the member algorithm is built from.
    pub(super) algorithms: &'static dyn MemberAlgorithms,
    /// The member algorithm's name.
    pub(super) algorithm: String,
    pub(super) make_env: EnvMaker,
}

/// Arguments to start a [`PbtMember`].
pub struct MemberArgs {
    /// The member's index in the population.
    pub index: usize,
    /// 0 on first start, +1 per restart.
    pub generation: u64,
    /// What to build.
    pub spec: MemberSpec,
    /// Counts every iteration this member's actors complete, including
    /// ones lost with a dead actor.
    pub trained: Arc<AtomicU64>,
}

/// A running member.
pub struct MemberState {
    index: usize,
    generation: u64,
    trainer: Trainer,
    iteration: u64,
    trained: Arc<AtomicU64>,
}

impl PbtMember {
    /// A trainer built from `spec`, with its weights and filter applied.
    async fn build(&self, index: usize, spec: &MemberSpec, generation: u64) -> Result<Trainer, OptimizerError> {
        let mut config = spec.config.clone();
        if generation > 0 {
            // A restarted member must not replay its predecessor's episodes.
            let seed = config.get("seed").and_then(Value::as_u64).unwrap_or(0);
            config["seed"] = json!(seed.wrapping_add(7_919 * generation));
        }
        let rebuild_err = |e: &dyn std::fmt::Display| {
            OptimizerError::Learner(EvaluatorError::Config(format!("cannot build PBT member {index}: {e}")))
        };
        let mut trainer = self
            .algorithms
            .build(&self.algorithm, self.make_env.clone(), &config)
            .await
            .map_err(|e| rebuild_err(&e))?;
        if let Some(weights) = &spec.weights {
            trainer.restore_weights(weights.clone()).await?;
        }
        if let Some(filter) = &spec.filter {
            let evaluators = trainer.evaluators_mut();
            match evaluators.local_mut().observation_filter_mut() {
                Some(mine) => *mine = filter.clone(),
                None => return Err(rebuild_err(&"the snapshot has an observation filter, the member none")),
            }
            let statistics = Arc::new(filter.global().clone());
            for w in evaluators.workers() {
                w.set_filter_statistics(statistics.clone()).await?;
            }
        }
        Ok(trainer)
    }

    async fn train(
        &self,
        s: &mut MemberState,
        spec: MemberSpec,
        iterations: u64,
    ) -> Result<MemberReport, OptimizerError> {
        if s.iteration != spec.iteration {
            s.trainer = self.build(s.index, &spec, s.generation).await?;
            s.iteration = spec.iteration;
        }
        let before = s.trainer.last_result().clone();
        let mut episodes = Vec::new();
        for _ in 0..iterations {
            s.trainer.train().await?;
            episodes.extend_from_slice(s.trainer.last_episodes());
            s.iteration += 1;
            s.trained.fetch_add(1, Ordering::SeqCst);
            // Let a kill (or the other members on this thread) in between
            // iterations: the iterations trained so far die with the actor.
            tokio::task::yield_now().await;
        }
        let result = s.trainer.last_result().clone();
        let local = s.trainer.evaluators().local();
        Ok(MemberReport {
            steps_sampled: result.timesteps_total - before.timesteps_total,
            steps_trained: result.num_env_steps_trained - before.num_env_steps_trained,
            result,
            episodes,
            iterations,
            iteration: s.iteration,
            weights: Arc::new(local.policy().get_weights()),
            filter: local.observation_filter().cloned(),
        })
    }
}

impl Actor for PbtMember {
    type Msg = MemberMsg;
    type State = MemberState;
    type Arguments = MemberArgs;

    async fn pre_start(&self, _: ActorRef<MemberMsg>, a: MemberArgs) -> Result<MemberState, ActorProcessingErr> {
        let trainer = self.build(a.index, &a.spec, a.generation).await?;
        Ok(MemberState {
            index: a.index,
            generation: a.generation,
            trainer,
            iteration: a.spec.iteration,
            trained: a.trained,
        })
    }

    async fn handle(
        &self,
        _: ActorRef<MemberMsg>,
        msg: MemberMsg,
        s: &mut MemberState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            MemberMsg::Train { spec, iterations, reply } => {
                let report = self.train(s, spec, iterations).await;
                let _ = reply.send(report);
            }
            MemberMsg::Reset(spec, reply) => {
                let result = self.build(s.index, &spec, s.generation).await.map(|trainer| {
                    s.trainer = trainer;
                    s.iteration = spec.iteration;
                });
                let _ = reply.send(result);
            }
            MemberMsg::Weights(reply) => {
                let _ = reply.send(Arc::new(s.trainer.evaluators().local().policy().get_weights()));
            }
        }
        Ok(())
    }
}
