//! dfdx plumbing shared by the built-in policies: the MLP type, flat views of
//! parameters and gradients (rlx moves weights and gradients as flat `f32`
//! vectors), gradient-norm clipping, and the table of network sizes.
//!
//! dfdx networks are statically typed: a layer's input and output widths are
//! const generics, so a policy for CartPole (4 observations, 2 actions) is a
//! different type from one for Acrobot (6, 3). [`dispatch_dims!`] maps an
//! env's runtime sizes to the compiled network types.

use dfdx::prelude::*;
use rlx::PolicyError;

/// Hidden width of the built-in MLPs.
pub const HIDDEN: usize = 64;

/// A 2×`H` tanh MLP: `I → H → H → O`; with the default `H` = 64 the
/// standard policy and value network for vector observations (as in the PPO
/// paper and CleanRL). Benchmarks use wider ones.
pub type Mlp<const I: usize, const O: usize, const H: usize = HIDDEN> =
    (Linear<I, H>, Tanh, Linear<H, H>, Tanh, Linear<H, O>);

/// The built [`Mlp`] on device `D` (the type dfdx's `build_module` returns).
pub type MlpOn<const I: usize, const O: usize, const H: usize, D> = (
    modules::Linear<I, H, f32, D>,
    modules::Tanh,
    modules::Linear<H, H, f32, D>,
    modules::Tanh,
    modules::Linear<H, O, f32, D>,
);

/// The forward pass of a built [`Mlp`] for acting, not learning (no tape):
/// the same linear layers as dfdx's, with [`tanh_approx`] in place of dfdx's
/// Tanh. Sampling spends most of its time in the network, and glibc's
/// `tanhf` (which dfdx's CPU kernel calls per element) was 42 % of that
/// (see the profile in the book's performance page).
///
/// Outputs differ from `mlp.forward` by float rounding only (≤ 1e-5 on
/// the built-in networks, tested below); losses recompute log-probabilities
/// with dfdx on the tape, so the learner never sees the approximation.
pub fn mlp_act<const I: usize, const O: usize, const H: usize, D: Device<f32>>(
    mlp: &MlpOn<I, O, H, D>,
    x: Tensor<(usize, Const<I>), f32, D>,
) -> Tensor<(usize, Const<O>), f32, D> {
    let h = tanh_tensor(mlp.0.forward(x));
    let h = tanh_tensor(mlp.2.forward(h));
    mlp.4.forward(h)
}

/// Applies [`tanh_approx`] to a layer's output in place (a fresh, contiguous
/// tensor, so its physical data is its logical data).
fn tanh_tensor<const W: usize, D: Device<f32>>(
    mut t: Tensor<(usize, Const<W>), f32, D>,
) -> Tensor<(usize, Const<W>), f32, D> {
    let mut v = vec![0.0; t.shape().num_elements()];
    t.copy_into(&mut v);
    v.iter_mut().for_each(|x| *x = tanh_approx(*x));
    t.copy_from(&v);
    t
}

/// A layer's output as a `Vec` (a plain copy; dfdx's `as_vec` walks the
/// tensor element by element through its strides).
pub fn to_vec<S: Shape, D: Device<f32>>(t: &Tensor<S, f32, D>) -> Vec<f32> {
    let mut v = vec![0.0; t.shape().num_elements()];
    t.copy_into(&mut v);
    v
}

