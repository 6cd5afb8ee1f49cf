//! The results directory of a run, written as it goes:
//!
//! - `params.json`: the run's configuration, written once, atomically.
//! - `result.json`: one JSON object per iteration ([`TrainResult`]), handed
//!   to the operating system as it is written, so a killed run keeps every
//!   finished iteration, and flushed to disk at an iteration's end once a
//!   line has waited [`DISK_SYNC_INTERVAL`] unsynced, before every
//!   checkpoint and at the end.
//! - `progress.csv`: the same results as a table, like Ray Tune's: a header
//!   row, then one row per iteration, one column per scalar field. Nested
//!   objects become `parent/child` columns (the learner's stats are
//!   `learner/<name>`); a missing value (`null`) is an empty cell. The first
//!   row written sets the header; a column that first appears later (Ape-X's
//!   `learner/*` after the learner's first update, self-play's snapshot)
//!   widens the header: the file is rewritten once with the new column,
//!   earlier rows empty in it (atomically, like `params.json`), and rows are
//!   appended to it from then on. Rows are written and flushed to disk
//!   like `result.json`'s.
//! - `learning_curve.png`: `episode_reward_mean` against `timesteps_total`
//!   (see [`crate::plot`]), redrawn after the first iteration, then at most
//!   once every [`DEFAULT_PLOT_INTERVAL`] (see
//!   [`ResultsWriter::with_plot_interval`]), and by [`ResultsWriter::finish`].
//!   The plot is a convenience: failing to draw it logs a warning once and
//!   never fails the run. With evaluation, the evaluations' mean return is
//!   a second curve.
//! - `events.out.tfevents.*`: the same numbers for TensorBoard (see
//!   [`crate::tensorboard`]).

use crate::plot::{render_learning_curves, Series};
use crate::tensorboard::EventWriter;
use rlx::TrainResult;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a line of `result.json` and `progress.csv` waits, once
/// written, before an iteration's end flushes the files to disk (`fsync`).
/// Every iteration is written to the files as it ends; syncing each one
/// too cost BC on HalfCheetah, at about 500 one-update iterations a
/// second, 12 % of its run. The files are also synced before every
/// checkpoint, at the end of the run, and when the writer is dropped.
pub const DISK_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// How often [`ResultsWriter`] redraws `learning_curve.png` unless told otherwise.
pub const DEFAULT_PLOT_INTERVAL: Duration = Duration::from_secs(5);
/// Size of `learning_curve.png`, pixels.
pub const LEARNING_CURVE_SIZE: (u32, u32) = (800, 500);

/// Writes a run's results as it goes. See the [module docs](self) for the files.
///
/// Dropping the writer redraws the learning curve if iterations were added
/// since it was last drawn; call [`finish`](Self::finish) to also learn of
/// errors flushing the results.
pub struct ResultsWriter {
    dir: PathBuf,
    results: File,
    progress: ProgressCsv,
    curve: LearningCurve,
    events: EventWriter,
    /// Since when the files have held lines not yet flushed to disk
    /// (`None`: everything written is on disk).
    unsynced_since: Option<Instant>,
}

