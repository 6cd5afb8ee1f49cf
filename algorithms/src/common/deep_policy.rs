//! The policy core every built-in deep algorithm shares.
//!
//! [`PolicyCore`] owns what is the same for PPO, DQN, SAC and the rest: the
//! device and the tensors ([`Params`]), target copies of them, the Adam
//! optimizers with their moments (which checkpoints save, so a restored
//! run continues exactly), the random generator, the spaces, flat weights
//! and gradients, and the saved-weights file. An algorithm supplies only
//! its [`PolicyAlgorithm`]: how it acts, how it postprocesses a trajectory
//! and its loss; [`DeepPolicy`] puts the two together as a
//! [`PolicyGraph`].

use crate::common::update_rules::{clip_grad_norm, Adam, RmsProp};
use crate::model::device::NetDevice;
use crate::model::Params;
use dfdx::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::export::PolicyExport;
use rlx::gaussian_actions::GaussianActions;
use rlx::{FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, PolicyInput, SampleBatch, Space};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// A taped scalar loss on device `D`.
pub type Loss<D> = Tensor<Rank0, f32, D, OwnedTape<f32, D>>;

/// One optimizer over a span of the flat weights: Adam, or RMSprop when
/// `rmsprop` is set (`adam` is then an empty placeholder).
///
/// The layout is for checkpoints: the codec writes fields by position, and
/// groups saved before RMSprop existed are `(range, adam, grad_clip)`, so
/// the RMSprop state is a last field that such a group reads as `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Group {
    range: Range<usize>,
    adam: Adam,
    grad_clip: Option<f32>,
    #[serde(default)]
    rmsprop: Option<RmsProp>,
}

impl Group {
    /// Clips `grad` (this group's span), then one update of `weights` (the
    /// span's values); returns the norm before clipping.
    fn step(&mut self, weights: &mut [f32], grad: &mut [f32]) -> Result<f32, PolicyError> {
        let norm = clip_grad_norm(grad, self.grad_clip)?;
        match &mut self.rmsprop {
            Some(rmsprop) => rmsprop.update(weights, grad)?,
            None => self.adam.update(weights, grad)?,
        }
        Ok(norm)
    }

    fn num_params(&self) -> usize {
        self.rmsprop.as_ref().map_or(self.adam.num_params(), RmsProp::num_params)
    }

    /// The config's name of the rule.
    fn rule(&self) -> &'static str {
        if self.rmsprop.is_some() {
            "rmsprop"
        } else {
            "adam"
        }
    }
}

/// The fewest weights several optimizer groups update in all for
/// [`PolicyCore::step_groups`] to step them on two threads: below it
/// (Pendulum's 64-wide networks have about 5,000 a group) handing work to
/// the second thread costs more than it saves.
pub const SIDE_BY_SIDE_WEIGHTS: usize = 1 << 16;

/// The tensors, optimizers and randomness of a policy on device `D`.
pub struct PolicyCore<D: NetDevice> {
    /// The trainable tensors; their flat order is the weights' layout.
    pub params: Params<D>,
    /// A slowly moving copy of `params` (target networks), if the algorithm
    /// has one.
    pub target: Option<Params<D>>,
    /// Action sampling, exploration and minibatch shuffling.
    pub rng: ChaCha8Rng,
    groups: Vec<Group>,
    observation_space: Space,
    action_space: Space,
    /// Each group's span of the weights while it steps, read out of
    /// `params` and written back (kept from step to step: no allocation
    /// and no zeroing a step).
    stepped: Vec<Vec<f32>>,
}

// SAFETY: the core owns every clone of its device handle: `params` and
// `target` hold them, built from the device `on_device` opened for this
// policy alone, and no method hands a tensor out (layers and custom
// networks hold ids, not tensors; `NetDevice::conv2d` and the losses get
// tensors only for the length of a call). Sending the core sends them all
// together, which `NetDevice` promises is sound. The core (or its weights)
// is shared between threads only as a `PolicyCore<Cpu>` or `Params<Cpu>`
// (`as_cpu`, in `join_on_cpu!`), whose `Sync` the compiler checks; a core on
// another device is never shared.
// The other fields are plain data.
unsafe impl<D: NetDevice> Send for PolicyCore<D> {}

