//! Env shards: the level below an evaluator in the supervision tree.
//!
//! ```text
//! EvaluatorActor i                    (restarted by the evaluators' supervisor)
//!   └── ActorPool<EnvShard> "env shard"   restart: `env_shards.restart`, a budget of its own
//!         ├── EnvShard 0    copies 0..k   a VectorEnv of its own
//!         └── EnvShard 1    copies k..n
//! ```
//!
//! **Why.** An evaluator steps its env copies one after another. For an env
//! whose step takes a millisecond (a physics simulator, a game engine, a
//! process behind a socket) that leaves cores idle, and one crashing copy
//! takes the whole evaluator down. Sharded with
//! [`VectorEnv::sharded`], each shard is a child actor owning a contiguous
//! range of the copies: the shards step in parallel, and a copy that panics
//! takes down its shard only. The price is one message round trip per shard
//! per step, tens of microseconds, which is far more than a CartPole step
//! (tens of nanoseconds): shard slow envs, not fast ones (the `env_shards`
//! bench measures where the line falls). RLlib's `remote_worker_envs` is
//! the same idea with Ray actors, and the same warning.
//!
//! **What the evaluator sees does not change.** Copy `i` is seeded
//! `seed + i` and every buffer is laid out as without shards, so a sharded
//! evaluator samples the same batches bit for bit, and snapshots have the
//! same form (a checkpoint taken sharded restores unsharded and back).
//!
//! **Failures.** A shard whose env panics fails, and the pool's supervisor
//! starts a replacement with fresh copies. Every step request names the
//! generation the caller expects; the replacement answers one of an older
//! generation with [`ShardStep::Replaced`] instead of stepping, so actions
//! meant for the dead copies never reach new ones. The caller then resets
//! the replacement with a fresh seed and marks its copies in
//! [`VectorStep::interrupted`]: their episodes in progress are lost, their
//! rows of that step are no transitions, and every other copy's step
//! stands. Past the shards' budget a step fails with [`EnvError::Shards`];
//! an evaluator actor fails on that error, so its own supervisor restarts
//! it, with new shards, within the evaluators' budget (escalation, as in
//! Erlang/OTP).
//!
//! **Threads.** Stepping is synchronous ([`VectorEnv::step`]); the shards
//! are actors on the tokio runtime. The caller blocks in
//! [`tokio::task::block_in_place`] while they work, which hands its worker
//! thread's other tasks to another thread, so the shards always have
//! threads to run on. That needs a multi-threaded runtime: on a
//! current-thread runtime building or stepping shards is an error, not a
//! panic.

use crate::config::{check, ConfigError};
use crate::env::{EnvError, EnvMaker};
use crate::pool::{ActorPool, ChildArgs, PoolError};
use crate::restart::RestartPolicy;
use crate::sample_batch::Column;
use crate::vector_env::{Current, EpisodeSummary, VectorEnv, VectorEnvState, VectorStep};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::runtime::{Handle, RuntimeFlavor};

/// The `env_shards` config key of the algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvShards {
    /// Child actors each sampling evaluator splits its env copies over
    /// (at most one per copy); 0 steps the copies in the evaluator itself.
    pub num_shards: usize,
    /// How a shard is restarted after its env panics, with a budget of its
    /// own; past it the evaluator fails and its own `restart` applies.
    pub restart: RestartPolicy,
    /// For env copies in other processes (a Gymnasium env's Python
    /// processes): a reset or step that takes longer than this many
    /// seconds counts as a crash, and the process is killed and restarted
    /// within `restart`. Shard actors run in this process, cannot be
    /// interrupted, and do not use it.
    pub step_timeout_s: f64,
}

impl Default for EnvShards {
    fn default() -> Self {
        Self { num_shards: 0, restart: RestartPolicy::default(), step_timeout_s: 60.0 }
    }
}

impl EnvShards {
    /// Whether copies are sharded at all.
    pub fn enabled(&self) -> bool {
        self.num_shards > 0
    }

    /// Range checks against the number of copies per evaluator.
    ///
    /// # Errors
    /// The first out-of-range key, named `env_shards.…`.
    pub fn validate(&self, num_envs_per_worker: usize) -> Result<(), ConfigError> {
        let k = self.num_shards;
        check("env_shards.num_shards", k, k <= num_envs_per_worker, "must be in [0, num_envs_per_worker]")?;
        let t = self.step_timeout_s;
        check("env_shards.step_timeout_s", t, t > 0.0 && t.is_finite(), "must be > 0")?;
        self.restart.validate("env_shards.restart")
    }
}

