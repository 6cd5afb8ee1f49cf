//! Layers whose sizes are known only at run time: [`Linear`], [`Conv2d`]
//! and [`Lstm`].
//!
//! A layer is plain data (sizes and [`ParamId`]s); its tensors live in the
//! policy's [`Params`]. Every forward pass is generic over dfdx's tape
//! `T`: with `NoneTape` it acts, with `OwnedTape` it records the
//! operations a loss differentiates. Tensors are `(rows, features)`
//! matrices with `usize` dimensions. A layer hands its tensors to the
//! device's hooks ([`NetDevice::linear`], [`NetDevice::conv2d`]), which
//! know nothing of layers.
//!
//! Initialization follows dfdx's own layers (and PyTorch's defaults): a
//! `Linear` from `U(−1/√in, 1/√in)`, a `Conv2d` from `U(−1/√(in·k²),
//! 1/√(in·k²))`, weights then bias, drawn from the device's generator in
//! the order layers are built. So a network built here from a seed starts
//! from the same weights as the const-shaped dfdx network it replaces.

use super::device::NetDevice;
use super::params::{ParamId, Params};
use super::tensors::{Activation, ConvGeometry, Matrix};
use dfdx::prelude::*;
use rlx::export::{Layer, LstmCell};

/// A fully connected layer `y = x Wᵀ + b`, `W` of shape `(out, in)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub(crate) w: ParamId,
    pub(crate) b: ParamId,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    /// A layer from `inputs` to `outputs` features, its weight and bias
    /// named `{name}.weight` and `{name}.bias`.
    pub fn new<D: NetDevice>(params: &mut Params<D>, name: &str, inputs: usize, outputs: usize) -> Self {
        Self::scaled(params, name, inputs, outputs, 1.0)
    }

    /// [`new`](Self::new) with the initial weights and bias scaled by
    /// `scale` (a small policy head starts near the uniform policy).
    pub fn scaled<D: NetDevice>(params: &mut Params<D>, name: &str, inputs: usize, outputs: usize, scale: f32) -> Self {
        let bound = scale / (inputs as f32).sqrt();
        let w = params.uniform(&format!("{name}.weight"), &[outputs, inputs], bound);
        let b = params.uniform(&format!("{name}.bias"), &[outputs], bound);
        Self { w, b, inputs, outputs }
    }

    /// A layer whose every weight and bias starts at `value` (a noisy
    /// layer's `σ`).
    pub fn filled<D: NetDevice>(params: &mut Params<D>, name: &str, inputs: usize, outputs: usize, value: f32) -> Self {
        let w = params.constant(&format!("{name}.weight"), &[outputs, inputs], &vec![value; outputs * inputs]);
        let b = params.constant(&format!("{name}.bias"), &[outputs], &vec![value; outputs]);
        Self { w, b, inputs, outputs }
    }

    /// Output features.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Input features.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// A copy of the weight (`(outputs, inputs)`, row-major) and the bias.
    pub fn weights<D: NetDevice>(&self, p: &Params<D>) -> (Vec<f32>, Vec<f32>) {
        (p.get(self.w).as_vec(), p.get(self.b).as_vec())
    }

    /// The weight transposed to `(inputs, outputs)`, as export lays it
    /// out, and the bias.
    pub fn exported_weights<D: NetDevice>(&self, p: &Params<D>) -> (Vec<f32>, Vec<f32>) {
        let (w, bias) = self.weights(p);
        (transpose(&w, self.outputs, self.inputs), bias)
    }

    /// The layer for export.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Layer {
        let (weight, bias) = self.exported_weights(p);
        Layer::Dense { inputs: self.inputs, outputs: self.outputs, weight, bias }
    }

    /// `x Wᵀ + b`.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`; the result `(rows, outputs)`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.forward_with(p, x, None, true)
    }

    /// [`forward`](Self::forward) as a function of `x` alone: the weights
    /// are constants of the pass and get no gradient. An actor's loss
    /// differentiates through its critic this way (DDPG, TD3, SAC), which
    /// on the CPU skips the critic's weight-gradient products; dfdx's
    /// other devices compute that gradient and nobody reads it.
    pub fn forward_frozen<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.forward_with(p, x, None, false)
    }

    /// `act(x Wᵀ + b)`, the weights' gradient only if `weights_grad`: the
    /// device's [`NetDevice::linear`] with this layer's weight and bias (on
    /// the CPU one operation on the tape, the nonlinearity included).
    /// `Mlp`'s hidden layers run this way.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`; the result `(rows, outputs)`.
    pub fn forward_with<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        act: Option<Activation>,
        weights_grad: bool,
    ) -> Matrix<D, T> {
        D::linear(x, &p.matrix(self.w, self.outputs, self.inputs), p.get(self.b), act, weights_grad)
    }
}

