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
//!
//! It is written into a hidden temporary directory that is renamed into
//! place only once every file is on disk, so a run killed mid-write leaves
//! the previous checkpoint intact and never a half one. Loading checks the
//! format version and names the file and the problem on any failure.
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
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The version of the checkpoint layout this rlx writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The metadata file's name.
pub const METADATA_FILE: &str = "metadata.json";
/// The weights file's name.
pub const WEIGHTS_FILE: &str = "policy.safetensors";
/// The run state file's name.
pub const STATE_FILE: &str = "state.bin";

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
    #[error("{}: checkpoint format version {found}, but this rlx reads version {FORMAT_VERSION}", path.display())]
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
}

/// The directory name of the checkpoint after `iteration`.
pub fn dir_name(iteration: u64) -> String {
    format!("checkpoint_{iteration:06}")
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
    let local = trainer.optimizer().evaluators().local();
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

/// The newest complete checkpoint in a run directory, if any.
pub fn latest(run_dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(run_dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("checkpoint_"))
                && p.join(METADATA_FILE).is_file()
        })
        .collect();
    found.sort();
    found.pop()
}

impl Checkpoint {
    /// Reads a checkpoint directory, or the newest checkpoint of a run
    /// directory.
    ///
    /// # Errors
    /// A missing directory or file, a corrupt file, or another format
    /// version; the error names the file.
    pub fn load(path: &Path) -> Result<Self, CheckpointError> {
        if !path.is_dir() {
            let reason = if path.exists() { "not a directory" } else { "no such directory" };
            return Err(CheckpointError::NotACheckpoint { path: path.to_path_buf(), reason: reason.into() });
        }
        let dir = if path.join(METADATA_FILE).exists() {
            path.to_path_buf()
        } else {
            latest(path).ok_or_else(|| CheckpointError::NotACheckpoint {
                path: path.to_path_buf(),
                reason: format!("no {METADATA_FILE} here, and no checkpoint_* directory with one"),
            })?
        };
        let meta_path = dir.join(METADATA_FILE);
        let text = fs::read(&meta_path).map_err(io_at(&meta_path))?;
        // Read the version first, so a newer layout says so instead of
        // failing on a missing field.
        let version: Value = serde_json::from_slice(&text)
            .map_err(|e| CheckpointError::Corrupt { path: meta_path.clone(), reason: format!("not JSON: {e}") })?;
        match version.get("format_version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => return Err(CheckpointError::Version { path: meta_path, found: v as u32 }),
            None => {
                return Err(CheckpointError::Corrupt { path: meta_path, reason: "no `format_version` field".into() })
            }
        }
        let metadata: CheckpointMetadata = serde_json::from_value(version)
            .map_err(|e| CheckpointError::Corrupt { path: meta_path.clone(), reason: e.to_string() })?;
        let state_path = dir.join(STATE_FILE);
        let bytes = fs::read(&state_path).map_err(io_at(&state_path))?;
        let state: RunState = codec::decode_value(&bytes)
            .map_err(|e| CheckpointError::Corrupt { path: state_path.clone(), reason: e.to_string() })?;
        let weights = dir.join(WEIGHTS_FILE);
        if !weights.is_file() {
            return Err(CheckpointError::Corrupt { path: weights, reason: "missing".into() });
        }
        Ok(Self { dir, metadata, state })
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
    /// [`CheckpointError::Corrupt`] naming the weights file.
    pub fn load_weights(&self, policy: &mut dyn PolicyGraph) -> Result<(), CheckpointError> {
        let path = self.weights_path();
        policy.load_weights(&path).map_err(|e| CheckpointError::Corrupt { path, reason: e.to_string() })
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
        let optimizer = trainer.optimizer_mut();
        self.load_weights(optimizer.evaluators_mut().local_mut().policy_mut())?;
        let weights = Arc::new(optimizer.evaluators().local().policy().get_weights());
        optimizer.restore_weights(weights).await.map_err(|e| restore_err(&e))?;
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
}
