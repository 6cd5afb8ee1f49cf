//! Multi-agent environments, stepped by the same machinery as single-agent
//! ones.
//!
//! A [`MultiAgentEnv`] steps several agents at once. Agents are numbered
//! `0..n` in the order of [`MultiAgentEnv::agent_ids`], which names them;
//! observations, actions and per-agent step results are slices indexed that
//! way, so stepping needs no maps and no allocation. An agent can finish
//! before the others (its own `terminated`/`truncated`); the episode ends
//! when the env reports *all done*.
//!
//! [`AgentSlots`] makes a multi-agent env an ordinary [`Env`] whose vector
//! form has one row per agent of each copy: row `c * n + i` is agent `i` of
//! copy `c`. So a multi-agent run samples with a [`crate::PolicyEvaluator`]
//! in the driver, in actors or on nodes, with the same supervision,
//! weights, checkpoints and wire format as any other; a
//! [`crate::multi_policy::MultiPolicy`] acts for each row with the policy
//! its agent maps to and learns per policy (RLlib's `MultiAgentBatch` is a
//! batch with an `agent_index` column here). An agent that finished before
//! the others has no transition in the rows until the episode ends: they
//! are marked as [`VectorStep::interrupted`] rows, which the evaluator
//! leaves out.
use crate::env::{
    decode_state, encode_state, BatchSettings, BatchedEnv, Env, EnvError, EnvMaker, EnvSignature, EnvState, Step,
};
use crate::sample_batch::Column;
use crate::space::{Action, Space};
use crate::vector_env::{Current, EpisodeSummary, VectorStep};
use std::sync::Arc;

/// An environment with several agents acting at once.
pub trait MultiAgentEnv: Send {
    /// A short name for error messages.
    fn name(&self) -> &str;

    /// The agents, in index order.
    fn agent_ids(&self) -> &[String];

    /// Observation space of agent `agent`.
    fn observation_space(&self, agent: usize) -> &Space;

    /// Action space of agent `agent`.
    fn action_space(&self, agent: usize) -> &Space;

    /// Starts an episode, writing every agent's observation into `obs[agent]`.
    ///
    /// # Errors
    /// Whatever the env cannot recover from.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [Vec<f32>]) -> Result<(), EnvError>;

    /// Steps the agents whose action is `Some` (those still in the episode).
    /// Writes their observations into `obs[agent]` and their rewards and
    /// done flags into `steps[agent]`; returns whether the whole episode is
    /// over ("all done").
    ///
    /// # Errors
    /// [`EnvError::InvalidAction`] for an action outside an agent's space.
    fn step(
        &mut self,
        actions: &[Option<Action<'_>>],
        obs: &mut [Vec<f32>],
        steps: &mut [Step],
    ) -> Result<bool, EnvError>;

    /// Whether agent `agent` acts at the next step. A turn-based game
    /// answers `false` for the players waiting for their turn: they get
    /// `None` actions, and what happens to them meanwhile (the reward of a
    /// lost game) completes their last move. Default: every agent acts.
    fn acting(&self, agent: usize) -> bool {
        let _ = agent;
        true
    }

    /// The legal actions of agent `agent` in its current observation (for
    /// a board game: the free cells), or `None` (the default) if all are
    /// always legal. The policies act within them (see
    /// [`Env::action_mask`]).
    fn action_mask(&self, agent: usize) -> Option<&[bool]> {
        let _ = agent;
        None
    }

    /// A snapshot of the episode in progress, for checkpoints that resume
    /// exactly, or `None` (the default) if the env cannot take one.
    fn save_state(&self) -> Option<EnvState> {
        None
    }

    /// Restores what [`save_state`](Self::save_state) saved.
    ///
    /// # Errors
    /// A snapshot of another env; the default refuses every one.
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let _ = state;
        Err(EnvError::Other { env: self.name().into(), message: "cannot restore a saved state".into() })
    }

