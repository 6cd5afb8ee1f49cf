//! The CPU's own operations on dfdx's tape, for the layers every network
//! is made of: a fully connected layer ([`linear_on_cpu`]), `tanh` and
//! `relu` ([`activation_on_cpu`], `tanh` as [`tanh_approx`]), a
//! convolution ([`conv2d_on_cpu`]) and its bias ([`add_bias_on_cpu`]),
//! and the softmax of rows ([`softmax_rows_on_cpu`],
//! [`softmax_mean_rows_on_cpu`]).
//! `device.rs` hands them to the layers as the CPU's `NetDevice` hooks;
//! this file names only `tensors.rs`.
//!
//! dfdx 0.13's CPU kernels are generic: element-wise operations go through
//! strided iterators one float at a time, a bias is broadcast and summed
//! back with the same machinery, and a layer is a product into a zeroed
//! tensor plus a copy for the bias. At the 2×64 networks' sizes that was
//! as much time as the products themselves (the profiles are on the
//! book's performance page). Each operation here computes its values with
//! plain loops (compiled for AVX2 where the CPU has it, [`wide_loop`]) or
//! one call of the `gemm` crate (a later version than dfdx's, with AVX-512
//! kernels where the CPU has them), and adds its backward
//! step to the tape as dfdx's own operations add theirs, so the rest of
//! the graph, and dfdx's other devices, are unchanged.
//!
//! Every operation takes its input through `contiguous()` (free for a
//! layer's output), so the data read is the tensor's logical data.

use super::tensors::{Activation, ConvGeometry};
use dfdx::prelude::*;

/// Defines `fn $name` whose loop body is compiled twice: for AVX2 (8
/// floats a vector), run where the CPU has it, and for baseline x86-64
/// (SSE2, 4 a vector) elsewhere. The workspace is built for any x86-64 (no
/// `target-cpu`), so without this the CPU layers' loops ran 4 wide; the
/// tanh's division made it 23 % of sampling CartPole that way. IEEE
/// operations give the same floats at either width (Rust never fuses a
/// multiply and an add on its own), so the choice changes speed only.
macro_rules! wide_loop {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                #[target_feature(enable = "avx2")]
                unsafe fn wide($($arg: $ty),*) $body
                // SAFETY: the CPU has AVX2, checked just above.
                return unsafe { wide($($arg),*) };
            }
            $body
        }
    };
}

pub(crate) use wide_loop;

/// A `(rows, features)` matrix on the CPU with tape `T`.
type Matrix<T = NoneTape> = super::tensors::Matrix<Cpu, T>;

