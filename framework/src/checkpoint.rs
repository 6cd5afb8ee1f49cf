//! Checkpoints: a run's learner weights and everything else needed to
//! resume it exactly.
//!
//! A checkpoint is a directory `checkpoint_<iteration>` inside the run's
//! results directory:
//!
//! | file | holds |
//! |---|---|
//! | `metadata.json` | format version, algorithm, env, config, counters, whether the resume is exact and why not |
//! | `policy.safetensors` | the learner's weights ([`PolicyGraph::save_weights`]) |
//! | `state.bin` | [`RunState`]: trainer counters, episode window, and per evaluator the optimizer moments, RNGs, observation filter and the episodes in progress (MessagePack + LZ4, see [`crate::codec`]) |
//! | `SHA256SUMS` | the SHA-256 of the three files above, in the format of `sha256sum`, so `sha256sum -c SHA256SUMS` checks a checkpoint by hand |
//!
//! It is written into a hidden temporary directory that is renamed into
//! place only once every file is on disk, so a run killed mid-write leaves
//! the previous checkpoint intact and never a half one; the temporary
//! directories a killed run leaves behind are removed by the next save into
//! that run directory or restore from it ([`remove_stale_temporaries`]).
//!
//! Loading verifies every file against `SHA256SUMS` before it parses
//! anything, so a flipped bit anywhere is an error naming the file, never a
//! silently different policy; then it checks the format version. A damaged
//! checkpoint is passed over for the newest older one of the same run that
//! verifies, and [`Checkpoint::warnings`] says so. Checkpoints are ordered
//! by their iteration number, not by their names as text.
//!
//! A resume is exact — the restored run computes the same weights as one
//! that never stopped — when every env and policy can snapshot itself and
//! the optimizer is synchronous. Otherwise `metadata.json` lists what is
//! missing under `notes`, and a restore repeats it as a warning.

use crate::codec;
use crate::policy::PolicyGraph;
use crate::trainer::{RunState, Trainer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The version of the checkpoint layout this rlx writes. Version 2 added
/// `SHA256SUMS`.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest layout this rlx reads (version 1 has no checksums: it loads
/// unverified, with a warning).
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The metadata file's name.
pub const METADATA_FILE: &str = "metadata.json";
/// The weights file's name.
pub const WEIGHTS_FILE: &str = "policy.safetensors";
/// The run state file's name.
pub const STATE_FILE: &str = "state.bin";
/// The checksums file's name.
pub const CHECKSUMS_FILE: &str = "SHA256SUMS";
/// The files `SHA256SUMS` covers, in the order it lists them.
const CHECKED_FILES: [&str; 3] = [METADATA_FILE, WEIGHTS_FILE, STATE_FILE];

/// `metadata.json`: what a checkpoint is of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The rlx version that wrote it.
    pub rlx_version: String,
    /// The algorithm's name (e.g. `"PPO"`).
    pub algorithm: String,
    /// The env's registered name (e.g. `"CartPole-v1"`).
    pub env: String,
    /// The algorithm's full resolved config.
    pub config: Value,
    /// Iterations completed.
    pub training_iteration: u64,
    /// Env steps sampled.
    pub timesteps_total: u64,
    /// Mean return over the last 100 episodes, if any finished.
    pub episode_reward_mean: Option<f64>,
    /// Seconds trained.
    pub time_total_s: f64,
    /// Seconds since the Unix epoch when it was written.
    pub created_unix_s: u64,
    /// Whether restoring continues the run exactly.
    pub exact_resume: bool,
    /// What is not saved, if the resume is not exact.
    pub notes: Vec<String>,
}

