//! Many copies of an env stepped together.
//!
//! [`VectorEnv`] keeps every copy's current observation in one contiguous
//! `[num_envs, obs_dim]` buffer that the policy reads directly, resets a copy
//! as soon as its episode ends (keeping the real final observation for
//! bootstrapping) and records each finished episode's return and length.
//! After construction, stepping allocates nothing.
//!
//! The copies step one after another in the caller's thread; built with
//! [`VectorEnv::sharded`], in supervised child actors that each own a
//! contiguous range of them ([`crate::env_shards`]); or, for an env whose
//! copies live in other processes (a Gymnasium env stepped by Python),
//! wherever its [`BatchedEnv`] steps them ([`VectorEnv::build`]). Either
//! way the caller sees the same buffers, seeds and episode records.

pub use crate::env::{BatchSettings, BatchedEnv, Current, EpisodeSummary, VectorStep};
use crate::env::{Env, EnvError, EnvMaker, EnvState};
use crate::env_shards::{EnvShardSet, EnvShards};
use crate::sample_batch::Column;
use crate::space::{Action, Space};
use serde::{Deserialize, Serialize};

/// A [`VectorEnv`]'s snapshot, for checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VectorEnvState {
    /// Each copy's [`EnvState`].
    pub envs: Vec<EnvState>,
    /// The observations the policy acts on next.
    pub obs: Vec<f32>,
    /// Return so far of each copy's episode in progress.
    pub returns: Vec<f64>,
    /// Length so far of each copy's episode in progress.
    pub lengths: Vec<u64>,
    /// Finished episodes not yet reported.
    pub finished: Vec<EpisodeSummary>,
    /// The legal actions in `obs`, if the env reports action masks.
    #[serde(default)]
    pub masks: Option<Vec<f32>>,
}

/// The return and length so far of each copy's episode in progress, and
/// the summary of each one that ends: the bookkeeping every way of stepping
/// copies shares (here, a Gymnasium env's worker processes, an external
/// env's clients).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunningEpisodes {
    /// Return so far of each copy's episode.
    pub returns: Vec<f64>,
    /// Steps so far of each copy's episode.
    pub lengths: Vec<u64>,
}

impl RunningEpisodes {
    /// `n` copies, no episode under way.
    pub fn new(n: usize) -> Self {
        Self { returns: vec![0.0; n], lengths: vec![0; n] }
    }

    /// Copies `copies` start new episodes (a reset, or a restart that lost
    /// the episodes they had).
    pub fn start(&mut self, copies: std::ops::Range<usize>) {
        self.returns[copies.clone()].fill(0.0);
        self.lengths[copies].fill(0);
    }

    /// Copy `i` took a step; if it ended the episode, its summary goes to
    /// `finished` and the copy starts the next one.
    pub fn step(
        &mut self,
        i: usize,
        reward: f64,
        terminated: bool,
        truncated: bool,
        finished: &mut Vec<EpisodeSummary>,
    ) {
        self.returns[i] += reward;
        self.lengths[i] += 1;
        if terminated || truncated {
            finished.push(EpisodeSummary {
                episode_return: self.returns[i],
                length: self.lengths[i],
                truncated: !terminated,
                agent: None,
            });
            self.start(i..i + 1);
        }
    }
}

/// `num_envs` copies of an env behind one flat observation buffer.
pub struct VectorEnv {
    copies: Copies,
    name: String,
    obs_space: Space,
    act_space: Space,
    num_envs: usize,
    obs_dim: usize,
    /// The observations the policy acts on next, their masks, and the
    /// episodes not yet drained.
    now: Current,
}

/// Where the copies step.
enum Copies {
    /// In the caller's thread, one after another, with the running return
    /// and length of each copy's episode.
    Here { envs: Vec<Box<dyn Env>>, episodes: RunningEpisodes },
    /// In child actors, each a `Here` vector env over a range of copies.
    Sharded(EnvShardSet),
    /// Wherever the env's own vectorized form steps them.
    Batched(Box<dyn BatchedEnv>),
}

impl VectorEnv {
    /// Builds a vector env from copies that share spaces.
    ///
    /// # Errors
    /// If `envs` is empty or the copies disagree on their spaces.
    pub fn new(envs: Vec<Box<dyn Env>>) -> Result<Self, EnvError> {
        let first = envs.first().ok_or_else(|| EnvError::BadArgument {
            env: "VectorEnv".into(),
            message: "needs at least one env".into(),
        })?;
        let (obs_space, act_space) = (first.observation_space().clone(), first.action_space().clone());
        if let Some(odd) = envs.iter().find(|e| *e.observation_space() != obs_space || *e.action_space() != act_space) {
            return Err(EnvError::BadArgument {
                env: odd.name().to_string(),
                message: "the copies of a vector env must share observation and action spaces".into(),
            });
        }
        let name = first.name().to_string();
        let n = envs.len();
        let copies = Copies::Here { envs, episodes: RunningEpisodes::new(n) };
        Ok(Self::around(copies, name, obs_space, act_space, n))
    }