    /// A board game's position as a [`crate::game::Game`] a tree search can
    /// copy and play forward ([`crate::game::GameEnv`] answers), or `None`
    /// (the default).
    fn game(&self) -> Option<Box<dyn crate::game::Game>> {
        None
    }

    /// The current frame as a picture, or `Ok(None)` (the default): see
    /// [`Env::render_rgb`].
    ///
    /// # Errors
    /// A renderer that fails.
    fn render_rgb(&mut self) -> Result<Option<crate::video::Frame>, EnvError> {
        Ok(None)
    }
}

/// Maps an agent id to the id of the policy that controls it.
pub type PolicyMapping = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Builds a multi-agent env.
pub type MultiAgentMaker = Arc<dyn Fn() -> Result<Box<dyn MultiAgentEnv>, EnvError> + Send + Sync>;

/// A multi-agent env as an [`Env`] whose copies step in its vector form
/// ([`Env::batched`]), one row per agent. The agents must share their
/// observation and action spaces (one network shape serves every policy);
/// stepping it alone, outside a vector env, is an error.
pub struct AgentSlots {
    make: MultiAgentMaker,
    signature: EnvSignature,
    agents: Vec<String>,
}

impl AgentSlots {
    /// The env `make` builds, seen through its agents.
    ///
    /// # Errors
    /// An env that cannot be built, has no agents, or whose agents differ in
    /// their spaces (naming the first that differs).
    pub fn new(make: MultiAgentMaker) -> Result<Self, EnvError> {
        let probe = make()?;
        let agents = probe.agent_ids().to_vec();
        if agents.is_empty() {
            return Err(EnvError::BadArgument { env: probe.name().into(), message: "has no agents".into() });
        }
        let (obs, act) = (probe.observation_space(0).clone(), probe.action_space(0).clone());
        for (i, agent) in agents.iter().enumerate().skip(1) {
            if *probe.observation_space(i) != obs || *probe.action_space(i) != act {
                return Err(EnvError::BadArgument {
                    env: probe.name().into(),
                    message: format!(
                        "agent `{agent}` has spaces {} / {}, agent `{}` {obs} / {act}: \
                         the agents of a multi-agent env must share their spaces",
                        probe.observation_space(i),
                        probe.action_space(i),
                        agents[0]
                    ),
                });
            }
        }
        let signature = EnvSignature::new(probe.name(), obs, act);
        Ok(Self { make, signature, agents })
    }

    /// An [`EnvMaker`] of `AgentSlots` over `make`.
    pub fn maker(make: MultiAgentMaker) -> EnvMaker {
        Arc::new(move || Ok(Box::new(AgentSlots::new(make.clone())?) as Box<dyn Env>))
    }
}

impl Env for AgentSlots {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, _: Option<u64>, _: &mut [f32]) -> Result<(), EnvError> {
        Err(self.only_batched())
    }

    fn step(&mut self, _: Action<'_>, _: &mut [f32]) -> Result<Step, EnvError> {
        Err(self.only_batched())
    }

    fn batched(&self, num_envs: usize, _: &BatchSettings) -> Option<Result<Box<dyn BatchedEnv>, EnvError>> {
        Some(SlotBatch::new(&self.make, num_envs).map(|b| Box::new(b) as Box<dyn BatchedEnv>))
    }

    fn agent_ids(&self) -> Option<&[String]> {
        Some(&self.agents)
    }

    /// The game of a fresh copy, in its opening position.
    fn game(&self) -> Option<Box<dyn crate::game::Game>> {
        let mut game = (self.make)().ok()?.game()?;
        game.reset();
        Some(game)
    }
}

impl AgentSlots {
    fn only_batched(&self) -> EnvError {
        EnvError::BadArgument {
            env: self.signature.name.clone(),
            message: "a multi-agent env steps in a vector env, one row per agent (VectorEnv::build)".into(),
        }
    }
}

/// [`SlotBatch`]'s snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SlotState {
    envs: Vec<EnvState>,
    obs: Vec<Vec<Vec<f32>>>,
    active: Vec<bool>,
    returns: Vec<f64>,
    lengths: Vec<u64>,
    episode_len: Vec<u64>,
    episode_truncated: Vec<bool>,
}

