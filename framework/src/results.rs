//! The results directory of a run: `params.json` and `result.json` (one JSON
//! object per iteration, flushed as it is written, so a killed run keeps
//! every finished iteration).

use crate::metrics::TrainResult;
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes a run's results as it goes.
pub struct ResultsWriter {
    dir: PathBuf,
    results: File,
}

impl ResultsWriter {
    /// Creates `dir` (and parents) and writes `params.json` atomically.
    ///
    /// # Errors
    /// If the directory or files cannot be written; the error names the path.
    pub fn create(dir: &Path, params: &impl Serialize) -> io::Result<Self> {
        fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
        let params_json = serde_json::to_vec_pretty(params).map_err(io::Error::other)?;
        write_atomic(&dir.join("params.json"), &params_json)?;
        let path = dir.join("result.json");
        let results = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| with_path(e, &path))?;
        Ok(Self { dir: dir.to_path_buf(), results })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one iteration's result as a line of JSON and flushes it to disk.
    ///
    /// # Errors
    /// If the write fails.
    pub fn append(&mut self, result: &TrainResult) -> io::Result<()> {
        let mut line = serde_json::to_vec(result).map_err(io::Error::other)?;
        line.push(b'\n');
        self.results.write_all(&line)?;
        self.results.sync_data()
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so
/// readers see the old file or the new one, never half of one.
///
/// # Errors
/// If writing or renaming fails; the error names the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(|e| with_path(e, &tmp))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path).map_err(|e| with_path(e, path))
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Reads every line of a `result.json`.
///
/// # Errors
/// If the file cannot be read or a line is not a result.
pub fn read_results(path: &Path) -> io::Result<Vec<TrainResult>> {
    fs::read_to_string(path)
        .map_err(|e| with_path(e, path))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
        })
        .collect()
}