    /// Builds `num_envs` copies from `make`, split into `shards.num_shards`
    /// contiguous ranges, each stepped by a child actor under a supervisor
    /// with `shards.restart` ([`crate::env_shards`]). Seeds, observations
    /// and episode records are those of [`new`](Self::new) over the same
    /// copies; only where the copies step differs. Needs a multi-threaded
    /// tokio runtime (the actors run on it; stepping blocks the calling
    /// thread in `block_in_place` while they work).
    ///
    /// # Errors
    /// A copy that cannot be built, a shard count outside
    /// `1..=num_envs`, or no multi-threaded runtime.
    pub fn sharded(make: EnvMaker, num_envs: usize, shards: &EnvShards) -> Result<Self, EnvError> {
        let probe = make()?;
        let (name, obs_space, act_space) =
            (probe.name().to_string(), probe.observation_space().clone(), probe.action_space().clone());
        drop(probe);
        let set = EnvShardSet::spawn(make, &name, num_envs, obs_space.flat_dim(), shards)?;
        Ok(Self::around(Copies::Sharded(set), name, obs_space, act_space, num_envs))
    }

    /// `num_envs` copies from `make`, stepped where they step best: the
    /// env's own vectorized form if it has one ([`Env::batched`], e.g. a
    /// Gymnasium env's Python processes, `shards.num_shards` of them);
    /// otherwise in `shards.num_shards` shard actors if `shards` is
    /// enabled and `sample` (an evaluator that samples); otherwise one
    /// after another in the caller's thread.
    ///
    /// # Errors
    /// A copy that cannot be built, or shards that cannot start.
    pub fn build(make: EnvMaker, num_envs: usize, shards: &EnvShards, sample: bool) -> Result<Self, EnvError> {
        let probe = make()?;
        let settings = BatchSettings {
            processes: shards.num_shards.clamp(1, num_envs.max(1)),
            restart: shards.restart,
            step_timeout: std::time::Duration::from_secs_f64(shards.step_timeout_s),
            sampling: sample,
        };
        if let Some(batched) = probe.batched(num_envs, &settings) {
            let (name, obs_space, act_space) =
                (probe.name().to_string(), probe.observation_space().clone(), probe.action_space().clone());
            drop(probe);
            let batched = batched?;
            let rows = batched.num_rows().unwrap_or(num_envs);
            return Ok(Self::around(Copies::Batched(batched), name, obs_space, act_space, rows));
        }
        drop(probe);
        if shards.enabled() && sample {
            Self::sharded(make, num_envs, shards)
        } else {
            Self::new((0..num_envs).map(|_| make()).collect::<Result<Vec<_>, _>>()?)
        }
    }

    fn around(copies: Copies, name: String, obs_space: Space, act_space: Space, n: usize) -> Self {
        let obs_dim = obs_space.flat_dim();
        Self { copies, name, obs_space, act_space, num_envs: n, obs_dim, now: Current::new(n, obs_dim) }
    }

    /// Copy `copy`'s current frame (see [`Env::render_rgb`]): copies that
    /// step in this thread or in the env's own vectorized form draw;
    /// copies in env shard actors do not (`Ok(None)`).
    ///
    /// # Errors
    /// A renderer that fails, or a copy out of range.
    pub fn render_rgb(&mut self, copy: usize) -> Result<Option<crate::video::Frame>, EnvError> {
        match &mut self.copies {
            Copies::Here { envs, .. } => match envs.get_mut(copy) {
                Some(env) => env.render_rgb(),
                None => Err(EnvError::BadArgument {
                    env: self.name.clone(),
                    message: format!("no copy {copy} to draw: {} copies", self.num_envs),
                }),
            },
            Copies::Batched(batched) => batched.render_rgb(copy),
            Copies::Sharded(_) => Ok(None),
        }
    }

