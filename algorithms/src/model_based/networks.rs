//! DreamerV3's building blocks: a hidden layer normalized before its
//! nonlinearity ([`NormDense`]), stacks of them ([`DenseStack`]), and the
//! GRU with layer normalization of the sequence model ([`NormGru`]).
//!
//! Every forward pass is generic over dfdx's tape, as the layers of
//! [`crate::model`]: with `NoneTape` it acts and imagines, with `OwnedTape`
//! it records what the world model's loss differentiates.

use crate::model::device::NetDevice;
use crate::model::{Linear, Matrix, Params};
use dfdx::prelude::*;
use rlx::export::Layer;

/// Layer normalization's ε (DreamerV3's).
pub const NORM_EPS: f32 = 1e-3;

/// `x · σ(x)` (SiLU), DreamerV3's nonlinearity.
pub fn silu<D: NetDevice, T: Tape<f32, D>>(x: Matrix<D, T>) -> Matrix<D, T> {
    x.with_empty_tape().sigmoid() * x
}

/// Normalizes every row to mean 0 and variance 1.
pub fn layer_norm<D: NetDevice, T: Tape<f32, D>>(x: Matrix<D, T>) -> Matrix<D, T> {
    x.normalize::<Axis<1>>(NORM_EPS)
}

/// `silu(norm(x Wᵀ + b))`. The normalization has no scale and offset of
/// its own (the next layer's weights take that role).
#[derive(Clone, Debug, PartialEq)]
pub struct NormDense {
    linear: Linear,
}

impl NormDense {
    /// A layer from `inputs` to `outputs` features named `name`.
    pub fn new<D: NetDevice>(p: &mut Params<D>, name: &str, inputs: usize, outputs: usize) -> Self {
        Self { linear: Linear::new(p, name, inputs, outputs) }
    }

    /// Output features.
    pub fn outputs(&self) -> usize {
        self.linear.outputs()
    }

    /// The layer on every row of `x`; its weights get a gradient only
    /// if `weights_grad` ([`Linear::forward_with`]).
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        weights_grad: bool,
    ) -> Matrix<D, T> {
        silu(layer_norm(self.linear.forward_with(p, x, None, weights_grad)))
    }

    /// The layer for export.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        vec![self.linear.exported(p), Layer::LayerNorm { eps: NORM_EPS }, Layer::Silu]
    }
}

/// `layers` [`NormDense`] layers of `units`, then a linear output layer:
/// the encoder, decoder, reward, continue, actor and critic networks.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseStack {
    hidden: Vec<NormDense>,
    out: Linear,
}

impl DenseStack {
    /// A stack from `inputs` to `outputs` features; the output layer's
    /// weights start at 0 when `zero_out` (the reward and critic heads:
    /// their first predictions are 0, not noise).
    pub fn new<D: NetDevice>(
        p: &mut Params<D>,
        name: &str,
        inputs: usize,
        (layers, units): (usize, usize),
        outputs: usize,
        zero_out: bool,
    ) -> Self {
        let mut hidden = Vec::with_capacity(layers);
        let mut width = inputs;
        for i in 0..layers {
            hidden.push(NormDense::new(p, &format!("{name}.{i}"), width, units));
            width = units;
        }
        let out = if zero_out {
            Linear::filled(p, &format!("{name}.out"), width, outputs, 0.0)
        } else {
            Linear::new(p, &format!("{name}.out"), width, outputs)
        };
        Self { hidden, out }
    }

    /// Output features.
    pub fn outputs(&self) -> usize {
        self.out.outputs()
    }

    /// The stack on every row of `x`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.forward_with(p, x, true)
    }

    /// [`forward`](Self::forward), the weights getting a gradient only if
    /// `weights_grad`. Without, the stack is a function of `x` alone: the
    /// actor of continuous actions learns through the world model's heads
    /// and the critic this way, and the backward pass skips their
    /// weight-gradient products (on the CPU).
    pub fn forward_with<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        weights_grad: bool,
    ) -> Matrix<D, T> {
        let h = self.hidden.iter().fold(x, |h, layer| layer.forward(p, h, weights_grad));
        self.out.forward_with(p, h, None, weights_grad)
    }

    /// The stack for export.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        let hidden = self.hidden.iter().flat_map(|layer| layer.exported(p));
        hidden.chain(std::iter::once(self.out.exported(p))).collect()
    }
}

