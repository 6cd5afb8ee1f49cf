//! One episode as one JSON line, and back.
//!
//! Each column is a list of rows: a number per row for a column of width
//! one, a list of numbers otherwise. `f32` values are written as their
//! exact `f64` (the shortest text that reads back to that `f64`), so that
//! reading them as `f64` and narrowing gives the same `f32` bit for bit;
//! parsing the shortest `f32` text as `f64` first could round twice.

use super::{ColumnInfo, ColumnType, DatasetInfo};
use crate::sample_batch::{Column, SampleBatch};
use serde_json::Value;
use std::fmt::Write as _;

/// The JSON line (without its newline) of an episode `batch` whose first row
/// is step `t0` of episode `eps_id`.
///
/// # Errors
/// A non-finite float, naming its column: JSON has no NaN or infinity.
pub(crate) fn encode(eps_id: u64, t0: u64, batch: &SampleBatch) -> Result<String, String> {
    let n = batch.len();
    let mut line = String::with_capacity(64 + n * 16);
    line.push_str("{\"type\":\"SampleBatch\",\"eps_id\":[");
    list(&mut line, (0..n).map(|_| eps_id), |s, v| write!(s, "{v}").expect("writing to a String"));
    line.push_str("],\"t\":[");
    list(&mut line, t0..t0 + n as u64, |s, v| write!(s, "{v}").expect("writing to a String"));
    line.push(']');
    let mut floats = ryu::Buffer::new();
    for (name, column) in batch.columns() {
        write!(line, ",{}:[", Value::String(name.to_string())).expect("writing to a String");
        let width = column.width();
        match column {
            Column::F32 { data, .. } => {
                if let Some(bad) = data.iter().find(|x| !x.is_finite()) {
                    return Err(format!("column {name} holds {bad}, which JSON cannot hold"));
                }
                rows(&mut line, data, width, |s, &x| s.push_str(floats.format(f64::from(x))));
            }
            Column::I64 { data, .. } => rows(&mut line, data, width, |s, x| write!(s, "{x}").expect("writing")),
            Column::U8 { data, .. } => rows(&mut line, data, width, |s, x| write!(s, "{x}").expect("writing")),
        }
        line.push(']');
    }
    line.push('}');
    Ok(line)
}

/// Writes `items` separated by commas.
fn list<T>(s: &mut String, items: impl Iterator<Item = T>, mut one: impl FnMut(&mut String, T)) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            s.push(',');
        }
        one(s, item);
    }
}

/// Writes the rows of a column: values for width one, lists of values otherwise.
fn rows<T>(s: &mut String, data: &[T], width: usize, mut one: impl FnMut(&mut String, &T)) {
    if width == 1 {
        return list(s, data.iter(), one);
    }
    list(s, data.chunks_exact(width), |s, row| {
        s.push('[');
        list(s, row.iter(), &mut one);
        s.push(']');
    });
}

/// The episode a line holds: its id, first step, and its columns as
/// `info` describes them.
///
/// # Errors
/// A line that is not a JSON object (a torn line), a missing or unknown
/// column, a value of the wrong type or a row of the wrong width, each
/// named.
pub(crate) fn decode(line: &str, info: &DatasetInfo) -> Result<(u64, u64, SampleBatch), String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e}): a torn line?"))?;
    let Value::Object(mut object) = value else {
        return Err("not a JSON object".into());
    };
    match object.remove("type") {
        Some(Value::String(t)) if t == "SampleBatch" => {}
        other => return Err(format!("\"type\" is {other:?}, not \"SampleBatch\"")),
    }
    let ids = integers(object.remove("eps_id").ok_or("no eps_id column")?, "eps_id")?;
    let steps = integers(object.remove("t").ok_or("no t column")?, "t")?;
    let n = ids.len();
    if n == 0 || steps.len() != n || ids.iter().any(|&id| id != ids[0]) {
        return Err("eps_id must name one episode in every row, and t have as many rows".into());
    }
    let mut batch = SampleBatch::new();
    for (name, column) in &info.columns {
        let value = object.remove(name).ok_or_else(|| format!("no {name} column"))?;
        let column = read_column(value, *column, n).map_err(|e| format!("column {name}: {e}"))?;
        batch.insert(name.clone(), column).map_err(|e| e.to_string())?;
    }
    if let Some(name) = object.keys().next() {
        return Err(format!("column {name} is not in _dataset.json"));
    }
    Ok((ids[0] as u64, steps[0] as u64, batch))
}

