//! # Population-based training (PBT)
//!
//! Jaderberg, Dalibard, Osindero, Czarnecki, Donahue, Razavi, Vinyals,
//! Green, Dunning, Simonyan, Fernando & Kavukcuoglu, "Population Based
//! Training of Neural Networks", 2017 (arXiv:1711.09846): train a
//! population of agents in parallel, and every so often let the worse ones
//! **exploit** a better one (copy its weights and hyperparameters) and then
//! **explore** (perturb the copied hyperparameters). The population thus
//! follows a hyperparameter *schedule* found while training, for the
//! compute of one random search.
//!
//! Here a member is any other rlx algorithm (`algorithm`, PPO by default)
//! with its own evaluators, configured by `config` plus its explored
//! hyperparameters. One PBT iteration is one round:
//! 1. every member trains `perturbation_interval` of its own iterations, all
//!    members in parallel;
//! 2. members are ranked by the mean return of the episodes they finished
//!    in the round (their 100-episode mean if none finished);
//! 3. **exploit** by truncation selection (the paper's §3.1): each member in
//!    the bottom `quantile_fraction` copies the weights, observation-filter
//!    statistics and hyperparameters of a member drawn uniformly from the
//!    top `quantile_fraction`;
//! 4. **explore** (the paper's "perturb" and "resample"): each copied
//!    hyperparameter is, with probability `resample_probability`, drawn
//!    again from its range, otherwise multiplied by 0.8 or 1.2 (each with
//!    probability ½) and clamped to its range.
//!
//! The details that matter:
//! - members start from their own random weights (their own seeds) and
//!   hyperparameters drawn from the ranges in `hyperparam_mutations`
//!   (log-uniformly where `log` is set), except a key `config` sets, which
//!   starts at that value in every member;
//! - a member that exploits is rebuilt with its new config and given the
//!   copied weights: the simplest honest way to change any hyperparameter
//!   of any algorithm. Its optimizer moments (Adam's) and episode window
//!   start afresh, as they would in a freshly started trial;
//! - each member is a supervised [`PbtMember`] actor in an
//!   [`ActorPool`] ("PBT member", restart policy `restart`). After each
//!   round the driver keeps a snapshot of every member (config, weights,
//!   filter, iteration); a member that dies is restarted from its snapshot
//!   and repeats the request it was given. The iterations it had trained
//!   since the snapshot are lost and counted (`member_iterations_lost`);
//! - the weights a checkpoint saves, and that `rlx rollout` plays, are the
//!   best member's of the last round: the trainer's own evaluator (the
//!   driver's, of the member algorithm, never trained) gets the best
//!   member's weights and filter after every round.
//!
//! Metrics: `episode_reward_mean` and the episode counters are over the
//! episodes of each round's best member; `timesteps_total` counts every
//! member's env steps. Learner metrics: `member_{i}_reward_mean` (the
//! member's ranking score this round), `member_{i}_iterations` (its own
//! iterations so far), `member_{i}_{key}` (each explored hyperparameter's
//! current value), `best_member`, `num_exploits` (cumulative),
//! `member_restarts` (member actors restarted, cumulative) and
//! `member_iterations_lost` (member iterations lost with a dead actor,
//! cumulative).
//!
//! ```text
//! rlx train --run PBT --env CartPole-v1 \
//!     --config '{"algorithm": "PPO", "population": 4, "config": {"train_batch_size": 512}}'
//! ```

