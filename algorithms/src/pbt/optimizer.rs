//! The driver: a policy optimizer whose step is one PBT round (train
//! every member, rank, exploit and explore, keep the best member's
//! weights).

use super::config::PbtConfig;
use super::exploit::{explore, member_seed, plan_exploits, HyperParam};
use super::member::{MemberArgs, MemberMsg, MemberReport, MemberSpec, PbtMember};
use super::member_algorithms::MemberAlgorithms;
use crate::error::BuildError;
use ractor::ActorRef;
use rand_chacha::ChaCha8Rng;
use rlx::env::EnvMaker;
use rlx::filter::MeanStdFilter;
use rlx::pool::ChildArgs;
use rlx::{
    ActorPool, Evaluators, FlatWeights, HandleError, LearnerStats, OptimizerError, PolicyOptimizer, PoolError, Space,
    StepStats,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A pool call that failed for good, as an optimizer error naming the member.
fn pool_error(e: PoolError) -> OptimizerError {
    OptimizerError::Evaluator(match e {
        PoolError::BudgetExceeded { pool, child, failures, max_restarts, window_s, last_failure } => {
            HandleError::RestartBudgetExceeded {
                index: child,
                failures,
                max_restarts,
                window_s,
                last_failure: format!("{pool} {child}: {last_failure}"),
            }
        }
        PoolError::Spawn { pool, child, reason } => {
            HandleError::Spawn { index: child, reason: format!("{pool}: {reason}") }
        }
        PoolError::Unreachable { pool, child, reason } => {
            HandleError::Unreachable { index: child, reason: format!("{pool}: {reason}") }
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Drives the population (see [PBT's module docs](super)); one [`step`]
/// is one round.
///
/// [`step`]: PolicyOptimizer::step
pub struct PbtOptimizer {
    /// The table the members' algorithm is built from.
    algorithms: &'static dyn MemberAlgorithms,
    cfg: PbtConfig,
    params: Vec<HyperParam>,
    pool: ActorPool<PbtMember>,
    /// The driver's latest snapshot of each member; restarted members start
    /// from it.
    specs: Arc<Mutex<Vec<MemberSpec>>>,
    /// Iterations each member's actors completed (lost ones included).
    trained: Vec<Arc<AtomicU64>>,
    /// Iterations each member reported.
    reported: Vec<u64>,
    /// Exploits per member (for its seed).
    rebuilds: Vec<u64>,
    spaces: (Space, Space),
    rng: ChaCha8Rng,
    num_exploits: u64,
    /// Set by a restored checkpoint: every member starts again from its
    /// spec before the next round.
    rebuild_members: bool,
}

impl PbtOptimizer {
    /// Starts the population: a member actor per starting config, in an
    /// [`ActorPool`] that restarts them by `cfg.restart`.
    ///
    /// # Errors
    /// A member that fails to start.
    pub(super) async fn spawn(
        algorithms: &'static dyn MemberAlgorithms,
        cfg: PbtConfig,
        params: Vec<HyperParam>,
        configs: Vec<Value>,
        make_env: EnvMaker,
        spaces: (Space, Space),
        rng: ChaCha8Rng,
    ) -> Result<Self, BuildError> {
        let specs: Vec<MemberSpec> = configs
            .into_iter()
            .map(|config| MemberSpec { config, weights: None, filter: None, iteration: 0 })
            .collect();
        let specs = Arc::new(Mutex::new(specs));
        let trained: Vec<Arc<AtomicU64>> = (0..cfg.population).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let args: ChildArgs<PbtMember> = {
            let (specs, trained) = (specs.clone(), trained.clone());
            Arc::new(move |index, generation| MemberArgs {
                index,
                generation,
                spec: lock(&specs)[index].clone(),
                trained: trained[index].clone(),
            })
        };
        let member = PbtMember { algorithms, algorithm: cfg.algorithm.clone(), make_env };
        let pool = ActorPool::spawn("PBT member", member, cfg.population, args, cfg.restart).await.map_err(|e| {
            match pool_error(e) {
                OptimizerError::Evaluator(h) => BuildError::Evaluator(h),
                other => BuildError::Unsupported(other.to_string()),
            }
        })?;
        Ok(PbtOptimizer {
            algorithms,
            reported: vec![0; cfg.population],
            rebuilds: vec![0; cfg.population],
            cfg,
            params,
            pool,
            specs,
            trained,
            spaces,
            rng,
            num_exploits: 0,
            rebuild_members: false,
        })
    }

    /// Member `i`'s current actor (for inspection, or for a fault test to
    /// kill it).
    pub fn member(&self, i: usize) -> ActorRef<MemberMsg> {
        self.pool.actor(i)
    }

    /// A counter of the iterations member `i`'s actors have completed,
    /// including those lost with a dead actor (to watch progress from
    /// outside while a round runs).
    pub fn member_progress(&self, i: usize) -> Arc<AtomicU64> {
        self.trained[i].clone()
    }

    /// The population size.
    pub fn population(&self) -> usize {
        self.pool.len()
    }

    /// Member `i`'s config as of the last round.
    pub fn member_config(&self, i: usize) -> Value {
        lock(&self.specs)[i].config.clone()
    }

    /// Whether `config` is a valid member config (checked by building a
    /// policy from it).
    fn is_valid(&self, config: &Value) -> bool {
        self.algorithms.make_policy(&self.cfg.algorithm, config, &self.spaces.0, &self.spaces.1, 0).is_ok()
    }

    /// Exploit and explore: returns the number of members that copied
    /// another.
    async fn exploit_explore(&mut self, scores: &[f64]) -> Result<u64, OptimizerError> {
        let plan = plan_exploits(scores, self.cfg.quantile_fraction, &mut self.rng);
        for &(bottom, top) in &plan {
            let source = lock(&self.specs)[top].clone();
            self.rebuilds[bottom] += 1;
            // A perturbation can break a constraint between keys (say a
            // minibatch larger than the batch): draw again, and copy the
            // source's config unperturbed after three failures.
            let mut config = source.config.clone();
            for _ in 0..3 {
                let candidate = explore(&source.config, &self.params, self.cfg.resample_probability, &mut self.rng);
                if self.is_valid(&candidate) {
                    config = candidate;
                    break;
                }
            }
            config["seed"] = json!(member_seed(self.cfg.seed, bottom, self.rebuilds[bottom]));
            let spec = {
                let mut specs = lock(&self.specs);
                // Snapshot first: a member that dies while rebuilding
                // restarts from the new spec.
                specs[bottom] = MemberSpec {
                    config,
                    weights: source.weights,
                    filter: source.filter,
                    iteration: specs[bottom].iteration,
                };
                specs[bottom].clone()
            };
            self.pool.call(bottom, |reply| MemberMsg::Reset(spec.clone(), reply)).await.map_err(pool_error)??;
        }
        Ok(plan.len() as u64)
    }

    /// The best member's weights (and filter) into the driver's evaluator.
    fn keep_best(
        best: &mut Evaluators,
        weights: &FlatWeights,
        filter: Option<MeanStdFilter>,
    ) -> Result<(), OptimizerError> {
        best.local_mut().set_weights(weights)?;
        if let (Some(filter), Some(mine)) = (filter, best.local_mut().observation_filter_mut()) {
            *mine = filter;
        }
        Ok(())
    }

    /// Trains every member for `perturbation_interval` iterations from its
    /// spec, and records where each ended.
    async fn train_members(&mut self) -> Result<Vec<MemberReport>, OptimizerError> {
        if std::mem::take(&mut self.rebuild_members) {
            let specs = lock(&self.specs).clone();
            let replies =
                self.pool.call_all(|i, reply| MemberMsg::Reset(specs[i].clone(), reply)).await.map_err(pool_error)?;
            replies.into_iter().collect::<Result<(), _>>()?;
        }
        let start = lock(&self.specs).clone();
        let iterations = self.cfg.perturbation_interval;
        let replies = self
            .pool
            .call_all(|i, reply| MemberMsg::Train { spec: start[i].clone(), iterations, reply })
            .await
            .map_err(pool_error)?;
        let reports = replies.into_iter().collect::<Result<Vec<_>, _>>()?;
        let mut specs = lock(&self.specs);
        for (i, r) in reports.iter().enumerate() {
            specs[i].weights = Some(r.weights.clone());
            specs[i].filter = r.filter.clone();
            specs[i].iteration = r.iteration;
            self.reported[i] += r.iterations;
        }
        Ok(reports)
    }

    /// Each member's score, iterations and hyperparameters, and the
    /// population's counters.
    fn learner_stats(&self, reports: &[MemberReport], scores: &[Option<f64>], best: usize) -> LearnerStats {
        let mut learner = LearnerStats::default();
        let specs = lock(&self.specs).clone();
        for (i, (r, spec)) in reports.iter().zip(&specs).enumerate() {
            if let Some(score) = scores[i] {
                learner.set(&format!("member_{i}_reward_mean"), score);
            }
            learner.set(&format!("member_{i}_iterations"), r.iteration as f64);
            for p in &self.params {
                if let Some(v) = spec.config.get(&p.key).and_then(Value::as_f64) {
                    learner.set(&format!("member_{i}_{}", p.key), v);
                }
            }
        }
        let lost: u64 =
            self.trained.iter().zip(&self.reported).map(|(t, r)| t.load(Ordering::SeqCst).saturating_sub(*r)).sum();
        learner.set("best_member", best as f64);
        learner.set("num_exploits", self.num_exploits as f64);
        learner.set("member_restarts", self.pool.restarts() as f64);
        learner.set("member_iterations_lost", lost as f64);
        learner
    }
}

#[rlx::async_trait]
impl PolicyOptimizer for PbtOptimizer {
    /// One round; the driver's evaluator gets the best member's weights
    /// and filter (what checkpoints save and `rlx rollout` plays).
    async fn step(&mut self, evaluators: &mut Evaluators) -> Result<StepStats, OptimizerError> {
        let reports = self.train_members().await?;
        let scores: Vec<Option<f64>> = reports.iter().map(MemberReport::score).collect();
        let ranked: Vec<f64> = scores.iter().map(|s| s.unwrap_or(f64::NEG_INFINITY)).collect();
        let best = (0..ranked.len()).fold(0, |b, i| if ranked[i] > ranked[b] { i } else { b });
        self.num_exploits += self.exploit_explore(&ranked).await?;
        Self::keep_best(evaluators, &reports[best].weights, reports[best].filter.clone())?;
        Ok(StepStats {
            steps_sampled: reports.iter().map(|r| r.steps_sampled).sum(),
            steps_trained: reports.iter().map(|r| r.steps_trained).sum(),
            episodes: reports[best].episodes.clone(),
            learner: self.learner_stats(&reports, &scores, best),
        })
    }

    /// Every member is rebuilt with its current config from these weights
    /// (at the start of the next round); the driver's evaluator already
    /// holds them.
    fn weights_restored(&mut self, weights: &Arc<FlatWeights>) {
        for s in lock(&self.specs).iter_mut() {
            s.weights = Some(weights.clone());
        }
        self.rebuild_members = true;
    }

    fn checkpoint_gaps(&self) -> Vec<String> {
        vec!["PBT saves the best member's weights (and, in the driver's evaluator, its observation filter) only: on \
             restore every member starts from those weights with fresh filter statistics and the hyperparameters \
             the build gives it; the members' own weights, explored hyperparameters, optimizer state and the \
             population's counters are not saved"
            .into()]
    }
}
