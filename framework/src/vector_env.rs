//! Many copies of an env stepped together.
//!
//! [`VectorEnv`] keeps every copy's current observation in one contiguous
//! `[num_envs, obs_dim]` buffer that the policy reads directly, resets a copy
//! as soon as its episode ends (keeping the real final observation for
//! bootstrapping) and records each finished episode's return and length.
//! After construction, stepping allocates nothing.

use crate::env::{invalid_action, Env, EnvError, EnvState};
use crate::sample_batch::Column;
use crate::space::{Action, Space};
use serde::{Deserialize, Serialize};

/// Return and length of one finished episode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// Sum of rewards.
    pub episode_return: f64,
    /// Number of steps.
    pub length: u64,
    /// Whether it ended by truncation (time limit) rather than termination.
    pub truncated: bool,
}

/// Per-copy results of one [`VectorEnv::step`], in buffers reused across steps.
#[derive(Clone, Debug, Default)]
pub struct VectorStep {
    /// Rewards, one per copy.
    pub rewards: Vec<f32>,
    /// Terminated flags, one per copy.
    pub terminated: Vec<bool>,
    /// Truncated flags, one per copy.
    pub truncated: Vec<bool>,
    /// The observation each copy reached, `[num_envs, obs_dim]`. For a copy
    /// whose episode ended this is the final observation, not the reset one.
    pub new_obs: Vec<f32>,
}

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
}

