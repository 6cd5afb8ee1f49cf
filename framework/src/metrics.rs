//! Per-iteration metrics: [`TrainResult`] and the 100-episode window behind
//! its episode statistics.
//!
//! Field names follow RLlib's so existing dashboards and habits carry over
//! (`episode_reward_mean`, `timesteps_total`, ...). Each one is explained in
//! the book's metrics page.

use crate::policy::LearnerStats;
use crate::vector_env::EpisodeSummary;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// The most recent finished episodes, for smoothed return statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeWindow {
    capacity: usize,
    episodes: VecDeque<EpisodeSummary>,
}

impl EpisodeWindow {
    /// A window over the last `capacity` episodes (100 in RLlib's metrics
    /// and in Gymnasium's "solved" thresholds).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), episodes: VecDeque::with_capacity(capacity) }
    }

    /// Adds finished episodes, dropping the oldest beyond capacity.
    pub fn extend(&mut self, episodes: impl IntoIterator<Item = EpisodeSummary>) {
        for e in episodes {
            if self.episodes.len() == self.capacity {
                self.episodes.pop_front();
            }
            self.episodes.push_back(e);
        }
    }

    /// Number of episodes in the window.
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// Whether no episode has finished yet.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    fn stat(&self, f: impl Fn(&EpisodeSummary) -> f64, reduce: impl Fn(f64, f64) -> f64) -> Option<f64> {
        self.episodes.iter().map(f).reduce(reduce)
    }

    /// Mean return, `None` before the first episode ends.
    pub fn mean_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, |a, b| a + b).map(|s| s / self.len() as f64)
    }

    /// Lowest return in the window.
    pub fn min_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, f64::min)
    }

    /// Highest return in the window.
    pub fn max_return(&self) -> Option<f64> {
        self.stat(|e| e.episode_return, f64::max)
    }

    /// Mean episode length.
    pub fn mean_length(&self) -> Option<f64> {
        self.stat(|e| e.length as f64, |a, b| a + b).map(|s| s / self.len() as f64)
    }

    /// The returns in the window, oldest first.
    pub fn returns(&self) -> impl Iterator<Item = f64> + '_ {
        self.episodes.iter().map(|e| e.episode_return)
    }
}

/// The mean of `values`, `None` if there are none.
pub fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// What one training iteration reports. One JSON object per line of
/// `result.json`.
///
/// It serializes as a map of its fields in this order, without
/// `evaluation` when none ran and without the multi-agent maps when they
/// are empty (see the `Serialize` impl), in JSON and in checkpoints alike;
/// checkpoints written before it did (MessagePack arrays of the fields)
/// still load.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct TrainResult {
    /// Iterations completed, starting at 1.
    pub training_iteration: u64,
    /// Env steps sampled since the start of the run.
    pub timesteps_total: u64,
    /// Env steps sampled in this iteration.
    pub timesteps_this_iter: u64,
    /// Env steps the learner trained on since the start of the run.
    pub num_env_steps_trained: u64,
    /// Episodes finished since the start of the run.
    pub episodes_total: u64,
    /// Episodes finished in this iteration.
    pub episodes_this_iter: u64,
    /// Mean return over the last 100 episodes (`null` until one finishes).
    pub episode_reward_mean: Option<f64>,
    /// Lowest return over the last 100 episodes.
    pub episode_reward_min: Option<f64>,
    /// Highest return over the last 100 episodes.
    pub episode_reward_max: Option<f64>,
    /// Mean length over the last 100 episodes.
    pub episode_len_mean: Option<f64>,
    /// Wall time of this iteration, seconds.
    pub time_this_iter_s: f64,
    /// Wall time since the start of the run, seconds.
    pub time_total_s: f64,
    /// Env steps sampled per second of wall time in this iteration
    /// (sampling and learning together).
    pub env_steps_per_s: f64,
    /// Evaluator restarts after failures since the start of the run.
    pub num_evaluator_restarts: u64,
    /// The learner's statistics (losses, entropy, KL...), averaged over the
    /// iteration's minibatches.
    pub learner: LearnerStats,
    /// What failed in the evaluators' deployment since the start of the run
    /// (refused or lost nodes, re-placed evaluators), oldest first.
    ///
    /// Optional when reading, as every field after it: checkpoints written
    /// before they existed still load.
    #[serde(default)]
    pub evaluator_failures: Vec<String>,
    /// The evaluation after this iteration, if one ran (see
    /// [`crate::evaluation`]): greedy episodes on evaluators of their own.
    #[serde(default)]
    pub evaluation: Option<EvaluationResult>,
    /// Multi-agent runs: each policy's mean return over the last 100
    /// episodes of each agent it acts for (`null` until one ends). Empty,
    /// and left out, in single-agent runs.
    #[serde(default)]
    pub policy_reward_mean: BTreeMap<String, Option<f64>>,
    /// Multi-agent runs: each agent's mean return over its last 100
    /// episodes.
    #[serde(default)]
    pub agent_reward_mean: BTreeMap<String, Option<f64>>,
    /// Self-play: the learning policy's record against each opponent
    /// policy over that opponent's last 100 games, in the arena's shape
    /// (`win`: the share the opponent lost, `draw`: ended at 0, `loss`:
    /// the share it won; `games`: how many, 0 before any ended).
    #[serde(default)]
    pub self_play: BTreeMap<String, ArenaRecord>,
    /// Runs with nodes: where the workers are now, and what membership
    /// did so far. Left out for runs in one process.
    #[serde(default)]
    pub cluster: Option<crate::placement::ClusterStatus>,
    /// A run from `input` that asks for them: each estimator's off-policy
    /// estimate of the current policy's return, with each evaluation (see
    /// [`crate::off_policy_estimation`]). Empty, and left out, otherwise.
    #[serde(default)]
    pub off_policy_estimation: BTreeMap<String, crate::off_policy_estimation::Estimate>,
}