/// Why a checkpoint could not be written or read. Each message names the
/// file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The path is not a checkpoint (or a run directory holding one).
    #[error("{}: not a checkpoint: {reason}", path.display())]
    NotACheckpoint {
        /// The path given.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// A file of the checkpoint is unreadable or damaged.
    #[error("{}: corrupt checkpoint file: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Written by an rlx with another layout.
    #[error(
        "{}: checkpoint format version {found}, but this rlx reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}",
        path.display()
    )]
    Version {
        /// The metadata file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// A checkpoint of another algorithm or env.
    #[error("{}: a checkpoint of {found_algorithm} on {found_env}, but this run is {algorithm} on {env}", path.display())]
    Mismatch {
        /// The checkpoint.
        path: PathBuf,
        /// Its algorithm.
        found_algorithm: String,
        /// Its env.
        found_env: String,
        /// The run's algorithm.
        algorithm: String,
        /// The run's env.
        env: String,
    },
    /// Snapshotting the run failed (an evaluator could not be reached).
    #[error("cannot checkpoint into {}: {reason}", path.display())]
    Snapshot {
        /// The run directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Restoring into the run failed (an evaluator rejected its state).
    #[error("cannot restore {}: {reason}", path.display())]
    Restore {
        /// The checkpoint.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { path: path.to_path_buf(), source }
}

/// What a checkpoint is of: given by the caller, who knows the names.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The algorithm's name.
    pub algorithm: String,
    /// The env's registered name.
    pub env: String,
    /// The resolved config.
    pub config: Value,
}

/// A checkpoint read from disk.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// Its directory.
    pub dir: PathBuf,
    /// `metadata.json`.
    pub metadata: CheckpointMetadata,
    /// `state.bin`.
    pub state: RunState,
    /// What the reader should be told: newer checkpoints passed over
    /// because they failed verification, or a checkpoint written before
    /// checksums.
    pub warnings: Vec<String>,
}

/// The directory name of the checkpoint after `iteration`.
pub fn dir_name(iteration: u64) -> String {
    format!("checkpoint_{iteration:06}")
}

/// The iteration of a checkpoint directory's name (`checkpoint_<n>`), if
/// it is one.
pub fn iteration_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("checkpoint_")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The prefix of the temporary directory a checkpoint is written into.
const TEMPORARY_PREFIX: &str = ".checkpoint_";

