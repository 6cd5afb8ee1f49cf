//! Custom models: a network from your own crate in place of the built-in
//! MLP or CNN (RLlib's `custom_model`).
//!
//! Implement [`CustomNetwork`] (its forward pass over dfdx tensors) and
//! [`CustomModel`] (how to build it, adding its tensors to the policy's
//! [`Params`]), register it by name once at start-up, and name it in any
//! deep algorithm's config: `{"model": {"custom_model": "my_net",
//! "custom_model_config": {...}}}`. The algorithm puts its own heads (the
//! action distribution's inputs, the value, Q-values) on the features your
//! network outputs, and owns the optimizer, checkpoints and devices as for
//! a built-in network.
//!
//! ```
//! use dfdx::prelude::*;
//! use rlx_algorithms::model::device::NetDevice;
//! use rlx_algorithms::model::custom::{register_custom_model, CustomInput, CustomModel, CustomNetwork};
//! use rlx_algorithms::model::{Linear, Matrix, Params, Taped};
//!
//! /// One ReLU layer of `width` units (`custom_model_config: {"width": 32}`).
//! struct Wide { layer: Linear }
//!
//! impl Wide {
//!     // Written once for both tapes: acting (no tape) and learning.
//!     fn run<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
//!         self.layer.forward(p, x).relu()
//!     }
//! }
//!
//! impl<D: NetDevice> CustomNetwork<D> for Wide {
//!     fn features(&self) -> usize { self.layer.outputs() }
//!     fn forward(&self, p: &Params<D>, x: Matrix<D>) -> Matrix<D> { self.run(p, x) }
//!     fn forward_taped(&self, p: &Params<D>, x: Matrix<D, Taped<D>>) -> Matrix<D, Taped<D>> { self.run(p, x) }
//! }
//!
//! impl CustomModel for Wide {
//!     fn build<D: NetDevice>(input: &CustomInput<'_>, params: &mut Params<D>) -> Result<Box<dyn CustomNetwork<D>>, String> {
//!         let width = input.config.get("width").and_then(|w| w.as_u64()).unwrap_or(32) as usize;
//!         Ok(Box::new(Wide { layer: Linear::new(params, &format!("{}.wide", input.name), input.features, width) }))
//!     }
//! }
//!
//! register_custom_model::<Wide>("wide");
//! ```

use super::device::NetDevice;
use super::params::Params;
use super::tensors::{Matrix, Taped};
use rlx::Space;
use serde_json::Value;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// A network of your own that turns observation rows into features, in
/// front of an algorithm's heads.
///
/// Keep its tensors in the [`Params`] it was built with (hold
/// [`ParamId`](super::ParamId)s or rlx layers, not tensors): the policy
/// then saves, loads, averages and optimizes them with the rest, and the
/// network itself stays plain data that may cross threads.
pub trait CustomNetwork<D: NetDevice>: Send + Sync + 'static {
    /// Features per row it outputs.
    fn features(&self) -> usize;

    /// The forward pass without a tape (acting).
    ///
    /// # Shapes
    /// `x` is `(rows, CustomInput::features)`; the result `(rows,
    /// features())`.
    fn forward(&self, params: &Params<D>, x: Matrix<D>) -> Matrix<D>;

    /// The same forward pass on the gradient tape (learning).
    fn forward_taped(&self, params: &Params<D>, x: Matrix<D, Taped<D>>) -> Matrix<D, Taped<D>>;
}

/// What a custom network is built for.
#[derive(Clone, Copy, Debug)]
pub struct CustomInput<'a> {
    /// The env's observation space.
    pub space: &'a Space,
    /// Features of each input row: the observation flattened in row-major
    /// order (an image stays height × width × channels), with `Discrete`
    /// and `MultiDiscrete` observations one-hot encoded.
    pub features: usize,
    /// `model.custom_model_config` from the algorithm's config.
    pub config: &'a Value,
    /// A prefix for the names of its tensors (in saved weights), unique
    /// within the policy, e.g. `"pi.torso"`.
    pub name: &'a str,
}

/// How to build a custom network, on any device.
pub trait CustomModel: 'static {
    /// Builds the network, adding its tensors to `params`.
    ///
    /// # Errors
    /// A message for a `custom_model_config` or an input it cannot take;
    /// the algorithm reports it as a config error of `model.custom_model`.
    fn build<D: NetDevice>(
        input: &CustomInput<'_>,
        params: &mut Params<D>,
    ) -> Result<Box<dyn CustomNetwork<D>>, String>;
}

