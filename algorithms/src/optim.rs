//! Adam over flat vectors, and gradient-norm clipping: the optimizer side
//! of every built-in deep policy ([`crate::policy_core::PolicyCore`]).

use rlx::PolicyError;

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
    use super::*;

    #[test]
    fn clipping_scales_to_the_max_norm_and_rejects_nan() {
        let mut g = vec![3.0f32, 4.0];
        assert_eq!(clip_grad_norm(&mut g, Some(10.0)).unwrap(), 5.0);
        assert_eq!(g, vec![3.0, 4.0], "under the bound: unchanged");
        assert_eq!(clip_grad_norm(&mut g, Some(1.0)).unwrap(), 5.0);
        let after = (g[0] * g[0] + g[1] * g[1]).sqrt();
        assert!((after - 1.0).abs() < 1e-5, "{after}");
        g[0] = f32::NAN;
        assert!(matches!(clip_grad_norm(&mut g, None), Err(PolicyError::NonFinite(_))));
    }

    #[test]
    fn adam_matches_the_reference_update() {
        // One step from zero moments: m̂ = g, v̂ = g², so p -= lr · g / (|g| + eps).
        let mut adam = Adam::new(2, 0.1, 1e-8);
        let mut p = vec![1.0f32, -1.0];
        adam.update(&mut p, &[0.5, -2.0]).unwrap();
        assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6, "{p:?}");
        assert_eq!(adam.steps(), 1);
        assert!(adam.update(&mut p, &[1.0]).is_err());
    }
}
