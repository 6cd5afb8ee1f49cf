//! Any Gymnasium env by id (`gym:<id>`), stepped in Python worker
//! processes.
//!
//! ```text
//! --env gym:LunarLander-v3                    a registered id
//! --env gym:ALE/Breakout-v5                   Atari, DeepMind preprocessing on
//! --env gym:my_pkg.envs:Maze-v0               imports my_pkg.envs first
//! --config '{"env_config": {"continuous": true}}'   keyword arguments of gymnasium.make
//! ```
//!
//! **Processes, not the GIL.** Each evaluator's copies live in
//! `env_shards.num_shards` Python processes (at least one), each hosting a
//! contiguous range of them and stepping them all per request, so one
//! round trip carries a whole range's step. The processes run
//! `envs/python/rlx_gym.py`, which ships inside rlx and needs only
//! `gymnasium` and `numpy`; observations and actions cross the pipe as raw
//! little-endian arrays (images as bytes). The interpreter is
//! `$RLX_PYTHON` if set, else `python3`. For `ALE/` ids a process hosts
//! its copies in ale-py's C++ vector env by default
//! ([`AtariPreprocessing::vectorized`]), which steps them on threads.
//!
//! **Supervision.** A process that raises, exits or does not answer within
//! `env_shards.step_timeout_s` is killed and replaced within
//! `env_shards.restart`'s budget (one for one): its copies' episodes in
//! progress are dropped, their rows of that step are marked interrupted
//! (no transition reaches a batch), and each restart is counted in
//! `result.json`'s learner stats as `env_shard_restarts`. Past the budget the step
//! fails with the Python traceback.
//!
//! **Spaces.** `Box` (float or `uint8`), `Discrete` (one-hot),
//! `MultiBinary`, and `Tuple`/`Dict` of them observations; `Discrete`,
//! `MultiDiscrete` and float `Box` actions. A `uint8` image observation
//! arrives as bytes and becomes `f32` in [0, 1]. A `Dict` or `Tuple` of
//! two or more leaves (one stays a flat `Box`) becomes a [`Space::Dict`]
//! of its leaves, named by their dotted paths
//! (`camera`, `goal.position`, `0`), each `Discrete` one-hot and each
//! `uint8` `Box` in [0, 1] (channels last), so that image entries get
//! their own convolutions and stay bytes; a top-level `action_mask`
//! entry becomes the action mask instead. Anything else is an error
//! naming the space.

pub mod pettingzoo;
#[doc(hidden)]
pub mod testing;
mod worker;

use rlx::env::invalid_action;
use rlx::restart::{FailureWindow, RestartPolicy};
use rlx::sample_batch::Column;
use rlx::vector_env::{BatchSettings, Current, RunningEpisodes, VectorStep};
use rlx::{Action, BatchedEnv, Dtype, Env, EnvError, EnvSignature, Space, Step};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub use worker::MODULE_SOURCE;
use worker::{Worker, WorkerError};

/// The step timeout of a [`GymEnv`] on its own (outside a vector env,
/// which takes `env_shards.step_timeout_s`).
const SINGLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The prefix of env names served by Gymnasium.
pub const PREFIX: &str = "gym:";

/// DeepMind's Atari preprocessing (Mnih et al., Nature 2015), the
/// `atari` key of a `gym:ALE/...` env's `env_config`: on by default for
/// `ALE/` ids (`"atari": false` turns it off), with these defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AtariPreprocessing {
    /// At most this many no-op actions after a reset.
    pub noop_max: u32,
    /// Frames per step (the max of the last two is observed).
    pub frame_skip: u32,
    /// Side of the square grayscale frame.
    pub screen_size: u32,
    /// Frames stacked into one observation (channels last).
    pub frame_stack: u32,
    /// A lost life ends the episode, and the next one starts from the
    /// observation it ended on, in the same game, unless the game is over
    /// (RLlib's and SB3's wrappers take one no-op step in between).
    pub terminal_on_life_loss: bool,
    /// Rewards become their sign.
    pub clip_rewards: bool,
    /// A worker process hosts its copies in one ale-py vector env
    /// (`ale_py.vector_env.AtariVectorEnv`: the copies step on C++ threads
    /// and the preprocessing runs in C++) instead of stepping one
    /// Gymnasium env per copy in Python. Both play the same episodes from
    /// the same seeds, except for the no-ops after a reset (each draws
    /// them from its own generator) and, for half of all seeds, the sticky
    /// actions (the vector env takes no negative emulator seed). `false`
    /// makes each copy with `gymnasium.make`, which takes any `env_config`
    /// key.
    pub vectorized: bool,
    /// The vector env's threads per worker process; 0 is one per copy, up
    /// to the process's cores.
    pub num_threads: u32,
}

