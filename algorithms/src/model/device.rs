//! Where a policy's tensors live: `"device": "cpu"` (the default) or
//! `"cuda"` / `"cuda:N"` in an algorithm's config.
//!
//! The built-in policies are generic over the dfdx device, so the same
//! algorithm code runs on either. CUDA needs rlx built with the `cuda`
//! feature (which turns on dfdx's); without it, asking for a GPU is a
//! config error that says how to rebuild, never a panic. See the book's
//! "Building with CUDA" page for what the build needs.

use super::cpu;
use super::tensors::{Activation, ConvGeometry, Flat, Matrix};
use dfdx::prelude::*;
use rlx::config::ConfigError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The smallest matrix product, in multiply-adds per block (m·n·k), that
/// the CPU layers' products (`cpu.rs`, gemm 0.19) split over rayon's
/// threads. Measured on the 2-core machine with gemm 0.19's AVX-512
/// kernels (2026-12-06), two threads were slower than one on a 256-wide
/// layer at 256 rows (16.8M: 226 µs against 196 µs) and at 64 × 1,600 ×
/// 128 (13M), and faster from about 32M up (512 rows: 1.36×; 2,048 rows:
/// 1.74×). Inside an update's two halves run side by side nothing is split
/// ([`side_by_side_pair`](crate::model::side_by_side_pair)).
pub const GEMM_THREADING_THRESHOLD: usize = 32 << 20;

/// The same for dfdx's own CPU matmul (gemm 0.15, AVX2 kernels), which
/// the LSTM layer still uses.
/// gemm's default, 48·48·256 (590k), split the 2×64 networks' products at
/// 256 rows, whose 20 µs of work costs less than handing half to a second
/// thread: on the 2-core machine PPO's update ran 1.3× and SAC's 1.6×
/// faster unsplit (book: Performance, "The learner against the machine's
/// limit"); a 256-wide layer at 256 rows took 205 µs on two threads
/// against 358 µs on one.
pub const DFDX_GEMM_THREADING_THRESHOLD: usize = 4 << 20;

/// Sets the two thresholds for the process, once (each is its gemm
/// version's process-wide setting).
fn tune_cpu_matmul() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        gemm_common::gemm::set_threading_threshold(GEMM_THREADING_THRESHOLD);
        dfdx_gemm_common::gemm::set_threading_threshold(DFDX_GEMM_THREADING_THRESHOLD);
    });
}

/// A dfdx device: the CPU, or a CUDA GPU by ordinal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    /// dfdx's `Cpu` device: products of at least
    /// `GEMM_THREADING_THRESHOLD` multiply-adds are split over rayon's
    /// threads, and an off-policy update runs one of its two halves on one
    /// of them (`join_on_cpu!` in `common/deep_policy.rs`, whose halves
    /// split no product); the rest runs on the calling thread.
    #[default]
    Cpu,
    /// dfdx's `Cuda` device on GPU `N` (`"cuda"` is `"cuda:0"`).
    Cuda(usize),
}

impl DeviceSpec {
    /// Whether this build can run on the device.
    pub fn available_in_build(self) -> bool {
        matches!(self, DeviceSpec::Cpu) || cfg!(feature = "cuda")
    }

    /// The device of replica `i` of a multi-device learner: CPU replicas
    /// all use the CPU (each on its own thread, sharing rayon's threads for
    /// large products and off-policy halves); GPU replicas take
    /// consecutive ordinals from this one.
    pub fn replica(self, i: usize) -> DeviceSpec {
        match self {
            DeviceSpec::Cpu => DeviceSpec::Cpu,
            DeviceSpec::Cuda(n) => DeviceSpec::Cuda(n + i),
        }
    }