/// Removes the temporary directories that runs killed while writing a
/// checkpoint left in `run_dir` (those of this process, which may be
/// writing one, are kept). Returns the ones removed.
///
/// # Errors
/// A temporary directory that cannot be removed.
pub fn remove_stale_temporaries(run_dir: &Path) -> Result<Vec<PathBuf>, CheckpointError> {
    let own = format!(".tmp-{}", std::process::id());
    let Ok(entries) = fs::read_dir(run_dir) else { return Ok(Vec::new()) };
    let mut removed = Vec::new();
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        if name.starts_with(TEMPORARY_PREFIX) && name.contains(".tmp-") && !name.ends_with(&own) && path.is_dir() {
            fs::remove_dir_all(&path).map_err(io_at(&path))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Saves `trainer` to `parent/checkpoint_<iteration>` and returns that path.
/// An existing checkpoint of the same iteration is replaced.
///
/// # Errors
/// An evaluator that cannot be reached, or a file that cannot be written.
pub async fn save(trainer: &mut Trainer, parent: &Path, info: &RunInfo) -> Result<PathBuf, CheckpointError> {
    let state = trainer
        .save_state()
        .await
        .map_err(|e| CheckpointError::Snapshot { path: parent.to_path_buf(), reason: e.to_string() })?;
    write(trainer, parent, info, state)
}

/// [`save`] after an iteration failed with `failure`
/// ([`Trainer::save_state_after_failure`]): the finished iterations'
/// weights and counters, with evaluators that cannot answer left out. Its
/// metadata says it is no exact resume, and why.
///
/// # Errors
/// As [`save`].
pub async fn save_after_failure(
    trainer: &mut Trainer,
    parent: &Path,
    info: &RunInfo,
    failure: &str,
) -> Result<PathBuf, CheckpointError> {
    let state = trainer
        .save_state_after_failure(failure)
        .await
        .map_err(|e| CheckpointError::Snapshot { path: parent.to_path_buf(), reason: e.to_string() })?;
    write(trainer, parent, info, state)
}

/// Writes `state` and the local policy's weights as a checkpoint of `trainer`.
fn write(trainer: &Trainer, parent: &Path, info: &RunInfo, state: RunState) -> Result<PathBuf, CheckpointError> {
    let last = &state.last;
    let metadata = CheckpointMetadata {
        format_version: FORMAT_VERSION,
        rlx_version: env!("CARGO_PKG_VERSION").to_string(),
        algorithm: info.algorithm.clone(),
        env: info.env.clone(),
        config: info.config.clone(),
        training_iteration: last.training_iteration,
        timesteps_total: last.timesteps_total,
        episode_reward_mean: last.episode_reward_mean,
        time_total_s: last.time_total_s,
        created_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        exact_resume: state.gaps.is_empty(),
        notes: state.gaps.clone(),
    };
    let local = trainer.evaluators().local();
    write_dir(parent, &metadata, local.policy(), &state)
}

/// Writes the three files into a temporary directory, then renames it into
/// place.
fn write_dir(
    parent: &Path,
    metadata: &CheckpointMetadata,
    policy: &dyn PolicyGraph,
    state: &RunState,
) -> Result<PathBuf, CheckpointError> {
    let name = dir_name(metadata.training_iteration);
    let target = parent.join(&name);
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    remove_stale_temporaries(parent)?;
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io_at(&tmp))?;
    }
    fs::create_dir_all(&tmp).map_err(io_at(&tmp))?;
    let weights = tmp.join(WEIGHTS_FILE);
    policy
        .save_weights(&weights)
        .map_err(|e| CheckpointError::Io { path: weights.clone(), source: std::io::Error::other(e.to_string()) })?;
    File::open(&weights).and_then(|f| f.sync_all()).map_err(io_at(&weights))?;
    let bytes = codec::encode_value(state).map_err(|e| CheckpointError::Io {
        path: tmp.join(STATE_FILE),
        source: std::io::Error::other(e.to_string()),
    })?;
    write_synced(&tmp.join(STATE_FILE), &bytes)?;
    let meta = serde_json::to_vec_pretty(metadata).expect("metadata serializes");
    write_synced(&tmp.join(METADATA_FILE), &meta)?;
    let mut sums = String::new();
    for file in CHECKED_FILES {
        let path = tmp.join(file);
        let bytes = fs::read(&path).map_err(io_at(&path))?;
        sums.push_str(&format!("{}  {file}\n", sha256_hex(&bytes)));
    }
    write_synced(&tmp.join(CHECKSUMS_FILE), sums.as_bytes())?;
    // Make the files' directory entries durable before the rename.
    File::open(&tmp).and_then(|d| d.sync_all()).map_err(io_at(&tmp))?;
    if target.exists() {
        fs::remove_dir_all(&target).map_err(io_at(&target))?;
    }
    fs::rename(&tmp, &target).map_err(io_at(&target))?;
    // Make the rename itself durable.
    File::open(parent).and_then(|d| d.sync_all()).map_err(io_at(parent))?;
    Ok(target)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let mut f = File::create(path).map_err(io_at(path))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(io_at(path))
}

