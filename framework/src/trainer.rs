//! [`Trainer`]: runs an optimizer iteration by iteration and turns what each
//! step did into a [`TrainResult`]; [`StopCriteria`] says when to stop.

use crate::evaluation::{ArenaRecord, Evaluation};
use crate::evaluator::{EvaluatorError, EvaluatorState};
use crate::evaluator_set::Evaluators;
use crate::metrics::{EpisodeWindow, TrainResult};
use crate::off_policy_estimation::OffPolicyEstimation;
use crate::optimizer::{OptimizerError, PolicyOptimizer};
use crate::policy::FlatWeights;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Stop when any given metric reaches its value (`>=`), as `rllib train --stop`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopCriteria {
    /// Mean return over the last 100 episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode_reward_mean: Option<f64>,
    /// Env steps sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timesteps_total: Option<u64>,
    /// Iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_iteration: Option<u64>,
    /// Wall-clock seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_total_s: Option<f64>,
    /// Mean return of the last evaluation (see [`crate::evaluation`]),
    /// checked after each iteration that evaluates.
    #[serde(default, rename = "evaluation/episode_reward_mean", skip_serializing_if = "Option::is_none")]
    pub evaluation_reward_mean: Option<f64>,
}

impl StopCriteria {
    /// Whether `result` meets any criterion.
    pub fn should_stop(&self, result: &TrainResult) -> bool {
        let reached = |goal: Option<f64>, value: Option<f64>| matches!((goal, value), (Some(g), Some(v)) if v >= g);
        reached(self.episode_reward_mean, result.episode_reward_mean)
            || reached(self.timesteps_total.map(|v| v as f64), Some(result.timesteps_total as f64))
            || reached(self.training_iteration.map(|v| v as f64), Some(result.training_iteration as f64))
            || reached(self.time_total_s, Some(result.time_total_s))
            || reached(self.evaluation_reward_mean, result.evaluation.as_ref().map(|e| e.episode_reward_mean))
    }

    /// Whether no criterion is set (the run would never stop by itself).
    pub fn is_empty(&self) -> bool {
        *self == StopCriteria::default()
    }
}

/// Owns the evaluators, drives a [`PolicyOptimizer`] over them, and keeps
/// run-level counters.
pub struct Trainer {
    evaluators: Evaluators,
    optimizer: Box<dyn PolicyOptimizer>,
    window: EpisodeWindow,
    last: TrainResult,
    /// The episodes that finished in the last iteration.
    last_episodes: Vec<crate::vector_env::EpisodeSummary>,
    started: Option<Instant>,
    /// Seconds trained before a restore, added to `time_total_s`.
    time_before_s: f64,
    /// Evaluation during training, if configured.
    evaluation: Option<Evaluation>,
    /// Off-policy estimates with each evaluation, if configured.
    off_policy_estimation: Option<OffPolicyEstimation>,
    /// A multi-agent run's agents, for per-agent and per-policy returns.
    agents: Option<Agents>,
}

/// A multi-agent run's agents and policies, each with the window of its
/// own episodes.
struct Agents {
    ids: Vec<String>,
    /// Row `r` of an evaluator's vector env is acted for by
    /// `row_policy[r % row_policy.len()]`.
    row_policy: Vec<String>,
    /// The learning policy of a zero-sum game, whose win rates are reported.
    learner: Option<String>,
    windows: Vec<EpisodeWindow>,
    policy_windows: BTreeMap<String, EpisodeWindow>,
}

/// Everything about a run a checkpoint stores besides the learner's
/// weights: the trainer's counters and episode window, and each
/// evaluator's snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The last iteration's result (the counters continue from it).
    pub last: TrainResult,
    /// The episodes behind the smoothed return statistics.
    pub window: Option<EpisodeWindow>,
    /// One snapshot per reachable evaluator, the local one (index 0) first.
    pub evaluators: Vec<EvaluatorState>,
    /// What this state lacks for an exact resume, in words (empty: nothing).
    pub gaps: Vec<String>,
    /// A multi-agent run's per-agent episode windows, in agent order.
    #[serde(default)]
    pub agent_windows: Vec<EpisodeWindow>,
    /// A multi-agent run's per-policy episode windows.
    #[serde(default)]
    pub policy_windows: BTreeMap<String, EpisodeWindow>,
}