/// The copies of a multi-agent env behind [`AgentSlots`].
struct SlotBatch {
    envs: Vec<Box<dyn MultiAgentEnv>>,
    /// Agents per copy.
    n: usize,
    obs_dim: usize,
    /// Per copy and agent: the observation the env writes.
    obs: Vec<Vec<Vec<f32>>>,
    steps: Vec<Vec<Step>>,
    /// Per row: the agent is still in its copy's episode.
    active: Vec<bool>,
    /// Per row: the agent's return and length so far in this episode.
    returns: Vec<f64>,
    lengths: Vec<u64>,
    /// Per copy: env steps in this episode, and whether an agent was cut by
    /// a time limit.
    episode_len: Vec<u64>,
    episode_truncated: Vec<bool>,
}

impl SlotBatch {
    fn new(make: &MultiAgentMaker, copies: usize) -> Result<Self, EnvError> {
        let envs = (0..copies.max(1)).map(|_| make()).collect::<Result<Vec<_>, _>>()?;
        let n = envs[0].agent_ids().len();
        let obs_dim = envs[0].observation_space(0).flat_dim();
        let rows = envs.len() * n;
        Ok(Self {
            obs: vec![vec![vec![0.0; obs_dim]; n]; envs.len()],
            steps: vec![vec![Step::default(); n]; envs.len()],
            active: vec![true; rows],
            returns: vec![0.0; rows],
            lengths: vec![0; rows],
            episode_len: vec![0; envs.len()],
            episode_truncated: vec![false; envs.len()],
            envs,
            n,
            obs_dim,
        })
    }

    /// Resets copy `c` (seeded if `seed`) and writes its agents' rows of
    /// `now.obs` and, if the env has them, `now.masks`.
    fn reset_copy(&mut self, c: usize, seed: Option<u64>, now: &mut Current) -> Result<(), EnvError> {
        self.envs[c].reset(seed, &mut self.obs[c])?;
        let (n, d) = (self.n, self.obs_dim);
        for (i, o) in self.obs[c].iter().enumerate() {
            let r = c * n + i;
            now.obs[r * d..(r + 1) * d].copy_from_slice(o);
            self.active[r] = true;
            self.returns[r] = 0.0;
            self.lengths[r] = 0;
        }
        self.episode_len[c] = 0;
        self.episode_truncated[c] = false;
        if self.envs[c].action_mask(0).is_some() {
            let width = self.mask_width()?;
            let all = now.masks.get_or_insert_with(|| vec![1.0; self.envs.len() * n * width]);
            for i in 0..n {
                let r = c * n + i;
                self.read_mask(c, i, &mut all[r * width..(r + 1) * width])?;
            }
        }
        Ok(())
    }

    fn mask_width(&self) -> Result<usize, EnvError> {
        self.envs[0].action_space(0).mask_width().ok_or_else(|| EnvError::BadArgument {
            env: self.envs[0].name().into(),
            message: "reports action masks, but its action space is continuous".into(),
        })
    }

    /// Agent `i` of copy `c`'s legal actions into `out` (1.0 legal), all
    /// legal when it has no decision to make (a mask may then be empty).
    fn read_mask(&self, c: usize, i: usize, out: &mut [f32]) -> Result<(), EnvError> {
        let env = &self.envs[c];
        match env.action_mask(i) {
            Some(mask) if mask.len() == out.len() && mask.iter().any(|&m| m) => {
                out.iter_mut().zip(mask).for_each(|(o, &m)| *o = if m { 1.0 } else { 0.0 });
                Ok(())
            }
            Some(mask) if mask.len() != out.len() => Err(EnvError::Other {
                env: env.name().into(),
                message: format!(
                    "agent {i}'s action mask has {} entries, its action space needs {}",
                    mask.len(),
                    out.len()
                ),
            }),
            _ => {
                out.fill(1.0);
                Ok(())
            }
        }
    }
}