/// A registered model's builder on device `D`.
pub type BuildFn<D> = fn(&CustomInput<'_>, &mut Params<D>) -> Result<Box<dyn CustomNetwork<D>>, String>;

/// A registered custom model: its builder for each device type.
#[derive(Clone, Copy)]
pub struct Registered {
    pub(crate) cpu: BuildFn<dfdx::prelude::Cpu>,
    #[cfg(feature = "cuda")]
    pub(crate) cuda: BuildFn<dfdx::prelude::Cuda>,
}

impl Registered {
    /// The builder for device `D`: the one of the fields above whose type
    /// is `BuildFn<D>`, found by its type, so that the devices need not
    /// know custom models. `None` for a device without one (only `Cpu`
    /// and, with the `cuda` feature, `Cuda` have).
    pub(crate) fn builder<D: NetDevice>(&self) -> Option<BuildFn<D>> {
        let cpu: &dyn Any = &self.cpu;
        if let Some(build) = cpu.downcast_ref::<BuildFn<D>>() {
            return Some(*build);
        }
        #[cfg(feature = "cuda")]
        {
            let cuda: &dyn Any = &self.cuda;
            if let Some(build) = cuda.downcast_ref::<BuildFn<D>>() {
                return Some(*build);
            }
        }
        None
    }
}

fn registry() -> std::sync::MutexGuard<'static, BTreeMap<String, Registered>> {
    static REGISTRY: OnceLock<Mutex<BTreeMap<String, Registered>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers `M` under `name` for `model.custom_model` (a later
/// registration under the same name replaces the earlier one). Call it
/// before building a trainer, in every process that builds policies (the
/// driver, and the binary each `rlx node` runs).
pub fn register_custom_model<M: CustomModel>(name: &str) {
    let entry = Registered {
        cpu: M::build::<dfdx::prelude::Cpu>,
        #[cfg(feature = "cuda")]
        cuda: M::build::<dfdx::prelude::Cuda>,
    };
    registry().insert(name.to_string(), entry);
}

/// The names registered so far.
pub fn registered_custom_models() -> Vec<String> {
    registry().keys().cloned().collect()
}

/// The model registered under `name`.
pub(crate) fn lookup(name: &str) -> Option<Registered> {
    registry().get(name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layers::Linear;
    use crate::model::torso::Torso;
    use crate::model::ModelConfig;
    use dfdx::prelude::*;

    /// One layer of 3 features, no nonlinearity.
    struct Three {
        layer: Linear,
    }

    impl<D: NetDevice> CustomNetwork<D> for Three {
        fn features(&self) -> usize {
            self.layer.outputs()
        }

        fn forward(&self, p: &Params<D>, x: Matrix<D>) -> Matrix<D> {
            self.layer.forward(p, x)
        }

        fn forward_taped(&self, p: &Params<D>, x: Matrix<D, Taped<D>>) -> Matrix<D, Taped<D>> {
            self.layer.forward(p, x)
        }
    }

    impl CustomModel for Three {
        fn build<D: NetDevice>(
            input: &CustomInput<'_>,
            params: &mut Params<D>,
        ) -> Result<Box<dyn CustomNetwork<D>>, String> {
            Ok(Box::new(Three { layer: Linear::new(params, input.name, input.features, 3) }))
        }
    }

    #[test]
    fn a_registered_model_is_built_with_the_devices_builder() {
        register_custom_model::<Three>("custom_tests_three");
        let registered = lookup("custom_tests_three").expect("registered");
        assert!(registered.builder::<Cpu>().is_some());
        let model = ModelConfig { custom_model: Some("custom_tests_three".into()), ..ModelConfig::default() };
        let space = Space::uniform_box(-1.0, 1.0, vec![4]).unwrap();
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let torso = Torso::build(&model, &space, &mut p, "pi.torso").unwrap();
        assert!(matches!(torso, Torso::Custom { .. }) && torso.features() == 3);
        assert_eq!(p.len(), 4 * 3 + 3);
        let x = p.device().tensor_from_vec(vec![0.5; 2 * 4], (2usize, 4usize));
        assert_eq!(torso.forward::<NoneTape>(&p, x).shape(), &(2, 3));
    }
}
