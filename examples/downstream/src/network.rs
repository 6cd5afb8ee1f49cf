//! A network of our own for the built-in algorithms (RLlib's "custom
//! model"): two ReLU layers with a skip connection,
//!
//! ```text
//! h₁ = relu(W₁ x + b₁)
//! h₂ = relu(W₂ h₁ + b₂) + h₁
//! ```
//!
//! The built-in algorithm puts its own heads on `h₂` (PPO: the action
//! distribution's logits and the value) and owns the optimizer,
//! checkpoints and devices as for its own networks. We write the forward
//! pass once, generic over dfdx's tape, and hand it to both of
//! [`CustomNetwork`]'s methods; the tensors live in the policy's
//! [`Params`], which our layers point into.
//!
//! Registered as `"skip_mlp"` by [`register`]; `custom_model_config`
//! takes `{"width": N}` (default 64).

use rlx_algorithms::model::device::NetDevice;
use rlx_algorithms::dfdx::prelude::*;
use rlx_algorithms::model::custom::{register_custom_model, CustomInput, CustomModel, CustomNetwork};
use rlx_algorithms::model::{Linear, Matrix, Params, Taped};

/// The name [`register`] registers [`SkipMlp`] under.
pub const NAME: &str = "skip_mlp";

/// Two ReLU layers with a skip connection.
pub struct SkipMlp {
    first: Linear,
    second: Linear,
}

impl SkipMlp {
    /// The forward pass, for either tape.
    fn run<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        let h1 = self.first.forward(p, x).relu();
        let h2 = self.second.forward(p, h1.with_empty_tape()).relu();
        h2 + h1
    }
}

impl<D: NetDevice> CustomNetwork<D> for SkipMlp {
    fn features(&self) -> usize {
        self.second.outputs()
    }

    fn forward(&self, p: &Params<D>, x: Matrix<D>) -> Matrix<D> {
        self.run(p, x)
    }

    fn forward_taped(&self, p: &Params<D>, x: Matrix<D, Taped<D>>) -> Matrix<D, Taped<D>> {
        self.run(p, x)
    }
}

impl CustomModel for SkipMlp {
    fn build<D: NetDevice>(
        input: &CustomInput<'_>,
        params: &mut Params<D>,
    ) -> Result<Box<dyn CustomNetwork<D>>, String> {
        let width = match input.config.get("width") {
            None => 64,
            Some(w) => {
                w.as_u64().filter(|&w| w > 0).ok_or_else(|| format!("width must be a positive integer, got {w}"))?
                    as usize
            }
        };
        let first = Linear::new(params, &format!("{}.first", input.name), input.features, width);
        let second = Linear::new(params, &format!("{}.second", input.name), width, width);
        Ok(Box::new(SkipMlp { first, second }))
    }
}

/// Registers [`SkipMlp`] as `"skip_mlp"`, once per process.
pub fn register() {
    register_custom_model::<SkipMlp>(NAME);
}
