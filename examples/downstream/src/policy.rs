//! Step 2: our own policy graph, a **linear softmax policy trained by
//! REINFORCE** (Williams, 1992), written with plain `Vec<f32>` and no tensor
//! library.
//!
//! The policy maps an observation row `s` (width `obs_dim`) to action
//! probabilities
//!
//! ```text
//! logits = s · W + b          W: [obs_dim, n_actions], b: [n_actions]
//! π(a | s) = softmax(logits)[a]
//! ```
//!
//! and learns by following the policy gradient
//!
//! ```text
//! ∇ J = E[ A_t ∇ log π(a_t | s_t) ],    A_t = (G_t − mean G) / std G
//! G_t = r_t + γ r_{t+1} + γ² r_{t+2} + ...   (the discounted return)
//! ```
//!
//! For a softmax, `∂ log π(a|s) / ∂ logits_k = 1[k = a] − π(k|s)`, and the
//! logits are linear in `W` and `b`, so the whole gradient is a few loops.
//!
//! How the work splits over the `PolicyGraph` methods:
//! - [`compute_actions`](PolicyGraph::compute_actions) samples actions (on
//!   every evaluator, with that evaluator's copy of the weights);
//! - [`postprocess_trajectory`](PolicyGraph::postprocess_trajectory) turns one
//!   episode fragment's rewards into returns `G_t` (also on the evaluators,
//!   so that the learner receives ready-to-use batches);
//! - [`compute_gradients`](PolicyGraph::compute_gradients) /
//!   [`apply_gradients`](PolicyGraph::apply_gradients) are the two halves of
//!   one SGD step, and [`learn_on_batch`](PolicyGraph::learn_on_batch) is
//!   simply both;
//! - [`get_weights`](PolicyGraph::get_weights) /
//!   [`set_weights`](PolicyGraph::set_weights) move `W` and `b` as one flat
//!   vector, which is how the optimizer broadcasts them to the workers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::policy::FlatWeights;
use rlx::{fields, FlatGradients, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space};

/// Our own batch column: the discounted return `G_t` of each row.
pub const RETURNS: &str = "returns";
/// Our own batch column: 1.0 where the row's return is exact, 0.0 where it
/// is not (see [`LinearSoftmaxPolicy::postprocess_trajectory`]).
pub const COMPLETE: &str = "complete";

/// Hyperparameters of [`LinearSoftmaxPolicy`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyConfig {
    /// Discount factor γ of the returns.
    pub gamma: f32,
    /// Step size of plain gradient descent.
    pub lr: f32,
    /// Seeds the generator that samples actions.
    pub seed: u64,
}

/// `π(a | s) = softmax(s · W + b)`, trained by REINFORCE.
pub struct LinearSoftmaxPolicy {
    obs_space: Space,
    act_space: Space,
    obs_dim: usize,
    n_actions: usize,
    /// `W` row-major (`obs_dim * n_actions` values), then `b` (`n_actions`):
    /// exactly the flat vector `get_weights` returns.
    params: Vec<f32>,
    config: PolicyConfig,
    rng: ChaCha8Rng,
}

impl LinearSoftmaxPolicy {
    /// A policy for a flat `Box` observation space and a `Discrete` action
    /// space. All weights start at zero, so the untrained policy picks
    /// actions uniformly at random, and every evaluator built this way
    /// starts with the same weights (no broadcast needed before the first
    /// step).
    ///
    /// # Errors
    /// [`PolicyError::Other`] for other kinds of spaces.
    pub fn new(obs_space: Space, act_space: Space, config: PolicyConfig) -> Result<Self, PolicyError> {
        let Space::Box { low, .. } = &obs_space else {
            return Err(PolicyError::Other(format!("needs a Box observation space, not {obs_space}")));
        };
        let Some(n_actions) = act_space.n() else {
            return Err(PolicyError::Other(format!("needs a Discrete action space, not {act_space}")));
        };
        let (obs_dim, n_actions) = (low.len(), n_actions as usize);
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        // The env copies of the same evaluator may be seeded with this same
        // seed; a separate ChaCha stream keeps the policy's random numbers
        // independent of theirs.
        rng.set_stream(1);
        Ok(Self { obs_space, act_space, obs_dim, n_actions, params: vec![0.0; (obs_dim + 1) * n_actions], config, rng })
    }

    /// Number of parameters: `W` and `b`.
    pub fn num_params(&self) -> usize {
        self.params.len()
    }

    /// `π(· | s)` for one observation row `s`.
    ///
    /// # Panics
    /// If `s` is not one row wide.
    pub fn probabilities(&self, s: &[f32]) -> Vec<f32> {
        assert_eq!(s.len(), self.obs_dim, "one observation row");
        let mut probs = vec![0.0; self.n_actions];
        self.action_probs(s, &mut probs);
        probs
    }