impl Default for AtariPreprocessing {
    fn default() -> Self {
        Self {
            noop_max: 30,
            frame_skip: 4,
            screen_size: 84,
            frame_stack: 4,
            terminal_on_life_loss: true,
            clip_rewards: true,
            vectorized: true,
            num_threads: 0,
        }
    }
}

/// A Gymnasium env as rlx makes it: the id, the keyword arguments of
/// `gymnasium.make`, and the Atari preprocessing, if any.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GymSpec {
    /// The id without `gym:`, e.g. `"CartPole-v1"` or `"my_pkg.envs:Maze-v0"`.
    pub id: String,
    /// Keyword arguments of `gymnasium.make`.
    pub kwargs: Map<String, Value>,
    /// DeepMind's preprocessing, for Atari.
    pub atari: Option<AtariPreprocessing>,
}

impl GymSpec {
    /// Parses `gym:<id>` with its `env_config` (a JSON object or null).
    /// Every key but `atari` is a keyword argument of `gymnasium.make`.
    ///
    /// # Errors
    /// [`EnvError::BadArgument`] for a name without an id, an
    /// `env_config` that is not an object, or a bad `atari` value.
    pub fn parse(name: &str, env_config: &Value) -> Result<Self, EnvError> {
        let bad = |message: String| EnvError::BadArgument { env: name.to_string(), message };
        let (id, mut kwargs) = id_and_kwargs(name, PREFIX, "Gymnasium", "gym:LunarLander-v3", env_config)?;
        let atari = match kwargs.remove("atari") {
            None => id.starts_with("ALE/").then(AtariPreprocessing::default),
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(AtariPreprocessing::default()),
            Some(v) => Some(serde_json::from_value(v).map_err(|e| bad(format!("env_config.atari: {e}")))?),
        };
        if let Some(a) = &atari {
            if a.frame_skip == 0 || a.screen_size == 0 || a.frame_stack == 0 {
                return Err(bad("env_config.atari: frame_skip, screen_size and frame_stack must be >= 1".into()));
            }
        }
        Ok(Self { id: id.to_string(), kwargs, atari })
    }

    /// The name rlx shows: `gym:<id>`.
    pub fn name(&self) -> String {
        format!("{PREFIX}{}", self.id)
    }

    /// The hello that asks a worker process for `copies` copies.
    fn hello(&self, copies: usize) -> Value {
        serde_json::json!({"id": self.id, "kwargs": self.kwargs, "copies": copies, "atari": self.atari})
    }
}

/// The id after `prefix` in `name` and `env_config` as keyword arguments
/// (null for none), for the Python envs' names (`gym:`, `pettingzoo:`);
/// `library` and `example` word the error for a name without an id.
///
/// # Errors
/// [`EnvError::BadArgument`] for a name without an id or an `env_config`
/// that is not an object.
fn id_and_kwargs<'a>(
    name: &'a str,
    prefix: &str,
    library: &str,
    example: &str,
    env_config: &Value,
) -> Result<(&'a str, Map<String, Value>), EnvError> {
    let bad = |message: String| EnvError::BadArgument { env: name.to_string(), message };
    let id = name.strip_prefix(prefix).ok_or_else(|| bad(format!("not a `{prefix}<id>` name")))?;
    if id.is_empty() || id.ends_with(':') {
        return Err(bad(format!("no {library} id after `{prefix}` (e.g. `{example}`)")));
    }
    let kwargs = match env_config {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        other => return Err(bad(format!("env_config must be an object of keyword arguments, not {other}"))),
    };
    Ok((id, kwargs))
}

/// One leaf of a `Dict` or `Tuple` observation, as the worker describes it.
#[derive(Clone, Debug, Default, Deserialize)]
struct Entry {
    name: String,
    #[serde(flatten)]
    bounds: Bounds,
    /// A `uint8` box, written as `b / 255`.
    uint8: bool,
}