impl Trainer {
    /// A trainer running `optimizer` over `evaluators`, with the
    /// 100-episode return window.
    pub fn new(evaluators: Evaluators, optimizer: Box<dyn PolicyOptimizer>) -> Self {
        Self {
            evaluators,
            optimizer,
            window: EpisodeWindow::new(100),
            last: TrainResult::default(),
            last_episodes: Vec::new(),
            started: None,
            time_before_s: 0.0,
            evaluation: None,
            off_policy_estimation: None,
            agents: None,
        }
    }

    /// Reports a multi-agent run's returns per agent and per policy:
    /// `agent_ids` name the agents of each env copy, in row order, and row
    /// `r` of an evaluator's vector env is acted for by policy
    /// `row_policy[r % row_policy.len()]`. The episodes that finish are
    /// then each agent's, tagged with its row (counted in its agent's and
    /// its policy's windows), and the whole env's (counted in
    /// `episode_reward_mean`, as a sum over the agents), told apart by
    /// [`EpisodeSummary::agent`](crate::EpisodeSummary). With a `learner`
    /// (self-play in a zero-sum game), its win rate against each other
    /// policy is reported too.
    pub fn with_agents(mut self, agent_ids: Vec<String>, row_policy: Vec<String>, learner: Option<String>) -> Self {
        let windows = agent_ids.iter().map(|_| EpisodeWindow::new(100)).collect();
        let policy_windows = row_policy.iter().map(|p| (p.clone(), EpisodeWindow::new(100))).collect();
        self.agents = Some(Agents { ids: agent_ids, row_policy, learner, windows, policy_windows });
        self
    }

    /// Wraps the optimizer, e.g. in a step that does more after each
    /// iteration (self-play's snapshots).
    pub fn wrap_optimizer(mut self, wrap: impl FnOnce(Box<dyn PolicyOptimizer>) -> Box<dyn PolicyOptimizer>) -> Self {
        self.optimizer = wrap(self.optimizer);
        self
    }

    /// Evaluates during training with `evaluation` (see
    /// [`crate::evaluation`]).
    pub fn with_evaluation(mut self, evaluation: Evaluation) -> Self {
        self.evaluation = Some(evaluation);
        self
    }

    /// Estimates the learner's return off-policy, from `input`'s episodes,
    /// with each evaluation (see [`crate::off_policy_estimation`]).
    pub fn with_off_policy_estimation(mut self, estimation: OffPolicyEstimation) -> Self {
        self.off_policy_estimation = Some(estimation);
        self
    }

    /// The evaluation, if configured.
    pub fn evaluation(&self) -> Option<&Evaluation> {
        self.evaluation.as_ref()
    }

    /// The evaluation, mutably (e.g. to say where its videos go:
    /// [`Evaluation::record_videos_into`]).
    pub fn evaluation_mut(&mut self) -> Option<&mut Evaluation> {
        self.evaluation.as_mut()
    }

    /// The last iteration's result (all zeros before the first).
    pub fn last_result(&self) -> &TrainResult {
        &self.last
    }

    /// The episodes that finished during the last iteration (for a driver
    /// of several trainers, such as population-based training, to report).
    pub fn last_episodes(&self) -> &[crate::vector_env::EpisodeSummary] {
        &self.last_episodes
    }

    /// Snapshots the run for a checkpoint: counters, episode window and
    /// every evaluator. Call it between iterations.
    ///
    /// # Errors
    /// An evaluator that cannot be reached.
    pub async fn save_state(&mut self) -> Result<RunState, OptimizerError> {
        let evaluators = &self.evaluators;
        let mut states = vec![evaluators.local_handle().save_state().await?];
        // A worker busy with a request in flight (an asynchronous optimizer)
        // answers once it has served it.
        for w in evaluators.workers() {
            states.push(w.save_state().await?);
        }
        Ok(self.run_state(states, Vec::new()))
    }

