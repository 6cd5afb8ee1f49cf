//! Noisy linear layers: Fortunato et al., "Noisy Networks for
//! Exploration", ICLR 2018, with factorized Gaussian noise (their §3.2,
//! the variant Rainbow uses).
//!
//! A noisy layer computes `y = (μ_w + σ_w ⊙ ε_w) x + μ_b + σ_b ⊙ ε_b` with
//! learned `μ` and `σ`. Factorized noise draws one standard normal per
//! input and per output and sets `ε_w = f(ε_out) f(ε_in)ᵀ`, `ε_b =
//! f(ε_out)`, with `f(x) = sgn(x) √|x|`. Because `ε_w` is an outer
//! product, the noisy part is one ordinary linear layer on scaled inputs:
//!
//! `(σ_w ⊙ f(ε_out) f(ε_in)ᵀ) x + σ_b ⊙ f(ε_out) = f(ε_out) ⊙ (σ_w (f(ε_in) ⊙ x) + σ_b)`,
//!
//! so a noisy layer is two [`Linear`]s (`μ` and `σ`), and both run on the
//! device's fast linear kernel with their own gradients. Without noise
//! (acting greedily, or a layer built without `sigma0`) it is the `μ`
//! layer alone.

use super::device::NetDevice;
use super::layers::Linear;
use super::params::Params;
use super::tensors::Matrix;
use super::torso::TapeKind;
use dfdx::prelude::*;
use rand::Rng;
use rand_distr::StandardNormal;

/// A linear layer with learned factorized Gaussian noise, or without
/// noise when built without `sigma0`.
#[derive(Clone, Debug, PartialEq)]
pub struct NoisyLinear {
    /// `μ_w` and `μ_b`, named as a plain layer's weight and bias.
    mean: Linear,
    /// `σ_w` and `σ_b` (`{name}.sigma.weight`, `{name}.sigma.bias`).
    sigma: Option<Linear>,
}

/// One draw of a noisy layer's factorized noise: `f(ε_in)` and `f(ε_out)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    inputs: Vec<f32>,
    outputs: Vec<f32>,
}

/// `f(x) = sgn(x) √|x|`, which scales the factorized noise.
fn scale(x: f32) -> f32 {
    x.signum() * x.abs().sqrt()
}

impl Noise {
    /// Noise from standard-normal draws, `inputs` then `outputs` of them.
    pub fn from_normal(inputs: &[f32], outputs: &[f32]) -> Self {
        Self {
            inputs: inputs.iter().map(|&x| scale(x)).collect(),
            outputs: outputs.iter().map(|&x| scale(x)).collect(),
        }
    }
}

impl NoisyLinear {
    /// A layer from `inputs` to `outputs` features. `μ` starts as
    /// [`Linear::new`]'s (uniform in `±1/√inputs`, the paper's choice);
    /// with `sigma0`, every `σ` starts at `sigma0 / √inputs` (the paper's
    /// factorized initialization, `sigma0 = 0.5`).
    pub fn new<D: NetDevice>(
        p: &mut Params<D>,
        name: &str,
        inputs: usize,
        outputs: usize,
        sigma0: Option<f32>,
    ) -> Self {
        let mean = Linear::new(p, name, inputs, outputs);
        let sigma =
            sigma0.map(|s| Linear::filled(p, &format!("{name}.sigma"), inputs, outputs, s / (inputs as f32).sqrt()));
        Self { mean, sigma }
    }

    /// The mean weights for export (greedy acting uses no noise), as
    /// [`Linear::exported_weights`].
    pub fn exported_weights<D: NetDevice>(&self, p: &Params<D>) -> (Vec<f32>, Vec<f32>) {
        self.mean.exported_weights(p)
    }

    /// Input features.
    pub fn inputs(&self) -> usize {
        self.mean.inputs()
    }

    /// Output features.
    pub fn outputs(&self) -> usize {
        self.mean.outputs()
    }

    /// A fresh draw of noise from `rng` (`inputs` then `outputs` standard
    /// normals); `None` for a layer without noise, which draws nothing.
    pub fn sample_noise(&self, rng: &mut impl Rng) -> Option<Noise> {
        self.sigma.as_ref()?;
        let mut draw = |n: usize| (0..n).map(|_| rng.sample::<f32, _>(StandardNormal)).collect::<Vec<_>>();
        let inputs = draw(self.mean.inputs());
        let outputs = draw(self.mean.outputs());
        Some(Noise::from_normal(&inputs, &outputs))
    }

