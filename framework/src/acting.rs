//! [`Acting`]: a policy acting step after step for a fixed set of env
//! copies.
//!
//! Two things outlive one call of
//! [`PolicyGraph::compute_actions_from_input`]: a recurrent policy's state
//! (an LSTM's `h` and `c` for each copy), which must flow from one step of a
//! copy to its next and start from zeros with every episode, and the legal
//! actions the env reports at each step. [`Acting`] carries the first and
//! passes the second, so that evaluators, `rlx rollout` and a user's own
//! loop act the same way. It records in the output batch the state each row
//! was acted on with ([`fields::STATE_IN`]), beside the policy's
//! [`fields::STATE_OUT`]: the learner unrolls stored sequences from those.

use crate::policy::{PolicyError, PolicyGraph, PolicyInput};
use crate::sample_batch::{fields, SampleBatch};

/// The recurrent state of `n` env copies between steps.
#[derive(Clone, Debug, PartialEq)]
pub struct Acting {
    n: usize,
    size: usize,
    state: Vec<f32>,
}

impl Acting {
    /// Zero state for `n` copies acted on by `policy`.
    pub fn new(policy: &dyn PolicyGraph, n: usize) -> Self {
        let size = policy.recurrent_state_size();
        Self { n, size, state: vec![0.0; n * size] }
    }

    /// Width of each copy's state (0 for a feed-forward policy).
    pub fn state_size(&self) -> usize {
        self.size
    }

    /// Every copy's state, `[n, state_size]`.
    pub fn state(&self) -> &[f32] {
        &self.state
    }

    /// Replaces every copy's state (a restored checkpoint's).
    ///
    /// # Errors
    /// If `state` is not `[n, state_size]`.
    pub fn set_state(&mut self, state: &[f32]) -> Result<(), PolicyError> {
        if state.len() != self.state.len() {
            return Err(PolicyError::WrongLength {
                what: "recurrent state values",
                expected: self.state.len(),
                got: state.len(),
            });
        }
        self.state.copy_from_slice(state);
        Ok(())
    }

    /// Acts on `obs` (`[n, obs_dim]`) with `action_mask` (`[n, mask
    /// width]`, if the env has masks), replacing `out` with the policy's
    /// columns; for a recurrent policy adds [`fields::STATE_IN`] and
    /// carries its [`fields::STATE_OUT`] to the next call.
    ///
    /// # Errors
    /// The policy's error, or a recurrent policy that wrote no
    /// `state_out` of the right shape.
    pub fn act(
        &mut self,
        policy: &mut dyn PolicyGraph,
        obs: &[f32],
        action_mask: Option<&[f32]>,
        explore: bool,
        out: &mut SampleBatch,
    ) -> Result<(), PolicyError> {
        let state = (self.size > 0).then_some(&self.state[..]);
        policy.compute_actions_from_input(&PolicyInput { obs, action_mask, state, explore }, out)?;
        if self.size == 0 {
            return Ok(());
        }
        let next = out.f32(fields::STATE_OUT).map_err(|_| {
            PolicyError::Other(format!(
                "the policy has a recurrent state of {} values but wrote no `{}` column",
                self.size,
                fields::STATE_OUT
            ))
        })?;
        if next.len() != self.state.len() {
            return Err(PolicyError::WrongLength {
                what: "state_out values",
                expected: self.state.len(),
                got: next.len(),
            });
        }
        let before = std::mem::replace(&mut self.state, next.to_vec());
        out.insert_f32(fields::STATE_IN, before, self.size)?;
        Ok(())
    }

    /// Zeroes the state of `copy`, whose next step starts an episode.
    pub fn episode_started(&mut self, copy: usize) {
        debug_assert!(copy < self.n, "copy {copy} of {}", self.n);
        self.state[copy * self.size..(copy + 1) * self.size].fill(0.0);
    }
}