/// What a worker process reports about its env in its hello.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Spaces {
    observation: Bounds,
    obs_bytes: bool,
    /// A `Dict`'s or `Tuple`'s leaves (none for other spaces).
    #[serde(default)]
    entries: Vec<Entry>,
    action: ActionSpace,
    mask_width: usize,
    reward_threshold: Option<f64>,
    /// A PettingZoo env's agents (none for a Gymnasium env).
    #[serde(default)]
    agents: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Bounds {
    low: Vec<Option<f64>>,
    high: Vec<Option<f64>>,
    shape: Vec<usize>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ActionSpace {
    Discrete(i64),
    MultiDiscrete(Vec<i64>),
    Box(Bounds),
}

impl Default for ActionSpace {
    fn default() -> Self {
        ActionSpace::Discrete(1)
    }
}

impl Bounds {
    fn space(&self) -> Result<Space, String> {
        let side = |v: &[Option<f64>], inf: f32| v.iter().map(|x| x.map_or(inf, |x| x as f32)).collect();
        Space::bounded(side(&self.low, f32::NEG_INFINITY), side(&self.high, f32::INFINITY), self.shape.clone())
            .map_err(|e| e.to_string())
    }
}

impl Spaces {
    fn signature(&self, name: &str) -> Result<EnvSignature, EnvError> {
        let bad = |message: String| EnvError::Other { env: name.to_string(), message };
        let mut observation = self.observation.space().map_err(|e| bad(format!("observation space: {e}")))?;
        if !self.entries.is_empty() {
            let entries = self
                .entries
                .iter()
                .map(|e| {
                    let space = e.bounds.space().map_err(|m| bad(format!("observation entry `{}`: {m}", e.name)))?;
                    Ok((e.name.clone(), if e.uint8 { space.with_dtype(Dtype::U8) } else { space }))
                })
                .collect::<Result<Vec<_>, EnvError>>()?;
            observation = Space::dict(entries).map_err(|e| bad(format!("observation space: {e}")))?;
            if observation.flat_dim() != self.obs_dim() {
                return Err(bad(format!(
                    "the observation's entries hold {} values, its rows {}",
                    observation.flat_dim(),
                    self.obs_dim()
                )));
            }
        }
        if self.obs_bytes {
            // Bytes arrive scaled to [0, 1] (`take_obs`) and say so.
            observation = observation.with_dtype(Dtype::U8);
        }
        let action = match &self.action {
            ActionSpace::Discrete(n) => Space::discrete(*n),
            ActionSpace::MultiDiscrete(nvec) => Space::MultiDiscrete { nvec: nvec.clone() },
            ActionSpace::Box(b) => b.space().map_err(|e| bad(format!("action space: {e}")))?,
        };
        Ok(EnvSignature::new(name, observation, action))
    }

    fn obs_dim(&self) -> usize {
        self.observation.shape.iter().product()
    }
}

/// Signatures already asked of a worker, by spec and interpreter, so that
/// making more copies of an env does not start a process just to learn
/// its spaces.
fn known(key: &str) -> Option<(EnvSignature, Spaces)> {
    KNOWN.lock().ok()?.as_ref()?.get(key).cloned()
}

static KNOWN: Mutex<Option<HashMap<String, (EnvSignature, Spaces)>>> = Mutex::new(None);

fn remember(key: String, value: (EnvSignature, Spaces)) {
    if let Ok(mut map) = KNOWN.lock() {
        map.get_or_insert_with(HashMap::new).insert(key, value);
    }
}

/// The signature and spaces of the env a worker given `hello` hosts: those
/// already asked of a worker for this hello and interpreter, or a new
/// worker's answer, with that worker (started, so keep it).
///
/// # Errors
/// A worker that cannot start or reports spaces rlx does not take.
fn describe(name: &str, hello: &Value, timeout: Duration) -> Result<(EnvSignature, Spaces, Option<Worker>), EnvError> {
    let key = format!("{hello}|{}", worker::interpreter().display());
    if let Some((signature, spaces)) = known(&key) {
        return Ok((signature, spaces, None));
    }
    let w = Worker::ready(hello, timeout).map_err(|e| other(name, e))?;
    let signature = w.spaces.signature(name)?;
    remember(key, (signature.clone(), w.spaces.clone()));
    Ok((signature, w.spaces.clone(), Some(w)))
}

/// The reward threshold Gymnasium registers for `gym:<id>` (its
/// `spec.reward_threshold`), asking a worker process if no env of this
/// spec was made yet.
///
/// # Errors
/// As [`make`].
pub fn reward_threshold(name: &str, env_config: &Value) -> Result<Option<f64>, EnvError> {
    let env = GymEnv::new(GymSpec::parse(name, env_config)?)?;
    Ok(env.spaces.reward_threshold)
}

/// Makes `gym:<id>` with `env_config` as the keyword arguments of
/// `gymnasium.make` (see [`GymSpec::parse`]).
///
/// # Errors
/// A bad name or `env_config`, no Python with Gymnasium, or an env whose
/// spaces rlx does not take, with the Python traceback if there is one.
pub fn make(name: &str, env_config: &Value) -> Result<Box<dyn Env>, EnvError> {
    Ok(Box::new(GymEnv::new(GymSpec::parse(name, env_config)?)?))
}

/// One copy of a Gymnasium env in a worker process of its own: what
/// [`make`] returns. Many copies step together through
/// [`Env::batched`], which [`rlx::VectorEnv::build`] uses.
pub struct GymEnv {
    spec: Arc<GymSpec>,
    signature: EnvSignature,
    spaces: Spaces,
    /// Started on the first reset, unless asking for the spaces started it.
    worker: Option<Worker>,
    /// The legal actions in the last observation, if the env has masks.
    mask: Vec<bool>,
    /// The reset Gymnasium did when the last episode ended: the next
    /// unseeded `reset` returns it without a round trip.
    pending: Option<(Vec<f32>, Vec<bool>)>,
    done: bool,
}

impl GymEnv {
    /// The env of `spec`; starts a worker process now only if no env of
    /// this spec was made before (to learn its spaces).
    ///
    /// # Errors
    /// As [`make`].
    pub fn new(spec: GymSpec) -> Result<Self, EnvError> {
        let (signature, spaces, worker) = describe(&spec.name(), &spec.hello(1), SINGLE_TIMEOUT)?;
        Ok(Self { spec: Arc::new(spec), signature, spaces, worker, mask: Vec::new(), pending: None, done: true })
    }

    /// Sends a request with `send`, starting the worker process first if
    /// it is not running yet, and returns the reply of kind `tag`.
    fn request(
        &mut self,
        tag: u8,
        send: impl FnOnce(&mut Worker) -> Result<(), WorkerError>,
    ) -> Result<Vec<u8>, EnvError> {
        let name = &self.signature.name;
        if self.worker.is_none() {
            self.worker = Some(Worker::ready(&self.spec.hello(1), SINGLE_TIMEOUT).map_err(|e| other(name, e))?);
        }
        let w = self.worker.as_mut().expect("started above");
        send(w).and_then(|()| w.receive_reply(tag)).map_err(|e| other(name, e))
    }

    fn malformed(&self, message: String) -> EnvError {
        EnvError::Other { env: self.signature.name.clone(), message }
    }
}

fn other(name: &str, e: WorkerError) -> EnvError {
    EnvError::Other { env: name.to_string(), message: e.0 }
}

impl Env for GymEnv {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let (None, Some((row, mask))) = (seed, self.pending.take()) {
            obs.copy_from_slice(&row);
            self.mask = mask;
            self.done = false;
            return Ok(());
        }
        let reply = self.request(b'O', |w| w.send_reset(&[seed]))?;
        let mut masks = Vec::new();
        decode_reset(&reply, &self.spaces, 1, obs, &mut masks).map_err(|e| self.malformed(e))?;
        self.mask = masks.iter().map(|&m| m > 0.5).collect();
        self.pending = None;
        self.done = false;
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let column = match (action, self.action_space()) {
            (Action::Discrete(a), Space::Discrete { .. }) => Column::I64 { data: vec![a], width: 1 },
            (Action::MultiDiscrete(a), Space::MultiDiscrete { .. }) => Column::I64 { data: a.to_vec(), width: a.len() },
            (Action::Continuous(a), Space::Box { .. }) => Column::F32 { data: a.to_vec(), width: a.len() },
            _ => return Err(invalid_action(self, action)),
        };
        if !rlx::env::accepts(self.action_space(), action) {
            return Err(invalid_action(self, action));
        }
        if self.done {
            return Err(EnvError::NeedsReset { env: self.signature.name.clone() });
        }
        let reply = self.request(b'T', |w| w.send_step(&column, 0..1))?;
        let step = StepReply::decode(&reply, &self.spaces, 1).map_err(|e| self.malformed(e))?;
        obs.copy_from_slice(&step.new_obs);
        self.mask = step.masks.iter().map(|&m| m > 0.5).collect();
        let (terminated, truncated) = (step.terminated[0], step.truncated[0]);
        if terminated || truncated {
            self.done = true;
            self.pending = Some((step.reset_obs, step.reset_masks.iter().map(|&m| m > 0.5).collect()));
        }
        Ok(Step { reward: step.rewards[0], terminated, truncated })
    }

    fn action_mask(&self) -> Option<&[bool]> {
        (self.spaces.mask_width > 0).then_some(&self.mask[..])
    }

    /// Gymnasium's `render()` in `rgb_array` mode.
    fn render_rgb(&mut self) -> Result<Option<rlx::video::Frame>, EnvError> {
        let reply = self.request(b'F', |w| w.send_render(0))?;
        worker::decode_frame(&reply).map(Some).map_err(|e| self.malformed(e))
    }

    fn batched(&self, num_envs: usize, settings: &BatchSettings) -> Option<Result<Box<dyn BatchedEnv>, EnvError>> {
        Some(GymBatch::spawn(self, num_envs, settings).map(|b| Box::new(b) as Box<dyn BatchedEnv>))
    }
}