/// A list of non-negative integers.
fn integers(value: Value, name: &str) -> Result<Vec<i64>, String> {
    let Value::Array(items) = value else { return Err(format!("{name} is not a list")) };
    items.iter().map(|v| v.as_u64().map(|x| x as i64).ok_or_else(|| format!("{name} holds {v}"))).collect()
}

/// `n` rows of `info`'s type and width.
fn read_column(value: Value, info: ColumnInfo, n: usize) -> Result<Column, String> {
    let Value::Array(rows) = value else { return Err("not a list".into()) };
    if rows.len() != n {
        return Err(format!("{} rows, but eps_id has {n}", rows.len()));
    }
    let mut column = match info.dtype {
        ColumnType::F32 => Column::f32(info.width),
        ColumnType::I64 => Column::i64(info.width),
        ColumnType::U8 => Column::u8(info.width),
    };
    for (r, row) in rows.iter().enumerate() {
        let values: &[Value] = match row {
            Value::Array(values) if info.width > 1 => values,
            _ if info.width == 1 => std::slice::from_ref(row),
            _ => return Err(format!("row {r} is not a list of {}", info.width)),
        };
        if values.len() != info.width {
            return Err(format!("row {r} has {} values, not {}", values.len(), info.width));
        }
        for v in values {
            let bad = || format!("row {r} holds {v}, not {:?}", info.dtype);
            match &mut column {
                Column::F32 { data, .. } => data.push(v.as_f64().ok_or_else(bad)? as f32),
                Column::I64 { data, .. } => data.push(v.as_i64().ok_or_else(bad)?),
                Column::U8 { data, .. } => {
                    data.push(v.as_u64().and_then(|x| u8::try_from(x).ok()).ok_or_else(bad)?);
                }
            }
        }
    }
    Ok(column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::Space;
    use std::collections::BTreeMap;

    fn info(batch: &SampleBatch) -> DatasetInfo {
        let columns: BTreeMap<_, _> = batch.columns().map(|(k, c)| (k.to_string(), ColumnInfo::of(c))).collect();
        DatasetInfo::new(Space::discrete(2), Space::discrete(2), columns)
    }

    #[test]
    fn every_float_comes_back_bit_for_bit() {
        let floats: Vec<f32> =
            [0.1f32, -0.0, 1e-45, f32::MIN_POSITIVE, f32::MAX, -3.4028235e38, 16_777_217.0, 1.0 / 3.0]
                .into_iter()
                .chain((0..2000u32).map(|i| f32::from_bits(0x0123_4567u32.wrapping_mul(i.wrapping_mul(2_654_435_761)))))
                .filter(|x| x.is_finite())
                .collect();
        let n = floats.len() / 2;
        let mut batch = SampleBatch::new();
        batch.insert_f32("obs", floats[..2 * n].to_vec(), 2).unwrap();
        batch.insert_i64("actions", (0..n as i64).map(|i| i - 7).collect(), 1).unwrap();
        batch.insert_u8("pixels", (0..3 * n).map(|i| (i % 256) as u8).collect(), 3).unwrap();
        let line = encode(u64::MAX - 1, 5, &batch).unwrap();
        let (id, t0, back) = decode(&line, &info(&batch)).unwrap();
        assert_eq!((id, t0), (u64::MAX - 1, 5));
        let bits = |b: &SampleBatch| b.f32("obs").unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&batch));
        assert_eq!(back, batch);
    }

    #[test]
    fn bad_lines_are_named() {
        let mut batch = SampleBatch::new();
        batch.insert_f32("obs", vec![1.0, 2.0, 3.0, 4.0], 2).unwrap();
        let info = info(&batch);
        let line = encode(3, 0, &batch).unwrap();
        let torn = &line[..line.len() - 5];
        assert!(decode(torn, &info).unwrap_err().contains("torn line"));
        let wide = line.replace("[1.0,2.0]", "[1.0,2.0,9.0]");
        assert!(decode(&wide, &info).unwrap_err().contains("column obs: row 0 has 3 values, not 2"), "{wide}");
        let text = line.replace("[3.0,4.0]", "[3.0,\"x\"]");
        assert!(decode(&text, &info).unwrap_err().contains("row 1 holds \"x\""));
        let extra = line.replace("\"t\":", "\"vf\":[1,2],\"t\":");
        assert!(decode(&extra, &info).unwrap_err().contains("column vf is not in _dataset.json"));
        batch.insert_f32("rewards", vec![f32::NAN, 0.0], 1).unwrap();
        assert!(encode(3, 0, &batch).unwrap_err().contains("column rewards holds NaN"));
    }
}
