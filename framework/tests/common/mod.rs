//! Test helpers shared by the framework's integration tests.

use rlx::policy::bootstrap_needed;
use rlx::postprocessing::{compute_advantages, AdvantageEstimator};
use rlx::{fields, FlatGradients, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space, VectorEnv};

/// Always steps right with probability `weights[0]` (deterministically by a
/// counter), and writes its first weight into every row so tests can see
/// which weights sampled.
pub struct CounterPolicy {
    pub weights: Vec<f32>,
    pub t: u64,
    pub obs_space: Space,
    pub act_space: Space,
}

impl CounterPolicy {
    /// Weight 0 and a fresh counter.
    pub fn new(obs_space: Space, act_space: Space) -> Self {
        Self { weights: vec![0.0], t: 0, obs_space, act_space }
    }

    /// [`new`](Self::new) with `env`'s spaces.
    pub fn for_env(env: &VectorEnv) -> Self {
        Self::new(env.observation_space().clone(), env.action_space().clone())
    }
}

impl PolicyGraph for CounterPolicy {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.obs_space, &self.act_space)
    }
    fn compute_actions(&mut self, obs: &[f32], _explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let n = obs.len() / self.obs_space.flat_dim();
        let actions = (0..n)
            .map(|_| {
                self.t += 1;
                // Right 3 times out of 4.
                i64::from(self.t % 4 != 0)
            })
            .collect();
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        out.insert_f32("w0", vec![self.weights[0]; n], 1)?;
        out.insert_f32(fields::VF_PREDS, vec![0.0; n], 1)?;
        Ok(())
    }
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let bootstrap = if bootstrap_needed(traj)? { 0.5 } else { 0.0 };
        Ok(compute_advantages(traj, bootstrap, AdvantageEstimator::Gae { gamma: 0.9, lambda: 1.0 })?)
    }
    fn learn_on_batch(&mut self, _batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        self.weights[0] += 1.0;
        Ok(LearnerStats::default())
    }
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        Ok((vec![batch.len() as f32], LearnerStats::default()))
    }
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        self.weights[0] += grads[0];
        Ok(())
    }
    fn get_weights(&self) -> Vec<f32> {
        self.weights.clone()
    }
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        if weights.len() != 1 {
            return Err(PolicyError::WrongLength { what: "weights", expected: 1, got: weights.len() });
        }
        self.weights = weights.to_vec();
        Ok(())
    }
}