    /// [`save_state`](Self::save_state) after an iteration failed with
    /// `failure`, so that the finished iterations can be resumed: an
    /// evaluator that does not answer within 10 s, or answers with an
    /// error, is left out (a restore starts it afresh), and the gaps say
    /// what the snapshot is, so that it is never taken for an exact resume.
    ///
    /// # Errors
    /// None today; the signature matches [`save_state`](Self::save_state).
    pub async fn save_state_after_failure(&mut self, failure: &str) -> Result<RunState, OptimizerError> {
        let mut gaps = vec![format!(
            "taken after iteration {} when the next one failed ({failure}): the counters are iteration {}'s, \
             while the evaluators' episodes in progress (and an asynchronous learner's updates) may be the failed \
             iteration's",
            self.last.training_iteration + 1,
            self.last.training_iteration
        )];
        let mut states = Vec::new();
        let evaluators = &self.evaluators;
        let local = evaluators.local_handle();
        let handles = std::iter::once(&local).chain(evaluators.workers());
        for handle in handles {
            match tokio::time::timeout(std::time::Duration::from_secs(10), handle.save_state()).await {
                Ok(Ok(state)) => states.push(state),
                Ok(Err(e)) => {
                    gaps.push(format!("evaluator {} was not saved ({e}): a restore starts it afresh", handle.index()))
                }
                Err(_) => gaps.push(format!(
                    "evaluator {} did not answer within 10 s: a restore starts it afresh",
                    handle.index()
                )),
            }
        }
        Ok(self.run_state(states, gaps))
    }

    /// The run's state around the evaluators' `states`, with `gaps` and
    /// theirs.
    fn run_state(&self, states: Vec<EvaluatorState>, mut gaps: Vec<String>) -> RunState {
        gaps.extend(states.iter().flat_map(EvaluatorState::gaps));
        gaps.extend(self.optimizer.checkpoint_gaps());
        let (agent_windows, policy_windows) =
            self.agents.as_ref().map_or_else(Default::default, |a| (a.windows.clone(), a.policy_windows.clone()));
        RunState {
            last: self.last.clone(),
            window: Some(self.window.clone()),
            evaluators: states,
            gaps,
            agent_windows,
            policy_windows,
        }
    }

    /// Restores a [`RunState`] (the learner's weights are restored
    /// separately, see [`crate::checkpoint`]): counters continue from the
    /// saved iteration, and each saved evaluator present in this run gets
    /// its snapshot back. Returns what could not be restored exactly, in
    /// words.
    ///
    /// # Errors
    /// An evaluator that rejects its snapshot or cannot be reached.
    pub async fn load_state(&mut self, state: &RunState) -> Result<Vec<String>, OptimizerError> {
        let mut gaps = state.gaps.clone();
        let evaluators = &self.evaluators;
        for saved in &state.evaluators {
            if saved.index == 0 {
                evaluators.local_handle().load_state(Arc::new(saved.clone())).await?;
            } else if let Some(w) = evaluators.workers().iter().find(|w| w.index() == saved.index) {
                w.load_state(Arc::new(saved.clone())).await?;
            } else {
                gaps.push(format!(
                    "evaluator {} of the checkpoint is not in this run; its state is dropped",
                    saved.index
                ));
            }
        }
        let saved_workers = state.evaluators.iter().filter(|e| e.index > 0).count();
        let now_workers = evaluators.workers().len();
        if now_workers > saved_workers {
            gaps.push(format!(
                "this run has {now_workers} evaluators, the checkpoint {saved_workers}; the new ones start fresh"
            ));
        }
        self.last = state.last.clone();
        if let Some(w) = &state.window {
            self.window = w.clone();
        }
        if let Some(agents) = &mut self.agents {
            let same_policies = state.policy_windows.keys().eq(agents.policy_windows.keys());
            if state.agent_windows.len() == agents.windows.len() && same_policies {
                agents.windows = state.agent_windows.clone();
                agents.policy_windows = state.policy_windows.clone();
            } else {
                gaps.push(
                    "the checkpoint has no episode windows for these agents and policies; they start empty".into(),
                );
            }
        }
        self.time_before_s = state.last.time_total_s;
        self.started = None;
        Ok(gaps)
    }

    /// Ends the run's `output`: every evaluator that writes episodes
    /// writes the ones still running and finishes its file (see
    /// [`PolicyEvaluator::finish_output`](crate::PolicyEvaluator::finish_output)).
    /// Call it once, when the run ends.
    ///
    /// # Errors
    /// The first evaluator that could not finish (the others still do).
    pub async fn finish_output(&mut self) -> Result<(), OptimizerError> {
        let workers = self.evaluators.workers().to_vec();
        let results = futures::future::join_all(workers.iter().map(|w| w.finish_output())).await;
        let local = self.evaluators.local().finish_output();
        for r in results {
            r?;
        }
        Ok(local?)
    }