use crate::common::build_context::BuildContext;
use crate::common::sections::limits;
use crate::error::BuildError;
use crate::{build_trainer_with_env, default_config, ALGORITHMS};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::config::{check, check_count, closest, deep_merge, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::filter::MeanStdFilter;
use rlx::pool::ChildArgs;
use rlx::{
    ActorPool, EpisodeSummary, EvaluatorError, Evaluators, FlatWeights, HandleError, LearnerStats, OptimizerError,
    PolicyOptimizer, PoolError, RestartPolicy, Space, StepStats, TrainResult, Trainer,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The factors of the paper's "perturb" explore step.
pub const PERTURBATION_FACTORS: [f64; 2] = [0.8, 1.2];

/// PBT's configuration. Every key is optional in `--config`; unknown keys
/// are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct PbtConfig {
    /// The members' algorithm (any built-in algorithm but PBT).
    pub algorithm: String,
    /// Members trained in parallel (at least 2).
    pub population: usize,
    /// The config every member shares, as for `--config` of `algorithm`
    /// (except `seed`, derived from PBT's, and `env_config`, set at PBT's
    /// top level). By default members sample in their own actor
    /// (`num_workers` 0): the population is the parallelism.
    pub config: Value,
    /// Member iterations between two exploit/explore rounds (one PBT
    /// iteration is one round).
    pub perturbation_interval: u64,
    /// Share of the population in the bottom quantile, which copies a
    /// member of the top quantile of the same size; in (0, 0.5].
    pub quantile_fraction: f64,
    /// Probability that explore draws a copied hyperparameter afresh from
    /// its range rather than multiplying it by 0.8 or 1.2.
    pub resample_probability: f64,
    /// The hyperparameters to explore: numeric keys of the member config,
    /// each with its range, e.g. `{"lr": {"min": 1e-4, "max": 1e-2, "log":
    /// true}}`. `null`: those of `lr` (log-uniform in [1e-4, 1e-2]),
    /// `entropy_coeff` ([0, 0.01]) and `clip_param` ([0.1, 0.3]) that the
    /// member algorithm has. Keys that shape the network cannot be
    /// explored: exploiting copies weights between members.
    pub hyperparam_mutations: Option<BTreeMap<String, Mutation>>,
    /// Keyword arguments for the env every member trains on.
    pub env_config: Value,
    /// Seed of the exploit/explore draws and of the initial
    /// hyperparameters; member `i` trains with seed `seed + 10007 (i + 1)`
    /// (plus a different offset after each exploit or restart).
    pub seed: u64,
    /// How member actors are restarted after a failure.
    pub restart: RestartPolicy,
}

/// The range of one explored hyperparameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Draw log-uniformly (for scale parameters such as learning rates;
    /// needs `min` > 0) rather than uniformly.
    #[serde(default)]
    pub log: bool,
}

impl PbtConfig {
    /// The name `--run` takes.
    pub const NAME: &'static str = "PBT";
}

impl Default for PbtConfig {
    fn default() -> Self {
        Self {
            algorithm: "PPO".into(),
            population: 4,
            config: json!({"num_workers": 0}),
            perturbation_interval: 5,
            quantile_fraction: 0.25,
            resample_probability: 0.25,
            hyperparam_mutations: None,
            env_config: Value::Null,
            seed: 0,
            restart: RestartPolicy::default(),
        }
    }
}