/// Reads `n` observation rows (f32, or bytes scaled to [0, 1]) from the
/// front of `bytes` into `out`; returns the rest.
fn take_obs<'a>(bytes: &'a [u8], spaces: &Spaces, n: usize, out: &mut [f32]) -> Result<&'a [u8], String> {
    let values = n * spaces.obs_dim();
    let size = if spaces.obs_bytes { 1 } else { 4 };
    let (head, rest) = split(bytes, values * size)?;
    if spaces.obs_bytes {
        for (o, &b) in out[..values].iter_mut().zip(head) {
            *o = rlx::space::from_byte(b);
        }
    } else {
        for (o, b) in out[..values].iter_mut().zip(head.chunks_exact(4)) {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    Ok(rest)
}

fn split(bytes: &[u8], at: usize) -> Result<(&[u8], &[u8]), String> {
    if bytes.len() < at {
        return Err(format!("the Python worker sent a reply {} bytes short", at - bytes.len()));
    }
    Ok(bytes.split_at(at))
}

/// Reads the reply to a reset of `n` copies into `obs` and, if the env
/// has masks, `masks` (resized to `n * mask_width`).
fn decode_reset(bytes: &[u8], spaces: &Spaces, n: usize, obs: &mut [f32], masks: &mut Vec<f32>) -> Result<(), String> {
    let rest = take_obs(bytes, spaces, n, obs)?;
    let (m, rest) = split(rest, n * spaces.mask_width)?;
    masks.clear();
    masks.extend(m.iter().map(|&b| f32::from(u8::from(b != 0))));
    exhausted(rest)
}

/// Nothing is left of a reply once it is read.
fn exhausted(rest: &[u8]) -> Result<(), String> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!("the Python worker sent {} bytes too many", rest.len()))
    }
}

