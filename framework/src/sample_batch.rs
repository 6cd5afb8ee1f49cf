//! [`SampleBatch`]: the columnar table of experience that flows from
//! evaluators to learners.
//!
//! Each field is one contiguous column of `f32`, `i64` or `u8` values with a
//! fixed row width (an observation row of CartPole is 4 wide, a reward 1
//! wide), so concatenating, slicing and gathering minibatches are plain
//! `memcpy`s and a column can be handed to a tensor library without
//! reshaping. Flags (`terminateds`, `truncateds`) are stored as `f32`
//! 0.0 / 1.0 so losses can use them directly.
//!
//! Observations of a `uint8` box ([`Dtype::U8`](crate::Dtype), Atari's
//! frames) stay bytes: a [`Column::U8`] a quarter the size of `f32`, through
//! batches, the wire and replay. They become `f32` (`b / 255`) only where a
//! network reads them ([`SampleBatch::values`], [`Values::to_f32`]).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

/// Standard field names, shared by evaluators, postprocessing and losses.
pub mod fields {
    /// Observation the action was taken on, `f32 [obs_dim]` (`u8` for a
    /// `uint8` box, see [`super::Values`]).
    pub const OBS: &str = "obs";
    /// Observation reached by the step, like [`OBS`] (the final one when the episode ended).
    pub const NEW_OBS: &str = "new_obs";
    /// Action taken: `i64 [1]` for discrete spaces, `f32 [act_dim]` for boxes.
    pub const ACTIONS: &str = "actions";
    /// Reward received, `f32 [1]`.
    pub const REWARDS: &str = "rewards";
    /// 1.0 where the step ended the episode in a terminal state.
    pub const TERMINATEDS: &str = "terminateds";
    /// 1.0 where the step ended the episode by truncation (time limit).
    pub const TRUNCATEDS: &str = "truncateds";
    /// Log-probability of the action under the behaviour policy.
    pub const ACTION_LOGP: &str = "action_logp";
    /// Value estimate of `obs` by the behaviour policy.
    pub const VF_PREDS: &str = "vf_preds";
    /// Advantage estimates (GAE).
    pub const ADVANTAGES: &str = "advantages";
    /// Targets for the value function (returns).
    pub const VALUE_TARGETS: &str = "value_targets";
    /// Legal actions in `obs` (1.0 legal, 0.0 illegal), `f32 [mask width]`,
    /// when the env reports action masks ([`crate::Env::action_mask`]).
    pub const ACTION_MASK: &str = "action_mask";
    /// Legal actions in `new_obs`, like [`ACTION_MASK`] (what DQN's target
    /// maximizes over).
    pub const NEW_ACTION_MASK: &str = "new_action_mask";
    /// A recurrent policy's state before acting on `obs` (zeros where an
    /// episode starts), `f32 [state size]`.
    pub const STATE_IN: &str = "state_in";
    /// The recurrent state after acting on `obs`: the next row's
    /// `state_in` within an episode.
    pub const STATE_OUT: &str = "state_out";
}

/// Errors from building or combining batches.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum BatchError {
    /// A column's row count differs from the batch's.
    #[error("column `{field}` has {got} rows but the batch has {expected}")]
    RowMismatch {
        /// The column.
        field: String,
        /// Rows in the batch.
        expected: usize,
        /// Rows in the column.
        got: usize,
    },
    /// A column's data length is not a multiple of its width.
    #[error("column `{field}` has {len} values, not a multiple of its width {width}")]
    Ragged {
        /// The column.
        field: String,
        /// Number of values.
        len: usize,
        /// Row width.
        width: usize,
    },
    /// Batches being combined have different columns, kinds or widths.
    #[error("cannot combine batches: {0}")]
    Incompatible(String),
    /// A field the caller needs is absent.
    #[error("batch has no field `{field}` (fields: {available})")]
    MissingField {
        /// The missing field.
        field: String,
        /// Fields present.
        available: String,
    },
    /// A field has the wrong element type.
    #[error("field `{field}` holds {got} values, expected {expected}")]
    WrongKind {
        /// The field.
        field: String,
        /// What the caller asked for.
        expected: &'static str,
        /// What the column holds.
        got: &'static str,
    },
}