impl ResultsWriter {
    /// Creates `dir` (and parents) and writes `params.json` atomically.
    ///
    /// If `dir` already holds a run's results, new iterations are appended:
    /// `progress.csv` keeps its header (widened if they bring new columns)
    /// and the learning curve starts from the returns already in
    /// `result.json`.
    ///
    /// # Errors
    /// If the directory or files cannot be written; the error names the path.
    pub fn create(dir: &Path, params: &impl Serialize) -> io::Result<Self> {
        fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
        let params_json = serde_json::to_vec_pretty(params).map_err(io::Error::other)?;
        write_atomic(&dir.join("params.json"), &params_json)?;
        let path = dir.join("result.json");
        drop_torn_tail(&path)?;
        let results = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| with_path(e, &path))?;
        sync_parent(&path)?;
        let progress = ProgressCsv::open(&dir.join("progress.csv"))?;
        let label = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut curve = LearningCurve {
            path: dir.join("learning_curve.png"),
            series: Series { label, points: Vec::new() },
            evaluation: Series { label: "evaluation (greedy)".into(), points: Vec::new() },
            policies: Default::default(),
            interval: DEFAULT_PLOT_INTERVAL,
            last_drawn: None,
            dirty: false,
            warned: false,
        };
        if results.metadata().is_ok_and(|m| m.len() > 0) {
            match read_results(&path) {
                Ok(earlier) => earlier.iter().for_each(|r| curve.push(r)),
                Err(e) => tracing::warn!("learning curve starts empty: {e}"),
            }
        }
        let events = EventWriter::create(dir)?;
        Ok(Self { dir: dir.to_path_buf(), results, progress, curve, events, unsynced_since: None })
    }

    /// Redraws `learning_curve.png` at most once per `interval` (the first
    /// iteration and [`finish`](Self::finish) always draw it);
    /// [`DEFAULT_PLOT_INTERVAL`] by default. `Duration::MAX` draws it only
    /// then.
    pub fn with_plot_interval(mut self, interval: Duration) -> Self {
        self.curve.interval = interval;
        self
    }

    /// Gives `progress.csv` the evaluation's columns from its first row on,
    /// for a run that evaluates every few iterations: they sit after the
    /// first row's columns, and the first evaluation need not widen the
    /// header (rewrite the file).
    pub fn with_evaluation_columns(mut self) -> Self {
        // The evaluation object's fields, in their order.
        let empty = serde_json::to_vec(&rlx::evaluation::EvaluationResult::default()).expect("serializes");
        let OrderedObject(fields) = serde_json::from_slice(&empty).expect("an object");
        self.progress.evaluation_columns = fields.into_iter().map(|(name, _)| format!("evaluation/{name}")).collect();
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one iteration's result as a line of `result.json` and a row
    /// of `progress.csv`, flushes both to disk if they have held unsynced
    /// lines for [`DISK_SYNC_INTERVAL`], and redraws the learning curve if
    /// it is due.
    ///
    /// # Errors
    /// If writing `result.json` or `progress.csv` fails. A failure to draw
    /// the learning curve is logged, not returned.
    pub fn append(&mut self, result: &TrainResult) -> io::Result<()> {
        let mut line = serde_json::to_vec(result).map_err(io::Error::other)?;
        line.push(b'\n');
        self.results.write_all(&line)?;
        self.progress.append(&line)?;
        if self.unsynced_since.get_or_insert_with(Instant::now).elapsed() >= DISK_SYNC_INTERVAL {
            self.sync()?;
        }
        self.events.scalars(result.timesteps_total, &serde_json::to_value(result).map_err(io::Error::other)?)?;
        self.curve.push(result);
        if self.curve.last_drawn.is_none_or(|t| t.elapsed() >= self.curve.interval) {
            self.curve.draw();
        }
        Ok(())
    }

    /// Flushes `result.json` and `progress.csv` to disk now, if they hold
    /// lines that are not there yet: before a checkpoint, so that no
    /// checkpoint is on disk without the lines of the iterations it holds.
    ///
    /// # Errors
    /// If flushing either file fails.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.unsynced_since.is_some() {
            self.results.sync_data()?;
            self.progress.sync_data()?;
            self.unsynced_since = None;
        }
        Ok(())
    }

    /// Flushes everything to disk and draws the learning curve's final state.
    ///
    /// # Errors
    /// If flushing `result.json` or `progress.csv` fails. A failure to draw
    /// the learning curve is logged, not returned.
    pub fn finish(&mut self) -> io::Result<()> {
        self.curve.draw();
        self.results.sync_all()?;
        self.progress.sync_all()?;
        self.unsynced_since = None;
        Ok(())
    }
}

impl Drop for ResultsWriter {
    /// Also flushes the files to disk, as far as it can (a run that ends
    /// on an error returns without [`finish`](ResultsWriter::finish)).
    fn drop(&mut self) {
        if self.curve.dirty {
            self.curve.draw();
        }
        if let Err(e) = self.sync() {
            tracing::warn!("flushing {}: {e}", self.dir.display());
        }
    }
}