/// A step reply of `n` copies, decoded.
struct StepReply {
    new_obs: Vec<f32>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    masks: Vec<f32>,
    /// The reset observations of the copies whose episode ended, in order.
    reset_obs: Vec<f32>,
    reset_masks: Vec<f32>,
}

impl StepReply {
    fn decode(bytes: &[u8], spaces: &Spaces, n: usize) -> Result<Self, String> {
        let d = spaces.obs_dim();
        let w = spaces.mask_width;
        let mut new_obs = vec![0.0; n * d];
        let rest = take_obs(bytes, spaces, n, &mut new_obs)?;
        let (r, rest) = split(rest, 8 * n)?;
        let rewards: Vec<f64> = r.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
        let (term, rest) = split(rest, n)?;
        let (trunc, rest) = split(rest, n)?;
        let flag = |b: &[u8]| b.iter().map(|&x| x != 0).collect::<Vec<_>>();
        let (terminated, truncated) = (flag(term), flag(trunc));
        let (m, rest) = split(rest, n * w)?;
        let masks = m.iter().map(|&b| f32::from(u8::from(b != 0))).collect();
        let ended = terminated.iter().zip(&truncated).filter(|(a, b)| **a || **b).count();
        let mut reset_obs = vec![0.0; ended * d];
        let rest = take_obs(rest, spaces, ended, &mut reset_obs)?;
        let (m, rest) = split(rest, ended * w)?;
        let reset_masks = m.iter().map(|&b| f32::from(u8::from(b != 0))).collect();
        exhausted(rest)?;
        Ok(Self { new_obs, rewards, terminated, truncated, masks, reset_obs, reset_masks })
    }
}

