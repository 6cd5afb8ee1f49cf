//! The [`Env`] trait users implement and the [`EnvSignature`] every env
//! keeps (wrappers such as [`TimeLimit`](crate::wrappers::TimeLimit) are in
//! [`crate::wrappers`]).
//!
//! An env writes observations into buffers the caller owns, so stepping never
//! allocates. Episode ends come in two kinds, as in Gymnasium: *terminated*
//! (the MDP reached a terminal state: the value of what follows is zero) and
//! *truncated* (the episode was cut, e.g. by a time limit: the value of the
//! last observation is still worth bootstrapping from). Keeping them apart is
//! what makes GAE correct at time limits.

use crate::sample_batch::Column;
use crate::space::{Action, Space};
use serde::{Deserialize, Serialize};

/// What one step produced besides the observation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Step {
    /// The reward for the transition (f64, as Gymnasium returns Python floats).
    pub reward: f64,
    /// The episode reached a terminal state of the MDP.
    pub terminated: bool,
    /// The episode was cut short (time limit) before reaching a terminal state.
    pub truncated: bool,
}

impl Step {
    /// Whether the episode ended, for either reason.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// Errors an env reports instead of panicking.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EnvError {
    /// The action is not an element of the action space.
    #[error("{env}: action {action} is outside the action space {space}")]
    InvalidAction {
        /// The env's name.
        env: String,
        /// The offending action.
        action: String,
        /// The action space.
        space: String,
    },
    /// `step` was called on an episode that already ended, without `reset`.
    #[error("{env}: step() called after the episode ended; call reset() first")]
    NeedsReset {
        /// The env's name.
        env: String,
    },
    /// No env is registered under this name.
    #[error("unknown env `{name}`{}", suggest(.closest))]
    Unknown {
        /// The requested name.
        name: String,
        /// Registered names close to it, best first.
        closest: Vec<String>,
    },
    /// The env's construction arguments are wrong.
    #[error("{env}: bad argument: {message}")]
    BadArgument {
        /// The env's name.
        env: String,
        /// What is wrong.
        message: String,
    },
    /// The actors an evaluator's env copies were sharded over
    /// ([`crate::env_shards`]) failed past their restart budget, could not
    /// be started, or need a runtime that is not there. An evaluator that
    /// meets this error fails, so that its own supervisor restarts it with
    /// fresh shards (escalation, as in Erlang/OTP).
    #[error("{env}: {reason}")]
    Shards {
        /// The env's name.
        env: String,
        /// What the shards' supervisor reported.
        reason: String,
    },
    /// Anything else the env wants to report.
    #[error("{env}: {message}")]
    Other {
        /// The env's name.
        env: String,
        /// What went wrong.
        message: String,
    },
}

fn suggest(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", closest.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" or "))
    }
}

/// Return and length of one finished episode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// Sum of rewards.
    pub episode_return: f64,
    /// Number of steps.
    pub length: u64,
    /// Whether it ended by truncation (time limit) rather than termination.
    pub truncated: bool,
    /// In a multi-agent env ([`crate::multi_agent::AgentSlots`]), the row
    /// of the agent whose part of the episode this is (`c × agents + i` for
    /// agent `i` of copy `c`); `None` for a whole episode (its return the
    /// sum over the agents).
    #[serde(default)]
    pub agent: Option<u32>,
}

/// Per-copy results of one [`VectorEnv::step`](crate::VectorEnv::step), in buffers reused across steps.
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
    /// Copies whose env shard or process was restarted during this step
    /// (an env panicked, a Python worker died), or that have no episode
    /// (an external env's empty slot): their row is no transition (no
    /// reward, no `new_obs`),
    /// their episode in progress is lost, and they start a new one from the
    /// reset observation in [`VectorEnv::observations`](crate::VectorEnv::observations). Always `false`
    /// for copies that step in the caller's thread.
    pub interrupted: Vec<bool>,
    /// The legal actions in each `new_obs`, `[num_envs, mask width]` (1.0
    /// legal), if the env reports action masks; empty otherwise.
    pub new_action_mask: Vec<f32>,
    /// Copies that did not act in this step: a player of a turn-based
    /// multi-agent env waiting for its turn ([`crate::multi_agent`]). Its
    /// reward, end flags and `new_obs` belong to its last acted step, which
    /// they complete; the row is no transition of its own.
    pub waiting: Vec<bool>,
    /// Copies whose last acted step is not complete yet: the player must
    /// wait for the others before it observes its next position. Always
    /// `false` for single-agent envs.
    pub pending: Vec<bool>,
}

