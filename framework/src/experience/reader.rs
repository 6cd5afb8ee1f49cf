//! Reading episodes back, streamed file by file, and line by line or row
//! group by row group.

use super::{finished_name, json, minari, parquet, DatasetInfo, ExperienceError, DATASET_FILE, PARTIAL_SUFFIX};
use crate::sample_batch::SampleBatch;
use crate::space::Space;
use ::parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// What `input` names: a dataset directory (rlx's, or a Minari dataset's),
/// a glob of episode files, or a list of these; or sources by weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a dataset directory, glob or file, a list of them, or a map of sources to numbers (weights), \
                 as {\"sampler\": 1, \"data/run1\": 3}"
)]
pub enum InputSpec {
    /// One directory, glob or file.
    One(String),
    /// Several, read as one dataset.
    Many(Vec<String>),
    /// Sources by weight, as RLlib's `{"sampler": 0.5, "data/run1": 0.5}`:
    /// each batch an evaluator samples comes from one source, drawn with
    /// these odds; [`SAMPLER`] steps the env, any other key is a
    /// directory, glob or file read as its own dataset.
    Weighted(BTreeMap<String, f64>),
}

/// The source of a weighted `input` that steps the env.
pub const SAMPLER: &str = "sampler";

impl InputSpec {
    /// Every directory, glob or file named (a weighted input's datasets).
    fn patterns(&self) -> Vec<&str> {
        match self {
            InputSpec::One(p) => vec![p.as_str()],
            InputSpec::Many(ps) => ps.iter().map(String::as_str).collect(),
            InputSpec::Weighted(w) => w.keys().map(String::as_str).filter(|k| *k != SAMPLER).collect(),
        }
    }

    /// The sources and their weights: `None` for the env, a dataset
    /// otherwise. A plain input is one dataset of weight 1.
    ///
    /// # Errors
    /// A weight that is negative or not finite, weights that sum to 0, or
    /// a weighted input with no dataset.
    pub fn sources(&self) -> Result<Vec<(f64, Option<InputSpec>)>, String> {
        let InputSpec::Weighted(weights) = self else { return Ok(vec![(1.0, Some(self.clone()))]) };
        if let Some((name, w)) = weights.iter().find(|(_, w)| !(w.is_finite() && **w >= 0.0)) {
            return Err(format!("the weight of {name} is {w}; weights are finite and >= 0"));
        }
        if weights.values().sum::<f64>() <= 0.0 || self.patterns().is_empty() {
            return Err(format!(
                "weights of sources need at least one dataset and a sum above 0, as {{\"{SAMPLER}\": 0.5, \"data/run1\": 0.5}}"
            ));
        }
        Ok(weights.iter().map(|(name, &w)| (w, (name != SAMPLER).then(|| InputSpec::One(name.clone())))).collect())
    }
}

impl std::fmt::Display for InputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputSpec::Weighted(w) => {
                let parts: Vec<String> = w.iter().map(|(k, v)| format!("{k} ({v})")).collect();
                f.write_str(&parts.join(", "))
            }
            _ => f.write_str(&self.patterns().join(", ")),
        }
    }
}

/// One episode read back: its id, the step its first row is, and its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    /// The id its writer gave it.
    pub eps_id: u64,
    /// The episode step of the first row (0 unless the episode was written
    /// in pieces).
    pub t0: u64,
    /// Its rows, with the columns `_dataset.json` names.
    pub batch: SampleBatch,
}

/// The episode files of a dataset, and what they hold.
#[derive(Clone, Debug)]
pub struct ExperienceReader {
    files: Vec<PathBuf>,
    info: DatasetInfo,
    /// The directory of the first file, whose `_dataset.json` is `info`.
    dir: PathBuf,
    /// Files left out because their writer never finished them.
    partial: Vec<PathBuf>,
}

/// Whether a file name is one of episodes (finished or not).
fn is_episode_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let name = finished_name(name);
    [".jsonl", ".jsonl.lz4", ".jsonl.gz", ".parquet"].iter().any(|ext| name.ends_with(ext))
}

/// The directory whose description covers `file`: its own for a Minari
/// dataset (read as one source), else the file's.
fn described_by(file: &Path) -> PathBuf {
    match file.is_dir() {
        true => file.to_path_buf(),
        false => file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    }
}

/// The description of the episodes in `dir`: its `_dataset.json`, or what
/// Minari says of a Minari dataset.
fn describe(dir: &Path) -> Result<DatasetInfo, ExperienceError> {
    match !dir.join(DATASET_FILE).exists() && minari::data_path(dir).is_some() {
        true => minari::describe(dir),
        false => DatasetInfo::load(dir),
    }
}