/// `progress.csv`: the header and the open file.
struct ProgressCsv {
    path: PathBuf,
    csv: csv::Writer<File>,
    /// `None` until the first row sets it (or read from an existing file);
    /// widened by a row with columns not in it.
    header: Option<Vec<String>>,
    /// Columns every row has, empty where its result lacks them: the
    /// evaluation's, for a run that evaluates every few iterations (the
    /// first row, which sets the header, may have no evaluation).
    evaluation_columns: Vec<String>,
}

impl ProgressCsv {
    fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|e| with_path(e, path))?;
        let header = if file.metadata().map_err(|e| with_path(e, path))?.len() > 0 {
            let mut reader = csv::Reader::from_path(path).map_err(|e| with_path(e.into(), path))?;
            Some(reader.headers().map_err(|e| with_path(e.into(), path))?.iter().map(String::from).collect())
        } else {
            None
        };
        Ok(Self {
            path: path.to_path_buf(),
            csv: csv::Writer::from_writer(file),
            header,
            evaluation_columns: Vec::new(),
        })
    }

    /// Writes the row for one result, given as its JSON object; its columns
    /// not in the header yet widen it first (see [`widen`](Self::widen)).
    fn append(&mut self, json: &[u8]) -> io::Result<()> {
        let cells = self.cells(json)?;
        let names = cells.iter().map(|(name, _)| name);
        match &self.header {
            None => {
                let header: Vec<String> = names.cloned().collect();
                self.write(&header)?;
                self.header = Some(header);
            }
            Some(header) => {
                let mut wider = header.clone();
                for name in names {
                    if !wider.contains(name) {
                        wider.push(name.clone());
                    }
                }
                if wider.len() > header.len() {
                    self.widen(wider)?;
                }
            }
        }
        let header = self.header.as_deref().unwrap_or_default();
        let mut row = vec![String::new(); header.len()];
        for (name, cell) in cells {
            if let Some(i) = header.iter().position(|h| *h == name) {
                row[i] = cell;
            }
        }
        self.write(&row)?;
        self.csv.flush().map_err(|e| with_path(e, &self.path))
    }

    /// One result's `(column, cell)`s in its fields' order; a result
    /// without an evaluation gets the `evaluation_columns` empty.
    fn cells(&self, json: &[u8]) -> io::Result<Vec<(String, String)>> {
        let OrderedObject(fields) = serde_json::from_slice(json).map_err(io::Error::other)?;
        let mut cells = Vec::new();
        for (name, value) in fields {
            flatten(name, value, &mut cells);
        }
        if !cells.iter().any(|(name, _)| name.starts_with("evaluation/")) {
            cells.extend(self.evaluation_columns.iter().map(|name| (name.clone(), String::new())));
        }
        Ok(cells)
    }

    /// Rewrites the file under `header` (the old header with the new columns
    /// appended) and appends to the new file from then on. The rows so far are
    /// streamed from the file (not kept in memory) into a temporary file,
    /// padded with empty cells, which then replaces the file: a crash leaves
    /// the old file or the new one, whole. Late columns are few, so this
    /// runs a few times per run at most.
    fn widen(&mut self, header: Vec<String>) -> io::Result<()> {
        // The rows written so far must be in the file to be read back.
        self.csv.flush().map_err(|e| with_path(e, &self.path))?;
        // Flexible: a row a killed run left torn is kept, padded, not an error.
        let mut old = csv::ReaderBuilder::new()
            .flexible(true)
            .from_path(&self.path)
            .map_err(|e| with_path(e.into(), &self.path))?;
        replace_atomic(&self.path, |f| {
            let mut new = csv::WriterBuilder::new().flexible(true).from_writer(f);
            new.write_record(&header)?;
            for record in old.byte_records() {
                let mut record = record?;
                while record.len() < header.len() {
                    record.push_field(b"");
                }
                new.write_byte_record(&record)?;
            }
            new.flush()
        })?;
        // A new writer, too: the old one holds the replaced file, and
        // expects rows as wide as the old header.
        let file = OpenOptions::new().append(true).open(&self.path).map_err(|e| with_path(e, &self.path))?;
        self.csv = csv::Writer::from_writer(file);
        tracing::debug!(path = %self.path.display(), "progress.csv widened to {} columns", header.len());
        self.header = Some(header);
        Ok(())
    }

    fn write(&mut self, record: &[String]) -> io::Result<()> {
        self.csv.write_record(record).map_err(|e| with_path(e.into(), &self.path))
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.csv.flush().map_err(|e| with_path(e, &self.path))?;
        self.csv.get_ref().sync_data().map_err(|e| with_path(e, &self.path))
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.csv.flush().map_err(|e| with_path(e, &self.path))?;
        self.csv.get_ref().sync_all().map_err(|e| with_path(e, &self.path))
    }
}

