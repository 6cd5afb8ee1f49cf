//! [`MultiPolicy`]: several policies acting and learning as one
//! [`PolicyGraph`], each for the agents that map to it.
//!
//! A multi-agent env's vector form has one row per agent of each copy (see
//! [`crate::multi_agent`]): row `r` is agent `r % n` of `n`. Which policy
//! acts for a row is a cycle over the rows: usually one entry per agent
//! (agent `i`'s policy), or longer, so that the same seat plays different
//! policies in different env copies (self-play against a league of
//! snapshots). The multi policy splits every batch of rows by policy, lets
//! each policy act, postprocess and learn on its own rows, and tags every
//! row with `policy_index` and `agent_index` columns so that a batch keeps
//! saying whose rows it holds after it is concatenated, shipped, replayed
//! or shuffled. That is RLlib's `MultiAgentBatch` as columns, which lets
//! every optimizer, actor, node and checkpoint handle a multi-agent run as
//! they handle any other.
//!
//! - **Weights** are the policies' weights one after another, in policy-id
//!   order, so a broadcast sends each policy's weights to every evaluator.
//! - **Learning** is per policy, on its rows only, and only for the
//!   policies to train; the others keep their weights exactly. Fields named
//!   in `standardize` (PPO's advantages) are standardized per policy.
//! - **Columns** differ between algorithms (PPO's `vf_preds`, none for DQN):
//!   a policy's rows get zeros in the columns only another policy writes,
//!   so its rows and the others' concatenate.

use crate::policy::{FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, PolicyInput};
use crate::sample_batch::{fields, Column, SampleBatch};
use crate::space::Space;
use std::collections::BTreeMap;

/// The column that says which agent of its env copy a row belongs to.
pub const AGENT_INDEX: &str = "agent_index";

/// The column that says which policy (by position in id order) acted for a row.
pub const POLICY_INDEX: &str = "policy_index";

/// Several policies behind one [`PolicyGraph`] (see the module docs).
pub struct MultiPolicy {
    /// By id, in id order.
    policies: Vec<(String, Box<dyn PolicyGraph>)>,
    /// Agents per env copy.
    agents: usize,
    /// Row `r`'s policy is `row_policy[r % row_policy.len()]` (an index
    /// in `policies`).
    row_policy: Vec<usize>,
    /// Per policy: whether it learns.
    trained: Vec<bool>,
    standardize: Vec<String>,
    /// Each policy's number of weights (fixed once built).
    sizes: Vec<usize>,
    /// Every column any policy writes when acting or postprocessing, empty
    /// (the shape of a zero row to pad with).
    columns: BTreeMap<String, Column>,
}

impl MultiPolicy {
    /// `policies` by id, for an env with `agents` agents per copy; row `r`
    /// is acted for by the policy with id `row_policy[r % row_policy.len()]`
    /// (one entry per agent: agent `i`'s policy); `trained` are the ids
    /// that learn; `standardize` the fields to standardize per policy
    /// before it learns.
    ///
    /// # Errors
    /// No agents, or a cycle that is not whole copies; a row mapped to a
    /// policy not in `policies`; a policy no row maps to; a policy to train
    /// that does not exist; policies with different spaces; a recurrent
    /// policy (not supported yet).
    pub fn new(
        policies: BTreeMap<String, Box<dyn PolicyGraph>>,
        agents: usize,
        row_policy: &[String],
        trained: &[String],
        standardize: &[&str],
    ) -> Result<Self, PolicyError> {
        let bad = |m: String| Err(PolicyError::Other(m));
        let ids: Vec<String> = policies.keys().cloned().collect();
        if agents == 0 || row_policy.is_empty() || !row_policy.len().is_multiple_of(agents) {
            return bad(format!(
                "a multi-agent policy maps whole env copies: {} rows for {agents} agents per copy",
                row_policy.len()
            ));
        }
        let index = |id: &str| ids.iter().position(|p| p == id);
        let mut map = Vec::with_capacity(row_policy.len());
        for (row, id) in row_policy.iter().enumerate() {
            match index(id) {
                Some(p) => map.push(p),
                None => {
                    return bad(format!("agent {} maps to policy `{id}`, which is not one of {ids:?}", row % agents))
                }
            }
        }
        if let Some(idle) = ids.iter().enumerate().find(|(p, _)| !map.contains(p)) {
            return bad(format!("no agent maps to policy `{}`", idle.1));
        }
        if let Some(unknown) = trained.iter().find(|t| index(t).is_none()) {
            return bad(format!("policy to train `{unknown}` is not one of {ids:?}"));
        }
        let policies: Vec<(String, Box<dyn PolicyGraph>)> = policies.into_iter().collect();
        let (first_id, first) = &policies[0];
        for (id, p) in &policies {
            if p.spaces() != first.spaces() {
                return bad(format!(
                    "policy `{id}` has spaces {} / {}, policy `{first_id}` {} / {}: the agents share one env's spaces",
                    p.observation_space(),
                    p.action_space(),
                    first.observation_space(),
                    first.action_space()
                ));
            }
            if p.recurrent_state_size() > 0 {
                return bad(format!(
                    "policy `{id}` is recurrent (`use_lstm`), which multi-agent runs do not support yet"
                ));
            }
        }
        let mut me = Self {
            trained: ids.iter().map(|id| trained.contains(id)).collect(),
            sizes: policies.iter().map(|(_, p)| p.get_weights().len()).collect(),
            policies,
            agents,
            row_policy: map,
            standardize: standardize.iter().map(|s| s.to_string()).collect(),
            columns: BTreeMap::new(),
        };
        me.columns = me.probe_columns()?;
        Ok(me)
    }