/// What one evaluation found: the `evaluation` object of `result.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationResult {
    /// Mean return of the evaluation episodes.
    pub episode_reward_mean: f64,
    /// Lowest return.
    pub episode_reward_min: f64,
    /// Highest return.
    pub episode_reward_max: f64,
    /// Mean episode length.
    pub episode_len_mean: f64,
    /// Episodes played.
    pub episodes: u64,
    /// Board games (AlphaZero's arena): the learner's results against
    /// each opponent (`random`, `mcts_<simulations>`, `minimax`), by name.
    /// Empty, and left out, otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arena: BTreeMap<String, ArenaRecord>,
}

/// The shares of games won, drawn and lost against one opponent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Share of the games won.
    pub win: f64,
    /// Share drawn.
    pub draw: f64,
    /// Share lost.
    pub loss: f64,
}

impl Outcomes {
    /// The shares of `scores` (+1 a win, 0 a draw, −1 a loss) that are
    /// wins, draws and losses.
    pub fn of(scores: &[f32]) -> Self {
        let n = scores.len().max(1) as f64;
        let share = |keep: fn(f32) -> bool| scores.iter().filter(|&&s| keep(s)).count() as f64 / n;
        Self { win: share(|s| s > 0.0), draw: share(|s| s == 0.0), loss: share(|s| s < 0.0) }
    }
}

/// The learner against one opponent in an arena: with its search, and
/// where measured its network alone (the most probable legal move).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArenaRecord {
    /// Share of the games the learner won with its search.
    pub win: f64,
    /// Share drawn.
    pub draw: f64,
    /// Share lost.
    pub loss: f64,
    /// Games played, half in each seat.
    pub games: u64,
    /// The network without search against the same opponent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_search: Option<Outcomes>,
}

impl ArenaRecord {
    /// The learner's record from its opponent's returns (self-play): a
    /// negative return is a game the learner won, zero a draw, a positive
    /// one a game it lost.
    pub fn from_opponent_returns(returns: impl Iterator<Item = f64>) -> Self {
        let scores: Vec<f32> = returns
            .map(|r| {
                if r < 0.0 {
                    1.0
                } else if r > 0.0 {
                    -1.0
                } else {
                    0.0
                }
            })
            .collect();
        let Outcomes { win, draw, loss } = if scores.is_empty() { Outcomes::default() } else { Outcomes::of(&scores) };
        Self { win, draw, loss, games: scores.len() as u64, without_search: None }
    }
}

