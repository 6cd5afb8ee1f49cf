//! The [`PolicyGraph`] trait: an algorithm's math, apart from how it is
//! distributed.
//!
//! A policy graph acts (batched), postprocesses its own trajectories (e.g.
//! GAE), and learns, either in one call ([`learn_on_batch`]) or split into
//! [`compute_gradients`] / [`apply_gradients`] so gradients can be computed on
//! one evaluator and applied on another (A3C, parameter servers). Weights and
//! gradients cross that boundary as flat `f32` vectors: serializable, cheap
//! to average, and independent of the tensor library inside.
//!
//! [`learn_on_batch`]: PolicyGraph::learn_on_batch
//! [`compute_gradients`]: PolicyGraph::compute_gradients
//! [`apply_gradients`]: PolicyGraph::apply_gradients

use crate::gaussian_actions::GaussianActions;
use crate::sample_batch::{fields, BatchError, SampleBatch};
use crate::space::Space;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// All trainable parameters of a policy, flattened in a fixed order.
pub type FlatWeights = Vec<f32>;

/// A gradient for every entry of [`FlatWeights`], in the same order.
pub type FlatGradients = Vec<f32>;

/// Named scalar statistics from one learning step (losses, entropy, KL...),
/// namespaced like `"policy_loss"` or `"vf_explained_var"`. The names each
/// built-in algorithm reports are listed on its book page.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LearnerStats(pub BTreeMap<String, f64>);

impl LearnerStats {
    /// Sets `name` to `value`.
    pub fn set(&mut self, name: &str, value: f64) {
        self.0.insert(name.to_string(), value);
    }

    /// The value of `name`, if reported.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// Adds `other`'s values, replacing those of the same name.
    pub fn merge(&mut self, other: LearnerStats) {
        self.0.extend(other.0);
    }

