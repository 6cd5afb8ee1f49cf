//! Episodes as rows of Parquet files, and back.
//!
//! A row is one step. Its columns are `eps_id` and `t` (`int64`), then every
//! column `_dataset.json` names, under RLlib's new-stack names (`obs`,
//! `new_obs`, `actions`, `rewards`, `terminateds`, `truncateds`,
//! `action_logp`, ...): a column of width one as its plain type (`float`,
//! `int64`, `uint8`), a wider one as a fixed-size list of that many values.
//! Observations and actions of a `Box` space are lists whatever their
//! width: a `Box` of shape `[1]` is an array of one value per row, as
//! Gymnasium gives it and RLlib's readers take it (a discrete action, a
//! reward or a flag is a plain value). Files of plain width-one columns
//! read as before.
//! An episode's rows are consecutive, so pandas, polars or Ray Data read a
//! file as one table and group it by `eps_id`.

use super::{ColumnInfo, ColumnType, DatasetInfo, MAX_EPISODE_BYTES};
use crate::sample_batch::{fields, Column, SampleBatch};
use crate::space::Space;
use arrow_array::types::{Float32Type, Int64Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, Int64Array, PrimitiveArray, RecordBatch, UInt8Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::collections::VecDeque;
use std::sync::Arc;

/// The Parquet schema of a dataset's rows, whose observation and action
/// spaces are `spaces`.
pub(crate) fn schema(columns: &std::collections::BTreeMap<String, ColumnInfo>, spaces: (&Space, &Space)) -> SchemaRef {
    let mut fields = vec![Field::new("eps_id", DataType::Int64, false), Field::new("t", DataType::Int64, false)];
    fields.extend(columns.iter().map(|(name, info)| Field::new(name, data_type(*info, listed(name, spaces)), false)));
    Arc::new(Schema::new(fields))
}

/// Whether a column is a list even at width one: observations and actions
/// of a `Box` space (see the module docs).
fn listed(name: &str, (observations, actions): (&Space, &Space)) -> bool {
    match name {
        fields::OBS | fields::NEW_OBS => matches!(observations, Space::Box { .. }),
        fields::ACTIONS => matches!(actions, Space::Box { .. }),
        _ => false,
    }
}

/// A column's Arrow type: its element type, in a fixed-size list if wider
/// than one or `listed`.
fn data_type(info: ColumnInfo, listed: bool) -> DataType {
    let element = match info.dtype {
        ColumnType::F32 => DataType::Float32,
        ColumnType::I64 => DataType::Int64,
        ColumnType::U8 => DataType::UInt8,
    };
    match info.width {
        1 if !listed => element,
        w => DataType::FixedSizeList(Arc::new(Field::new("item", element, false)), w as i32),
    }
}

/// The rows of an episode `batch` whose first row is step `t0` of episode
/// `eps_id`, in `schema`'s column order.
///
/// # Errors
/// Columns that are not `schema`'s.
pub(crate) fn encode(schema: &SchemaRef, eps_id: u64, t0: u64, batch: &SampleBatch) -> Result<RecordBatch, String> {
    let n = batch.len();
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![eps_id as i64; n])),
        Arc::new(Int64Array::from_iter_values((t0..t0 + n as u64).map(|t| t as i64))),
    ];
    for field in &schema.fields()[2..] {
        let column = batch.get(field.name()).ok_or_else(|| format!("no column {}", field.name()))?;
        if let Column::F32 { data, .. } = column {
            if let Some(bad) = data.iter().find(|x| !x.is_finite()) {
                return Err(format!("column {} holds {bad}; experience files hold finite values only", field.name()));
            }
        }
        let width = column.width();
        let values: ArrayRef = match column {
            Column::F32 { data, .. } => Arc::new(Float32Array::from(data.clone())),
            Column::I64 { data, .. } => Arc::new(Int64Array::from(data.clone())),
            Column::U8 { data, .. } => Arc::new(UInt8Array::from(data.clone())),
        };
        let array: ArrayRef = match field.data_type() {
            DataType::FixedSizeList(item, w) => {
                Arc::new(FixedSizeListArray::try_new(item.clone(), *w, values, None).map_err(|e| e.to_string())?)
            }
            _ => values,
        };
        let field_width = match field.data_type() {
            DataType::FixedSizeList(_, w) => *w as usize,
            _ => 1,
        };
        if array.data_type() != field.data_type() || width != field_width {
            return Err(format!(
                "column {} is {}, the dataset's is {}",
                field.name(),
                array.data_type(),
                field.data_type()
            ));
        }
        arrays.push(array);
    }
    RecordBatch::try_new(schema.clone(), arrays).map_err(|e| e.to_string())
}

