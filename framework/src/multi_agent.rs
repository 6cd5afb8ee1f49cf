//! Multi-agent environments and the evaluator that batches them per policy.
//!
//! A [`MultiAgentEnv`] steps several agents at once. Agents are numbered
//! `0..n` in the order of [`MultiAgentEnv::agent_ids`], which names them;
//! observations, actions and per-agent step results are slices indexed that
//! way, so stepping needs no maps and no allocation. An agent can finish
//! before the others (its own `terminated`/`truncated`); the episode ends
//! when the env reports *all done*.
//!
//! A [`PolicyMapping`] assigns each agent id a policy id. The
//! [`MultiAgentEvaluator`] groups the active agents by policy, so each policy
//! computes actions for all of its agents in one batched call, and returns
//! one postprocessed [`SampleBatch`] per policy (RLlib's `MultiAgentBatch`).

use crate::env::{EnvError, Step};
use crate::evaluator::EvaluatorError;
use crate::policy::{LearnerStats, PolicyError, PolicyGraph};
use crate::sample_batch::{fields, Column, SampleBatch};
use crate::space::{Action, Space};
use crate::vector_env::EpisodeSummary;
use std::collections::BTreeMap;
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
}

/// Maps an agent id to the id of the policy that controls it.
pub type PolicyMapping = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// What [`MultiAgentEvaluator::sample`] returns.
#[derive(Debug, Default)]
pub struct MultiAgentRollout {
    /// One postprocessed batch per policy id (policies that acted).
    pub batches: BTreeMap<String, SampleBatch>,
    /// Finished episodes; the return is the sum over all agents.
    pub episodes: Vec<EpisodeSummary>,
    /// Each agent's part of each finished episode: (agent id, its return and length).
    pub agent_episodes: Vec<(String, EpisodeSummary)>,
}

impl MultiAgentRollout {
    /// Total rows over all policies' batches (agent steps).
    pub fn agent_steps(&self) -> usize {
        self.batches.values().map(SampleBatch::len).sum()
    }
}

/// Runs a [`MultiAgentEnv`] with one policy per policy id.
pub struct MultiAgentEvaluator {
    env: Box<dyn MultiAgentEnv>,
    policies: BTreeMap<String, Box<dyn PolicyGraph>>,
    agent_policy: Vec<String>,
    env_steps_per_sample: usize,
    obs: Vec<Vec<f32>>,
    new_obs: Vec<Vec<f32>>,
    steps: Vec<Step>,
    active: Vec<bool>,
    trajectories: Vec<SampleBatch>,
    returns: Vec<f64>,
    lengths: Vec<u64>,
    episode_len: u64,
    episode_truncated: bool,
}

