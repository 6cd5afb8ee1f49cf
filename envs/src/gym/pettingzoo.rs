//! Any PettingZoo env by id (`pettingzoo:<id>`), a multi-agent env stepped
//! in Python worker processes.
//!
//! ```text
//! --env pettingzoo:classic/tictactoe-v3        an id of PettingZoo's registry
//! --env pettingzoo:sisl/pursuit-v5             a parallel env (the parallel form is taken where there is one)
//! --env pettingzoo:my_pkg.games:Duel-v0        imports my_pkg.games first, which registers Duel-v0
//! --env pettingzoo:my_pkg.duel                 a module with a parallel_env() or env() function
//! --config '{"env_config": {"max_cycles": 100}}'   keyword arguments of the env's constructor
//! ```
//!
//! Each copy of the env lives in a Python process of its own, running the
//! same shipped module as `gym:` envs (`envs/python/rlx_gym.py`), with
//! PettingZoo installed next to Gymnasium. The env becomes an
//! [`rlx::MultiAgentEnv`] and, through [`rlx::AgentSlots`], a vector env of
//! its agents, so every multi-agent feature works with it: the
//! `multiagent` section's mappings, self-play, per-policy metrics.
//!
//! **Parallel and AEC.** A parallel env steps all its live agents at once.
//! An AEC (turn-based) env steps the agent whose turn it is; the others
//! wait, and the rewards they get meanwhile (a lost game) complete their
//! last move, as for the bundled `TicTacToe`. PettingZoo's dead steps of
//! agents that are done are taken inside the worker.
//!
//! **What it needs of the env.** Every agent of `possible_agents` is in
//! the episode from the reset on, and all share one observation and one
//! action space (rlx builds one network shape per run). Spaces are
//! flattened as for `gym:` envs; an `action_mask` entry of a `Dict`
//! observation (PettingZoo's classic games) masks the actions.
//!
//! **Failures.** A process that raises, exits or hangs (no answer within
//! 60 s) fails the step with [`EnvError::Shards`], as env shards past
//! their budget do: an evaluator actor fails on it and its supervisor
//! restarts it, with a new process, within the evaluators' budget. Python envs take no snapshots: a checkpoint of a run on one
//! resumes its episodes from a reset.

use super::worker::Worker;
use super::{describe, exhausted, id_and_kwargs, other, split, take_obs, Spaces};
use rlx::{Action, AgentSlots, Env, EnvError, EnvSignature, MultiAgentEnv, Space, Step};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The prefix of env names served by PettingZoo.
pub const PREFIX: &str = "pettingzoo:";

/// How long a step of one copy may take before its process is killed.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Makes `pettingzoo:<id>` with `env_config` as the keyword arguments of
/// its constructor: an [`AgentSlots`] over copies of [`PettingZooEnv`].
///
/// # Errors
/// A name without an id, an `env_config` that is not an object, no Python
/// with PettingZoo, or an env rlx does not take (naming why).
pub fn make(name: &str, env_config: &Value) -> Result<Box<dyn Env>, EnvError> {
    let hello = hello(name, env_config)?;
    let name = name.to_string();
    let make: rlx::MultiAgentMaker =
        Arc::new(move || Ok(Box::new(PettingZooEnv::new(&name, hello.clone())?) as Box<dyn MultiAgentEnv>));
    Ok(Box::new(AgentSlots::new(make)?))
}

fn hello(name: &str, env_config: &Value) -> Result<Value, EnvError> {
    let (id, kwargs) = id_and_kwargs(name, PREFIX, "PettingZoo", "pettingzoo:classic/tictactoe-v3", env_config)?;
    Ok(serde_json::json!({"pettingzoo": id, "kwargs": kwargs}))
}

/// One copy of a PettingZoo env in a worker process of its own.
pub struct PettingZooEnv {
    name: String,
    hello: Value,
    signature: EnvSignature,
    spaces: Spaces,
    /// Started on the first reset, unless asking for the spaces started it.
    worker: Option<Worker>,
    /// Per agent: the legal actions in its last observation.
    masks: Vec<Vec<bool>>,
    /// Per agent: whether it acts at the next step.
    acting: Vec<bool>,
    over: bool,
}

impl PettingZooEnv {
    /// The env `name` of `hello`; starts its process now only if no env of
    /// this hello was made before (to learn its agents and spaces).
    fn new(name: &str, hello: Value) -> Result<Self, EnvError> {
        let (signature, spaces, worker) = describe(name, &hello, STEP_TIMEOUT)?;
        if spaces.agents.is_empty() {
            return Err(EnvError::Other { env: name.into(), message: "the worker reported no agents".into() });
        }
        let n = spaces.agents.len();
        Ok(Self {
            name: name.to_string(),
            hello,
            signature,
            spaces,
            worker,
            masks: vec![Vec::new(); n],
            acting: vec![false; n],
            over: true,
        })
    }

    /// Sends a frame, starting the process first if it is not running,
    /// and returns the reply of kind `reply`.
    fn request(&mut self, tag: u8, body: &[u8], reply: u8) -> Result<Vec<u8>, EnvError> {
        if self.worker.is_none() {
            self.worker = Some(Worker::ready(&self.hello, STEP_TIMEOUT).map_err(|e| other(&self.name, e))?);
        }
        let w = self.worker.as_mut().expect("started above");
        let result = w.send(tag, body).and_then(|()| w.receive_reply(reply));
        if result.is_err() {
            // A failed process is gone: the next reset starts another.
            self.worker = None;
            self.over = true;
        }
        // What hosts the env failed, as when env shards give up: an
        // evaluator actor fails on it, so that its supervisor restarts it
        // within its budget, instead of answering the error (which would
        // end the run).
        result.map_err(|e| EnvError::Shards { env: self.name.clone(), reason: e.0 })
    }