    /// A config error unless this build supports the device.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the `device` key and the rebuild
    /// command.
    pub fn check_available(self) -> Result<(), ConfigError> {
        if self.available_in_build() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            key: "device".into(),
            message: format!(
                "\"{self}\" needs CUDA, but this rlx was built without it; rebuild with \
                 `cargo build --release --features cuda` (see the book's \"Building with CUDA\" page) or use \"cpu\""
            ),
        })
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown device {s:?}: expected \"cpu\", \"cuda\" or \"cuda:N\"");
        match s {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            _ => match s.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceSpec::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

/// A dfdx device the built-in networks run on: dfdx's `Device<f32>`, and
/// the promise that makes the policies `Send`.
///
/// # Safety
/// Implement only for devices whose handle may move to another thread
/// together with everything that holds a clone of it. A policy owns every
/// clone of its device (its parameter tensors hold them); sending the
/// policy sends them all together. `Cpu` is `Send` outright. dfdx 0.13's
/// `Cuda` (without dfdx's `cudnn` feature, whose handle cudarc keeps
/// `!Send` on purpose; rlx never enables it) is `!Send` only because
/// cudarc 0.9's `CudaStream` (a raw `CUstream` handle) lacks the marker;
/// cudarc's `CudaDevice` is `Send + Sync` and binds its context to the
/// calling thread before every allocation and kernel launch, and CUDA lets
/// any host thread use a stream of its context.
pub unsafe trait NetDevice: dfdx::prelude::Device<f32> + 'static {
    /// `tanh` of a layer's output, recorded on the tape `T` if it is one:
    /// dfdx's kernel unless the device has a faster one (the CPU's,
    /// [`tanh_approx`](super::cpu::tanh_approx)).
    fn tanh<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        x.tanh()
    }

    /// A convolution plus bias, recorded on the tape `T` if it is one (and
    /// the input's gradient only if `input_grad`): dfdx's operations
    /// unless the device has a faster way (the CPU's `conv2d_on_cpu`:
    /// im2col by slice copies, with its own backward step).
    ///
    /// # Shapes
    /// `x` is `(g.rows, g.height · g.width · g.in_channels)`, channels
    /// last; `filters` `(g.out_channels, g.patch())`, each row in `(ky,
    /// kx, channel)` order; `bias` `(g.out_channels,)`; the result
    /// `(g.rows, h' · w' · g.out_channels)` with `(h', w') =
    /// g.out_sides()`, channels last.
    fn conv2d<T: Tape<f32, Self>>(
        x: Matrix<Self, T>,
        filters: &Matrix<Self>,
        bias: &Flat<Self>,
        g: ConvGeometry,
        input_grad: bool,
    ) -> Matrix<Self, T> {
        conv2d_with_dfdx(x, filters, bias, g, input_grad)
    }

    /// `max(x, 0)`, recorded on the tape `T` if it is one: dfdx's kernel
    /// unless the device has a faster one (the CPU's).
    fn relu<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        x.relu()
    }

    /// A fully connected layer's `act(x Wᵀ + b)`, recorded on the tape `T`
    /// if it is one (the weights' gradient only if `weights_grad`): dfdx's
    /// operations unless the device has a faster way (the CPU's
    /// `linear_on_cpu`: one product into rows that start as the bias, the
    /// nonlinearity in place).
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`, `w` `(outputs, inputs)`, `b`
    /// `(outputs,)`; the result `(rows, outputs)`.
    fn linear<T: Tape<f32, Self>>(
        x: Matrix<Self, T>,
        w: &Matrix<Self>,
        b: &Flat<Self>,
        act: Option<Activation>,
        weights_grad: bool,
    ) -> Matrix<Self, T> {
        let _ = weights_grad;
        let y = linear_with_dfdx(x, w, b);
        match act {
            Some(act) => act.apply(y),
            None => y,
        }
    }

    /// The softmax of each row of `x`, recorded on the tape `T` if it is
    /// one: dfdx's operations unless the device has a faster way (the
    /// CPU's `softmax_rows_on_cpu`, one pass with one backward step).
    fn softmax_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>) -> Matrix<Self, T> {
        x.softmax::<Axis<1>>()
    }

    /// The log-softmax of each row of `x`, recorded on the tape `T` if it
    /// is one: dfdx's operations unless the device has a faster way (the
    /// CPU's `softmax_rows_on_cpu`).
    fn log_softmax_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>) -> Matrix<Self, T> {
        x.log_softmax::<Axis<1>>()
    }

    /// `Σ_i softmax(x)_i · support_i` of each row of `x`, the mean of a
    /// categorical over fixed values (a distributional head's
    /// prediction), recorded on the tape `T` if it is one: dfdx's
    /// operations unless the device has a faster way (the CPU's
    /// `softmax_mean_rows_on_cpu`).
    ///
    /// # Panics
    /// If `support` is not as long as a row.
    fn softmax_mean_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>, support: &[f32]) -> Tensor<(usize,), f32, Self, T> {
        let (rows, cols) = *x.shape();
        assert_eq!(support.len(), cols, "a support of {} values for rows of {cols}", support.len());
        let support = x.device().tensor_from_vec(support.to_vec(), (cols,));
        (x.softmax::<Axis<1>>() * support.broadcast_like::<(usize, usize), Axis<0>>(&(rows, cols)))
            .sum::<(usize,), Axis<1>>()
    }

    /// Opens the device `spec` names, seeding dfdx's random initializers.
    ///
    /// # Errors
    /// [`crate::error::BuildError::Unsupported`] if `spec` names another kind of
    /// device or it cannot be opened.
    fn open(spec: DeviceSpec, seed: u64) -> Result<Self, crate::error::BuildError>;

    /// Appends `t`'s gradient in `grads` to `out` (zeros where the loss
    /// did not reach `t`): dfdx's `Gradients::get`, a copy on the device,
    /// then to the host, unless the device reads its buffer directly (the
    /// CPU, one copy).
    fn append_gradient(grads: &mut Gradients<f32, Self>, t: &Flat<Self>, out: &mut Vec<f32>) {
        grads.get_or_alloc_mut(t).expect("allocating a gradient buffer");
        let at = out.len();
        out.resize(at + t.shape().0, 0.0);
        grads.get(t).copy_into(&mut out[at..]);
    }
}

impl Activation {
    /// Applies the nonlinearity to a layer's output (a fresh, contiguous
    /// tensor). `tanh` is the device's ([`NetDevice::tanh`]): on the CPU,
    /// [`tanh_approx`](super::cpu::tanh_approx) both when acting and when
    /// learning, so that the learner differentiates exactly the function
    /// the policy acted with.
    pub fn apply<S: Shape, D: NetDevice, T: Tape<f32, D>>(self, x: Tensor<S, f32, D, T>) -> Tensor<S, f32, D, T> {
        match self {
            Activation::Relu => D::relu(x),
            Activation::Tanh => D::tanh(x),
        }
    }
}

/// `x Wᵀ + b` with dfdx's operations (devices without their own kernel;
/// the CPU's is `linear_on_cpu`).
fn linear_with_dfdx<D: NetDevice, T: Tape<f32, D>>(x: Matrix<D, T>, w: &Matrix<D>, b: &Flat<D>) -> Matrix<D, T> {
    let outputs = w.shape().0;
    let w = w.retaped::<T>().permute::<(usize, usize), Axes2<1, 0>>();
    let b = b.retaped::<T>().broadcast_like::<(usize, usize), Axis<0>>(&(x.shape().0, outputs));
    x.matmul(w) + b
}

/// The convolution with dfdx's operations, on any device: the patches
/// gathered on the tape when the input needs a gradient, else copied out
/// on the host (no gather, no scatter-add backward). dfdx 0.13 offers its
/// convolution on nightly Rust only, so this is im2col: every output
/// pixel's patch is cut out, then multiplied with the filters in one
/// matrix product (the gather's backward pass is dfdx's scatter-add).
pub(crate) fn conv2d_with_dfdx<D: NetDevice, T: Tape<f32, D>>(
    x: Matrix<D, T>,
    filters: &Matrix<D>,
    bias: &Flat<D>,
    g: ConvGeometry,
    input_grad: bool,
) -> Matrix<D, T> {
    let rows = x.shape().0;
    if input_grad {
        let idx = g.patch_indices(rows);
        let n = idx.len();
        let flat = x.reshape_like(&(rows * g.height * g.in_channels * g.width,));
        let patches = flat.gather(filters.device().tensor_from_vec(idx, (n,)));
        return on_patches(patches, filters, bias, rows, g);
    }
    let (x, tape) = x.split_tape();
    let mut image = vec![0.0; x.shape().num_elements()];
    x.copy_into(&mut image);
    let patches: Vec<f32> = g.patch_indices(rows).into_iter().map(|i| image[i]).collect();
    let n = patches.len();
    let patches = filters.device().tensor_from_vec(patches, (n,)).put_tape(tape);
    on_patches(patches, filters, bias, rows, g)
}

/// The filters applied to gathered patches (flat, `rows · h' · w'`
/// patches of `kernel² · in_channels` values).
fn on_patches<D: NetDevice, T: Tape<f32, D>>(
    patches: Tensor<(usize,), f32, D, T>,
    filters: &Matrix<D>,
    bias: &Flat<D>,
    rows: usize,
    g: ConvGeometry,
) -> Matrix<D, T> {
    let (oh, ow) = g.out_sides();
    let patches = patches.reshape_like(&(rows * oh * ow, g.patch()));
    let w = filters.retaped::<T>().permute::<(usize, usize), Axes2<1, 0>>();
    let b = bias.retaped::<T>().broadcast_like::<(usize, usize), Axis<0>>(&(rows * oh * ow, g.out_channels));
    (patches.matmul(w) + b).reshape_like(&(rows, oh * ow * g.out_channels))
}

// The index form of im2col, for dfdx's gather.
impl ConvGeometry {
    /// For every output pixel of every one of `rows` images, the flat
    /// input index of each element of its patch, in the filters' `(ky, kx,
    /// channel)` order.
    fn patch_indices(&self, rows: usize) -> Vec<usize> {
        let (k, c, s, width) = (self.kernel, self.in_channels, self.stride, self.width);
        let (oh, ow) = self.out_sides();
        let mut one = Vec::with_capacity(oh * ow * k * k * c);
        for y in 0..oh {
            for x in 0..ow {
                for ky in 0..k {
                    let start = ((y * s + ky) * width + x * s) * c;
                    one.extend(start..start + k * c);
                }
            }
        }
        let image = self.height * width * c;
        let mut all = Vec::with_capacity(rows * one.len());
        for r in 0..rows {
            all.extend(one.iter().map(|&i| i + r * image));
        }
        all
    }
}