impl BatchedEnv for SlotBatch {
    fn reset(&mut self, seed: u64, now: &mut Current) -> Result<(), EnvError> {
        for c in 0..self.envs.len() {
            self.reset_copy(c, Some(seed.wrapping_add(c as u64)), now)?;
        }
        Ok(())
    }

    fn step(&mut self, actions: &Column, out: &mut VectorStep, now: &mut Current) -> Result<(), EnvError> {
        let (n, d) = (self.n, self.obs_dim);
        let width = now.masks.as_ref().map_or(0, |m| m.len() / (self.envs.len() * n).max(1));
        for c in 0..self.envs.len() {
            let env = &mut self.envs[c];
            let (name, space) = (env.name().to_string(), env.action_space(0).clone());
            let acts = (0..n)
                .map(|i| {
                    let r = c * n + i;
                    let acts = self.active[r] && env.acting(i);
                    acts.then(|| crate::vector_env::row_action(&name, &space, actions, r)).transpose()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let all_done = env.step(&acts, &mut self.obs[c], &mut self.steps[c])?;
            self.episode_len[c] += 1;
            for i in 0..n {
                let r = c * n + i;
                let row = r * d..(r + 1) * d;
                out.waiting[r] = false;
                out.pending[r] = false;
                if !self.active[r] {
                    // Out of this episode: no transition until it ends.
                    out.rewards[r] = 0.0;
                    out.terminated[r] = false;
                    out.truncated[r] = false;
                    out.interrupted[r] = true;
                    out.new_obs[row.clone()].copy_from_slice(&now.obs[row]);
                    continue;
                }
                let step = self.steps[c][i];
                // An agent still running when the episode ends is cut, not ended.
                let truncated = step.truncated || (all_done && !step.terminated);
                let done = step.terminated || truncated;
                out.rewards[r] = step.reward as f32;
                out.terminated[r] = step.terminated;
                out.truncated[r] = truncated;
                out.waiting[r] = acts[i].is_none();
                // It moved (or waited) and must wait again before its next decision.
                out.pending[r] = !done && !self.envs[c].acting(i);
                out.new_obs[row.clone()].copy_from_slice(&self.obs[c][i]);
                now.obs[row].copy_from_slice(&self.obs[c][i]);
                if width > 0 {
                    let mask_row = r * width..(r + 1) * width;
                    if done {
                        out.new_action_mask[mask_row].fill(1.0);
                    } else {
                        self.read_mask(c, i, &mut out.new_action_mask[mask_row.clone()])?;
                        if let Some(m) = now.masks.as_mut() {
                            m[mask_row.clone()].copy_from_slice(&out.new_action_mask[mask_row]);
                        }
                    }
                }
                self.returns[r] += step.reward;
                if acts[i].is_some() {
                    self.lengths[r] += 1;
                }
                if done {
                    self.active[r] = false;
                    self.episode_truncated[c] |= truncated;
                    now.finished.push(EpisodeSummary {
                        episode_return: self.returns[r],
                        length: self.lengths[r],
                        truncated: !step.terminated,
                        agent: Some(r as u32),
                    });
                }
            }
            if all_done {
                now.finished.push(EpisodeSummary {
                    episode_return: self.returns[c * n..(c + 1) * n].iter().sum(),
                    length: self.episode_len[c],
                    truncated: self.episode_truncated[c],
                    agent: None,
                });
                self.reset_copy(c, None, now)?;
            }
        }
        Ok(())
    }

    fn restarts(&self) -> u64 {
        0
    }

    fn num_rows(&self) -> Option<usize> {
        Some(self.envs.len() * self.n)
    }

    fn render_rgb(&mut self, copy: usize) -> Result<Option<crate::video::Frame>, EnvError> {
        match self.envs.get_mut(copy) {
            Some(env) => env.render_rgb(),
            None => Err(EnvError::BadArgument {
                env: self.envs[0].name().into(),
                message: format!("no copy {copy} to draw: {} copies", self.envs.len()),
            }),
        }
    }

    fn save_state(&self) -> Option<EnvState> {
        let state = SlotState {
            envs: self.envs.iter().map(|e| e.save_state()).collect::<Option<_>>()?,
            obs: self.obs.clone(),
            active: self.active.clone(),
            returns: self.returns.clone(),
            lengths: self.lengths.clone(),
            episode_len: self.episode_len.clone(),
            episode_truncated: self.episode_truncated.clone(),
        };
        Some(encode_state(&state))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let name = self.envs[0].name().to_string();
        let s: SlotState = decode_state(&name, state)?;
        if s.envs.len() != self.envs.len() || s.active.len() != self.active.len() {
            return Err(EnvError::BadArgument {
                env: name,
                message: format!("saved state is for {} copies, this vector env has {}", s.envs.len(), self.envs.len()),
            });
        }
        for (env, saved) in self.envs.iter_mut().zip(&s.envs) {
            env.load_state(saved)?;
        }
        (self.obs, self.active, self.returns, self.lengths) = (s.obs, s.active, s.returns, s.lengths);
        (self.episode_len, self.episode_truncated) = (s.episode_len, s.episode_truncated);
        Ok(())
    }
}

/// Several copies of a single-agent env as one multi-agent env, each copy an
/// independent agent (`agent_0`, `agent_1`, ...). An agent is done when its
/// copy's episode ends; the episode is all done when every copy is.
pub struct IndependentAgents<E> {
    name: String,
    envs: Vec<E>,
    ids: Vec<String>,
}

impl<E: crate::env::Env> IndependentAgents<E> {
    /// Wraps `envs`, one per agent.
    ///
    /// # Panics
    /// If `envs` is empty.
    pub fn new(name: impl Into<String>, envs: Vec<E>) -> Self {
        assert!(!envs.is_empty(), "at least one agent");
        let ids = (0..envs.len()).map(|i| format!("agent_{i}")).collect();
        Self { name: name.into(), envs, ids }
    }
}

impl<E: crate::env::Env> MultiAgentEnv for IndependentAgents<E> {
    fn name(&self) -> &str {
        &self.name
    }
    fn agent_ids(&self) -> &[String] {
        &self.ids
    }
    fn observation_space(&self, agent: usize) -> &Space {
        self.envs[agent].observation_space()
    }
    fn action_space(&self, agent: usize) -> &Space {
        self.envs[agent].action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [Vec<f32>]) -> Result<(), EnvError> {
        for (i, (env, o)) in self.envs.iter_mut().zip(obs).enumerate() {
            env.reset(seed.map(|s| s.wrapping_add(i as u64)), o)?;
        }
        Ok(())
    }
    fn save_state(&self) -> Option<EnvState> {
        let copies: Vec<EnvState> = self.envs.iter().map(|e| e.save_state()).collect::<Option<_>>()?;
        Some(encode_state(&copies))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let copies: Vec<EnvState> = decode_state(&self.name, state)?;
        if copies.len() != self.envs.len() {
            return Err(EnvError::BadArgument {
                env: self.name.clone(),
                message: format!("saved state has {} agents, this env {}", copies.len(), self.envs.len()),
            });
        }
        self.envs.iter_mut().zip(&copies).try_for_each(|(env, s)| env.load_state(s))
    }

    fn step(
        &mut self,
        actions: &[Option<Action<'_>>],
        obs: &mut [Vec<f32>],
        steps: &mut [Step],
    ) -> Result<bool, EnvError> {
        let mut all_done = true;
        for (i, env) in self.envs.iter_mut().enumerate() {
            match actions[i] {
                // Each copy checks its own action (`Env::step` returns
                // `InvalidAction`), as in a `VectorEnv`.
                Some(a) => {
                    steps[i] = env.step(a, &mut obs[i])?;
                    all_done &= steps[i].done();
                }
                None => steps[i] = Step::default(),
            }
        }
        Ok(all_done)
    }
}