impl EvaluationResult {
    /// The statistics of `episodes` (all zeros for none).
    pub fn of(episodes: &[EpisodeSummary]) -> Self {
        let n = episodes.len().max(1) as f64;
        let returns = episodes.iter().map(|e| e.episode_return);
        Self {
            episode_reward_mean: returns.clone().sum::<f64>() / n,
            episode_reward_min: returns.clone().reduce(f64::min).unwrap_or(0.0),
            episode_reward_max: returns.reduce(f64::max).unwrap_or(0.0),
            episode_len_mean: episodes.iter().map(|e| e.length as f64).sum::<f64>() / n,
            episodes: episodes.len() as u64,
            arena: BTreeMap::new(),
        }
    }
}

impl Serialize for TrainResult {
    /// A map, so that the optional fields can be left out in any format
    /// (MessagePack arrays, as derived, only allow leaving out the last).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let optional = usize::from(self.evaluation.is_some())
            + usize::from(self.cluster.is_some())
            + usize::from(!self.off_policy_estimation.is_empty())
            + [&self.policy_reward_mean, &self.agent_reward_mean].iter().filter(|m| !m.is_empty()).count()
            + usize::from(!self.self_play.is_empty());
        let mut map = serializer.serialize_map(Some(16 + optional))?;
        map.serialize_entry("training_iteration", &self.training_iteration)?;
        map.serialize_entry("timesteps_total", &self.timesteps_total)?;
        map.serialize_entry("timesteps_this_iter", &self.timesteps_this_iter)?;
        map.serialize_entry("num_env_steps_trained", &self.num_env_steps_trained)?;
        map.serialize_entry("episodes_total", &self.episodes_total)?;
        map.serialize_entry("episodes_this_iter", &self.episodes_this_iter)?;
        map.serialize_entry("episode_reward_mean", &self.episode_reward_mean)?;
        map.serialize_entry("episode_reward_min", &self.episode_reward_min)?;
        map.serialize_entry("episode_reward_max", &self.episode_reward_max)?;
        map.serialize_entry("episode_len_mean", &self.episode_len_mean)?;
        map.serialize_entry("time_this_iter_s", &self.time_this_iter_s)?;
        map.serialize_entry("time_total_s", &self.time_total_s)?;
        map.serialize_entry("env_steps_per_s", &self.env_steps_per_s)?;
        map.serialize_entry("num_evaluator_restarts", &self.num_evaluator_restarts)?;
        map.serialize_entry("learner", &self.learner)?;
        map.serialize_entry("evaluator_failures", &self.evaluator_failures)?;
        if let Some(evaluation) = &self.evaluation {
            map.serialize_entry("evaluation", evaluation)?;
        }
        for (key, value) in
            [("policy_reward_mean", &self.policy_reward_mean), ("agent_reward_mean", &self.agent_reward_mean)]
        {
            if !value.is_empty() {
                map.serialize_entry(key, value)?;
            }
        }
        if !self.self_play.is_empty() {
            map.serialize_entry("self_play", &self.self_play)?;
        }
        if let Some(cluster) = &self.cluster {
            map.serialize_entry("cluster", cluster)?;
        }
        if !self.off_policy_estimation.is_empty() {
            map.serialize_entry("off_policy_estimation", &self.off_policy_estimation)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field is written (a field added to the struct but not to the
    /// `Serialize` impl would be lost), in declaration order.
    #[test]
    fn json_has_every_field_in_order_and_round_trips() {
        let full = TrainResult {
            evaluation: Some(Default::default()),
            policy_reward_mean: [("p".to_string(), Some(1.0))].into(),
            agent_reward_mean: [("a".to_string(), None)].into(),
            self_play: [(
                "q".to_string(),
                ArenaRecord { win: 0.5, draw: 0.25, loss: 0.25, games: 4, without_search: None },
            )]
            .into(),
            cluster: Some(crate::placement::ClusterStatus { nodes_alive: 2, ..Default::default() }),
            off_policy_estimation: [("is".to_string(), Default::default())].into(),
            ..Default::default()
        };
        let json = serde_json::to_string(&full).unwrap();
        assert!(json.starts_with(r#"{"training_iteration":0,"timesteps_total":0,"#), "{json}");
        assert_eq!(serde_json::from_str::<TrainResult>(&json).unwrap(), full);
        let plain = serde_json::to_value(TrainResult::default()).unwrap();
        let keys = plain.as_object().unwrap().len();
        assert_eq!(keys, 16, "single-agent results leave out the optional fields: {plain}");
        assert_eq!(serde_json::to_value(&full).unwrap().as_object().unwrap().len(), keys + 6);
    }

    /// Checkpoints written before results were maps stored them as
    /// MessagePack arrays of their fields: they still load.
    #[test]
    fn results_stored_as_arrays_still_load() {
        // The sixteen fields up to `evaluator_failures`, as a tuple: an array.
        let old = (
            3u64,
            10u64,
            5u64,
            10u64,
            1u64,
            1u64,
            Some(9.5f64),
            Some(9.5f64),
            Some(9.5f64),
            Some(9.0f64),
            0.5f64,
            1.0f64,
            20.0f64,
            0u64,
            LearnerStats::default(),
            vec!["node lost".to_string()],
        );
        let flat = rmp_serde::to_vec(&old).unwrap();
        let r: TrainResult = rmp_serde::from_slice(&flat).unwrap();
        assert_eq!((r.training_iteration, r.episode_len_mean), (3, Some(9.0)));
        assert_eq!(r.evaluator_failures, ["node lost"]);
        assert!(r.evaluation.is_none() && r.policy_reward_mean.is_empty());
    }

    /// Checkpoints encode results inside other structs: a result with and
    /// without each optional part must round-trip there.
    #[test]
    fn results_round_trip_in_checkpoint_encoding_with_and_without_failures() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Wrapped {
            last: TrainResult,
            after: Vec<u32>,
        }
        let mut learner = LearnerStats::default();
        learner.set("kl", 0.5);
        let evaluation = EvaluationResult { episode_reward_mean: 7.5, episodes: 2, ..Default::default() };
        let policies: BTreeMap<String, Option<f64>> = [("p0".to_string(), Some(3.0)), ("p1".into(), None)].into();
        for (failures, evaluation, policy_reward_mean) in [
            (vec![], None, BTreeMap::new()),
            (vec!["node 127.0.0.1:1 lost".to_string()], None, BTreeMap::new()),
            (vec![], Some(evaluation.clone()), BTreeMap::new()),
            (vec!["node 127.0.0.1:1 lost".to_string()], Some(evaluation.clone()), BTreeMap::new()),
            (vec![], None, policies.clone()),
            (vec![], Some(evaluation), policies.clone()),
        ] {
            let w = Wrapped {
                last: TrainResult {
                    training_iteration: 3,
                    learner: learner.clone(),
                    evaluator_failures: failures,
                    evaluation,
                    agent_reward_mean: policy_reward_mean.clone(),
                    self_play: policy_reward_mean
                        .keys()
                        .map(|k| (k.clone(), ArenaRecord { win: 1.0, games: 3, ..Default::default() }))
                        .collect(),
                    policy_reward_mean,
                    ..Default::default()
                },
                after: vec![7],
            };
            let bytes = crate::codec::encode_value(&w).unwrap();
            assert_eq!(crate::codec::decode_value::<Wrapped>(&bytes).unwrap(), w);
        }
    }

    fn ep(r: f64) -> EpisodeSummary {
        EpisodeSummary { episode_return: r, length: r as u64, truncated: false, agent: None }
    }

    #[test]
    fn window_keeps_the_last_episodes() {
        let mut w = EpisodeWindow::new(3);
        assert_eq!(w.mean_return(), None);
        w.extend([ep(1.0), ep(2.0), ep(3.0), ep(10.0)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w.mean_return(), Some(5.0));
        assert_eq!(w.min_return(), Some(2.0));
        assert_eq!(w.max_return(), Some(10.0));
        assert_eq!(w.mean_length(), Some(5.0));
    }
}