    /// The policy ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.policies.iter().map(|(id, _)| id.as_str())
    }

    /// The policy with id `id`.
    pub fn policy(&self, id: &str) -> Option<&dyn PolicyGraph> {
        self.policies.iter().find(|(p, _)| p == id).map(|(_, p)| p.as_ref())
    }

    /// The columns each policy writes on a one-row trajectory (acting on a
    /// zero observation, then postprocessing), merged: what every row is
    /// padded to. Acting greedily leaves exploration state untouched.
    fn probe_columns(&mut self) -> Result<BTreeMap<String, Column>, PolicyError> {
        let mut columns: BTreeMap<String, Column> = BTreeMap::new();
        let d = self.policies[0].1.observation_space().flat_dim();
        for (id, policy) in &mut self.policies {
            let mut row = SampleBatch::new();
            policy.compute_actions(&vec![0.0; d], false, &mut row)?;
            row.insert_f32(fields::OBS, vec![0.0; d], d)?;
            row.insert_f32(fields::NEW_OBS, vec![0.0; d], d)?;
            row.insert_f32(fields::REWARDS, vec![0.0], 1)?;
            row.insert_f32(fields::TERMINATEDS, vec![1.0], 1)?;
            row.insert_f32(fields::TRUNCATEDS, vec![0.0], 1)?;
            policy.postprocess_trajectory(&mut row)?;
            for (name, col) in row.columns() {
                let empty = col.slice_rows(0..0);
                match columns.get(name) {
                    Some(seen) if seen.kind_name() != col.kind_name() || seen.width() != col.width() => {
                        return Err(PolicyError::Other(format!(
                            "policy `{id}` writes `{name}` as {} × {}, another policy as {} × {}",
                            col.kind_name(),
                            col.width(),
                            seen.kind_name(),
                            seen.width()
                        )))
                    }
                    Some(_) => {}
                    None => {
                        columns.insert(name.to_string(), empty);
                    }
                }
            }
        }
        Ok(columns)
    }

    /// Adds zero columns for whatever `batch` lacks of [`Self::columns`].
    fn pad(&self, batch: &mut SampleBatch) -> Result<(), PolicyError> {
        let rows = batch.len();
        for (name, empty) in &self.columns {
            if !batch.contains(name) {
                batch.insert(name.clone(), empty.zeros(rows))?;
            }
        }
        Ok(())
    }

    /// Row indices of `batch` per policy, from its `policy_index` column.
    /// Each trained policy learns on its own rows (standardized per
    /// policy); with `td`, the TD errors of its learning pass land in its
    /// rows of the returned column, 0 elsewhere.
    fn learn_each(&mut self, batch: &SampleBatch, td: bool) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        let rows = self.rows_by_policy(batch)?;
        let mut stats = LearnerStats::default();
        let mut errors = if td { vec![0.0; batch.len()] } else { Vec::new() };
        for (p, (id, policy)) in self.policies.iter_mut().enumerate() {
            if !self.trained[p] || rows[p].is_empty() {
                continue;
            }
            let mut own = batch.gather(&rows[p]);
            for field in &self.standardize {
                if own.contains(field) {
                    own.standardize(field)?;
                }
            }
            let learned = if td {
                let (learned, own_errors) = policy.learn_with_td_errors(&own)?;
                for (e, &r) in own_errors.into_iter().zip(&rows[p]) {
                    errors[r] = e;
                }
                learned
            } else {
                policy.learn_on_batch(&own)?
            };
            for (k, v) in learned.0 {
                stats.set(&format!("{id}/{k}"), v);
            }
        }
        Ok((stats, errors))
    }

    fn rows_by_policy(&self, batch: &SampleBatch) -> Result<Vec<Vec<usize>>, PolicyError> {
        let mut rows = vec![Vec::new(); self.policies.len()];
        for (r, &p) in self.policy_indices(batch)?.iter().enumerate() {
            rows[p].push(r);
        }
        Ok(rows)
    }

    /// Each row's policy, checked.
    fn policy_indices(&self, batch: &SampleBatch) -> Result<Vec<usize>, PolicyError> {
        let column = batch.i64(POLICY_INDEX).map_err(|_| {
            PolicyError::Other(format!("a multi-agent batch needs its `{POLICY_INDEX}` column (rows from MultiPolicy)"))
        })?;
        column
            .iter()
            .map(|&p| {
                usize::try_from(p).ok().filter(|&p| p < self.policies.len()).ok_or_else(|| {
                    PolicyError::Other(format!("a row names policy {p}, but there are {}", self.policies.len()))
                })
            })
            .collect()
    }
}