/// `($a, $b)` for two computations that only read `$core` (a
/// [`PolicyCore`] or [`Params`](crate::model::Params): anything with an
/// `as_cpu`), named `$c` in both: side by side when it is on the CPU, `$a`
/// on the calling thread and `$b` on one of rayon's; one after the other
/// on any other device, whose handle may not be shared between threads.
///
/// Off-policy updates are two such halves, the critics' and the actor's
/// gradients of the same minibatch and weights; side by side, a small
/// network's update takes about the time of its larger half (the book's
/// performance page has the figures). Put the longer one first: the
/// calling thread runs it and then waits for the other only if that is
/// still running. (`rayon::join` called from outside rayon's pool would
/// hand both to the pool and put the caller to sleep until they finish,
/// which cost 10–25 µs per update on the 2-core machine.) Each half keeps
/// its matrix products on its own thread
/// ([`side_by_side_pair`](crate::model::side_by_side_pair)). A macro rather
/// than a function because each expression is generic in the device and is
/// instantiated once for `Cpu` and once for `D`; on the CPU each runs
/// inside a closure, so neither may use `?` or `return` (apply `?` to the
/// results).
macro_rules! join_on_cpu {
    ($core:expr, |$c:ident| $a:expr, $b:expr) => {{
        let core = $core;
        match core.as_cpu() {
            Some($c) => $crate::model::side_by_side_pair(|| $a, || $b),
            None => {
                let $c = core;
                ($a, $b)
            }
        }
    }};
}
pub(crate) use join_on_cpu;

impl<D: NetDevice> PolicyCore<D> {
    /// This core, if its device is the CPU (see `join_on_cpu!`).
    pub fn as_cpu(&self) -> Option<&PolicyCore<Cpu>> {
        (self as &dyn std::any::Any).downcast_ref()
    }

    /// A core over `params`, for the given spaces; sampling draws from
    /// `rng_seed`.
    pub fn new(params: Params<D>, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        Self {
            params,
            target: None,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            groups: Vec::new(),
            observation_space,
            action_space,
            stepped: Vec::new(),
        }
    }

    /// Keeps a target copy of the tensors, starting equal to them.
    pub fn with_target(mut self) -> Self {
        self.target = Some(self.params.clone());
        self
    }

    /// Adds an Adam optimizer (betas 0.9, 0.999) with learning rate `lr`
    /// over `range` of the weights, clipping its gradient's global norm to
    /// `grad_clip`; returns its index for [`step`](Self::step).
    pub fn add_optimizer(&mut self, range: Range<usize>, lr: f64, eps: f32, grad_clip: Option<f64>) -> usize {
        let adam = Adam::new(range.len(), lr as f32, eps);
        self.add_group(Group { range, adam, grad_clip: grad_clip.map(|c| c as f32), rmsprop: None })
    }

    /// Adds an RMSprop optimizer (decay `alpha`, no momentum) over `range`,
    /// otherwise as [`add_optimizer`](Self::add_optimizer).
    pub fn add_rmsprop(&mut self, range: Range<usize>, lr: f64, alpha: f32, eps: f32, grad_clip: Option<f64>) -> usize {
        let rmsprop = Some(RmsProp::new(range.len(), lr as f32, alpha, eps));
        self.add_group(Group {
            range,
            adam: Adam::new(0, lr as f32, eps),
            grad_clip: grad_clip.map(|c| c as f32),
            rmsprop,
        })
    }

    fn add_group(&mut self, group: Group) -> usize {
        self.groups.push(group);
        self.stepped.push(Vec::new());
        self.groups.len() - 1
    }

    /// The span of the weights optimizer `group` updates.
    pub fn range(&self, group: usize) -> Range<usize> {
        self.groups[group].range.clone()
    }

    /// One step of optimizer `group` with `grad` (its span's gradient):
    /// clip, then the update rule. Returns the norm before clipping.
    ///
    /// # Errors
    /// A non-finite gradient, or one of the wrong length.
    pub fn step(&mut self, group: usize, grad: &mut [f32]) -> Result<f32, PolicyError> {
        let (g, weights) = (&mut self.groups[group], &mut self.stepped[group]);
        self.params.read_into(g.range.clone(), weights);
        let norm = g.step(weights, grad)?;
        self.params.write(g.range.clone(), weights);
        Ok(norm)
    }