impl ExperienceReader {
    /// The files `spec` names, in name order (a directory's episode files;
    /// a glob's matches), with the dataset description of their directory.
    /// Files a writer left unfinished (`.partial`) are left out with a
    /// warning: the lines they hold are not known to be whole.
    ///
    /// # Errors
    /// A pattern that names nothing, a directory without `_dataset.json`,
    /// or files from datasets whose spaces or columns differ.
    pub fn open(spec: &InputSpec) -> Result<Self, ExperienceError> {
        let mut found = Vec::new();
        for pattern in spec.patterns() {
            let pattern = pattern.to_string();
            let path = Path::new(&pattern);
            if let Some(data) = path.is_dir().then(|| minari::data_path(path)).flatten() {
                // A Minari dataset is read whole, as one source.
                found.push(data);
            } else if path.is_dir() {
                let entries = std::fs::read_dir(path).map_err(|e| ExperienceError::io(path, e))?;
                let mut files = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|e| ExperienceError::io(path, e))?;
                    files.push(entry.path());
                }
                files.retain(|f| is_episode_file(f));
                files.sort();
                found.extend(files);
            } else if pattern.contains(['*', '?', '[']) {
                let matches = glob::glob(&pattern).map_err(|e| ExperienceError::Malformed {
                    file: path.to_path_buf(),
                    line: None,
                    message: format!("not a glob: {e}"),
                })?;
                let mut files = matches.filter_map(Result::ok).filter(|f| is_episode_file(f)).collect::<Vec<_>>();
                if files.is_empty() {
                    return Err(ExperienceError::NoFiles(pattern.clone()));
                }
                files.sort();
                found.extend(files);
            } else if path.is_file() {
                found.push(path.to_path_buf());
            } else {
                return Err(ExperienceError::NoFiles(pattern.clone()));
            }
        }
        let (partial, files): (Vec<_>, Vec<_>) =
            found.into_iter().partition(|f| f.to_string_lossy().ends_with(PARTIAL_SUFFIX));
        for p in &partial {
            tracing::warn!("{}: left out, its writer did not finish it (a run killed while writing)", p.display());
        }
        let Some(first) = files.first() else {
            return Err(ExperienceError::NoFiles(spec.to_string()));
        };
        let dir = described_by(first);
        let info = describe(&dir)?;
        // Each directory's description once, however many files it holds.
        let others: BTreeSet<PathBuf> = files.iter().map(|f| described_by(f)).filter(|d| *d != dir).collect();
        for other in others {
            if describe(&other)? != info {
                return Err(ExperienceError::Malformed {
                    file: other.join(DATASET_FILE),
                    line: None,
                    message: format!("describes other spaces or columns than {}", dir.display()),
                });
            }
        }
        Ok(Self { files, info, dir, partial })
    }

    /// The directory whose `_dataset.json` describes the dataset.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that a run with these spaces can learn from the dataset: the
    /// same spaces, and observations as the env gives them (not normalized
    /// by a filter whose statistics the dataset does not hold).
    ///
    /// # Errors
    /// [`ExperienceError::Spaces`] naming the space that differs;
    /// [`ExperienceError::Malformed`] naming `_dataset.json` for filtered
    /// observations.
    pub fn check_fits(&self, obs: &Space, act: &Space) -> Result<(), ExperienceError> {
        self.info.check_spaces(&self.dir, obs, act)?;
        if self.info.filtered_observations {
            return Err(ExperienceError::Malformed {
                file: self.dir.join(DATASET_FILE),
                line: None,
                message: "written by a run with an observation_filter; its observations are normalized by \
                          statistics the dataset does not hold"
                    .into(),
            });
        }
        Ok(())
    }

    /// The dataset's spaces and columns.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// The finished files, in reading order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The unfinished files left out.
    pub fn partial_files(&self) -> &[PathBuf] {
        &self.partial
    }

    /// Only every `of`-th file, starting at `index`: one reader's share
    /// when several read the same dataset. A share can be empty.
    pub fn share(mut self, index: usize, of: usize) -> Self {
        self.files = self.files.into_iter().skip(index).step_by(of.max(1)).collect();
        self
    }

    /// The episodes of every file in order, read as they are asked for.
    pub fn episodes(&self) -> Episodes {
        self.episodes_of(self.files.clone())
    }

    /// The episodes of `files` (some of this dataset's), in that order.
    pub fn episodes_of(&self, files: Vec<PathBuf>) -> Episodes {
        Episodes { files: files.into_iter(), info: self.info.clone(), open: None }
    }
}

/// The episodes of a list of files, one file at a time.
pub struct Episodes {
    files: std::vec::IntoIter<PathBuf>,
    info: DatasetInfo,
    open: Option<OpenFile>,
}