/// Appends the CSV cells of `value` under `name`: a scalar is one cell, an
/// object one per leaf (`name/child`), anything else its JSON text.
fn flatten(name: String, value: Value, cells: &mut Vec<(String, String)>) {
    let cell = match value {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s,
        Value::Array(_) => value.to_string(),
        Value::Object(map) => {
            for (child, v) in map {
                flatten(format!("{name}/{child}"), v, cells);
            }
            return;
        }
    };
    cells.push((name, cell));
}

/// A JSON object's fields in the order they were written (serde_json's
/// `Value` would sort them), so the CSV's columns follow [`TrainResult`]'s
/// field order like `result.json` does.
struct OrderedObject(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry()? {
                    fields.push(field);
                }
                Ok(OrderedObject(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// `learning_curve.png` and the points behind it.
struct LearningCurve {
    path: PathBuf,
    series: Series,
    /// The evaluations' mean returns, drawn once there is one.
    evaluation: Series,
    /// A multi-agent run's mean return per policy.
    policies: std::collections::BTreeMap<String, Series>,
    interval: Duration,
    last_drawn: Option<Instant>,
    /// Points were added since it was last drawn.
    dirty: bool,
    warned: bool,
}

impl LearningCurve {
    fn push(&mut self, result: &TrainResult) {
        if let Some(mean) = result.episode_reward_mean {
            self.series.points.push((result.timesteps_total as f64, mean));
        }
        if let Some(e) = &result.evaluation {
            self.evaluation.points.push((result.timesteps_total as f64, e.episode_reward_mean));
        }
        for (id, mean) in &result.policy_reward_mean {
            let series = self
                .policies
                .entry(id.clone())
                .or_insert_with(|| Series { label: format!("policy {id}"), points: Vec::new() });
            if let Some(mean) = mean {
                series.points.push((result.timesteps_total as f64, *mean));
            }
        }
        self.dirty = true;
    }

    /// Draws the PNG; a failure (even a panic in the drawing library) is
    /// logged once and otherwise ignored: the plot must never cost a run.
    fn draw(&mut self) {
        self.last_drawn = Some(Instant::now());
        self.dirty = false;
        // The run's return, each policy's, and the evaluations', where there are points.
        let others = self.policies.values().chain([&self.evaluation]).filter(|s| !s.points.is_empty());
        let series: Vec<Series> = [&self.series].into_iter().chain(others).cloned().collect();
        let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            render_learning_curves(&series, &self.path, LEARNING_CURVE_SIZE)
        }));
        let error = match drawn {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("{}: the plotting library panicked", self.path.display()),
        };
        if !self.warned {
            self.warned = true;
            tracing::warn!(
                "cannot draw the learning curve (training goes on; further failures are not logged): {error}"
            );
        }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so
/// readers see the old file or the new one, never half of one.
///
/// # Errors
/// If writing or renaming fails; the error names the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_atomic(path, |f| f.write_all(bytes))
}

/// [`write_atomic`] with the contents written by `write`, a piece at a
/// time, so that they need not be in memory at once. An error of `write`
/// is named after the temporary file.
fn replace_atomic(path: &Path, write: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(|e| create_error(e, path, &tmp))?;
    write(&mut f).and_then(|()| f.sync_all()).map_err(|e| with_path(e, &tmp))?;
    fs::rename(&tmp, path).map_err(|e| with_path(e, path))?;
    sync_parent(path)
}

/// Why the temporary file for `path` could not be created. A missing
/// directory is named with `path`, the name the caller gave, rather than
/// with the temporary name they never did.
fn create_error(e: io::Error, path: &Path, tmp: &Path) -> io::Error {
    match path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) if e.kind() == io::ErrorKind::NotFound && !dir.exists() => {
            io::Error::new(e.kind(), format!("{}: the directory {} does not exist", path.display(), dir.display()))
        }
        _ => with_path(e, tmp),
    }
}

