//! [`Params`]: every trainable tensor of a policy, in one ordered list.
//!
//! rlx moves weights and gradients as flat `f32` vectors (the optimizers
//! ship them, checkpoints save them, Adam updates them). So the networks
//! keep no tensors of their own: each layer holds [`ParamId`]s into one
//! `Params`, and the flat vector is the tensors one after another, in the
//! order they were added. A target network is a second `Params` with the
//! same layout, read by the same layers.
//!
//! Each tensor is stored flat (`(usize,)`) and reshaped where a layer uses
//! it; a reshape of a contiguous tensor keeps its identity in dfdx, so its
//! gradient after a backward pass is found under the stored tensor.

use super::device::NetDevice;
use super::tensors::Flat;
use dfdx::prelude::*;
use rand_distr::Uniform;
use rlx::PolicyError;
use std::ops::Range;

/// A tensor's place in its [`Params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamId(usize);

/// The trainable tensors of a policy on device `D`, with their names and
/// shapes, in the order of the flat weight vector.
#[derive(Clone, Debug)]
pub struct Params<D: NetDevice> {
    dev: D,
    tensors: Vec<Flat<D>>,
    names: Vec<String>,
    shapes: Vec<Vec<usize>>,
    /// Where each tensor starts in the flat vector, and the total at the end.
    offsets: Vec<usize>,
    /// See [`version`](Self::version).
    version: u64,
}

