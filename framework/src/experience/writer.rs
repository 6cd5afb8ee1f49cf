//! Writing one evaluator's episodes.

use super::{json, ColumnInfo, DatasetInfo, ExperienceError, DATASET_FILE, PARTIAL_SUFFIX};
use crate::sample_batch::SampleBatch;
use crate::space::Space;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How a file of episodes is compressed: whole, as one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// LZ4's frame format (`.jsonl.lz4`, read by `lz4 -d`): fast.
    #[default]
    Lz4,
    /// gzip (`.jsonl.gz`): smaller, slower, read everywhere.
    Gzip,
    /// Plain text (`.jsonl`).
    None,
}

impl Compression {
    /// The file name's ending.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Lz4 => ".jsonl.lz4",
            Compression::Gzip => ".jsonl.gz",
            Compression::None => ".jsonl",
        }
    }
}

/// Where and how a run writes what it samples.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSettings {
    /// The dataset's directory (made if missing).
    pub dir: PathBuf,
    /// The files' compression.
    pub compression: Compression,
    /// A file is finished, and the next begun, once it holds this many
    /// bytes on disk (RLlib's `output_max_file_size`, 64 MiB by default).
    pub max_file_size: u64,
}

/// Writes the episodes one evaluator samples to files in a dataset
/// directory, each whole episode as one line once it ends (an episode of
/// more than [`MAX_LINE_BYTES`] of values is written in pieces of that
/// size, under one id, each piece's `t` going on from the last).
///
/// Files are named `output-<ms>-<pid>-<nonce>-<tag>-<n><ext>` and written
/// as `<name>.partial` until they are finished: at `max_file_size`, at
/// [`finish`](Self::finish), or when the writer is dropped. Episodes still
/// running at the end are written first, cut: their last row is neither
/// terminated nor truncated. A file whose write failed keeps its partial
/// name.
pub struct ExperienceWriter {
    settings: OutputSettings,
    spaces: (Space, Space),
    filtered_observations: bool,
    /// `output-<ms>-<pid>-<nonce>-<tag>`: unique to this writer.
    stem: String,
    /// Bytes of values after which a running episode is written
    /// ([`MAX_LINE_BYTES`]).
    line_cap: usize,
    files_begun: u64,
    file: Option<OpenFile>,
    /// The columns `dataset.json` names, once written (or checked).
    columns: Option<BTreeMap<String, ColumnInfo>>,
    /// Per env copy: the running episode's id, and its rows so far.
    running: Vec<Running>,
    next_id: u64,
}

#[derive(Default)]
struct Running {
    id: u64,
    rows: Vec<SampleBatch>,
    /// Bytes of values in `rows`.
    bytes: usize,
    /// Steps of this episode already written.
    t0: u64,
}

/// The most bytes of values one line holds (32 MiB): a longer episode is
/// written in pieces, so that neither the writer nor a reader holds more
/// of one episode at a time.
pub const MAX_LINE_BYTES: usize = 32 << 20;

/// A file being written, under its partial name.
struct OpenFile {
    partial: PathBuf,
    sink: Sink,
}

/// The compressor over the file, counting the bytes that reach the disk.
enum Sink {
    Plain(Counting),
    Lz4(lz4_flex::frame::FrameEncoder<Counting>),
    Gzip(flate2::write::GzEncoder<Counting>),
}

struct Counting {
    file: BufWriter<File>,
    bytes: u64,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(w) => w,
            Sink::Lz4(w) => w,
            Sink::Gzip(w) => w,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Sink::Plain(w) => w.bytes,
            Sink::Lz4(w) => w.get_ref().bytes,
            Sink::Gzip(w) => w.get_ref().bytes,
        }
    }

    /// Ends the stream and flushes it to disk.
    fn finish(self) -> std::io::Result<()> {
        let counting = match self {
            Sink::Plain(w) => w,
            Sink::Lz4(w) => w.finish().map_err(std::io::Error::other)?,
            Sink::Gzip(w) => w.finish()?,
        };
        let file = counting.file.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()
    }
}

