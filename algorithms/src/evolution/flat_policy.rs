//! The policy ES and ARS perturb: a deterministic MLP (or linear map) on
//! one flat weight vector, run forward on the host.

use crate::model::{Activation, ModelConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::export::{ActionHead, Encoding, Layer, Normalization, PolicyExport};
use rlx::filter::RunningStat;
use rlx::{
    fields, Action, Env, EpisodeSummary, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph,
    SampleBatch, Space,
};

/// One arg-max per element of a `MultiDiscrete` action, over its slice
/// of the outputs.
fn multi_argmax(out: &[f32], nvec: &[i64]) -> Vec<i64> {
    let mut start = 0;
    nvec.iter()
        .map(|&n| {
            let a = argmax(&out[start..start + n as usize]) as i64;
            start += n as usize;
            a
        })
        .collect()
}

/// A model config with these hidden widths (tanh).
pub fn hiddens(widths: &[usize]) -> ModelConfig {
    ModelConfig { fcnet_hiddens: widths.to_vec(), ..ModelConfig::default() }
}

/// A deterministic policy on one flat weight vector: a tanh MLP (or, with
/// no hidden layers, a linear map as in ARS) over normalized observations.
/// Discrete actions take the arg-max output; continuous ones the output
/// clipped to the action bounds.
///
/// Written without a tensor library because ES and ARS only ever run it
/// forward, one observation at a time, with weights that change every
/// episode: a plain loop over a flat vector is the fastest way to do that
/// and makes θ + σε a slice addition.
#[derive(Clone)]
pub struct FlatPolicy {
    obs_space: Space,
    act_space: Space,
    /// Layer widths, input first, output last.
    sizes: Vec<usize>,
    weights: Vec<f32>,
    /// The observation statistics the policy normalizes with.
    obs_stat: RunningStat,
    mean: Vec<f32>,
    inv_std: Vec<f32>,
    normalize: bool,
    activation: Activation,
    scratch: [Vec<f32>; 2],
}

/// Normalized observations are clipped to ±this (as RLlib's filter).
const OBS_CLIP: f32 = 10.0;

impl FlatPolicy {
    /// A policy for these spaces with `model`'s hidden layers
    /// (`fcnet_hiddens`, `fcnet_activation`), initialized from `seed`
    /// (zeros when linear, as in ARS); `normalize` turns observation
    /// normalization on. Observations of any `Box` shape are flattened.
    ///
    /// # Errors
    /// Discrete observations (no one-hot encoding here), or an empty
    /// action space.
    pub fn new(obs: &Space, act: &Space, model: &ModelConfig, normalize: bool, seed: u64) -> Result<Self, PolicyError> {
        let hidden = &model.fcnet_hiddens[..];
        let obs_dim = match obs {
            Space::Box { .. } => obs.flat_dim(),
            Space::Dict { entries } if entries.iter().all(|(_, s)| matches!(s, Space::Box { .. })) => obs.flat_dim(),
            other => {
                return Err(PolicyError::Other(format!(
                    "needs a Box observation space (or a Dict of Boxes), not {other}"
                )))
            }
        };
        let out = match act {
            Space::Discrete { n } => *n as usize,
            Space::Box { .. } => act.flat_dim(),
            Space::MultiDiscrete { nvec } => nvec.iter().sum::<i64>() as usize,
            Space::Dict { .. } => {
                return Err(PolicyError::Other(format!("cannot act in the Dict action space {act}")));
            }
        };
        if out == 0 {
            return Err(PolicyError::Other(format!("cannot act in the empty action space {act}")));
        }
        let mut sizes = vec![obs_dim];
        sizes.extend_from_slice(hidden);
        sizes.push(out);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut weights = Vec::new();
        for (l, w) in sizes.windows(2).enumerate() {
            let (fan_in, fan_out) = (w[0], w[1]);
            // Hidden layers: uniform with unit-variance outputs; the output
            // layer starts two orders of magnitude smaller so early actions do not saturate
            // (the ES paper's normalized-column init has the same aim).
            let last = l == sizes.len() - 2;
            let scale = if hidden.is_empty() {
                0.0
            } else if last {
                0.01 / (fan_in as f32).sqrt()
            } else {
                (3.0 / fan_in as f32).sqrt()
            };
            weights.extend((0..fan_in * fan_out).map(|_| rng.gen_range(-1.0..=1.0f32) * scale));
            weights.extend(std::iter::repeat_n(0.0, fan_out));
        }
        let widest = *sizes.iter().max().unwrap_or(&1);
        Ok(Self {
            obs_space: obs.clone(),
            act_space: act.clone(),
            sizes,
            weights,
            obs_stat: RunningStat::new(obs_dim),
            mean: vec![0.0; obs_dim],
            inv_std: vec![1.0; obs_dim],
            normalize,
            activation: model.fcnet_activation,
            scratch: [vec![0.0; widest], vec![0.0; widest]],
        })
    }

    /// Number of weights.
    pub fn num_params(&self) -> usize {
        self.weights.len()
    }

    /// Length of a (flattened) observation.
    pub(super) fn obs_dim(&self) -> usize {
        self.sizes[0]
    }

    /// The observation statistics the policy normalizes with.
    pub fn obs_stat(&self) -> &RunningStat {
        &self.obs_stat
    }

    /// Normalizes with `stat` from now on (no-op without normalization).
    pub fn set_obs_stat(&mut self, stat: &RunningStat) {
        self.obs_stat = stat.clone();
        if self.normalize {
            self.mean = stat.mean().iter().map(|&m| m as f32).collect();
            self.inv_std = stat.std().iter().map(|&s| 1.0 / (s as f32 + 1e-8)).collect();
        }
    }

    /// The network's output for one observation, into `self.scratch[..]`;
    /// returns which scratch buffer holds it.
    fn forward(&mut self, obs: &[f32], weights: &[f32]) -> usize {
        let [a, b] = &mut self.scratch;
        if self.normalize {
            for (i, &x) in obs.iter().enumerate() {
                a[i] = ((x - self.mean[i]) * self.inv_std[i]).clamp(-OBS_CLIP, OBS_CLIP);
            }
        } else {
            a[..obs.len()].copy_from_slice(obs);
        }
        let (mut input, mut output) = (a, b);
        let mut at = 0;
        let layers = self.sizes.len() - 1;
        for l in 0..layers {
            let (n_in, n_out) = (self.sizes[l], self.sizes[l + 1]);
            let (w, bias) = (&weights[at..at + n_in * n_out], &weights[at + n_in * n_out..at + n_in * n_out + n_out]);
            at += n_in * n_out + n_out;
            output[..n_out].copy_from_slice(bias);
            for (i, &x) in input[..n_in].iter().enumerate() {
                for (o, &wij) in output[..n_out].iter_mut().zip(&w[i * n_out..(i + 1) * n_out]) {
                    *o += x * wij;
                }
            }
            if l + 1 < layers {
                match self.activation {
                    Activation::Tanh => output[..n_out].iter_mut().for_each(|o| *o = o.tanh()),
                    Activation::Relu => output[..n_out].iter_mut().for_each(|o| *o = o.max(0.0)),
                }
            }
            std::mem::swap(&mut input, &mut output);
        }
        // After the last swap the output sits in `input`.
        usize::from(!std::ptr::eq(input.as_ptr(), self.scratch[0].as_ptr()))
    }

    /// Steps `env` with this policy's action for `obs` under `weights`.
    fn act(&mut self, env: &mut dyn Env, obs: &mut [f32], weights: &[f32]) -> Result<rlx::Step, rlx::EnvError> {
        let which = self.forward(obs, weights);
        let out = &mut self.scratch[which][..*self.sizes.last().unwrap_or(&0)];
        match &self.act_space {
            Space::Discrete { .. } => env.step(Action::Discrete(argmax(out) as i64), obs),
            Space::MultiDiscrete { nvec } => env.step(Action::MultiDiscrete(&multi_argmax(out, nvec)), obs),
            Space::Box { low, high, .. } => {
                for ((a, &lo), &hi) in out.iter_mut().zip(low).zip(high) {
                    *a = a.clamp(lo, hi);
                }
                env.step(Action::Continuous(out), obs)
            }
            Space::Dict { .. } => unreachable!("FlatPolicy::new refuses Dict actions"),
        }
    }

    /// Runs one episode from `env.reset(seed)` with `weights`, recording
    /// the raw observations in `seen`; returns the return and the length.
    ///
    /// # Errors
    /// The env's error (e.g. an action outside its space).
    pub fn episode(
        &mut self,
        env: &mut dyn Env,
        weights: &[f32],
        seed: u64,
        seen: &mut RunningStat,
    ) -> Result<EpisodeSummary, rlx::EnvError> {
        let mut obs = vec![0.0; self.sizes[0]];
        env.reset(Some(seed), &mut obs)?;
        let mut summary = EpisodeSummary { episode_return: 0.0, length: 0, truncated: false, agent: None };
        loop {
            seen.push(&obs);
            let step = self.act(env, &mut obs, weights)?;
            summary.episode_return += step.reward;
            summary.length += 1;
            if step.done() {
                summary.truncated = step.truncated && !step.terminated;
                return Ok(summary);
            }
        }
    }
}

fn argmax(x: &[f32]) -> usize {
    x.iter().enumerate().fold(0, |best, (i, &v)| if v > x[best] { i } else { best })
}

impl PolicyGraph for FlatPolicy {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.obs_space, &self.act_space)
    }

    /// The deterministic action of θ (exploration in ES and ARS happens in
    /// weight space, so `explore` changes nothing).
    fn compute_actions(&mut self, obs: &[f32], _explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        let dim = self.sizes[0];
        if obs.len() % dim != 0 {
            return Err(PolicyError::Other(format!("{} observation values are not rows of {dim}", obs.len())));
        }
        let weights = std::mem::take(&mut self.weights);
        let n_out = *self.sizes.last().unwrap_or(&0);
        *out = SampleBatch::new();
        let result = match self.act_space.clone() {
            Space::Discrete { .. } => {
                let actions = obs
                    .chunks_exact(dim)
                    .map(|row| {
                        let which = self.forward(row, &weights);
                        argmax(&self.scratch[which][..n_out]) as i64
                    })
                    .collect();
                out.insert_i64(fields::ACTIONS, actions, 1)
            }
            Space::Box { low, high, .. } => {
                let mut actions = Vec::with_capacity(obs.len() / dim * n_out);
                for row in obs.chunks_exact(dim) {
                    let which = self.forward(row, &weights);
                    let clipped = self.scratch[which][..n_out].iter().zip(&low).zip(&high);
                    actions.extend(clipped.map(|((&a, &lo), &hi)| a.clamp(lo, hi)));
                }
                out.insert_f32(fields::ACTIONS, actions, n_out)
            }
            Space::MultiDiscrete { nvec } => {
                let mut actions = Vec::with_capacity(obs.len() / dim * nvec.len());
                for row in obs.chunks_exact(dim) {
                    let which = self.forward(row, &weights);
                    actions.extend(multi_argmax(&self.scratch[which][..n_out], &nvec));
                }
                out.insert_i64(fields::ACTIONS, actions, nvec.len())
            }
            Space::Dict { .. } => unreachable!("FlatPolicy::new refuses Dict actions"),
        };
        self.weights = weights;
        Ok(result?)
    }

    fn postprocess_trajectory(&mut self, _traj: &mut SampleBatch) -> Result<(), PolicyError> {
        Ok(())
    }

    fn learn_on_batch(&mut self, _batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        Err(not_gradient_based())
    }

    fn compute_gradients(&mut self, _batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        Err(not_gradient_based())
    }

    fn apply_gradients(&mut self, _grads: &[f32]) -> Result<(), PolicyError> {
        Err(not_gradient_based())
    }

    fn get_weights(&self) -> FlatWeights {
        self.weights.clone()
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        if weights.len() != self.weights.len() {
            return Err(PolicyError::WrongLength { what: "weights", expected: self.weights.len(), got: weights.len() });
        }
        self.weights.copy_from_slice(weights);
        Ok(())
    }

    /// The layers, the observation normalization when on, and the greedy
    /// action as `compute_actions` takes it.
    fn export(&self) -> Result<PolicyExport, PolicyError> {
        let mut layers = Vec::new();
        let mut at = 0;
        for (l, w) in self.sizes.windows(2).enumerate() {
            let (inputs, outputs) = (w[0], w[1]);
            let weight = self.weights[at..at + inputs * outputs].to_vec();
            let bias = self.weights[at + inputs * outputs..at + inputs * outputs + outputs].to_vec();
            at += inputs * outputs + outputs;
            layers.push(Layer::Dense { inputs, outputs, weight, bias });
            if l + 2 < self.sizes.len() {
                layers.push(self.activation.into());
            }
        }
        let head = layers.pop().into_iter().collect();
        let action = match &self.act_space {
            Space::Discrete { n } => ActionHead::Categorical { nvec: vec![*n as usize] },
            Space::MultiDiscrete { nvec } => {
                ActionHead::Categorical { nvec: nvec.iter().map(|&n| n as usize).collect() }
            }
            Space::Box { low, high, .. } => ActionHead::Clipped { low: low.clone(), high: high.clone() },
            Space::Dict { .. } => unreachable!("FlatPolicy::new refuses Dict actions"),
        };
        let normalization = self.normalize.then(|| Normalization {
            mean: self.mean.clone(),
            inv_std: self.inv_std.clone(),
            clip: OBS_CLIP,
        });
        let encoding = Encoding::Flat { width: self.sizes[0] };
        Ok(PolicyExport { normalization, encoding, body: layers, recurrent: None, head, value: None, action })
    }

    /// The observation statistics: part of what the policy computes.
    fn save_state(&self) -> Option<Vec<u8>> {
        rlx::codec::encode_value(&self.obs_stat).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let stat: RunningStat = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a flat policy's observation statistics: {e}")))?;
        if stat.mean().len() != self.sizes[0] {
            return Err(PolicyError::WrongLength {
                what: "observation statistics",
                expected: self.sizes[0],
                got: stat.mean().len(),
            });
        }
        self.set_obs_stat(&stat);
        Ok(())
    }
}