/// `tanh(x)` to within 3e-7 absolute for every `f32` (NaN stays NaN), in a
/// form the compiler vectorizes: `1 − 2 / (e^{2x} + 1)`, with `e^{2x}`
/// computed as `2^n · 2^f` (`n` an integer, `|f| ≤ 1/2`, `2^f` by its
/// degree-7 Taylor polynomial, relative error below 1e-8).
#[inline]
pub fn tanh_approx(x: f32) -> f32 {
    // tanh(±9) rounds to ±1 in f32; the clamp keeps 2^n a normal float.
    let y = x.clamp(-9.0, 9.0) * (2.0 * std::f32::consts::LOG2_E);
    // Round to nearest by adding and subtracting 1.5 · 2^23 (|y| < 2^22).
    const ROUND: f32 = 12_582_912.0;
    let r = y + ROUND;
    let n = r - ROUND;
    let f = (y - n) * std::f32::consts::LN_2;
    // e^f for |f| ≤ ln 2 / 2, Horner form.
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0 + f * (1.0 / 24.0 + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    // n as an integer is the low bits of r (no float-to-int conversion, so
    // the loop vectorizes); 2^n is that plus the exponent bias, shifted.
    let two_n = f32::from_bits(r.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    1.0 - 2.0 / (two_n * p + 1.0)
}

/// Calls `$body` with `$obs` and `$act` bound as consts for each supported
/// `(observation width, number of actions)` pair; otherwise evaluates
/// `$otherwise`. The pairs cover CartPole (4, 2), MountainCar (2, 3),
/// Acrobot (6, 3), MinAtar Breakout (400, 3) and Space Invaders (600, 4).
/// Add a line here to support a new env shape.
#[macro_export]
macro_rules! dispatch_dims {
    ($obs_dim:expr, $n_actions:expr, |$obs:ident, $act:ident| $body:expr, $otherwise:expr) => {
        match ($obs_dim, $n_actions) {
            (4, 2) => {
                const $obs: usize = 4;
                const $act: usize = 2;
                $body
            }
            (2, 3) => {
                const $obs: usize = 2;
                const $act: usize = 3;
                $body
            }
            (6, 3) => {
                const $obs: usize = 6;
                const $act: usize = 3;
                $body
            }
            (400, 3) => {
                const $obs: usize = 400;
                const $act: usize = 3;
                $body
            }
            (600, 4) => {
                const $obs: usize = 600;
                const $act: usize = 4;
                $body
            }
            _ => $otherwise,
        }
    };
}

/// The `(observation width, number of actions)` pairs [`dispatch_dims!`] covers.
pub const SUPPORTED_DIMS: &[(usize, usize)] = &[(4, 2), (2, 3), (6, 3), (400, 3), (600, 4)];

/// Calls `$body` with `$obs`, `$act` and `$input` bound as consts for each
/// supported `(observation width, action width)` pair of a continuous
/// (`Box`) action space, with `$input = $obs + $act` (the width of a
/// critic's `[action, observation]` input: stable Rust cannot add const
/// generics in a type); otherwise evaluates `$otherwise`. The pairs cover
/// Pendulum (3, 1) and MountainCarContinuous (2, 1). Add a line here to
/// support a new env shape.
#[macro_export]
macro_rules! dispatch_continuous_dims {
    ($obs_dim:expr, $action_dim:expr, |$obs:ident, $act:ident, $input:ident| $body:expr, $otherwise:expr) => {
        match ($obs_dim, $action_dim) {
            (3, 1) => {
                const $obs: usize = 3;
                const $act: usize = 1;
                const $input: usize = $obs + $act;
                $body
            }
            (2, 1) => {
                const $obs: usize = 2;
                const $act: usize = 1;
                const $input: usize = $obs + $act;
                $body
            }
            _ => $otherwise,
        }
    };
}

/// The `(observation width, action width)` pairs [`dispatch_continuous_dims!`] covers.
pub const SUPPORTED_CONTINUOUS_DIMS: &[(usize, usize)] = &[(3, 1), (2, 1)];

/// Polyak averaging of a target network towards its online network
/// (Lillicrap et al. 2016): `target ← τ · online + (1 − τ) · target`.
///
/// # Errors
/// [`PolicyError::WrongLength`] if the two networks differ in size.
pub fn soft_update<D: Device<f32>, M: TensorCollection<f32, D> + NumParams<f32, D>>(
    target: &mut M,
    online: &M,
    tau: f32,
) -> Result<(), PolicyError> {
    let mut t = flat_params(target);
    let o = flat_params(online);
    if t.len() != o.len() {
        return Err(PolicyError::WrongLength { what: "weights", expected: t.len(), got: o.len() });
    }
    t.iter_mut().zip(&o).for_each(|(t, o)| *t = tau * o + (1.0 - tau) * *t);
    load_params(target, &t)
}

/// Adam (Kingma & Ba 2015) over flat parameter and gradient vectors.
///
/// The same update as dfdx's `Adam` and `torch.optim.Adam`, kept here
/// rather than in dfdx because checkpoints must save the moments and the
/// step count (dfdx 0.13 keeps them private), so that a restored run
/// continues exactly.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Adam {
    /// Learning rate.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the denominator for stability.
    pub eps: f32,
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
}

impl Adam {
    /// Adam for `n` parameters, with betas (0.9, 0.999).
    pub fn new(n: usize, lr: f32, eps: f32) -> Self {
        Self { lr, beta1: 0.9, beta2: 0.999, eps, m: vec![0.0; n], v: vec![0.0; n], t: 0 }
    }

    /// Number of parameters it updates.
    pub fn num_params(&self) -> usize {
        self.m.len()
    }

    /// Steps taken so far.
    pub fn steps(&self) -> i32 {
        self.t
    }

    /// One step: `params -= lr · m̂ / (√v̂ + eps)` with bias-corrected moments.
    ///
    /// # Errors
    /// [`PolicyError::WrongLength`] if a vector's length differs from the
    /// parameter count.
    pub fn update(&mut self, params: &mut [f32], grads: &[f32]) -> Result<(), PolicyError> {
        let expected = self.m.len();
        for (what, got) in [("weights", params.len()), ("gradients", grads.len())] {
            if got != expected {
                return Err(PolicyError::WrongLength { what, expected, got });
            }
        }
        self.t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let (r1, r2) = ((1.0 - b1.powi(self.t)).recip(), (1.0 - b2.powi(self.t)).recip());
        for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(&mut self.m).zip(&mut self.v) {
            *m = *m * b1 + g * (1.0 - b1);
            *v = *v * b2 + g * g * (1.0 - b2);
            *p -= self.lr * (*m * r1) / ((*v * r2).sqrt() + self.eps);
        }
        Ok(())
    }
}

struct CollectParams<'a>(&'a mut Vec<f32>);

