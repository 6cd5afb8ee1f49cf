//! The actor-critic policy graph shared by the policy-gradient family (PG,
//! A2C, A3C, PPO, IMPALA, APPO).
//!
//! Everything these algorithms have in common lives here: separate 2×64 tanh
//! MLPs for the policy (logits) and the value function, batched categorical
//! sampling, bootstrapping a cut trajectory from `V(s_T)`, Adam, gradient-norm
//! clipping, minibatch epochs, and flat weights and gradients. What differs —
//! how a trajectory is postprocessed and the loss — is the algorithm's
//! [`ActorCriticLoss`], which each algorithm's file implements in a few
//! lines.
//!
//! The policy is generic over the dfdx device `D` (see [`crate::device`]):
//! tensors live on `D`, while weights, gradients and Adam's moments cross to
//! the host as flat vectors, which is what the optimizers ship and what
//! checkpoints save.

use crate::device::DeviceSpec;
use crate::nn::{self, Mlp, HIDDEN};
use crate::{dispatch_dims, BuildError};
use dfdx::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::policy::bootstrap_needed;
use rlx::postprocessing::value_fit_stats;
use rlx::{fields, FlatGradients, FlatWeights, LearnerStats, PolicyError, PolicyGraph, SampleBatch, Space};

/// Policy head (logits over `A` actions) and value head, each a 2×`H` tanh
/// MLP.
pub type ActorCritic<const O: usize, const A: usize, const H: usize = HIDDEN> = SplitInto<(Mlp<O, A, H>, Mlp<O, 1, H>)>;
/// The built network of [`ActorCritic`] on device `D` (named concretely so
/// the policy can be generic over `D`).
type Model<const O: usize, const A: usize, const H: usize, D> =
    SplitInto<(nn::MlpOn<O, A, H, D>, nn::MlpOn<O, 1, H, D>)>;

/// A taped scalar loss on device `D`.
pub type Loss<D = Cpu> = Tensor<Rank0, f32, D, OwnedTape<f32, D>>;
/// A taped vector (one value per minibatch row) on device `D`.
pub type Taped<D> = Tensor<(usize,), f32, D, OwnedTape<f32, D>>;

/// Marks the last row of every trajectory fragment (1.0), so losses that need
/// sequences (V-trace) can find the boundaries in a concatenated batch.
pub const TRAJ_ENDS: &str = "traj_ends";

/// What a loss sees of one forward pass over a minibatch.
pub struct Forward<const A: usize, D: Device<f32> = Cpu> {
    /// `log π(·|s)` for every row, on the tape.
    pub log_probs: Tensor<(usize, Const<A>), f32, D, OwnedTape<f32, D>>,
    /// `V(s)` for every row, on the tape.
    pub values: Taped<D>,
    /// `V(s')` of the next observation with the current weights (no
    /// gradient) at the last row of every trajectory fragment (`traj_ends`),
    /// 0 elsewhere — where the next row's value is `values` itself — when the
    /// loss asks for it ([`ActorCriticLoss::NEEDS_NEXT_VALUES`]).
    pub next_values: Option<Vec<f32>>,
    /// The taken actions.
    pub actions: Tensor<(usize,), usize, D>,
}

impl<const A: usize, D: Device<f32>> Forward<A, D> {
    /// `(log π(a|s) of the taken actions, mean entropy, V(s))`, each on the
    /// tape (read [`next_values`](Self::next_values) before splitting).
    pub fn split(self) -> (Taped<D>, Loss<D>, Taped<D>) {
        let entropy = entropy(&self.log_probs);
        let logp = self.log_probs.select(self.actions);
        (logp, entropy, self.values)
    }
}

/// Mean entropy `−Σ_a π(a|s) log π(a|s)` of a batch of log-probabilities.
pub fn entropy<const A: usize, D: Device<f32>>(
    log_probs: &Tensor<(usize, Const<A>), f32, D, OwnedTape<f32, D>>,
) -> Loss<D> {
    (log_probs.with_empty_tape().exp() * log_probs.with_empty_tape()).sum::<_, Axis<1>>().mean().negate()
}