impl VectorStep {
    /// Marks `copies` as interrupted (their env or its process was
    /// restarted): no reward and no end, and as `new_obs` (and new masks)
    /// their fresh start from `obs` (and `masks`), `[num_envs, width]`.
    pub fn interrupt(&mut self, copies: std::ops::Range<usize>, obs: &[f32], masks: Option<&[f32]>) {
        let n = self.rewards.len().max(1);
        let (d, w) = (obs.len() / n, self.new_action_mask.len() / n);
        self.rewards[copies.clone()].fill(0.0);
        self.terminated[copies.clone()].fill(false);
        self.truncated[copies.clone()].fill(false);
        self.interrupted[copies.clone()].fill(true);
        let rows = copies.start * d..copies.end * d;
        self.new_obs[rows.clone()].copy_from_slice(&obs[rows]);
        if let Some(masks) = masks {
            let rows = copies.start * w..copies.end * w;
            self.new_action_mask[rows.clone()].copy_from_slice(&masks[rows]);
        }
    }

    /// Sizes every buffer for `n` copies of width `obs_dim`, with masks
    /// `mask_width` wide (0 without masks).
    pub(crate) fn resize(&mut self, n: usize, obs_dim: usize, mask_width: usize) {
        self.rewards.resize(n, 0.0);
        self.terminated.resize(n, false);
        self.truncated.resize(n, false);
        self.new_obs.resize(n * obs_dim, 0.0);
        self.interrupted.clear();
        self.interrupted.resize(n, false);
        self.waiting.clear();
        self.waiting.resize(n, false);
        self.pending.clear();
        self.pending.resize(n, false);
        self.new_action_mask.resize(n * mask_width, 1.0);
    }
}

/// Where a vector env's copies stand between steps, in buffers reused
/// across steps: what [`BatchedEnv::reset`] and [`BatchedEnv::step`] (and
/// the copies a [`VectorEnv`](crate::VectorEnv) steps itself) write
/// besides a step's [`VectorStep`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Current {
    /// The observation each copy acts on next, `[num_envs, obs_dim]`: for
    /// a copy whose episode just ended, the reset one.
    pub obs: Vec<f32>,
    /// The legal actions in `obs`, `[num_envs, mask width]` (1.0 legal),
    /// once a reset found that the env reports action masks.
    pub masks: Option<Vec<f32>>,
    /// The episodes that finished since the vector env's owner last took
    /// them ([`VectorEnv::drain_finished`](crate::VectorEnv::drain_finished)).
    pub finished: Vec<EpisodeSummary>,
}

impl Current {
    /// `n` copies of width `obs_dim`, without masks or finished episodes.
    pub fn new(n: usize, obs_dim: usize) -> Self {
        Self { obs: vec![0.0; n * obs_dim], masks: None, finished: Vec::new() }
    }

    /// Writes the masks `part` of `copies` (`[copies.len(), width]`) into
    /// `masks`, sized for `n` copies (all legal) by the first part that
    /// comes.
    pub fn adopt_masks(&mut self, copies: std::ops::Range<usize>, part: &[f32], n: usize) {
        let width = part.len() / copies.len().max(1);
        let masks = self.masks.get_or_insert_with(|| vec![1.0; n * width]);
        masks[copies.start * width..copies.end * width].copy_from_slice(part);
    }
}

/// The vectorized form of an env: copies that step together, somewhere
/// other than the caller's thread (for example, Python processes that each
/// host a range of the copies). An env offers one through
/// [`Env::batched`]; [`VectorEnv::build`](crate::VectorEnv::build) uses it.
///
/// It keeps the same contract as the copies a
/// [`VectorEnv`](crate::VectorEnv) steps itself:
/// copy `i` of a reset is seeded `seed + i`, a copy whose episode ends is
/// reset at once (its final observation in `out.new_obs`, its reset one in
/// `now.obs`), finished episodes go to `now.finished`, and a copy whose
/// process failed is restarted and marked in `out.interrupted`, its row no
/// transition.
pub trait BatchedEnv: Send {
    /// Resets every copy, copy `i` with `seed + i`, writing `[num_envs,
    /// obs_dim]` observations into `now.obs` and, if the env reports
    /// action masks, the masks into `now.masks`.
    ///
    /// # Errors
    /// A copy that cannot be reset, past any restart budget.
    fn reset(&mut self, seed: u64, now: &mut Current) -> Result<(), EnvError>;