/// One contiguous column of a [`SampleBatch`].
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// `f32` values, `width` per row.
    F32 {
        /// Row-major values.
        data: Vec<f32>,
        /// Values per row.
        width: usize,
    },
    /// `i64` values, `width` per row.
    I64 {
        /// Row-major values.
        data: Vec<i64>,
        /// Values per row.
        width: usize,
    },
    /// Bytes, `width` per row: the observations of a `uint8` box, byte `b`
    /// standing for `b / 255` ([`Values`]).
    U8 {
        /// Row-major values.
        data: Vec<u8>,
        /// Values per row.
        width: usize,
    },
}

/// `$body` with `$data` bound to a column's values, whatever their type.
macro_rules! with_data {
    ($column:expr, $data:ident => $body:expr) => {
        match $column {
            Column::F32 { data: $data, .. } => $body,
            Column::I64 { data: $data, .. } => $body,
            Column::U8 { data: $data, .. } => $body,
        }
    };
}

/// `$body` with `$a` and `$b` bound to the values of two columns of the
/// same kind (checked by the caller).
macro_rules! with_pair {
    ($x:expr, $y:expr, $a:ident, $b:ident => $body:expr) => {
        match ($x, $y) {
            (Column::F32 { data: $a, .. }, Column::F32 { data: $b, .. }) => $body,
            (Column::I64 { data: $a, .. }, Column::I64 { data: $b, .. }) => $body,
            (Column::U8 { data: $a, .. }, Column::U8 { data: $b, .. }) => $body,
            _ => unreachable!("column kinds are checked before copying"),
        }
    };
}

impl Column {
    /// An empty `f32` column of the given row width.
    pub fn f32(width: usize) -> Self {
        Column::F32 { data: Vec::new(), width }
    }

    /// An empty `i64` column of the given row width.
    pub fn i64(width: usize) -> Self {
        Column::I64 { data: Vec::new(), width }
    }

    /// An empty `u8` column of the given row width.
    pub fn u8(width: usize) -> Self {
        Column::U8 { data: Vec::new(), width }
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        match self {
            Column::F32 { width, .. } | Column::I64 { width, .. } | Column::U8 { width, .. } => *width,
        }
    }

    /// Number of values (rows × width).
    fn value_count(&self) -> usize {
        with_data!(self, data => data.len())
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.value_count() / self.width().max(1)
    }