    /// Resets every copy; copy `i` is seeded with `seed + i`. If the env
    /// reports action masks, from here on [`action_masks`](Self::action_masks)
    /// holds them.
    ///
    /// # Errors
    /// The first copy's reset error; a mask that does not fit the action
    /// space or leaves no legal action.
    pub fn reset(&mut self, seed: u64) -> Result<(), EnvError> {
        match &mut self.copies {
            Copies::Here { envs, episodes } => {
                for (i, env) in envs.iter_mut().enumerate() {
                    env.reset(
                        Some(seed.wrapping_add(i as u64)),
                        &mut self.now.obs[i * self.obs_dim..(i + 1) * self.obs_dim],
                    )?;
                }
                episodes.start(0..envs.len());
                if envs[0].action_mask().is_some() {
                    let width = crate::env::mask_width(envs[0].as_ref())?;
                    let masks = self.now.masks.get_or_insert_with(Vec::new);
                    masks.resize(envs.len() * width, 1.0);
                    for (env, row) in envs.iter().zip(masks.chunks_exact_mut(width)) {
                        crate::env::read_action_mask(env.as_ref(), row, 0)?;
                    }
                }
                Ok(())
            }
            Copies::Sharded(set) => set.reset(seed, &mut self.now),
            Copies::Batched(batch) => batch.reset(seed, &mut self.now),
        }
    }

    /// The legal actions in [`observations`](Self::observations), `[num_envs,
    /// mask width]` (1.0 legal, 0.0 illegal), if the env reports action
    /// masks ([`Env::action_mask`]).
    pub fn action_masks(&self) -> Option<&[f32]> {
        self.now.masks.as_deref()
    }

    /// Number of copies.
    pub fn num_envs(&self) -> usize {
        self.num_envs
    }

    /// Width of one observation row.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The observation space shared by all copies.
    pub fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    /// The action space shared by all copies.
    pub fn action_space(&self) -> &Space {
        &self.act_space
    }

    /// The name of the env.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Current observations, `[num_envs, obs_dim]`: what the policy acts on next.
    pub fn observations(&self) -> &[f32] {
        &self.now.obs
    }

    /// The shard actors' supervision, if the copies are sharded.
    pub fn shards(&self) -> Option<&EnvShardSet> {
        match &self.copies {
            Copies::Sharded(set) => Some(set),
            Copies::Here { .. } | Copies::Batched(_) => None,
        }
    }

    /// Restarts of shards or of the processes of a [`BatchedEnv`] so far.
    pub fn restarts(&self) -> u64 {
        match &self.copies {
            Copies::Here { .. } => 0,
            Copies::Sharded(set) => set.restarts(),
            Copies::Batched(batch) => batch.restarts(),
        }
    }

    /// Steps every copy with its row of `actions` (`[num_envs, width]`, `i64`
    /// for discrete spaces, `f32` for boxes). Discrete actions are checked
    /// against the space here; box actions only for their width, since
    /// whether an out-of-bounds box action is clipped or rejected is the
    /// env's decision (as in its reference). A copy whose episode ends is
    /// reset at once; its final observation is in `out.new_obs` and its reset
    /// observation in [`observations`](Self::observations). With shards, a
    /// shard restarted since its last step marks its copies in
    /// `out.interrupted` instead of stepping them.
    ///
    /// # Errors
    /// An action of the wrong kind or outside the action space, or an env error.
    pub fn step(&mut self, actions: &Column, out: &mut VectorStep) -> Result<(), EnvError> {
        let n = self.num_envs;
        if actions.rows() != n {
            return Err(EnvError::BadArgument {
                env: self.name.clone(),
                message: format!("got {} actions for {n} env copies", actions.rows()),
            });
        }
        let width = self.now.masks.as_ref().map_or(0, |m| m.len() / n);
        out.resize(n, self.obs_dim, width);
        if let Copies::Batched(_) = self.copies {
            self.check_actions(actions)?;
        }
        let (envs, episodes) = match &mut self.copies {
            Copies::Here { envs, episodes } => (envs, episodes),
            Copies::Sharded(set) => return set.step(actions, out, &mut self.now),
            Copies::Batched(batch) => return batch.step(actions, out, &mut self.now),
        };
        let (d, now) = (self.obs_dim, &mut self.now);
        for (i, env) in envs.iter_mut().enumerate() {
            let action = row_action(&self.name, &self.act_space, actions, i)?;
            let new_obs = &mut out.new_obs[i * d..(i + 1) * d];
            let step = env.step(action, new_obs)?;
            out.rewards[i] = step.reward as f32;
            out.terminated[i] = step.terminated;
            out.truncated[i] = step.truncated;
            let new_mask = &mut out.new_action_mask[i * width..(i + 1) * width];
            if let Some(masks) = &mut now.masks {
                crate::env::read_action_mask(env.as_ref(), new_mask, episodes.lengths[i] + 1)?;
                masks[i * width..(i + 1) * width].copy_from_slice(new_mask);
            }
            episodes.step(i, step.reward, step.terminated, step.truncated, &mut now.finished);
            let obs = &mut now.obs[i * d..(i + 1) * d];
            if step.done() {
                env.reset(None, obs)?;
                if let Some(masks) = &mut now.masks {
                    crate::env::read_action_mask(env.as_ref(), &mut masks[i * width..(i + 1) * width], 0)?;
                }
            } else {
                obs.copy_from_slice(new_obs);
            }
        }
        Ok(())
    }