/// What a shard answers to a step.
#[derive(Debug)]
pub enum ShardStep {
    /// The shard stepped its copies.
    Stepped {
        /// Its copies' rewards, flags and new observations.
        step: VectorStep,
        /// Its copies' next observations (reset ones where episodes ended).
        obs: Vec<f32>,
        /// The legal actions in `obs`, if the env reports masks.
        masks: Option<Vec<f32>>,
        /// Episodes of its copies that ended in this step.
        finished: Vec<EpisodeSummary>,
    },
    /// The shard is a replacement of a later generation than the request
    /// names, and did not step.
    Replaced,
}

/// Messages of an [`EnvShard`]. Every request is complete in itself, so
/// the pool can send it again to a replacement.
pub enum ShardMsg {
    /// Reset every copy, copy `j` with `seed + j`; answers the shard's
    /// generation, observations and action masks.
    Reset(u64, RpcReplyPort<Result<ShardReset, EnvError>>),
    /// Step with rows `copies` of the actions, if the shard's generation is
    /// `expect`.
    Step {
        /// The generation the caller last reset.
        expect: u64,
        /// Every copy's actions; the shard reads its own rows.
        actions: Arc<Column>,
        /// Where the answer goes.
        reply: RpcReplyPort<Result<ShardStep, EnvError>>,
    },
    /// The shard's snapshot, `None` if a copy cannot take one or the shard
    /// is not of generation `.0`.
    Save(u64, RpcReplyPort<Option<VectorEnvState>>),
    /// Restore part `.1` of the snapshots `.0`; answers the generation.
    Load(Arc<Vec<VectorEnvState>>, usize, RpcReplyPort<Result<u64, EnvError>>),
}

impl ractor::Message for ShardMsg {}

/// A shard's answer to a reset: its generation, its copies' observations
/// and, if the env reports them, their action masks.
pub type ShardReset = (u64, Vec<f32>, Option<Vec<f32>>);

/// A child actor stepping a contiguous range of an evaluator's env copies.
#[derive(Clone, Copy, Debug)]
pub struct EnvShard;

/// Start arguments of an [`EnvShard`].
pub struct ShardArgs {
    make: EnvMaker,
    copies: Range<usize>,
    generation: u64,
}

/// An [`EnvShard`]'s state.
pub struct ShardState {
    env: VectorEnv,
    copies: Range<usize>,
    generation: u64,
}

impl Actor for EnvShard {
    type Msg = ShardMsg;
    type State = ShardState;
    type Arguments = ShardArgs;

    async fn pre_start(&self, _: ActorRef<ShardMsg>, args: ShardArgs) -> Result<ShardState, ActorProcessingErr> {
        let envs = args.copies.clone().map(|_| (args.make)()).collect::<Result<Vec<_>, _>>()?;
        Ok(ShardState { env: VectorEnv::new(envs)?, copies: args.copies, generation: args.generation })
    }

    async fn handle(&self, _: ActorRef<ShardMsg>, msg: ShardMsg, s: &mut ShardState) -> Result<(), ActorProcessingErr> {
        // A panic in here (an env's) fails the shard: the pool restarts it.
        match msg {
            ShardMsg::Reset(seed, reply) => {
                let result = s
                    .env
                    .reset(seed)
                    .map(|()| (s.generation, s.env.observations().to_vec(), s.env.action_masks().map(<[f32]>::to_vec)));
                let _ = reply.send(result);
            }
            ShardMsg::Step { expect, actions, reply } if expect == s.generation => {
                let mut step = VectorStep::default();
                let result =
                    s.env.step(&actions.slice_rows(s.copies.clone()), &mut step).map(|()| ShardStep::Stepped {
                        step,
                        obs: s.env.observations().to_vec(),
                        masks: s.env.action_masks().map(<[f32]>::to_vec),
                        finished: s.env.drain_finished(),
                    });
                let _ = reply.send(result);
            }
            ShardMsg::Step { reply, .. } => {
                let _ = reply.send(Ok(ShardStep::Replaced));
            }
            ShardMsg::Save(expect, reply) => {
                let _ = reply.send(if expect == s.generation { s.env.save_state() } else { None });
            }
            ShardMsg::Load(states, part, reply) => {
                let _ = reply.send(s.env.load_state(&states[part]).map(|()| s.generation));
            }
        }
        Ok(())
    }
}

/// The caller's side of an evaluator's shards: the pool, the copy range of
/// each shard and the generation the caller last reset.
pub struct EnvShardSet {
    pool: Mutex<ActorPool<EnvShard>>,
    runtime: Handle,
    name: String,
    obs_dim: usize,
    ranges: Vec<Range<usize>>,
    generations: Vec<u64>,
    seed: u64,
    replaced: u64,
}