    /// Writes `π(· | s)` for one observation row into `probs`.
    fn action_probs(&self, s: &[f32], probs: &mut [f32]) {
        let (w, b) = self.params.split_at(self.obs_dim * self.n_actions);
        probs.copy_from_slice(b);
        for (j, &x) in s.iter().enumerate() {
            if x != 0.0 {
                for (p, &wjk) in probs.iter_mut().zip(&w[j * self.n_actions..(j + 1) * self.n_actions]) {
                    *p += x * wjk;
                }
            }
        }
        // Softmax, shifted by the largest logit so `exp` cannot overflow.
        let max = probs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        probs.iter_mut().for_each(|p| *p = (*p - max).exp());
        let sum: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= sum);
    }

    /// The number of whole observation rows in `obs`.
    fn rows(&self, obs: &[f32]) -> Result<usize, PolicyError> {
        if obs.len() % self.obs_dim != 0 {
            return Err(PolicyError::Other(format!(
                "{} observation values are not a whole number of rows of width {}",
                obs.len(),
                self.obs_dim
            )));
        }
        Ok(obs.len() / self.obs_dim)
    }

    fn check_length(&self, what: &'static str, got: usize) -> Result<(), PolicyError> {
        if got != self.params.len() {
            return Err(PolicyError::WrongLength { what, expected: self.params.len(), got });
        }
        Ok(())
    }
}

