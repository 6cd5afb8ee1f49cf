//! Observation and action spaces.
//!
//! A [`Space`] says what an env accepts and produces, with the same meaning as
//! Gymnasium's `Discrete`, `Box`, `MultiDiscrete` and (for observations)
//! `Dict`. Envs write observations as flat `f32` rows; [`Space::flat_dim`] is
//! the width of that row. Actions are `i64` for discrete spaces and `f32` for
//! boxes (see [`Action`]).

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A set of valid observations or actions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Space {
    /// The integers `0..n`.
    Discrete {
        /// Number of choices.
        n: i64,
    },
    /// A box in `f32^shape`, bounded per element by `low` and `high` (which may
    /// be infinite). `low` and `high` are flat, in row-major order.
    Box {
        /// Lower bounds, one per element.
        low: Vec<f32>,
        /// Upper bounds, one per element.
        high: Vec<f32>,
        /// The shape; the product of its entries is `low.len()`.
        shape: Vec<usize>,
        /// What the values are at their source (Gymnasium's `dtype`).
        #[serde(default)]
        dtype: Dtype,
    },
    /// Several discrete choices at once: element `i` lies in `0..nvec[i]`.
    MultiDiscrete {
        /// Number of choices per element.
        nvec: Vec<i64>,
    },
    /// Named observations side by side (Gymnasium's `Dict`, nested ones
    /// flattened into dotted names): a camera image next to a robot's
    /// joint angles, a goal next to a position. An observation row is the
    /// entries' rows one after another, in this order. A network gives
    /// each image entry (a `Box` of rank 3) its own convolutions, and a
    /// `uint8` entry stays bytes through batches and replay
    /// ([`packed_width`](Space::packed_width)). Observations only: no
    /// algorithm acts in a `Dict`. Made with [`Space::dict`].
    Dict {
        /// The entries, by name, in row order.
        entries: Vec<(String, Space)>,
    },
}

/// What a [`Space::Box`]'s values are at their source. An env writes every
/// observation as `f32`; a `U8` box says that each value is a byte `b`
/// written as `b / 255` (how the Gymnasium bridge hands over `uint8`
/// images). From the evaluator on, such observations stay one byte per
/// value: sample batches ([`Column::U8`](crate::Column::U8)), the wire, and
/// replay (whose [`FrameStore`](crate::replay::FrameLayout) also shares the
/// frames of stacked images); a network's first layer makes them `f32`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dtype {
    /// Any `f32`.
    #[default]
    F32,
    /// Bytes, scaled to `[0, 1]`: every value is `b / 255` for a `b` in `0..=255`.
    U8,
}

/// The `f32` a byte of a [`Dtype::U8`] box stands for: `b / 255`.
pub fn from_byte(b: u8) -> f32 {
    f32::from(b) / 255.0
}

/// The byte `b` with [`from_byte`]`(b) == x` exactly, if there is one.
pub fn to_byte(x: f32) -> Option<u8> {
    let b = nearest_byte(x);
    (from_byte(b) == x).then_some(b)
}

/// The byte nearest to `x * 255`, clamped to `0..=255` (NaN to 0).
#[inline(always)]
fn nearest_byte(x: f32) -> u8 {
    // Clamped with `max`/`min` and converted unchecked, so that the loop
    // in `to_bytes` vectorizes (with `round` it took 41 µs instead of
    // 17 µs per Atari observation: `cargo bench --bench codec -- bytes`).
    let y = (x * 255.0 + 0.5).max(0.0).min(255.0);
    // SAFETY: `max` and `min` return the non-NaN operand, so `y` is finite
    // and within 0..=255, which fits an `i32`.
    let i = unsafe { y.to_int_unchecked::<i32>() };
    i as u8
}