impl<D: Device<f32>> TensorVisitor<f32, D> for CollectParams<'_> {
    type Viewer = ViewTensorRef;
    type Err = D::Err;
    type E2 = f32;
    type D2 = D;

    fn visit<S: Shape>(
        &mut self,
        opts: TensorOptions<S, f32, D>,
        t: &Tensor<S, f32, D>,
    ) -> Result<Option<Tensor<S, f32, D>>, Self::Err> {
        if opts.do_gradient_update {
            self.0.extend_from_slice(&t.as_vec());
        }
        Ok(None)
    }
}

struct LoadParams<'a> {
    src: &'a [f32],
    pos: usize,
}

impl<D: Device<f32>> TensorVisitor<f32, D> for LoadParams<'_> {
    type Viewer = ViewTensorMut;
    type Err = D::Err;
    type E2 = f32;
    type D2 = D;

    fn visit<S: Shape>(
        &mut self,
        opts: TensorOptions<S, f32, D>,
        t: &mut Tensor<S, f32, D>,
    ) -> Result<Option<Tensor<S, f32, D>>, Self::Err> {
        if opts.do_gradient_update {
            let n = t.shape().num_elements();
            t.copy_from(&self.src[self.pos..self.pos + n]);
            self.pos += n;
        }
        Ok(None)
    }
}

struct CollectGrads<'a, D: Device<f32>> {
    grads: &'a Gradients<f32, D>,
    out: &'a mut Vec<f32>,
}

impl<D: Device<f32>> TensorVisitor<f32, D> for CollectGrads<'_, D> {
    type Viewer = ViewTensorRef;
    type Err = D::Err;
    type E2 = f32;
    type D2 = D;

    fn visit<S: Shape>(
        &mut self,
        opts: TensorOptions<S, f32, D>,
        t: &Tensor<S, f32, D>,
    ) -> Result<Option<Tensor<S, f32, D>>, Self::Err> {
        if opts.do_gradient_update {
            self.out.extend_from_slice(&self.grads.get(t).as_vec());
        }
        Ok(None)
    }
}

// The visitors above never fail: they only read or overwrite tensors that
// already exist.
const VISIT: &str = "visiting existing tensors cannot fail";

/// All trainable parameters of `model`, flattened in visiting order (on a
/// GPU this copies them to the host).
pub fn flat_params<D: Device<f32>, M: TensorCollection<f32, D>>(model: &M) -> Vec<f32> {
    let mut out = Vec::new();
    M::iter_tensors(&mut RecursiveWalker { m: model, f: &mut CollectParams(&mut out) }).expect(VISIT);
    out
}

/// Overwrites all trainable parameters of `model` from a flat vector.
///
/// # Errors
/// [`PolicyError::WrongLength`] if `src` has the wrong length.
pub fn load_params<D: Device<f32>, M: TensorCollection<f32, D> + NumParams<f32, D>>(
    model: &mut M,
    src: &[f32],
) -> Result<(), PolicyError> {
    let expected = model.num_trainable_params();
    if src.len() != expected {
        return Err(PolicyError::WrongLength { what: "weights", expected, got: src.len() });
    }
    M::iter_tensors(&mut RecursiveWalker { m: model, f: &mut LoadParams { src, pos: 0 } }).expect(VISIT);
    Ok(())
}

/// The gradient of every trainable parameter after a backward pass,
/// flattened like [`flat_params`].
pub fn flat_grads<D: Device<f32>, M: TensorCollection<f32, D>>(model: &M, grads: &Gradients<f32, D>) -> Vec<f32> {
    let mut out = Vec::new();
    M::iter_tensors(&mut RecursiveWalker { m: model, f: &mut CollectGrads { grads, out: &mut out } }).expect(VISIT);
    out
}

