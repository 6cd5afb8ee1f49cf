//! Fully connected networks evaluated on the host, for acting on the CPU.
//!
//! Acting multiplies a few rows (one per env copy) by every layer, once per
//! env step. Through dfdx that is a fresh tensor per operation and a gemm
//! call that packs the layer's weights again for every step: on sampling
//! CartPole with 2 evaluators × 8 copies, allocation and gemm's packing and
//! dispatch were about 40 % of the time (the book's performance page has
//! the profile). A [`HostNet`] is a copy of the layers' weights, transposed
//! once to `(inputs, outputs)`, and a product loop that keeps a block of
//! outputs in registers. The copy is taken again whenever the weights
//! change ([`Params::version`]).
//!
//! The floats differ from dfdx's products in the last bits (another order
//! of additions), as gemm's own do between machines; learning keeps dfdx's
//! path, so the learner's log-probabilities of acted actions agree with
//! the acting ones to float rounding (PPO's `on_policy_ratio_is_one`).

use super::cpu::activate;
use super::device::NetDevice;
use super::layers::Linear;
use super::params::Params;
use super::tensors::Activation;
use super::torso::Mlp;

/// One layer: `y = x · W + b`, `W` stored `(inputs, outputs)`, then the
/// activation if any.
#[derive(Clone, Debug)]
struct Dense {
    inputs: usize,
    outputs: usize,
    w: Vec<f32>,
    b: Vec<f32>,
    activation: Option<Activation>,
}

/// Fully connected layers, the weights copied out of a [`Params`].
#[derive(Clone, Debug)]
pub struct HostNet {
    layers: Vec<Dense>,
}

impl HostNet {
    /// `mlp`'s layers (none without one), then `head` without an
    /// activation if given, with the weights `p` holds now.
    pub fn new<D: NetDevice>(p: &Params<D>, mlp: Option<&Mlp>, head: Option<&Linear>) -> Self {
        let hidden = mlp.into_iter().flat_map(|m| m.layers().iter().map(move |l| dense(p, l, Some(m.activation()))));
        Self { layers: hidden.chain(head.map(|l| dense(p, l, None))).collect() }
    }

    /// The output rows (`rows × outputs`) of `rows` input rows `x`.
    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let mut x = x.to_vec();
        for layer in &self.layers {
            let mut y = vec![0.0; rows * layer.outputs];
            product(&x, &layer.w, &layer.b, &mut y, rows, layer.inputs, layer.outputs);
            if let Some(act) = layer.activation {
                activate(act, &mut y);
            }
            x = y;
        }
        x
    }
}

/// `layer`'s weights from `p`, transposed to `(inputs, outputs)`.
fn dense<D: NetDevice>(p: &Params<D>, layer: &Linear, activation: Option<Activation>) -> Dense {
    let (w, b) = layer.weights(p);
    let (inputs, outputs) = (layer.inputs(), layer.outputs());
    let mut wt = vec![0.0; w.len()];
    for o in 0..outputs {
        for k in 0..inputs {
            wt[k * outputs + o] = w[o * inputs + k];
        }
    }
    Dense { inputs, outputs, w: wt, b, activation }
}

/// Outputs a block of the product keeps in registers: 16 floats are two
/// AVX2 vectors (four SSE2 ones).
const BLOCK: usize = 16;

/// `y = x · w + b` for `rows` rows, `x` `(rows, k)`, `w` `(k, n)`.
fn product(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], rows: usize, k: usize, n: usize) {
    let full = n / BLOCK * BLOCK;
    for r in 0..rows {
        let (xr, yr) = (&x[r * k..(r + 1) * k], &mut y[r * n..(r + 1) * n]);
        blocks(xr, w, b, yr, full, n);
        // The last outputs, fewer than a block (a head's 1 or 2).
        for o in full..n {
            yr[o] = b[o] + xr.iter().enumerate().map(|(i, &v)| v * w[i * n + o]).sum::<f32>();
        }
    }
}

super::cpu::wide_loop! {
    /// The first `full` outputs (a multiple of [`BLOCK`]) of one row:
    /// each block summed over the inputs in a register-sized array.
    fn blocks(xr: &[f32], w: &[f32], b: &[f32], yr: &mut [f32], full: usize, n: usize) {
        for o in (0..full).step_by(BLOCK) {
            let mut acc = [0.0f32; BLOCK];
            acc.copy_from_slice(&b[o..o + BLOCK]);
            for (i, &v) in xr.iter().enumerate() {
                let wi = &w[i * n + o..i * n + o + BLOCK];
                for j in 0..BLOCK {
                    acc[j] += v * wi[j];
                }
            }
            yr[o..o + BLOCK].copy_from_slice(&acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::to_vec;
    use dfdx::prelude::{Cpu, TensorFromVec};

    #[test]
    fn host_layers_match_dfdxs_forward_pass() {
        for activation in [Activation::Tanh, Activation::Relu] {
            let mut p = Params::new(Cpu::seed_from_u64(3));
            let mlp = Mlp::new(&mut p, "t", 5, &[32, 20], activation);
            let head = Linear::new(&mut p, "h", 20, 3);
            let x: Vec<f32> = (0..35).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
            let dev = p.device().clone();
            let expected = to_vec(&head.forward(&p, mlp.forward(&p, dev.tensor_from_vec(x.clone(), (7usize, 5usize)))));
            let got = HostNet::new(&p, Some(&mlp), Some(&head)).forward(&x, 7);
            assert_eq!(got.len(), expected.len());
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).abs() < 1e-5, "{activation:?}: {g} vs {e}");
            }
        }
        // No hidden layers (`fcnet_hiddens: []`): the head alone; and no rows.
        let mut p = Params::new(Cpu::seed_from_u64(4));
        let mlp = Mlp::new(&mut p, "t", 5, &[], Activation::Tanh);
        let head = Linear::new(&mut p, "h", 5, 17);
        let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.1 - 0.5).collect();
        let dev = p.device().clone();
        let expected = to_vec(&head.forward(&p, mlp.forward(&p, dev.tensor_from_vec(x.clone(), (2usize, 5usize)))));
        let net = HostNet::new(&p, Some(&mlp), Some(&head));
        let got = net.forward(&x, 2);
        assert!(got.iter().zip(&expected).all(|(g, e)| (g - e).abs() < 1e-5), "{got:?} vs {expected:?}");
        assert!(net.forward(&[], 0).is_empty());
    }
}