    /// Steps every copy with its row of `actions` (already checked against
    /// the action space), as [`VectorEnv::step`](crate::VectorEnv::step)
    /// describes.
    ///
    /// # Errors
    /// A failure past the restart budget.
    fn step(&mut self, actions: &Column, out: &mut VectorStep, now: &mut Current) -> Result<(), EnvError>;

    /// Restarts after failures so far (each one's copies lost their
    /// episodes in progress); counted in `result.json` with the env shards'.
    fn restarts(&self) -> u64;

    /// A snapshot of every copy, for checkpoints, or `None` (the default)
    /// where the copies cannot save theirs (other processes).
    fn save_state(&self) -> Option<EnvState> {
        None
    }

    /// Restores what [`save_state`](Self::save_state) saved.
    ///
    /// # Errors
    /// A snapshot of another env or shape; the default refuses every one.
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let _ = state;
        Err(EnvError::Other { env: "batched env".into(), message: "cannot restore a saved state".into() })
    }

    /// Rows per step, when they are not the copies asked for: a
    /// multi-agent env steps one row per agent of each copy
    /// ([`crate::multi_agent::AgentSlots`]). `None` (the default): one row
    /// per copy.
    fn num_rows(&self) -> Option<usize> {
        None
    }

    /// Copy `copy`'s current frame (see [`Env::render_rgb`]), or `Ok(None)`
    /// (the default) if the copies draw none.
    ///
    /// # Errors
    /// A renderer that fails, or a copy out of range.
    fn render_rgb(&mut self, copy: usize) -> Result<Option<crate::video::Frame>, EnvError> {
        let _ = copy;
        Ok(None)
    }
}

/// Where [`Env::batched`] puts its copies: from the `env_shards` config
/// key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchSettings {
    /// Processes (or other workers) to split the copies over, at least one
    /// and at most one per copy (`env_shards.num_shards`).
    pub processes: usize,
    /// How a failed process is restarted (`env_shards.restart`).
    pub restart: crate::restart::RestartPolicy,
    /// A reset or step that takes longer counts as a failure
    /// (`env_shards.step_timeout_s`).
    pub step_timeout: std::time::Duration,
    /// Whether the evaluator samples (the driver's own evaluator does not
    /// when there are workers): an env whose copies are a scarce resource
    /// (a listening port) may give a non-sampling one placeholders.
    pub sampling: bool,
}

/// What an env looks like from outside: its name and its two spaces, the
/// way a function's signature gives its name and the types it takes and
/// returns. An env builds its signature once, in its constructor, and
/// returns it from [`Env::signature`]; [`Env::name`],
/// [`Env::observation_space`] and [`Env::action_space`] read it.
///
/// (Not to be confused with `rlx_envs::EnvSpec`, the registry's entry for
/// an env name, as Gymnasium's `EnvSpec`.)
#[derive(Clone, Debug, PartialEq)]
pub struct EnvSignature {
    /// A short name used in error messages (e.g. `"CartPole-v1"`).
    pub name: String,
    /// The space observations lie in.
    pub observation_space: Space,
    /// The space actions must lie in.
    pub action_space: Space,
}

impl EnvSignature {
    /// The signature of the env `name` with these spaces.
    pub fn new(name: impl Into<String>, observation_space: Space, action_space: Space) -> Self {
        Self { name: name.into(), observation_space, action_space }
    }
}