    /// [`step`](Self::step) for each of `groups` (distinct) with its span
    /// of `grad` (the whole weights' gradient); their norms before
    /// clipping, in `groups`' order.
    ///
    /// A group's update reads and writes only its own span, so where
    /// they update at least [`SIDE_BY_SIDE_WEIGHTS`] weights in all, the
    /// first group steps on this thread while the others step on a
    /// second: the same floats, in about half the time for an
    /// off-policy update's critics beside its actor. The weights are read
    /// out before and written back after, on this thread.
    ///
    /// # Errors
    /// As [`step`](Self::step).
    pub fn step_groups(&mut self, groups: &[usize], grad: &mut [f32]) -> Result<Vec<f32>, PolicyError> {
        self.check_len("gradients", grad.len())?;
        let weights: usize = groups.iter().map(|&g| self.groups[g].range.len()).sum();
        if groups.len() < 2 || weights < SIDE_BY_SIDE_WEIGHTS {
            return groups.iter().map(|&g| self.step(g, &mut grad[self.range(g)])).collect();
        }
        for &g in groups {
            self.params.read_into(self.groups[g].range.clone(), &mut self.stepped[g]);
        }
        // Each named group with its weights and its span of `grad`, taken
        // apart in the weights' order, then put in `groups`' order.
        let mut by_start: Vec<(usize, usize)> = groups.iter().enumerate().map(|(i, &g)| (i, g)).collect();
        by_start.sort_by_key(|&(_, g)| self.groups[g].range.start);
        let mut named: Vec<_> = self.groups.iter_mut().zip(&mut self.stepped).map(Some).collect();
        let (mut rest, mut at) = (grad, 0);
        let mut parts = Vec::with_capacity(groups.len());
        for (i, g) in by_start {
            let (group, weights) = named[g].take().expect("each group named once");
            let span = group.range.clone();
            assert!(span.start >= at, "optimizer groups over overlapping weights: {span:?} starts before {at}");
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(span.start - at);
            let (grad, tail) = tail.split_at_mut(span.len());
            (rest, at) = (tail, span.end);
            parts.push((i, group, weights, grad));
        }
        parts.sort_by_key(|part| part.0);
        let step =
            |(_, group, weights, grad): (usize, &mut Group, &mut Vec<f32>, &mut [f32])| group.step(weights, grad);
        let mut parts = parts.into_iter();
        let first = parts.next().expect("two groups at least");
        let (first, others) =
            crate::model::side_by_side_pair(|| step(first), || parts.map(step).collect::<Result<Vec<_>, _>>());
        // Written back whatever happened: a group that failed (a gradient
        // that is not finite) left its weights as they were read.
        for &g in groups {
            self.params.write(self.groups[g].range.clone(), &self.stepped[g]);
        }
        let mut norms = vec![first?];
        norms.extend(others?);
        Ok(norms)
    }

    /// Every optimizer steps on its span of `grad` (the whole weights'
    /// gradient); `grad_norm` (before clipping) goes into `stats`, per
    /// group when there are several.
    ///
    /// # Errors
    /// As [`step`](Self::step).
    pub fn step_all(&mut self, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        self.check_len("gradients", grad.len())?;
        let mut stats = LearnerStats::default();
        for group in 0..self.groups.len() {
            let range = self.range(group);
            let norm = self.step(group, &mut grad[range])?;
            stats.set("grad_norm", norm as f64);
        }
        Ok(stats)
    }

    /// The unclipped gradient of `loss` for `range` of the weights.
    ///
    /// # Errors
    /// [`PolicyError::NonFinite`] naming `what` if the loss is not finite.
    pub fn backward(&self, loss: Loss<D>, what: &str, range: Range<usize>) -> Result<(f32, Vec<f32>), PolicyError> {
        let value = loss.as_vec()[0];
        if !value.is_finite() {
            return Err(PolicyError::NonFinite(what.into()));
        }
        let mut grads = loss.backward();
        Ok((value, self.params.grads(&mut grads, range)))
    }

    /// Scalars of the weights.
    pub fn num_params(&self) -> usize {
        self.params.len()
    }

    /// [`PolicyError::WrongLength`] unless `len` is the weights' length.
    ///
    /// # Errors
    /// As said.
    pub fn check_len(&self, what: &'static str, len: usize) -> Result<(), PolicyError> {
        let expected = self.num_params();
        if len != expected {
            return Err(PolicyError::WrongLength { what, expected, got: len });
        }
        Ok(())
    }
}

