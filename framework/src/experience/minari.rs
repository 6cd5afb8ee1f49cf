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
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

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

/// The Python process, with its stderr read on a thread of its own (so
/// that warnings never fill the pipe and stop it), keeping the last lines.
struct Process {
    child: Child,
    stderr: Option<JoinHandle<()>>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

/// Lines of stderr kept for an error message.
const TAIL_LINES: usize = 20;

impl Process {
    fn start(data: &Path, describe: bool) -> Result<Self, ExperienceError> {
        let mut command = Command::new(interpreter());
        command.arg("-c").arg(SCRIPT).arg(data);
        if describe {
            command.arg("describe");
        }
        let spawned = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let mut child = spawned.map_err(|e| ExperienceError::Malformed {
            file: data.to_path_buf(),
            line: None,
            message: format!(
                "a Minari dataset, read through Python (`{}`), which could not start: {e}; set RLX_PYTHON to an \
                 interpreter with `minari` installed",
                interpreter().display()
            ),
        })?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr = child.stderr.take().map(|stderr| {
            let tail = tail.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut tail = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if tail.len() == TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            })
        });
        Ok(Self { child, stderr, tail })
    }

    /// Why the process failed: the script's own message (its
    /// `rlx_minari:` lines), else the end of what it wrote to stderr, else
    /// its exit status.
    fn failure(&mut self) -> String {
        let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
        if let Some(reader) = self.stderr.take() {
            let _ = reader.join();
        }
        let tail = self.tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let own: Vec<&str> = tail.iter().filter_map(|l| l.strip_prefix("rlx_minari: ")).collect();
        match (own.is_empty(), tail.is_empty()) {
            (false, _) => own.join("; "),
            (true, false) => tail.iter().rev().take(5).rev().cloned().collect::<Vec<_>>().join("\n"),
            (true, true) => format!("the Minari reader exited ({status})"),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.stderr.take() {
            let _ = reader.join();
        }
    }
}

/// The dataset's description, as `_dataset.json` would give it.
///
/// # Errors
/// Python or Minari missing, a dataset Minari cannot read, or spaces rlx
/// does not take, with Minari's or the script's message.
pub(crate) fn describe(data: &Path) -> Result<DatasetInfo, ExperienceError> {
    let malformed = |message| ExperienceError::Malformed { file: data.to_path_buf(), line: None, message };
    let mut process = Process::start(data, true)?;
    let mut line = String::new();
    let read = BufReader::new(process.child.stdout.take().expect("stdout is piped")).read_line(&mut line);
    if read.is_err() || line.trim().is_empty() {
        return Err(malformed(process.failure()));
    }
    serde_json::from_str(&line).map_err(|e| malformed(format!("the Minari reader's description: {e}")))
}

/// The dataset's episodes as rlx's JSON lines, after the description line.
///
/// # Errors
/// Python cannot start.
pub(crate) fn episodes(data: &Path) -> Result<Box<dyn BufRead + Send>, ExperienceError> {
    let mut process = Process::start(data, false)?;
    let stdout = process.child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::with_capacity(1 << 16, Stream { process, stdout });
    let mut description = String::new();
    lines.read_line(&mut description).map_err(|e| ExperienceError::io(data, e))?;
    Ok(Box::new(lines))
}

/// The process's stdout: at its end, a failed process's message becomes a
/// read error; dropped early, the process is killed.
struct Stream {
    process: Process,
    stdout: ChildStdout,
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stdout.read(buf)?;
        if n == 0 && !buf.is_empty() && !self.process.child.wait()?.success() {
            return Err(std::io::Error::other(self.process.failure()));
        }
        Ok(n)
    }
}