impl ExperienceWriter {
    /// A writer for the episodes of `num_envs` env copies with these
    /// spaces; `tag` tells this writer's files from other evaluators'
    /// (e.g. `w1-g0`). Nothing is created until the first episode ends.
    pub fn new(settings: OutputSettings, observation_space: Space, action_space: Space, tag: &str) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let (ms, pid) = (now.as_millis() as u64, std::process::id());
        // Writers started in the same millisecond (trials of a search,
        // nodes sharing a directory) still differ in the nonce.
        let nonce = hash(&format!("{}-{pid}-{tag}-{:p}", now.as_nanos(), &now)) & 0xffff_ffff;
        // Episode ids: unique across writers without coordination, and
        // below 2^53 so that JSON readers that hold numbers as doubles
        // (JavaScript, jq) read them exactly.
        let next_id = (ms.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ hash(tag) ^ (nonce << 20)) & ID_MASK;
        Self {
            settings,
            spaces: (observation_space, action_space),
            filtered_observations: false,
            stem: format!("output-{ms}-{pid}-{nonce:08x}-{tag}"),
            line_cap: MAX_LINE_BYTES,
            files_begun: 0,
            file: None,
            columns: None,
            running: Vec::new(),
            next_id,
        }
    }

    /// Records in `dataset.json` that the observations are normalized by an
    /// observation filter (whose statistics the dataset does not hold), so
    /// that `input` refuses them.
    pub fn with_filtered_observations(mut self, filtered: bool) -> Self {
        self.filtered_observations = filtered;
        self
    }

    /// Adds `rows`, consecutive steps of env copy `copy`'s running episode
    /// (as the policy acted on them, before postprocessing). `ended`: the
    /// episode ended with the last row (terminated, truncated, or cut off
    /// by an env restart); it is then written whole.
    ///
    /// # Errors
    /// The file cannot be written, or a float is not finite.
    pub fn add(&mut self, copy: usize, rows: SampleBatch, ended: bool) -> Result<(), ExperienceError> {
        while self.running.len() <= copy {
            let id = self.take_id();
            self.running.push(Running { id, ..Running::default() });
        }
        if !rows.is_empty() {
            let running = &mut self.running[copy];
            running.bytes += value_bytes(&rows);
            running.rows.push(rows);
            if running.bytes >= self.line_cap && !ended {
                self.write_running(copy)?;
            }
        }
        if ended {
            self.write_running(copy)?;
            let id = self.take_id();
            self.running[copy] = Running { id, ..Running::default() };
        }
        Ok(())
    }

    fn take_id(&mut self) -> u64 {
        self.next_id = (self.next_id + 1) & ID_MASK;
        self.next_id
    }

    /// Writes copy `copy`'s rows so far as one line.
    fn write_running(&mut self, copy: usize) -> Result<(), ExperienceError> {
        let running = &mut self.running[copy];
        if running.rows.is_empty() {
            return Ok(());
        }
        let (id, t0) = (running.id, running.t0);
        running.bytes = 0;
        let episode = SampleBatch::concat(&std::mem::take(&mut running.rows));
        let episode = episode.map_err(|e| self.malformed(format!("episode {id}: {e}")))?;
        self.running[copy].t0 += episode.len() as u64;
        self.write_line(id, t0, &episode)
    }

    fn write_line(&mut self, id: u64, t0: u64, episode: &SampleBatch) -> Result<(), ExperienceError> {
        self.describe(episode)?;
        let mut line = json::encode(id, t0, episode).map_err(|e| self.malformed(e))?;
        line.push('\n');
        if self.file.is_none() {
            self.begin_file()?;
        }
        let file = self.file.as_mut().expect("a file was just begun");
        if let Err(e) = file.sink.writer().write_all(line.as_bytes()) {
            // The file may hold a torn line: it keeps its partial name, and
            // later episodes go to a new file.
            let partial = file.partial.clone();
            self.file = None;
            return Err(ExperienceError::io(&partial, e));
        }
        if file.sink.bytes() >= self.settings.max_file_size {
            self.finish_file()?;
        }
        Ok(())
    }

    /// Writes `dataset.json` on the first episode, or checks that the one
    /// there describes the same spaces and columns; checks every later
    /// episode's columns against it.
    fn describe(&mut self, episode: &SampleBatch) -> Result<(), ExperienceError> {
        let columns: BTreeMap<String, ColumnInfo> =
            episode.columns().map(|(k, c)| (k.to_string(), ColumnInfo::of(c))).collect();
        if let Some(described) = &self.columns {
            if *described != columns {
                let names = |m: &BTreeMap<String, ColumnInfo>| m.keys().cloned().collect::<Vec<_>>().join(", ");
                return Err(self.malformed(format!(
                    "an episode with columns {} in a dataset of columns {}",
                    names(&columns),
                    names(described)
                )));
            }
            return Ok(());
        }
        let mut info = DatasetInfo::new(self.spaces.0.clone(), self.spaces.1.clone(), columns.clone());
        info.filtered_observations = self.filtered_observations;
        let dir = &self.settings.dir;
        std::fs::create_dir_all(dir).map_err(|e| ExperienceError::io(dir, e))?;
        let path = dir.join(DATASET_FILE);
        if path.exists() {
            let there = DatasetInfo::load(dir)?;
            if there != info {
                return Err(ExperienceError::Malformed {
                    file: path,
                    line: None,
                    message: "the directory holds experience of other spaces or columns: write to another directory"
                        .into(),
                });
            }
        } else {
            // Written whole under a name of its own, then renamed: several
            // evaluators may describe the same dataset at once.
            let tmp = dir.join(format!("{DATASET_FILE}.{}{PARTIAL_SUFFIX}", self.stem));
            let text = serde_json::to_string_pretty(&info).expect("a dataset description serializes");
            std::fs::write(&tmp, text + "\n").map_err(|e| ExperienceError::io(&tmp, e))?;
            std::fs::rename(&tmp, &path).map_err(|e| ExperienceError::io(&path, e))?;
        }
        self.columns = Some(columns);
        Ok(())
    }

    fn begin_file(&mut self) -> Result<(), ExperienceError> {
        let name = format!("{}-{}{}", self.stem, self.files_begun, self.settings.compression.extension());
        self.files_begun += 1;
        let partial = self.settings.dir.join(name + PARTIAL_SUFFIX);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&partial)
            .map_err(|e| ExperienceError::io(&partial, e))?;
        let counting = Counting { file: BufWriter::with_capacity(1 << 16, file), bytes: 0 };
        let sink = match self.settings.compression {
            Compression::None => Sink::Plain(counting),
            Compression::Lz4 => Sink::Lz4(lz4_flex::frame::FrameEncoder::new(counting)),
            Compression::Gzip => Sink::Gzip(flate2::write::GzEncoder::new(counting, flate2::Compression::default())),
        };
        self.file = Some(OpenFile { partial, sink });
        Ok(())
    }

    /// Ends the open file and gives it its finished name.
    fn finish_file(&mut self) -> Result<(), ExperienceError> {
        let Some(OpenFile { partial, sink }) = self.file.take() else { return Ok(()) };
        sink.finish().map_err(|e| ExperienceError::io(&partial, e))?;
        let done = finished_name(&partial);
        std::fs::rename(&partial, &done).map_err(|e| ExperienceError::io(&done, e))
    }

    /// Writes the episodes still running, cut where they are, and finishes
    /// the open file. The writer can go on after this (new episodes get new
    /// files); a cut episode goes on under the same id.
    ///
    /// # Errors
    /// A file that cannot be written or renamed.
    pub fn finish(&mut self) -> Result<(), ExperienceError> {
        // Every episode is tried and the file finished whatever one of
        // them does; the first error is returned.
        let mut first = None;
        for copy in 0..self.running.len() {
            if let Err(e) = self.write_running(copy) {
                first.get_or_insert(e);
            }
        }
        let finished = self.finish_file();
        match first {
            Some(e) => Err(e),
            None => finished,
        }
    }

    fn malformed(&self, message: String) -> ExperienceError {
        let file = self.file.as_ref().map_or_else(|| self.settings.dir.clone(), |f| f.partial.clone());
        ExperienceError::Malformed { file, line: None, message }
    }

    /// The directory written to.
    pub fn dir(&self) -> &Path {
        &self.settings.dir
    }
}