fn not_gradient_based() -> PolicyError {
    PolicyError::Other(
        "ES and ARS policies learn from episode returns in their optimizer, not from sample batches".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_policy_matches_a_hand_computed_forward_pass() {
        let obs = Space::uniform_box(-1.0, 1.0, vec![2]).unwrap();
        let mut p = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[2]), false, 0).unwrap();
        // Layer 1: w = [[1, 0], [0, -1]] (input-major), b = [0, 0.5]; layer 2: w = [[1, 0], [0, 1]], b = [0, 0].
        p.set_weights(&[1.0, 0.0, 0.0, -1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]).unwrap();
        let which = p.forward(&[0.3, 0.2], &p.weights.clone());
        let out = &p.scratch[which][..2];
        assert!((out[0] - 0.3f32.tanh()).abs() < 1e-6 && (out[1] - 0.3f32.tanh()).abs() < 1e-6, "{out:?}");
        let mut batch = SampleBatch::new();
        p.compute_actions(&[0.3, 0.9, 0.3, -0.9], false, &mut batch).unwrap();
        // tanh(0.3) vs tanh(-0.4): action 0; tanh(0.3) vs tanh(1.4): action 1.
        assert_eq!(batch.i64(fields::ACTIONS).unwrap(), &[0, 1]);
    }

    #[test]
    fn normalization_round_trips_through_the_policy_state() {
        let obs = Space::uniform_box(-5.0, 5.0, vec![3]).unwrap();
        let mut p = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[]), true, 0).unwrap();
        let mut stat = RunningStat::new(3);
        stat.push(&[1.0, 2.0, 3.0]);
        stat.push(&[3.0, 2.0, 1.0]);
        p.set_obs_stat(&stat);
        let mut q = FlatPolicy::new(&obs, &Space::discrete(2), &hiddens(&[]), true, 0).unwrap();
        q.load_state(&p.save_state().unwrap()).unwrap();
        assert_eq!(q.obs_stat(), &stat);
        assert_eq!(q.mean, vec![2.0, 2.0, 2.0]);
        assert!(q.load_state(b"junk").is_err());
    }
}
