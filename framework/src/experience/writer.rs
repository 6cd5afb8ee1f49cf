//! Writing one evaluator's episodes.

use super::{json, ColumnInfo, DatasetInfo, ExperienceError, DATASET_FILE, PARTIAL_SUFFIX};
use crate::sample_batch::SampleBatch;
use crate::space::Space;
use serde::{Deserialize, Serialize};
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
/// directory, each whole episode as one line once it ends.
///
/// Files are named `output-<ms>-<tag>-<n><ext>` and written as
/// `<name>.partial` until they are finished: at `max_file_size`, at
/// [`finish`](Self::finish), or when the writer is dropped. Episodes still
/// running at the end are written first, cut: their last row is neither
/// terminated nor truncated.
pub struct ExperienceWriter {
    settings: OutputSettings,
    spaces: (Space, Space),
    /// `output-<ms>-<tag>`: unique to this writer.
    stem: String,
    files_begun: u64,
    file: Option<OpenFile>,
    /// Whether `dataset.json` has been written (or checked).
    described: bool,
    /// Per env copy: the running episode's id, and its rows so far.
    running: Vec<Running>,
    next_id: u64,
}

#[derive(Default)]
struct Running {
    id: u64,
    rows: Vec<SampleBatch>,
    /// Steps of this episode already written (an episode is cut only at the end).
    t0: u64,
}

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
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        // Episode ids: unique across writers without coordination, and
        // below 2^53 so that JSON readers that hold numbers as doubles
        // (JavaScript, jq) read them exactly.
        let next_id = ((ms as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ hash(tag)) & ID_MASK;
        Self {
            settings,
            spaces: (observation_space, action_space),
            stem: format!("output-{ms}-{tag}"),
            files_begun: 0,
            file: None,
            described: false,
            running: Vec::new(),
            next_id,
        }
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
            self.running[copy].rows.push(rows);
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
        let partial = file.partial.clone();
        file.sink.writer().write_all(line.as_bytes()).map_err(|e| ExperienceError::io(&partial, e))?;
        if file.sink.bytes() >= self.settings.max_file_size {
            self.finish_file()?;
        }
        Ok(())
    }

    /// Writes `dataset.json` on the first episode, or checks that the one
    /// there describes the same spaces and columns.
    fn describe(&mut self, episode: &SampleBatch) -> Result<(), ExperienceError> {
        if self.described {
            return Ok(());
        }
        let columns = episode.columns().map(|(k, c)| (k.to_string(), ColumnInfo::of(c))).collect();
        let info = DatasetInfo::new(self.spaces.0.clone(), self.spaces.1.clone(), columns);
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
        self.described = true;
        Ok(())
    }

    fn begin_file(&mut self) -> Result<(), ExperienceError> {
        let name = format!("{}-{}{}", self.stem, self.files_begun, self.settings.compression.extension());
        self.files_begun += 1;
        let partial = self.settings.dir.join(name + PARTIAL_SUFFIX);
        let file = File::create(&partial).map_err(|e| ExperienceError::io(&partial, e))?;
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
        for copy in 0..self.running.len() {
            self.write_running(copy)?;
        }
        self.finish_file()
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

/// Episode ids are below 2^53.
const ID_MASK: u64 = (1 << 53) - 1;

/// FNV-1a of a string.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