// SAFETY: `Cpu` is `Send + Sync` (its RNG and allocation cache are behind
// locks).
unsafe impl NetDevice for dfdx::prelude::Cpu {
    fn tanh<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        cpu::activation_on_cpu(x, Activation::Tanh)
    }

    fn conv2d<T: Tape<f32, Self>>(
        x: Matrix<Self, T>,
        filters: &Matrix<Self>,
        bias: &Flat<Self>,
        g: ConvGeometry,
        input_grad: bool,
    ) -> Matrix<Self, T> {
        cpu::conv2d_on_cpu(x, filters, bias, g, input_grad)
    }

    fn relu<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        cpu::activation_on_cpu(x, Activation::Relu)
    }

    fn linear<T: Tape<f32, Self>>(
        x: Matrix<Self, T>,
        w: &Matrix<Self>,
        b: &Flat<Self>,
        act: Option<Activation>,
        weights_grad: bool,
    ) -> Matrix<Self, T> {
        cpu::linear_on_cpu(x, (w, b), act, weights_grad)
    }

    fn softmax_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>) -> Matrix<Self, T> {
        cpu::softmax_rows_on_cpu(x, false)
    }

    fn log_softmax_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>) -> Matrix<Self, T> {
        cpu::softmax_rows_on_cpu(x, true)
    }

    fn softmax_mean_rows<T: Tape<f32, Self>>(x: Matrix<Self, T>, support: &[f32]) -> Tensor<(usize,), f32, Self, T> {
        cpu::softmax_mean_rows_on_cpu(x, support)
    }

    fn append_gradient(grads: &mut Gradients<f32, Self>, t: &Flat<Self>, out: &mut Vec<f32>) {
        out.extend_from_slice(grads.get_or_alloc_mut(t).expect("allocating a gradient buffer"));
    }

    fn open(spec: DeviceSpec, seed: u64) -> Result<Self, crate::error::BuildError> {
        match spec {
            DeviceSpec::Cpu => {
                tune_cpu_matmul();
                Ok(dfdx::prelude::Cpu::seed_from_u64(seed))
            }
            other => Err(crate::error::BuildError::Unsupported(format!("{other} is not the CPU"))),
        }
    }
}