/// The source of [`Params::version`]s, shared by every `Params`, so that
/// two of them with different contents never have the same version.
static VERSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_version() -> u64 {
    VERSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

impl<D: NetDevice> Params<D> {
    /// No tensors yet, on `dev` (whose random generator initializes them).
    pub fn new(dev: D) -> Self {
        let version = next_version();
        Self { dev, tensors: Vec::new(), names: Vec::new(), shapes: Vec::new(), offsets: vec![0], version }
    }

    /// A number that changes whenever a tensor is added or written, and
    /// that no other `Params` shares unless cloned from this one with the
    /// same contents: what a copy of the weights elsewhere (a
    /// [`HostNet`](super::HostNet)) checks to know it is current.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// Adds a tensor of `shape` drawn uniformly from `[−bound, bound)`
    /// with the device's generator (as dfdx initializes its layers).
    pub fn uniform(&mut self, name: &str, shape: &[usize], bound: f32) -> ParamId {
        let mut t: Flat<D> = self.dev.zeros_like(&(shape.iter().product(),));
        t.fill_with_distr(Uniform::new(-bound, bound));
        self.push(name, shape, t)
    }

    /// Adds a tensor of `shape` holding `values`.
    ///
    /// # Panics
    /// If `values` does not fill `shape`.
    pub fn constant(&mut self, name: &str, shape: &[usize], values: &[f32]) -> ParamId {
        assert_eq!(values.len(), shape.iter().product::<usize>(), "{name}: {shape:?} values");
        let t = self.dev.tensor_from_vec(values.to_vec(), (values.len(),));
        self.push(name, shape, t)
    }

    fn push(&mut self, name: &str, shape: &[usize], t: Flat<D>) -> ParamId {
        let end = self.len() + t.shape().0;
        self.tensors.push(t);
        self.names.push(name.to_string());
        self.shapes.push(shape.to_vec());
        self.offsets.push(end);
        self.version = next_version();
        ParamId(self.tensors.len() - 1)
    }

    /// These weights, if their device is the CPU (see
    /// `join_on_cpu!`).
    pub fn as_cpu(&self) -> Option<&Params<dfdx::prelude::Cpu>> {
        (self as &dyn std::any::Any).downcast_ref()
    }

    /// The tensor `id`, flat.
    pub fn get(&self, id: ParamId) -> &Flat<D> {
        &self.tensors[id.0]
    }

    /// The shape tensor `id` was added with.
    pub fn shape(&self, id: ParamId) -> &[usize] {
        &self.shapes[id.0]
    }

    /// Tensor `id` as a `rows × cols` matrix (no copy).
    pub fn matrix(&self, id: ParamId, rows: usize, cols: usize) -> Tensor<(usize, usize), f32, D> {
        self.tensors[id.0].clone().reshape_like(&(rows, cols))
    }

    /// Number of scalars in every tensor together.
    pub fn len(&self) -> usize {
        *self.offsets.last().expect("offsets start with 0")
    }

    /// Whether there are no scalars.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id the next added tensor gets: with [`range`](Self::range),
    /// marks where a network's tensors begin and end.
    pub fn next_id(&self) -> ParamId {
        ParamId(self.tensors.len())
    }

    /// The span of the flat vector held by tensors `from` up to (not
    /// including) `to`.
    pub fn range(&self, from: ParamId, to: ParamId) -> Range<usize> {
        self.offsets[from.0]..self.offsets[to.0]
    }

    /// Every scalar, flat (on a GPU this copies them to the host).
    pub fn to_vec(&self) -> Vec<f32> {
        self.read(0..self.len())
    }

    /// The scalars of `range` (whole tensors).
    pub fn read(&self, range: Range<usize>) -> Vec<f32> {
        let mut out = Vec::new();
        self.read_into(range, &mut out);
        out
    }

    /// Overwrites every scalar from a flat vector.
    ///
    /// # Errors
    /// [`PolicyError::WrongLength`] if `src` has the wrong length.
    pub fn load(&mut self, src: &[f32]) -> Result<(), PolicyError> {
        if src.len() != self.len() {
            return Err(PolicyError::WrongLength { what: "weights", expected: self.len(), got: src.len() });
        }
        self.write(0..self.len(), src);
        Ok(())
    }

    /// Overwrites the scalars of `range` (whole tensors) from `src`.
    pub fn write(&mut self, range: Range<usize>, src: &[f32]) {
        debug_assert_eq!(range.len(), src.len());
        self.version = next_version();
        for i in 0..self.tensors.len() {
            let (at, end) = (self.offsets[i], self.offsets[i + 1]);
            if at >= range.start && at < range.end {
                self.tensors[i].copy_from(&src[at - range.start..end - range.start]);
            }
        }
    }

    /// The gradient of every tensor of `range` after a backward pass, flat
    /// like [`read`](Self::read); zeros for a tensor the loss did not
    /// reach.
    pub fn grads(&self, grads: &mut Gradients<f32, D>, range: Range<usize>) -> Vec<f32> {
        let mut out = Vec::with_capacity(range.len());
        for (i, t) in self.tensors.iter().enumerate() {
            if range.contains(&self.offsets[i]) {
                D::append_gradient(grads, t, &mut out);
            }
        }
        assert_eq!(out.len(), range.len(), "{range:?} is not a range of whole tensors");
        out
    }

    /// [`read`](Self::read) into `out`, which keeps its allocation from
    /// one call to the next.
    pub fn read_into(&self, range: Range<usize>, out: &mut Vec<f32>) {
        out.resize(range.len(), 0.0);
        for (i, t) in self.tensors.iter().enumerate() {
            let at = self.offsets[i];
            if range.contains(&at) {
                t.copy_into(&mut out[at - range.start..self.offsets[i + 1] - range.start]);
            }
        }
    }

    /// Moves every tensor towards `online`'s by Polyak averaging
    /// (Lillicrap et al. 2016): `self ← τ · online + (1 − τ) · self`.
    ///
    /// In place, tensor by tensor (dfdx's `axpy`: `t · (1 − τ) + o · τ`,
    /// the same floats as the sum in the other order): copying both
    /// networks out and the result back was 3 % of an IQL update at
    /// 256-wide layers.
    pub fn soft_update(&mut self, online: &Params<D>, tau: f32) {
        debug_assert_eq!(self.offsets, online.offsets, "a target of another network");
        self.version = next_version();
        for (mine, theirs) in self.tensors.iter_mut().zip(&online.tensors) {
            mine.axpy(1.0 - tau, theirs, tau);
        }
    }

    /// Each tensor with its name and shape (what `save_weights` writes).
    pub fn named(&self) -> Vec<rlx::weights_file::NamedTensor> {
        (0..self.tensors.len())
            .map(|i| (self.names[i].clone(), self.shapes[i].clone(), self.read(self.offsets[i]..self.offsets[i + 1])))
            .collect()
    }

    /// Loads tensors by name, all or nothing.
    ///
    /// # Errors
    /// A tensor of this network missing from `tensors` or of another shape.
    pub fn load_named(&mut self, tensors: &[rlx::weights_file::NamedTensor]) -> Result<(), String> {
        let mut flat = Vec::with_capacity(self.len());
        for (name, shape) in self.names.iter().zip(&self.shapes) {
            let Some((_, got, values)) = tensors.iter().find(|(n, _, _)| n == name) else {
                return Err(format!("no tensor `{name}` (this network's tensors: {})", self.names.join(", ")));
            };
            if got != shape {
                return Err(format!("`{name}` has shape {got:?}; this network's is {shape:?}"));
            }
            flat.extend_from_slice(values);
        }
        self.write(0..self.len(), &flat);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_layout_read_write_and_named_round_trip() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let a = p.uniform("a", &[2, 3], 0.5);
        let b = p.constant("b", &[2], &[7.0, 8.0]);
        assert_eq!((p.len(), p.range(a, b), p.range(b, p.next_id())), (8, 0..6, 6..8));
        assert!(p.to_vec()[..6].iter().all(|x| (-0.5..0.5).contains(x)));
        assert_eq!(p.read(6..8), vec![7.0, 8.0]);
        let w: Vec<f32> = (0..8).map(|i| i as f32).collect();
        p.load(&w).unwrap();
        assert_eq!(p.to_vec(), w);
        assert_eq!(p.matrix(a, 2, 3).as_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(matches!(p.load(&w[1..]), Err(PolicyError::WrongLength { expected: 8, got: 7, .. })));
        let named = p.named();
        let mut q = Params::new(Cpu::seed_from_u64(1));
        q.uniform("a", &[2, 3], 0.5);
        q.constant("b", &[2], &[0.0, 0.0]);
        q.load_named(&named).unwrap();
        assert_eq!(q.to_vec(), w);
        let mut wrong = named.clone();
        wrong[1].1 = vec![1, 2];
        assert!(q.load_named(&wrong).unwrap_err().contains("`b` has shape [1, 2]"));
        assert!(q.load_named(&named[..1]).unwrap_err().contains("no tensor `b`"));
    }

    #[test]
    fn soft_update_is_polyak_averaging() {
        let mut online = Params::new(Cpu::seed_from_u64(0));
        online.constant("w", &[2], &[1.0, 2.0]);
        let mut target = online.clone();
        target.load(&[0.0, 0.0]).unwrap();
        target.soft_update(&online, 0.25);
        assert_eq!(target.to_vec(), vec![0.25, 0.5]);
        assert_eq!(online.to_vec(), vec![1.0, 2.0], "the online tensors are untouched");
    }
}