    /// The observation values of an `f32` or `u8` column; `None` for `i64`.
    pub fn values(&self) -> Option<Values<'_>> {
        match self {
            Column::F32 { data, .. } => Some(Values::F32(data)),
            Column::U8 { data, .. } => Some(Values::U8(data)),
            Column::I64 { .. } => None,
        }
    }

    /// `"f32"`, `"i64"` or `"u8"`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Column::F32 { .. } => "f32",
            Column::I64 { .. } => "i64",
            Column::U8 { .. } => "u8",
        }
    }

    /// Bytes of the column's values.
    pub fn size_bytes(&self) -> usize {
        with_data!(self, data => std::mem::size_of_val(data.as_slice()))
    }

    /// Rows `rows` as little-endian bytes, value after value (what a step
    /// request to an external or Python env carries).
    ///
    /// # Panics
    /// If `rows` goes past the end of the column.
    pub fn le_bytes(&self, rows: Range<usize>) -> Vec<u8> {
        let w = self.width();
        with_data!(self, data => data[rows.start * w..rows.end * w].iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// Removes all rows, keeping the allocation.
    pub fn clear(&mut self) {
        with_data!(self, data => data.clear())
    }

    /// Copies rows `rows` into a new column.
    ///
    /// # Panics
    /// If `rows` goes past the end of the column.
    pub fn slice_rows(&self, rows: Range<usize>) -> Column {
        let mut out = self.empty_like();
        out.extend_rows(self, rows);
        out
    }

    /// `rows` rows of zeros of this column's kind and width.
    pub fn zeros(&self, rows: usize) -> Column {
        let mut out = self.empty_like();
        let n = rows * self.width();
        with_data!(&mut out, data => data.resize(n, Default::default()));
        out
    }

    /// Overwrites rows `at[i]` with row `i` of `src`, for every `i`.
    ///
    /// # Panics
    /// If `src` has another kind or width, or a row is out of range.
    pub fn scatter_rows(&mut self, src: &Column, at: &[usize]) {
        assert!(self.same_layout(src), "scatter of a {} column into a {}", src.kind_name(), self.kind_name());
        let w = self.width();
        with_pair!(self, src, data, s => {
            for (i, &r) in at.iter().enumerate() {
                data[r * w..(r + 1) * w].copy_from_slice(&s[i * w..(i + 1) * w]);
            }
        })
    }

    /// Copies row `from` over row `to` within the column.
    ///
    /// # Panics
    /// If either row is out of range.
    pub fn copy_row_within(&mut self, from: usize, to: usize) {
        let w = self.width();
        with_data!(self, data => data.copy_within(from * w..(from + 1) * w, to * w))
    }

    fn same_layout(&self, other: &Column) -> bool {
        self.kind_name() == other.kind_name() && self.width() == other.width()
    }

    fn empty_like(&self) -> Column {
        match self {
            Column::F32 { width, .. } => Column::f32(*width),
            Column::I64 { width, .. } => Column::i64(*width),
            Column::U8 { width, .. } => Column::u8(*width),
        }
    }

    fn reserve_rows(&mut self, rows: usize) {
        let n = rows * self.width();
        with_data!(self, data => data.reserve_exact(n))
    }

    fn extend_from(&mut self, other: &Column) {
        with_pair!(self, other, data, o => data.extend_from_slice(o))
    }

    fn extend_rows(&mut self, other: &Column, rows: Range<usize>) {
        let w = other.width();
        with_pair!(self, other, data, o => data.extend_from_slice(&o[rows.start * w..rows.end * w]))
    }

    fn push_row(&mut self, other: &Column, row: usize) {
        self.extend_rows(other, row..row + 1)
    }

    /// Overwrites rows `at..at + rows.len()` with rows `rows` of `src`.
    fn overwrite_rows(&mut self, at: usize, src: &Column, rows: Range<usize>) {
        let w = src.width();
        let (d, r) = (at * w..(at + rows.len()) * w, rows.start * w..rows.end * w);
        with_pair!(self, src, data, o => data[d].copy_from_slice(&o[r]))
    }
}

/// Observation values as a batch holds them: `f32`, or the bytes of a
/// `uint8` box, byte `b` standing for `b / 255`, or the packed rows of a
/// `Dict` with a `uint8` entry ([`Space::packed_width`](crate::Space::packed_width)).
/// What a network's first layer reads ([`SampleBatch::values`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Values<'a> {
    /// `f32` values.
    F32(&'a [f32]),
    /// Bytes, each `b / 255`.
    U8(&'a [u8]),
}

impl<'a> Values<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::U8(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows `rows` of `width` values each, as they are: bytes stay bytes
    /// (a packed `Dict` row, [`Space::packed_width`](crate::Space::packed_width),
    /// is only read right by the network's input).
    ///
    /// # Panics
    /// If a row is out of range.
    pub fn gather(&self, width: usize, rows: &[usize]) -> Column {
        fn pick<T: Copy>(v: &[T], width: usize, rows: &[usize]) -> Vec<T> {
            let mut out = Vec::with_capacity(rows.len() * width);
            rows.iter().for_each(|&r| out.extend_from_slice(&v[r * width..(r + 1) * width]));
            out
        }
        match self {
            Values::F32(v) => Column::F32 { data: pick(v, width, rows), width },
            Values::U8(v) => Column::U8 { data: pick(v, width, rows), width },
        }
    }

    /// The values as `f32`: borrowed as they are, or bytes made `b / 255`
    /// (exactly what the Gymnasium bridge hands a policy to act on). Not
    /// for the packed rows of a `Dict`: those unpack with
    /// [`Space::unpack_rows`](crate::Space::unpack_rows).
    pub fn to_f32(&self) -> Cow<'a, [f32]> {
        match *self {
            Values::F32(v) => Cow::Borrowed(v),
            Values::U8(v) => Cow::Owned(v.iter().map(|&b| crate::space::from_byte(b)).collect()),
        }
    }
}