/// The explored hyperparameters PBT picks when `hyperparam_mutations` is
/// `null`, among those the member algorithm has.
fn default_mutations() -> [(&'static str, Mutation); 3] {
    [
        ("lr", Mutation { min: 1e-4, max: 1e-2, log: true }),
        ("entropy_coeff", Mutation { min: 0.0, max: 0.01, log: false }),
        ("clip_param", Mutation { min: 0.1, max: 0.3, log: false }),
    ]
}

impl PbtConfig {
    /// The explored hyperparameters: `hyperparam_mutations`, or the
    /// defaults the member algorithm has.
    pub fn mutations(&self) -> BTreeMap<String, Mutation> {
        if let Some(m) = &self.hyperparam_mutations {
            return m.clone();
        }
        let defaults = default_config(&self.algorithm).unwrap_or(Value::Null);
        default_mutations()
            .into_iter()
            .filter(|(key, _)| defaults.get(key).is_some_and(Value::is_number))
            .map(|(key, m)| (key.to_string(), m))
            .collect()
    }

    /// This config with the default mutations written out (what the
    /// resolved config shows).
    pub fn resolved(mut self) -> Self {
        self.hyperparam_mutations = Some(self.mutations());
        self
    }

    /// The member algorithm's defaults with `config` over them.
    fn member_defaults(&self) -> Value {
        let mut base = default_config(&self.algorithm).unwrap_or(Value::Null);
        deep_merge(&mut base, &self.config);
        base
    }

    /// The explored hyperparameters with their kind (integer or not, as
    /// the member algorithm's config holds them).
    fn hyperparams(&self) -> Vec<HyperParam> {
        let defaults = default_config(&self.algorithm).unwrap_or(Value::Null);
        self.mutations()
            .into_iter()
            .map(|(key, range)| {
                let integer = defaults.get(&key).is_some_and(|v| v.is_u64() || v.is_i64());
                HyperParam { key, range, integer }
            })
            .collect()
    }
}

impl Validate for PbtConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let names: Vec<&str> = ALGORITHMS.iter().map(|a| a.name()).filter(|&a| a != "PBT").collect();
        let allowed = format!("must be one of {}", names.join(", "));
        check("algorithm", &self.algorithm, names.contains(&self.algorithm.as_str()), &allowed)?;
        check_count("population", self.population, 2, limits::MAX_WORKERS)?;
        let q = self.quantile_fraction;
        check("quantile_fraction", q, q > 0.0 && q <= 0.5, "must be in (0, 0.5]")?;
        let p = self.resample_probability;
        check("resample_probability", p, (0.0..=1.0).contains(&p), "must be in [0, 1]")?;
        let n = self.perturbation_interval;
        check("perturbation_interval", n, n >= 1, "must be >= 1")?;
        self.restart.validate("restart")?;
        let Value::Object(config) = &self.config else {
            return Err(ConfigError::Invalid { key: "config".into(), message: "must be a JSON object".into() });
        };
        let defaults = default_config(&self.algorithm).expect("checked above");
        // The member keys PBT sets itself, neither set in `config` nor explored.
        let own = [
            ("seed", "set PBT's `seed`: each member's derives from it"),
            ("env_config", "set `env_config` at PBT's top level: all members share the env"),
        ];
        let valid: Vec<String> = defaults
            .as_object()
            .map(|o| o.keys().filter(|k| !own.iter().any(|(o, _)| o == k)).cloned().collect())
            .unwrap_or_default();
        for (key, instead) in own {
            if config.contains_key(key) {
                return Err(ConfigError::Invalid { key: format!("config.{key}"), message: instead.into() });
            }
        }
        for key in config.keys() {
            if !valid.contains(key) {
                return Err(ConfigError::UnknownKey {
                    key: format!("config.{key}"),
                    closest: closest(key, valid.iter().map(String::as_str)),
                    valid: valid.clone(),
                });
            }
        }
        let mutations = self.mutations();
        check(
            "hyperparam_mutations",
            "{}",
            !mutations.is_empty(),
            &format!("must name at least one numeric key of {}'s config to explore", self.algorithm),
        )?;
        for (key, m) in &mutations {
            let path = format!("hyperparam_mutations.{key}");
            match defaults.get(key).filter(|_| valid.contains(key)) {
                None => {
                    return Err(ConfigError::UnknownKey {
                        key: path,
                        closest: closest(key, valid.iter().map(String::as_str)),
                        valid: valid.clone(),
                    })
                }
                Some(v) if !(v.is_number() || v.is_null()) => {
                    return Err(ConfigError::Invalid {
                        key: path,
                        message: format!(
                            "{}'s `{key}` is not a number ({v}); only numbers can be explored",
                            self.algorithm
                        ),
                    })
                }
                Some(_) => {}
            }
            let finite = m.min.is_finite() && m.max.is_finite();
            check(&format!("{path}.max"), m.max, finite && m.min <= m.max, "must be finite and >= min")?;
            check(&format!("{path}.min"), m.min, !m.log || m.min > 0.0, "must be > 0 with `log`")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Exploit and explore: pure functions of the scores and a seeded generator.
// ---------------------------------------------------------------------------

/// One explored hyperparameter of the member config.
#[derive(Clone, Debug, PartialEq)]
pub struct HyperParam {
    /// The member config's key.
    pub key: String,
    /// Its range.
    pub range: Mutation,
    /// Whether the member config holds it as an integer (values are then
    /// rounded).
    pub integer: bool,
}

impl HyperParam {
    /// A value drawn from the range (log-uniformly with `log`).
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        let Mutation { min, max, log } = self.range;
        let u: f64 = rng.gen();
        let x = if log { (min.ln() + u * (max.ln() - min.ln())).exp() } else { min + u * (max - min) };
        self.fit(x)
    }

    /// The paper's explore step: with probability `resample_probability` a
    /// fresh draw from the range, otherwise `value` × 0.8 or × 1.2, clamped
    /// to the range.
    pub fn perturb(&self, value: f64, resample_probability: f64, rng: &mut impl Rng) -> f64 {
        if rng.gen_bool(resample_probability) {
            return self.sample(rng);
        }
        let factor = PERTURBATION_FACTORS[rng.gen_range(0..PERTURBATION_FACTORS.len())];
        self.fit(value * factor)
    }

    /// Clamped to the range, and rounded for an integer key.
    fn fit(&self, x: f64) -> f64 {
        let x = x.clamp(self.range.min, self.range.max);
        if self.integer {
            x.round()
        } else {
            x
        }
    }

    /// `x` as the member config's JSON.
    fn to_json(&self, x: f64) -> Value {
        if self.integer {
            json!(x.round() as i64)
        } else {
            json!(x)
        }
    }
}

/// Truncation selection: who copies whom. Ranks members by `scores`
/// (higher is better; ties go to the lower index) and pairs each member of
/// the bottom `quantile_fraction` with one drawn uniformly from the top
/// `quantile_fraction`. Both quantiles hold `ceil(n·q)` members, at most
/// `n / 2` and at least one. Returns `(bottom, top)` pairs, bottom
/// members in ascending score order.
pub fn plan_exploits(scores: &[f64], quantile_fraction: f64, rng: &mut impl Rng) -> Vec<(usize, usize)> {
    let n = scores.len();
    if n < 2 {
        return Vec::new();
    }
    let k = ((n as f64 * quantile_fraction).ceil() as usize).clamp(1, n / 2);
    let mut order: Vec<usize> = (0..n).collect();
    // Best first; equal scores keep index order.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let top = &order[..k];
    order[n - k..].iter().rev().map(|&bottom| (bottom, top[rng.gen_range(0..k)])).collect()
}

/// The explore step on a member config: every explored key perturbed (see
/// [`HyperParam::perturb`]); the other keys as they are.
pub fn explore(config: &Value, params: &[HyperParam], resample_probability: f64, rng: &mut impl Rng) -> Value {
    let mut out = config.clone();
    for p in params {
        let value = config.get(&p.key).and_then(Value::as_f64).unwrap_or(p.range.min);
        out[&p.key] = p.to_json(p.perturb(value, resample_probability, rng));
    }
    out
}

/// Member `i`'s seed after `rebuilds` exploits.
fn member_seed(seed: u64, i: usize, rebuilds: u64) -> u64 {
    seed.wrapping_add(10_007 * (i as u64 + 1)).wrapping_add(1_000_003 * rebuilds)
}

// ---------------------------------------------------------------------------
// Members: one actor per member, each holding a whole trainer.
// ---------------------------------------------------------------------------

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
    algorithm: String,
    make_env: EnvMaker,
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

/// A boxed trainer build: the member's build calls
/// [`build_trainer_with_env`], which can build PBT itself, so the future
/// must be boxed to have a finite type.
type BoxedBuild = Pin<Box<dyn Future<Output = Result<Trainer, BuildError>> + Send>>;

fn boxed_build(algorithm: String, make_env: EnvMaker, config: Value) -> BoxedBuild {
    Box::pin(async move { build_trainer_with_env(&algorithm, make_env, &config).await.map(|(t, _)| t) })
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
        let mut trainer =
            boxed_build(self.algorithm.clone(), self.make_env.clone(), config).await.map_err(|e| rebuild_err(&e))?;
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

// ---------------------------------------------------------------------------
// The driver: a policy optimizer whose step is one PBT round.
// ---------------------------------------------------------------------------

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

/// Drives the population (see the module docs); one [`step`] is one round.
///
/// [`step`]: PolicyOptimizer::step
pub struct PbtOptimizer {
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
        crate::make_policy(&self.cfg.algorithm, config, &self.spaces.0, &self.spaces.1, 0).is_ok()
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

// ---------------------------------------------------------------------------
// Building.
// ---------------------------------------------------------------------------

/// A config error of the member algorithm, with its key under `config.`.
fn member_config_error(e: BuildError) -> BuildError {
    match e {
        BuildError::Config(c) => BuildError::Config(match c {
            ConfigError::UnknownKey { key, closest, valid } => {
                ConfigError::UnknownKey { key: format!("config.{key}"), closest, valid }
            }
            ConfigError::Invalid { key, message } => ConfigError::Invalid { key: format!("config.{key}"), message },
            ConfigError::OutOfRange { key, value, allowed } => {
                ConfigError::OutOfRange { key: format!("config.{key}"), value, allowed }
            }
            other => other,
        }),
        other => other,
    }
}

/// The population's starting configs: the shared config, each member's
/// seed, and each explored key drawn from its range unless `config` sets
/// it.
fn initial_configs(cfg: &PbtConfig, params: &[HyperParam], rng: &mut impl Rng) -> Vec<Value> {
    (0..cfg.population)
        .map(|i| {
            let mut c = cfg.config.clone();
            c["seed"] = json!(member_seed(cfg.seed, i, 0));
            for p in params {
                if cfg.config.get(&p.key).is_none() {
                    c[&p.key] = p.to_json(p.sample(rng));
                }
            }
            c
        })
        .collect()
}

/// Checks every member's starting config and the ends of every range
/// against the member algorithm (by building a policy for the env's
/// spaces), naming the key at fault.
fn check_member_configs(
    cfg: &PbtConfig,
    params: &[HyperParam],
    configs: &[Value],
    spaces: &(Space, Space),
) -> Result<(), BuildError> {
    let (obs, act) = spaces;
    crate::make_policy(&cfg.algorithm, &configs[0], obs, act, 0).map_err(member_config_error)?;
    for p in params {
        for (end, x) in [("min", p.range.min), ("max", p.range.max)] {
            let mut c = configs[0].clone();
            c[&p.key] = p.to_json(x);
            if let Err(e) = crate::make_policy(&cfg.algorithm, &c, obs, act, 0) {
                return Err(BuildError::Config(ConfigError::OutOfRange {
                    key: format!("hyperparam_mutations.{}.{end}", p.key),
                    value: x.to_string(),
                    allowed: format!("{} rejects `{}` = {x}: {e}", cfg.algorithm, p.key),
                }));
            }
        }
    }
    for c in &configs[1..] {
        crate::make_policy(&cfg.algorithm, c, obs, act, 0).map_err(member_config_error)?;
    }
    Ok(())
}

/// The population and its driver, with the driver's evaluator that holds
/// the best member's policy, for callers that want the optimizer itself (a
/// test that kills a member); [`build`] wraps them in a [`Trainer`].
///
/// # Errors
/// An env that cannot be built, a member config the member algorithm
/// rejects (the error names the key), or a member that fails to start.
pub async fn build_optimizer(make_env: EnvMaker, cfg: PbtConfig) -> Result<(Evaluators, PbtOptimizer), BuildError> {
    let cfg = cfg.resolved();
    let params = cfg.hyperparams();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let configs = initial_configs(&cfg, &params, &mut rng);
    let probe = make_env()?;
    let spaces = (probe.observation_space().clone(), probe.action_space().clone());
    drop(probe);
    check_member_configs(&cfg, &params, &configs, &spaces)?;

    // The driver's evaluator, for the best member's policy: the member
    // algorithm's, built without workers and never trained.
    let mut best_config = configs[0].clone();
    if cfg.member_defaults().get("num_workers").is_some() {
        best_config["num_workers"] = json!(0);
    }
    let best = boxed_build(cfg.algorithm.clone(), make_env.clone(), best_config)
        .await
        .map_err(member_config_error)?
        .into_evaluators();

    let specs: Vec<MemberSpec> =
        configs.into_iter().map(|config| MemberSpec { config, weights: None, filter: None, iteration: 0 }).collect();
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
    let member = PbtMember { algorithm: cfg.algorithm.clone(), make_env };
    let pool =
        ActorPool::spawn("PBT member", member, cfg.population, args, cfg.restart).await.map_err(
            |e| match pool_error(e) {
                OptimizerError::Evaluator(h) => BuildError::Evaluator(h),
                other => BuildError::Unsupported(other.to_string()),
            },
        )?;
    let optimizer = PbtOptimizer {
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
    };
    Ok((best, optimizer))
}

/// The execution plan: a population of member trainers in supervised
/// actors, driven by [`PbtOptimizer`].
///
/// # Errors
/// As [`build_optimizer`].
pub async fn build(_ctx: BuildContext, make_env: EnvMaker, cfg: PbtConfig) -> Result<Trainer, BuildError> {
    let (best, optimizer) = build_optimizer(make_env, cfg).await?;
    Ok(Trainer::new(best, Box::new(optimizer)))
}

/// The member algorithm's policy for `cfg` (what `rlx rollout` loads a
/// PBT checkpoint's weights into): the first member's starting config.
///
/// # Errors
/// A bad config, or spaces without a compiled network.
pub fn make_policy(
    cfg: &PbtConfig,
    observation_space: &Space,
    action_space: &Space,
    seed: u64,
) -> Result<Box<dyn rlx::PolicyGraph>, BuildError> {
    let cfg = cfg.clone().resolved();
    let params = cfg.hyperparams();
    let configs = initial_configs(&cfg, &params, &mut ChaCha8Rng::seed_from_u64(cfg.seed));
    crate::make_policy(&cfg.algorithm, &configs[0], observation_space, action_space, seed).map_err(member_config_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::config::merge_json;

    fn lr() -> HyperParam {
        HyperParam { key: "lr".into(), range: Mutation { min: 1e-4, max: 1e-2, log: true }, integer: false }
    }

    fn clip() -> HyperParam {
        HyperParam { key: "clip_param".into(), range: Mutation { min: 0.1, max: 0.3, log: false }, integer: false }
    }

    #[test]
    fn the_bottom_quantile_copies_the_top_quantile() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        // Member 0 is worst, member 1 best.
        assert_eq!(plan_exploits(&[1.0, 4.0, 2.0, 3.0], 0.25, &mut rng), vec![(0, 1)]);
        // Eight members, a quarter: the two worst copy one of the two best.
        let scores = [5.0, 1.0, 7.0, 0.0, 3.0, 8.0, 2.0, 4.0];
        for seed in 0..20 {
            let plan = plan_exploits(&scores, 0.25, &mut ChaCha8Rng::seed_from_u64(seed));
            assert_eq!(plan.iter().map(|p| p.0).collect::<Vec<_>>(), vec![3, 1]);
            assert!(plan.iter().all(|&(_, top)| top == 5 || top == 2), "{plan:?}");
        }
        // Both top members are drawn over some seeds.
        let tops: std::collections::BTreeSet<usize> =
            (0..20).map(|s| plan_exploits(&scores, 0.25, &mut ChaCha8Rng::seed_from_u64(s))[0].1).collect();
        assert_eq!(tops, [2, 5].into());
        // A quantile of one half splits the population; never overlaps.
        assert_eq!(plan_exploits(&[0.0, 1.0, 2.0], 0.5, &mut rng), vec![(0, 2)]);
        assert!(plan_exploits(&[1.0], 0.5, &mut rng).is_empty());
        // Members that finished no episode (-inf) rank last.
        assert_eq!(plan_exploits(&[2.0, f64::NEG_INFINITY, 1.0, 3.0], 0.25, &mut rng), vec![(1, 3)]);
    }

    #[test]
    fn perturbation_multiplies_by_the_factors_within_the_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (mut down, mut up) = (0, 0);
        for _ in 0..200 {
            let x = lr().perturb(1e-3, 0.0, &mut rng);
            if (x - 8e-4).abs() < 1e-12 {
                down += 1;
            } else if (x - 1.2e-3).abs() < 1e-12 {
                up += 1;
            } else {
                panic!("{x} is neither 0.8 nor 1.2 times 1e-3");
            }
        }
        assert!(down > 50 && up > 50, "{down} {up}");
        // Clamped at the ends of the range.
        for _ in 0..50 {
            let x = clip().perturb(0.29, 0.0, &mut rng);
            assert!(x == 0.3 || (x - 0.232).abs() < 1e-12, "{x}");
        }
        // Resampling always: anywhere in the range, log-uniformly (about
        // half the draws below the geometric mean 1e-3).
        let draws: Vec<f64> = (0..400).map(|_| lr().perturb(1e-3, 1.0, &mut rng)).collect();
        assert!(draws.iter().all(|x| (1e-4..=1e-2).contains(x)));
        let below = draws.iter().filter(|&&x| x < 1e-3).count();
        assert!((150..250).contains(&below), "{below}");
        // Integer keys stay integers.
        let batch = HyperParam {
            key: "train_batch_size".into(),
            range: Mutation { min: 64.0, max: 4096.0, log: true },
            integer: true,
        };
        let c = explore(&json!({"train_batch_size": 1000}), &[batch], 0.0, &mut rng);
        assert!(c["train_batch_size"] == json!(800) || c["train_batch_size"] == json!(1200), "{c}");
    }

    #[test]
    fn explore_is_deterministic_for_a_seed_and_changes_only_explored_keys() {
        let config = json!({"lr": 1e-3, "clip_param": 0.2, "num_sgd_iter": 4});
        let run = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..5).map(|_| explore(&config, &[lr(), clip()], 0.25, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        for c in run(7) {
            assert_eq!(c["num_sgd_iter"], json!(4));
            assert!((1e-4..=1e-2).contains(&c["lr"].as_f64().unwrap()));
            assert!((0.1..=0.3).contains(&c["clip_param"].as_f64().unwrap()));
            assert_ne!(c, config);
        }
    }

    #[test]
    fn initial_configs_sample_unset_keys_and_keep_set_ones() {
        let cfg: PbtConfig = merge_json(&PbtConfig::default(), &json!({"config": {"clip_param": 0.25}})).unwrap();
        let cfg = cfg.resolved();
        let params = cfg.hyperparams();
        assert_eq!(params.iter().map(|p| p.key.as_str()).collect::<Vec<_>>(), ["clip_param", "entropy_coeff", "lr"]);
        let configs = initial_configs(&cfg, &params, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(configs.len(), 4);
        for c in &configs {
            assert_eq!(c["clip_param"], json!(0.25));
            assert_eq!(c["num_workers"], json!(0));
            assert!((1e-4..=1e-2).contains(&c["lr"].as_f64().unwrap()));
        }
        let seeds: std::collections::BTreeSet<u64> = configs.iter().map(|c| c["seed"].as_u64().unwrap()).collect();
        assert_eq!(seeds.len(), 4);
        assert_ne!(configs[0]["lr"], configs[1]["lr"]);
    }

    fn config_error(overrides: Value) -> String {
        merge_json(&PbtConfig::default(), &overrides).unwrap_err().to_string()
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = config_error(json!({"population": 1}));
        assert!(err.contains("`population`") && err.contains("[2, 4096]"), "{err}");
        assert!(config_error(json!({"quantile_fraction": 0.6})).contains("`quantile_fraction`"));
        assert!(config_error(json!({"quantile_fraction": 0.0})).contains("`quantile_fraction`"));
        assert!(config_error(json!({"resample_probability": 1.5})).contains("`resample_probability`"));
        assert!(config_error(json!({"perturbation_interval": 0})).contains("`perturbation_interval`"));
        let err = config_error(json!({"algorithm": "PBT"}));
        assert!(err.contains("`algorithm`") && err.contains("PPO"), "{err}");
        assert!(config_error(json!({"algorithm": "PPOO"})).contains("`algorithm`"));
        let err = config_error(json!({"config": {"num_wrokers": 2}}));
        assert!(err.contains("`config.num_wrokers`") && err.contains("did you mean `num_workers`"), "{err}");
        assert!(config_error(json!({"config": {"seed": 3}})).contains("`config.seed`"));
        assert!(config_error(json!({"config": {"env_config": {}}})).contains("`config.env_config`"));
        let err = config_error(json!({"hyperparam_mutations": {"lrr": {"min": 0.1, "max": 0.2}}}));
        assert!(err.contains("`hyperparam_mutations.lrr`") && err.contains("did you mean `lr`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"device": {"min": 0.1, "max": 0.2}}}));
        assert!(err.contains("`hyperparam_mutations.device`") && err.contains("not a number"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.1, "max": 0.01}}}));
        assert!(err.contains("`hyperparam_mutations.lr.max`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.0, "max": 0.01, "log": true}}}));
        assert!(err.contains("`hyperparam_mutations.lr.min`"), "{err}");
        let err = config_error(json!({"hyperparam_mutations": {"lr": {"min": 0.0, "mx": 0.01}}}));
        assert!(err.contains("hyperparam_mutations.lr") && err.contains("mx"), "{err}");
        assert!(config_error(json!({"hyperparam_mutations": {}})).contains("`hyperparam_mutations`"));
        let err = config_error(json!({"hyperparam_mutations": {"seed": {"min": 0.0, "max": 9.0}}}));
        assert!(err.contains("`hyperparam_mutations.seed`"), "{err}");
    }

    #[test]
    fn default_mutations_follow_the_member_algorithm() {
        let ppo = PbtConfig::default().mutations();
        assert_eq!(ppo.keys().collect::<Vec<_>>(), ["clip_param", "entropy_coeff", "lr"]);
        let a2c = PbtConfig { algorithm: "A2C".into(), ..PbtConfig::default() }.mutations();
        assert_eq!(a2c.keys().collect::<Vec<_>>(), ["entropy_coeff", "lr"]);
        // A user's map replaces the defaults rather than merging into them.
        let cfg: PbtConfig =
            merge_json(&PbtConfig::default(), &json!({"hyperparam_mutations": {"gamma": {"min": 0.9, "max": 0.999}}}))
                .unwrap();
        assert_eq!(cfg.resolved().mutations().keys().collect::<Vec<_>>(), ["gamma"]);
    }

    #[tokio::test]
    async fn member_values_the_algorithm_rejects_are_build_errors_naming_the_key() {
        let make_env = crate::env_maker("CartPole-v1", &Value::Null).unwrap();
        let build = |overrides: Value| {
            let make_env = make_env.clone();
            async move {
                let cfg: PbtConfig = merge_json(&PbtConfig::default(), &overrides).unwrap();
                build_optimizer(make_env, cfg).await.err().map(|e| e.to_string()).unwrap_or_default()
            }
        };
        let err = build(json!({"config": {"gamma": 1.5}})).await;
        assert!(err.contains("`config.gamma`"), "{err}");
        let err = build(json!({"hyperparam_mutations": {"clip_param": {"min": 0.0, "max": 0.3}}})).await;
        assert!(err.contains("`hyperparam_mutations.clip_param.min`"), "{err}");
    }
}