    /// Checks every row of `actions` against the action space, as the
    /// copies stepped here are checked, for copies stepped elsewhere.
    fn check_actions(&self, actions: &Column) -> Result<(), EnvError> {
        for i in 0..self.num_envs {
            row_action(&self.name, &self.act_space, actions, i)?;
        }
        Ok(())
    }

    /// Takes the summaries of the episodes that finished since the last call.
    pub fn drain_finished(&mut self) -> Vec<EpisodeSummary> {
        std::mem::take(&mut self.now.finished)
    }

    /// A snapshot of every copy (see [`Env::save_state`]) with the current
    /// observations and the running returns and lengths of the episodes in
    /// progress, or `None` if any copy cannot snapshot itself. Sharded or
    /// not, the snapshot has the same form, so either kind restores it.
    pub fn save_state(&self) -> Option<VectorEnvState> {
        let (envs, returns, lengths) = match &self.copies {
            Copies::Here { envs, episodes } => (
                envs.iter().map(|e| e.save_state()).collect::<Option<Vec<_>>>()?,
                episodes.returns.clone(),
                episodes.lengths.clone(),
            ),
            Copies::Sharded(set) => {
                let parts = set.save_states()?;
                let mut whole = (Vec::new(), Vec::new(), Vec::new());
                for part in parts {
                    whole.0.extend(part.envs);
                    whole.1.extend(part.returns);
                    whole.2.extend(part.lengths);
                }
                whole
            }
            // One snapshot of the whole batch, and no episodes of its own to track.
            Copies::Batched(batch) => (vec![batch.save_state()?], vec![0.0; self.num_envs], vec![0; self.num_envs]),
        };
        Some(VectorEnvState {
            envs,
            obs: self.now.obs.clone(),
            returns,
            lengths,
            finished: self.now.finished.clone(),
            masks: self.now.masks.clone(),
        })
    }

    /// Restores a snapshot taken by [`save_state`](Self::save_state) on a
    /// vector env built the same way.
    ///
    /// # Errors
    /// If the number of copies or the observation width differ, or a copy
    /// rejects its snapshot.
    pub fn load_state(&mut self, state: &VectorEnvState) -> Result<(), EnvError> {
        let n = self.num_envs;
        let copies = if matches!(self.copies, Copies::Batched(_)) { 1 } else { n };
        if state.envs.len() != copies
            || state.obs.len() != n * self.obs_dim
            || state.returns.len() != n
            || state.lengths.len() != n
        {
            return Err(EnvError::BadArgument {
                env: self.name.clone(),
                message: format!(
                    "saved state is for {} env copies with {} observation values; this vector env has {n} copies of width {}",
                    state.envs.len(),
                    state.obs.len(),
                    self.obs_dim
                ),
            });
        }
        match &mut self.copies {
            Copies::Here { envs, episodes } => {
                for (env, s) in envs.iter_mut().zip(&state.envs) {
                    env.load_state(s)?;
                }
                episodes.returns.clone_from(&state.returns);
                episodes.lengths.clone_from(&state.lengths);
            }
            Copies::Sharded(set) => set.load_states(state)?,
            Copies::Batched(batch) => batch.load_state(&state.envs[0])?,
        }
        self.now.obs.clone_from(&state.obs);
        self.now.finished.clone_from(&state.finished);
        self.now.masks.clone_from(&state.masks);
        Ok(())
    }
}

/// Row `i` of `actions` as an action of `space` (of the env `name`), if it
/// passes [`accepts`](crate::env::accepts).
///
/// # Errors
/// Actions of the wrong kind for the space, or an action it does not accept.
pub(crate) fn row_action<'a>(name: &str, space: &Space, actions: &'a Column, i: usize) -> Result<Action<'a>, EnvError> {
    let action = match (space, actions) {
        (Space::Discrete { .. }, Column::I64 { data, width: 1 }) => Action::Discrete(data[i]),
        (Space::MultiDiscrete { .. }, Column::I64 { data, width }) => {
            Action::MultiDiscrete(&data[i * width..(i + 1) * width])
        }
        (Space::Box { .. }, Column::F32 { data, width }) => Action::Continuous(&data[i * width..(i + 1) * width]),
        (space, col) => {
            return Err(EnvError::BadArgument {
                env: name.to_string(),
                message: format!("actions of kind {} do not fit the action space {space}", col.kind_name()),
            })
        }
    };
    if crate::env::accepts(space, action) {
        Ok(action)
    } else {
        Err(crate::env::invalid_action_in(name, space, action))
    }
}