impl Drop for ExperienceWriter {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::error!("experience output: {e}");
        }
    }
}

/// `x.jsonl.lz4` for `x.jsonl.lz4.partial`.
fn finished_name(partial: &Path) -> PathBuf {
    let name = partial.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    partial.with_file_name(name.strip_suffix(PARTIAL_SUFFIX).unwrap_or(name))
}

/// Bytes of values in a batch.
fn value_bytes(batch: &SampleBatch) -> usize {
    batch
        .columns()
        .map(|(_, c)| match c {
            crate::sample_batch::Column::F32 { data, .. } => 4 * data.len(),
            crate::sample_batch::Column::I64 { data, .. } => 8 * data.len(),
            crate::sample_batch::Column::U8 { data, .. } => data.len(),
        })
        .sum()
}

/// Episode ids are below 2^53.
const ID_MASK: u64 = (1 << 53) - 1;

/// FNV-1a of a string.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experience::{ExperienceReader, InputSpec};

    fn rows(n: usize, last_ends: bool) -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_f32("obs", (0..n).map(|i| i as f32).collect(), 1).unwrap();
        let ends = (0..n).map(|i| if last_ends && i + 1 == n { 1.0 } else { 0.0 }).collect();
        b.insert_f32("terminateds", ends, 1).unwrap();
        b
    }

    #[test]
    fn a_long_episode_is_written_in_pieces_under_one_id_and_infinite_bounds_survive() {
        let dir = std::env::temp_dir().join(format!("rlx-writer-pieces-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let obs = Space::Box {
            low: vec![f32::NEG_INFINITY],
            high: vec![f32::INFINITY],
            shape: vec![1],
            dtype: Default::default(),
        };
        let settings = OutputSettings { dir: dir.clone(), compression: Compression::None, max_file_size: 1 << 20 };
        let mut w = ExperienceWriter::new(settings, obs.clone(), Space::discrete(2), "t");
        // 10 rows of 8 bytes each per piece: a line every 100 bytes.
        w.line_cap = 100;
        for k in 0..5 {
            w.add(0, rows(10, k == 4), k == 4).unwrap();
        }
        // Other columns in a later episode are refused.
        let mut other = rows(3, true);
        other.insert_f32("extra", vec![0.0; 3], 1).unwrap();
        assert!(w
            .add(1, other, true)
            .unwrap_err()
            .to_string()
            .contains("an episode with columns extra, obs, terminateds"));
        w.finish().unwrap();
        let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
        assert_eq!(reader.info().observation_space, obs, "infinite bounds read back");
        let pieces: Vec<_> = reader.episodes().map(Result::unwrap).collect();
        assert_eq!(pieces.iter().map(|e| (e.t0, e.batch.len())).collect::<Vec<_>>(), [(0, 20), (20, 20), (40, 10)]);
        assert!(pieces.iter().all(|e| e.eps_id == pieces[0].eps_id));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