    /// Averages several steps' stats key by key (e.g. over minibatches).
    pub fn mean(all: &[LearnerStats]) -> LearnerStats {
        let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for s in all {
            for (k, v) in &s.0 {
                let e = sums.entry(k.clone()).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
        LearnerStats(sums.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect())
    }
}

/// The global L2 norm of a flat gradient (summed in `f64`), as reported in
/// `grad_norm` and used for clipping.
///
/// Eight running sums, added at the end: one sum is a chain of dependent
/// additions, one every four cycles, and over BC's 142,000 weights on
/// HalfCheetah that chain was 4 % of an update. The order changes the
/// `f64` in its last bits, far below the `f32` that clipping uses.
pub fn global_norm(grad: &[f32]) -> f64 {
    let square = |g: &f32| f64::from(*g) * f64::from(*g);
    let mut lanes = [0.0f64; 8];
    let rows = grad.chunks_exact(lanes.len());
    let tail: f64 = rows.remainder().iter().map(square).sum();
    for row in rows {
        lanes.iter_mut().zip(row).for_each(|(lane, g)| *lane += square(g));
    }
    (lanes.iter().sum::<f64>() + tail).sqrt()
}

/// Errors from a policy graph.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum PolicyError {
    /// The batch lacks a field or has the wrong shape.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A weight or gradient vector has the wrong length.
    #[error("expected {expected} {what} but got {got}")]
    WrongLength {
        /// `"weights"` or `"gradients"`.
        what: &'static str,
        /// The policy's parameter count.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// A loss or gradient became NaN or infinite.
    #[error("non-finite {0}; lower the learning rate or check the rewards")]
    NonFinite(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl From<crate::weights_file::WeightsFileError> for PolicyError {
    fn from(e: crate::weights_file::WeightsFileError) -> Self {
        PolicyError::Other(e.to_string())
    }
}

/// What a policy acts on at one step of `n` env copies: their observations
/// and, where there are any, their legal actions and recurrent states; and
/// whether it explores.
/// [`PolicyGraph::compute_actions_from_input`] takes it; evaluators and
/// `rlx rollout` build it (see [`crate::acting::Acting`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyInput<'a> {
    /// Observations, `[n, obs_dim]` row-major.
    pub obs: &'a [f32],
    /// Legal actions, `[n, mask width]` (1.0 legal, 0.0 illegal), if the
    /// env reports action masks ([`crate::Env::action_mask`]).
    pub action_mask: Option<&'a [f32]>,
    /// Each copy's recurrent state before this step, `[n,
    /// recurrent_state_size]` (zeros where an episode starts), if the
    /// policy is recurrent ([`PolicyGraph::recurrent_state_size`]).
    pub state: Option<&'a [f32]>,
    /// Sample actions (training); `false` asks for the greedy action
    /// (evaluation, `rlx rollout`).
    pub explore: bool,
}

impl<'a> PolicyInput<'a> {
    /// Observations alone: no masks, no recurrent state.
    pub fn obs(obs: &'a [f32], explore: bool) -> Self {
        Self { obs, action_mask: None, state: None, explore }
    }
}

/// An algorithm's policy: acting, postprocessing and learning.
///
/// Implement this in your own crate to run a new algorithm on rlx's
/// evaluators and optimizers; `rlx_algorithms::ppo` is a complete example.
pub trait PolicyGraph: Send + 'static {
    /// The observations this policy accepts, and the actions it produces.
    fn spaces(&self) -> (&Space, &Space);

    /// The observations this policy accepts.
    fn observation_space(&self) -> &Space {
        self.spaces().0
    }

    /// The actions this policy produces.
    fn action_space(&self) -> &Space {
        self.spaces().1
    }

    /// Acts on a batch of observations, `obs` being `[n, obs_dim]` row-major.
    ///
    /// Replaces `out` with a batch of `actions` (`i64` for discrete spaces,
    /// `f32` for boxes) and whatever per-row fields postprocessing and the
    /// loss need later (for PPO: `action_logp`, `vf_preds`). `explore` false
    /// asks for the greedy action.
    ///
    /// Start from `*out = SampleBatch::new()`: the evaluator adds its own
    /// columns (`obs`, `rewards`, …) to `out` after each call, and
    /// [`SampleBatch::clear`] keeps columns (with zero rows), so inserting
    /// `n` actions into a cleared `out` would be a row-count mismatch.
    ///
    /// # Errors
    /// If `obs` is not a whole number of rows, or the policy fails.
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError>;

    /// Acts like [`compute_actions`](Self::compute_actions) with what the
    /// evaluator knows beside the observations: the legal actions of each
    /// row, and each row's recurrent state. This is what evaluators call.
    ///
    /// A policy that masks never picks an action whose mask entry is 0. A
    /// recurrent policy (one with a [`recurrent_state_size`] above 0)
    /// reads `input.state` and writes each row's next state as a
    /// [`fields::STATE_OUT`] column of `out`; the evaluator carries it to
    /// the next step and zeroes it where an episode starts.
    ///
    /// The default ignores masks and state and calls `compute_actions`:
    /// a policy of your own that does not override it may pick illegal
    /// actions, which the env then rejects or penalizes as it chooses.
    ///
    /// [`recurrent_state_size`]: Self::recurrent_state_size
    ///
    /// # Errors
    /// As [`compute_actions`](Self::compute_actions); a mask or state of
    /// the wrong size.
    fn compute_actions_from_input(
        &mut self,
        input: &PolicyInput<'_>,
        out: &mut SampleBatch,
    ) -> Result<(), PolicyError> {
        self.compute_actions(input.obs, input.explore, out)
    }

    /// Width of the recurrent state a policy carries from one step of an
    /// env copy to the next (an LSTM's `h` and `c`); 0 (the default) for a
    /// feed-forward policy.
    fn recurrent_state_size(&self) -> usize {
        0
    }

    /// Completes one env copy's trajectory fragment in place (e.g. adds
    /// `advantages` and `value_targets`). The fragment holds at most one
    /// episode; its last row's `terminateds`/`truncateds` say how it ended
    /// (see [`bootstrap_needed`]).
    ///
    /// # Errors
    /// If the fragment lacks a field the policy needs.
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError>;

    /// Learns from a postprocessed batch (e.g. several epochs of minibatch
    /// SGD) and returns statistics.
    ///
    /// # Errors
    /// Missing fields, or a non-finite loss.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError>;

    /// The gradient of the loss on `batch`, without applying it.
    ///
    /// For [`MultiDeviceLearner`](crate::optimizer::MultiDeviceLearner)
    /// to compute what one device computes, the loss should be a mean over
    /// rows (so row-weighted averages of shard gradients are the batch's
    /// gradient) and the gradient unclipped: clip in
    /// [`apply_gradients`](Self::apply_gradients), after averaging.
    ///
    /// # Errors
    /// Missing fields, or a non-finite loss.
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError>;

    /// Applies a gradient (from this or another copy of the policy, or an
    /// average of several) with the policy's optimizer, clipping it first
    /// if the policy clips.
    ///
    /// # Errors
    /// [`PolicyError::WrongLength`] if `grads` does not match the parameters.
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError>;

    /// Assigns rows read from a dataset (`input`) before they are
    /// postprocessed. A multi-agent policy ([`crate::MultiPolicy`]) gives
    /// each row to the policy its agent (`agent_index`) maps to in this
    /// run, whichever policy acted for it when it was logged; the default
    /// leaves the rows as they are.
    ///
    /// # Errors
    /// Rows a multi-agent policy cannot assign (no `agent_index`, or an
    /// agent the env does not have).
    fn assign_logged_rows(&self, rows: &mut SampleBatch) -> Result<(), PolicyError> {
        let _ = rows;
        Ok(())
    }

    /// The policy's probability of each action at each row of observations
    /// `obs`, for a `Discrete(n)` action space (`n` values a row): what
    /// off-policy estimates weigh logged actions by
    /// ([`crate::off_policy_estimation`]). An actor-critic gives its
    /// softmax, a Q-learner its greedy choice. The default says the policy
    /// has none.
    ///
    /// # Errors
    /// Observations of the wrong width, an action space that is not one
    /// discrete choice, or a policy without probabilities (the default).
    fn action_probabilities(&mut self, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let _ = obs;
        Err(PolicyError::Other("this policy gives no action probabilities for off-policy estimates".into()))
    }

    /// The policy's distribution of a `Box` action at each row of
    /// observations `obs`: what off-policy estimates weigh and average
    /// logged continuous actions by ([`crate::off_policy_estimation`]).
    /// A Gaussian policy gives its means and standard deviations (and its
    /// bounds, where it squashes by `tanh`), a deterministic one its
    /// actions with standard deviations of 0. The default says the policy
    /// has none.
    ///
    /// # Errors
    /// Observations of the wrong width, an action space that is not a
    /// `Box`, or a policy without a distribution (the default).
    fn action_distribution(&mut self, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let _ = obs;
        Err(PolicyError::Other("this policy gives no action distribution for off-policy estimates".into()))
    }

    /// What a tree search asks of a network at each row of observations
    /// `obs`, for a `Discrete(n)` action space: the probability of every
    /// action (`n` values a row, legal or not: the search keeps the legal
    /// ones) and the value `V(s)` for the player to move (one a row).
    /// AlphaZero's network gives its softmax and value head; the default
    /// says the policy has none.
    ///
    /// # Errors
    /// Observations of the wrong width, an action space that is not one
    /// discrete choice, or a policy without them (the default).
    fn policy_and_value(&mut self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>), PolicyError> {
        let _ = obs;
        Err(PolicyError::Other("this policy gives no action probabilities and values for a tree search".into()))
    }

    /// The TD error `Q(s, a) − target` of every row of a postprocessed
    /// batch under the current weights, for Q-learning policies: what
    /// prioritized replay turns into priorities (after a learning step, and
    /// as the initial priorities Ape-X's evaluators send). The default says
    /// the policy has none.
    ///
    /// # Errors
    /// Missing fields, or a policy without TD errors (the default).
    fn td_errors(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let _ = batch;
        Err(PolicyError::Other(
            "this policy computes no TD errors; prioritized replay needs a Q-learning policy (e.g. DQN)".into(),
        ))
    }

    /// Learns from a replayed batch, and returns each row's TD error as
    /// the learning pass computed it, before its update: prioritized
    /// replay's new priorities (Schaul et al., ICLR 2016, Algorithm 1). The
    /// default learns, then computes them again with
    /// [`td_errors`](Self::td_errors) under the updated weights; a
    /// Q-learning policy overrides it to skip that second pass.
    ///
    /// # Errors
    /// As [`learn_on_batch`](Self::learn_on_batch) and
    /// [`td_errors`](Self::td_errors).
    fn learn_with_td_errors(&mut self, batch: &SampleBatch) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        let stats = self.learn_on_batch(batch)?;
        Ok((stats, self.td_errors(batch)?))
    }

    /// The acting network, described for other runtimes: what `rlx
    /// export` writes as ONNX ([`crate::export`]).
    ///
    /// # Errors
    /// By default: the policy gives no description.
    fn export(&self) -> Result<crate::export::PolicyExport, PolicyError> {
        Err(PolicyError::Other(
            "this policy does not describe its acting network for export (PolicyGraph::export)".into(),
        ))
    }

    /// All trainable parameters, flattened.
    fn get_weights(&self) -> FlatWeights;

    /// For a policy made of several (a multi-agent run's
    /// [`MultiPolicy`](crate::MultiPolicy)): each one's id and where its
    /// weights lie in [`get_weights`](Self::get_weights), in order. Empty
    /// (the default) for a single policy.
    fn weight_layout(&self) -> Vec<(String, std::ops::Range<usize>)> {
        Vec::new()
    }

    /// For a policy made of several: the one with id `id` (`None` for a
    /// single policy, the default, and for an unknown id).
    fn member_mut(&mut self, id: &str) -> Option<&mut dyn PolicyGraph> {
        let _ = id;
        None
    }

    /// Overwrites all trainable parameters.
    ///
    /// # Errors
    /// [`PolicyError::WrongLength`] if `weights` does not match the parameters.
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError>;

    /// Everything but the weights that decides what the policy does next:
    /// optimizer moments and step count, random generators, adaptive
    /// coefficients. Checkpoints store it so a restored run continues
    /// exactly. `None` (the default) means the policy cannot save it; a
    /// restored run then keeps the weights but starts the optimizer afresh,
    /// and says so.
    fn save_state(&self) -> Option<Vec<u8>> {
        None
    }

    /// Restores what [`save_state`](PolicyGraph::save_state) saved, on a
    /// policy built with the same config.
    ///
    /// # Errors
    /// If the policy cannot restore state (the default) or the bytes are not
    /// its state.
    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let _ = state;
        Err(PolicyError::Other("this policy cannot restore a saved state".into()))
    }