impl PolicyGraph for LinearSoftmaxPolicy {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.obs_space, &self.act_space)
    }

    /// Samples `a ~ π(· | s)` for every row (or takes the most likely action
    /// when `explore` is false) and writes the `actions` column. REINFORCE
    /// needs nothing else from acting time: the gradient is computed from
    /// the current weights at learning time.
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let n = self.rows(obs)?;
        let mut probs = vec![0.0; self.n_actions];
        let mut actions = Vec::with_capacity(n);
        for s in obs.chunks_exact(self.obs_dim) {
            self.action_probs(s, &mut probs);
            let a = if explore {
                // Inverse-CDF sampling.
                let u: f32 = self.rng.gen();
                let mut acc = 0.0;
                probs
                    .iter()
                    .position(|&p| {
                        acc += p;
                        u < acc
                    })
                    // Rounding can leave the total a hair below `u`.
                    .unwrap_or(self.n_actions - 1)
            } else {
                (0..self.n_actions).fold(0, |best, k| if probs[k] > probs[best] { k } else { best })
            };
            actions.push(a as i64);
        }
        // A fresh batch, not `out.clear()`: the evaluator adds its own
        // columns (`obs`, `rewards`, ...) to `out` after this call, and a
        // cleared batch would still have them, with zero rows, so inserting
        // `n` actions would be a row-count mismatch.
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        Ok(())
    }

    /// Adds the discounted returns `G_t` of one trajectory fragment.
    ///
    /// The evaluator hands us one env copy's steps, cut at episode ends and
    /// at the end of each `sample()` call. How the fragment's last row ended
    /// decides whether its returns are exact:
    /// - `terminateds`: the goal was reached, nothing follows, exact;
    /// - `truncateds`: the time limit ended the episode; no reward follows
    ///   *in this task*, exact;
    /// - neither: the sampler stopped mid-episode. The rewards still to come
    ///   are unknown and REINFORCE has no critic to estimate them (an
    ///   actor-critic would bootstrap from `V(s_T)` here, see
    ///   `rlx::policy::bootstrap_needed`), so these rows get
    ///   `complete = 0` and the loss skips them. The continuation, in the
    ///   next `sample()`, starts a fragment of its own whose returns are
    ///   exact again.
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let rewards = traj.f32(fields::REWARDS)?;
        // Backwards: G_t = r_t + γ G_{t+1}, with G = 0 after the last row.
        // (`rlx::postprocessing::discount_cumsum` does the same.)
        let mut returns = vec![0.0f32; rewards.len()];
        let mut g = 0.0f32;
        for t in (0..rewards.len()).rev() {
            g = rewards[t] + self.config.gamma * g;
            returns[t] = g;
        }
        let last = |field| traj.f32(field).map(|v| v.last().copied() == Some(1.0));
        let episode_ended = last(fields::TERMINATEDS)? || last(fields::TRUNCATEDS)?;
        let complete = vec![if episode_ended { 1.0 } else { 0.0 }; traj.len()];
        traj.insert_f32(RETURNS, returns, 1)?;
        traj.insert_f32(COMPLETE, complete, 1)?;
        Ok(())
    }

    /// One REINFORCE step: [`compute_gradients`](Self::compute_gradients)
    /// then [`apply_gradients`](Self::apply_gradients). The batch was sampled
    /// by the weights we have now (the optimizer broadcasts after every
    /// step), so a single step per batch keeps the gradient on-policy.
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (grads, stats) = self.compute_gradients(batch)?;
        self.apply_gradients(&grads)?;
        Ok(stats)
    }

    /// The gradient of the REINFORCE loss
    /// `L = −1/N Σ_t A_t log π(a_t | s_t)` over the `N` rows with exact
    /// returns, where `A_t` is the return standardized over those rows
    /// (subtracting the mean is a baseline: it lowers the variance without
    /// biasing the gradient; dividing by the standard deviation makes the
    /// step size independent of the reward scale).
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let obs = batch.f32(fields::OBS)?;
        let actions = batch.i64(fields::ACTIONS)?;
        let returns = batch.f32(RETURNS)?;
        let complete = batch.f32(COMPLETE)?;
        let width = batch.get(fields::OBS).map(|c| c.width());
        if width != Some(self.obs_dim) {
            return Err(PolicyError::Other(format!("`obs` rows are {width:?} wide, expected {}", self.obs_dim)));
        }

        // The baseline: mean and standard deviation of the exact returns.
        let used: Vec<usize> = (0..batch.len()).filter(|&i| complete[i] == 1.0).collect();
        let mut grads = vec![0.0f32; self.params.len()];
        let mut stats = LearnerStats::default();
        stats.set("rows_used", used.len() as f64);
        if used.is_empty() {
            return Ok((grads, stats));
        }
        let n = used.len() as f64;
        let mean = used.iter().map(|&i| returns[i] as f64).sum::<f64>() / n;
        let std = (used.iter().map(|&i| (returns[i] as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();

        let (k_w, k) = (self.obs_dim * self.n_actions, self.n_actions);
        let mut probs = vec![0.0; k];
        let (mut loss, mut entropy) = (0.0f64, 0.0f64);
        for &i in &used {
            let s = &obs[i * self.obs_dim..(i + 1) * self.obs_dim];
            let a = usize::try_from(actions[i])
                .ok()
                .filter(|&a| a < k)
                .ok_or_else(|| PolicyError::Other(format!("action {} is not in 0..{k}", actions[i])))?;
            let advantage = ((returns[i] as f64 - mean) / (std + 1e-8)) as f32;
            self.action_probs(s, &mut probs);
            loss -= advantage as f64 * (probs[a] as f64).ln();
            entropy -= probs.iter().map(|&p| if p > 0.0 { p as f64 * (p as f64).ln() } else { 0.0 }).sum::<f64>();
            // ∂L/∂logits_c = −A (1[c = a] − π_c) / N, then through the
            // linear layer: ∂L/∂W[j, c] = s_j ∂L/∂logits_c, ∂L/∂b[c] = ∂L/∂logits_c.
            for c in 0..k {
                let indicator = if c == a { 1.0 } else { 0.0 };
                let d_logit = -advantage * (indicator - probs[c]) / n as f32;
                grads[k_w + c] += d_logit;
                for (j, &x) in s.iter().enumerate() {
                    grads[j * k + c] += x * d_logit;
                }
            }
        }
        let grad_norm = grads.iter().map(|&g| (g as f64).powi(2)).sum::<f64>().sqrt();
        if !loss.is_finite() || !grad_norm.is_finite() {
            return Err(PolicyError::NonFinite(format!("policy loss {loss}, gradient norm {grad_norm}")));
        }
        stats.set("policy_loss", loss / n);
        stats.set("entropy", entropy / n);
        stats.set("mean_return", mean);
        stats.set("grad_norm", grad_norm);
        Ok((grads, stats))
    }

    /// Plain gradient descent: `θ ← θ − lr · g`. The gradient may come from
    /// another copy of this policy (e.g. a worker, with an A3C-style
    /// optimizer); it only has to have our layout.
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        self.check_length("gradients", grads.len())?;
        if grads.iter().any(|g| !g.is_finite()) {
            return Err(PolicyError::NonFinite("gradient".into()));
        }
        for (p, g) in self.params.iter_mut().zip(grads) {
            *p -= self.config.lr * g;
        }
        Ok(())
    }

    fn get_weights(&self) -> FlatWeights {
        self.params.clone()
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        self.check_length("weights", weights.len())?;
        self.params.copy_from_slice(weights);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> LinearSoftmaxPolicy {
        let obs = Space::uniform_box(0.0, 1.0, vec![3]).unwrap();
        LinearSoftmaxPolicy::new(obs, Space::discrete(2), PolicyConfig { gamma: 0.5, lr: 0.1, seed: 0 }).unwrap()
    }

    /// One trajectory fragment of `rewards`, ending as `terminated`/`truncated` say.
    fn fragment(rewards: Vec<f32>, terminated: bool, truncated: bool) -> SampleBatch {
        let n = rewards.len();
        let flag = |last: bool| (0..n).map(|t| if last && t + 1 == n { 1.0 } else { 0.0 }).collect();
        let mut b = SampleBatch::new();
        b.insert_f32(fields::REWARDS, rewards, 1).unwrap();
        b.insert_f32(fields::TERMINATEDS, flag(terminated), 1).unwrap();
        b.insert_f32(fields::TRUNCATEDS, flag(truncated), 1).unwrap();
        b
    }

    #[test]
    fn returns_are_discounted_and_cut_fragments_are_marked() {
        let mut p = policy();
        let mut done = fragment(vec![1.0, 0.0, 2.0], true, false);
        p.postprocess_trajectory(&mut done).unwrap();
        assert_eq!(done.f32(RETURNS).unwrap(), &[1.5, 1.0, 2.0]);
        assert_eq!(done.f32(COMPLETE).unwrap(), &[1.0; 3]);
        let mut timed_out = fragment(vec![1.0, 1.0], false, true);
        p.postprocess_trajectory(&mut timed_out).unwrap();
        assert_eq!(timed_out.f32(COMPLETE).unwrap(), &[1.0; 2]);
        let mut cut = fragment(vec![1.0, 1.0], false, false);
        p.postprocess_trajectory(&mut cut).unwrap();
        assert_eq!(cut.f32(RETURNS).unwrap(), &[1.5, 1.0]);
        assert_eq!(cut.f32(COMPLETE).unwrap(), &[0.0; 2]);
    }

    #[test]
    fn weights_round_trip_and_lengths_are_checked() {
        let mut p = policy();
        assert_eq!(p.get_weights(), vec![0.0; 8]);
        let w: Vec<f32> = (0..8).map(|i| i as f32).collect();
        p.set_weights(&w).unwrap();
        assert_eq!(p.get_weights(), w);
        assert!(matches!(p.set_weights(&[0.0; 3]), Err(PolicyError::WrongLength { expected: 8, got: 3, .. })));
        assert!(matches!(p.apply_gradients(&[0.0; 9]), Err(PolicyError::WrongLength { .. })));
    }

    #[test]
    fn greedy_actions_follow_the_weights() {
        let mut p = policy();
        // Prefer action 1 in state 0 and action 0 in states 1 and 2.
        p.set_weights(&[-1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 0.0, 0.0]).unwrap();
        let mut out = SampleBatch::new();
        p.compute_actions(&[1., 0., 0., 0., 1., 0., 0., 0., 1.], false, &mut out).unwrap();
        assert_eq!(out.i64(fields::ACTIONS).unwrap(), &[1, 0, 0]);
        assert!(p.compute_actions(&[1.0, 0.0], false, &mut out).is_err());
    }

    /// The analytic gradient against central finite differences of the loss.
    #[test]
    fn gradient_matches_finite_differences() {
        let mut p = policy();
        p.set_weights(&[0.3, -0.2, 0.1, 0.4, -0.5, 0.2, 0.05, -0.1]).unwrap();
        let mut batch = SampleBatch::new();
        batch.insert_f32(fields::OBS, vec![1., 0., 0., 0., 1., 0.5, 0., 0., 1., 1., 0., 0.], 3).unwrap();
        batch.insert_i64(fields::ACTIONS, vec![0, 1, 1, 1], 1).unwrap();
        batch.insert_f32(RETURNS, vec![1.0, -0.5, 0.25, 2.0], 1).unwrap();
        // The last row's return is not exact: it must not count.
        batch.insert_f32(COMPLETE, vec![1.0, 1.0, 1.0, 0.0], 1).unwrap();
        let (grads, stats) = p.compute_gradients(&batch).unwrap();
        assert_eq!(stats.get("rows_used"), Some(3.0));
        let loss_at = |p: &mut LinearSoftmaxPolicy, w: &[f32]| {
            p.set_weights(w).unwrap();
            p.compute_gradients(&batch).unwrap().1.get("policy_loss").unwrap()
        };
        let w0 = p.get_weights();
        for i in 0..w0.len() {
            let eps = 1e-3;
            let (mut up, mut down) = (w0.clone(), w0.clone());
            up[i] += eps;
            down[i] -= eps;
            let numeric = (loss_at(&mut p, &up) - loss_at(&mut p, &down)) / (2.0 * eps as f64);
            assert!((numeric - grads[i] as f64).abs() < 1e-3, "parameter {i}: {numeric} vs {}", grads[i]);
        }
    }
}