    /// `y` of every row: the `μ` layer, plus the noise term when the layer
    /// is noisy and `noise` is given.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`; the result `(rows, outputs)`.
    pub fn forward<D: NetDevice, T: TapeKind<D>>(
        &self,
        p: &Params<D>,
        x: Matrix<D, T>,
        noise: Option<&Noise>,
    ) -> Matrix<D, T> {
        let (Some(sigma), Some(noise)) = (&self.sigma, noise) else {
            return self.mean.forward(p, x);
        };
        let dev = p.device();
        let shape = *x.shape();
        let eps_in =
            dev.tensor_from_vec(noise.inputs.clone(), (shape.1,)).broadcast_like::<(usize, usize), Axis<0>>(&shape);
        let noisy = sigma.forward(p, x.with_empty_tape() * eps_in);
        let out_shape = *noisy.shape();
        let eps_out = dev
            .tensor_from_vec(noise.outputs.clone(), (out_shape.1,))
            .broadcast_like::<(usize, usize), Axis<0>>(&out_shape);
        self.mean.forward(p, x) + noisy * eps_out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// A worked example: a 2-input, 2-output layer with chosen `μ`, `σ`
    /// and draws, against the paper's formula written out by hand.
    #[test]
    fn factorized_noise_matches_the_formula_worked_by_hand() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let layer = NoisyLinear::new(&mut p, "l", 2, 2, Some(0.5));
        // μ_w = [[1, 2], [3, 4]], μ_b = [0.5, -0.5]; σ_w = [[0.1, 0.2],
        // [0.3, 0.4]], σ_b = [0.05, 0.06].
        p.load(&[1.0, 2.0, 3.0, 4.0, 0.5, -0.5, 0.1, 0.2, 0.3, 0.4, 0.05, 0.06]).unwrap();
        // Draws ε_in = [4, -1], ε_out = [0.25, -9]: f gives [2, -1] and
        // [0.5, -3].
        let noise = Noise::from_normal(&[4.0, -1.0], &[0.25, -9.0]);
        assert_eq!(noise, Noise { inputs: vec![2.0, -1.0], outputs: vec![0.5, -3.0] });
        // ε_w = f(ε_out) f(ε_in)ᵀ = [[1, -0.5], [-6, 3]], ε_b = [0.5, -3].
        // W = μ_w + σ_w ⊙ ε_w = [[1.1, 1.9], [1.2, 5.2]],
        // b = μ_b + σ_b ⊙ ε_b = [0.525, -0.68].
        // x = [1, 2]: y = [1.1 + 3.8 + 0.525, 1.2 + 10.4 − 0.68].
        let x = p.device().tensor_from_vec(vec![1.0, 2.0], (1usize, 2usize));
        let y = layer.forward(&p, x.clone(), Some(&noise)).as_vec();
        let expected = [5.425f32, 10.92];
        for (got, want) in y.iter().zip(expected) {
            assert!((got - want).abs() < 1e-5, "{y:?} against {expected:?}");
        }
        // Without noise it is the μ layer: [1 + 4 + 0.5, 3 + 8 − 0.5].
        assert_eq!(layer.forward(&p, x, None).as_vec(), vec![5.5, 10.5]);
    }

    #[test]
    fn sigma_starts_at_sigma0_over_root_inputs_and_learns() {
        let mut p = Params::new(Cpu::seed_from_u64(1));
        let layer = NoisyLinear::new(&mut p, "l", 4, 3, Some(0.5));
        let all = p.to_vec();
        assert_eq!(all.len(), 2 * (4 * 3 + 3));
        assert!(all[15..].iter().all(|&s| s == 0.25), "σ = 0.5 / √4: {:?}", &all[15..]);
        // The loss reaches σ through the noise term.
        let noise = layer.sample_noise(&mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        let x = p.device().tensor_from_vec(vec![0.3, -0.2, 0.5, 1.0, -1.0, 0.1, 0.2, 0.4], (2usize, 4usize));
        let loss = layer.forward(&p, x.leaky_traced(), Some(&noise)).square().sum();
        let mut grads = loss.backward();
        let g = p.grads(&mut grads, 0..p.to_vec().len());
        assert!(g[15..].iter().filter(|v| v.abs() > 1e-6).count() >= 12, "σ's gradient: {:?}", &g[15..]);
        // A layer without sigma0 adds no tensors and draws no noise.
        let mut q = Params::new(Cpu::seed_from_u64(1));
        let plain = NoisyLinear::new(&mut q, "l", 4, 3, None);
        assert_eq!(q.to_vec().len(), 4 * 3 + 3);
        assert!(plain.sample_noise(&mut ChaCha8Rng::seed_from_u64(3)).is_none());
    }
}