/// Many copies of a Gymnasium env in `env_shards.num_shards` (at least
/// one) worker processes, each a contiguous range of the copies: the
/// vectorized form of [`GymEnv`], supervised as the module docs describe.
pub struct GymBatch {
    spec: Arc<GymSpec>,
    name: String,
    spaces: Spaces,
    workers: Vec<Worker>,
    ranges: Vec<Range<usize>>,
    policy: RestartPolicy,
    failures: FailureWindow,
    timeout: Duration,
    restarts: u64,
    seed: u64,
    episodes: RunningEpisodes,
}

impl GymBatch {
    fn spawn(env: &GymEnv, num_envs: usize, settings: &BatchSettings) -> Result<Self, EnvError> {
        let name = env.signature.name.clone();
        // The driver's own evaluator of a run with workers never samples:
        // one process holds its copies.
        let k = if settings.sampling { settings.processes.clamp(1, num_envs.max(1)) } else { 1 };
        let ranges: Vec<Range<usize>> = (0..k).map(|s| s * num_envs / k..(s + 1) * num_envs / k).collect();
        let timeout = settings.step_timeout;
        // Start every process before waiting for any: they import
        // Gymnasium in parallel.
        let mut workers = ranges
            .iter()
            .map(|r| Worker::start(&env.spec.hello(r.len()), timeout))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| other(&name, e))?;
        for w in &mut workers {
            w.wait_ready().map_err(|e| other(&name, e))?;
        }
        Ok(Self {
            spec: env.spec.clone(),
            name,
            spaces: env.spaces.clone(),
            workers,
            ranges,
            policy: settings.restart,
            failures: FailureWindow::new(settings.restart),
            timeout,
            restarts: 0,
            seed: 0,
            episodes: RunningEpisodes::new(num_envs),
        })
    }

    fn rows(&self, i: usize) -> Range<usize> {
        let d = self.spaces.obs_dim();
        self.ranges[i].start * d..self.ranges[i].end * d
    }

    /// Sends worker `i` a reset of its copies, its `j`-th seeded `first + j`.
    fn send_reset(&mut self, i: usize, first: u64) -> Result<(), WorkerError> {
        let seeds: Vec<Option<u64>> = (0..self.ranges[i].len() as u64).map(|j| Some(first.wrapping_add(j))).collect();
        self.workers[i].send_reset(&seeds)
    }

    /// Reads worker `i`'s answer to a reset into `now.obs` and
    /// `now.masks`; its copies start new episodes.
    fn receive_reset(&mut self, i: usize, now: &mut Current) -> Result<(), WorkerError> {
        let copies = self.ranges[i].clone();
        let reply = self.workers[i].receive_reply(b'O')?;
        let mut part = Vec::new();
        decode_reset(&reply, &self.spaces, copies.len(), &mut now.obs[self.rows(i)], &mut part).map_err(WorkerError)?;
        if self.spaces.mask_width > 0 {
            now.adopt_masks(copies.clone(), &part, self.episodes.returns.len());
        }
        self.episodes.start(copies);
        Ok(())
    }

    /// Replaces worker `i` after `error`, within the restart budget, and
    /// resets its copies with a seed no earlier process used.
    fn replace(&mut self, i: usize, mut error: WorkerError, now: &mut Current) -> Result<(), EnvError> {
        loop {
            self.restarts += 1;
            if let Err(count) = self.failures.record() {
                return Err(EnvError::Shards {
                    env: self.name.clone(),
                    reason: format!(
                        "this evaluator's Python worker processes failed {count} times within {} s, past env_shards.restart.max_restarts = {}; the last failure (the process of env copies {:?}): {}",
                        self.policy.window_s, self.policy.max_restarts, self.ranges[i], error.0
                    ),
                });
            }
            tracing::warn!(env = %self.name, copies = ?self.ranges[i], error = %error.0, "Python env worker failed; restarting it; its copies' episodes in progress are lost");
            let seed =
                self.seed.wrapping_add(self.ranges[i].start as u64).wrapping_add(self.restarts.wrapping_mul(1_000_003));
            match Worker::ready(&self.spec.hello(self.ranges[i].len()), self.timeout) {
                Ok(w) => self.workers[i] = w,
                Err(e) => {
                    error = e;
                    continue;
                }
            }
            match self.send_reset(i, seed).and_then(|()| self.receive_reset(i, now)) {
                Ok(()) => return Ok(()),
                Err(e) => error = e,
            }
        }
    }
}

