//! Writing one evaluator's episodes.

use super::{finished_name, partial_name};
use super::{json, parquet, ColumnInfo, DatasetInfo, ExperienceError, DATASET_FILE, MAX_EPISODE_BYTES, PARTIAL_SUFFIX};
use crate::sample_batch::SampleBatch;
use crate::space::Space;
use ::parquet::arrow::ArrowWriter;
use ::parquet::file::properties::WriterProperties;
use arrow_schema::SchemaRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How episodes are laid out in files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// One whole episode per JSON line, in RLlib's old-stack shape; the
    /// file is compressed whole.
    #[default]
    Json,
    /// One step per row of a Parquet file, under RLlib's new-stack column
    /// names; the file's pages are compressed.
    Parquet,
}

/// How a file of episodes is compressed: a JSON file whole, as one stream;
/// a Parquet file page by page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// LZ4: JSON in LZ4's frame format (`.jsonl.lz4`, read by `lz4 -d`),
    /// Parquet pages in `LZ4_RAW`. Fast.
    #[default]
    Lz4,
    /// gzip (`.jsonl.gz`; Parquet's `GZIP`): smaller, slower, read
    /// everywhere.
    Gzip,
    /// None (`.jsonl`; Parquet's `UNCOMPRESSED`).
    None,
}

impl Compression {
    /// The name's ending of a JSON-lines file so compressed.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Lz4 => ".jsonl.lz4",
            Compression::Gzip => ".jsonl.gz",
            Compression::None => ".jsonl",
        }
    }

    fn parquet(self) -> ::parquet::basic::Compression {
        match self {
            Compression::Lz4 => ::parquet::basic::Compression::LZ4_RAW,
            Compression::Gzip => ::parquet::basic::Compression::GZIP(Default::default()),
            Compression::None => ::parquet::basic::Compression::UNCOMPRESSED,
        }
    }
}

/// Where and how a run writes what it samples.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSettings {
    /// The dataset's directory (made if missing).
    pub dir: PathBuf,
    /// JSON lines or Parquet.
    pub format: OutputFormat,
    /// The files' compression.
    pub compression: Compression,
    /// A file is finished, and the next begun, once it holds this many
    /// bytes on disk (RLlib's `output_max_file_size`, 64 MiB by default).
    pub max_file_size: u64,
}

impl OutputSettings {
    /// The name's ending of the files written.
    pub fn extension(&self) -> &'static str {
        match self.format {
            OutputFormat::Json => self.compression.extension(),
            OutputFormat::Parquet => ".parquet",
        }
    }
}

/// Writes the episodes one evaluator samples to files in a dataset
/// directory, each whole episode once it ends: as one JSON line, or as
/// consecutive Parquet rows (an episode of more than [`MAX_EPISODE_BYTES`]
/// of values is written in pieces of that size, under one id, each piece's
/// `t` going on from the last).
///
/// Files are named `output-<ms>-<pid>-<nonce>-<tag>-<n><ext>` and written
/// as `_<name>.partial` until they are finished: at `max_file_size`, at
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
    /// ([`MAX_EPISODE_BYTES`]).
    line_cap: usize,
    files_begun: u64,
    file: Option<OpenFile>,
    /// The columns `_dataset.json` names, once written (or checked).
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

/// A file being written, under its partial name.
struct OpenFile {
    partial: PathBuf,
    sink: Sink,
}

/// A file's encoder: JSON text through a compressor, or Parquet rows.
enum Sink {
    Text(Text),
    Parquet { writer: ArrowWriter<Counting>, schema: SchemaRef },
}

/// The compressor over a text file, counting the bytes that reach the disk.
enum Text {
    Plain(Counting),
    Lz4(lz4_flex::frame::FrameEncoder<Counting>),
    Gzip(flate2::write::GzEncoder<Counting>),
}

/// Uncompressed bytes of Parquet rows held in memory before they are
/// written out as a row group.
const ROW_GROUP_BYTES: usize = 16 << 20;

/// Why an episode was not written.
enum WriteError {
    /// It cannot be encoded (a float JSON cannot hold); nothing was written.
    Encode(String),
    /// The file could not be written; it may hold part of the episode.
    Io(std::io::Error),
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
    /// A sink of `format` over a new file.
    fn new(
        file: File,
        format: OutputFormat,
        compression: Compression,
        (columns, spaces): (&BTreeMap<String, ColumnInfo>, (&Space, &Space)),
    ) -> std::io::Result<Self> {
        let counting = Counting { file: BufWriter::with_capacity(1 << 16, file), bytes: 0 };
        Ok(match (format, compression) {
            (OutputFormat::Json, Compression::None) => Sink::Text(Text::Plain(counting)),
            (OutputFormat::Json, Compression::Lz4) => {
                Sink::Text(Text::Lz4(lz4_flex::frame::FrameEncoder::new(counting)))
            }
            (OutputFormat::Json, Compression::Gzip) => {
                Sink::Text(Text::Gzip(flate2::write::GzEncoder::new(counting, flate2::Compression::default())))
            }
            (OutputFormat::Parquet, compression) => {
                let schema = parquet::schema(columns, spaces);
                let properties = WriterProperties::builder().set_compression(compression.parquet()).build();
                let writer =
                    ArrowWriter::try_new(counting, schema.clone(), Some(properties)).map_err(std::io::Error::other)?;
                Sink::Parquet { writer, schema }
            }
        })
    }