/// `values` as bytes ([`to_byte`] of each), appended to `out`. One pass
/// that the compiler vectorizes: the evaluator converts every image it
/// records.
///
/// # Errors
/// The index of the first value that is not `b / 255` for a byte `b`;
/// nothing is appended then.
pub fn to_bytes(values: &[f32], out: &mut Vec<u8>) -> Result<(), usize> {
    let start = out.len();
    out.resize(start + values.len(), 0);
    let mut bad = false;
    for (o, &x) in out[start..].iter_mut().zip(values) {
        let b = nearest_byte(x);
        bad |= from_byte(b) != x;
        *o = b;
    }
    if !bad {
        return Ok(());
    }
    out.truncate(start);
    Err(values.iter().position(|&x| to_byte(x).is_none()).expect("a value failed"))
}

/// One action handed to [`Env::step`](crate::Env::step), borrowed from the
/// caller's buffers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action<'a> {
    /// An element of a [`Space::Discrete`].
    Discrete(i64),
    /// An element of a [`Space::Box`].
    Continuous(&'a [f32]),
    /// An element of a [`Space::MultiDiscrete`].
    MultiDiscrete(&'a [i64]),
}

impl fmt::Display for Action<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Discrete(a) => write!(f, "{a}"),
            Action::Continuous(a) => write!(f, "{a:?}"),
            Action::MultiDiscrete(a) => write!(f, "{a:?}"),
        }
    }
}

/// The bounds of a [`Space::Box`] are inconsistent.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid Box space: {0}")]
pub struct SpaceError(String);

impl Space {
    /// `Discrete(n)`.
    pub fn discrete(n: i64) -> Self {
        Space::Discrete { n }
    }

    /// A box with per-element bounds.
    ///
    /// # Errors
    /// If `low`, `high` and `shape` disagree in size, or some `low > high`.
    pub fn bounded(low: Vec<f32>, high: Vec<f32>, shape: Vec<usize>) -> Result<Self, SpaceError> {
        let size: usize = shape.iter().product();
        if low.len() != size || high.len() != size {
            return Err(SpaceError(format!(
                "shape {shape:?} has {size} elements but low has {} and high {}",
                low.len(),
                high.len()
            )));
        }
        if let Some(i) = (0..size).find(|&i| low[i] > high[i] || low[i].is_nan() || high[i].is_nan()) {
            return Err(SpaceError(format!("element {i}: low {} > high {}", low[i], high[i])));
        }
        Ok(Space::Box { low, high, shape, dtype: Dtype::F32 })
    }

    /// A box of `uint8` values scaled to `[0, 1]` (an image from the
    /// Gymnasium bridge): bounds 0 and 1, [`Dtype::U8`].
    pub fn bytes(shape: Vec<usize>) -> Self {
        let size = shape.iter().product();
        Space::Box { low: vec![0.0; size], high: vec![1.0; size], shape, dtype: Dtype::U8 }
    }

    /// This space with `dtype` if it is a `Box` (unchanged otherwise).
    pub fn with_dtype(self, dtype: Dtype) -> Self {
        match self {
            Space::Box { low, high, shape, .. } => Space::Box { low, high, shape, dtype },
            other => other,
        }
    }

    /// The `Dict` of `entries`, in this order.
    ///
    /// # Errors
    /// No entries, an empty or repeated name, or an entry that is itself a
    /// `Dict` (flatten nested ones into dotted names).
    pub fn dict(entries: Vec<(String, Space)>) -> Result<Self, SpaceError> {
        if entries.is_empty() {
            return Err(SpaceError("a Dict needs at least one entry".into()));
        }
        for (i, (name, space)) in entries.iter().enumerate() {
            if name.is_empty() {
                return Err(SpaceError(format!("Dict entry {i} has an empty name")));
            }
            if entries[..i].iter().any(|(n, _)| n == name) {
                return Err(SpaceError(format!("Dict entry `{name}` appears twice")));
            }
            if matches!(space, Space::Dict { .. }) {
                return Err(SpaceError(format!(
                    "Dict entry `{name}` is a Dict: flatten nested entries into dotted names (`{name}.…`)"
                )));
            }
        }
        Ok(Space::Dict { entries })
    }

    /// A `Box`'s dtype; `None` for the other spaces.
    pub fn dtype(&self) -> Option<Dtype> {
        match self {
            Space::Box { dtype, .. } => Some(*dtype),
            _ => None,
        }
    }