/// A type's element type and width, with a list's item name and
/// nullability left out, which other writers choose differently
/// (pyarrow's nullable `item`, Spark's `element`); a list of one value
/// and a plain value are alike.
fn plain(t: &DataType) -> (DataType, i32) {
    match t {
        DataType::FixedSizeList(item, w) => (item.data_type().clone(), *w),
        other => (other.clone(), 1),
    }
}

/// Checks that a file's columns are the dataset's, by name, element type
/// and width.
///
/// # Errors
/// A missing column, a column of another type or width, or one
/// `_dataset.json` does not name.
pub(crate) fn check_schema(theirs: &Schema, info: &DatasetInfo) -> Result<(), String> {
    let ours = schema(&info.columns, (&info.observation_space, &info.action_space));
    for field in ours.fields() {
        match theirs.field_with_name(field.name()) {
            Err(_) => return Err(format!("no {} column", field.name())),
            Ok(f) if plain(f.data_type()) != plain(field.data_type()) => {
                return Err(format!(
                    "column {} is {}, but _dataset.json says {}",
                    field.name(),
                    f.data_type(),
                    field.data_type()
                ))
            }
            Ok(_) => {}
        }
    }
    if let Some(extra) = theirs.fields().iter().find(|f| ours.field_with_name(f.name()).is_err()) {
        return Err(format!("column {} is not in _dataset.json", extra.name()));
    }
    Ok(())
}

/// One decoded run of rows: an episode's id, its first step, its rows.
pub(crate) type Piece = (u64, u64, SampleBatch);

/// Gathers a file's rows, batch by batch, into episodes: consecutive rows
/// of one id, cut where an episode passes [`MAX_EPISODE_BYTES`].
#[derive(Default)]
pub(crate) struct Gather {
    pending: Option<Piece>,
    ready: VecDeque<Piece>,
    /// The step after the last one read of every episode seen in the file.
    next_step: std::collections::HashMap<u64, u64>,
}

impl Gather {
    /// Adds one batch of rows, the first of which is the file's row `row0`
    /// (from 0).
    ///
    /// # Errors
    /// A null, a negative id or step, or a step that does not follow its
    /// episode's last, naming the row.
    pub(crate) fn push(&mut self, rows: &RecordBatch, row0: usize, info: &DatasetInfo) -> Result<(), String> {
        let ids = integers(rows, "eps_id", row0)?;
        let steps = integers(rows, "t", row0)?;
        let mut batch = SampleBatch::new();
        for (name, column) in &info.columns {
            let array = rows.column_by_name(name).ok_or_else(|| format!("no {name} column"))?;
            let column = read_column(array.as_ref(), *column, row0).map_err(|e| format!("column {name}: {e}"))?;
            batch.insert(name.clone(), column).map_err(|e| e.to_string())?;
        }
        let mut start = 0;
        while start < ids.len() {
            let end = (start..ids.len()).find(|&i| ids[i] != ids[start]).unwrap_or(ids.len());
            for i in start + 1..end {
                if steps[i] != steps[i - 1] + 1 {
                    return Err(format!("row {}: step {} follows step {}", row0 + i, steps[i], steps[i - 1]));
                }
            }
            // An episode's rows may come in pieces (a long episode beside
            // others), but each piece goes on from the last.
            let id = ids[start];
            if let Some(&expected) = self.next_step.get(&id) {
                if steps[start] != expected {
                    return Err(format!(
                        "row {}: episode {id} goes on at step {}, but its last row read was step {}: \
                         an episode's rows must be in step order (a file sorted by another column?)",
                        row0 + start,
                        steps[start],
                        expected - 1
                    ));
                }
            }
            self.next_step.insert(id, steps[end - 1] + 1);
            self.add((id, steps[start], batch.slice(start..end)));
            start = end;
        }
        Ok(())
    }