// SAFETY: see the trait's safety section.
#[cfg(feature = "cuda")]
unsafe impl NetDevice for dfdx::prelude::Cuda {
    fn open(spec: DeviceSpec, seed: u64) -> Result<Self, crate::error::BuildError> {
        match spec {
            DeviceSpec::Cuda(n) => open_cuda(n, seed),
            other => Err(crate::error::BuildError::Unsupported(format!("{other} is not a CUDA device"))),
        }
    }
}

/// Something built on whichever device a config names ([`on_device`]).
pub trait OnDevice {
    /// What is built.
    type Output;

    /// Builds it on `dev`.
    ///
    /// # Errors
    /// Whatever building it can fail with.
    fn run<D: NetDevice>(self, dev: D) -> Result<Self::Output, crate::error::BuildError>;
}

/// Opens the device `spec` names with `seed` and builds `f` on it: the one
/// place where a device name becomes a device type.
///
/// # Errors
/// A device this build or machine does not have, or `f`'s error.
pub fn on_device<F: OnDevice>(spec: DeviceSpec, seed: u64, f: F) -> Result<F::Output, crate::error::BuildError> {
    match spec {
        DeviceSpec::Cpu => f.run(<dfdx::prelude::Cpu as NetDevice>::open(spec, seed)?),
        #[cfg(feature = "cuda")]
        DeviceSpec::Cuda(_) => f.run(<dfdx::prelude::Cuda as NetDevice>::open(spec, seed)?),
        #[cfg(not(feature = "cuda"))]
        DeviceSpec::Cuda(_) => Err(spec.check_available().expect_err("CUDA is not in this build").into()),
    }
}