/// `act(x Wᵀ + b)` for a `(rows, inputs)` `x`, the weight `w` `(outputs,
/// inputs)`, the bias `b` `(outputs,)` and an optional nonlinearity `act`,
/// in one buffer: the product, the bias added to each row and the
/// nonlinearity in place, with one backward step on the tape. dfdx's path
/// makes a tensor for each of the three, each with its own gradient
/// buffer, and adds the bias and the nonlinearity through its generic
/// strided kernels.
///
/// The backward step turns the output's gradient `G` into the
/// pre-activation's (`G · act'`, from the outputs kept for it), adds `G·W`
/// to the input's gradient and, when `weights_grad`, `Gᵀ·X` and the column
/// sums of `G` to the weight's and the bias's. Without `weights_grad` the
/// weights are constants of the pass: a loss that differentiates through a
/// network it does not train, such as an actor's loss through its critic,
/// skips the weight-gradient product of each of that network's layers,
/// half of its backward products. The products take the operands dfdx's
/// `gemm` calls take, in the same order, the bias is added after the
/// product as [`add_bias_on_cpu`] adds it, and the nonlinearities are those of
/// [`activation_on_cpu`], so the values are the ones the separate
/// operations give up to the products' rounding: gemm 0.19 (here) and 0.15
/// (dfdx's) add a sum's terms in different orders on a CPU with AVX-512,
/// as any gemm does between machines.
pub(crate) fn linear_on_cpu<T: Tape<f32, Cpu>>(
    x: Matrix<T>,
    (w, b): (&Matrix, &Tensor<(usize,), f32, Cpu>),
    act: Option<Activation>,
    weights_grad: bool,
) -> Matrix<T> {
    let (x, mut tape) = x.contiguous().split_tape();
    let ((rows, inputs), (outputs, w_inputs)) = (*x.shape(), *w.shape());
    assert_eq!(inputs, w_inputs, "a ({rows}, {inputs}) input to a layer of {w_inputs} inputs");
    let (mut xs, mut ws, mut bias) = (vec![0.0; rows * inputs], vec![0.0; outputs * inputs], vec![0.0; outputs]);
    x.copy_into(&mut xs);
    w.clone().contiguous().copy_into(&mut ws);
    b.copy_into(&mut bias);
    let mut out = vec![0.0; rows * outputs];
    // out (rows × outputs) = X (rows × inputs) · Wᵀ (inputs × outputs), then + b.
    let dims = Dims { m: rows, k: inputs, n: outputs };
    product(dims, (&xs, [inputs, 1]), (&ws, [1, inputs]), (&mut out, [outputs, 1]), false);
    add_to_rows(&mut out, &bias);
    if let Some(act) = act {
        activate(act, &mut out);
    }
    // The derivative of a nonlinearity is computed from its outputs.
    let kept = (T::OWNS_TAPE && act.is_some()).then(|| out.clone());
    let out = x.device().tensor_from_vec(out, (rows, outputs));
    if T::OWNS_TAPE {
        // The input is needed again only for the weights' gradient.
        let xs = weights_grad.then_some(xs);
        let (x_ghost, w_ghost, b_ghost, out_ghost) = (x.ghost(), w.ghost(), b.ghost(), out.ghost());
        tape.add_backward_op(move |grads| {
            let mut g = grads.get_or_alloc_mut(&out_ghost)?.to_vec();
            if let (Some(act), Some(y)) = (act, &kept) {
                differentiate(act, &mut g, y);
            }
            // dX (rows × inputs) += G (rows × outputs) · W (outputs × inputs).
            let dims = Dims { m: rows, k: outputs, n: inputs };
            product(
                dims,
                (&g, [outputs, 1]),
                (&ws, [inputs, 1]),
                (grads.get_or_alloc_mut(&x_ghost)?, [inputs, 1]),
                true,
            );
            if let Some(xs) = &xs {
                // dWᵀ (inputs × outputs) += Xᵀ (inputs × rows) · G (rows × outputs).
                let dims = Dims { m: inputs, k: rows, n: outputs };
                let dst = (&mut grads.get_or_alloc_mut(&w_ghost)?[..], [1, inputs]);
                product(dims, (xs, [1, inputs]), (&g, [outputs, 1]), dst, true);
                sum_rows_into(grads.get_or_alloc_mut(&b_ghost)?, &g);
            }
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// The sizes of a product `(m × k) · (k × n)`.
#[derive(Clone, Copy, Debug)]
struct Dims {
    m: usize,
    k: usize,
    n: usize,
}

thread_local! {
    /// Whether this thread runs one of two computations side by side
    /// ([`side_by_side`]).
    static SIDE_BY_SIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()`, with the products it makes on this thread kept on this thread:
/// for each half of two computations run side by side (`join_on_cpu!`),
/// which already keep the cores busy. Splitting a product over rayon's
/// threads there made the whole update slower, on the 2-core machine, even
/// for CQL's 7,936-row products, which split alone run 1.9× faster: CQL on
/// HalfCheetah made 16–17 updates a second with its products split, 19
/// with none split; SAC 1.39× the updates (the book's performance page,
/// "Products on one thread or two").
pub(crate) fn side_by_side<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the flag back as it was, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SIDE_BY_SIDE.set(self.0);
        }
    }
    let _restore = Restore(SIDE_BY_SIDE.replace(true));
    f()
}

/// `a` on this thread and `b` on one of rayon's, side by side, each in
/// [`side_by_side`]: the two halves of an update that can run at once.
pub(crate) fn side_by_side_pair<A, B: Send>(a: impl FnOnce() -> A, b: impl FnOnce() -> B + Send) -> (A, B) {
    let mut second = None;
    let first = rayon::in_place_scope(|scope| {
        scope.spawn(|_| second = Some(side_by_side(b)));
        side_by_side(a)
    });
    (first, second.expect("a scope returns after its spawned work"))
}

/// `dst ← a · b`, or `dst += a · b` when `accumulate`, each operand a
/// slice with its `[row, column]` strides, through the `gemm` crate as
/// dfdx's CPU `matmul` calls it: on rayon's threads for products of at
/// least [`GEMM_THREADING_THRESHOLD`](crate::model::device::GEMM_THREADING_THRESHOLD)
/// multiply-adds, except inside [`side_by_side`]. `gemm` 0.19, whose AVX-512 kernels ran 256-wide
/// layers' products 1.7–1.9× faster than dfdx's gemm 0.15 (the workspace's
/// `Cargo.toml`); the floats differ from dfdx's in the last bits where the
/// CPU has AVX-512.
///
/// # Panics
/// If an operand's last element lies outside its slice, or `dst` is not
/// dense (row-major `[n, 1]` or column-major `[1, m]`: gemm's threads
/// write its elements at once, so no two may share an address).
fn product(
    d: Dims,
    (a, sa): (&[f32], [usize; 2]),
    (b, sb): (&[f32], [usize; 2]),
    (dst, sd): (&mut [f32], [usize; 2]),
    accumulate: bool,
) {
    if d.m == 0 || d.n == 0 {
        return;
    }
    let last = |rows: usize, cols: usize, s: [usize; 2]| (rows.max(1) - 1) * s[0] + (cols.max(1) - 1) * s[1];
    assert!(d.k == 0 || last(d.m, d.k, sa) < a.len(), "the left operand overruns its {} values", a.len());
    assert!(d.k == 0 || last(d.k, d.n, sb) < b.len(), "the right operand overruns its {} values", b.len());
    assert!(sd == [d.n, 1] || sd == [1, d.m], "the product's destination strides {sd:?} are not dense");
    assert!(last(d.m, d.n, sd) < dst.len(), "the product overruns its {} values", dst.len());
    let i = |s: usize| s as isize;
    // SAFETY: every element the product reads or writes lies inside its
    // slice, no two elements of `dst` share an address (both checked
    // above), and `dst` is borrowed mutably, apart from `a` and `b`.
    unsafe {
        gemm::gemm(
            d.m,
            d.n,
            d.k,
            dst.as_mut_ptr(),
            i(sd[1]),
            i(sd[0]),
            accumulate,
            a.as_ptr(),
            i(sa[1]),
            i(sa[0]),
            b.as_ptr(),
            i(sb[1]),
            i(sb[0]),
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            if SIDE_BY_SIDE.get() {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(rayon::current_num_threads())
            },
        );
    }
}

wide_loop! {
    /// `y ← max(y, 0)` elementwise (NaN becomes 0, as in dfdx).
    fn relu_in_place(y: &mut [f32]) {
        y.iter_mut().for_each(|v| *v = v.max(0.0));
    }
}

wide_loop! {
    /// `g ← g · [y > 0]`: relu's derivative from its outputs, in place.
    fn relu_derivative(g: &mut [f32], y: &[f32]) {
        for (g, y) in g.iter_mut().zip(y) {
            *g *= if *y > 0.0 { 1.0 } else { 0.0 };
        }
    }
}

wide_loop! {
    /// `g ← g · (1 − y²)`: tanh's derivative from its outputs, in place.
    fn tanh_derivative(g: &mut [f32], y: &[f32]) {
        for (g, y) in g.iter_mut().zip(y) {
            *g *= 1.0 - y * y;
        }
    }
}

/// A nonlinearity on the CPU, and on a tape its backward step from the
/// outputs kept for it: `relu` (`g · [y > 0]`, `y > 0` exactly where `x >
/// 0`, dfdx's test) or `tanh` ([`tanh_approx`], `g · (1 − y²)`). dfdx's
/// CPU kernels went through a strided iterator one float at a time, and
/// its `tanh` called glibc's `tanhf` per element, 53 % of a default PPO run
/// on CartPole (the book's performance page has the profiles); its public
/// ops cannot express this, so the backward step is added to the tape
/// here, as dfdx's unary ops add theirs.
pub(crate) fn activation_on_cpu<S: Shape, T: Tape<f32, Cpu>>(
    x: Tensor<S, f32, Cpu, T>,
    act: Activation,
) -> Tensor<S, f32, Cpu, T> {
    let (x, mut tape) = x.contiguous().split_tape();
    let mut y = vec![0.0; x.shape().num_elements()];
    x.copy_into(&mut y);
    activate(act, &mut y);
    // Only a tape needs the outputs again; acting keeps no copy.
    let kept = T::OWNS_TAPE.then(|| y.clone());
    let out = x.device().tensor_from_vec(y, *x.shape());
    if let Some(y) = kept {
        let (x, out_ghost) = (x.ghost(), out.ghost());
        tape.add_backward_op(move |grads| {
            let mut g = grads.get_or_alloc_mut(&out_ghost)?.to_vec();
            differentiate(act, &mut g, &y);
            add_to_rows(grads.get_or_alloc_mut(&x)?, &g);
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// Softmax over each row of `x` on the CPU, or with `log` its logarithm,
/// with the backward step on the tape from the probabilities `p` kept for
/// it: `dx = p ⊙ (g − ⟨g, p⟩)` row by row, or `dx = g − p · Σ g`. The
/// values are dfdx's formulas, `e / Σ e` and `(x − max) − ln Σ e` with `e
/// = exp(x − max)` ([`exp_approx`]), summed in the same order. dfdx's
/// softmax is five operations (a max, a broadcast subtraction, `exp`, a
/// sum and a broadcast division), each through its generic strided
/// kernels and each with a gradient buffer; over DreamerV3's 255 bins
/// they were a quarter of its update (the book's DreamerV3 page).
pub(crate) fn softmax_rows_on_cpu<T: Tape<f32, Cpu>>(x: Matrix<T>, log: bool) -> Matrix<T> {
    let (x, mut tape) = x.contiguous().split_tape();
    let (rows, cols) = *x.shape();
    let width = cols.max(1);
    let mut probs = vec![0.0; rows * cols];
    x.copy_into(&mut probs);
    let mut logs = if log { probs.clone() } else { Vec::new() };
    for (r, p) in probs.chunks_exact_mut(width).enumerate() {
        let max = row_max(p);
        exp_less(p, max);
        let sum: f32 = p.iter().sum();
        p.iter_mut().for_each(|p| *p /= sum);
        if log {
            let log_sum = sum.ln();
            logs[r * cols..(r + 1) * cols].iter_mut().for_each(|v| *v = (*v - max) - log_sum);
        }
    }
    // The values, and the probabilities a tape keeps.
    let (values, kept) = match (log, T::OWNS_TAPE) {
        (true, owns) => (logs, owns.then_some(probs)),
        (false, true) => (probs.clone(), Some(probs)),
        (false, false) => (probs, None),
    };
    let out = x.device().tensor_from_vec(values, (rows, cols));
    if let Some(probs) = kept {
        let (x, out_ghost) = (x.ghost(), out.ghost());
        tape.add_backward_op(move |grads| {
            let g = grads.get_or_alloc_mut(&out_ghost)?.to_vec();
            let dx = grads.get_or_alloc_mut(&x)?;
            for ((dx, g), p) in dx.chunks_exact_mut(width).zip(g.chunks_exact(width)).zip(probs.chunks_exact(width)) {
                if log {
                    let total: f32 = g.iter().sum();
                    dx.iter_mut().zip(g).zip(p).for_each(|((d, g), p)| *d += g - p * total);
                } else {
                    let dot: f32 = g.iter().zip(p).map(|(g, p)| g * p).sum();
                    dx.iter_mut().zip(g).zip(p).for_each(|((d, g), p)| *d += p * (g - dot));
                }
            }
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// `Σ_i softmax(x)_i · support_i` of each row of `x` on the CPU: the mean
/// of a categorical over fixed values, with its backward step on the
/// tape, `dx_i = g · p_i (support_i − mean)` from the probabilities `p`
/// kept for it. One pass, where dfdx's is its softmax's five operations
/// then a broadcast product and a sum.
///
/// # Panics
/// If `support` is not as long as a row.
pub(crate) fn softmax_mean_rows_on_cpu<T: Tape<f32, Cpu>>(
    x: Matrix<T>,
    support: &[f32],
) -> Tensor<(usize,), f32, Cpu, T> {
    let (x, mut tape) = x.contiguous().split_tape();
    let (rows, cols) = *x.shape();
    assert_eq!(support.len(), cols, "a support of {} values for rows of {cols}", support.len());
    let mut p = vec![0.0; rows * cols];
    x.copy_into(&mut p);
    // A row of no values has the mean 0, as dfdx's empty sum.
    let mut means = vec![0.0; rows];
    for (mean, row) in means.iter_mut().zip(p.chunks_exact_mut(cols.max(1))) {
        let sum = exp_less_max(row);
        row.iter_mut().for_each(|v| *v /= sum);
        *mean = row.iter().zip(support).map(|(p, s)| p * s).sum::<f32>();
    }
    let kept = T::OWNS_TAPE.then(|| (p, means.clone(), support.to_vec()));
    let out = x.device().tensor_from_vec(means, (rows,));
    if let Some((p, means, support)) = kept {
        let (x, out_ghost) = (x.ghost(), out.ghost());
        tape.add_backward_op(move |grads| {
            let g = grads.get_or_alloc_mut(&out_ghost)?.to_vec();
            let dx = grads.get_or_alloc_mut(&x)?;
            for (r, (dx, p)) in dx.chunks_exact_mut(cols.max(1)).zip(p.chunks_exact(cols.max(1))).enumerate() {
                let (g, mean) = (g[r], means[r]);
                dx.iter_mut().zip(p).zip(&support).for_each(|((d, p), s)| *d += g * p * (s - mean));
            }
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// `row ← exp(row − max(row))`, returning the new row's sum.
fn exp_less_max(row: &mut [f32]) -> f32 {
    exp_less(row, row_max(row));
    row.iter().sum()
}

/// The largest value of `row` (`−∞` for none; a NaN is skipped, as by
/// `f32::max`).
fn row_max(row: &[f32]) -> f32 {
    row.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// `y ← act(y)` elementwise.
pub(crate) fn activate(act: Activation, y: &mut [f32]) {
    match act {
        Activation::Relu => relu_in_place(y),
        Activation::Tanh => tanh_in_place(y),
    }
}

/// `g ← g · act'(x)`, the derivative computed from the outputs `y`.
fn differentiate(act: Activation, g: &mut [f32], y: &[f32]) {
    match act {
        Activation::Relu => relu_derivative(g, y),
        Activation::Tanh => tanh_derivative(g, y),
    }
}

/// `y + b` with `b` added to every row of `y` on the CPU, for a fresh,
/// contiguous `y` (a matrix product: the convolution's, `conv2d_on_cpu`;
/// [`linear_on_cpu`] adds its bias in its own buffer with the same loop).
/// dfdx adds a broadcast bias with its
/// generic strided kernel, and sums the bias's gradient back the same way;
/// its binary kernels were 22 % of a profile of SAC's update, the bias adds
/// among them. Here both are plain loops over rows, on the tape as
/// [`activation_on_cpu`] is.
pub(crate) fn add_bias_on_cpu<T: Tape<f32, Cpu>>(y: Matrix<T>, b: Tensor<(usize,), f32, Cpu, T>) -> Matrix<T> {
    let (y, tape) = y.split_tape();
    let (b, b_tape) = b.split_tape();
    let mut tape = tape.merge(b_tape);
    let (rows, cols) = *y.shape();
    let (mut out, mut bias) = (vec![0.0; rows * cols], vec![0.0; cols]);
    y.copy_into(&mut out);
    b.copy_into(&mut bias);
    add_to_rows(&mut out, &bias);
    let out = y.device().tensor_from_vec(out, (rows, cols));
    if T::OWNS_TAPE {
        let (y, b, out_ghost) = (y.ghost(), b.ghost(), out.ghost());
        tape.add_backward_op(move |grads| {
            let g_out = grads.get_or_alloc_mut(&out_ghost)?.to_vec();
            add_to_rows(grads.get_or_alloc_mut(&y)?, &g_out);
            sum_rows_into(grads.get_or_alloc_mut(&b)?, &g_out);
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// A convolution plus bias on the CPU, with its own backward step on dfdx's
/// tape (as [`activation_on_cpu`]). The patches are cut with slice copies (no
/// index vector, no gather) and multiplied with the filters in one matrix
/// product ([`product`], as [`linear_on_cpu`]'s); the backward step is two matrix products, the filters'
/// gradient `Gᵀ·P` and, only when `input_grad`, the patches' `G·W`, whose
/// rows are added back onto their pixels. The bias is
/// [`add_bias_on_cpu`]'s. The generic path (`NetDevice::conv2d`'s default)
/// builds an index per patch value (a 400 MB vector for 500 Atari frames
/// at the first layer), gathers through it, broadcasts the bias with
/// dfdx's generic kernel and scatter-adds the patches' gradient.
///
/// # Shapes
/// `x` is `(rows, height · width · in_channels)`, `filters` `(out_channels,
/// kernel · kernel · in_channels)` in `(ky, kx, channel)` order, `bias`
/// `(out_channels,)`; the result `(rows, h' · w' · out_channels)`, all
/// channels last.
pub(crate) fn conv2d_on_cpu<T: Tape<f32, Cpu>>(
    x: Matrix<T>,
    filters: &Matrix,
    bias: &Tensor<(usize,), f32, Cpu>,
    g: ConvGeometry,
    input_grad: bool,
) -> Matrix<T> {
    // A custom model may hand over a view; the runs below index memory.
    let (x, mut tape) = x.contiguous().split_tape();
    let dev = x.device().clone();
    let (oh, ow) = g.out_sides();
    let (n, run) = (g.rows * oh * ow, g.kernel * g.in_channels);
    let mut image = vec![0.0; x.shape().num_elements()];
    x.copy_into(&mut image);
    // The runs come in order, so the patches are appended instead of
    // written over zeros (8 Atari frames make 5.5 MB of patches across
    // the Nature CNN's three layers; the zeroing showed in profiles, but
    // leaving it out did not move `models/acting` beyond its noise).
    let mut cut = Vec::with_capacity(n * g.patch());
    g.for_each_run(|i, at| {
        debug_assert_eq!(cut.len(), i * run);
        cut.extend_from_slice(&image[at..at + run]);
    });
    let (patch, channels) = (g.patch(), g.out_channels);
    let mut w = vec![0.0; channels * patch];
    filters.clone().contiguous().copy_into(&mut w);
    // Y (n × channels) = P (n × patch) · Wᵀ (patch × channels).
    let mut y = vec![0.0; n * channels];
    product(Dims { m: n, k: patch, n: channels }, (&cut, [patch, 1]), (&w, [1, patch]), (&mut y, [channels, 1]), false);
    let y = dev.tensor_from_vec(y, (n, channels));
    if T::OWNS_TAPE {
        let (x_ghost, y_ghost, w_ghost) = (x.ghost(), y.ghost(), filters.ghost());
        tape.add_backward_op(move |grads| {
            let g_y = grads.get_or_alloc_mut(&y_ghost)?.to_vec();
            // dW (channels × patch) += Gᵀ (channels × n) · P (n × patch).
            let dims = Dims { m: channels, k: n, n: patch };
            product(
                dims,
                (&g_y, [1, channels]),
                (&cut, [patch, 1]),
                (grads.get_or_alloc_mut(&w_ghost)?, [patch, 1]),
                true,
            );
            if input_grad {
                // dP (n × patch) = G (n × channels) · W (channels × patch).
                let mut g_patches = vec![0.0; n * patch];
                let dims = Dims { m: n, k: channels, n: patch };
                product(dims, (&g_y, [channels, 1]), (&w, [patch, 1]), (&mut g_patches, [patch, 1]), false);
                let g_x = grads.get_or_alloc_mut(&x_ghost)?;
                g.for_each_run(|i, at| {
                    g_x[at..at + run].iter_mut().zip(&g_patches[i * run..(i + 1) * run]).for_each(|(g, d)| *g += d)
                });
            }
            Ok(())
        });
    }
    add_bias_on_cpu(y.put_tape(tape), bias.retaped::<T>()).reshape_like(&(g.rows, oh * ow * g.out_channels))
}

// The runs of a convolution's patches, for im2col and its inverse.
impl ConvGeometry {
    /// Calls `f(patch row, input offset)` for each of the `kernel` runs of
    /// `kernel · in_channels` contiguous input values that make up each
    /// patch, patches in output order (row, y, x). Channels last makes
    /// each run one slice, so im2col and its inverse are slice copies.
    fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        let (oh, ow) = self.out_sides();
        let (k, s, c) = (self.kernel, self.stride, self.in_channels);
        let image = self.height * self.width * c;
        let mut patch = 0;
        for r in 0..self.rows {
            for y in 0..oh {
                for x in 0..ow {
                    for ky in 0..k {
                        f(patch * k + ky, r * image + ((y * s + ky) * self.width + x * s) * c);
                    }
                    patch += 1;
                }
            }
        }
    }
}

/// `tanh(x)` to within 3e-7 absolute for every `f32` (NaN stays NaN), in a
/// form the compiler vectorizes: `1 − 2 / (e^{2x} + 1)`, with `e^{2x}`
/// computed as `2^n · 2^f` (`n` an integer, `|f| ≤ 1/2`, `scaled_exp`).
/// glibc's `tanhf`, which dfdx's CPU kernel calls per element, was 42 % of
/// sampling's time (see the profile on the book's performance page).
#[inline]
pub fn tanh_approx(x: f32) -> f32 {
    // tanh(±9) rounds to ±1 in f32; the clamp keeps 2^n a normal float.
    let y = x.clamp(-9.0, 9.0) * (2.0 * std::f32::consts::LOG2_E);
    let r = y + ROUND;
    let n = r - ROUND;
    1.0 - 2.0 / (scaled_exp((y - n) * std::f32::consts::LN_2, r) + 1.0)
}

/// `e^x` to within 3e-7 relative for `x` in `[−87, 88]` (NaN stays NaN),
/// in a form the compiler vectorizes: `2^n · e^f` with `n` the nearest
/// integer to `x / ln 2` and `f = x − n ln 2` (ln 2 in two parts, so `f`
/// keeps its bits for large `|x|`; [`scaled_exp`]). Below −87 it gives
/// `e^−87` (1.6e-38) where `e^x` is smaller still or 0: in a softmax that
/// is lost in the sum (at least 1), and such a term's probability is
/// about 1e-38 rather than 0.
/// glibc's `expf`, called per element, was 12 % of DreamerV3's update
/// once its softmax ops were fused.
#[inline]
pub fn exp_approx(x: f32) -> f32 {
    // ln 2 = LN2_HI + LN2_LO, LN2_HI with few enough bits that n · LN2_HI
    // is exact for |n| ≤ 127.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let r = x * std::f32::consts::LOG2_E + ROUND;
    let n = r - ROUND;
    scaled_exp(x - n * LN2_HI - n * LN2_LO, r)
}

/// Adding and subtracting 1.5 · 2^23 rounds a float below 2^22 in size to
/// the nearest integer, which the low bits of the sum hold.
const ROUND: f32 = 12_582_912.0;

/// `2^n · e^f` for `|f| ≤ ln 2 / 2`, `r = n + ROUND` and `−126 ≤ n ≤ 127`: `e^f`
/// by its degree-7 Taylor polynomial (relative error below 1e-8), `2^n`
/// from the low bits of `r` plus the exponent bias, shifted (no branch and
/// no float-to-int conversion, so loops of it vectorize).
#[inline(always)]
fn scaled_exp(f: f32, r: f32) -> f32 {
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0 + f * (1.0 / 24.0 + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    let two_n = f32::from_bits(r.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    two_n * p
}

wide_loop! {
    /// `y ← exp_approx(y − shift)` elementwise.
    fn exp_less(y: &mut [f32], shift: f32) {
        y.iter_mut().for_each(|v| *v = exp_approx(*v - shift));
    }
}

wide_loop! {
    /// `y ← tanh_approx(y)` elementwise.
    pub(crate) fn tanh_in_place(y: &mut [f32]) {
        y.iter_mut().for_each(|v| *v = tanh_approx(*v));
    }
}

wide_loop! {
    /// `row += v` for every row of `rows` (a whole number of rows of
    /// `v.len()`): the bias add, and, with `v` as long as `rows`, an
    /// elementwise sum.
    fn add_to_rows(rows: &mut [f32], v: &[f32]) {
        if v.is_empty() {
            return;
        }
        for row in rows.chunks_exact_mut(v.len()) {
            row.iter_mut().zip(v).for_each(|(o, b)| *o += b);
        }
    }
}

wide_loop! {
    /// `acc += row` for every row of `rows` (`acc.len()` wide).
    fn sum_rows_into(acc: &mut [f32], rows: &[f32]) {
        if acc.is_empty() {
            return;
        }
        for row in rows.chunks_exact(acc.len()) {
            acc.iter_mut().zip(row).for_each(|(g, d)| *g += d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layers::Linear;
    use crate::model::params::Params;

    #[test]
    fn tanh_approx_is_within_3e7_of_tanh_everywhere() {
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x <= 12.0 {
            worst = worst.max((tanh_approx(x) as f64 - (x as f64).tanh()).abs());
            x += 1e-4;
        }
        for x in [0.0f32, -0.0, 1e-30, -1e-30, 100.0, -100.0, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY] {
            worst = worst.max((tanh_approx(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst < 3e-7, "worst absolute error {worst:e}");
        assert!(tanh_approx(f32::NAN).is_nan());
        // The vector loop (AVX2 where the CPU has it) gives the scalar
        // function's floats, bit for bit, at every length's tail too.
        let all: Vec<f32> = (0..1003).map(|i| (i as f32 - 501.0) * 0.0217).chain([f32::NAN, 1e-30, -9.5]).collect();
        for len in (0..=17).chain([all.len()]) {
            let mut ys = all[..len].to_vec();
            tanh_in_place(&mut ys);
            for (x, y) in all.iter().zip(&ys) {
                assert_eq!(y.to_bits(), tanh_approx(*x).to_bits(), "tanh({x}) at length {len}");
            }
        }
    }

    #[test]
    fn exp_approx_is_within_3e7_relative_of_exp_and_the_vector_loop_gives_its_floats() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let exact = (x as f64).exp();
            worst = worst.max(((exp_approx(x) as f64 - exact) / exact).abs());
            x += 1e-3;
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert_eq!(exp_approx(0.0), 1.0);
        assert!(exp_approx(f32::NAN).is_nan());
        assert!(exp_approx(f32::NEG_INFINITY) < 2e-38 && exp_approx(-1000.0) >= 0.0);
        let all: Vec<f32> = (0..1003).map(|i| (i as f32 - 900.0) * 0.0917).chain([f32::NAN, -1e-30, -100.0]).collect();
        for len in (0..=17).chain([all.len()]) {
            let mut ys = all[..len].to_vec();
            exp_less(&mut ys, 0.5);
            for (x, y) in all.iter().zip(&ys) {
                assert_eq!(y.to_bits(), exp_approx(*x - 0.5).to_bits(), "exp({x} - 0.5) at length {len}");
            }
        }
    }

    #[test]
    fn the_cpus_taped_tanh_matches_dfdxs_values_and_gradients() {
        // A tanh layer inside a small graph (used twice downstream, so its
        // gradient accumulates), differentiated through the CPU's tanh and
        // through dfdx's exact kernel.
        let dev = Cpu::seed_from_u64(0);
        let x: Vec<f32> = (0..6 * 5).map(|i| ((i * 7919) % 97) as f32 / 97.0 * 8.0 - 4.0).collect();
        let run = |fast: bool| {
            let x = dev.tensor_from_vec(x.clone(), (6usize, 5usize));
            let h = (x.leaky_trace() * 1.5) + 0.25;
            let y = if fast { activation_on_cpu(h, Activation::Tanh) } else { h.tanh() };
            let loss = y.with_empty_tape().square().sum() + (y * 3.0).sum();
            let grads = loss.backward();
            (grads.get(&x).as_vec(), loss_value(&x, fast))
        };
        let (fast, fast_y) = run(true);
        let (exact, exact_y) = run(false);
        for (a, b) in fast.iter().zip(&exact) {
            assert!((a - b).abs() < 2e-5, "gradient {a} against dfdx's {b}");
        }
        for (a, b) in fast_y.iter().zip(&exact_y) {
            assert!((a - b).abs() < 3e-7, "value {a} against dfdx's {b}");
        }
        assert!(exact.iter().any(|g| g.abs() > 0.1), "the check compared vanishing gradients");
    }

    #[test]
    fn the_cpus_softmax_ops_match_dfdxs_values_and_gradients() {
        // Each op with its output used twice downstream (so its gradient
        // accumulates), through the CPU's op and through dfdx's: the same
        // values and input gradients, to rounding, on DreamerV3's 255 bins,
        // one row of which is flat and one far from zero.
        let dev = Cpu::seed_from_u64(0);
        let (rows, cols) = (4usize, 255usize);
        let mut x0: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 97) as f32 / 97.0 * 12.0 - 6.0).collect();
        x0[cols..2 * cols].fill(0.25);
        x0[2 * cols..3 * cols].iter_mut().for_each(|v| *v += 900.0);
        let support: Vec<f32> = (0..cols).map(|i| i as f32 * 0.15 - 19.0).collect();
        let w = dev.tensor_from_vec((0..rows * cols).map(|i| (i % 5) as f32 - 2.0).collect(), (rows, cols));
        let close = |fast: &[f32], exact: &[f32], tol: f32, what: &str| {
            assert_eq!(fast.len(), exact.len());
            for (a, b) in fast.iter().zip(exact) {
                assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: {a} against dfdx's {b}");
            }
            assert!(exact.iter().any(|v| v.abs() > 1e-3), "{what}: the check compared vanishing numbers");
        };
        for log in [false, true] {
            let run = |fast: bool| {
                let x = dev.tensor_from_vec(x0.clone(), (rows, cols));
                let h = x.leaky_trace() * 1.5;
                let y = match (fast, log) {
                    (true, log) => softmax_rows_on_cpu(h, log),
                    (false, false) => h.softmax::<Axis<1>>(),
                    (false, true) => h.log_softmax::<Axis<1>>(),
                };
                let values = y.with_empty_tape().as_vec();
                let loss = y.with_empty_tape().square().sum() + (y * w.clone()).sum();
                (values, loss.backward().get(&x).as_vec())
            };
            let ((fast, fast_g), (exact, exact_g)) = (run(true), run(false));
            let what = if log { "log-softmax" } else { "softmax" };
            close(&fast, &exact, 1e-6, what);
            close(&fast_g, &exact_g, 1e-5, what);
            // Without a tape, the same values.
            let x = dev.tensor_from_vec(x0.clone(), (rows, cols)) * 1.5;
            let plain = softmax_rows_on_cpu(x, log);
            assert_eq!(plain.as_vec(), fast, "{what} without a tape");
        }
        let run = |fast: bool| {
            let x = dev.tensor_from_vec(x0.clone(), (rows, cols));
            let h = x.leaky_trace() * 1.5;
            let m = if fast {
                softmax_mean_rows_on_cpu(h, &support)
            } else {
                let s = dev.tensor_from_vec(support.clone(), (cols,));
                (h.softmax::<Axis<1>>() * s.broadcast_like::<(usize, usize), Axis<0>>(&(rows, cols)))
                    .sum::<(usize,), Axis<1>>()
            };
            let values = m.with_empty_tape().as_vec();
            let loss = m.with_empty_tape().square().sum() + (m * 3.0).sum();
            (values, loss.backward().get(&x).as_vec())
        };
        let ((fast, fast_g), (exact, exact_g)) = (run(true), run(false));
        close(&fast, &exact, 1e-5, "softmax mean");
        close(&fast_g, &exact_g, 1e-4, "softmax mean");
    }

    #[test]
    fn the_cpus_bias_add_matches_dfdxs_values_and_gradients() {
        // A linear layer through the CPU's bias add and through dfdx's
        // broadcast add: the same outputs and the same gradients for the
        // input, the weight and the bias.
        let dev = Cpu::seed_from_u64(0);
        let mut p = Params::new(Cpu::seed_from_u64(1));
        let layer = Linear::new(&mut p, "l", 5, 3);
        let x: Vec<f32> = (0..4 * 5).map(|i| ((i * 31) % 17) as f32 / 17.0 - 0.5).collect();
        let x = dev.tensor_from_vec(x, (4usize, 5usize));
        let run = |fast: bool| {
            let w = p.matrix(layer.w, 3, 5).retaped::<OwnedTape<f32, Cpu>>().permute::<(usize, usize), Axes2<1, 0>>();
            let b = p.get(layer.b).retaped::<OwnedTape<f32, Cpu>>();
            let z = x.leaky_trace().matmul(w);
            let y = if fast { add_bias_on_cpu(z, b) } else { z + b.broadcast_like::<(usize, usize), Axis<0>>(&(4, 3)) };
            let values = y.with_empty_tape().as_vec();
            let weights = dev.tensor_from_vec((0..12).map(|i| i as f32 - 5.0).collect(), (4usize, 3usize));
            let grads = (y * weights).sum().backward();
            let mut g = grads.get(&x).as_vec();
            g.extend(grads.get(&p.matrix(layer.w, 3, 5)).as_vec());
            g.extend(grads.get(p.get(layer.b)).as_vec());
            (values, g)
        };
        let (fast, exact) = (run(true), run(false));
        assert_eq!(fast.0, exact.0);
        for (a, b) in fast.1.iter().zip(&exact.1) {
            assert!((a - b).abs() < 1e-5, "gradient {a} against dfdx's {b}");
        }
        assert!(exact.1.iter().any(|g| g.abs() > 0.5), "the check compared vanishing gradients");
    }

    /// The layer's values without a tape, through either tanh.
    fn loss_value(x: &Tensor<(usize, usize), f32, Cpu>, fast: bool) -> Vec<f32> {
        let h = (x.clone() * 1.5) + 0.25;
        if fast { activation_on_cpu(h, Activation::Tanh) } else { h.tanh() }.as_vec()
    }

    #[test]
    fn the_cpus_linear_layer_gives_dfdxs_values_and_freezes_its_weights_on_request() {
        // Two stacked layers (n → 5 → 3, the first with a nonlinearity) on
        // 6 rows, through the CPU's layer and through dfdx's product,
        // broadcast add and relu: the same values and gradients up to the
        // products' rounding (the CPU's gemm is a later version than dfdx's,
        // with other kernels where the CPU has AVX-512; tanh against the
        // CPU's separate taped tanh, whose floats differ from dfdx's in the
        // last bits). n = 2 and 600 are where gemm splits a sum (its 2-deep
        // path and its depth blocks). Frozen, the second layer passes the
        // same gradient to its input, bit for bit, and none to its weights.
        type Taped = OwnedTape<f32, Cpu>;
        let dfdx_layer = |p: &Params<Cpu>, l: &Linear, h: Matrix<Taped>| {
            let rows = h.shape().0;
            let w = p.matrix(l.w, l.outputs(), l.inputs()).retaped::<Taped>();
            let b = p.get(l.b).retaped::<Taped>().broadcast_like::<(usize, usize), Axis<0>>(&(rows, l.outputs()));
            h.matmul(w.permute::<(usize, usize), Axes2<1, 0>>()) + b
        };
        for n in [7, 2, 600] {
            let mut p = Params::new(Cpu::seed_from_u64(1));
            let (first, second) = (Linear::new(&mut p, "a", n, 5), Linear::new(&mut p, "b", 5, 3));
            let dev = Cpu::seed_from_u64(0);
            let x: Vec<f32> = (0..6 * n).map(|i| ((i * 7919) % 97) as f32 / 97.0 * 4.0 - 2.0).collect();
            let x = dev.tensor_from_vec(x, (6usize, n));
            for act in [Activation::Relu, Activation::Tanh] {
                let run = |cpu: bool, frozen: bool| {
                    let h = if cpu {
                        first.forward_with(&p, x.leaky_trace(), Some(act), true)
                    } else {
                        let z = dfdx_layer(&p, &first, x.leaky_trace());
                        if act == Activation::Relu {
                            z.relu()
                        } else {
                            activation_on_cpu(z, act)
                        }
                    };
                    let y = if cpu { second.forward_with(&p, h, None, !frozen) } else { dfdx_layer(&p, &second, h) };
                    let values = y.with_empty_tape().as_vec();
                    let weights = dev.tensor_from_vec((0..18).map(|i| i as f32 - 8.5).collect(), (6usize, 3usize));
                    let mut grads = (y.with_empty_tape().square().sum() + (y * weights).sum()).backward();
                    let mut all = grads.get(&x).as_vec();
                    all.extend(p.grads(&mut grads, 0..p.len()));
                    (values, all)
                };
                let (cpu, dfdx) = (run(true, false), run(false, false));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let close = |a: &[f32], b: &[f32], what: &str| {
                    assert_eq!(a.len(), b.len(), "{n} inputs, {act:?}: {what}");
                    for (x, y) in a.iter().zip(b) {
                        assert!(
                            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                            "{n} inputs, {act:?}: {what}: {x} against {y}"
                        );
                    }
                };
                close(&cpu.0, &dfdx.0, "values");
                close(&cpu.1, &dfdx.1, "gradients of the input and every weight");
                assert!(dfdx.1.iter().filter(|g| g.abs() > 0.5).count() > 20, "the check compared vanishing gradients");
                // Frozen: the input's and the first layer's gradients are
                // unchanged; the second layer's weight and bias get none.
                let frozen = run(true, true);
                let second_starts = 6 * n + n * 5 + 5;
                assert_eq!(bits(&frozen.1[..second_starts]), bits(&cpu.1[..second_starts]));
                assert!(frozen.1[second_starts..].iter().all(|&g| g == 0.0));
                assert!(cpu.1[second_starts..].iter().any(|g| g.abs() > 0.5));
            }
        }
    }

    #[test]
    fn the_cpus_relu_gives_dfdxs_floats() {
        // Inputs on both sides of 0, 0 itself and NaN, at lengths that
        // leave a tail after the vector loop; the output used twice so that
        // the gradient accumulates.
        let dev = Cpu::seed_from_u64(0);
        for len in [1usize, 7, 8, 19, 64] {
            let mut v: Vec<f32> = (0..len).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            v[len / 2] = f32::NAN;
            let x = dev.tensor_from_vec(v, (len,));
            let run = |cpu: bool| {
                let y = if cpu { activation_on_cpu(x.leaky_trace(), Activation::Relu) } else { x.leaky_trace().relu() };
                let values = y.with_empty_tape().as_vec();
                let w = dev.tensor_from_vec((0..len).map(|i| i as f32 - 3.0).collect(), (len,));
                let grads = (y.with_empty_tape().square().sum() + (y * w).sum()).backward();
                (values, grads.get(&x).as_vec())
            };
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let (cpu, dfdx) = (run(true), run(false));
            assert_eq!(bits(&cpu.0), bits(&dfdx.0), "values at length {len}");
            assert_eq!(bits(&cpu.1), bits(&dfdx.1), "gradients at length {len}");
        }
    }
}