/// The file being read.
struct OpenFile {
    path: PathBuf,
    done: bool,
    format: Format,
}

enum Format {
    /// JSON lines: the decompressed text, and the last line read (from 1).
    Lines { text: Box<dyn BufRead + Send>, line: usize },
    /// Parquet: its rows in batches, the rows read so far, and the episodes
    /// they make.
    Rows { batches: ParquetRecordBatchReader, read: usize, gather: parquet::Gather },
}

/// Rows per batch read from a Parquet file: about 8 MiB of values.
fn batch_rows(info: &DatasetInfo) -> usize {
    let row_bytes: usize = info.columns.values().map(|c| c.width * c.dtype.size()).sum();
    ((8 << 20) / row_bytes.max(1)).clamp(1, 65_536)
}

impl OpenFile {
    fn open(path: PathBuf, info: &DatasetInfo) -> Result<Self, ExperienceError> {
        let name = path.to_string_lossy();
        let file = || File::open(&path).map_err(|e| ExperienceError::io(&path, e));
        let malformed = |message| ExperienceError::Malformed { file: path.clone(), line: None, message };
        let format = if path.is_dir() {
            Format::Lines { text: minari::episodes(&path)?, line: 1 }
        } else if name.ends_with(".parquet") {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file()?)
                .map_err(|e| malformed(format!("not a whole Parquet file ({e}): a truncated file?")))?;
            // (A codec this build lacks, zstd or brotli, fails later, as
            // a read error naming it.)
            parquet::check_schema(builder.schema(), info).map_err(malformed)?;
            let batches = builder.with_batch_size(batch_rows(info)).build().map_err(|e| malformed(e.to_string()))?;
            Format::Rows { batches, read: 0, gather: parquet::Gather::default() }
        } else {
            let raw: Box<dyn Read + Send> = if name.ends_with(".lz4") {
                Box::new(lz4_flex::frame::FrameDecoder::new(file()?))
            } else if name.ends_with(".gz") {
                Box::new(flate2::read::GzDecoder::new(file()?))
            } else {
                Box::new(file()?)
            };
            Format::Lines { text: Box::new(BufReader::with_capacity(1 << 16, raw)), line: 0 }
        };
        Ok(Self { path, done: false, format })
    }

    /// The file's next episode; `None` once it has no more.
    fn next(&mut self, info: &DatasetInfo) -> Option<Result<Episode, ExperienceError>> {
        let malformed = |line, message| ExperienceError::Malformed { file: self.path.clone(), line, message };
        loop {
            match &mut self.format {
                Format::Lines { text, line: line_no } => {
                    if self.done {
                        return None;
                    }
                    let mut line = String::new();
                    *line_no += 1;
                    match text.read_line(&mut line) {
                        Ok(0) => self.done = true,
                        Ok(_) if line.trim().is_empty() => {}
                        Ok(_) if !line.ends_with('\n') => {
                            return Some(Err(malformed(Some(*line_no), "the last line is torn (no newline)".into())));
                        }
                        Ok(_) => {
                            let episode = json::decode(&line, info)
                                .map(|(eps_id, t0, batch)| Episode { eps_id, t0, batch })
                                .map_err(|m| malformed(Some(*line_no), m));
                            return Some(episode);
                        }
                        Err(e) => {
                            self.done = true;
                            let message = format!("cannot be read past line {}: {e} (a truncated file?)", *line_no - 1);
                            return Some(Err(malformed(None, message)));
                        }
                    }
                }
                Format::Rows { batches, read, gather } => {
                    if let Some((eps_id, t0, batch)) = gather.pop() {
                        return Some(Ok(Episode { eps_id, t0, batch }));
                    }
                    if self.done {
                        return None;
                    }
                    match batches.next() {
                        Some(Ok(rows)) => {
                            if let Err(m) = gather.push(&rows, *read, info) {
                                self.done = true;
                                return Some(Err(malformed(None, m)));
                            }
                            *read += rows.num_rows();
                        }
                        Some(Err(e)) => {
                            self.done = true;
                            let message = format!("cannot be read past row {}: {e} (a truncated file?)", *read);
                            return Some(Err(malformed(None, message)));
                        }
                        None => {
                            gather.end();
                            self.done = true;
                        }
                    }
                }
            }
        }
    }
}

impl Iterator for Episodes {
    type Item = Result<Episode, ExperienceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some(open) = &mut self.open else {
                let path = self.files.next()?;
                match OpenFile::open(path, &self.info) {
                    Ok(open) => self.open = Some(open),
                    Err(e) => return Some(Err(e)),
                }
                continue;
            };
            match open.next(&self.info) {
                Some(episode) => return Some(episode),
                None => self.open = None,
            }
        }
    }
}