/// What an algorithm supplies to the shared core: acting, postprocessing,
/// its gradient, and how a gradient is applied.
pub trait PolicyAlgorithm<D: NetDevice>: Send + 'static {
    /// Algorithm state that checkpoints save besides the core's
    /// (exploration counters, update counts, ...).
    type State: Serialize + DeserializeOwned;

    /// Acts on `input` (see [`PolicyGraph::compute_actions_from_input`]):
    /// the `actions` column and whatever else the algorithm records per
    /// row (`action_logp`, `vf_preds`, `state_out`, ...).
    ///
    /// # Errors
    /// Bad input, or a policy failure.
    fn act(&mut self, core: &mut PolicyCore<D>, input: &PolicyInput<'_>) -> Result<SampleBatch, PolicyError>;

    /// Completes one trajectory fragment (see
    /// [`PolicyGraph::postprocess_trajectory`]).
    ///
    /// # Errors
    /// A missing field.
    fn postprocess(&mut self, core: &mut PolicyCore<D>, traj: &mut SampleBatch) -> Result<(), PolicyError>;

    /// The unclipped gradient of the loss on `batch`, in the weights'
    /// layout, with statistics.
    ///
    /// # Errors
    /// A missing field, or a non-finite loss.
    fn gradient(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(Vec<f32>, LearnerStats), PolicyError>;

    /// Applies a gradient of the whole weights (checked for length), with
    /// statistics: by default every optimizer steps on its span.
    ///
    /// # Errors
    /// A non-finite gradient.
    fn apply(&mut self, core: &mut PolicyCore<D>, grad: &mut [f32]) -> Result<LearnerStats, PolicyError> {
        core.step_all(grad)
    }

    /// Learns from a batch: by default one gradient, applied.
    ///
    /// # Errors
    /// As [`gradient`](Self::gradient) and [`apply`](Self::apply).
    fn learn(&mut self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (mut grad, mut stats) = self.gradient(core, batch)?;
        stats.merge(self.apply(core, &mut grad)?);
        Ok(stats)
    }

    /// Learns, and returns the TD errors of the learning pass (see
    /// [`PolicyGraph::learn_with_td_errors`]): by default, computed again
    /// after learning.
    ///
    /// # Errors
    /// As [`learn`](Self::learn) and [`td_errors`](Self::td_errors).
    fn learn_with_td_errors(
        &mut self,
        core: &mut PolicyCore<D>,
        batch: &SampleBatch,
    ) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        let stats = self.learn(core, batch)?;
        Ok((stats, self.td_errors(core, batch)?))
    }

    /// TD errors for prioritized replay (see [`PolicyGraph::td_errors`]).
    ///
    /// # Errors
    /// By default: the algorithm has none.
    fn td_errors(&mut self, core: &mut PolicyCore<D>, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let _ = (core, batch);
        Err(PolicyError::Other(
            "this policy computes no TD errors; prioritized replay needs a Q-learning policy (e.g. DQN)".into(),
        ))
    }

    /// See [`PolicyGraph::action_probabilities`].
    ///
    /// # Errors
    /// By default: the algorithm has none.
    fn action_probabilities(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let _ = (core, obs);
        Err(PolicyError::Other("this policy gives no action probabilities for off-policy estimates".into()))
    }

    /// See [`PolicyGraph::action_distribution`].
    ///
    /// # Errors
    /// By default: the algorithm has none.
    fn action_distribution(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        let _ = (core, obs);
        Err(PolicyError::Other("this policy gives no action distribution for off-policy estimates".into()))
    }

    /// See [`PolicyGraph::policy_and_value`].
    ///
    /// # Errors
    /// By default: the algorithm has none.
    fn policy_and_value(&mut self, core: &mut PolicyCore<D>, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>), PolicyError> {
        let _ = (core, obs);
        Err(PolicyError::Other("this policy gives no action probabilities and values for a tree search".into()))
    }

    /// Width of the recurrent state (0: feed-forward).
    fn recurrent_state_size(&self) -> usize {
        0
    }

    /// See [`PolicyGraph::export`].
    ///
    /// # Errors
    /// By default: the algorithm gives no description.
    fn export(&self, core: &PolicyCore<D>) -> Result<PolicyExport, PolicyError> {
        let _ = core;
        Err(PolicyError::Other("this algorithm's policy does not describe its acting network for export".into()))
    }

    /// The state to save.
    fn state(&self) -> Self::State;

    /// Restores a saved state.
    fn set_state(&mut self, state: Self::State);
}

/// A built-in deep policy: the shared [`PolicyCore`] driven by an
/// algorithm's [`PolicyAlgorithm`].
pub struct DeepPolicy<A, D: NetDevice> {
    core: PolicyCore<D>,
    algo: A,
}