    /// Runs one iteration (one optimizer step) and reports it.
    ///
    /// # Errors
    /// The optimizer's error (e.g. an evaluator past its restart budget).
    pub async fn train(&mut self) -> Result<TrainResult, OptimizerError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let t0 = Instant::now();
        let iteration = self.last.training_iteration + 1;
        let (mut step, evaluation) = match self.evaluation.as_ref().filter(|e| e.due(iteration)) {
            // Evaluator actors play on the weights the iteration starts
            // with while it trains (polled first, so their requests are
            // sent before the optimizer's work blocks this task).
            Some(eval) if eval.in_parallel() => {
                let (weights, filter) = self.learner_snapshot();
                let (evaluation, step) =
                    futures::join!(eval.run(iteration, weights, filter), self.optimizer.step(&mut self.evaluators));
                (step?, Some(evaluation?))
            }
            Some(eval) => {
                let step = self.optimizer.step(&mut self.evaluators).await?;
                let (weights, filter) = self.learner_snapshot();
                (step, Some(eval.run(iteration, weights, filter).await?))
            }
            None => (self.optimizer.step(&mut self.evaluators).await?, None),
        };
        let evaluation = evaluation.or_else(|| self.optimizer.take_evaluation());
        let off_policy_estimation = match (&mut self.off_policy_estimation, &evaluation) {
            (Some(ope), Some(_)) => {
                let mut local = self.evaluators.local_mut();
                let policy = local.policy_mut();
                ope.run(policy).map_err(|e| {
                    OptimizerError::Learner(EvaluatorError::Experience(format!("off-policy estimates: {e}")))
                })?
            }
            _ => BTreeMap::new(),
        };
        let dt = t0.elapsed().as_secs_f64();
        let env_shard_restarts = self.evaluators.num_env_shard_restarts();
        if env_shard_restarts > 0 {
            step.learner.set("env_shard_restarts", env_shard_restarts as f64);
        }
        self.window.extend(step.episodes.iter().filter(|e| e.agent.is_none()).copied());
        let ([policy_reward_mean, agent_reward_mean], self_play) = self.agent_returns(&step.episodes);
        let whole_episodes = step.episodes.iter().filter(|e| e.agent.is_none()).count() as u64;
        let prev = &self.last;
        let result = TrainResult {
            training_iteration: prev.training_iteration + 1,
            timesteps_total: prev.timesteps_total + step.steps_sampled,
            timesteps_this_iter: step.steps_sampled,
            num_env_steps_trained: prev.num_env_steps_trained + step.steps_trained,
            episodes_total: prev.episodes_total + whole_episodes,
            episodes_this_iter: whole_episodes,
            episode_reward_mean: self.window.mean_return(),
            episode_reward_min: self.window.min_return(),
            episode_reward_max: self.window.max_return(),
            episode_len_mean: self.window.mean_length(),
            time_this_iter_s: dt,
            time_total_s: self.time_before_s + started.elapsed().as_secs_f64(),
            env_steps_per_s: step.steps_sampled as f64 / dt.max(1e-9),
            num_evaluator_restarts: self.evaluators.num_restarts()
                + self.evaluation.as_ref().map_or(0, Evaluation::num_restarts),
            evaluator_failures: self.evaluators.failures(),
            cluster: self.evaluators.cluster(),
            learner: step.learner,
            evaluation,
            policy_reward_mean,
            agent_reward_mean,
            self_play,
            off_policy_estimation,
        };
        self.last = result.clone();
        self.last_episodes = step.episodes;
        Ok(result)
    }

    /// Adds the agents' episodes to their agents' and policies' windows;
    /// returns the mean return per policy and per agent, and the learner's
    /// record against each opponent.
    fn agent_returns(
        &mut self,
        episodes: &[crate::vector_env::EpisodeSummary],
    ) -> ([BTreeMap<String, Option<f64>>; 2], BTreeMap<String, ArenaRecord>) {
        let Some(a) = &mut self.agents else { return Default::default() };
        for e in episodes {
            let Some(row) = e.agent.map(|r| r as usize) else { continue };
            a.windows[row % a.ids.len()].extend([*e]);
            if let Some(w) = a.policy_windows.get_mut(&a.row_policy[row % a.row_policy.len()]) {
                w.extend([*e]);
            }
        }
        let per_agent = a.ids.iter().cloned().zip(a.windows.iter().map(EpisodeWindow::mean_return)).collect();
        let per_policy = a.policy_windows.iter().map(|(p, w)| (p.clone(), w.mean_return())).collect();
        let records = match &a.learner {
            None => BTreeMap::new(),
            Some(learner) => a
                .policy_windows
                .iter()
                .filter(|(p, _)| *p != learner)
                .map(|(p, w)| (p.clone(), ArenaRecord::from_opponent_returns(w.returns())))
                .collect(),
        };
        ([per_policy, per_agent], records)
    }

    /// The learner's weights and observation-filter statistics, for an
    /// evaluation.
    fn learner_snapshot(&self) -> (Arc<FlatWeights>, Option<Arc<crate::filter::RunningStat>>) {
        let local = self.evaluators.local();
        let filter = local.observation_filter().map(|f| Arc::new(f.global().clone()));
        (Arc::new(local.policy().get_weights()), filter)
    }

    /// Replaces the learner's weights everywhere they live: on every
    /// evaluator, then wherever the optimizer keeps them (see
    /// [`PolicyOptimizer::weights_restored`]).
    ///
    /// # Errors
    /// Weights of the wrong length, or an unreachable worker.
    pub async fn restore_weights(&mut self, weights: Arc<FlatWeights>) -> Result<(), OptimizerError> {
        self.evaluators.local_mut().set_weights(&weights)?;
        crate::operators::broadcast_weights(&self.evaluators).await?;
        self.optimizer.weights_restored(&weights);
        Ok(())
    }

    /// In a multi-agent run, the weights of policy `id` (see
    /// [`PolicyGraph::weight_layout`](crate::PolicyGraph::weight_layout)):
    /// to copy a policy from one trainer to another, as RLlib's
    /// two-trainer example does. `None` for an unknown id.
    pub fn policy_weights(&self, id: &str) -> Option<FlatWeights> {
        let local = self.evaluators.local();
        let policy = local.policy();
        let range = policy.weight_layout().into_iter().find(|(p, _)| p == id)?.1;
        Some(policy.get_weights()[range].to_vec())
    }

    /// Replaces policy `id`'s weights everywhere they live, as
    /// [`restore_weights`](Self::restore_weights) does for all of them.
    ///
    /// # Errors
    /// An unknown id, weights of the wrong length, or an unreachable worker.
    pub async fn set_policy_weights(&mut self, id: &str, weights: &[f32]) -> Result<(), OptimizerError> {
        let mut all = self.evaluators.local().policy().get_weights();
        let layout = self.evaluators.local().policy().weight_layout();
        let range = layout.iter().find(|(p, _)| p == id).map(|(_, r)| r.clone()).ok_or_else(|| {
            crate::EvaluatorError::Policy(crate::PolicyError::Other(format!(
                "no policy `{id}` (policies: {})",
                layout.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", ")
            )))
        })?;
        if range.len() != weights.len() {
            let wrong = crate::PolicyError::WrongLength { what: "weights", expected: range.len(), got: weights.len() };
            return Err(crate::EvaluatorError::Policy(wrong).into());
        }
        all[range].copy_from_slice(weights);
        self.restore_weights(Arc::new(all)).await
    }

    /// The evaluators: the driver's own (whose policy the learner trains)
    /// and the workers.
    pub fn evaluators(&self) -> &Evaluators {
        &self.evaluators
    }

    /// The evaluators, mutably.
    pub fn evaluators_mut(&mut self) -> &mut Evaluators {
        &mut self.evaluators
    }

    /// The evaluators, for a driver that keeps a policy and its env but
    /// not the optimizer (population-based training's best member).
    pub fn into_evaluators(self) -> Evaluators {
        self.evaluators
    }

    /// The optimizer.
    pub fn optimizer(&self) -> &dyn PolicyOptimizer {
        self.optimizer.as_ref()
    }

    /// The optimizer, mutably.
    pub fn optimizer_mut(&mut self) -> &mut dyn PolicyOptimizer {
        self.optimizer.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_on_any_criterion() {
        let stop = StopCriteria { episode_reward_mean: Some(475.0), timesteps_total: Some(1000), ..Default::default() };
        let mut r = TrainResult { timesteps_total: 10, ..Default::default() };
        assert!(!stop.should_stop(&r));
        r.episode_reward_mean = Some(480.0);
        assert!(stop.should_stop(&r));
        r.episode_reward_mean = Some(10.0);
        r.timesteps_total = 1000;
        assert!(stop.should_stop(&r));
        assert!(StopCriteria::default().is_empty());
        assert!(!StopCriteria::default().should_stop(&r));
    }
}