/// Cuts a last line that a killed run left without its newline off an
/// existing `result.json`, so that the lines appended next stay whole.
fn drop_torn_tail(path: &Path) -> io::Result<()> {
    let Ok(bytes) = fs::read(path) else { return Ok(()) };
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    tracing::warn!("{}: a torn last line ({} bytes) is cut off before appending", path.display(), bytes.len() - keep);
    let f = OpenOptions::new().write(true).open(path).map_err(|e| with_path(e, path))?;
    f.set_len(keep as u64).and_then(|()| f.sync_all()).map_err(|e| with_path(e, path))
}

/// Makes a new or renamed directory entry under `path`'s parent durable
/// (a crash after a rename can otherwise bring back the old file).
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_path(e, dir)),
        None => Ok(()),
    }
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Reads every line of a `result.json`.
///
/// # Errors
/// If the file cannot be read or a line is not a result; the error names
/// the path and the line (counted from 1).
pub fn read_results(path: &Path) -> io::Result<Vec<TrainResult>> {
    let text = fs::read_to_string(path).map_err(|e| with_path(e, path))?;
    parse_lines(&text).map_err(|(line, e)| bad_line(path, line, &e))
}

/// Reads a `result.json` whose last line may be torn (the run was killed
/// while writing it) or garbage: such a last line is left out, and the
/// returned warning says so.
///
/// # Errors
/// If the file cannot be read or a line before the last is not a result.
pub fn read_history(path: &Path) -> io::Result<(Vec<TrainResult>, Option<String>)> {
    let text = fs::read_to_string(path).map_err(|e| with_path(e, path))?;
    match parse_lines(&text) {
        Ok(results) => Ok((results, None)),
        Err((line, e)) if line == last_line(&text) => {
            let before_last = &text[..text.trim_end().rfind('\n').map_or(0, |i| i + 1)];
            let results = parse_lines(before_last).map_err(|(line, e)| bad_line(path, line, &e))?;
            let warning = format!("{}: line {line} is torn or not a result ({e}); left out", path.display());
            Ok((results, Some(warning)))
        }
        Err((line, e)) => Err(bad_line(path, line, &e)),
    }
}

/// The number (from 1) of the last non-empty line of `text`.
fn last_line(text: &str) -> usize {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, _)| i + 1).last().unwrap_or(0)
}

type LineError = (usize, serde_json::Error);

/// Parses each non-empty line; a failure comes with its line number.
fn parse_lines(text: &str) -> Result<Vec<TrainResult>, LineError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| (i + 1, e)))
        .collect()
}