/// What [`DeepPolicy`] saves besides its weights.
#[derive(Serialize, Deserialize)]
struct SavedState<S> {
    groups: Vec<Group>,
    rng: ChaCha8Rng,
    target: Option<Vec<f32>>,
    algorithm: S,
}

impl<A: PolicyAlgorithm<D>, D: NetDevice> DeepPolicy<A, D> {
    /// The policy of `algo` on `core`.
    pub fn new(core: PolicyCore<D>, algo: A) -> Self {
        Self { core, algo }
    }

    /// The core.
    pub fn core(&self) -> &PolicyCore<D> {
        &self.core
    }

    /// The algorithm's part.
    pub fn algorithm(&self) -> &A {
        &self.algo
    }

    /// Both, mutably.
    pub fn parts_mut(&mut self) -> (&mut PolicyCore<D>, &mut A) {
        (&mut self.core, &mut self.algo)
    }
}

impl<A: PolicyAlgorithm<D>, D: NetDevice> PolicyGraph for DeepPolicy<A, D> {
    fn spaces(&self) -> (&Space, &Space) {
        (&self.core.observation_space, &self.core.action_space)
    }

    fn compute_actions_from_input(
        &mut self,
        input: &PolicyInput<'_>,
        out: &mut SampleBatch,
    ) -> Result<(), PolicyError> {
        *out = self.algo.act(&mut self.core, input)?;
        Ok(())
    }

    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        self.compute_actions_from_input(&PolicyInput::obs(obs, explore), out)
    }

    fn recurrent_state_size(&self) -> usize {
        self.algo.recurrent_state_size()
    }

    fn export(&self) -> Result<PolicyExport, PolicyError> {
        self.algo.export(&self.core)
    }

    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        self.algo.postprocess(&mut self.core, traj)
    }

    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        self.algo.learn(&mut self.core, batch)
    }

    /// The unclipped gradient: whoever applies it clips (so averaged
    /// gradients are clipped once, after averaging).
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let (grad, mut stats) = self.algo.gradient(&mut self.core, batch)?;
        stats.set("grad_norm", rlx::policy::global_norm(&grad));
        Ok((grad, stats))
    }

    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        self.core.check_len("gradients", grads.len())?;
        self.algo.apply(&mut self.core, &mut grads.to_vec()).map(drop)
    }

    fn td_errors(&mut self, batch: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        self.algo.td_errors(&mut self.core, batch)
    }

    fn action_probabilities(&mut self, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        self.algo.action_probabilities(&mut self.core, obs)
    }

    fn action_distribution(&mut self, obs: &[f32]) -> Result<GaussianActions, PolicyError> {
        self.algo.action_distribution(&mut self.core, obs)
    }

    fn policy_and_value(&mut self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>), PolicyError> {
        self.algo.policy_and_value(&mut self.core, obs)
    }

    fn learn_with_td_errors(&mut self, batch: &SampleBatch) -> Result<(LearnerStats, Vec<f32>), PolicyError> {
        self.algo.learn_with_td_errors(&mut self.core, batch)
    }

    fn get_weights(&self) -> FlatWeights {
        self.core.params.to_vec()
    }

    /// Sets the weights, and the target copy alike: a policy given weights
    /// (a restored checkpoint) bootstraps from them too.
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        self.core.params.load(weights)?;
        if let Some(target) = &mut self.core.target {
            target.load(weights)?;
        }
        Ok(())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        let saved = SavedState {
            groups: self.core.groups.clone(),
            rng: self.core.rng.clone(),
            target: self.core.target.as_ref().map(Params::to_vec),
            algorithm: self.algo.state(),
        };
        rlx::codec::encode_value(&saved).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let saved: SavedState<A::State> = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a saved state of this policy: {e}")))?;
        let same_layout = saved.groups.len() == self.core.groups.len()
            && saved
                .groups
                .iter()
                .zip(&self.core.groups)
                .all(|(s, g)| s.range == g.range && s.num_params() == g.range.len())
            && saved.target.as_ref().map(Vec::len) == self.core.target.as_ref().map(Params::len);
        if let Some((s, g)) = saved.groups.iter().zip(&self.core.groups).find(|(s, g)| s.rule() != g.rule()) {
            return Err(PolicyError::Other(format!(
                "the saved optimizer is {}, this policy's `optimizer` is {}",
                s.rule(),
                g.rule()
            )));
        }
        if !same_layout {
            return Err(PolicyError::Other(format!(
                "the saved optimizer state is for another network (this one has {} parameters)",
                self.core.num_params()
            )));
        }
        if let (Some(target), Some(saved)) = (&mut self.core.target, &saved.target) {
            target.load(saved)?;
        }
        self.core.groups = saved.groups;
        self.core.rng = saved.rng;
        self.algo.set_state(saved.algorithm);
        Ok(())
    }

    /// A safetensors file with one tensor per layer, named by its place in
    /// the network (`pi.torso.0.weight` is the policy's first layer).
    fn save_weights(&self, path: &std::path::Path) -> Result<(), PolicyError> {
        Ok(rlx::weights_file::write_safetensors(path, &self.core.params.named())?)
    }

    fn load_weights(&mut self, path: &std::path::Path) -> Result<(), PolicyError> {
        let tensors = rlx::weights_file::read_safetensors(path)?;
        // Load into a copy, so a bad file leaves the policy as it was.
        let mut params = self.core.params.clone();
        params
            .load_named(&tensors)
            .map_err(|e| PolicyError::Other(format!("{}: not weights of this network: {e}", path.display())))?;
        let weights = params.to_vec();
        self.set_weights(&weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group as saved before RMSprop existed.
    #[derive(Serialize)]
    struct GroupBeforeRmsprop {
        range: Range<usize>,
        adam: Adam,
        grad_clip: Option<f32>,
    }

    /// Three groups stepped together, large enough to go side by side,
    /// give the weights and norms of stepping them one at a time, to the
    /// bit, whatever the order they are named in.
    #[test]
    fn groups_stepped_side_by_side_give_the_same_floats() {
        let sizes = [40_000, 30_000, 20_000];
        assert!(sizes.iter().sum::<usize>() >= SIDE_BY_SIDE_WEIGHTS);
        let core = || {
            let mut p = Params::new(Cpu::seed_from_u64(0));
            for &n in &sizes {
                p.uniform("w", &[n], 0.5);
            }
            let mut core = PolicyCore::new(p, Space::discrete(2), Space::discrete(2), 0);
            let mut start = 0;
            for (i, &n) in sizes.iter().enumerate() {
                let clip = (i == 1).then_some(1.0);
                core.add_optimizer(start..start + n, 1e-3 * (i + 1) as f64, 1e-8, clip);
                start += n;
            }
            core
        };
        let n: usize = sizes.iter().sum();
        let grad: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-3).collect();
        let (mut one_by_one, mut together) = (core(), core());
        for _ in 0..3 {
            let mut g = grad.clone();
            let order = [2, 0, 1];
            let alone: Vec<f32> =
                order.iter().map(|&i| one_by_one.step(i, &mut g[one_by_one.range(i)]).unwrap()).collect();
            let mut g = grad.clone();
            assert_eq!(together.step_groups(&order, &mut g).unwrap(), alone);
            assert_eq!(together.params.to_vec(), one_by_one.params.to_vec());
        }
        assert_ne!(together.params.to_vec(), core().params.to_vec(), "the steps moved the weights");
    }

    #[test]
    fn optimizer_groups_saved_before_rmsprop_still_read() {
        let mut adam = Adam::new(3, 0.01, 1e-8);
        let mut p = vec![0.5f32; 3];
        adam.update(&mut p, &[0.1, 0.2, 0.3]).unwrap();
        let old = vec![GroupBeforeRmsprop { range: 0..3, adam: adam.clone(), grad_clip: Some(0.5) }];
        let read: Vec<Group> = rlx::codec::decode_value(&rlx::codec::encode_value(&old).unwrap()).unwrap();
        assert_eq!(read, vec![Group { range: 0..3, adam, grad_clip: Some(0.5), rmsprop: None }]);
        assert_eq!(read[0].rule(), "adam");
        let rms = vec![Group {
            range: 0..2,
            adam: Adam::new(0, 0.1, 1e-5),
            grad_clip: None,
            rmsprop: Some(RmsProp::new(2, 0.1, 0.99, 1e-5)),
        }];
        let back: Vec<Group> = rlx::codec::decode_value(&rlx::codec::encode_value(&rms).unwrap()).unwrap();
        assert_eq!(back, rms);
        assert_eq!((back[0].rule(), back[0].num_params()), ("rmsprop", 2));
    }
}