/// A 2-d convolution with square `kernel × kernel` filters, `stride` and
/// no padding, on images stored channels last (height × width ×
/// channels, as envs write them), from `(h, w, in_channels)` to `(h', w',
/// out_channels)` with `h' = (h − kernel) / stride + 1`.
///
/// dfdx 0.13 offers its convolution on nightly Rust only, so this one is
/// im2col: every output pixel's `kernel × kernel × in_channels` patch is
/// cut out, then multiplied with the filters in one matrix product
/// ([`NetDevice::conv2d`]). On the CPU that is `conv2d_on_cpu`, with its
/// own backward step; other devices use dfdx's stable operations (a
/// gather, whose backward pass is dfdx's scatter-add). The output stays
/// channels last, so layers stack without reordering.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    w: ParamId,
    b: ParamId,
    in_channels: usize,
    out_channels: usize,
    kernel: usize,
    stride: usize,
}

impl Conv2d {
    /// A convolution named `name`, its filters `(out_channels, kernel,
    /// kernel, in_channels)`.
    pub fn new<D: NetDevice>(
        params: &mut Params<D>,
        name: &str,
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        stride: usize,
    ) -> Self {
        let bound = 1.0 / ((in_channels * kernel * kernel) as f32).sqrt();
        let w = params.uniform(&format!("{name}.weight"), &[out_channels, kernel, kernel, in_channels], bound);
        let b = params.uniform(&format!("{name}.bias"), &[out_channels], bound);
        Self { w, b, in_channels, out_channels, kernel, stride }
    }

    /// The output size of one spatial side of `size` pixels, if at least one.
    pub fn output_side(kernel: usize, stride: usize, size: usize) -> Option<usize> {
        (size >= kernel && stride > 0).then(|| (size - kernel) / stride + 1)
    }

    /// The convolution plus bias: the device's ([`NetDevice::conv2d`]),
    /// on the CPU `conv2d_on_cpu`, the input's gradient only if
    /// `input_grad`. A network's input needs none (nothing is computed for
    /// it), so its first convolution passes `false`.
    ///
    /// # Shapes
    /// `x` is `(rows, height · width · in_channels)`, channels last; the
    /// result `(rows, h' · w' · out_channels)`, channels last.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        height: usize,
        width: usize,
        input_grad: bool,
    ) -> Matrix<D, T> {
        let geometry = self.geometry(x.shape().0, height, width);
        let filters = p.matrix(self.w, self.out_channels, geometry.patch());
        D::conv2d(x, &filters, p.get(self.b), geometry, input_grad)
    }

    /// The convolution for export, on `height × width` images.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>, height: usize, width: usize) -> Layer {
        Layer::Conv {
            height,
            width,
            in_channels: self.in_channels,
            out_channels: self.out_channels,
            kernel: self.kernel,
            stride: self.stride,
            weight: p.get(self.w).as_vec(),
            bias: p.get(self.b).as_vec(),
        }
    }

    /// The sizes of this convolution over `rows` images of `height ×
    /// width`.
    fn geometry(&self, rows: usize, height: usize, width: usize) -> ConvGeometry {
        ConvGeometry {
            rows,
            height,
            width,
            in_channels: self.in_channels,
            out_channels: self.out_channels,
            kernel: self.kernel,
            stride: self.stride,
        }
    }
}