    fn malformed(&self, message: String) -> EnvError {
        EnvError::Other { env: self.name.clone(), message }
    }

    /// Reads every agent's observation from the front of `bytes`; returns
    /// the rest.
    fn read_obs<'a>(&self, bytes: &'a [u8], obs: &mut [Vec<f32>]) -> Result<&'a [u8], String> {
        let (n, d) = (self.spaces.agents.len(), self.spaces.obs_dim());
        let mut flat = vec![0.0; n * d];
        let rest = take_obs(bytes, &self.spaces, n, &mut flat)?;
        for (o, row) in obs.iter_mut().zip(flat.chunks_exact(d.max(1))) {
            o.copy_from_slice(row);
        }
        Ok(rest)
    }

    /// Reads every agent's action mask (none if the env has no masks).
    fn read_masks<'a>(&mut self, bytes: &'a [u8]) -> Result<&'a [u8], String> {
        let w = self.spaces.mask_width;
        let (m, rest) = split(bytes, self.spaces.agents.len() * w)?;
        for (mask, row) in self.masks.iter_mut().zip(m.chunks_exact(w.max(1))) {
            mask.clear();
            mask.extend(row.iter().map(|&b| b != 0));
        }
        Ok(rest)
    }

    fn read_acting<'a>(&mut self, bytes: &'a [u8]) -> Result<&'a [u8], String> {
        let (a, rest) = split(bytes, self.spaces.agents.len())?;
        for (acting, &b) in self.acting.iter_mut().zip(a) {
            *acting = b != 0;
        }
        Ok(rest)
    }
}

impl MultiAgentEnv for PettingZooEnv {
    fn name(&self) -> &str {
        &self.name
    }

    fn agent_ids(&self) -> &[String] {
        &self.spaces.agents
    }

    fn observation_space(&self, _: usize) -> &Space {
        &self.signature.observation_space
    }

    fn action_space(&self, _: usize) -> &Space {
        &self.signature.action_space
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [Vec<f32>]) -> Result<(), EnvError> {
        let mut body = seed.unwrap_or(0).to_le_bytes().to_vec();
        body.push(u8::from(seed.is_some()));
        let reply = self.request(b'R', &body, b'O')?;
        let decoded = self
            .read_obs(&reply, obs)
            .and_then(|rest| self.read_masks(rest))
            .and_then(|rest| self.read_acting(rest))
            .and_then(exhausted);
        decoded.map_err(|e| self.malformed(e))?;
        self.over = false;
        Ok(())
    }

    fn step(
        &mut self,
        actions: &[Option<Action<'_>>],
        obs: &mut [Vec<f32>],
        steps: &mut [Step],
    ) -> Result<bool, EnvError> {
        if self.over {
            return Err(EnvError::NeedsReset { env: self.name.clone() });
        }
        let space = &self.signature.action_space;
        let n = self.spaces.agents.len();
        // Every agent's row (zeros for those that do not act), then who acts.
        let row_bytes = match space {
            Space::Discrete { .. } => 8,
            Space::MultiDiscrete { nvec } => 8 * nvec.len(),
            // The bridge describes no Dict actions.
            Space::Box { .. } | Space::Dict { .. } => 4 * space.flat_dim(),
        };
        let mut body = Vec::with_capacity(n * (row_bytes + 1));
        let mut present = vec![0u8; n];
        for (i, acted) in present.iter_mut().enumerate() {
            let Some(a) = actions.get(i).copied().flatten() else {
                body.resize(body.len() + row_bytes, 0);
                continue;
            };
            match (a, space) {
                _ if !rlx::env::accepts(space, a) => return Err(rlx::env::invalid_action_in(&self.name, space, a)),
                (Action::Discrete(x), Space::Discrete { .. }) => body.extend(x.to_le_bytes()),
                (Action::MultiDiscrete(x), Space::MultiDiscrete { .. }) => {
                    body.extend(x.iter().flat_map(|v| v.to_le_bytes()))
                }
                (Action::Continuous(x), Space::Box { .. }) => body.extend(x.iter().flat_map(|v| v.to_le_bytes())),
                _ => return Err(rlx::env::invalid_action_in(&self.name, space, a)),
            }
            *acted = 1;
        }
        body.extend_from_slice(&present);
        let reply = self.request(b'S', &body, b'T')?;
        let mut decode = || -> Result<bool, String> {
            let rest = self.read_obs(&reply, obs)?;
            let (r, rest) = split(rest, 8 * n)?;
            let (term, rest) = split(rest, n)?;
            let (trunc, rest) = split(rest, n)?;
            let rest = self.read_masks(rest)?;
            let rest = self.read_acting(rest)?;
            let (done, rest) = split(rest, 1)?;
            exhausted(rest)?;
            for (i, step) in steps.iter_mut().enumerate().take(n) {
                let reward = f64::from_le_bytes(r[8 * i..8 * i + 8].try_into().expect("8 bytes"));
                *step = Step { reward, terminated: term[i] != 0, truncated: trunc[i] != 0 };
            }
            Ok(done[0] != 0)
        };
        let all_done = decode().map_err(|e| self.malformed(e))?;
        self.over = all_done;
        Ok(all_done)
    }

    fn acting(&self, agent: usize) -> bool {
        self.acting.get(agent).copied().unwrap_or(false)
    }

    fn action_mask(&self, agent: usize) -> Option<&[bool]> {
        (self.spaces.mask_width > 0).then(|| self.masks.get(agent).map(Vec::as_slice)).flatten()
    }
}