    /// Writes one episode (or piece of one), encoded whole before anything
    /// is written.
    fn write(&mut self, id: u64, t0: u64, episode: &SampleBatch) -> Result<(), WriteError> {
        match self {
            Sink::Text(text) => {
                let mut line = json::encode(id, t0, episode).map_err(WriteError::Encode)?;
                line.push('\n');
                let w: &mut dyn Write = match text {
                    Text::Plain(w) => w,
                    Text::Lz4(w) => w,
                    Text::Gzip(w) => w,
                };
                w.write_all(line.as_bytes()).map_err(WriteError::Io)
            }
            Sink::Parquet { writer, schema } => {
                let rows = parquet::encode(schema, id, t0, episode).map_err(WriteError::Encode)?;
                let io = |e| WriteError::Io(std::io::Error::other(e));
                writer.write(&rows).map_err(io)?;
                if writer.in_progress_size() >= ROW_GROUP_BYTES {
                    writer.flush().map_err(io)?;
                }
                Ok(())
            }
        }
    }

    /// Bytes written to the file so far (for Parquet, with the rows held
    /// for the next row group, uncompressed).
    fn bytes(&self) -> u64 {
        match self {
            Sink::Text(Text::Plain(w)) => w.bytes,
            Sink::Text(Text::Lz4(w)) => w.get_ref().bytes,
            Sink::Text(Text::Gzip(w)) => w.get_ref().bytes,
            Sink::Parquet { writer, .. } => (writer.bytes_written() + writer.in_progress_size()) as u64,
        }
    }

    /// Ends the stream (for Parquet, writes the footer) and flushes it to disk.
    fn finish(self) -> std::io::Result<()> {
        let counting = match self {
            Sink::Text(Text::Plain(w)) => w,
            Sink::Text(Text::Lz4(w)) => w.finish().map_err(std::io::Error::other)?,
            Sink::Text(Text::Gzip(w)) => w.finish()?,
            Sink::Parquet { writer, .. } => writer.into_inner().map_err(std::io::Error::other)?,
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
            line_cap: MAX_EPISODE_BYTES,
            files_begun: 0,
            file: None,
            columns: None,
            running: Vec::new(),
            next_id,
        }
    }

    /// Records in `_dataset.json` that the observations are normalized by an
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
            running.bytes += rows.size_bytes();
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
        self.write_episode(id, t0, &episode)
    }

    fn write_episode(&mut self, id: u64, t0: u64, episode: &SampleBatch) -> Result<(), ExperienceError> {
        self.describe(episode)?;
        if self.file.is_none() {
            self.begin_file()?;
        }
        let file = self.file.as_mut().expect("a file was just begun");
        match file.sink.write(id, t0, episode) {
            Ok(()) => {}
            Err(WriteError::Encode(e)) => return Err(self.malformed(e)),
            Err(WriteError::Io(e)) => {
                // The file may hold a torn line: it keeps its partial name,
                // and later episodes go to a new file.
                let partial = file.partial.clone();
                self.file = None;
                return Err(ExperienceError::io(&partial, e));
            }
        }
        if file.sink.bytes() >= self.settings.max_file_size {
            self.finish_file()?;
        }
        Ok(())
    }

    /// Writes `_dataset.json` on the first episode, or checks that the one
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
        let name = format!("{}-{}{}", self.stem, self.files_begun, self.settings.extension());
        self.files_begun += 1;
        let partial = self.settings.dir.join(partial_name(&name));
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&partial)
            .map_err(|e| ExperienceError::io(&partial, e))?;
        let columns = self.columns.as_ref().expect("the dataset is described before its first file");
        let spaces = (&self.spaces.0, &self.spaces.1);
        let sink = Sink::new(file, self.settings.format, self.settings.compression, (columns, spaces))
            .map_err(|e| ExperienceError::io(&partial, e))?;
        self.file = Some(OpenFile { partial, sink });
        Ok(())
    }

    /// Ends the open file and gives it its finished name.
    fn finish_file(&mut self) -> Result<(), ExperienceError> {
        let Some(OpenFile { partial, sink }) = self.file.take() else { return Ok(()) };
        sink.finish().map_err(|e| ExperienceError::io(&partial, e))?;
        let name = partial.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let done = partial.with_file_name(finished_name(name));
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
        let settings = OutputSettings {
            dir: dir.clone(),
            format: OutputFormat::Json,
            compression: Compression::None,
            max_file_size: 1 << 20,
        };
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
