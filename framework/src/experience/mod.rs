//! Experience as files: the episodes a run samples, written as it samples
//! them (`output`), and read back to learn from (`input`).
//!
//! A dataset is a directory of episode files in one of two formats:
//!
//! - JSON lines in the shape of RLlib's old-stack `output`: one line a
//!   whole episode, `{"type": "SampleBatch", "eps_id": [...], "t": [...],
//!   "obs": [[...], ...], "actions": [...], ...}`, each column a list of
//!   rows; the file compressed whole with LZ4 (frame format) or gzip, or
//!   plain;
//! - Parquet, one row a step, under RLlib's new-stack column names (see
//!   `parquet.rs`), its pages compressed with LZ4 or gzip, or plain.
//!
//! Beside them, `_dataset.json` ([`DatasetInfo`]) names the spaces and each
//! column's type and width, so that a reader checks every row and tells a
//! file of other spaces apart.
//!
//! - [`ExperienceWriter`] writes one evaluator's episodes, a file at a
//!   time.
//!   A file is written under a `.partial` name and renamed when it is
//!   complete (rotated by size, or at the end of the run), so a killed run
//!   leaves whole files plus at most one partial file per evaluator.
//! - [`ExperienceReader`] streams episodes from a directory, a glob or a
//!   list of files, skipping partial files with a warning and naming the
//!   file and line (or row) of anything malformed.
//!
//! Floats are written through their exact `f64` value and read back to the
//! same `f32`, bit for bit.

mod input;
mod json;
mod minari;
mod parquet;
mod reader;
mod writer;

pub use input::{InputMix, InputSource, MAX_WINDOW_BYTES};
pub use minari::interpreter as python_interpreter;
pub use reader::{Episode, Episodes, ExperienceReader, InputSpec, SAMPLER};
pub use writer::{Compression, ExperienceWriter, OutputFormat, OutputSettings};

use crate::sample_batch::Column;
use crate::space::Space;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file beside a dataset's episode files that describes them.
pub const DATASET_FILE: &str = "_dataset.json";

/// The suffix of a file its writer has not finished. Such a file's name
/// also begins with `_`, as the description's does, so that tools that read
/// a directory of Parquet files (pyarrow, pandas, Spark) pass over both.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// The name a file has while its writer writes it: `_<name>.partial`.
fn partial_name(name: &str) -> String {
    format!("_{name}{PARTIAL_SUFFIX}")
}

/// The name a file was given while written, for a partial one: `x.parquet`
/// for `_x.parquet.partial`.
fn finished_name(name: &str) -> &str {
    match name.strip_suffix(PARTIAL_SUFFIX) {
        Some(name) => name.strip_prefix('_').unwrap_or(name),
        None => name,
    }
}

/// The most bytes of values one episode's piece holds (32 MiB): a longer
/// episode is written, and read back, in pieces under one id, so that
/// neither a writer nor a reader holds more of one episode at a time.
pub const MAX_EPISODE_BYTES: usize = 32 << 20;

/// What `_dataset.json` says of a dataset: its spaces, and each column's
/// type and row width.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInfo {
    /// `"rlx-experience"`.
    pub format: String,
    /// The layout's version: 1.
    pub version: u32,
    /// The observations' space.
    #[serde(with = "space_json")]
    pub observation_space: Space,
    /// The actions' space.
    #[serde(with = "space_json")]
    pub action_space: Space,
    /// Every column of an episode but `eps_id` and `t`.
    pub columns: BTreeMap<String, ColumnInfo>,
    /// The observations were normalized by the writing run's observation
    /// filter, whose statistics the dataset does not hold.
    #[serde(default)]
    pub filtered_observations: bool,
}

/// A space in JSON with its bounds exact: infinite bounds (a Gymnasium
/// `Box` may have them) are the strings `"inf"` and `"-inf"`, which JSON
/// numbers cannot be.
mod space_json {
    use crate::space::Space;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::{json, Value};

    pub fn serialize<S: Serializer>(space: &Space, s: S) -> Result<S::Ok, S::Error> {
        encode(space).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Space, D::Error> {
        decode(Value::deserialize(d)?).map_err(D::Error::custom)
    }

    fn encode(space: &Space) -> Value {
        let bounds = |xs: &[f32]| -> Value {
            xs.iter()
                .map(|&x| match x {
                    x if x.is_finite() => json!(f64::from(x)),
                    x if x > 0.0 => json!("inf"),
                    x if x < 0.0 => json!("-inf"),
                    _ => json!("nan"),
                })
                .collect()
        };
        let mut value = serde_json::to_value(space).expect("a space serializes");
        match space {
            Space::Box { low, high, .. } => {
                value["Box"]["low"] = bounds(low);
                value["Box"]["high"] = bounds(high);
            }
            Space::Dict { entries } => {
                value["Dict"]["entries"] = entries.iter().map(|(name, e)| json!([name, encode(e)])).collect();
            }
            Space::Discrete { .. } | Space::MultiDiscrete { .. } => {}
        }
        value
    }

    fn decode(value: Value) -> Result<Space, String> {
        let bounds = |v: &Value, key: &str| -> Result<Vec<f32>, String> {
            let items = v[key].as_array().ok_or_else(|| format!("a Box without {key}"))?;
            items
                .iter()
                .map(|x| match (x.as_f64(), x.as_str()) {
                    (Some(x), _) => Ok(x as f32),
                    (_, Some("inf")) => Ok(f32::INFINITY),
                    (_, Some("-inf")) => Ok(f32::NEG_INFINITY),
                    _ => Err(format!("a Box bound of {x}")),
                })
                .collect()
        };
        if let Some(b) = value.get("Box") {
            let (low, high) = (bounds(b, "low")?, bounds(b, "high")?);
            let mut b = b.clone();
            b["low"] = json!(vec![0.0; low.len()]);
            b["high"] = json!(vec![0.0; high.len()]);
            let mut space: Space = serde_json::from_value(json!({ "Box": b })).map_err(|e| e.to_string())?;
            if let Space::Box { low: l, high: h, .. } = &mut space {
                (*l, *h) = (low, high);
            }
            return Ok(space);
        }
        if let Some(d) = value.get("Dict") {
            let entries = d["entries"].as_array().ok_or("a Dict without entries")?;
            let entries = entries
                .iter()
                .map(|e| Ok((e[0].as_str().ok_or("a Dict entry without a name")?.to_string(), decode(e[1].clone())?)))
                .collect::<Result<Vec<_>, String>>()?;
            return Space::dict(entries).map_err(|e| e.to_string());
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

/// One column's element type and values per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnInfo {
    /// `f32`, `i64` or `u8`.
    pub dtype: ColumnType,
    /// Values per row.
    pub width: usize,
}

/// A column's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// 32-bit floats.
    F32,
    /// 64-bit integers (discrete actions).
    I64,
    /// Bytes (`uint8` image observations).
    U8,
}

impl ColumnType {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            ColumnType::F32 => 4,
            ColumnType::I64 => 8,
            ColumnType::U8 => 1,
        }
    }
}