fn bad_line(path: &Path, line: usize, e: &serde_json::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: line {line}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::tests::{decode_png, temp_dir};
    use rlx::LearnerStats;

    fn result(i: u64, reward: Option<f64>, learner: &[(&str, f64)]) -> TrainResult {
        let mut stats = LearnerStats::default();
        learner.iter().for_each(|(k, v)| stats.set(k, *v));
        TrainResult {
            training_iteration: i,
            timesteps_total: 500 * i,
            episode_reward_mean: reward,
            time_this_iter_s: 0.25,
            learner: stats,
            ..Default::default()
        }
    }

    fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
        let mut reader = csv::Reader::from_path(path).unwrap();
        let header = reader.headers().unwrap().iter().map(String::from).collect();
        let rows = reader.records().map(|r| r.unwrap().iter().map(String::from).collect()).collect();
        (header, rows)
    }

    /// A fresh temporary directory named after `test`, the path of its
    /// `progress.csv` and that file opened: what the CSV tests start from.
    fn fresh_csv(test: &str) -> (PathBuf, PathBuf, ProgressCsv) {
        let dir = temp_dir(test);
        let path = dir.join("progress.csv");
        let csv = ProgressCsv::open(&path).unwrap();
        (dir, path, csv)
    }

    #[test]
    fn writes_params_results_progress_and_curve() {
        let dir = temp_dir("results-writer").join("ppo_CartPole-v1");
        let mut w = ResultsWriter::create(&dir, &serde_json::json!({"lr": 3e-4})).unwrap();
        let results = [
            result(1, None, &[("policy_loss", 0.5), ("entropy", 0.69)]),
            result(2, Some(21.5), &[("policy_loss", -0.25), ("entropy", 0.6)]),
            // A stat that was not in the first row widens the CSV's header.
            result(3, Some(40.0), &[("policy_loss", 0.125), ("entropy", 0.5), ("kl", 0.01)]),
        ];
        for r in &results {
            w.append(r).unwrap();
        }
        // The first append drew the curve, with no point yet.
        assert_eq!(decode_png(&dir.join("learning_curve.png")).0, LEARNING_CURVE_SIZE);

        let params: Value = serde_json::from_slice(&fs::read(dir.join("params.json")).unwrap()).unwrap();
        assert_eq!(params["lr"], 3e-4);
        assert_eq!(read_results(&dir.join("result.json")).unwrap(), results);

        let (header, rows) = read_csv(&dir.join("progress.csv"));
        assert_eq!(&header[..3], ["training_iteration", "timesteps_total", "timesteps_this_iter"]);
        assert_eq!(
            &header[header.len() - 4..],
            ["learner/entropy", "learner/policy_loss", "evaluator_failures", "learner/kl"]
        );
        assert_eq!(header.len(), 18, "{header:?}");
        assert_eq!(rows.len(), 3);
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let column = |name: &str| rows.iter().map(|r| r[col(name)].as_str()).collect::<Vec<_>>();
        assert_eq!(column("training_iteration"), ["1", "2", "3"]);
        assert_eq!(column("timesteps_total"), ["500", "1000", "1500"]);
        assert_eq!(column("episode_reward_mean"), ["", "21.5", "40.0"]);
        assert_eq!(column("time_this_iter_s"), ["0.25", "0.25", "0.25"]);
        assert_eq!(column("learner/policy_loss"), ["0.5", "-0.25", "0.125"]);
        assert_eq!(column("learner/kl"), ["", "", "0.01"]);
        assert!(rows.iter().all(|r| r.len() == header.len()));

        w.finish().unwrap();
        let (size, _, _) = decode_png(&dir.join("learning_curve.png"));
        assert_eq!(size, LEARNING_CURVE_SIZE);
        assert_eq!(w.curve.series.points, vec![(1000.0, 21.5), (1500.0, 40.0)]);
        drop(w);

        // Reopening appends under the existing header and keeps the curve's points.
        let mut w = ResultsWriter::create(&dir, &serde_json::json!({"lr": 3e-4})).unwrap();
        assert_eq!(w.curve.series.points.len(), 2);
        w.append(&result(4, Some(60.0), &[("entropy", 0.4)])).unwrap();
        let (header2, rows) = read_csv(&dir.join("progress.csv"));
        assert_eq!(header2, header);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[3][col("learner/policy_loss")], "");
        assert_eq!(rows[3][col("learner/entropy")], "0.4");
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    #[test]
    fn redraws_the_curve_at_most_once_per_interval() {
        let dir = temp_dir("results-interval");
        let png = dir.join("learning_curve.png");
        let mut w = ResultsWriter::create(&dir, &()).unwrap().with_plot_interval(Duration::from_secs(3600));
        w.append(&result(1, Some(1.0), &[])).unwrap();
        let first = fs::read(&png).unwrap();
        w.append(&result(2, Some(50.0), &[])).unwrap();
        assert_eq!(fs::read(&png).unwrap(), first, "not redrawn within the interval");
        w.finish().unwrap();
        assert_ne!(fs::read(&png).unwrap(), first, "finish draws the final state");
        let w = ResultsWriter::create(&dir, &()).unwrap().with_plot_interval(Duration::ZERO);
        drop(w);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failing_plot_does_not_fail_append() {
        let dir = temp_dir("results-plot-fails");
        // A directory where the PNG should go makes every render fail.
        fs::create_dir_all(dir.join("learning_curve.png")).unwrap();
        let mut w = ResultsWriter::create(&dir, &()).unwrap().with_plot_interval(Duration::ZERO);
        for i in 1..=3 {
            w.append(&result(i, Some(i as f64), &[])).unwrap();
        }
        w.finish().unwrap();
        assert!(w.curve.warned);
        assert_eq!(read_results(&dir.join("result.json")).unwrap().len(), 3);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn flattens_nested_objects_and_quotes_cells() {
        let (dir, path, mut csv) = fresh_csv("results-csv-quoting");
        csv.append(br#"{"name":"a, \"b\"","n":null,"nested":{"x":{"y":1}},"list":[1,2],"ok":true}"#).unwrap();
        let (header, rows) = read_csv(&path);
        assert_eq!(header, ["name", "n", "nested/x/y", "list", "ok"]);
        assert_eq!(rows, [["a, \"b\"", "", "1", "[1,2]", "true"]]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_late_column_widens_the_header_and_keeps_the_rows() {
        let (dir, path, mut csv) = fresh_csv("results-csv-widen");
        csv.append(br#"{"a":1}"#).unwrap();
        csv.append(br#"{"a":2,"learner":{"x":0.5}}"#).unwrap();
        let (header, rows) = read_csv(&path);
        assert_eq!(header, ["a", "learner/x"]);
        assert_eq!(rows, [["1", ""], ["2", "0.5"]]);
        assert!(!dir.join("progress.tmp").exists(), "the temporary file was renamed away");

        // Rows are appended to the rewritten file, a row without the column empty in it.
        csv.append(br#"{"a":3}"#).unwrap();
        csv.append(br#"{"learner":{"x":0.25},"a":4}"#).unwrap();
        assert_eq!(read_csv(&path).1, [["1", ""], ["2", "0.5"], ["3", ""], ["4", "0.25"]]);
        drop(csv);

        // Reopened, as for a run that appends to an existing directory: it widens too.
        let mut csv = ProgressCsv::open(&path).unwrap();
        csv.append(br#"{"a":5,"b":true}"#).unwrap();
        let (header, rows) = read_csv(&path);
        assert_eq!(header, ["a", "learner/x", "b"]);
        assert_eq!(rows, [["1", "", ""], ["2", "0.5", ""], ["3", "", ""], ["4", "0.25", ""], ["5", "", "true"]]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_carried_over_history_keeps_late_and_evaluation_columns() {
        // As train.rs writes a restored run: evaluation columns, then the history.
        let dir = temp_dir("results-csv-history");
        let mut w = ResultsWriter::create(&dir, &()).unwrap().with_evaluation_columns();
        let evaluated = TrainResult {
            evaluation: Some(rlx::evaluation::EvaluationResult { episode_reward_mean: 7.5, ..Default::default() }),
            ..result(3, Some(3.0), &[("x", 0.5), ("snapshot", 1.0)])
        };
        for r in [result(1, None, &[]), result(2, Some(2.0), &[("x", 1.0)]), evaluated, result(4, None, &[])] {
            w.append(&r).unwrap();
        }
        let (header, rows) = read_csv(&dir.join("progress.csv"));
        assert_eq!(header.iter().filter(|h| h.starts_with("evaluation/")).count(), 5, "{header:?}");
        assert_eq!(&header[header.len() - 2..], ["learner/x", "learner/snapshot"]);
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let column = |name: &str| rows.iter().map(|r| r[col(name)].as_str()).collect::<Vec<_>>();
        assert_eq!(column("training_iteration"), ["1", "2", "3", "4"]);
        assert_eq!(column("learner/x"), ["", "1.0", "0.5", ""]);
        assert_eq!(column("learner/snapshot"), ["", "", "1.0", ""]);
        assert_eq!(column("evaluation/episode_reward_mean"), ["", "", "7.5", ""]);
        assert!(rows.iter().all(|r| r.len() == header.len()));
        fs::remove_dir_all(dir).unwrap();
    }
}