/// The complete checkpoints of a run directory (those with a
/// `metadata.json`), newest (highest iteration) first.
pub fn all(run_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(run_dir) else { return Vec::new() };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|p| {
            let iteration = iteration_of(p.file_name()?.to_str()?)?;
            p.join(METADATA_FILE).is_file().then_some((iteration, p))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// The newest complete checkpoint in a run directory, if any.
pub fn latest(run_dir: &Path) -> Option<PathBuf> {
    all(run_dir).into_iter().next()
}

/// The SHA-256 of `bytes` in lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks every file of the checkpoint in `dir` against its `SHA256SUMS`.
/// The file must list exactly the three files, in order, each as 64
/// lowercase hex digits, two spaces and the name, so that a flipped bit in
/// `SHA256SUMS` itself is caught too. Returns `false` if there is no
/// `SHA256SUMS` (a version 1 checkpoint).
///
/// # Errors
/// [`CheckpointError::Corrupt`] naming the file that does not match, or
/// `SHA256SUMS` if it is malformed.
pub fn verify(dir: &Path) -> Result<bool, CheckpointError> {
    let sums_path = dir.join(CHECKSUMS_FILE);
    let text = match fs::read(&sums_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_at(&sums_path)(e)),
    };
    let malformed = |reason: String| CheckpointError::Corrupt { path: sums_path.clone(), reason };
    let text = String::from_utf8(text).map_err(|_| malformed("not UTF-8".into()))?;
    if !text.ends_with('\n') {
        return Err(malformed("does not end with a newline".into()));
    }
    let lines: Vec<&str> = text[..text.len() - 1].split('\n').collect();
    if lines.len() != CHECKED_FILES.len() {
        return Err(malformed(format!("{} lines, expected {}", lines.len(), CHECKED_FILES.len())));
    }
    for (n, (line, file)) in lines.iter().zip(CHECKED_FILES).enumerate() {
        let expected = line
            .strip_suffix(file)
            .and_then(|l| l.strip_suffix("  "))
            .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .ok_or_else(|| {
                malformed(format!("line {}: expected 64 lowercase hex digits, two spaces and `{file}`", n + 1))
            })?;
        let path = dir.join(file);
        let bytes = fs::read(&path).map_err(io_at(&path))?;
        let actual = sha256_hex(&bytes);
        if actual != expected {
            return Err(CheckpointError::Corrupt {
                path,
                reason: format!("SHA-256 {actual} does not match {expected} recorded in {CHECKSUMS_FILE}"),
            });
        }
    }
    Ok(true)
}

impl Checkpoint {
    /// Reads a checkpoint directory, or the newest checkpoint of a run
    /// directory. A checkpoint that fails verification or cannot be read
    /// is passed over for the newest older checkpoint of the same run that
    /// loads; [`warnings`](Self::warnings) names each one passed over and
    /// why.
    ///
    /// # Errors
    /// A missing directory, or no loadable checkpoint: the error of the
    /// one asked for (or the newest), naming the file and the problem.
    pub fn load(path: &Path) -> Result<Self, CheckpointError> {
        if !path.is_dir() {
            let reason = if path.exists() { "not a directory" } else { "no such directory" };
            return Err(CheckpointError::NotACheckpoint { path: path.to_path_buf(), reason: reason.into() });
        }
        let (first, run_dir) = if path.join(METADATA_FILE).exists() {
            (path.to_path_buf(), path.parent().map(Path::to_path_buf))
        } else {
            let newest = latest(path).ok_or_else(|| CheckpointError::NotACheckpoint {
                path: path.to_path_buf(),
                reason: format!("no {METADATA_FILE} here, and no checkpoint_* directory with one"),
            })?;
            (newest, Some(path.to_path_buf()))
        };
        let error = match Self::load_dir(&first) {
            Ok(checkpoint) => return Ok(checkpoint),
            Err(e @ (CheckpointError::Corrupt { .. } | CheckpointError::Io { .. })) => e,
            Err(e) => return Err(e),
        };
        // Fall back to the newest older checkpoint of the run that loads
        // (only within a run: a directory not named `checkpoint_<n>` has
        // no place among its neighbours).
        let Some(below) = first.file_name().and_then(|n| n.to_str()).and_then(iteration_of) else {
            return Err(error);
        };
        let older = run_dir.map(|d| all(&d)).unwrap_or_default();
        let mut warnings = vec![format!("{error}; passed over")];
        for candidate in older {
            let iteration = candidate.file_name().and_then(|n| n.to_str()).and_then(iteration_of);
            if iteration.is_none_or(|i| i >= below) {
                continue;
            }
            match Self::load_dir(&candidate) {
                Ok(mut checkpoint) => {
                    warnings.push(format!("restoring the previous good checkpoint, {}", candidate.display()));
                    warnings.append(&mut checkpoint.warnings);
                    checkpoint.warnings = warnings;
                    return Ok(checkpoint);
                }
                Err(e) => warnings.push(format!("{e}; passed over")),
            }
        }
        Err(error)
    }

    /// Reads one checkpoint directory: verifies its files, then parses them.
    fn load_dir(dir: &Path) -> Result<Self, CheckpointError> {
        let verified = verify(dir)?;
        let meta_path = dir.join(METADATA_FILE);
        let metadata = fs::read(&meta_path).map_err(io_at(&meta_path))?;
        let state_path = dir.join(STATE_FILE);
        let state = match fs::read(&state_path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_at(&state_path)(e)),
        };
        let checkpoint = Self::parse(dir, &metadata, state.as_deref(), verified)?;
        let weights = dir.join(WEIGHTS_FILE);
        if !weights.is_file() {
            return Err(CheckpointError::Corrupt { path: weights, reason: "missing".into() });
        }
        Ok(checkpoint)
    }

    /// Parses the bytes of a checkpoint's `metadata.json` and `state.bin`
    /// (`None`: missing; `verified`: whether they matched a `SHA256SUMS`).
    /// Never panics on bad bytes: every failure is an error naming the
    /// file. The format version is checked first, so a newer layout says
    /// so rather than failing on what it changed.
    ///
    /// # Errors
    /// A damaged file, another format version, or a version 2 checkpoint
    /// that was not verified.
    pub fn parse(dir: &Path, metadata: &[u8], state: Option<&[u8]>, verified: bool) -> Result<Self, CheckpointError> {
        let meta_path = dir.join(METADATA_FILE);
        // Read the version first, so a newer layout says so instead of
        // failing on a missing field.
        let version: Value = serde_json::from_slice(metadata)
            .map_err(|e| CheckpointError::Corrupt { path: meta_path.clone(), reason: format!("not JSON: {e}") })?;
        let mut warnings = Vec::new();
        match version.get("format_version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(FORMAT_VERSION) && !verified => {
                return Err(CheckpointError::Corrupt {
                    path: dir.join(CHECKSUMS_FILE),
                    reason: format!("missing: a version {FORMAT_VERSION} checkpoint is verified against it"),
                })
            }
            Some(v) if (u64::from(OLDEST_READABLE_VERSION)..=u64::from(FORMAT_VERSION)).contains(&v) && verified => {}
            Some(1) => warnings.push(format!(
                "{}: written before checkpoints had checksums (format version 1): loaded without verifying",
                dir.display()
            )),
            Some(v) => {
                return Err(CheckpointError::Version { path: meta_path, found: v.min(u64::from(u32::MAX)) as u32 })
            }
            None => {
                return Err(CheckpointError::Corrupt { path: meta_path, reason: "no `format_version` field".into() })
            }
        }
        let metadata: CheckpointMetadata = serde_json::from_value(version)
            .map_err(|e| CheckpointError::Corrupt { path: meta_path.clone(), reason: e.to_string() })?;
        let state_path = dir.join(STATE_FILE);
        let state =
            state.ok_or_else(|| CheckpointError::Corrupt { path: state_path.clone(), reason: "missing".into() })?;
        let state: RunState = codec::decode_value(state)
            .map_err(|e| CheckpointError::Corrupt { path: state_path, reason: e.to_string() })?;
        Ok(Self { dir: dir.to_path_buf(), metadata, state, warnings })
    }

    /// The weights file.
    pub fn weights_path(&self) -> PathBuf {
        self.dir.join(WEIGHTS_FILE)
    }

    /// Checks that the checkpoint is of `algorithm` on `env`.
    ///
    /// # Errors
    /// [`CheckpointError::Mismatch`] naming both.
    pub fn check_matches(&self, algorithm: &str, env: &str) -> Result<(), CheckpointError> {
        if self.metadata.algorithm == algorithm && self.metadata.env == env {
            return Ok(());
        }
        Err(CheckpointError::Mismatch {
            path: self.dir.clone(),
            found_algorithm: self.metadata.algorithm.clone(),
            found_env: self.metadata.env.clone(),
            algorithm: algorithm.to_string(),
            env: env.to_string(),
        })
    }

    /// Loads the weights into `policy`.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] naming the weights file if it is not a
    /// readable weights file; [`CheckpointError::Restore`] if it is, but
    /// its tensors do not fit `policy`'s network (a run restored with
    /// another model config, e.g. `num_atoms` or `fcnet_hiddens`).
    pub fn load_weights(&self, policy: &mut dyn PolicyGraph) -> Result<(), CheckpointError> {
        let path = self.weights_path();
        crate::weights_file::read_safetensors(&path)
            .map_err(|e| CheckpointError::Corrupt { path: path.clone(), reason: e.to_string() })?;
        policy.load_weights(&path).map_err(|e| CheckpointError::Restore {
            path: self.dir.clone(),
            reason: format!(
                "its weights do not fit the network built for this run (another model config than the \
                 one it was saved with?): {e}"
            ),
        })
    }

    /// Restores this checkpoint into `trainer`, built with the checkpoint's
    /// config: the learner's weights (sent on to every worker), each
    /// evaluator's state and the trainer's counters. Returns what could
    /// not be restored exactly, in words (empty for an exact resume).
    ///
    /// # Errors
    /// A damaged weights file, or an evaluator that rejects its state.
    pub async fn restore(&self, trainer: &mut Trainer) -> Result<Vec<String>, CheckpointError> {
        let restore_err =
            |e: &dyn std::fmt::Display| CheckpointError::Restore { path: self.dir.clone(), reason: e.to_string() };
        self.load_weights(trainer.evaluators_mut().local_mut().policy_mut())?;
        let weights = Arc::new(trainer.evaluators().local().policy().get_weights());
        trainer.restore_weights(weights).await.map_err(|e| restore_err(&e))?;
        trainer.load_state(&self.state).await.map_err(|e| restore_err(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rlx-ckpt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn load_names_the_problem() {
        let dir = tmp("load");
        let err = Checkpoint::load(&dir.join("nope")).unwrap_err().to_string();
        assert!(err.contains("no such directory"), "{err}");
        let err = Checkpoint::load(&dir).unwrap_err().to_string();
        assert!(err.contains("no metadata.json"), "{err}");
        fs::write(dir.join(METADATA_FILE), b"{\"format_version\": 99}").unwrap();
        let err = Checkpoint::load(&dir).unwrap_err().to_string();
        assert!(err.contains("format version 99"), "{err}");
        fs::write(dir.join(METADATA_FILE), b"{not json").unwrap();
        let err = Checkpoint::load(&dir).unwrap_err().to_string();
        assert!(err.contains("metadata.json") && err.contains("not JSON"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }

    /// `SHA256SUMS` is read strictly: uppercase hex (one flipped bit away
    /// from lowercase), a missing line or a renamed file are errors.
    #[test]
    fn checksums_are_read_strictly() {
        let dir = tmp("sums");
        for (file, body) in CHECKED_FILES.iter().zip([&b"{}"[..], b"weights", b"state"]) {
            fs::write(dir.join(file), body).unwrap();
        }
        let sums: String =
            CHECKED_FILES.iter().map(|f| format!("{}  {f}\n", sha256_hex(&fs::read(dir.join(f)).unwrap()))).collect();
        fs::write(dir.join(CHECKSUMS_FILE), &sums).unwrap();
        assert!(verify(&dir).unwrap());
        for bad in [sums.to_uppercase(), sums.replacen("state.bin", "state.bim", 1), sums[..sums.len() - 1].to_string()]
        {
            fs::write(dir.join(CHECKSUMS_FILE), bad).unwrap();
            let err = verify(&dir).unwrap_err().to_string();
            assert!(err.contains(CHECKSUMS_FILE), "{err}");
        }
        fs::write(dir.join(CHECKSUMS_FILE), &sums).unwrap();
        fs::write(dir.join(STATE_FILE), b"stale").unwrap();
        let err = verify(&dir).unwrap_err().to_string();
        assert!(err.contains("state.bin") && err.contains("does not match"), "{err}");
        fs::remove_file(dir.join(CHECKSUMS_FILE)).unwrap();
        assert!(!verify(&dir).unwrap(), "a version 1 checkpoint has none");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stale_temporaries_go_and_this_process_s_stay() {
        let dir = tmp("stale");
        let stale = dir.join(".checkpoint_000003.tmp-4194303");
        let own = dir.join(format!(".checkpoint_000004.tmp-{}", std::process::id()));
        let other = dir.join("checkpoint_000002");
        for d in [&stale, &own, &other] {
            fs::create_dir_all(d).unwrap();
        }
        assert_eq!(remove_stale_temporaries(&dir).unwrap(), vec![stale.clone()]);
        assert!(!stale.exists() && own.exists() && other.exists());
        assert_eq!(iteration_of("checkpoint_1000000"), Some(1_000_000));
        assert_eq!(iteration_of("checkpoint_"), None);
        assert_eq!(iteration_of("checkpoint_12a"), None);
        fs::remove_dir_all(dir).unwrap();
    }
}