impl BatchedEnv for GymBatch {
    fn reset(&mut self, seed: u64, now: &mut Current) -> Result<(), EnvError> {
        self.seed = seed;
        // Every process resets at once: send to all, then read from all.
        let mut failed = Vec::new();
        for i in 0..self.workers.len() {
            if let Err(e) = self.send_reset(i, seed.wrapping_add(self.ranges[i].start as u64)) {
                failed.push((i, e));
            }
        }
        for i in 0..self.workers.len() {
            if failed.iter().any(|(j, _)| *j == i) {
                continue;
            }
            if let Err(e) = self.receive_reset(i, now) {
                failed.push((i, e));
            }
        }
        for (i, e) in failed {
            self.replace(i, e, now)?;
        }
        Ok(())
    }

    fn step(&mut self, actions: &Column, out: &mut VectorStep, now: &mut Current) -> Result<(), EnvError> {
        let mut failed: Vec<(usize, WorkerError)> = Vec::new();
        for (i, w) in self.workers.iter_mut().enumerate() {
            if let Err(e) = w.send_step(actions, self.ranges[i].clone()) {
                failed.push((i, e));
            }
        }
        let (d, w) = (self.spaces.obs_dim(), self.spaces.mask_width);
        for i in 0..self.workers.len() {
            if failed.iter().any(|(j, _)| *j == i) {
                continue;
            }
            let copies = self.ranges[i].clone();
            let reply = self.workers[i]
                .receive_reply(b'T')
                .and_then(|bytes| StepReply::decode(&bytes, &self.spaces, copies.len()).map_err(WorkerError));
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    failed.push((i, e));
                    continue;
                }
            };
            let mut ended = 0;
            for (j, c) in copies.enumerate() {
                let (term, trunc) = (reply.terminated[j], reply.truncated[j]);
                out.rewards[c] = reply.rewards[j] as f32;
                out.terminated[c] = term;
                out.truncated[c] = trunc;
                out.new_obs[c * d..(c + 1) * d].copy_from_slice(&reply.new_obs[j * d..(j + 1) * d]);
                out.new_action_mask[c * w..(c + 1) * w].copy_from_slice(&reply.masks[j * w..(j + 1) * w]);
                self.episodes.step(c, reply.rewards[j], term, trunc, &mut now.finished);
                let (row, mask) = if term || trunc {
                    ended += 1;
                    let k = ended - 1;
                    (&reply.reset_obs[k * d..(k + 1) * d], &reply.reset_masks[k * w..(k + 1) * w])
                } else {
                    (&reply.new_obs[j * d..(j + 1) * d], &reply.masks[j * w..(j + 1) * w])
                };
                now.obs[c * d..(c + 1) * d].copy_from_slice(row);
                if let Some(masks) = now.masks.as_mut() {
                    masks[c * w..(c + 1) * w].copy_from_slice(mask);
                }
            }
        }
        for (i, e) in failed {
            self.replace(i, e, now)?;
            out.interrupt(self.ranges[i].clone(), &now.obs, now.masks.as_deref());
        }
        Ok(())
    }

    fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Gymnasium's `render()` of copy `copy`, in `rgb_array` mode.
    fn render_rgb(&mut self, copy: usize) -> Result<Option<rlx::video::Frame>, EnvError> {
        let other = |message: String| EnvError::Other { env: self.name.clone(), message };
        let Some(i) = self.ranges.iter().position(|r| r.contains(&copy)) else {
            return Err(other(format!("no copy {copy} to draw")));
        };
        let local = copy - self.ranges[i].start;
        let reply = self.workers[i]
            .send_render(local)
            .and_then(|()| self.workers[i].receive_reply(b'F'))
            .map_err(|e| other(e.0))?;
        worker::decode_frame(&reply).map(Some).map_err(other)
    }
}