    fn add(&mut self, piece: Piece) {
        match &mut self.pending {
            Some((id, t0, rows)) if *id == piece.0 && *t0 + rows.len() as u64 == piece.1 => {
                rows.append(&piece.2).expect("rows of one dataset have the same columns");
            }
            _ => {
                if let Some(done) = self.pending.replace(piece) {
                    self.ready.push_back(done);
                }
            }
        }
        let too_big = self.pending.as_ref().is_some_and(|(_, _, rows)| rows.size_bytes() >= MAX_EPISODE_BYTES);
        if too_big {
            self.ready.extend(self.pending.take());
        }
    }

    /// The next whole episode (or piece of a long one), if one is done.
    pub(crate) fn pop(&mut self) -> Option<Piece> {
        self.ready.pop_front()
    }

    /// Ends the file: the episode being gathered is done.
    pub(crate) fn end(&mut self) {
        self.ready.extend(self.pending.take());
    }
}

/// A column of non-negative integers without nulls.
fn integers(rows: &RecordBatch, name: &str, row0: usize) -> Result<Vec<u64>, String> {
    let array = rows.column_by_name(name).ok_or_else(|| format!("no {name} column"))?;
    let array = array.as_any().downcast_ref::<Int64Array>().ok_or_else(|| format!("{name} is not int64"))?;
    (0..array.len())
        .map(|i| match array.is_valid(i) {
            true if array.value(i) >= 0 => Ok(array.value(i) as u64),
            true => Err(format!("row {}: {name} is {}", row0 + i, array.value(i))),
            false => Err(format!("row {}: {name} is null", row0 + i)),
        })
        .collect()
}

