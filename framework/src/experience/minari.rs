//! Minari datasets (the Farama Foundation's offline-RL format), read
//! through Minari itself in a Python process.
//!
//! Minari keeps a dataset's episodes in the storage its `metadata.json`
//! declares (HDF5's `main_data.hdf5`, or Arrow files per episode) and
//! encodes some spaces its own way; its own reader is the one that reads
//! every version of that layout. rlx runs `python/rlx_minari.py` under
//! `$RLX_PYTHON` (else `python3`), which loads the dataset with Minari and
//! prints its description and then its episodes as rlx's JSON lines, which
//! the usual reader checks and decodes. Minari datasets hold no
//! log-probabilities of the behaviour policy.

use super::{DatasetInfo, ExperienceError};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// The script the Python process runs.
const SCRIPT: &str = include_str!("../../python/rlx_minari.py");

/// The interpreter: `$RLX_PYTHON` if set, else `python3` on the `PATH`.
pub fn interpreter() -> PathBuf {
    std::env::var_os("RLX_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// The directory holding Minari's `metadata.json`, if `dir` is a Minari
/// dataset (its `data/` directory, or the dataset directory above it).
pub(crate) fn data_path(dir: &Path) -> Option<PathBuf> {
    [dir.join("data"), dir.to_path_buf()].into_iter().find(|d| {
        std::fs::read_to_string(d.join("metadata.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|m| m.get("data_format").is_some() || m.get("dataset_id").is_some())
    })
}

fn start(data: &Path, describe: bool) -> Result<Child, ExperienceError> {
    let mut command = Command::new(interpreter());
    command.arg("-c").arg(SCRIPT).arg(data);
    if describe {
        command.arg("describe");
    }
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| {
        ExperienceError::Malformed {
            file: data.to_path_buf(),
            line: None,
            message: format!(
                "a Minari dataset, read through Python (`{}`), which could not start: {e}; set RLX_PYTHON to an \
                 interpreter with `minari` installed",
                interpreter().display()
            ),
        }
    })
}

/// What the process wrote to stderr, or its exit status.
fn failure(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
    let err = err.trim();
    match err.lines().last() {
        Some(last) => last.trim_start_matches("rlx_minari: ").to_string(),
        None => format!("the Minari reader exited ({status})"),
    }
}

/// The dataset's description, as `_dataset.json` would give it.
///
/// # Errors
/// Python or Minari missing, a dataset Minari cannot read, or spaces rlx
/// does not take, with Minari's or the script's message.
pub(crate) fn describe(data: &Path) -> Result<DatasetInfo, ExperienceError> {
    let malformed = |message| ExperienceError::Malformed { file: data.to_path_buf(), line: None, message };
    let mut child = start(data, true)?;
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().expect("stdout is piped")).read_line(&mut line);
    if read.is_err() || line.trim().is_empty() {
        return Err(malformed(failure(&mut child)));
    }
    let _ = child.wait();
    serde_json::from_str(&line).map_err(|e| malformed(format!("the Minari reader's description: {e}")))
}

/// The dataset's episodes as rlx's JSON lines, after the description line.
///
/// # Errors
/// Python cannot start.
pub(crate) fn episodes(data: &Path) -> Result<Box<dyn BufRead + Send>, ExperienceError> {
    let mut child = start(data, false)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::with_capacity(1 << 16, Stream { child, stdout });
    let mut description = String::new();
    lines.read_line(&mut description).map_err(|e| ExperienceError::io(data, e))?;
    Ok(Box::new(lines))
}

/// The process's stdout: at its end, a failed process's message becomes a
/// read error; dropped early, the process is killed.
struct Stream {
    child: Child,
    stdout: ChildStdout,
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stdout.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let ok = self.child.try_wait()?.or(self.child.wait().ok()).is_some_and(|s| s.success());
            if !ok {
                return Err(std::io::Error::other(failure(&mut self.child)));
            }
        }
        Ok(n)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
