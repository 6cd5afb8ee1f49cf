//! [`PolicyEvaluator`]: a policy graph driving a vector env.
//!
//! `sample()` steps every env copy for a fixed number of steps, cuts each
//! copy's steps into single-episode fragments, lets the policy postprocess
//! each fragment (GAE...) and returns the concatenation together with the
//! episodes that finished. This is the unit that runs in the driver, in a
//! local actor, or on a remote node.

use crate::acting::Acting;
use crate::env::EnvError;
use crate::experience::{ExperienceError, ExperienceWriter, InputMix, InputSource};
use crate::filter::{MeanStdFilter, RewardScaler, RunningStat};
use crate::policy::{FlatGradients, LearnerStats, PolicyError, PolicyGraph};
use crate::sample_batch::{fields, BatchError, Column, SampleBatch};
use crate::space::{to_bytes, Dtype};
use crate::vector_env::{EpisodeSummary, VectorEnv, VectorEnvState, VectorStep};

/// The columns of a transition, which a dataset's rows keep when they are
/// mixed with the env's own.
/// With the agent's index, for a multi-agent run.
const TRANSITION_FIELDS: [&str; 7] = [
    fields::OBS,
    fields::NEW_OBS,
    fields::ACTIONS,
    fields::REWARDS,
    fields::TERMINATEDS,
    fields::TRUNCATEDS,
    crate::multi_policy::AGENT_INDEX,
];
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A postprocessed batch and the episodes that finished while sampling it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rollout {
    /// At least `sample_size` postprocessed rows, less the rows of env
    /// copies whose shard restarted during the call (see
    /// [`PolicyEvaluator::sample`]).
    pub batch: SampleBatch,
    /// Episodes that ended during this call.
    pub episodes: Vec<EpisodeSummary>,
    /// What the evaluator's observation filter saw during this call, for
    /// the driver to merge (`None` without a filter).
    pub filter_delta: Option<RunningStat>,
    /// Env shards found restarted during this call (each cost its copies
    /// one step and their episodes in progress); 0 without shards.
    pub env_shard_restarts: u64,
    /// How many of `batch`'s last rows a dataset (`input`) gave before, in
    /// an earlier pass over it; 0 for an env's rows. A replay buffer that
    /// still holds every row it was given does not store them twice.
    pub repeated_rows: usize,
}

/// What [`PolicyEvaluator::sample`] runs instead of stepping the envs: an
/// algorithm's own way of making rows with the evaluator's policy
/// (AlphaZero's self-play, whose moves come from a tree search over a copy
/// of the game rather than from the env). The evaluator stays an ordinary
/// one: it is placed, supervised, sent weights and restored like any
/// other, so the rows come from wherever the deployment put it (actors in
/// this process, actix threads, worker nodes).
pub trait Sampler: Send {
    /// Rows made with `policy`, and the episodes (games) they finished.
    ///
    /// # Errors
    /// The policy's or the routine's error.
    fn sample(&mut self, policy: &mut dyn PolicyGraph) -> Result<Rollout, EvaluatorError>;

    /// Called after [`PolicyEvaluator::load_state`] (a restore, or a move
    /// to another home) with the restored count of rows sampled, so that a
    /// sampler with its own random stream can move it on rather than
    /// repeat the draws it made before the snapshot.
    fn restored(&mut self, _steps_sampled: u64) {}
}

/// A gradient computed by an evaluator on its own fresh samples (A3C style).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GradientRollout {
    /// The gradient, flat.
    pub grads: FlatGradients,
    /// Learner statistics from the gradient computation.
    pub stats: LearnerStats,
    /// Number of env steps the gradient was computed on.
    pub steps: usize,
    /// Episodes that ended while sampling.
    pub episodes: Vec<EpisodeSummary>,
    /// As [`Rollout::env_shard_restarts`].
    pub env_shard_restarts: u64,
}

