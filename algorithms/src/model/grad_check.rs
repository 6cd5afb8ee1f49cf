//! A finite-difference gradient, for the tests that check a layer's
//! backward pass against it.

use super::Params;
use dfdx::prelude::Cpu;

/// Central finite difference of `f` with respect to parameter `i`.
pub fn numeric_grad(p: &mut Params<Cpu>, i: usize, f: &dyn Fn(&Params<Cpu>) -> f32) -> f32 {
    let w = p.to_vec();
    let eps = 1e-2;
    let mut plus = w.clone();
    plus[i] += eps;
    p.load(&plus).unwrap();
    let up = f(p);
    let mut minus = w.clone();
    minus[i] -= eps;
    p.load(&minus).unwrap();
    let down = f(p);
    p.load(&w).unwrap();
    (up - down) / (2.0 * eps)
}