/// Rows `at` of a `[rows, width]` slice.
fn gather_rows(values: &[f32], width: usize, at: &[usize]) -> Vec<f32> {
    at.iter().flat_map(|&r| values[r * width..(r + 1) * width].iter().copied()).collect()
}

impl PolicyGraph for MultiPolicy {
    fn spaces(&self) -> (&Space, &Space) {
        self.policies[0].1.spaces()
    }

    fn member_mut(&mut self, id: &str) -> Option<&mut dyn PolicyGraph> {
        self.policies.iter_mut().find(|(p, _)| p == id).map(|(_, p)| p.as_mut() as &mut dyn PolicyGraph)
    }

    /// A multi-agent run has several policies; export picks one
    /// ([`member_mut`](PolicyGraph::member_mut)).
    fn export(&self) -> Result<crate::export::PolicyExport, PolicyError> {
        let ids: Vec<&str> = self.ids().collect();
        Err(PolicyError::Other(format!(
            "this run has {} policies ({}); pick one to export (rlx export --policy ID)",
            ids.len(),
            ids.join(", ")
        )))
    }

    /// Row `r` is agent `r % n`'s: each policy acts on its agents' rows in
    /// one call, and the answers are put back in row order.
    fn compute_actions_from_input(
        &mut self,
        input: &PolicyInput<'_>,
        out: &mut SampleBatch,
    ) -> Result<(), PolicyError> {
        let d = self.observation_space().flat_dim();
        let (n, rows) = (self.agents, input.obs.len() / d.max(1));
        let policy_of = |r: usize| self.row_policy[r % self.row_policy.len()];
        if rows % n != 0 {
            return Err(PolicyError::Other(format!(
                "a multi-agent policy acts on whole env copies of {n} agents, got {rows} rows"
            )));
        }
        let mask_width = input.action_mask.map_or(0, |m| m.len() / rows.max(1));
        let mut merged: BTreeMap<String, Column> =
            self.columns.iter().map(|(name, empty)| (name.clone(), empty.zeros(rows))).collect();
        for (p, (id, policy)) in self.policies.iter_mut().enumerate() {
            let at: Vec<usize> = (0..rows).filter(|&r| policy_of(r) == p).collect();
            let obs = gather_rows(input.obs, d, &at);
            let mask = input.action_mask.map(|m| gather_rows(m, mask_width, &at));
            let sub_input =
                PolicyInput { obs: &obs, action_mask: mask.as_deref(), state: None, explore: input.explore };
            let mut sub = SampleBatch::new();
            policy.compute_actions_from_input(&sub_input, &mut sub)?;
            for (name, col) in sub.columns() {
                let dst = merged.get_mut(name).ok_or_else(|| {
                    PolicyError::Other(format!("policy `{id}` wrote `{name}`, which it did not write when probed"))
                })?;
                dst.scatter_rows(col, &at);
            }
        }
        let mut batch = SampleBatch::new();
        for (name, column) in merged {
            batch.insert(name, column)?;
        }
        let mut merged = batch;
        merged.insert_i64(AGENT_INDEX, (0..rows).map(|r| (r % n) as i64).collect(), 1)?;
        merged.insert_i64(POLICY_INDEX, (0..rows).map(|r| policy_of(r) as i64).collect(), 1)?;
        *out = merged;
        Ok(())
    }

    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        self.compute_actions_from_input(&PolicyInput::obs(obs, explore), out)
    }

    /// Logged row `r` is agent `agent_index[r]`'s, and goes to the policy
    /// that agent maps to now (in the first env copy's mapping, where
    /// self-play's league gives seats different policies in different
    /// copies). A dataset of a single-agent run has no agents to map.
    fn assign_logged_rows(&self, rows: &mut SampleBatch) -> Result<(), PolicyError> {
        let n = self.agents;
        let agents = rows.i64(AGENT_INDEX).map_err(|_| {
            PolicyError::Other(format!(
                "this run is multi-agent ({n} agents), but the dataset's rows have no `{AGENT_INDEX}` column: \
                 it was written by a single-agent run"
            ))
        })?;
        let policies = agents
            .iter()
            .map(|&a| match usize::try_from(a) {
                Ok(a) if a < n => Ok(self.row_policy[a] as i64),
                _ => Err(PolicyError::Other(format!(
                    "a logged row is agent {a}'s, but this run's env has {n} agents (0 to {})",
                    n - 1
                ))),
            })
            .collect::<Result<Vec<i64>, _>>()?;
        rows.insert_i64(POLICY_INDEX, policies, 1)?;
        Ok(())
    }

    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let Some(&p) = self.policy_indices(traj)?.first() else { return Ok(()) };
        self.policies[p].1.postprocess_trajectory(traj)?;
        self.pad(traj)
    }

    /// Each policy to train learns on its own rows; statistics are named
    /// `<policy id>/<statistic>`.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        self.learn_each(batch, false).map(|(stats, _)| stats)
    }

    /// Each trained policy learns on its rows and hands back their TD
    /// errors from that pass; 0 for the other rows (as [`td_errors`](Self::td_errors)).
    fn learn_with_td_errors(&mut self, batch: &SampleBatch) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        self.learn_each(batch, true)
    }

    fn compute_gradients(&mut self, _: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        Err(PolicyError::Other(
            "multi-agent policies learn on batches (learn_on_batch); optimizers that pass gradients (A3C) \
             are not supported"
                .into(),
        ))
    }

    fn apply_gradients(&mut self, _: &[f32]) -> Result<(), PolicyError> {
        self.compute_gradients(&SampleBatch::new()).map(|_| ())
    }

    /// Each row's TD error from its own policy; 0 for the rows of policies
    /// that do not learn (which may not be Q-learners), so prioritized
    /// replay rarely draws them.
    fn td_errors(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let rows = self.rows_by_policy(batch)?;
        let mut errors = vec![0.0; batch.len()];
        for (p, (_, policy)) in self.policies.iter_mut().enumerate() {
            if !self.trained[p] || rows[p].is_empty() {
                continue;
            }
            for (e, &r) in policy.td_errors(&batch.gather(&rows[p]))?.into_iter().zip(&rows[p]) {
                errors[r] = e;
            }
        }
        Ok(errors)
    }

    fn get_weights(&self) -> FlatWeights {
        self.policies.iter().flat_map(|(_, p)| p.get_weights()).collect()
    }

    fn weight_layout(&self) -> Vec<(String, std::ops::Range<usize>)> {
        let mut at = 0;
        self.policies
            .iter()
            .zip(&self.sizes)
            .map(|((id, _), &len)| {
                at += len;
                (id.clone(), at - len..at)
            })
            .collect()
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        let total: usize = self.sizes.iter().sum();
        if weights.len() != total {
            return Err(PolicyError::WrongLength { what: "weights", expected: total, got: weights.len() });
        }
        let mut at = 0;
        for ((_, p), &len) in self.policies.iter_mut().zip(&self.sizes) {
            p.set_weights(&weights[at..at + len])?;
            at += len;
        }
        Ok(())
    }

    /// Every policy's state, in id order (`None` if one cannot save its own).
    fn save_state(&self) -> Option<Vec<u8>> {
        let states: Vec<serde_bytes::ByteBuf> =
            self.policies.iter().map(|(_, p)| p.save_state().map(serde_bytes::ByteBuf::from)).collect::<Option<_>>()?;
        Some(rmp_serde::to_vec(&states).expect("MessagePack encoding of byte strings cannot fail"))
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let states: Vec<serde_bytes::ByteBuf> = rmp_serde::from_slice(state)
            .map_err(|e| PolicyError::Other(format!("not a saved multi-agent policy state: {e}")))?;
        if states.len() != self.policies.len() {
            return Err(PolicyError::Other(format!(
                "the saved state holds {} policies, this run has {}",
                states.len(),
                self.policies.len()
            )));
        }
        for ((_, p), s) in self.policies.iter_mut().zip(&states) {
            p.load_state(s)?;
        }
        Ok(())
    }
}