impl EnvShardSet {
    /// Starts `shards.num_shards` shards over `num_envs` copies from `make`.
    ///
    /// # Errors
    /// A shard count outside `1..=num_envs`, no multi-threaded runtime, or
    /// a copy that cannot be built.
    pub(crate) fn spawn(
        make: EnvMaker,
        name: &str,
        num_envs: usize,
        obs_dim: usize,
        shards: &EnvShards,
    ) -> Result<Self, EnvError> {
        let k = shards.num_shards;
        if !(1..=num_envs).contains(&k) {
            return Err(EnvError::BadArgument {
                env: name.to_string(),
                message: format!("{k} env shards for {num_envs} copies; each shard needs at least one copy"),
            });
        }
        let runtime = multi_threaded(name)?;
        let ranges: Vec<Range<usize>> = (0..k).map(|s| s * num_envs / k..(s + 1) * num_envs / k).collect();
        let starts = ranges.clone();
        let args: ChildArgs<EnvShard> =
            Arc::new(move |i, generation| ShardArgs { make: make.clone(), copies: starts[i].clone(), generation });
        let spawn = ActorPool::spawn("env shard", EnvShard, k, args, shards.restart);
        let pool = blocking(&runtime, name, spawn)?.map_err(|e| shard_error(name, e))?;
        Ok(Self {
            pool: Mutex::new(pool),
            runtime,
            name: name.to_string(),
            obs_dim,
            ranges,
            generations: vec![0; k],
            seed: 0,
            replaced: 0,
        })
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there are no shards (never: a set has at least one).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Replacement shards the steps have met so far (each one's copies
    /// lost their episodes in progress).
    pub fn restarts(&self) -> u64 {
        self.replaced
    }

    /// Shard `i`'s actor as last seen, for inspection or a fault test.
    pub fn actor(&self, i: usize) -> ActorRef<ShardMsg> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner).actor(i).clone()
    }

    /// Resets every copy, copy `i` with `seed + i`, into `now.obs` and, if
    /// the env reports them, its action masks into `now.masks`.
    pub(crate) fn reset(&mut self, seed: u64, now: &mut Current) -> Result<(), EnvError> {
        self.seed = seed;
        let ranges = &self.ranges;
        let call = unpoisoned(&mut self.pool)
            .call_all(|i, reply| ShardMsg::Reset(seed.wrapping_add(ranges[i].start as u64), reply));
        let answers = blocking(&self.runtime, &self.name, call)?.map_err(|e| shard_error(&self.name, e))?;
        for (i, answer) in answers.into_iter().enumerate() {
            let (generation, shard_obs, shard_masks) = answer?;
            self.generations[i] = generation;
            self.adopt(i, &shard_obs, shard_masks, now);
        }
        Ok(())
    }

    /// Copies shard `i`'s observations and masks into the whole set's.
    fn adopt(&self, i: usize, shard_obs: &[f32], shard_masks: Option<Vec<f32>>, now: &mut Current) {
        now.obs[self.rows(i)].copy_from_slice(shard_obs);
        if let Some(part) = shard_masks {
            let total = self.ranges.last().map_or(0, |r| r.end);
            now.adopt_masks(self.ranges[i].clone(), &part, total);
        }
    }

    /// Steps every shard with its rows of `actions`; fills `out` and `now`
    /// as an unsharded vector env would, except for the copies of a
    /// replaced shard, which are reset and marked interrupted.
    pub(crate) fn step(&mut self, actions: &Column, out: &mut VectorStep, now: &mut Current) -> Result<(), EnvError> {
        let actions = Arc::new(actions.clone());
        let expect = &self.generations;
        let call = unpoisoned(&mut self.pool).call_all(|i, reply| ShardMsg::Step {
            expect: expect[i],
            actions: actions.clone(),
            reply,
        });
        let answers = blocking(&self.runtime, &self.name, call)?.map_err(|e| shard_error(&self.name, e))?;
        let d = self.obs_dim;
        let n = self.ranges.last().map_or(0, |r| r.end);
        let w = now.masks.as_ref().map_or(0, |m| m.len() / n.max(1));
        for (i, answer) in answers.into_iter().enumerate() {
            let copies = self.ranges[i].clone();
            match answer? {
                ShardStep::Stepped { step, obs: shard_obs, masks: shard_masks, finished: done } => {
                    out.rewards[copies.clone()].copy_from_slice(&step.rewards);
                    out.terminated[copies.clone()].copy_from_slice(&step.terminated);
                    out.truncated[copies.clone()].copy_from_slice(&step.truncated);
                    out.new_obs[copies.start * d..copies.end * d].copy_from_slice(&step.new_obs);
                    out.new_action_mask[copies.start * w..copies.end * w].copy_from_slice(&step.new_action_mask);
                    self.adopt(i, &shard_obs, shard_masks, now);
                    now.finished.extend(done);
                }
                ShardStep::Replaced => {
                    self.restart(i, now)?;
                    out.interrupt(copies, &now.obs, now.masks.as_deref());
                }
            }
        }
        Ok(())
    }