/// `num_envs` copies of an env behind one flat observation buffer.
pub struct VectorEnv {
    envs: Vec<Box<dyn Env>>,
    obs_dim: usize,
    obs: Vec<f32>,
    returns: Vec<f64>,
    lengths: Vec<u64>,
    finished: Vec<EpisodeSummary>,
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
        let n = envs.len();
        let obs_dim = obs_space.flat_dim();
        Ok(Self {
            envs,
            obs_dim,
            obs: vec![0.0; n * obs_dim],
            returns: vec![0.0; n],
            lengths: vec![0; n],
            finished: Vec::new(),
        })
    }

    /// Resets every copy; copy `i` is seeded with `seed + i`.
    ///
    /// # Errors
    /// The first copy's reset error.
    pub fn reset(&mut self, seed: u64) -> Result<(), EnvError> {
        for (i, env) in self.envs.iter_mut().enumerate() {
            env.reset(Some(seed.wrapping_add(i as u64)), &mut self.obs[i * self.obs_dim..(i + 1) * self.obs_dim])?;
        }
        self.returns.iter_mut().for_each(|r| *r = 0.0);
        self.lengths.iter_mut().for_each(|l| *l = 0);
        Ok(())
    }

    /// Number of copies.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// Width of one observation row.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The observation space shared by all copies.
    pub fn observation_space(&self) -> &Space {
        self.envs[0].observation_space()
    }

    /// The action space shared by all copies.
    pub fn action_space(&self) -> &Space {
        self.envs[0].action_space()
    }

    /// The name of the env.
    pub fn name(&self) -> &str {
        self.envs[0].name()
    }

    /// Current observations, `[num_envs, obs_dim]`: what the policy acts on next.
    pub fn observations(&self) -> &[f32] {
        &self.obs
    }

    /// Steps every copy with its row of `actions` (`[num_envs, width]`, `i64`
    /// for discrete spaces, `f32` for boxes). Discrete actions are checked
    /// against the space here; box actions only for their width, since
    /// whether an out-of-bounds box action is clipped or rejected is the
    /// env's decision (as in its reference). A copy whose episode ends is
    /// reset at once; its final observation is in `out.new_obs` and its reset
    /// observation in [`observations`](Self::observations).
    ///
    /// # Errors
    /// An action of the wrong kind or outside the action space, or an env error.
    pub fn step(&mut self, actions: &Column, out: &mut VectorStep) -> Result<(), EnvError> {
        let n = self.envs.len();
        if actions.rows() != n {
            return Err(EnvError::BadArgument {
                env: self.name().to_string(),
                message: format!("got {} actions for {n} env copies", actions.rows()),
            });
        }
        out.rewards.resize(n, 0.0);
        out.terminated.resize(n, false);
        out.truncated.resize(n, false);
        out.new_obs.resize(n * self.obs_dim, 0.0);
        let d = self.obs_dim;
        for (i, env) in self.envs.iter_mut().enumerate() {
            let action = match (env.action_space(), actions) {
                (Space::Discrete { .. }, Column::I64 { data, width: 1 }) => Action::Discrete(data[i]),
                (Space::MultiDiscrete { .. }, Column::I64 { data, width }) => {
                    Action::MultiDiscrete(&data[i * width..(i + 1) * width])
                }
                (Space::Box { .. }, Column::F32 { data, width }) => {
                    Action::Continuous(&data[i * width..(i + 1) * width])
                }
                (space, col) => {
                    return Err(EnvError::BadArgument {
                        env: env.name().to_string(),
                        message: format!("actions of kind {} do not fit the action space {space}", col.kind_name()),
                    })
                }
            };
            // Discrete actions out of range are always invalid. Box bounds are
            // the env's to enforce: some references clip (Pendulum's torque),
            // others reject, and the env knows which.
            let invalid = match action {
                Action::Continuous(x) => x.len() != env.action_space().flat_dim(),
                _ => !env.action_space().contains(action),
            };
            if invalid {
                return Err(invalid_action(env.as_ref(), action));
            }
            let new_obs = &mut out.new_obs[i * d..(i + 1) * d];
            let step = env.step(action, new_obs)?;
            out.rewards[i] = step.reward as f32;
            out.terminated[i] = step.terminated;
            out.truncated[i] = step.truncated;
            self.returns[i] += step.reward;
            self.lengths[i] += 1;
            let obs = &mut self.obs[i * d..(i + 1) * d];
            if step.done() {
                self.finished.push(EpisodeSummary {
                    episode_return: self.returns[i],
                    length: self.lengths[i],
                    truncated: !step.terminated,
                });
                self.returns[i] = 0.0;
                self.lengths[i] = 0;
                env.reset(None, obs)?;
            } else {
                obs.copy_from_slice(new_obs);
            }
        }
        Ok(())
    }

    /// Takes the summaries of the episodes that finished since the last call.
    pub fn drain_finished(&mut self) -> Vec<EpisodeSummary> {
        std::mem::take(&mut self.finished)
    }

    /// A snapshot of every copy (see [`Env::save_state`]) with the current
    /// observations and the running returns and lengths of the episodes in
    /// progress, or `None` if any copy cannot snapshot itself.
    pub fn save_state(&self) -> Option<VectorEnvState> {
        let envs = self.envs.iter().map(|e| e.save_state()).collect::<Option<Vec<_>>>()?;
        Some(VectorEnvState {
            envs,
            obs: self.obs.clone(),
            returns: self.returns.clone(),
            lengths: self.lengths.clone(),
            finished: self.finished.clone(),
        })
    }

    /// Restores a snapshot taken by [`save_state`](Self::save_state) on a
    /// vector env built the same way.
    ///
    /// # Errors
    /// If the number of copies or the observation width differ, or a copy
    /// rejects its snapshot.
    pub fn load_state(&mut self, state: &VectorEnvState) -> Result<(), EnvError> {
        let n = self.envs.len();
        if state.envs.len() != n || state.obs.len() != n * self.obs_dim || state.returns.len() != n {
            return Err(EnvError::BadArgument {
                env: self.name().to_string(),
                message: format!(
                    "saved state is for {} env copies with {} observation values; this vector env has {n} copies of width {}",
                    state.envs.len(),
                    state.obs.len(),
                    self.obs_dim
                ),
            });
        }
        for (env, s) in self.envs.iter_mut().zip(&state.envs) {
            env.load_state(s)?;
        }
        self.obs.clone_from(&state.obs);
        self.returns.clone_from(&state.returns);
        self.lengths.clone_from(&state.lengths);
        self.finished.clone_from(&state.finished);
        Ok(())
    }
}