impl<'a> From<&'a [f32]> for Values<'a> {
    fn from(values: &'a [f32]) -> Self {
        Values::F32(values)
    }
}

impl<'a, const N: usize> From<&'a [f32; N]> for Values<'a> {
    fn from(values: &'a [f32; N]) -> Self {
        Values::F32(values)
    }
}

impl<'a> From<&'a Vec<f32>> for Values<'a> {
    fn from(values: &'a Vec<f32>) -> Self {
        Values::F32(values)
    }
}

/// A columnar batch of experience: named columns with equal row counts.
///
/// # Examples
/// ```
/// use rlx::{Column, SampleBatch};
///
/// let mut a = SampleBatch::new();
/// a.insert_f32("rewards", vec![1.0, 0.0, 1.0], 1).unwrap();
/// a.insert_i64("actions", vec![0, 1, 1], 1).unwrap();
/// let b = a.slice(1..3);
/// let c = SampleBatch::concat(&[a, b]).unwrap();
/// assert_eq!(c.len(), 5);
/// assert_eq!(c.f32("rewards").unwrap(), &[1.0, 0.0, 1.0, 0.0, 1.0]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleBatch {
    columns: BTreeMap<String, Column>,
    len: usize,
}

impl SampleBatch {
    /// An empty batch with no columns.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds or replaces a column.
    ///
    /// # Errors
    /// If the column's row count differs from the batch's (the first column
    /// sets the row count), or its data is not a whole number of rows.
    pub fn insert(&mut self, field: impl Into<String>, column: Column) -> Result<(), BatchError> {
        let field = field.into();
        let len = column.value_count();
        let width = column.width();
        if width == 0 || len % width != 0 {
            return Err(BatchError::Ragged { field, len, width });
        }
        let rows = column.rows();
        let others = self.columns.keys().any(|k| *k != field);
        if others && rows != self.len {
            return Err(BatchError::RowMismatch { field, expected: self.len, got: rows });
        }
        self.len = rows;
        self.columns.insert(field, column);
        Ok(())
    }