/// How the learner steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearnerSettings {
    /// Adam learning rate.
    pub lr: f64,
    /// Epochs over each train batch.
    pub num_sgd_iter: usize,
    /// Shuffled minibatches of about this many rows; `None` takes the whole
    /// batch in order (needed by losses over sequences).
    pub sgd_minibatch_size: Option<usize>,
    /// Maximum global gradient norm.
    pub grad_clip: Option<f64>,
    /// Seeds the initial weights (identical on every evaluator).
    pub seed: u64,
    /// Where the policy's tensors live.
    pub device: DeviceSpec,
}

/// An algorithm's part of an actor-critic policy.
pub trait ActorCriticLoss: Clone + Send + Sync + 'static {
    /// Whether [`Forward::next_values`] must be computed.
    const NEEDS_NEXT_VALUES: bool = false;

    /// Learning rate, epochs, minibatches, clipping, seed.
    fn learner(&self) -> LearnerSettings;

    /// Adds the fields the loss needs (advantages, value targets...) to one
    /// trajectory fragment. `bootstrap` is `V(s_T)` of the observation after
    /// the last row, or 0 if the last row terminated the episode.
    ///
    /// # Errors
    /// A missing field.
    fn postprocess(&self, traj: &mut SampleBatch, bootstrap: f32) -> Result<(), PolicyError>;

    /// The loss on one minibatch, and statistics to report. Use `dev` to
    /// make tensors, but keep no clone of it (or of the tensors) past the
    /// call: the policy's `Send` rests on owning every clone of its device.
    ///
    /// # Errors
    /// A missing field.
    fn loss<const A: usize, D: Device<f32>>(
        &self,
        fwd: Forward<A, D>,
        mb: &SampleBatch,
        dev: &D,
    ) -> Result<(Loss<D>, LearnerStats), PolicyError>;
}

/// A column of `batch` as a tensor.
///
/// # Errors
/// If the field is missing or not `f32`.
pub fn column<D: Device<f32>>(
    dev: &D,
    batch: &SampleBatch,
    field: &str,
) -> Result<Tensor<(usize,), f32, D>, PolicyError> {
    Ok(dev.tensor_from_vec(batch.f32(field)?.to_vec(), (batch.len(),)))
}

/// The vanilla actor-critic loss shared by PG, A2C and A3C:
///
/// ```text
/// L = −E[log π(a|s)·Â]  +  c_v·½E[(V(s) − V_target)²]  −  c_e·H[π(·|s)]
/// ```
///
/// with `Â` = `advantages` and `V_target` = `value_targets` from
/// postprocessing.
///
/// # Errors
/// A missing field.
pub fn policy_gradient_loss<const A: usize, D: Device<f32>>(
    fwd: Forward<A, D>,
    mb: &SampleBatch,
    dev: &D,
    vf_loss_coeff: f64,
    entropy_coeff: f64,
) -> Result<(Loss<D>, LearnerStats), PolicyError> {
    let (advantages, value_targets) = (column(dev, mb, fields::ADVANTAGES)?, column(dev, mb, fields::VALUE_TARGETS)?);
    let (logp, entropy, values) = fwd.split();
    let policy_loss = (logp * advantages).mean().negate();
    let vf_loss = (values - value_targets).square().mean() * 0.5;
    let mut stats = LearnerStats::default();
    stats.set("policy_loss", policy_loss.as_vec()[0] as f64);
    stats.set("vf_loss", vf_loss.as_vec()[0] as f64);
    stats.set("entropy", entropy.as_vec()[0] as f64);
    Ok((policy_loss + vf_loss * vf_loss_coeff as f32 - entropy * entropy_coeff as f32, stats))
}