    /// Resets replacement shard `i` with a seed no earlier generation used,
    /// and adopts its generation.
    fn restart(&mut self, i: usize, now: &mut Current) -> Result<(), EnvError> {
        self.replaced += 1;
        let start = self.ranges[i].start as u64;
        let seed = self.seed.wrapping_add(start).wrapping_add(self.replaced.wrapping_mul(1_000_003));
        let call = unpoisoned(&mut self.pool).call(i, |reply| ShardMsg::Reset(seed, reply));
        let (generation, shard_obs, shard_masks) =
            blocking(&self.runtime, &self.name, call)?.map_err(|e| shard_error(&self.name, e))??;
        tracing::warn!(
            env = %self.name,
            shard = i,
            copies = ?self.ranges[i],
            generation,
            "env shard was restarted; its copies' episodes in progress are lost"
        );
        self.generations[i] = generation;
        self.adopt(i, &shard_obs, shard_masks, now);
        Ok(())
    }

    /// Each shard's snapshot, in copy order; `None` if any cannot take one
    /// (a copy without snapshots, a shard replaced since its last step, or
    /// a pool that gave up).
    pub(crate) fn save_states(&self) -> Option<Vec<VectorEnvState>> {
        let pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let expect = &self.generations;
        let call = pool.call_all(|i, reply| ShardMsg::Save(expect[i], reply));
        blocking(&self.runtime, &self.name, call).ok()?.ok()?.into_iter().collect()
    }

    /// Restores `state` (a whole vector env's snapshot) part by part.
    pub(crate) fn load_states(&mut self, state: &VectorEnvState) -> Result<(), EnvError> {
        let d = self.obs_dim;
        let parts: Vec<VectorEnvState> = self
            .ranges
            .iter()
            .map(|r| VectorEnvState {
                envs: state.envs[r.clone()].to_vec(),
                obs: state.obs[r.start * d..r.end * d].to_vec(),
                returns: state.returns[r.clone()].to_vec(),
                lengths: state.lengths[r.clone()].to_vec(),
                finished: Vec::new(),
                masks: state.masks.as_ref().map(|m| {
                    let w = m.len() / state.lengths.len().max(1);
                    m[r.start * w..r.end * w].to_vec()
                }),
            })
            .collect();
        let parts = Arc::new(parts);
        let call = unpoisoned(&mut self.pool).call_all(|i, reply| ShardMsg::Load(parts.clone(), i, reply));
        let answers = blocking(&self.runtime, &self.name, call)?.map_err(|e| shard_error(&self.name, e))?;
        for (i, answer) in answers.into_iter().enumerate() {
            self.generations[i] = answer?;
        }
        Ok(())
    }

    fn rows(&self, i: usize) -> Range<usize> {
        self.ranges[i].start * self.obs_dim..self.ranges[i].end * self.obs_dim
    }
}

/// The runtime the shards run on: the current one, if it is multi-threaded.
fn multi_threaded(name: &str) -> Result<Handle, EnvError> {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => Ok(handle),
        Ok(_) => Err(needs_runtime(name, "this is a current-thread runtime")),
        Err(_) => Err(needs_runtime(name, "there is no tokio runtime here")),
    }
}

fn needs_runtime(name: &str, what: &str) -> EnvError {
    EnvError::Shards {
        env: name.to_string(),
        reason: format!(
            "env shards need a multi-threaded tokio runtime ({what}; in tests use \
             #[tokio::test(flavor = \"multi_thread\")])"
        ),
    }
}

/// Runs `future` on `runtime` from synchronous code, blocking this thread
/// without starving the runtime. Refused, not a panic, where tokio would
/// panic: inside a current-thread runtime.
fn blocking<F: Future>(runtime: &Handle, name: &str, future: F) -> Result<F::Output, EnvError> {
    if let Ok(current) = Handle::try_current() {
        if current.runtime_flavor() != RuntimeFlavor::MultiThread {
            return Err(needs_runtime(name, "this is a current-thread runtime"));
        }
    }
    Ok(tokio::task::block_in_place(|| runtime.block_on(future)))
}

/// The pool behind its lock. The lock guards no invariant a panic could
/// break halfway (it only serializes calls), so a poisoned one is used as is.
fn unpoisoned<T>(lock: &mut Mutex<T>) -> &mut T {
    lock.get_mut().unwrap_or_else(PoisonError::into_inner)
}

fn shard_error(name: &str, e: PoolError) -> EnvError {
    EnvError::Shards { env: name.to_string(), reason: e.to_string() }
}