/// A long short-term memory cell (Hochreiter & Schmidhuber 1997, with the
/// forget gate of Gers et al. 2000), PyTorch's gate order `i, f, g, o`:
///
/// ```text
/// [i f g o] = x W_ihᵀ + h W_hhᵀ + b
/// c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)
/// h' = σ(o) ⊙ tanh(c')
/// ```
///
/// The state of a row is `[h, c]`, `2 · cell` wide.
#[derive(Clone, Debug, PartialEq)]
pub struct Lstm {
    w_ih: ParamId,
    w_hh: ParamId,
    b: ParamId,
    inputs: usize,
    cell: usize,
}

impl Lstm {
    /// A cell from `inputs` features to `cell` units, initialized from
    /// `U(−1/√cell, 1/√cell)` as PyTorch's.
    pub fn new<D: NetDevice>(params: &mut Params<D>, name: &str, inputs: usize, cell: usize) -> Self {
        let bound = 1.0 / (cell as f32).sqrt();
        let w_ih = params.uniform(&format!("{name}.weight_ih"), &[4 * cell, inputs], bound);
        let w_hh = params.uniform(&format!("{name}.weight_hh"), &[4 * cell, cell], bound);
        let b = params.uniform(&format!("{name}.bias"), &[4 * cell], bound);
        Self { w_ih, w_hh, b, inputs, cell }
    }

    /// Units of the cell (`h` and `c` are each this wide).
    pub fn cell(&self) -> usize {
        self.cell
    }

    /// The cell for export, its weights transposed to `(in, 4 · cell)`.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> LstmCell {
        let k = self.cell;
        LstmCell {
            inputs: self.inputs,
            cell: k,
            w_ih: transpose(&p.get(self.w_ih).as_vec(), 4 * k, self.inputs),
            w_hh: transpose(&p.get(self.w_hh).as_vec(), 4 * k, k),
            bias: p.get(self.b).as_vec(),
        }
    }

    /// One step of every row: `(h', c')`.
    ///
    /// The gradient tape must end up in the loss, so the returned `h'`
    /// carries every operation of the step (including those of `c'`),
    /// while the returned `c'` carries an empty tape: pass `c'` on to the
    /// next step and `h'` into the output, and nothing is lost.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`, `h` and `c` are `(rows, cell)`.
    pub fn step<D: NetDevice, T: Tape<f32, D> + Merge<T>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        h: Matrix<D, T>,
        c: Matrix<D, T>,
    ) -> (Matrix<D, T>, Matrix<D, T>) {
        let (rows, k) = (x.shape().0, self.cell);
        let w_ih = p.matrix(self.w_ih, 4 * k, self.inputs).retaped::<T>().permute::<(usize, usize), Axes2<1, 0>>();
        let w_hh = p.matrix(self.w_hh, 4 * k, k).retaped::<T>().permute::<(usize, usize), Axes2<1, 0>>();
        let b = p.get(self.b).retaped::<T>().broadcast_like::<(usize, usize), Axis<0>>(&(rows, 4 * k));
        let gates = x.matmul(w_ih) + h.matmul(w_hh) + b;
        let i = gates.with_empty_tape().slice((.., 0..k)).sigmoid();
        let f = gates.with_empty_tape().slice((.., k..2 * k)).sigmoid();
        let g = gates.with_empty_tape().slice((.., 2 * k..3 * k)).tanh();
        let o = gates.slice((.., 3 * k..4 * k)).sigmoid();
        let c_next = f * c + i * g;
        let c_out = c_next.with_empty_tape();
        let h_next = o * c_next.tanh();
        (h_next, c_out)
    }
}

