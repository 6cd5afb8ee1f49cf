//! Where a policy's tensors live: `"device": "cpu"` (the default) or
//! `"cuda"` / `"cuda:N"` in an algorithm's config.
//!
//! The built-in policies are generic over the dfdx device, so the same
//! algorithm code runs on either. CUDA needs rlx built with the `cuda`
//! feature (which turns on dfdx's); without it, asking for a GPU is a
//! config error that says how to rebuild, never a panic. See the book's
//! "Building with CUDA" page for what the build needs.

use dfdx::prelude::{Shape, Tape, Tensor};
use rlx::config::ConfigError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The smallest matrix product, in multiply-adds per block (m·n·k), that
/// dfdx's CPU matmul (the `gemm` crate) splits over rayon's threads. gemm's
/// own default, 48·48·256 (590k), splits the 2×64 networks' products at 256
/// rows, whose 20 µs of work costs less than handing half to a second
/// thread: on the 2-core machine PPO's update ran 1.3× and SAC's 1.6× faster
/// unsplit (book: Performance, "The learner against the machine's limit").
/// A 256-wide layer at 256 rows (16.8M) still splits, where two threads
/// take 205 µs against 358 µs for one.
pub const GEMM_THREADING_THRESHOLD: usize = 4 << 20;

/// Sets [`GEMM_THREADING_THRESHOLD`] for the process, once (the threshold
/// is gemm's process-wide setting).
fn tune_cpu_matmul() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| gemm_common::gemm::set_threading_threshold(GEMM_THREADING_THRESHOLD));
}

/// A dfdx device: the CPU, or a CUDA GPU by ordinal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    /// dfdx's `Cpu` device: products of at least
    /// `GEMM_THREADING_THRESHOLD` multiply-adds are split over rayon's
    /// threads, and an off-policy update runs one of its two halves on one
    /// of them (`join_on_cpu!` in `policy_core.rs`); the rest runs on the
    /// calling thread.
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
    /// [`crate::model::tanh_approx`]).
    fn tanh<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        x.tanh()
    }

    /// A convolution layer's forward pass, recorded on the tape `T` if it
    /// is one (and the input's gradient only if `input_grad`): dfdx's
    /// operations unless the device has a faster way (the CPU's
    /// `conv2d_on_cpu`: im2col by slice copies, with its own backward step).
    fn conv2d<T: Tape<f32, Self>>(
        conv: &crate::model::Conv2d,
        p: &crate::model::Params<Self>,
        x: crate::model::Matrix<Self, T>,
        height: usize,
        width: usize,
        input_grad: bool,
    ) -> crate::model::Matrix<Self, T> {
        conv.forward_with_dfdx(p, x, height, width, input_grad)
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
    fn linear<T: Tape<f32, Self>>(
        layer: &crate::model::Linear,
        p: &crate::model::Params<Self>,
        x: crate::model::Matrix<Self, T>,
        act: Option<crate::model::Activation>,
        weights_grad: bool,
    ) -> crate::model::Matrix<Self, T> {
        let _ = weights_grad;
        let y = layer.forward_with_dfdx(p, x);
        match act {
            Some(act) => act.apply(y),
            None => y,
        }
    }

    /// The builder of a registered custom model for this device.
    fn custom_builder(model: &crate::model::custom::Registered) -> crate::model::custom::BuildFn<Self>;

    /// Opens the device `spec` names, seeding dfdx's random initializers.
    ///
    /// # Errors
    /// [`crate::error::BuildError::Unsupported`] if `spec` names another kind of
    /// device or it cannot be opened.
    fn open(spec: DeviceSpec, seed: u64) -> Result<Self, crate::error::BuildError>;
}

// SAFETY: `Cpu` is `Send + Sync` (its RNG and allocation cache are behind
// locks).
unsafe impl NetDevice for dfdx::prelude::Cpu {
    fn tanh<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        crate::model::activation_on_cpu(x, crate::model::Activation::Tanh)
    }

    fn conv2d<T: Tape<f32, Self>>(
        conv: &crate::model::Conv2d,
        p: &crate::model::Params<Self>,
        x: crate::model::Matrix<Self, T>,
        height: usize,
        width: usize,
        input_grad: bool,
    ) -> crate::model::Matrix<Self, T> {
        conv.forward_on_cpu(p, x, height, width, input_grad)
    }

    fn relu<S: Shape, T: Tape<f32, Self>>(x: Tensor<S, f32, Self, T>) -> Tensor<S, f32, Self, T> {
        crate::model::activation_on_cpu(x, crate::model::Activation::Relu)
    }

    fn linear<T: Tape<f32, Self>>(
        layer: &crate::model::Linear,
        p: &crate::model::Params<Self>,
        x: crate::model::Matrix<Self, T>,
        act: Option<crate::model::Activation>,
        weights_grad: bool,
    ) -> crate::model::Matrix<Self, T> {
        layer.forward_on_cpu(p, x, act, weights_grad)
    }

    fn custom_builder(model: &crate::model::custom::Registered) -> crate::model::custom::BuildFn<Self> {
        model.cpu
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
    fn custom_builder(model: &crate::model::custom::Registered) -> crate::model::custom::BuildFn<Self> {
        model.cuda
    }

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