/// A reinforcement-learning environment.
///
/// Implement this for your own simulator: [`signature`](Env::signature)
/// (the name and spaces, built once), [`reset`](Env::reset) and
/// [`step`](Env::step); the other methods have defaults. `reset` and `step`
/// write the observation as a flat `f32` row of width
/// `observation_space().flat_dim()` into `obs`. To change an existing env
/// (a time limit, stacked frames, ...), wrap it instead: see
/// [`Wrapper`](crate::wrappers::Wrapper).
///
/// # Examples
/// ```
/// use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};
///
/// /// Reach position 3 by stepping right (action 1) or left (action 0).
/// struct Corridor { pos: i64, signature: EnvSignature }
///
/// impl Env for Corridor {
///     fn signature(&self) -> &EnvSignature { &self.signature }
///     fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
///         self.pos = 0;
///         obs[0] = 0.0;
///         Ok(())
///     }
///     fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
///         let Action::Discrete(a @ 0..=1) = action else {
///             return Err(rlx::env::invalid_action(self, action));
///         };
///         self.pos = (self.pos + 2 * a - 1).max(0);
///         obs[0] = self.pos as f32;
///         let terminated = self.pos == 3;
///         Ok(Step { reward: if terminated { 1.0 } else { -0.1 }, terminated, truncated: false })
///     }
/// }
///
/// let observations = Space::uniform_box(0.0, 3.0, vec![1]).unwrap();
/// let mut env = Corridor { pos: 0, signature: EnvSignature::new("Corridor", observations, Space::discrete(2)) };
/// let mut obs = [0.0f32];
/// env.reset(Some(0), &mut obs).unwrap();
/// let step = env.step(Action::Discrete(1), &mut obs).unwrap();
/// assert_eq!(obs[0], 1.0);
/// assert!(!step.done());
/// assert!(env.step(Action::Discrete(5), &mut obs).is_err());
/// ```
pub trait Env: Send {
    /// The env's name and spaces. [`name`](Env::name),
    /// [`observation_space`](Env::observation_space) and
    /// [`action_space`](Env::action_space) read it: implement this one,
    /// not them.
    fn signature(&self) -> &EnvSignature;

    /// A short name used in error messages (e.g. `"CartPole-v1"`): the
    /// [`signature`](Env::signature)'s.
    fn name(&self) -> &str {
        &self.signature().name
    }

    /// The space observations lie in: the [`signature`](Env::signature)'s.
    fn observation_space(&self) -> &Space {
        &self.signature().observation_space
    }

    /// The space actions must lie in: the [`signature`](Env::signature)'s.
    fn action_space(&self) -> &Space {
        &self.signature().action_space
    }

    /// Starts a new episode. `Some(seed)` reseeds the env's random generator
    /// (as Gymnasium's `reset(seed=...)`); `None` continues the current stream.
    ///
    /// # Errors
    /// Whatever the env cannot recover from.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError>;

    /// Applies `action` and writes the next observation into `obs`.
    ///
    /// # Errors
    /// [`EnvError::InvalidAction`] for an action outside the action space
    /// (never a panic). An env clips an out-of-bounds `Box` action only
    /// where its reference implementation does (Pendulum's torque), and
    /// says so in its docs.
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError>;

    /// A snapshot of everything that decides this env's future: its state,
    /// step counters and random generator, encoded with [`encode_state`].
    /// Checkpoints store it so that a restored run continues the episodes in
    /// progress exactly. `None` (the default) means the env cannot snapshot
    /// itself; a restored run then starts fresh episodes and says so.
    fn save_state(&self) -> Option<EnvState> {
        None
    }

