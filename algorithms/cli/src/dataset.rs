//! `rlx dataset info <path>`: what a dataset of experience files holds.

use rlx::experience::{ExperienceError, ExperienceReader, InputSpec};
use rlx::fields;

/// The counts and return statistics of a dataset's episodes.
#[derive(Debug, Default, PartialEq)]
pub struct DatasetSummary {
    /// Finished episode files.
    pub files: usize,
    /// Lines: episodes, or pieces of episodes cut at the end of a run.
    pub episodes: usize,
    /// Of those, the episodes that ended (terminated or truncated).
    pub complete: usize,
    /// Rows: env steps.
    pub steps: u64,
    /// Returns of the complete episodes.
    pub returns: Vec<f64>,
}

/// Reads every episode of `spec`.
///
/// # Errors
/// As [`ExperienceReader::open`] and its episodes: the first bad file or line.
pub fn summarize(reader: &ExperienceReader) -> Result<DatasetSummary, ExperienceError> {
    let mut s = DatasetSummary { files: reader.files().len(), ..DatasetSummary::default() };
    for episode in reader.episodes() {
        let batch = episode?.batch;
        s.episodes += 1;
        s.steps += batch.len() as u64;
        let last = |field| batch.f32(field).ok().and_then(|v| v.last().copied()).is_some_and(|x| x != 0.0);
        if last(fields::TERMINATEDS) || last(fields::TRUNCATEDS) {
            s.complete += 1;
            s.returns.push(batch.f32(fields::REWARDS).map_or(0.0, |r| r.iter().map(|&x| f64::from(x)).sum()));
        }
    }
    Ok(s)
}

/// Prints `rlx dataset info`.
///
/// # Errors
/// A dataset that cannot be opened or read.
pub fn print_info(paths: &[String]) -> Result<(), ExperienceError> {
    let spec = InputSpec::Many(paths.to_vec());
    let reader = ExperienceReader::open(&spec)?;
    for p in reader.partial_files() {
        errln!("warning: {} left out: its writer did not finish it", p.display());
    }
    let info = reader.info();
    let s = summarize(&reader)?;
    outln!("observation space: {}", info.observation_space);
    outln!("action space:      {}", info.action_space);
    let columns: Vec<String> =
        info.columns.iter().map(|(k, c)| format!("{k} ({:?} x {})", c.dtype, c.width).to_lowercase()).collect();
    outln!("columns:           {}", columns.join(", "));
    outln!("files:             {} ({} partial left out)", s.files, reader.partial_files().len());
    outln!(
        "episodes:          {} ({} complete, {} cut at the end of a run)",
        s.episodes,
        s.complete,
        s.episodes - s.complete
    );
    outln!("steps:             {}", s.steps);
    if s.returns.is_empty() {
        outln!("returns:           no complete episode");
    } else {
        let n = s.returns.len() as f64;
        let mean = s.returns.iter().sum::<f64>() / n;
        let std = (s.returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        let min = s.returns.iter().copied().fold(f64::INFINITY, f64::min);
        let max = s.returns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        outln!(
            "returns:           mean {mean:.2}, std {std:.2}, min {min:.2}, max {max:.2} over {} episodes",
            s.returns.len()
        );
    }
    Ok(())
}