/// The values of an array of `info`'s type and width, whose first row is
/// the file's row `row0`, refusing nulls and non-finite floats.
fn read_column(array: &dyn Array, info: ColumnInfo, row0: usize) -> Result<Column, String> {
    if array.null_count() > 0 {
        return Err("holds nulls".into());
    }
    let values: &dyn Array = match (info.width, array.as_any().downcast_ref::<FixedSizeListArray>()) {
        (1, None) => array,
        (w, Some(list)) if list.value_length() as usize == w => list.values().as_ref(),
        _ => return Err(format!("is {}, not {:?} of width {}", array.data_type(), info.dtype, info.width)),
    };
    if values.null_count() > 0 {
        return Err("holds nulls".into());
    }
    fn plain<T: arrow_array::ArrowPrimitiveType>(values: &dyn Array) -> Result<Vec<T::Native>, String> {
        let array = values.as_any().downcast_ref::<PrimitiveArray<T>>().ok_or("of another element type")?;
        Ok(array.values().to_vec())
    }
    let width = info.width;
    if let Some(values) = values.as_any().downcast_ref::<Float32Array>() {
        if let Some(i) = values.values().iter().position(|x| !x.is_finite()) {
            let (row, x) = (row0 + i / width, values.value(i));
            return Err(format!("row {row} holds {x}; experience files hold finite values only"));
        }
    }
    Ok(match info.dtype {
        ColumnType::F32 => Column::F32 { data: plain::<Float32Type>(values)?, width },
        ColumnType::I64 => Column::I64 { data: plain::<Int64Type>(values)?, width },
        ColumnType::U8 => Column::U8 { data: plain::<UInt8Type>(values)?, width },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experience::DatasetInfo;

    fn rows(n: usize, first: f32) -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_f32("obs", (0..2 * n).map(|i| first + i as f32).collect(), 2).unwrap();
        b.insert_i64("actions", (0..n as i64).collect(), 1).unwrap();
        b
    }

    fn info() -> DatasetInfo {
        let columns = rows(1, 0.0).columns().map(|(k, c)| (k.to_string(), ColumnInfo::of(c))).collect();
        DatasetInfo::new(Space::uniform_box(-9.0, 9.0, vec![2]).unwrap(), Space::discrete(3), columns)
    }

    /// A `Box` of shape `[1]` is a list of one value per row, as RLlib's
    /// readers take it; a discrete action and a reward are plain values.
    /// Both read back, and so does a file that wrote the box plainly (as
    /// rlx did until 2026-12-05).
    #[test]
    fn box_columns_of_width_one_are_lists_and_plain_ones_still_read() {
        let mut b = SampleBatch::new();
        b.insert_f32("obs", vec![0.5, 1.5, 2.5], 1).unwrap();
        b.insert_f32("actions", vec![-1.0, 0.0, 1.0], 1).unwrap();
        b.insert_f32("rewards", vec![1.0, 2.0, 3.0], 1).unwrap();
        let columns: std::collections::BTreeMap<String, ColumnInfo> =
            b.columns().map(|(k, c)| (k.to_string(), ColumnInfo::of(c))).collect();
        let one = Space::uniform_box(-1.0, 1.0, vec![1]).unwrap();
        let info = DatasetInfo::new(one.clone(), one.clone(), columns.clone());
        let listed = schema(&columns, (&one, &one));
        let list_of_one =
            |name: &str| matches!(listed.field_with_name(name).unwrap().data_type(), DataType::FixedSizeList(_, 1));
        assert!(list_of_one("obs") && list_of_one("actions") && !list_of_one("rewards"), "{listed:?}");
        let discrete = schema(&columns, (&one, &Space::discrete(3)));
        assert_eq!(discrete.field_with_name("actions").unwrap().data_type(), &DataType::Float32);
        for written in [listed, discrete] {
            let batch = encode(&written, 4, 0, &b).unwrap();
            check_schema(batch.schema().as_ref(), &info).unwrap();
            for (name, column) in &columns {
                let array = batch.column_by_name(name).unwrap();
                assert_eq!(&read_column(array.as_ref(), *column, 0).unwrap(), b.get(name).unwrap(), "{name}");
            }
        }
    }

    /// An episode whose rows span two read batches comes back whole; one
    /// written in pieces with another episode between them comes back as
    /// its pieces, each going on from the last.
    #[test]
    fn episodes_are_gathered_across_batches_and_pieces_keep_their_steps() {
        let info = info();
        let schema = schema(&info.columns, (&info.observation_space, &info.action_space));
        let mut gather = Gather::default();
        let (a, b) = (rows(5, 0.0), rows(3, 100.0));
        // Episode 7's rows 0..3 end one batch, 3..5 start the next; then
        // episode 8, then episode 7 again from step 5.
        gather.push(&encode(&schema, 7, 0, &a.slice(0..3)).unwrap(), 0, &info).unwrap();
        assert!(gather.pop().is_none(), "episode 7 may go on in the next batch");
        gather.push(&encode(&schema, 7, 3, &a.slice(3..5)).unwrap(), 3, &info).unwrap();
        gather.push(&encode(&schema, 8, 0, &b).unwrap(), 5, &info).unwrap();
        gather.push(&encode(&schema, 7, 5, &a.slice(0..2)).unwrap(), 8, &info).unwrap();
        gather.end();
        let got: Vec<(u64, u64, usize)> =
            std::iter::from_fn(|| gather.pop()).map(|(id, t0, r)| (id, t0, r.len())).collect();
        assert_eq!(got, [(7, 0, 5), (8, 0, 3), (7, 5, 2)]);
        // Episode 8 again, from step 0: out of order, named by its row.
        let err = gather.push(&encode(&schema, 8, 0, &b).unwrap(), 10, &info).unwrap_err();
        assert!(err.contains("row 10: episode 8 goes on at step 0, but its last row read was step 2"), "{err}");
    }
}