    /// Restores a snapshot taken by [`save_state`](Env::save_state) on an env
    /// built the same way.
    ///
    /// # Errors
    /// If the env cannot restore state (the default) or the bytes are not a
    /// snapshot of this env.
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let _ = state;
        Err(EnvError::Other { env: self.name().to_string(), message: "this env cannot restore a saved state".into() })
    }

    /// This env's vectorized form, if it has one: `num_envs` copies that
    /// step together elsewhere, such as a Gymnasium env's copies in Python
    /// processes, as many as `settings` say. [`VectorEnv::build`](crate::VectorEnv::build)
    /// calls it on one copy made by the env maker and uses the answer in
    /// place of `num_envs` separate copies. `None` (the default) means the
    /// copies step one by one; wrappers answer `None`, because the
    /// vectorized form would step the unwrapped env.
    fn batched(&self, num_envs: usize, settings: &BatchSettings) -> Option<Result<Box<dyn BatchedEnv>, EnvError>> {
        let _ = (num_envs, settings);
        None
    }

    /// The current frame as text (e.g. for `rlx rollout --render`), or
    /// `None` (the default) if the env has no text rendering.
    fn render(&self) -> Option<String> {
        None
    }

    /// The current frame as a picture, for videos (`rlx rollout --video`,
    /// `record_video_interval`), or `Ok(None)` (the default) if the env
    /// draws none. Called after `reset` and after each `step` that did not
    /// end the episode. It takes `&mut self` because drawing may ask
    /// another process (a Gymnasium env's `render()`).
    ///
    /// # Errors
    /// A renderer that fails.
    fn render_rgb(&mut self) -> Result<Option<crate::video::Frame>, EnvError> {
        Ok(None)
    }

    /// For a multi-agent env seen as an `Env`
    /// ([`crate::multi_agent::AgentSlots`]): its agent ids, in the order of
    /// the rows of each copy. `None` (the default) for a single-agent env.
    fn agent_ids(&self) -> Option<&[String]> {
        None
    }

    /// For a board game ([`crate::game::GameEnv`] seen through
    /// [`crate::multi_agent::AgentSlots`]): a copy of the game in its
    /// opening position, for a tree search. `None` (the default) for every
    /// other env.
    fn game(&self) -> Option<Box<dyn crate::game::Game>> {
        None
    }

    /// Which actions are legal in the current state, for envs whose legal
    /// actions change (board games, menus, schedulers): one `bool` per
    /// action of a `Discrete` action space, or, for a `MultiDiscrete` one,
    /// one per choice of every element, element after element (the
    /// [`Space::mask_width`] of the action space). `None` (the default)
    /// means every action is legal.
    ///
    /// Called after every `reset` and `step`, so return the mask of the
    /// observation just written. The built-in policies never sample, and
    /// greedy acting and DQN's targets never pick, an action whose entry is
    /// `false`. A mask with no legal action (for a `MultiDiscrete` space:
    /// an element with none) is an error naming the env and the step. The
    /// env still decides what an illegal action does if one arrives (from a
    /// policy of your own that ignores masks): reject it with
    /// [`EnvError::InvalidAction`], or penalize it.
    ///
    /// # Examples
    /// ```
    /// use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};
    ///
    /// /// Count down from 3 to 0 by taking 1 or 2; taking more than is left
    /// /// is illegal.
    /// struct Countdown { left: i64, legal: [bool; 2], signature: EnvSignature }
    ///
    /// impl Countdown {
    ///     fn update(&mut self, obs: &mut [f32]) {
    ///         // Action 0 takes 1, action 1 takes 2.
    ///         self.legal = [self.left >= 1, self.left >= 2];
    ///         obs[0] = self.left as f32;
    ///     }
    /// }
    ///
    /// impl Env for Countdown {
    ///     fn signature(&self) -> &EnvSignature { &self.signature }
    ///     fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
    ///         self.left = 3;
    ///         self.update(obs);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
    ///         let a = match action {
    ///             Action::Discrete(a @ 0..=1) if self.legal[a as usize] => a,
    ///             _ => return Err(rlx::env::invalid_action(self, action)),
    ///         };
    ///         self.left -= a + 1;
    ///         self.update(obs);
    ///         Ok(Step { reward: 1.0, terminated: self.left == 0, truncated: false })
    ///     }
    ///     fn action_mask(&self) -> Option<&[bool]> {
    ///         Some(&self.legal)
    ///     }
    /// }
    ///
    /// let observations = Space::uniform_box(0.0, 3.0, vec![1]).unwrap();
    /// let signature = EnvSignature::new("Countdown", observations, Space::discrete(2));
    /// let mut env = Countdown { left: 0, legal: [false; 2], signature };
    /// let mut obs = [0.0f32];
    /// env.reset(None, &mut obs).unwrap();
    /// env.step(Action::Discrete(1), &mut obs).unwrap();
    /// assert_eq!(env.action_mask(), Some(&[true, false][..]), "one left: only action 0");
    /// ```
    fn action_mask(&self) -> Option<&[bool]> {
        None
    }
}

/// Builds one copy of an env. Whatever runs env copies calls it once per
/// copy, and again for the copies of a restarted evaluator or env shard.
pub type EnvMaker = std::sync::Arc<dyn Fn() -> Result<Box<dyn Env>, EnvError> + Send + Sync>;

/// An env's snapshot: opaque bytes (see [`Env::save_state`]).
pub type EnvState = Vec<u8>;

/// Encodes `state` as an [`EnvState`] (MessagePack).
pub fn encode_state<T: serde::Serialize>(state: &T) -> EnvState {
    rmp_serde::to_vec(state).expect("MessagePack encoding of plain data cannot fail")
}