impl MultiAgentEvaluator {
    /// Pairs `env` with `policies`; `mapping` must send every agent to one of
    /// them. Each [`sample`](Self::sample) steps the env `env_steps_per_sample`
    /// times.
    ///
    /// # Errors
    /// An agent mapped to a missing policy, or whose spaces differ from its
    /// policy's, or a failed reset.
    pub fn new(
        mut env: Box<dyn MultiAgentEnv>,
        policies: BTreeMap<String, Box<dyn PolicyGraph>>,
        mapping: PolicyMapping,
        env_steps_per_sample: usize,
        seed: u64,
    ) -> Result<Self, EvaluatorError> {
        let ids = env.agent_ids().to_vec();
        let mut agent_policy = Vec::with_capacity(ids.len());
        for (i, agent) in ids.iter().enumerate() {
            let pid = mapping(agent);
            let policy = policies.get(&pid).ok_or_else(|| {
                EvaluatorError::Config(format!(
                    "agent `{agent}` maps to policy `{pid}`, which does not exist (policies: {})",
                    policies.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            })?;
            for (which, a, b) in [
                ("observation", policy.observation_space(), env.observation_space(i)),
                ("action", policy.action_space(), env.action_space(i)),
            ] {
                if a != b {
                    return Err(EvaluatorError::SpaceMismatch {
                        which,
                        policy: a.to_string(),
                        env: format!("{b} (agent `{agent}`)"),
                    });
                }
            }
            agent_policy.push(pid);
        }
        if env_steps_per_sample == 0 {
            return Err(EvaluatorError::Config("env_steps_per_sample must be at least 1".into()));
        }
        let n = ids.len();
        let mut obs: Vec<Vec<f32>> = (0..n).map(|i| vec![0.0; env.observation_space(i).flat_dim()]).collect();
        env.reset(Some(seed), &mut obs)?;
        Ok(Self {
            new_obs: obs.clone(),
            obs,
            env,
            policies,
            agent_policy,
            env_steps_per_sample,
            steps: vec![Step::default(); n],
            active: vec![true; n],
            trajectories: vec![SampleBatch::new(); n],
            returns: vec![0.0; n],
            lengths: vec![0; n],
            episode_len: 0,
            episode_truncated: false,
        })
    }

    /// The policy with id `id`.
    pub fn policy_mut(&mut self, id: &str) -> Option<&mut (dyn PolicyGraph + 'static)> {
        self.policies.get_mut(id).map(|p| p.as_mut())
    }

    /// Every policy id.
    pub fn policy_ids(&self) -> Vec<String> {
        self.policies.keys().cloned().collect()
    }

    /// Steps the env `env_steps_per_sample` times and returns one
    /// postprocessed batch per policy.
    ///
    /// # Errors
    /// Env, policy or batch errors.
    pub fn sample(&mut self) -> Result<MultiAgentRollout, EvaluatorError> {
        let n = self.obs.len();
        let mut out = MultiAgentRollout::default();
        let mut policy_out: BTreeMap<String, SampleBatch> = BTreeMap::new();
        for _ in 0..self.env_steps_per_sample {
            // One batched compute_actions per policy over its active agents.
            let mut rows: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for i in (0..n).filter(|&i| self.active[i]) {
                rows.entry(self.agent_policy[i].as_str()).or_default().push(i);
            }
            let mut agent_row = vec![(String::new(), 0usize); n];
            for (pid, agents) in &rows {
                let obs: Vec<f32> = agents.iter().flat_map(|&i| self.obs[i].iter().copied()).collect();
                let batch = policy_out.entry(pid.to_string()).or_default();
                self.policies.get_mut(*pid).expect("checked in new()").compute_actions(&obs, true, batch)?;
                for (r, &i) in agents.iter().enumerate() {
                    agent_row[i] = (pid.to_string(), r);
                }
            }
            let actions: Vec<Option<Action<'_>>> = (0..n)
                .map(|i| {
                    if !self.active[i] {
                        return Ok(None);
                    }
                    let (pid, r) = &agent_row[i];
                    match policy_out[pid].get(fields::ACTIONS) {
                        Some(Column::I64 { data, width: 1 }) => Ok(Some(Action::Discrete(data[*r]))),
                        Some(Column::F32 { data, width }) => {
                            Ok(Some(Action::Continuous(&data[r * width..(r + 1) * width])))
                        }
                        _ => Err(PolicyError::Other(format!("policy `{pid}` wrote no usable `actions` column"))),
                    }
                })
                .collect::<Result<_, PolicyError>>()?;
            for (i, a) in actions.iter().enumerate() {
                if let Some(a) = a {
                    if let (Action::Discrete(_), false) = (a, self.env.action_space(i).contains(*a)) {
                        return Err(invalid_action_for(self.env.as_ref(), i, *a).into());
                    }
                }
            }
            let all_done = self.env.step(&actions, &mut self.new_obs, &mut self.steps)?;
            drop(actions);
            self.episode_len += 1;
            let acting: Vec<usize> = (0..n).filter(|&i| self.active[i]).collect();
            for i in acting {
                let (pid, r) = &agent_row[i];
                let step = self.steps[i];
                let mut row = policy_out[pid].gather(&[*r]);
                let d = self.obs[i].len();
                row.insert_f32(fields::OBS, self.obs[i].clone(), d)?;
                row.insert_f32(fields::NEW_OBS, self.new_obs[i].clone(), d)?;
                row.insert_f32(fields::REWARDS, vec![step.reward as f32], 1)?;
                let truncated = step.truncated || (all_done && !step.terminated);
                row.insert_f32(fields::TERMINATEDS, vec![f32::from(u8::from(step.terminated))], 1)?;
                row.insert_f32(fields::TRUNCATEDS, vec![f32::from(u8::from(truncated))], 1)?;
                self.trajectories[i].append(&row)?;
                self.returns[i] += step.reward;
                self.lengths[i] += 1;
                self.obs[i].copy_from_slice(&self.new_obs[i]);
                if step.terminated || truncated {
                    self.finish_trajectory(i, &mut out)?;
                    self.active[i] = false;
                    self.episode_truncated |= truncated;
                    let summary =
                        EpisodeSummary { episode_return: self.returns[i], length: self.lengths[i], truncated };
                    out.agent_episodes.push((self.env.agent_ids()[i].clone(), summary));
                }
            }
            if all_done {
                // Agents that finished earlier (maybe in an earlier call) keep
                // their returns until here.
                let total: f64 = self.returns.iter().sum();
                let truncated = std::mem::take(&mut self.episode_truncated);
                out.episodes.push(EpisodeSummary { episode_return: total, length: self.episode_len, truncated });
                self.env.reset(None, &mut self.obs)?;
                self.active.iter_mut().for_each(|a| *a = true);
                self.returns.iter_mut().for_each(|r| *r = 0.0);
                self.lengths.iter_mut().for_each(|l| *l = 0);
                self.episode_len = 0;
            }
        }
        // Cut the trajectories still running; their policies bootstrap.
        for i in 0..n {
            if !self.trajectories[i].is_empty() {
                self.finish_trajectory(i, &mut out)?;
            }
        }
        Ok(out)
    }

    fn finish_trajectory(&mut self, agent: usize, out: &mut MultiAgentRollout) -> Result<(), EvaluatorError> {
        let pid = &self.agent_policy[agent];
        let mut traj = std::mem::take(&mut self.trajectories[agent]);
        self.policies.get_mut(pid).expect("checked in new()").postprocess_trajectory(&mut traj)?;
        out.batches.entry(pid.clone()).or_default().append(&traj)?;
        Ok(())
    }

    /// Lets every policy learn on its own batch; statistics are namespaced
    /// by policy id (`"p0/policy_loss"`). Fields named in `standardize` are
    /// standardized per policy batch first.
    ///
    /// # Errors
    /// The first policy error.
    pub fn learn(
        &mut self,
        rollout: &mut MultiAgentRollout,
        standardize: &[&str],
    ) -> Result<LearnerStats, EvaluatorError> {
        let mut stats = LearnerStats::default();
        for (pid, batch) in rollout.batches.iter_mut() {
            for f in standardize {
                batch.standardize(f)?;
            }
            let s = self.policies.get_mut(pid).expect("rollouts only name known policies").learn_on_batch(batch)?;
            for (k, v) in s.0 {
                stats.set(&format!("{pid}/{k}"), v);
            }
        }
        Ok(stats)
    }
}

fn invalid_action_for(env: &dyn MultiAgentEnv, agent: usize, action: Action<'_>) -> EnvError {
    EnvError::InvalidAction {
        env: format!("{} (agent `{}`)", env.name(), env.agent_ids()[agent]),
        action: action.to_string(),
        space: env.action_space(agent).to_string(),
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