    /// Adds or replaces an `f32` column.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub fn insert_f32(&mut self, field: impl Into<String>, data: Vec<f32>, width: usize) -> Result<(), BatchError> {
        self.insert(field, Column::F32 { data, width })
    }

    /// Adds or replaces an `i64` column.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub fn insert_i64(&mut self, field: impl Into<String>, data: Vec<i64>, width: usize) -> Result<(), BatchError> {
        self.insert(field, Column::I64 { data, width })
    }

    /// Adds or replaces a `u8` column (the observations of a `uint8` box).
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub fn insert_u8(&mut self, field: impl Into<String>, data: Vec<u8>, width: usize) -> Result<(), BatchError> {
        self.insert(field, Column::U8 { data, width })
    }

    /// Removes a column and returns it.
    pub fn remove(&mut self, field: &str) -> Option<Column> {
        let col = self.columns.remove(field);
        if self.columns.is_empty() {
            self.len = 0;
        }
        col
    }

    /// The column called `field`, if any.
    pub fn get(&self, field: &str) -> Option<&Column> {
        self.columns.get(field)
    }

    /// The column called `field`, mutably: its values may change, not its
    /// kind, width or rows.
    pub(crate) fn column_mut(&mut self, field: &str) -> Option<&mut Column> {
        self.columns.get_mut(field)
    }

    /// Whether the batch has a column called `field`.
    pub fn contains(&self, field: &str) -> bool {
        self.columns.contains_key(field)
    }

    /// Column names in sorted order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.columns.keys().map(String::as_str)
    }

    /// Columns with their names, in sorted order.
    pub fn columns(&self) -> impl Iterator<Item = (&str, &Column)> {
        self.columns.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn column(&self, field: &str) -> Result<&Column, BatchError> {
        self.columns.get(field).ok_or_else(|| BatchError::MissingField {
            field: field.to_string(),
            available: self.columns.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The `f32` values of `field`, row-major.
    ///
    /// # Errors
    /// If the field is absent or holds other values.
    pub fn f32(&self, field: &str) -> Result<&[f32], BatchError> {
        match self.column(field)? {
            Column::F32 { data, .. } => Ok(data),
            other => Err(BatchError::WrongKind { field: field.into(), expected: "f32", got: other.kind_name() }),
        }
    }

    /// The `u8` values of `field`, row-major.
    ///
    /// # Errors
    /// If the field is absent or holds other values.
    pub fn u8(&self, field: &str) -> Result<&[u8], BatchError> {
        match self.column(field)? {
            Column::U8 { data, .. } => Ok(data),
            other => Err(BatchError::WrongKind { field: field.into(), expected: "u8", got: other.kind_name() }),
        }
    }

    /// The observation values of `field`: `f32`, or the bytes of a `uint8`
    /// box. What a network's input layer takes.
    ///
    /// # Errors
    /// If the field is absent or holds `i64` values.
    pub fn values(&self, field: &str) -> Result<Values<'_>, BatchError> {
        match self.column(field)? {
            Column::F32 { data, .. } => Ok(Values::F32(data)),
            Column::U8 { data, .. } => Ok(Values::U8(data)),
            other => Err(BatchError::WrongKind { field: field.into(), expected: "f32 or u8", got: other.kind_name() }),
        }
    }

    /// The `i64` values of `field`, row-major.
    ///
    /// # Errors
    /// If the field is absent or holds other values.
    pub fn i64(&self, field: &str) -> Result<&[i64], BatchError> {
        match self.column(field)? {
            Column::I64 { data, .. } => Ok(data),
            other => Err(BatchError::WrongKind { field: field.into(), expected: "i64", got: other.kind_name() }),
        }
    }

    /// Mutable `f32` values of `field`.
    ///
    /// # Errors
    /// If the field is absent or holds other values.
    pub fn f32_mut(&mut self, field: &str) -> Result<&mut [f32], BatchError> {
        let available = self.columns.keys().cloned().collect::<Vec<_>>().join(", ");
        match self.columns.get_mut(field) {
            Some(Column::F32 { data, .. }) => Ok(data),
            Some(other) => Err(BatchError::WrongKind { field: field.into(), expected: "f32", got: other.kind_name() }),
            None => Err(BatchError::MissingField { field: field.into(), available }),
        }
    }

    fn check_compatible(&self, other: &SampleBatch) -> Result<(), BatchError> {
        if self.columns.len() != other.columns.len() || self.columns.keys().ne(other.columns.keys()) {
            return Err(BatchError::Incompatible(format!(
                "fields [{}] vs [{}]",
                self.fields().collect::<Vec<_>>().join(", "),
                other.fields().collect::<Vec<_>>().join(", ")
            )));
        }
        for ((name, a), b) in self.columns.iter().zip(other.columns.values()) {
            if !a.same_layout(b) {
                return Err(BatchError::Incompatible(format!(
                    "field `{name}` is {}x{} in one batch and {}x{} in the other",
                    a.kind_name(),
                    a.width(),
                    b.kind_name(),
                    b.width()
                )));
            }
        }
        Ok(())
    }

    /// Appends the rows of `other`. An empty batch with no columns takes on
    /// `other`'s columns.
    ///
    /// # Errors
    /// If the batches have different fields, kinds or widths.
    pub fn append(&mut self, other: &SampleBatch) -> Result<(), BatchError> {
        if self.columns.is_empty() {
            *self = other.clone();
            return Ok(());
        }
        self.check_compatible(other)?;
        for (a, b) in self.columns.values_mut().zip(other.columns.values()) {
            a.extend_from(b);
        }
        self.len += other.len;
        Ok(())
    }

    /// Appends rows `rows` of `other` without copying the rest.
    ///
    /// # Errors
    /// If the batches have different fields, kinds or widths.
    ///
    /// # Panics
    /// If `rows` goes past the end of `other`.
    pub fn append_rows(&mut self, other: &SampleBatch, rows: Range<usize>) -> Result<(), BatchError> {
        self.check_compatible(other)?;
        assert!(rows.end <= other.len, "rows {rows:?} of a batch of {} rows", other.len);
        for (a, b) in self.columns.values_mut().zip(other.columns.values()) {
            a.extend_rows(b, rows.clone());
        }
        self.len += rows.len();
        Ok(())
    }

    /// Concatenates batches row-wise.
    ///
    /// # Errors
    /// If the batches have different fields, kinds or widths.
    pub fn concat(batches: &[SampleBatch]) -> Result<SampleBatch, BatchError> {
        let Some(first) = batches.first() else {
            return Ok(SampleBatch::new());
        };
        let total: usize = batches.iter().map(SampleBatch::len).sum();
        let mut out = SampleBatch::with_capacity_like(first, total);
        for b in batches {
            out.append(b)?;
        }
        Ok(out)
    }

    /// Copies rows `range` into a new batch.
    ///
    /// # Panics
    /// If `range` goes past the end of the batch.
    pub fn slice(&self, range: Range<usize>) -> SampleBatch {
        assert!(range.start <= range.end && range.end <= self.len, "slice {range:?} of a batch of {} rows", self.len);
        let columns = self.columns.iter().map(|(k, c)| (k.clone(), c.slice_rows(range.clone()))).collect();
        SampleBatch { columns, len: range.len() }
    }

    /// Copies the given rows, in order, into a new batch.
    ///
    /// # Panics
    /// If an index is out of range.
    pub fn gather(&self, rows: &[usize]) -> SampleBatch {
        let columns = self
            .columns
            .iter()
            .map(|(k, c)| {
                let mut out = c.empty_like();
                out.reserve_rows(rows.len());
                for &r in rows {
                    assert!(r < self.len, "row {r} of a batch of {} rows", self.len);
                    out.push_row(c, r);
                }
                (k.clone(), out)
            })
            .collect();
        SampleBatch { columns, len: rows.len() }
    }

    /// An empty batch with `template`'s columns, each with room for `rows`
    /// rows allocated up front (replay storage).
    pub fn with_capacity_like(template: &SampleBatch, rows: usize) -> SampleBatch {
        let columns = template
            .columns
            .iter()
            .map(|(k, c)| {
                let mut out = c.empty_like();
                out.reserve_rows(rows);
                (k.clone(), out)
            })
            .collect();
        SampleBatch { columns, len: 0 }
    }

    /// Overwrites rows `at..at + rows.len()` with rows `rows` of `src`, in
    /// place (a ring buffer's slots).
    ///
    /// # Errors
    /// If the batches have different fields, kinds or widths.
    ///
    /// # Panics
    /// If either range goes past the end of its batch.
    pub fn overwrite_rows(&mut self, at: usize, src: &SampleBatch, rows: Range<usize>) -> Result<(), BatchError> {
        self.check_compatible(src)?;
        let n = rows.len();
        assert!(
            at + n <= self.len && rows.end <= src.len,
            "rows {at}..{} of {} from {rows:?} of {}",
            at + n,
            self.len,
            src.len
        );
        for (dst, c) in self.columns.values_mut().zip(src.columns.values()) {
            dst.overwrite_rows(at, c, rows.clone());
        }
        Ok(())
    }

    /// Removes all rows, keeping columns and allocations.
    pub fn clear(&mut self) {
        self.columns.values_mut().for_each(Column::clear);
        self.len = 0;
    }

    /// Shuffled minibatches of about `size` rows covering every row once, in
    /// an order fixed by `seed`. The batch is split into `max(1, len / size)`
    /// minibatches whose sizes differ by at most one, so no tiny trailing
    /// minibatch gets a full optimizer step.
    ///
    /// # Panics
    /// If `size` is zero.
    pub fn minibatches(&self, size: usize, seed: u64) -> impl Iterator<Item = SampleBatch> + '_ {
        minibatch_rows(self.len, size, seed).into_iter().map(move |rows| self.gather(&rows))
    }

    /// Shifts and scales an `f32` field to mean 0 and standard deviation 1
    /// (advantage standardization). A constant field becomes all zeros.
    ///
    /// # Errors
    /// If the field is absent or not `f32`.
    pub fn standardize(&mut self, field: &str) -> Result<(), BatchError> {
        standardize(self.f32_mut(field)?);
        Ok(())
    }

    /// Size in bytes of the column data (for metrics).
    pub fn size_bytes(&self) -> usize {
        self.columns.values().map(Column::size_bytes).sum()
    }

    /// Builds a batch from decoded columns, checking every invariant.
    pub(crate) fn from_columns(columns: Vec<(String, Column)>) -> Result<SampleBatch, BatchError> {
        let mut batch = SampleBatch::new();
        for (field, column) in columns {
            if batch.columns.contains_key(&field) {
                return Err(BatchError::Incompatible(format!("field `{field}` appears twice")));
            }
            batch.insert(field, column)?;
        }
        Ok(batch)
    }
}

/// The row indices of [`SampleBatch::minibatches`]: `0..len` shuffled by
/// `seed` and split into `max(1, len / size)` runs whose lengths differ by
/// at most one. Learners that split a minibatch further (across devices)
/// start from these.
///
/// # Panics
/// If `size` is zero.
pub fn minibatch_rows(len: usize, size: usize, seed: u64) -> Vec<Vec<usize>> {
    assert!(size > 0, "minibatch size must be positive");
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let count = (len / size).max(1);
    (0..count).map(|i| order[i * len / count..(i + 1) * len / count].to_vec()).collect()
}

/// Shifts and scales `values` to mean 0 and standard deviation 1 in place
/// (statistics in f64). Constant input becomes zeros.
pub fn standardize(values: &mut [f32]) {
    standardize_masked(values, None);
}

/// [`standardize`] with the mean and standard deviation of the entries
/// whose `mask` is non-zero (the real rows of padded sequences), applied to
/// every entry.
pub fn standardize_masked(values: &mut [f32], mask: Option<&[f32]>) {
    let counts = |i: usize| mask.is_none_or(|m| m[i] != 0.0);
    let n = (0..values.len()).filter(|&i| counts(i)).count() as f64;
    if n == 0.0 {
        return;
    }
    let mean = (0..values.len()).filter(|&i| counts(i)).map(|i| values[i] as f64).sum::<f64>() / n;
    let var = (0..values.len()).filter(|&i| counts(i)).map(|i| (values[i] as f64 - mean).powi(2)).sum::<f64>() / n;
    let std = var.sqrt();
    for v in values.iter_mut() {
        *v = ((*v as f64 - mean) / (std + 1e-8)) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(start: i64, n: usize) -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_i64("actions", (start..start + n as i64).collect(), 1).unwrap();
        b.insert_f32("obs", (0..2 * n).map(|i| (start as f32) + i as f32 / 2.0).collect(), 2).unwrap();
        b
    }

    #[test]
    fn insert_checks_rows_and_width() {
        let mut b = batch(0, 3);
        assert!(matches!(b.insert_f32("x", vec![0.0; 4], 1), Err(BatchError::RowMismatch { .. })));
        assert!(matches!(b.insert_f32("x", vec![0.0; 5], 2), Err(BatchError::Ragged { .. })));
        // Replacing the only column may change the row count.
        let mut c = SampleBatch::new();
        c.insert_f32("x", vec![1.0; 4], 1).unwrap();
        c.insert_f32("x", vec![1.0; 2], 1).unwrap();
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn concat_slice_gather_roundtrip() {
        let a = batch(0, 3);
        let b = batch(10, 2);
        let c = SampleBatch::concat(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(c.len(), 5);
        assert_eq!(c.i64("actions").unwrap(), &[0, 1, 2, 10, 11]);
        assert_eq!(c.slice(0..3), a);
        assert_eq!(c.slice(3..5), b);
        let g = c.gather(&[4, 0]);
        assert_eq!(g.i64("actions").unwrap(), &[11, 0]);
        assert_eq!(g.f32("obs").unwrap(), &[11.0, 11.5, 0.0, 0.5]);
    }

    #[test]
    fn concat_rejects_different_fields() {
        let a = batch(0, 1);
        let mut b = batch(0, 1);
        b.insert_f32("extra", vec![0.0], 1).unwrap();
        assert!(matches!(SampleBatch::concat(&[a, b]), Err(BatchError::Incompatible(_))));
    }

    #[test]
    fn minibatches_cover_each_row_once_and_are_seeded() {
        let b = batch(0, 10);
        let collect = |seed| b.minibatches(4, seed).map(|m| m.i64("actions").unwrap().to_vec()).collect::<Vec<_>>();
        let mbs = collect(3);
        // 10 rows at size 4: two minibatches of 5, not 4 + 4 + 2.
        assert_eq!(mbs.iter().map(Vec::len).collect::<Vec<_>>(), vec![5, 5]);
        let mut all: Vec<i64> = mbs.concat();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(collect(3), mbs);
        assert_ne!(collect(4), mbs);
        assert_eq!(b.minibatches(100, 0).map(|m| m.len()).collect::<Vec<_>>(), vec![10]);
        assert_eq!(b.minibatches(3, 0).map(|m| m.len()).collect::<Vec<_>>(), vec![3, 3, 4]);
    }

    #[test]
    fn standardize_gives_zero_mean_unit_std() {
        let mut b = SampleBatch::new();
        b.insert_f32("adv", vec![1.0, 2.0, 3.0, 4.0], 1).unwrap();
        b.standardize("adv").unwrap();
        let v = b.f32("adv").unwrap();
        let mean: f32 = v.iter().sum::<f32>() / 4.0;
        let var: f32 = v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{v:?}");
        assert!(b.standardize("missing").is_err());
    }

    #[test]
    fn byte_columns_travel_as_bytes_and_read_as_f32() {
        let mut b = batch(0, 3);
        b.insert_u8("pixels", vec![0, 255, 51, 102, 7, 8], 2).unwrap();
        assert_eq!(b.size_bytes(), 3 * 8 + 6 * 4 + 6, "one byte per pixel");
        let c = SampleBatch::concat(&[b.clone(), b.slice(1..2)]).unwrap();
        assert_eq!(c.u8("pixels").unwrap(), &[0, 255, 51, 102, 7, 8, 51, 102]);
        assert_eq!(c.gather(&[3, 0]).u8("pixels").unwrap(), &[51, 102, 0, 255]);
        assert_eq!(
            c.values("pixels").unwrap().to_f32().as_ref(),
            &[0.0, 1.0, 0.2, 0.4, 7.0 / 255.0, 8.0 / 255.0, 0.2, 0.4]
        );
        assert_eq!(c.values("obs").unwrap(), Values::F32(c.f32("obs").unwrap()));
        let err = c.values("actions").unwrap_err().to_string();
        assert!(err.contains("actions") && err.contains("i64"), "{err}");
        let mut f = b.clone();
        f.insert_f32("pixels", vec![0.0; 6], 2).unwrap();
        assert!(matches!(SampleBatch::concat(&[b, f]), Err(BatchError::Incompatible(_))), "u8 and f32 do not mix");
    }

    #[test]
    fn typed_accessors_name_the_problem() {
        let b = batch(0, 1);
        let err = b.f32("actions").unwrap_err().to_string();
        assert!(err.contains("actions") && err.contains("i64"), "{err}");
        let err = b.f32("rewards").unwrap_err().to_string();
        assert!(err.contains("rewards") && err.contains("obs"), "{err}");
    }
}