/// An actor-critic policy for `O`-dimensional observations and `A` actions,
/// learning with the loss `L`, on dfdx device `D`, with hidden width `H`.
pub struct ActorCriticPolicy<const O: usize, const A: usize, L, D: Device<f32> = Cpu, const H: usize = HIDDEN> {
    loss_fn: L,
    dev: D,
    model: Model<O, A, H, D>,
    adam: nn::Adam,
    grads: Option<Gradients<f32, D>>,
    rng: ChaCha8Rng,
    observation_space: Space,
    action_space: Space,
}

/// A dfdx device whose handle may move to another thread together with
/// everything that holds a clone of it (the policy's tensors).
///
/// # Safety
/// Implement only for devices for which that holds.
pub unsafe trait MovableDevice: Device<f32> {}

// SAFETY: `Cpu` is `Send` (its RNG is behind a mutex).
unsafe impl MovableDevice for Cpu {}

// SAFETY: dfdx 0.13's `Cuda` (without dfdx's `cudnn` feature, whose handle
// cudarc keeps `!Send` on purpose; rlx never enables it) is `!Send` only
// because cudarc 0.9's `CudaStream` (a raw `CUstream` handle) lacks the
// marker; cudarc's
// `CudaDevice` is `Send + Sync` and binds its context to the calling thread
// before every allocation and kernel launch, and CUDA lets any host thread
// use a stream of its context.
#[cfg(feature = "cuda")]
unsafe impl MovableDevice for Cuda {}

// SAFETY: every clone of the policy's device handle (the device itself and
// the model and gradient tensors that hold one) is owned by the policy: the
// public constructors (`new`, `on_cuda`) build the device themselves, none
// of the policy's methods hands a clone out, and losses must not keep the
// `&D` they are lent (`ActorCriticLoss::loss`). Sending the policy sends them
// all together
// (`MovableDevice`); the policy is never shared (`PolicyGraph` is not
// `Sync`). The other fields are `Send`: the loss is `Send + Sync` by
// `ActorCriticLoss`, the RNG, Adam and spaces are plain data.
unsafe impl<const O: usize, const A: usize, L: ActorCriticLoss, D: MovableDevice, const H: usize> Send
    for ActorCriticPolicy<O, A, L, D, H>
{
}

impl<const O: usize, const A: usize, L: ActorCriticLoss, const H: usize> ActorCriticPolicy<O, A, L, Cpu, H> {
    /// A policy on the CPU. Initial weights depend only on the loss's
    /// `seed` (every evaluator starts identical); action sampling and
    /// shuffling use `rng_seed`.
    pub fn new(loss_fn: L, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        let dev = Cpu::seed_from_u64(loss_fn.learner().seed);
        Self::on_device(dev, loss_fn, observation_space, action_space, rng_seed)
    }
}

#[cfg(feature = "cuda")]
impl<const O: usize, const A: usize, L: ActorCriticLoss, const H: usize> ActorCriticPolicy<O, A, L, Cuda, H> {
    /// A policy on CUDA device `ordinal`, initial weights from the loss's
    /// `seed`.
    ///
    /// # Errors
    /// [`BuildError::Unsupported`] if the device cannot be opened
    /// ([`crate::device::open_cuda`]).
    pub fn on_cuda(
        ordinal: usize,
        loss_fn: L,
        observation_space: Space,
        action_space: Space,
        rng_seed: u64,
    ) -> Result<Self, BuildError> {
        let dev = crate::device::open_cuda(ordinal, loss_fn.learner().seed)?;
        Ok(Self::on_device(dev, loss_fn, observation_space, action_space, rng_seed))
    }
}