/// Decodes an [`EnvState`] written by [`encode_state`] for the env `env`.
///
/// # Errors
/// [`EnvError::Other`] naming the env if the bytes do not decode as `T`.
pub fn decode_state<T: serde::de::DeserializeOwned>(env: &str, state: &[u8]) -> Result<T, EnvError> {
    rmp_serde::from_slice(state)
        .map_err(|e| EnvError::Other { env: env.to_string(), message: format!("not a saved state of this env: {e}") })
}

impl<E: Env + ?Sized> Env for Box<E> {
    fn signature(&self) -> &EnvSignature {
        (**self).signature()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        (**self).reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        (**self).step(action, obs)
    }
    fn save_state(&self) -> Option<EnvState> {
        (**self).save_state()
    }
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        (**self).load_state(state)
    }
    fn render(&self) -> Option<String> {
        (**self).render()
    }
    fn render_rgb(&mut self) -> Result<Option<crate::video::Frame>, EnvError> {
        (**self).render_rgb()
    }
    fn batched(&self, num_envs: usize, settings: &BatchSettings) -> Option<Result<Box<dyn BatchedEnv>, EnvError>> {
        (**self).batched(num_envs, settings)
    }
    fn agent_ids(&self) -> Option<&[String]> {
        (**self).agent_ids()
    }
    fn game(&self) -> Option<Box<dyn crate::game::Game>> {
        (**self).game()
    }
    fn action_mask(&self) -> Option<&[bool]> {
        (**self).action_mask()
    }
}

/// The [`EnvError::InvalidAction`] for `action` on `env`.
pub fn invalid_action<E: Env + ?Sized>(env: &E, action: Action<'_>) -> EnvError {
    invalid_action_in(env.name(), env.action_space(), action)
}

/// [`invalid_action`] for the env named `name` with action space `space`.
pub fn invalid_action_in(name: &str, space: &Space, action: Action<'_>) -> EnvError {
    EnvError::InvalidAction { env: name.to_string(), action: action.to_string(), space: space.to_string() }
}

/// Whether `action` passes the check rlx makes before an env steps: a
/// discrete action must lie in `space`, a box action must have its width.
/// Box bounds are the env's to enforce: some references clip (Pendulum's
/// torque), others reject, and the env knows which.
pub fn accepts(space: &Space, action: Action<'_>) -> bool {
    match action {
        Action::Continuous(x) => x.len() == space.flat_dim(),
        _ => space.contains(action),
    }
}

/// The mask width of `env`'s action space.
///
/// # Errors
/// A `Box` action space: continuous actions cannot be masked.
pub fn mask_width(env: &dyn Env) -> Result<usize, EnvError> {
    env.action_space().mask_width().ok_or_else(|| EnvError::BadArgument {
        env: env.name().to_string(),
        message: format!(
            "reports action masks, but its action space {} is continuous; masks need Discrete or MultiDiscrete actions",
            env.action_space()
        ),
    })
}

/// Writes `env`'s current action mask (1.0 legal, 0.0 illegal; all legal
/// if it reports none) into `out` ([`mask_width`] wide), `step` steps into
/// its episode; returns whether the env reported one.
///
/// # Errors
/// A mask of the wrong width, or one that leaves no legal action (for a
/// `MultiDiscrete` space: an element with none), naming the env and step.
pub fn read_action_mask(env: &dyn Env, out: &mut [f32], step: u64) -> Result<bool, EnvError> {
    let Some(mask) = env.action_mask() else {
        out.fill(1.0);
        return Ok(false);
    };
    let bad = |message: String| EnvError::Other { env: env.name().to_string(), message };
    if mask.len() != out.len() {
        return Err(bad(format!(
            "action mask at step {step} has {} entries; the action space {} needs {}",
            mask.len(),
            env.action_space(),
            out.len()
        )));
    }
    let sizes: Vec<usize> = match env.action_space() {
        Space::MultiDiscrete { nvec } => nvec.iter().map(|&n| n as usize).collect(),
        _ => vec![mask.len()],
    };
    let mut start = 0;
    for (element, size) in sizes.into_iter().enumerate() {
        if !mask[start..start + size].iter().any(|&legal| legal) {
            let which =
                if start == 0 && size == mask.len() { String::new() } else { format!(" for element {element}") };
            return Err(bad(format!("action mask at step {step} leaves no legal action{which}")));
        }
        start += size;
    }
    for (o, &legal) in out.iter_mut().zip(mask) {
        *o = if legal { 1.0 } else { 0.0 };
    }
    Ok(true)
}