    /// Writes the weights to `path` in the safetensors format. The default
    /// writes one tensor, `"weights"`, holding [`get_weights`]; policies
    /// built on a tensor library override it to write named layers (the
    /// built-in policies name each tensor by its place in the network,
    /// e.g. `pi.torso.0.weight`, so other tools can read the file).
    ///
    /// [`get_weights`]: PolicyGraph::get_weights
    ///
    /// # Errors
    /// If the file cannot be written.
    fn save_weights(&self, path: &std::path::Path) -> Result<(), PolicyError> {
        Ok(crate::weights_file::write_flat_safetensors(path, &self.get_weights())?)
    }

    /// Reads weights written by [`save_weights`](PolicyGraph::save_weights).
    ///
    /// # Errors
    /// If the file is unreadable, not safetensors, or holds other shapes;
    /// the error names the file.
    fn load_weights(&mut self, path: &std::path::Path) -> Result<(), PolicyError> {
        let weights = crate::weights_file::read_flat_safetensors(path)?;
        self.set_weights(&weights)
    }
}

/// Whether a trajectory fragment needs a bootstrap value `V(s_T)`: true
/// unless its last step terminated the episode (truncation and mid-episode
/// cuts both bootstrap).
///
/// # Errors
/// If the fragment has no `terminateds` column.
pub fn bootstrap_needed(traj: &SampleBatch) -> Result<bool, BatchError> {
    Ok(traj.f32(fields::TERMINATEDS)?.last().is_none_or(|&t| t == 0.0))
}

#[cfg(test)]
mod tests {
    use super::global_norm;

    #[test]
    fn global_norm_is_the_l2_norm_whatever_the_length() {
        assert_eq!(global_norm(&[]), 0.0);
        assert_eq!(global_norm(&[3.0, -4.0]), 5.0);
        // Lengths around the eight running sums, against one plain sum.
        for n in [7, 8, 9, 17, 1001] {
            let grad: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01).collect();
            let plain = grad.iter().map(|&g| f64::from(g) * f64::from(g)).sum::<f64>().sqrt();
            let norm = global_norm(&grad);
            assert!((norm - plain).abs() <= 1e-12 * plain, "{n}: {norm} vs {plain}");
            assert_eq!(norm as f32, plain as f32, "{n}: the f32 clipping uses");
        }
    }
}