impl ColumnInfo {
    /// The type and width of `column`.
    pub fn of(column: &Column) -> Self {
        let dtype = match column {
            Column::F32 { .. } => ColumnType::F32,
            Column::I64 { .. } => ColumnType::I64,
            Column::U8 { .. } => ColumnType::U8,
        };
        Self { dtype, width: column.width() }
    }
}

impl DatasetInfo {
    /// The description of episodes over these spaces with these columns.
    pub fn new(observation_space: Space, action_space: Space, columns: BTreeMap<String, ColumnInfo>) -> Self {
        Self {
            format: "rlx-experience".into(),
            version: 1,
            observation_space,
            action_space,
            columns,
            filtered_observations: false,
        }
    }

    /// Reads `dir/_dataset.json`.
    ///
    /// # Errors
    /// A missing or unreadable file, or one that is not a dataset description.
    pub fn load(dir: &Path) -> Result<Self, ExperienceError> {
        let path = dir.join(DATASET_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ExperienceError::io(&path, e))?;
        let info: DatasetInfo = serde_json::from_str(&text).map_err(|e| ExperienceError::Malformed {
            file: path.clone(),
            line: None,
            message: e.to_string(),
        })?;
        if info.format != "rlx-experience" || info.version != 1 {
            return Err(ExperienceError::Malformed {
                file: path,
                line: None,
                message: format!(
                    "format {} version {}: this build reads rlx-experience version 1",
                    info.format, info.version
                ),
            });
        }
        Ok(info)
    }

    /// Checks that the dataset's spaces are `obs` and `act`.
    ///
    /// # Errors
    /// [`ExperienceError::Spaces`] naming the space that differs.
    /// A bound of `±f32::MAX` (Gymnasium's stand-in for an unbounded
    /// value) and an infinite one (what some tools write for it, Minari
    /// among them) are taken as the same.
    pub fn check_spaces(&self, dir: &Path, obs: &Space, act: &Space) -> Result<(), ExperienceError> {
        for (which, theirs, ours) in
            [("observation", &self.observation_space, obs), ("action", &self.action_space, act)]
        {
            if unbounded_as_infinite(theirs) != unbounded_as_infinite(ours) {
                return Err(ExperienceError::Spaces {
                    dir: dir.to_path_buf(),
                    which,
                    dataset: theirs.to_string(),
                    expected: ours.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// `space` with every bound of `±f32::MAX` made infinite.
fn unbounded_as_infinite(space: &Space) -> Space {
    let widen = |xs: &[f32]| xs.iter().map(|&x| if x.abs() == f32::MAX { x * f32::INFINITY } else { x }).collect();
    match space {
        Space::Box { low, high, shape, dtype } => {
            Space::Box { low: widen(low), high: widen(high), shape: shape.clone(), dtype: *dtype }
        }
        Space::Dict { entries } => {
            Space::Dict { entries: entries.iter().map(|(n, e)| (n.clone(), unbounded_as_infinite(e))).collect() }
        }
        other => other.clone(),
    }
}

/// What can go wrong writing or reading experience files.
#[derive(Debug, thiserror::Error)]
pub enum ExperienceError {
    /// A file could not be created, written, read or listed.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A file's content is not what its dataset says: a torn line, a
    /// column of the wrong type or width, a non-finite float.
    #[error("{}{}: {message}", file.display(), line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Malformed {
        /// The file.
        file: PathBuf,
        /// The line (from 1), where one applies.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The dataset's spaces are not the run's.
    #[error("{}: the dataset's {which} space is {dataset}, but the run's is {expected}", dir.display())]
    Spaces {
        /// The dataset's directory.
        dir: PathBuf,
        /// `"observation"` or `"action"`.
        which: &'static str,
        /// The dataset's space.
        dataset: String,
        /// The run's space.
        expected: String,
    },
    /// An `input` that names no episode files.
    #[error(
        "input {0}: no experience files there (a directory, a glob or a list of .jsonl[.lz4|.gz] or .parquet files)"
    )]
    NoFiles(String),
}

impl ExperienceError {
    fn io(file: &Path, source: std::io::Error) -> Self {
        ExperienceError::Io { file: file.to_path_buf(), source }
    }
}