impl<const O: usize, const A: usize, L: ActorCriticLoss, D: Device<f32>, const H: usize>
    ActorCriticPolicy<O, A, L, D, H>
{
    /// A policy on `dev`, whose seed determines the initial weights. Private:
    /// the policy must own every clone of its device handle (see the `Send`
    /// impl), so public constructors build the device themselves.
    fn on_device(dev: D, loss_fn: L, observation_space: Space, action_space: Space, rng_seed: u64) -> Self {
        let model = Model::<O, A, H, D>::build(&dev);
        let adam = nn::Adam::new(model.num_trainable_params(), loss_fn.learner().lr as f32, 1e-5);
        Self {
            loss_fn,
            dev,
            model,
            adam,
            grads: None,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            observation_space,
            action_space,
        }
    }

    /// The algorithm's loss (and its config).
    pub fn loss_fn(&self) -> &L {
        &self.loss_fn
    }

    fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor<(usize, Const<O>), f32, D>, PolicyError> {
        if obs.len() % O != 0 {
            return Err(PolicyError::Other(format!(
                "{} observation values is not a whole number of rows of {O}",
                obs.len()
            )));
        }
        Ok(self.dev.tensor_from_vec(obs.to_vec(), (obs.len() / O, Const::<O>)))
    }

    /// `V(s)` for each row of `obs`, without gradient.
    fn values(&self, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        Ok(self.model.0 .1.forward(self.obs_tensor(obs)?).as_vec())
    }

    /// `V(s')` of `new_obs` at the rows that end a fragment, 0 elsewhere.
    fn values_at_ends(&self, mb: &SampleBatch) -> Result<Vec<f32>, PolicyError> {
        let (ends, new_obs) = (mb.f32(TRAJ_ENDS)?, mb.f32(fields::NEW_OBS)?);
        let rows: Vec<usize> = (0..mb.len()).filter(|&t| ends[t] != 0.0).collect();
        let obs: Vec<f32> = rows.iter().flat_map(|&t| new_obs[t * O..(t + 1) * O].iter().copied()).collect();
        let mut out = vec![0.0; mb.len()];
        if !rows.is_empty() {
            for (&t, v) in rows.iter().zip(self.values(&obs)?) {
                out[t] = v;
            }
        }
        Ok(out)
    }

    /// Forward pass with the tape, loss and backward: the flat, unclipped
    /// gradient of the minibatch's loss.
    fn backward(&mut self, mb: &SampleBatch) -> Result<(Vec<f32>, LearnerStats), PolicyError> {
        let n = mb.len();
        let obs = self.obs_tensor(mb.f32(fields::OBS)?)?;
        let next_values = if L::NEEDS_NEXT_VALUES { Some(self.values_at_ends(mb)?) } else { None };
        let actions: Vec<usize> = mb.i64(fields::ACTIONS)?.iter().map(|&a| a as usize).collect();
        let grads = self.grads.take().unwrap_or_else(|| self.model.alloc_grads());
        let (logits, values) = self.model.forward(obs.traced(grads));
        let fwd = Forward {
            log_probs: logits.log_softmax::<Axis<1>>(),
            values: values.reshape_like(&(n,)),
            next_values,
            actions: self.dev.tensor_from_vec(actions, (n,)),
        };
        let (loss, mut stats) = self.loss_fn.loss(fwd, mb, &self.dev)?;
        let total = loss.as_vec()[0];
        if !total.is_finite() {
            return Err(PolicyError::NonFinite("loss".into()));
        }
        stats.set("total_loss", total as f64);
        let mut grads = loss.backward();
        let flat = nn::flat_grads(&self.model, &grads);
        // Keep the zeroed buffers for the next pass.
        self.model.zero_grads(&mut grads);
        self.grads = Some(grads);
        Ok((flat, stats))
    }

    /// Clips the gradient's global norm, then one Adam step. Returns the
    /// norm before clipping.
    fn step(&mut self, mut grad: Vec<f32>) -> Result<f32, PolicyError> {
        let norm = nn::clip_grad_norm(&mut grad, self.loss_fn.learner().grad_clip.map(|c| c as f32))?;
        let mut params = nn::flat_params(&self.model);
        self.adam.update(&mut params, &grad)?;
        nn::load_params(&mut self.model, &params)?;
        Ok(norm)
    }

    /// `backward` then `step`, with the norm in the stats.
    fn sgd_step(&mut self, mb: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let (grad, mut stats) = self.backward(mb)?;
        stats.set("grad_norm", self.step(grad)? as f64);
        Ok(stats)
    }
}