/// Why an evaluator could not do its job.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EvaluatorError {
    /// The env failed (e.g. an action outside its space).
    #[error("env error: {0}")]
    Env(#[from] EnvError),
    /// The policy failed.
    #[error("policy error: {0}")]
    Policy(#[from] PolicyError),
    /// A batch was malformed.
    #[error("batch error: {0}")]
    Batch(#[from] BatchError),
    /// Policy and env disagree on spaces.
    #[error("the policy's {which} space {policy} differs from the env's {env}")]
    SpaceMismatch {
        /// `"observation"` or `"action"`.
        which: &'static str,
        /// The policy's space.
        policy: String,
        /// The env's space.
        env: String,
    },
    /// A configuration value is unusable.
    #[error("{0}")]
    Config(String),
    /// The evaluator panicked (an env or policy bug); the message is the panic's.
    #[error("panicked: {0}")]
    Panicked(String),
    /// Experience could not be written or read (`output`, `input`).
    #[error("experience: {0}")]
    Experience(String),
    /// An evaluation's video could not be recorded.
    #[error("video: {0}")]
    Video(String),
}

impl From<crate::video::VideoError> for EvaluatorError {
    fn from(e: crate::video::VideoError) -> Self {
        EvaluatorError::Video(e.to_string())
    }
}

impl From<ExperienceError> for EvaluatorError {
    fn from(e: ExperienceError) -> Self {
        EvaluatorError::Experience(e.to_string())
    }
}

impl EvaluatorError {
    /// Whether the evaluator should fail on this error rather than answer
    /// it, so that its supervisor restarts it: its env shards gave up
    /// ([`EnvError::Shards`]), and only a new evaluator brings new ones.
    pub fn escalates(&self) -> bool {
        matches!(self, EvaluatorError::Env(EnvError::Shards { .. }))
    }
}

/// An evaluator's snapshot for checkpoints: everything but the weights
/// (which the checkpoint stores once, from the learner).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluatorState {
    /// The evaluator's index.
    pub index: usize,
    /// [`PolicyGraph::save_state`]: optimizer moments, random generators.
    pub policy: Option<serde_bytes::ByteBuf>,
    /// [`VectorEnv::save_state`]: the episodes in progress.
    pub env: Option<VectorEnvState>,
    /// The observation filter with its statistics.
    pub filter: Option<MeanStdFilter>,
    /// Env steps sampled so far.
    pub steps_sampled: u64,
    /// Each env copy's recurrent state (empty for a feed-forward policy),
    /// so a restored run continues its episodes in progress exactly.
    #[serde(default)]
    pub recurrent_state: Vec<f32>,
    /// Each copy's last move in a turn-based game still waiting for its
    /// outcome (see [`PolicyEvaluator::sample`]), as an encoded one-row
    /// batch; empty for other envs.
    #[serde(default)]
    pub pending_rows: Vec<Option<serde_bytes::ByteBuf>>,
    /// The reward scaler with its statistics and each copy's discounted
    /// return. Last, as every field added after the first format: the
    /// codec writes fields by position, so a checkpoint written before a
    /// field existed still reads (the field takes its default).
    #[serde(default)]
    pub reward_scaler: Option<RewardScaler>,
}

impl EvaluatorState {
    /// What this snapshot lacks for an exact resume, in words (empty if
    /// nothing).
    pub fn gaps(&self) -> Vec<String> {
        let mut gaps = Vec::new();
        if self.policy.is_none() {
            gaps.push(format!("evaluator {}: the policy cannot save its optimizer and RNG state", self.index));
        }
        if self.env.is_none() {
            gaps.push(format!(
                "evaluator {}: the env cannot save its state; episodes in progress restart on restore",
                self.index
            ));
        }
        gaps
    }
}

/// A policy graph plus a vector env.
pub struct PolicyEvaluator {
    policy: Box<dyn PolicyGraph>,
    acting: Acting,
    env: VectorEnv,
    sample_size: usize,
    step_out: SampleBatch,
    step: VectorStep,
    fragment: SampleBatch,
    /// Per fragment row: the copy's env shard was restarted at that step.
    interrupted: Vec<bool>,
    /// Per fragment row: the copy did not act (a player waiting for its
    /// turn); the row completes the copy's last acted row.
    waiting: Vec<bool>,
    /// Per fragment row: the copy's last acted row is not complete yet.
    pending: Vec<bool>,
    /// Per copy: its last acted row of an earlier call, still pending.
    carry: Vec<Option<SampleBatch>>,
    steps_sampled: u64,
    filter: Option<MeanStdFilter>,
    reward_scaler: Option<RewardScaler>,
    /// Where sampled episodes are written (`output`).
    output: Option<ExperienceWriter>,
    /// What `sample` reads instead of stepping the envs, or beside them
    /// (`input`).
    input: Option<InputMix>,
    /// What `sample` runs instead of stepping the envs.
    sampler: Option<Box<dyn Sampler>>,
}

impl PolicyEvaluator {
    /// Pairs `policy` with `env`, resets the env with `seed`, and returns an
    /// evaluator whose [`sample`](Self::sample) yields at least `sample_size`
    /// rows (rounded up to a whole number of steps of every env copy).
    ///
    /// # Errors
    /// If the spaces differ, `sample_size` is zero, or the env fails to reset.
    pub fn new(
        policy: Box<dyn PolicyGraph>,
        mut env: VectorEnv,
        sample_size: usize,
        seed: u64,
    ) -> Result<Self, EvaluatorError> {
        if policy.observation_space() != env.observation_space() {
            return Err(EvaluatorError::SpaceMismatch {
                which: "observation",
                policy: policy.observation_space().to_string(),
                env: env.observation_space().to_string(),
            });
        }
        if policy.action_space() != env.action_space() {
            return Err(EvaluatorError::SpaceMismatch {
                which: "action",
                policy: policy.action_space().to_string(),
                env: env.action_space().to_string(),
            });
        }
        if sample_size == 0 {
            return Err(EvaluatorError::Config("sample_size must be at least 1".into()));
        }
        env.reset(seed)?;
        Ok(Self {
            acting: Acting::new(policy.as_ref(), env.num_envs()),
            policy,
            env,
            sample_size,
            step_out: SampleBatch::new(),
            step: VectorStep::default(),
            fragment: SampleBatch::new(),
            interrupted: Vec::new(),
            waiting: Vec::new(),
            pending: Vec::new(),
            carry: Vec::new(),
            steps_sampled: 0,
            filter: None,
            reward_scaler: None,
            output: None,
            input: None,
            sampler: None,
        })
    }

    /// Writes every episode it samples with `writer`, as the policy acted
    /// on it (observations filtered if a filter is on, rewards scaled if
    /// scaling is on), before postprocessing.
    pub fn with_output(mut self, writer: ExperienceWriter) -> Self {
        self.output = Some(writer);
        self
    }

    /// Reads its batches from `input` instead of stepping its envs: each
    /// [`sample`](Self::sample) returns `sample_size` rows of the dataset,
    /// postprocessed by the policy episode by episode, and no episodes of
    /// its own (see [`InputSource`]).
    pub fn with_input(mut self, input: InputSource) -> Self {
        self.input = Some(InputMix::only(input));
        self
    }

    /// Runs `sampler` in each [`sample`](Self::sample) instead of stepping
    /// its envs, handing it this evaluator's policy (see [`Sampler`]). The
    /// sampler makes every row: `input`, `output` and the observation
    /// filter do not apply to it.
    pub fn with_sampler(mut self, sampler: Box<dyn Sampler>) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// Draws the source of each [`sample`](Self::sample) from `mix`: a
    /// dataset's rows (as [`with_input`](Self::with_input)), or a
    /// fragment of its own envs.
    pub fn with_input_mix(mut self, mix: InputMix) -> Self {
        self.input = Some(mix);
        self
    }

    /// Writes the episodes still running (cut) and finishes the output
    /// file, if the evaluator writes any; later episodes are not written.
    /// The run calls it when it ends, so that no file is left partial.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn finish_output(&mut self) -> Result<(), EvaluatorError> {
        match self.output.take() {
            Some(mut output) => Ok(output.finish()?),
            None => Ok(()),
        }
    }

    /// Normalizes observations with `filter` before the policy sees them
    /// (and in the batches it returns).
    pub fn with_observation_filter(mut self, filter: MeanStdFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Scales the rewards of the batches it returns by the running std of
    /// the discounted return with discount `gamma` (see [`RewardScaler`]).
    pub fn with_reward_scaling(mut self, gamma: f64) -> Self {
        self.reward_scaler = Some(RewardScaler::new(self.env.num_envs(), gamma, 10.0));
        self
    }

    /// The reward scaler, if any.
    pub fn reward_scaler(&self) -> Option<&RewardScaler> {
        self.reward_scaler.as_ref()
    }

    /// The observation filter, if any.
    pub fn observation_filter(&self) -> Option<&MeanStdFilter> {
        self.filter.as_ref()
    }

    /// The observation filter, mutably (the driver merges deltas into it).
    pub fn observation_filter_mut(&mut self) -> Option<&mut MeanStdFilter> {
        self.filter.as_mut()
    }

    /// Adopts the driver's synchronized filter statistics.
    ///
    /// # Errors
    /// Statistics of another width than this evaluator's observations.
    pub fn set_filter_statistics(&mut self, global: &RunningStat) -> Result<(), EvaluatorError> {
        if let Some(f) = &mut self.filter {
            f.set_global(global).map_err(|e| EvaluatorError::Config(e.to_string()))?;
        }
        Ok(())
    }

    /// The policy graph.
    pub fn policy(&self) -> &dyn PolicyGraph {
        self.policy.as_ref()
    }

    /// The policy's observation and action spaces (e.g. to build a learner's
    /// copy of the policy).
    pub fn spaces(&self) -> (crate::Space, crate::Space) {
        (self.policy.observation_space().clone(), self.policy.action_space().clone())
    }

    /// The policy graph, mutably (the driver learns through this).
    pub fn policy_mut(&mut self) -> &mut dyn PolicyGraph {
        self.policy.as_mut()
    }

    /// The vector env.
    pub fn env(&self) -> &VectorEnv {
        &self.env
    }

    /// Env steps sampled by this evaluator so far.
    pub fn steps_sampled(&self) -> u64 {
        self.steps_sampled
    }

    /// Steps every env copy `ceil(sample_size / num_envs)` times and returns
    /// the postprocessed batch. With env shards, the rows of copies whose
    /// shard was restarted mid-step are left out (they are no transitions),
    /// so the batch can fall short of `sample_size` by those rows.
    ///
    /// # Errors
    /// Env, policy or batch errors; the evaluator stays usable after an env
    /// error only if the env does.
    pub fn sample(&mut self) -> Result<Rollout, EvaluatorError> {
        if let Some(sampler) = &mut self.sampler {
            let policy = self.policy.as_mut();
            let rollout = off_the_runtime(|| sampler.sample(policy))?;
            self.steps_sampled += rollout.batch.len() as u64;
            return Ok(rollout);
        }
        // Beside the env's own rows, a dataset's keep only the transition
        // (what the policy recorded when acting, e.g. `vf_preds`, is the
        // logging policy's, and the env's rows would not have it).
        let transitions_only = self.input.as_ref().is_some_and(InputMix::has_env);
        if let Some(input) = self.input.as_mut().and_then(InputMix::pick) {
            let policy = &mut self.policy;
            let batch = input.next_rows(self.sample_size, |b| {
                if transitions_only {
                    let extra: Vec<String> =
                        b.fields().filter(|f| !TRANSITION_FIELDS.contains(f)).map(String::from).collect();
                    extra.iter().for_each(|f| drop(b.remove(f)));
                }
                policy.assign_logged_rows(b)?;
                policy.postprocess_trajectory(b).map_err(EvaluatorError::from)
            })?;
            self.steps_sampled += batch.len() as u64;
            // Repeats are told apart only when the dataset is all there is:
            // beside the env's rows, each pass is stored again so that the
            // buffer keeps the sources' weights.
            let repeated_rows = if transitions_only { 0 } else { input.repeated_rows() };
            return Ok(Rollout { batch, repeated_rows, ..Rollout::default() });
        }
        let n = self.env.num_envs();
        let d = self.env.obs_dim();
        let horizon = self.sample_size.div_ceil(n);
        self.fragment.clear();
        self.interrupted.clear();
        self.waiting.clear();
        self.pending.clear();
        self.carry.resize(n, None);
        let restarts_before = self.shard_restarts();
        for _ in 0..horizon {
            let mut obs = self.env.observations().to_vec();
            if let Some(f) = &mut self.filter {
                f.apply(&mut obs);
            }
            let masks = self.env.action_masks().map(<[f32]>::to_vec);
            self.acting.act(self.policy.as_mut(), &obs, masks.as_deref(), true, &mut self.step_out)?;
            self.step_env()?;
            let flag = |v: &[bool]| v.iter().map(|&b| if b { 1.0 } else { 0.0 }).collect::<Vec<f32>>();
            let obs = self.obs_column(fields::OBS, obs, d)?;
            self.step_out.insert(fields::OBS, obs)?;
            let mut new_obs = self.step.new_obs.clone();
            if let Some(f) = &self.filter {
                // Recorded when it becomes the next step's observation, not twice.
                f.normalize(&mut new_obs);
            }
            let new_obs = self.obs_column(fields::NEW_OBS, new_obs, d)?;
            self.step_out.insert(fields::NEW_OBS, new_obs)?;
            let mut rewards = self.step.rewards.clone();
            if let Some(scaler) = &mut self.reward_scaler {
                let s = &self.step;
                let ended: Vec<bool> = (0..n).map(|i| s.terminated[i] || s.truncated[i] || s.interrupted[i]).collect();
                let step: Vec<bool> = (0..n).map(|i| !(s.waiting[i] || s.interrupted[i])).collect();
                scaler.apply(&mut rewards, &ended, &step).map_err(|e| EvaluatorError::Config(e.to_string()))?;
            }
            self.step_out.insert_f32(fields::REWARDS, rewards, 1)?;
            self.step_out.insert_f32(fields::TERMINATEDS, flag(&self.step.terminated), 1)?;
            self.step_out.insert_f32(fields::TRUNCATEDS, flag(&self.step.truncated), 1)?;
            if let Some(masks) = masks {
                let width = masks.len() / n;
                self.step_out.insert_f32(fields::ACTION_MASK, masks, width)?;
                self.step_out.insert_f32(fields::NEW_ACTION_MASK, self.step.new_action_mask.clone(), width)?;
            }
            self.fragment.append(&self.step_out)?;
            self.interrupted.extend_from_slice(&self.step.interrupted);
            self.waiting.extend_from_slice(&self.step.waiting);
            self.pending.extend_from_slice(&self.step.pending);
            // A copy whose episode ended (or whose shard restarted) starts
            // its next episode with a fresh recurrent state.
            for i in 0..n {
                if self.step.terminated[i] || self.step.truncated[i] || self.step.interrupted[i] {
                    self.acting.episode_started(i);
                }
            }
        }
        let lost = self.interrupted.iter().zip(&self.waiting).filter(|(&x, &w)| x || w).count();
        self.steps_sampled += (horizon * n - lost) as u64;

        // Rows are time-major: row t * n + i is copy i at step t. Cut each
        // copy's steps into single-episode trajectories and postprocess them.
        // An interrupted row (the copy's shard restarted) is dropped and cuts
        // the trajectory before it, which then bootstraps from its last
        // observation as at a fragment's end: the episode was cut, not ended.
        // A waiting row (a player whose turn it was not) is no transition of
        // its own: its reward, end and observation complete the copy's last
        // acted row, which stays pending until then — across calls if need
        // be, so that a fragment's end never bootstraps from a position the
        // player did not get to move in.
        let terminated = self.fragment.f32(fields::TERMINATEDS)?.to_vec();
        let truncated = self.fragment.f32(fields::TRUNCATEDS)?.to_vec();
        let mut trajectories = Vec::new();
        let mut rows = Vec::with_capacity(horizon);
        for i in 0..n {
            rows.clear();
            let mut carried = self.carry[i].take();
            let mut last_pending = carried.is_some();
            for t in 0..horizon {
                let r = t * n + i;
                if self.interrupted[r] {
                    self.flush(i, carried.take(), &rows, true, &mut trajectories)?;
                    rows.clear();
                    last_pending = false;
                    continue;
                }
                if self.waiting[r] {
                    match (rows.last(), carried.as_mut()) {
                        (Some(&acted), _) => {
                            let src = self.fragment.gather(&[r]);
                            complete_row(&mut self.fragment, acted, &src)?;
                        }
                        (None, Some(row)) => {
                            let src = self.fragment.gather(&[r]);
                            complete_row(row, 0, &src)?;
                        }
                        // Nothing to complete: the copy has not acted in this
                        // episode yet (the other player opened).
                        (None, None) => continue,
                    }
                } else {
                    rows.push(r);
                }
                last_pending = self.pending[r];
                if terminated[r] != 0.0 || truncated[r] != 0.0 {
                    self.flush(i, carried.take(), &rows, true, &mut trajectories)?;
                    rows.clear();
                    last_pending = false;
                }
            }
            if last_pending {
                match rows.pop() {
                    Some(r) => {
                        self.flush(i, carried.take(), &rows, false, &mut trajectories)?;
                        self.carry[i] = Some(self.fragment.gather(&[r]));
                    }
                    None => self.carry[i] = carried.take(),
                }
            } else {
                self.flush(i, carried.take(), &rows, false, &mut trajectories)?;
            }
        }
        Ok(Rollout {
            batch: SampleBatch::concat(&trajectories)?,
            episodes: self.env.drain_finished(),
            filter_delta: self.filter.as_mut().map(MeanStdFilter::take_delta),
            env_shard_restarts: self.shard_restarts() - restarts_before,
            repeated_rows: 0,
        })
    }

    /// Postprocesses the trajectory of env copy `copy` made of `carried` (a
    /// pending row from an earlier call) followed by fragment `rows`, if
    /// any, into `out`; `ended`: the copy's episode ended with it.
    fn flush(
        &mut self,
        copy: usize,
        carried: Option<SampleBatch>,
        rows: &[usize],
        ended: bool,
        out: &mut Vec<SampleBatch>,
    ) -> Result<(), EvaluatorError> {
        let mut traj = match carried {
            Some(mut row) => {
                row.append(&self.fragment.gather(rows))?;
                row
            }
            None => self.fragment.gather(rows),
        };
        if let Some(output) = &mut self.output {
            output.add(copy, traj.clone(), ended)?;
        }
        if !traj.is_empty() {
            self.policy.postprocess_trajectory(&mut traj)?;
            out.push(traj);
        }
        Ok(())
    }

    /// Samples a batch and computes the policy's gradient on it.
    ///
    /// # Errors
    /// As [`sample`](Self::sample) and [`PolicyGraph::compute_gradients`].
    pub fn sample_and_compute_gradients(&mut self) -> Result<GradientRollout, EvaluatorError> {
        let rollout = self.sample()?;
        let (grads, stats) = self.policy.compute_gradients(&rollout.batch)?;
        Ok(GradientRollout {
            grads,
            stats,
            steps: rollout.batch.len(),
            episodes: rollout.episodes,
            env_shard_restarts: rollout.env_shard_restarts,
        })
    }

    /// The batch column of observations `values` (rows of `width`): bytes
    /// when the env's space is a `uint8` box that no filter rescales, so
    /// that pixels stay a quarter the size through batches, the wire and
    /// replay; a `Dict` with a `uint8` entry packed into bytes likewise
    /// ([`Space::packed_width`]); `f32` otherwise.
    ///
    /// # Errors
    /// A value of a `uint8` box that is not a byte over 255 (an env that
    /// declares `uint8` but writes something else).
    fn obs_column(&self, field: &str, values: Vec<f32>, width: usize) -> Result<Column, EvaluatorError> {
        let space = self.env.observation_space();
        let packed = space.packed_width().filter(|_| self.filter.is_none());
        if packed.is_none() && (self.filter.is_some() || space.dtype() != Some(Dtype::U8)) {
            return Ok(Column::F32 { data: values, width });
        }
        let mut bytes = Vec::with_capacity(values.len());
        let written = match packed {
            Some(_) => space.pack_rows(&values, &mut bytes),
            None => to_bytes(&values, &mut bytes),
        };
        written.map_err(|i| EnvError::Other {
            env: self.env.name().to_string(),
            message: format!(
                "`{field}` value {} of row {} is {}, but the observation space {} declares it uint8: \
                 every value must be a byte over 255",
                i % width.max(1),
                i / width.max(1),
                values[i],
                self.env.observation_space()
            ),
        })?;
        Ok(Column::U8 { data: bytes, width: packed.unwrap_or(width) })
    }

    /// Steps the env with the actions in `step_out`. Continuous actions
    /// reach the env within its bounds; a batch keeps what the policy
    /// sampled.
    fn step_env(&mut self) -> Result<(), EvaluatorError> {
        let actions = self
            .step_out
            .get(fields::ACTIONS)
            .ok_or_else(|| PolicyError::Other("compute_actions did not write an `actions` column".into()))?;
        match actions {
            Column::F32 { data, width } if has_bounds(self.env.action_space()) => {
                let mut clipped = data.clone();
                self.env.action_space().clip(&mut clipped);
                self.env.step(&Column::F32 { data: clipped, width: *width }, &mut self.step)?;
            }
            _ => self.env.step(actions, &mut self.step)?,
        }
        Ok(())
    }

    /// Plays `episodes` whole episodes and returns their summaries, for
    /// evaluation: every copy is reset first (copy `i` with `seed + i`),
    /// actions are the policy's most likely ones unless `explore`, and the
    /// observation filter normalizes without learning. Copy `i` plays
    /// `episodes / n` episodes (one more for the first `episodes % n`
    /// copies), so short episodes are not over-represented as they would be
    /// by taking the first episodes to finish. An episode cut by a restarted
    /// env shard is not counted; the copy plays another.
    ///
    /// An env whose episodes never end never finishes an evaluation: give
    /// it a `max_episode_steps`.
    ///
    /// # Errors
    /// Env or policy errors.
    pub fn evaluate(
        &mut self,
        episodes: usize,
        seed: u64,
        explore: bool,
    ) -> Result<Vec<EpisodeSummary>, EvaluatorError> {
        self.play_evaluation(episodes, seed, explore, None)
    }

    /// [`evaluate`](Self::evaluate), recording the first episode of the
    /// first copy into `video`: one frame before each of its steps (what
    /// the policy saw when it acted), so the video has as many frames as
    /// the episode has steps. The caller finishes the video.
    ///
    /// # Errors
    /// As `evaluate`; an env that draws no frames
    /// ([`Env::render_rgb`](crate::Env::render_rgb)), or the video failing.
    pub fn evaluate_recorded(
        &mut self,
        episodes: usize,
        seed: u64,
        explore: bool,
        video: &mut crate::video::VideoWriter,
    ) -> Result<Vec<EpisodeSummary>, EvaluatorError> {
        self.play_evaluation(episodes, seed, explore, Some(video))
    }

    fn play_evaluation(
        &mut self,
        episodes: usize,
        seed: u64,
        explore: bool,
        mut video: Option<&mut crate::video::VideoWriter>,
    ) -> Result<Vec<EpisodeSummary>, EvaluatorError> {
        let n = self.env.num_envs();
        self.env.reset(seed)?;
        let mut wanted: Vec<usize> = (0..n).map(|i| episodes / n + usize::from(i < episodes % n)).collect();
        let mut returns = vec![0.0f64; n];
        let mut lengths = vec![0u64; n];
        let mut out = Vec::with_capacity(episodes);
        for i in 0..n {
            self.acting.episode_started(i);
        }
        while out.len() < episodes {
            let mut obs = self.env.observations().to_vec();
            if let Some(f) = &self.filter {
                f.normalize(&mut obs);
            }
            let masks = self.env.action_masks().map(<[f32]>::to_vec);
            if let Some(video) = video.as_deref_mut() {
                let drawn = self.env.render_rgb(0)?;
                video.push_drawn(self.env.name(), drawn)?;
            }
            self.acting.act(self.policy.as_mut(), &obs, masks.as_deref(), explore, &mut self.step_out)?;
            self.step_env()?;
            let step = &self.step;
            if step.terminated[0] || step.truncated[0] || step.interrupted[0] {
                // The first copy's first episode is over (or was cut by a
                // restarted shard: the video ends with it).
                video = None;
            }
            for i in 0..n {
                let ended = step.terminated[i] || step.truncated[i];
                if step.interrupted[i] {
                    (returns[i], lengths[i]) = (0.0, 0);
                } else if step.waiting[i] {
                    // Not its turn: what happened to it, without a step of its own.
                    returns[i] += f64::from(step.rewards[i]);
                } else {
                    returns[i] += f64::from(step.rewards[i]);
                    lengths[i] += 1;
                }
                if ended && wanted[i] > 0 {
                    wanted[i] -= 1;
                    out.push(EpisodeSummary {
                        episode_return: returns[i],
                        length: lengths[i],
                        truncated: step.truncated[i] && !step.terminated[i],
                        agent: None,
                    });
                }
                if ended || step.interrupted[i] {
                    (returns[i], lengths[i]) = (0.0, 0);
                    self.acting.episode_started(i);
                }
            }
        }
        // The env's own record of these episodes is not training's.
        self.env.drain_finished();
        Ok(out)
    }

    fn shard_restarts(&self) -> u64 {
        self.env.restarts()
    }

    /// Overwrites the policy's weights.
    ///
    /// # Errors
    /// If the weights have the wrong length.
    pub fn set_weights(&mut self, weights: &[f32]) -> Result<(), EvaluatorError> {
        Ok(self.policy.set_weights(weights)?)
    }

    /// A snapshot of this evaluator, except its weights (see
    /// [`EvaluatorState`]).
    pub fn save_state(&self, index: usize) -> EvaluatorState {
        EvaluatorState {
            index,
            policy: self.policy.save_state().map(serde_bytes::ByteBuf::from),
            env: self.env.save_state(),
            filter: self.filter.clone(),
            steps_sampled: self.steps_sampled,
            recurrent_state: self.acting.state().to_vec(),
            pending_rows: self
                .carry
                .iter()
                .map(|row| {
                    row.as_ref().map(|r| serde_bytes::ByteBuf::from(crate::codec::encode(r).expect("a row encodes")))
                })
                .collect(),
            reward_scaler: self.reward_scaler.clone(),
        }
    }

    /// Restores what [`save_state`](Self::save_state) saved. Parts the
    /// snapshot lacks (an env that cannot save its state) are left as they
    /// are.
    ///
    /// # Errors
    /// If the policy or env rejects its part, or the filter's width differs.
    pub fn load_state(&mut self, state: &EvaluatorState) -> Result<(), EvaluatorError> {
        if let Some(p) = &state.policy {
            self.policy.load_state(p)?;
        }
        if let Some(e) = &state.env {
            self.env.load_state(e)?;
        }
        match (&mut self.filter, &state.filter) {
            (Some(mine), Some(saved)) if mine.global().mean().len() == saved.global().mean().len() => {
                *mine = saved.clone()
            }
            (None, None) => {}
            (mine, saved) => {
                return Err(EvaluatorError::Config(format!(
                    "the saved observation filter ({}) does not fit this evaluator's ({})",
                    saved.as_ref().map_or("none".into(), |f| format!("width {}", f.global().mean().len())),
                    mine.as_ref().map_or("none".into(), |f| format!("width {}", f.global().mean().len())),
                )))
            }
        }
        match (&mut self.reward_scaler, &state.reward_scaler) {
            // `restore` refuses one for another number of copies.
            (Some(mine), Some(saved)) => mine.restore(saved).map_err(|e| EvaluatorError::Config(e.to_string()))?,
            (None, None) => {}
            (mine, saved) => {
                let describe = |s: bool| if s { "one" } else { "none" };
                return Err(EvaluatorError::Config(format!(
                    "the saved reward scaler ({}) does not fit this evaluator's ({}): normalize_rewards differs",
                    describe(saved.is_some()),
                    describe(mine.is_some()),
                )));
            }
        }
        if self.acting.state_size() > 0 {
            self.acting.set_state(&state.recurrent_state)?;
        }
        self.carry = state
            .pending_rows
            .iter()
            .map(|row| {
                row.as_ref()
                    .map(|bytes| crate::codec::decode(bytes))
                    .transpose()
                    .map_err(|e| EvaluatorError::Config(format!("a saved pending row does not decode: {e}")))
            })
            .collect::<Result<_, _>>()?;
        // Rows saved before observations of `uint8` boxes were kept as
        // bytes hold them as `f32`: made bytes, they fit this evaluator's.
        let mut carry = std::mem::take(&mut self.carry);
        for row in carry.iter_mut().flatten() {
            for field in [fields::OBS, fields::NEW_OBS] {
                if let Some(Column::F32 { data, width }) = row.get(field) {
                    let column = self.obs_column(field, data.clone(), *width)?;
                    row.insert(field, column)?;
                }
            }
        }
        self.carry = carry;
        self.steps_sampled = state.steps_sampled;
        if let Some(sampler) = &mut self.sampler {
            sampler.restored(state.steps_sampled);
        }
        Ok(())
    }
}

/// Completes row `row` of `batch` with the one row of `waiting`: the
/// reward is added, the end flags joined, and the next observation (and
/// its legal actions) replaced.
fn complete_row(batch: &mut SampleBatch, row: usize, waiting: &SampleBatch) -> Result<(), BatchError> {
    batch.f32_mut(fields::REWARDS)?[row] += waiting.f32(fields::REWARDS)?[0];
    for flag in [fields::TERMINATEDS, fields::TRUNCATEDS] {
        let value = &mut batch.f32_mut(flag)?[row];
        *value = value.max(waiting.f32(flag)?[0]);
    }
    for field in [fields::NEW_OBS, fields::NEW_ACTION_MASK] {
        if let (Some(src), Some(dst)) = (waiting.get(field), batch.column_mut(field)) {
            dst.scatter_rows(src, &[row]);
        }
    }
    Ok(())
}

/// Runs `f`, a long synchronous call, on this thread; on a worker of a
/// multi-threaded tokio runtime (an evaluator actor's), the worker's other
/// tasks move to another thread first, so that nothing else in the process
/// (a node's heartbeat, its other evaluators) waits for `f`.
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Whether `space` is a `Box` with a finite bound somewhere.
fn has_bounds(space: &crate::space::Space) -> bool {
    matches!(space, crate::space::Space::Box { low, high, .. } if low.iter().chain(high).any(|x| x.is_finite()))
}

/// Builds evaluator number `index` (0 is the driver's local evaluator,
/// workers count from 1) for its `generation`-th start (0 first, then one
/// more per restart). Seeds should depend on both so a restarted evaluator
/// does not replay the episodes of the one it replaces.
pub type EvaluatorFactory = Arc<dyn Fn(usize, u64) -> Result<PolicyEvaluator, EvaluatorError> + Send + Sync>;

/// The seed for evaluator `index`'s `generation`-th start, derived from the
/// run's seed.
pub fn evaluator_seed(base: u64, index: usize, generation: u64) -> u64 {
    base.wrapping_add(10_007 * index as u64).wrapping_add(1_000_003 * generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An evaluator's state as checkpoints wrote it before the reward
    /// scaler existed: the codec writes fields by position, so the new
    /// field must come last for these to keep reading.
    #[derive(Serialize)]
    struct StateBeforeRewardScaling {
        index: usize,
        policy: Option<serde_bytes::ByteBuf>,
        env: Option<VectorEnvState>,
        filter: Option<MeanStdFilter>,
        steps_sampled: u64,
        recurrent_state: Vec<f32>,
        pending_rows: Vec<Option<serde_bytes::ByteBuf>>,
    }

    #[test]
    fn a_state_saved_before_reward_scaling_still_reads() {
        let mut filter = MeanStdFilter::new(2, 10.0);
        filter.apply(&mut [1.0, 2.0, 3.0, 5.0]);
        let old = StateBeforeRewardScaling {
            index: 1,
            policy: Some(serde_bytes::ByteBuf::from(vec![7u8; 5])),
            env: None,
            filter: Some(filter.clone()),
            steps_sampled: 1234,
            recurrent_state: vec![0.5, -0.5],
            pending_rows: vec![None, None],
        };
        let bytes = crate::codec::encode_value(&old).unwrap();
        let state: EvaluatorState = crate::codec::decode_value(&bytes).unwrap();
        assert_eq!((state.index, state.steps_sampled, &state.filter), (1, 1234, &Some(filter)));
        assert_eq!(state.recurrent_state, vec![0.5, -0.5]);
        assert_eq!(state.reward_scaler, None);
        // And a state with a scaler reads back whole.
        let mut scaler = RewardScaler::new(2, 0.99, 10.0);
        scaler.apply(&mut [1.0, -1.0], &[false, true], &[true, true]).unwrap();
        let new = EvaluatorState { reward_scaler: Some(scaler), ..state };
        let back: EvaluatorState = crate::codec::decode_value(&crate::codec::encode_value(&new).unwrap()).unwrap();
        assert_eq!(back, new);
    }
}