/// Scales a flat gradient so its global L2 norm is at most `max_norm` (as
/// `torch.nn.utils.clip_grad_norm_`). Returns the norm before clipping.
///
/// Clipping the flat vector rather than per-device tensors is what lets
/// [`rlx::optimizer::MultiDeviceOptimizer`] clip the *averaged* gradient,
/// exactly as one device would clip the gradient of the whole minibatch.
///
/// # Errors
/// [`PolicyError::NonFinite`] if the gradient has a NaN or infinite entry.
pub fn clip_grad_norm(grad: &mut [f32], max_norm: Option<f32>) -> Result<f32, PolicyError> {
    let norm = rlx::policy::global_norm(grad) as f32;
    if !norm.is_finite() {
        return Err(PolicyError::NonFinite("gradient".into()));
    }
    if let Some(max) = max_norm {
        if norm > max {
            let scale = max / (norm + 1e-6);
            grad.iter_mut().for_each(|x| *x *= scale);
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tanh_approx_is_within_3e7_of_tanh_everywhere() {
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x <= 12.0 {
            worst = worst.max((tanh_approx(x) as f64 - (x as f64).tanh()).abs());
            x += 1e-4;
        }
        for x in [0.0f32, -0.0, 1e-30, -1e-30, 100.0, -100.0, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY] {
            worst = worst.max((tanh_approx(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst < 3e-7, "worst absolute error {worst:e}");
        assert!(tanh_approx(f32::NAN).is_nan());
    }

    #[test]
    fn mlp_act_matches_dfdx_forward() {
        use rand::SeedableRng;
        let dev = Cpu::seed_from_u64(3);
        let mlp = dev.build_module::<Mlp<4, 2>, f32>();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let obs: Vec<f32> = (0..4 * 33).map(|_| rand::Rng::gen_range(&mut rng, -3.0..3.0)).collect();
        let x = || dev.tensor_from_vec(obs.clone(), (33usize, Const::<4>));
        let (exact, fast) = (mlp.forward(x()).as_vec(), mlp_act(&mlp, x()).as_vec());
        let worst = exact.iter().zip(&fast).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-5, "worst difference {worst:e}");
    }

    use super::*;

    #[test]
    fn flat_params_roundtrip() {
        let dev = Cpu::seed_from_u64(0);
        let a = dev.build_module::<Mlp<4, 2>, f32>();
        let mut b = Cpu::seed_from_u64(1).build_module::<Mlp<4, 2>, f32>();
        let pa = flat_params(&a);
        assert_eq!(pa.len(), 4 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2);
        assert_ne!(pa, flat_params(&b));
        load_params(&mut b, &pa).unwrap();
        assert_eq!(flat_params(&b), pa);
        assert!(matches!(load_params(&mut b, &pa[1..]), Err(PolicyError::WrongLength { .. })));
        let x = dev.tensor([[0.1f32, -0.2, 0.3, 0.0]]);
        assert_eq!(a.forward(x.clone()).as_vec(), b.forward(x).as_vec());
    }

    #[test]
    fn grads_flatten_and_clip() {
        let dev = Cpu::seed_from_u64(0);
        let model = dev.build_module::<Mlp<4, 2>, f32>();
        let mut grads = model.alloc_grads();
        let x = dev.tensor([[1.0f32, 2.0, 3.0, 4.0]]);
        let loss = model.forward(x.clone().traced(grads)).square().sum();
        grads = loss.backward();
        let mut flat = flat_grads(&model, &grads);
        assert_eq!(flat.len(), flat_params(&model).len());
        // The last layer's bias gradient of sum(y²) is 2y.
        let y = model.forward(x).as_vec();
        let bias = &flat[flat.len() - 2..];
        assert!(bias.iter().zip(&y).all(|(g, y)| (g - 2.0 * y).abs() < 1e-4), "{bias:?} vs {y:?}");
        let norm = flat.iter().map(|g| g * g).sum::<f32>().sqrt();
        assert!(norm > 0.0);
        let before = clip_grad_norm(&mut flat, Some(norm / 2.0)).unwrap();
        assert!((before - norm).abs() < 1e-3 * norm);
        let after: f32 = flat.iter().map(|g| g * g).sum::<f32>().sqrt();
        assert!((after - norm / 2.0).abs() < 1e-3 * norm, "{after} vs {}", norm / 2.0);
        assert!((clip_grad_norm(&mut flat, None).unwrap() - after).abs() < 1e-5 * after);
        flat[0] = f32::NAN;
        assert!(matches!(clip_grad_norm(&mut flat, None), Err(PolicyError::NonFinite(_))));
    }
}