/// What [`ActorCriticPolicy`] saves besides its weights.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedState {
    adam: nn::Adam,
    rng: ChaCha8Rng,
}

impl<const O: usize, const A: usize, L: ActorCriticLoss, D: Device<f32>, const H: usize> PolicyGraph
    for ActorCriticPolicy<O, A, L, D, H>
where
    Self: Send,
{
    fn observation_space(&self) -> &Space {
        &self.observation_space
    }

    fn action_space(&self) -> &Space {
        &self.action_space
    }

    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        // Acting uses the tape-free forward with the fast tanh (`nn::mlp_act`).
        let x = self.obs_tensor(obs)?;
        let values = nn::to_vec(&nn::mlp_act(&self.model.0 .1, x.clone()));
        let logits = nn::to_vec(&nn::mlp_act(&self.model.0 .0, x));
        let n = logits.len() / A;
        let (mut actions, mut logp) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for row in logits.chunks_exact(A) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum_exp: f32 = row.iter().map(|&l| (l - max).exp()).sum();
            let log_z = max + sum_exp.ln();
            let a = if explore {
                // Inverse-CDF sampling from softmax(row).
                let u: f32 = self.rng.gen::<f32>() * sum_exp;
                let mut acc = 0.0;
                row.iter()
                    .position(|&l| {
                        acc += (l - max).exp();
                        u < acc
                    })
                    .unwrap_or(A - 1)
            } else {
                (0..A).fold(0, |best, i| if row[i] > row[best] { i } else { best })
            };
            actions.push(a as i64);
            logp.push(row[a] - log_z);
        }
        *out = SampleBatch::new();
        out.insert_i64(fields::ACTIONS, actions, 1)?;
        out.insert_f32(fields::ACTION_LOGP, logp, 1)?;
        out.insert_f32(fields::VF_PREDS, values, 1)?;
        Ok(())
    }

    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        let bootstrap = if bootstrap_needed(traj)? {
            let new_obs = traj.f32(fields::NEW_OBS)?;
            self.values(&new_obs[new_obs.len() - O..])?[0]
        } else {
            0.0
        };
        let mut ends = vec![0.0; traj.len()];
        if let Some(last) = ends.last_mut() {
            *last = 1.0;
        }
        traj.insert_f32(TRAJ_ENDS, ends, 1)?;
        self.loss_fn.postprocess(traj, bootstrap)
    }

    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        let settings = self.loss_fn.learner();
        let mut all = Vec::new();
        for _epoch in 0..settings.num_sgd_iter {
            match settings.sgd_minibatch_size {
                Some(size) => {
                    let shuffle_seed = self.rng.gen();
                    for mb in batch.minibatches(size, shuffle_seed) {
                        all.push(self.sgd_step(&mb)?);
                    }
                }
                None => all.push(self.sgd_step(batch)?),
            }
        }
        let mut stats = LearnerStats::mean(&all);
        value_fit_stats(batch, &mut stats);
        Ok(stats)
    }

    /// The unclipped gradient: whoever applies it clips (so averaged
    /// gradients are clipped once, after averaging).
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        let (grad, mut stats) = self.backward(batch)?;
        stats.set("grad_norm", rlx::policy::global_norm(&grad));
        Ok((grad, stats))
    }

    /// Clips the gradient's global norm (`grad_clip`), then one Adam step.
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        let expected = self.adam.num_params();
        if grads.len() != expected {
            return Err(PolicyError::WrongLength { what: "gradients", expected, got: grads.len() });
        }
        self.step(grads.to_vec()).map(|_| ())
    }

    fn get_weights(&self) -> FlatWeights {
        nn::flat_params(&self.model)
    }

    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        nn::load_params(&mut self.model, weights)
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        rlx::codec::encode_value(&SavedState { adam: self.adam.clone(), rng: self.rng.clone() }).ok()
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), PolicyError> {
        let saved: SavedState = rlx::codec::decode_value(state)
            .map_err(|e| PolicyError::Other(format!("not a saved state of this policy: {e}")))?;
        let expected = self.model.num_trainable_params();
        if saved.adam.num_params() != expected {
            return Err(PolicyError::Other(format!(
                "the saved optimizer state is for another network size (this one has {expected} parameters)"
            )));
        }
        self.adam = saved.adam;
        self.rng = saved.rng;
        Ok(())
    }

    /// dfdx's safetensors layout: one tensor per layer, named by its path
    /// in the network (`0.0.0.weight` is the policy net's first layer).
    fn save_weights(&self, path: &std::path::Path) -> Result<(), PolicyError> {
        self.model.save_safetensors(path).map_err(|e| PolicyError::Other(format!("{}: {e:?}", path.display())))
    }

    fn load_weights(&mut self, path: &std::path::Path) -> Result<(), PolicyError> {
        // Load into a copy, so a bad file leaves the policy as it was.
        let mut model = self.model.clone();
        model
            .load_safetensors(path)
            .map_err(|e| PolicyError::Other(format!("{}: not weights of this network: {e:?}", path.display())))?;
        self.model = model;
        Ok(())
    }
}