/// `m` (`rows × cols`, row-major) transposed.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; m.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = m[r * cols + c];
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::device::conv2d_with_dfdx;
    use crate::model::grad_check::numeric_grad;

    #[test]
    fn the_cpus_convolution_matches_dfdxs_operations_in_values_and_gradients() {
        // Two stacked convolutions (stride 2 then 1, kernels 3 and 2, 3 input
        // channels) on 2 rows of 9×7 images, the first layer without an
        // input gradient as a network's first layer; the output is used
        // twice so that gradients accumulate. Differentiated through the
        // CPU's kernel and through dfdx's gather, from the same weights.
        let run = |cpu: bool| {
            let dev = Cpu::seed_from_u64(3);
            let mut p = Params::new(dev.clone());
            let first = Conv2d::new(&mut p, "c0", 3, 4, 3, 2);
            let second = Conv2d::new(&mut p, "c1", 4, 5, 2, 1);
            let x: Vec<f32> = (0..2 * 9 * 7 * 3).map(|i| ((i * 7919) % 101) as f32 / 101.0 - 0.5).collect();
            let x = dev.tensor_from_vec(x, (2usize, 9 * 7 * 3)).leaky_traced();
            let layer = |conv: &Conv2d, x: Matrix<Cpu, OwnedTape<f32, Cpu>>, h, w, input_grad| {
                let g = conv.geometry(x.shape().0, h, w);
                let (filters, bias) = (p.matrix(conv.w, g.out_channels, g.patch()), p.get(conv.b));
                if cpu {
                    <Cpu as NetDevice>::conv2d(x, &filters, bias, g, input_grad)
                } else {
                    conv2d_with_dfdx(x, &filters, bias, g, input_grad)
                }
            };
            let h = layer(&first, x, 9, 7, false).relu();
            let y = layer(&second, h, 4, 3, true);
            let values = y.as_vec();
            let weights: Vec<f32> = (0..values.len()).map(|i| (i % 7) as f32 - 3.0).collect();
            let weights = dev.tensor_from_vec(weights, *y.shape());
            let loss = y.with_empty_tape().square().sum() + (y * weights).sum();
            let grads = loss.backward();
            let grad = |id| grads.get(p.get(id)).as_vec();
            let ids = [first.w, first.b, second.w, second.b];
            (values, ids.map(grad))
        };
        let (fast, fast_grads) = run(true);
        let (exact, exact_grads) = run(false);
        for (a, b) in fast.iter().zip(&exact) {
            assert!((a - b).abs() < 1e-5, "value {a} against dfdx's {b}");
        }
        for (fast, exact) in fast_grads.iter().zip(&exact_grads) {
            assert!(exact.iter().any(|g| g.abs() > 0.1), "the check compared vanishing gradients");
            for (a, b) in fast.iter().zip(exact) {
                assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "gradient {a} against dfdx's {b}");
            }
        }
    }

    #[test]
    fn linear_matches_dfdx_linear_weights_and_outputs() {
        // Built from the same seed, the run-time layer draws the same
        // weights as dfdx's const-shaped Linear and computes the same output
        // up to the products' rounding (the CPU layer's gemm is a later
        // version than dfdx's, with other kernels on an AVX-512 CPU).
        let dev = Cpu::seed_from_u64(3);
        let reference = dev.build_module::<dfdx::nn::builders::Linear<4, 3>, f32>();
        let mut p = Params::new(Cpu::seed_from_u64(3));
        let layer = Linear::new(&mut p, "l", 4, 3);
        let mut expected = reference.weight.as_vec();
        expected.extend(reference.bias.as_vec());
        assert_eq!(p.to_vec(), expected);
        let x: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).sin()).collect();
        let a = reference.forward(dev.tensor_from_vec(x.clone(), (2usize, Const::<4>))).as_vec();
        let b = layer.forward(&p, dev.tensor_from_vec(x, (2usize, 4usize))).as_vec();
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(&b) {
            assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{a} against dfdx's {b}");
        }
    }

    #[test]
    fn conv_matches_a_direct_convolution() {
        let dev = Cpu::seed_from_u64(0);
        let mut p = Params::new(dev.clone());
        let conv = Conv2d::new(&mut p, "conv", 2, 3, 2, 2);
        // One 5×4 image, 2 channels, channels last; output 2×2×3.
        let img: Vec<f32> = (0..5 * 4 * 2).map(|i| (i as f32 * 0.37).cos()).collect();
        let y = conv.forward(&p, dev.tensor_from_vec(img.clone(), (1usize, 40usize)), 5, 4, true).as_vec();
        let y_input = conv.forward(&p, dev.tensor_from_vec(img.clone(), (1usize, 40usize)), 5, 4, false).as_vec();
        assert_eq!(y, y_input, "the host-side patches of an input are the gathered ones");
        let (w, b) = (p.get(conv.w).as_vec(), p.get(conv.b).as_vec());
        for oy in 0..2 {
            for ox in 0..2 {
                for o in 0..3 {
                    let mut expected = b[o];
                    for ky in 0..2 {
                        for kx in 0..2 {
                            for c in 0..2 {
                                let pixel = img[((oy * 2 + ky) * 4 + ox * 2 + kx) * 2 + c];
                                expected += w[((o * 2 + ky) * 2 + kx) * 2 + c] * pixel;
                            }
                        }
                    }
                    let got = y[(oy * 2 + ox) * 3 + o];
                    assert!((got - expected).abs() < 1e-5, "({oy}, {ox}, {o}): {got} vs {expected}");
                }
            }
        }
    }

    #[test]
    fn conv_and_lstm_gradients_match_finite_differences() {
        let dev = Cpu::seed_from_u64(0);
        let mut p = Params::new(dev.clone());
        let conv = Conv2d::new(&mut p, "conv", 2, 3, 2, 1);
        let lstm = Lstm::new(&mut p, "lstm", 3 * 2 * 2, 4);
        let img: Vec<f32> = (0..2 * 3 * 3 * 2).map(|i| (i as f32 * 0.37).cos()).collect();
        // Two rows, unrolled for two steps from a non-zero state.
        let loss = |p: &Params<Cpu>, taped: bool| -> (f32, Option<Gradients<f32, Cpu>>) {
            let x = dev.tensor_from_vec(img.clone(), (2usize, 18usize));
            let h0 = dev.tensor_from_vec(vec![0.1f32; 8], (2usize, 4usize));
            let c0 = dev.tensor_from_vec(vec![-0.2f32; 8], (2usize, 4usize));
            if taped {
                // tanh, not relu: finite differences across a kink are meaningless.
                let y = conv.forward(p, x.leaky_traced(), 3, 3, true).tanh();
                let (h1, c1) = lstm.step(p, y.with_empty_tape(), h0.retaped(), c0.retaped());
                let (h2, _) = lstm.step(p, y, h1.with_empty_tape(), c1);
                let l = (h1 + h2).square().sum::<Rank0, _>();
                let v = l.as_vec()[0];
                (v, Some(l.backward()))
            } else {
                let y = conv.forward(p, x, 3, 3, true).tanh();
                let (h1, c1) = lstm.step(p, y.clone(), h0, c0);
                let (h2, _) = lstm.step(p, y, h1.clone(), c1);
                ((h1 + h2).square().sum::<Rank0, _>().as_vec()[0], None)
            }
        };
        let (_, grads) = loss(&p, true);
        let analytic = p.grads(&mut grads.unwrap(), 0..p.len());
        let mut worst = 0.0f32;
        for i in (0..p.len()).step_by(7) {
            let numeric = numeric_grad(&mut p, i, &|p| loss(p, false).0);
            worst = worst.max((numeric - analytic[i]).abs() / (1e-2 + numeric.abs()));
        }
        assert!(worst < 2e-2, "worst relative gradient error {worst}");
    }
}