/// Opens CUDA device `ordinal` with `seed` for dfdx's random initializers.
///
/// # Errors
/// [`BuildError::Unsupported`] if the device cannot be opened: no driver
/// or GPU, or no such ordinal. cudarc 0.9 panics on those instead of
/// returning an error, so the panic is caught here and reported. Also a
/// device on which dfdx cannot compile its run-time kernels (below).
#[cfg(feature = "cuda")]
pub fn open_cuda(ordinal: usize, seed: u64) -> Result<dfdx::prelude::Cuda, crate::error::BuildError> {
    use crate::error::BuildError;
    use dfdx::prelude::*;
    let opened = std::panic::catch_unwind(|| Cuda::try_build(ordinal, seed));
    let dev = match opened {
        Ok(Ok(dev)) => dev,
        Ok(Err(e)) => return Err(BuildError::Unsupported(format!("cannot open CUDA device cuda:{ordinal}: {e:?}"))),
        Err(_) => {
            return Err(BuildError::Unsupported(format!(
                "cannot open CUDA device cuda:{ordinal}: no CUDA driver or no such GPU (see the message above)"
            )))
        }
    };
    // dfdx compiles its concat, stack, reshape and cast kernels with NVRTC
    // on first use, reading headers from the directories the binary was
    // built against: dfdx's own build directory and the toolkit's `include`.
    // A binary copied to another machine, or one whose build directory was
    // cleaned, lacks them and would panic mid-training (SAC and LSTMs
    // concatenate): compile one now and say so before any work starts.
    let probe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let a: Tensor<(usize,), f32, Cuda> = dev.zeros_like(&(1,));
        (a.clone(), a).concat_along(Axis::<0>).as_vec().len()
    }));
    match probe {
        Ok(2) => Ok(dev),
        _ => Err(BuildError::Unsupported(format!(
            "cuda:{ordinal} opened, but dfdx cannot compile its run-time kernels with NVRTC (see the message \
             above): it reads cuda_utils.cuh from dfdx's build directory and the CUDA headers of the toolkit \
             this binary was built with; build rlx on this machine (book: Building with CUDA)"
        ))),
    }
}

impl Serialize for DeviceSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (text, spec) in [("cpu", DeviceSpec::Cpu), ("cuda", DeviceSpec::Cuda(0)), ("cuda:3", DeviceSpec::Cuda(3))] {
            assert_eq!(text.parse::<DeviceSpec>().unwrap(), spec);
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<DeviceSpec>(&json).unwrap(), spec);
        }
        for bad in ["tpu", "cuda:", "cuda:x", "CPU "] {
            let err = bad.parse::<DeviceSpec>().unwrap_err();
            assert!(err.contains("expected \"cpu\""), "{err}");
        }
        assert_eq!(DeviceSpec::Cuda(1).replica(2), DeviceSpec::Cuda(3));
        assert_eq!(DeviceSpec::Cpu.replica(2), DeviceSpec::Cpu);
    }

    #[test]
    fn cuda_without_the_feature_is_a_config_error() {
        assert!(DeviceSpec::Cpu.check_available().is_ok());
        let result = DeviceSpec::Cuda(0).check_available();
        if cfg!(feature = "cuda") {
            assert!(result.is_ok());
        } else {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("device") && err.contains("--features cuda"), "{err}");
        }
    }
}