/// An actor-critic policy with loss `loss` for the given spaces, on the
/// device its config names.
///
/// # Errors
/// [`BuildError::Unsupported`] unless the observation space is a `Box` and
/// the action space `Discrete`, with a compiled network size; a device this
/// build or machine does not have.
pub fn make_policy<L: ActorCriticLoss>(
    algorithm: &str,
    loss: &L,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    make_policy_on(algorithm, loss, observation_space, action_space, rng_seed, loss.learner().device)
}

/// [`make_policy`] on a given device (a replica of a multi-device learner).
///
/// # Errors
/// As [`make_policy`].
pub fn make_policy_on<L: ActorCriticLoss>(
    algorithm: &str,
    loss: &L,
    observation_space: &Space,
    action_space: &Space,
    rng_seed: u64,
    device: DeviceSpec,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    let (obs_dim, n_actions) = match (observation_space, action_space) {
        (Space::Box { .. }, Space::Discrete { n }) => (observation_space.flat_dim(), *n as usize),
        _ => {
            return Err(BuildError::Unsupported(format!(
                "{algorithm} supports a Box observation space with Discrete actions; got {observation_space} and {action_space}"
            )))
        }
    };
    let (o, a) = (observation_space.clone(), action_space.clone());
    dispatch_dims!(
        obs_dim,
        n_actions,
        |OBS, ACT| build_on::<OBS, ACT, L>(loss.clone(), o, a, rng_seed, device),
        Err(BuildError::Unsupported(format!(
            "no compiled {algorithm} network for {obs_dim} observations and {n_actions} actions; supported (obs, actions): {:?}",
            nn::SUPPORTED_DIMS
        )))
    )
}

fn build_on<const O: usize, const A: usize, L: ActorCriticLoss>(
    loss: L,
    o: Space,
    a: Space,
    rng_seed: u64,
    device: DeviceSpec,
) -> Result<Box<dyn PolicyGraph>, BuildError> {
    match device {
        DeviceSpec::Cpu => Ok(Box::new(ActorCriticPolicy::<O, A, L>::new(loss, o, a, rng_seed))),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(n) => Ok(Box::new(ActorCriticPolicy::<O, A, L, Cuda>::on_cuda(n, loss, o, a, rng_seed)?)),
        #[cfg(not(feature = "cuda"))]
        DeviceSpec::Cuda(_) => Err(device.check_available().expect_err("CUDA is not in this build").into()),
    }
}