    /// A box with the same bounds for every element.
    pub fn uniform_box(low: f32, high: f32, shape: Vec<usize>) -> Result<Self, SpaceError> {
        let size = shape.iter().product();
        Self::bounded(vec![low; size], vec![high; size], shape)
    }

    /// Width of one element as a flat row: 1 for `Discrete`, the number of
    /// elements otherwise.
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { low, .. } => low.len(),
            Space::MultiDiscrete { nvec } => nvec.len(),
            Space::Dict { entries } => entries.iter().map(|(_, s)| s.flat_dim()).sum(),
        }
    }

    /// Bytes per observation row when this is a `Dict` with a `uint8`
    /// entry: such a row is kept *packed*, each `uint8` entry's values
    /// one byte each and every other value as its four little-endian
    /// `f32` bytes, so that an image next to a vector costs one byte a
    /// pixel in batches, on the wire and in replay. `None` for every other
    /// space (a `uint8` `Box` alone is one byte a value without packing).
    pub fn packed_width(&self) -> Option<usize> {
        let Space::Dict { entries } = self else { return None };
        let bytes = |s: &Space| s.dtype() == Some(Dtype::U8);
        entries
            .iter()
            .any(|(_, s)| bytes(s))
            .then(|| entries.iter().map(|(_, s)| if bytes(s) { s.flat_dim() } else { 4 * s.flat_dim() }).sum())
    }

    /// Appends observation rows (`[rows, flat_dim]`) packed, as
    /// [`packed_width`](Self::packed_width) says, to `out`.
    ///
    /// # Errors
    /// The index (into `values`) of the first value of a `uint8` entry
    /// that is not a byte over 255; nothing is appended then.
    ///
    /// # Panics
    /// If this space does not pack, or `values` is not whole rows.
    pub fn pack_rows(&self, values: &[f32], out: &mut Vec<u8>) -> Result<(), usize> {
        let (Space::Dict { entries }, Some(_)) = (self, self.packed_width()) else {
            panic!("{self} does not pack its observations")
        };
        let width = self.flat_dim();
        assert!(width > 0 && values.len() % width == 0, "observations are not whole rows of {width}");
        let start = out.len();
        for (r, row) in values.chunks_exact(width).enumerate() {
            let mut at = 0;
            for (_, space) in entries {
                let leaf = &row[at..at + space.flat_dim()];
                if space.dtype() == Some(Dtype::U8) {
                    if let Err(i) = to_bytes(leaf, out) {
                        out.truncate(start);
                        return Err(r * width + at + i);
                    }
                } else {
                    out.extend(leaf.iter().flat_map(|v| v.to_le_bytes()));
                }
                at += space.flat_dim();
            }
        }
        Ok(())
    }

    /// Appends packed rows ([`pack_rows`](Self::pack_rows)) to `out` as
    /// `f32` observation rows, a byte `b` of a `uint8` entry as `b / 255`.
    ///
    /// # Errors
    /// When `bytes` is not whole packed rows of this space.
    pub fn unpack_rows(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
        let (Space::Dict { entries }, Some(packed)) = (self, self.packed_width()) else {
            return Err(format!("{self} does not pack its observations"));
        };
        if bytes.len() % packed != 0 {
            return Err(format!("{} bytes are not whole packed rows of {packed} bytes ({self})", bytes.len()));
        }
        out.reserve(bytes.len() / packed * self.flat_dim());
        for row in bytes.chunks_exact(packed) {
            let mut at = 0;
            for (_, space) in entries {
                let n = space.flat_dim();
                if space.dtype() == Some(Dtype::U8) {
                    out.extend(row[at..at + n].iter().map(|&b| from_byte(b)));
                    at += n;
                } else {
                    let leaf = &row[at..at + 4 * n];
                    out.extend(leaf.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                    at += 4 * n;
                }
            }
        }
        Ok(())
    }

    /// Whether `action` is an element of this space.
    pub fn contains(&self, action: Action<'_>) -> bool {
        match (self, action) {
            (Space::Discrete { n }, Action::Discrete(a)) => (0..*n).contains(&a),
            (Space::Box { low, high, .. }, Action::Continuous(x)) => {
                x.len() == low.len() && x.iter().zip(low.iter().zip(high)).all(|(v, (l, h))| *l <= *v && *v <= *h)
            }
            (Space::MultiDiscrete { nvec }, Action::MultiDiscrete(x)) => {
                x.len() == nvec.len() && x.iter().zip(nvec).all(|(v, n)| (0..*n).contains(v))
            }
            _ => false,
        }
    }

    /// Whether a flat observation row lies in this space (bounds checked
    /// per element; discrete values must be whole numbers in range).
    pub fn contains_row(&self, row: &[f32]) -> bool {
        match self {
            Space::Box { .. } => self.contains(Action::Continuous(row)),
            Space::Discrete { n } => row.len() == 1 && row[0].fract() == 0.0 && row[0] >= 0.0 && (row[0] as i64) < *n,
            Space::MultiDiscrete { nvec } => {
                row.len() == nvec.len()
                    && row.iter().zip(nvec).all(|(v, n)| v.fract() == 0.0 && *v >= 0.0 && (*v as i64) < *n)
            }
            Space::Dict { entries } => {
                row.len() == self.flat_dim() && {
                    let mut at = 0;
                    entries.iter().all(|(_, s)| {
                        at += s.flat_dim();
                        s.contains_row(&row[at - s.flat_dim()..at])
                    })
                }
            }
        }
    }

    /// Draws a uniformly random element, written as a flat `f32` row into
    /// `out` (length [`flat_dim`](Self::flat_dim)). Unbounded box dimensions are
    /// drawn from a standard normal, bounded-on-one-side ones from a shifted
    /// exponential, as Gymnasium does.
    pub fn sample_into<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [f32]) {
        assert_eq!(out.len(), self.flat_dim(), "output row has the wrong width");
        match self {
            Space::Discrete { n } => out[0] = rng.gen_range(0..*n) as f32,
            Space::MultiDiscrete { nvec } => {
                for (o, n) in out.iter_mut().zip(nvec) {
                    *o = rng.gen_range(0..*n) as f32;
                }
            }
            Space::Box { low, high, .. } => {
                for ((o, &l), &h) in out.iter_mut().zip(low).zip(high) {
                    *o = match (l.is_finite(), h.is_finite()) {
                        (true, true) if l == h => l,
                        (true, true) => rng.gen_range(l..=h),
                        (false, false) => standard_normal(rng),
                        (true, false) => l + exponential(rng),
                        (false, true) => h - exponential(rng),
                    };
                }
            }
            Space::Dict { entries } => {
                let mut at = 0;
                for (_, s) in entries {
                    s.sample_into(rng, &mut out[at..at + s.flat_dim()]);
                    at += s.flat_dim();
                }
            }
        }
    }

    /// Draws a uniformly random element as a fresh vector.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f32> {
        let mut out = vec![0.0; self.flat_dim()];
        self.sample_into(rng, &mut out);
        out
    }

    /// Width of an action mask over this space ([`Env::action_mask`]): `n`
    /// for `Discrete(n)`, the sum of `nvec` for a `MultiDiscrete`, `None`
    /// for a `Box` (continuous actions cannot be masked).
    ///
    /// [`Env::action_mask`]: crate::Env::action_mask
    pub fn mask_width(&self) -> Option<usize> {
        match self {
            Space::Discrete { n } => Some(*n as usize),
            Space::MultiDiscrete { nvec } => Some(nvec.iter().map(|&n| n as usize).sum()),
            Space::Box { .. } | Space::Dict { .. } => None,
        }
    }

    /// Clips rows of `Box` values (`[n, flat_dim]`) to the bounds, element
    /// by element; other spaces are left alone. Evaluators clip a policy's
    /// continuous actions this way before the env sees them, keeping the
    /// unclipped sample in the batch (a Gaussian's log-probability is of
    /// that sample).
    pub fn clip(&self, values: &mut [f32]) {
        if let Space::Box { low, high, .. } = self {
            let w = low.len().max(1);
            for (i, v) in values.iter_mut().enumerate() {
                *v = v.clamp(low[i % w], high[i % w]);
            }
        }
    }

    /// The number of discrete choices, if this is a `Discrete` space.
    pub fn n(&self) -> Option<i64> {
        match self {
            Space::Discrete { n } => Some(*n),
            _ => None,
        }
    }
}

fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    // Box–Muller; keeps rand_distr out of the core crate.
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

fn exponential<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    (-u.ln()) as f32
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Space::Discrete { n } => write!(f, "Discrete({n})"),
            Space::MultiDiscrete { nvec } => write!(f, "MultiDiscrete({nvec:?})"),
            Space::Box { low, high, shape, dtype } => {
                let same = |v: &[f32]| v.windows(2).all(|w| w[0] == w[1]);
                let bytes = if *dtype == Dtype::U8 { ", uint8" } else { "" };
                if !low.is_empty() && same(low) && same(high) {
                    write!(f, "Box({}, {}, {shape:?}{bytes})", low[0], high[0])
                } else {
                    write!(f, "Box(low={low:?}, high={high:?}, shape={shape:?}{bytes})")
                }
            }
            Space::Dict { entries } => {
                write!(f, "Dict(")?;
                for (i, (name, space)) in entries.iter().enumerate() {
                    write!(f, "{}{name}: {space}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, ")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn discrete_contains_and_samples_in_range() {
        let s = Space::discrete(3);
        assert!(s.contains(Action::Discrete(0)));
        assert!(s.contains(Action::Discrete(2)));
        assert!(!s.contains(Action::Discrete(3)));
        assert!(!s.contains(Action::Discrete(-1)));
        assert!(!s.contains(Action::Continuous(&[0.0])));
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            let a = s.sample(&mut rng)[0];
            assert!(s.contains_row(&[a]));
            seen[a as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 900), "{seen:?}");
    }

    #[test]
    fn box_bounds_and_shape() {
        let s = Space::bounded(vec![-1.0, 0.0], vec![1.0, 2.0], vec![2]).unwrap();
        assert_eq!(s.flat_dim(), 2);
        assert!(s.contains(Action::Continuous(&[0.5, 2.0])));
        assert!(!s.contains(Action::Continuous(&[0.5, 2.1])));
        assert!(!s.contains(Action::Continuous(&[0.5])));
        assert!(!s.contains(Action::Continuous(&[f32::NAN, 1.0])));
        assert!(Space::bounded(vec![1.0], vec![0.0], vec![1]).is_err());
        assert!(Space::bounded(vec![0.0], vec![1.0], vec![2]).is_err());
    }

    #[test]
    fn sampling_is_seeded_and_respects_bounds() {
        let s = Space::bounded(
            vec![-2.0, f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY],
            vec![2.0, f32::INFINITY, f32::INFINITY, 5.0],
            vec![2, 2],
        )
        .unwrap();
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..100).map(|_| s.sample(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        for x in draw(7) {
            assert!(s.contains_row(&x), "{x:?}");
        }
    }

    #[test]
    fn byte_boxes_say_so_and_old_spaces_read_as_f32() {
        let s = Space::bytes(vec![2, 2, 1]);
        assert_eq!(s.dtype(), Some(Dtype::U8));
        for b in 0..=255u8 {
            assert_eq!(to_byte(from_byte(b)), Some(b));
        }
        for x in [f32::NAN, -1.0 / 255.0, 0.5, 1.0 + 1e-6, 256.0 / 255.0, f32::INFINITY, -f32::INFINITY] {
            assert_eq!(to_byte(x), None, "{x}");
        }
        let mut out = vec![7];
        assert_eq!(to_bytes(&[0.0, 1.0, from_byte(128)], &mut out), Ok(()));
        assert_eq!(out, [7, 0, 255, 128]);
        assert_eq!(to_bytes(&[0.0, 1.0, 0.5, f32::NAN], &mut out), Err(2));
        assert_eq!(out, [7, 0, 255, 128], "nothing appended");
        assert_eq!(s.to_string(), "Box(0, 1, [2, 2, 1], uint8)");
        assert_eq!(Space::discrete(2).dtype(), None);
        // A space written before Box had a dtype reads as F32.
        let old = serde_json::json!({"Box": {"low": [0.0], "high": [1.0], "shape": [1]}});
        let read: Space = serde_json::from_value(old).unwrap();
        assert_eq!(read, Space::uniform_box(0.0, 1.0, vec![1]).unwrap());
        let round = rmp_serde::from_slice::<Space>(&rmp_serde::to_vec(&s).unwrap()).unwrap();
        assert_eq!(round, s);
    }

    #[test]
    fn multi_discrete() {
        let s = Space::MultiDiscrete { nvec: vec![2, 3] };
        assert!(s.contains(Action::MultiDiscrete(&[1, 2])));
        assert!(!s.contains(Action::MultiDiscrete(&[2, 0])));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100 {
            assert!(s.contains_row(&s.sample(&mut rng)));
        }
        assert_eq!(s.to_string(), "MultiDiscrete([2, 3])");
    }

    #[test]
    fn a_dict_with_an_image_packs_its_rows_as_bytes_and_floats() {
        let image = Space::bytes(vec![2, 2, 1]);
        let vector = Space::uniform_box(-5.0, 5.0, vec![2]).unwrap();
        let s = Space::dict(vec![("pos".into(), vector.clone()), ("cam".into(), image)]).unwrap();
        assert_eq!(s.flat_dim(), 6);
        assert_eq!(s.packed_width(), Some(4 * 2 + 4), "two f32 of four bytes, four pixels of one");
        assert_eq!(s.to_string(), "Dict(pos: Box(-5, 5, [2]), cam: Box(0, 1, [2, 2, 1], uint8))");
        let rows = [-1.5, 2.25, 0.0, 1.0, from_byte(3), from_byte(200), 4.0, -0.125, 1.0, 1.0, 0.0, from_byte(9)];
        let mut packed = vec![];
        s.pack_rows(&rows, &mut packed).unwrap();
        assert_eq!(packed.len(), 24);
        assert_eq!(&packed[8..12], &[0, 255, 3, 200], "the image's bytes after the vector's eight");
        assert_eq!(&packed[..4], &(-1.5f32).to_le_bytes());
        let mut back = vec![];
        s.unpack_rows(&packed, &mut back).unwrap();
        assert_eq!(back, rows);
        assert!(s.unpack_rows(&packed[..23], &mut back).unwrap_err().contains("whole packed rows of 12"));
        // A value of the uint8 entry that is no byte: its index, nothing appended.
        let mut bad = rows;
        bad[10] = 0.3;
        assert_eq!(s.pack_rows(&bad, &mut packed), Err(10));
        assert_eq!(packed.len(), 24);
        // Without a uint8 entry, or outside a Dict, nothing packs.
        assert_eq!(Space::dict(vec![("v".into(), vector.clone())]).unwrap().packed_width(), None);
        assert_eq!(Space::bytes(vec![2, 2, 1]).packed_width(), None);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..50 {
            assert!(s.contains_row(&s.sample(&mut rng)));
        }
        assert!(!s.contains_row(&[0.0, 6.0, 0.0, 0.0, 0.0, 0.0]), "6 is outside the vector's box");
        let round = rmp_serde::from_slice::<Space>(&rmp_serde::to_vec(&s).unwrap()).unwrap();
        assert_eq!(round, s);
        // Names are unique, entries flat.
        assert!(Space::dict(vec![]).is_err());
        let twice = Space::dict(vec![("a".into(), vector.clone()), ("a".into(), vector.clone())]);
        assert!(twice.unwrap_err().to_string().contains("`a` appears twice"));
        let nested = Space::dict(vec![("outer".into(), s.clone())]);
        assert!(nested.unwrap_err().to_string().contains("dotted names"));
    }
}