/// A GRU whose gates are normalized (DreamerV3's sequence model, after
/// Hafner's implementation): with `[r c u] = norm([x, h] Wᵀ + b)`,
///
/// ```text
/// r = σ(r),  c = tanh(r ⊙ c),  u = σ(u − 1)
/// h' = u ⊙ c + (1 − u) ⊙ h
/// ```
///
/// The `− 1` starts the update gate mostly closed, so the state is kept.
#[derive(Clone, Debug, PartialEq)]
pub struct NormGru {
    gates: Linear,
    units: usize,
}

impl NormGru {
    /// A cell of `units` from `inputs` features.
    pub fn new<D: NetDevice>(p: &mut Params<D>, name: &str, inputs: usize, units: usize) -> Self {
        Self { gates: Linear::new(p, name, inputs + units, 3 * units), units }
    }

    /// Units of the state.
    pub fn units(&self) -> usize {
        self.units
    }

    /// The layers from `[x, h]` to the normalized gate values, for export.
    pub fn exported_gates<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        vec![self.gates.exported(p), Layer::LayerNorm { eps: NORM_EPS }]
    }

    /// One step of every row; the weights get a gradient only if
    /// `weights_grad`.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`, `h` `(rows, units)`; the result `(rows, units)`.
    pub fn step<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        h: Matrix<D, T>,
        weights_grad: bool,
    ) -> Matrix<D, T> {
        let k = self.units;
        let joined = (x, h.with_empty_tape()).concat_along(Axis::<1>);
        let parts = layer_norm(self.gates.forward_with(p, joined, None, weights_grad));
        let reset = parts.with_empty_tape().slice((.., 0..k)).sigmoid();
        let candidate = (reset * parts.with_empty_tape().slice((.., k..2 * k))).tanh();
        let update = (parts.slice((.., 2 * k..3 * k)) - 1.0).sigmoid();
        let keep = update.with_empty_tape().negate() + 1.0;
        update * candidate + keep * h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grad_check::numeric_grad;

    #[test]
    fn gru_and_stack_gradients_match_finite_differences() {
        // Two rows through a stack, then two GRU steps from a given state;
        // the loss reads both steps' states, so every branch's tape must
        // reach it.
        let dev = Cpu::seed_from_u64(1);
        let mut p = Params::new(dev.clone());
        let stack = DenseStack::new(&mut p, "enc", 3, (1, 5), 4, false);
        let gru = NormGru::new(&mut p, "gru", 4, 3);
        let x: Vec<f32> = (0..6).map(|i| (i as f32 * 0.9).sin()).collect();
        let run = |p: &Params<Cpu>, taped: bool| -> (f32, Option<Gradients<f32, Cpu>>) {
            let x = dev.tensor_from_vec(x.clone(), (2usize, 3usize));
            let h0 = dev.tensor_from_vec(vec![0.2f32, -0.1, 0.4, 0.0, 0.3, -0.5], (2usize, 3usize));
            if taped {
                let e = stack.forward(p, x.leaky_traced());
                let h1 = gru.step(p, e.with_empty_tape(), h0.retaped(), true);
                let h2 = gru.step(p, e, h1.with_empty_tape(), true);
                let loss = (h1.square() + h2).sum::<Rank0, _>();
                (loss.as_vec()[0], Some(loss.backward()))
            } else {
                let e = stack.forward(p, x);
                let h1 = gru.step(p, e.clone(), h0, true);
                let h2 = gru.step(p, e, h1.clone(), true);
                ((h1.square() + h2).sum::<Rank0, _>().as_vec()[0], None)
            }
        };
        let (_, grads) = run(&p, true);
        let analytic = p.grads(&mut grads.unwrap(), 0..p.len());
        let mut worst = 0.0f32;
        for i in 0..p.len() {
            let numeric = numeric_grad(&mut p, i, &|p| run(p, false).0);
            worst = worst.max((numeric - analytic[i]).abs() / (2e-2 + numeric.abs()));
        }
        assert!(analytic.iter().filter(|g| g.abs() > 1e-3).count() > p.len() / 2, "{analytic:?}");
        assert!(worst < 3e-2, "worst relative gradient error {worst}");
    }
}
