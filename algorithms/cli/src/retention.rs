//! Which checkpoints of a run to keep, and which is best
//! (`keep_checkpoints_num`, `checkpoint_score_attr`, as in RLlib's
//! experiment files).
//!
//! A checkpoint's score is the metric's latest value in `result.json` at or
//! before the checkpoint's iteration: a checkpoint written between two
//! evaluations is scored by the last one. The scores are computed from the
//! run's files each time, so nothing about them needs saving, and a
//! resumed run or `rlx rollout --pick best` sees the same ranking.

use rlx::checkpoint;
use rlx::config::{closest, ConfigError};
use rlx::evaluation::EvaluationResult;
use rlx::TrainResult;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};

/// The metric checkpoints are ranked by: a path in `result.json`
/// (`evaluation/episode_reward_mean`, `learner/total_loss`), higher is
/// better, or lower with RLlib's `min-` prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreAttr {
    /// The metric's path, `/`-separated.
    pub metric: String,
    /// Lower is better.
    pub minimize: bool,
}

impl ScoreAttr {
    /// The default: the newest checkpoints are the best.
    pub fn newest() -> Self {
        Self { metric: "training_iteration".into(), minimize: false }
    }

    /// Parses `checkpoint_score_attr`, checking that `result.json` has such
    /// a metric.
    ///
    /// # Errors
    /// A metric `result.json` does not have, naming the closest one.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let (metric, minimize) = match text.strip_prefix("min-") {
            Some(rest) => (rest, true),
            None => (text, false),
        };
        let known = known_metrics();
        let learner_statistic = metric.strip_prefix("learner/").is_some_and(|s| !s.is_empty());
        if !learner_statistic && !known.iter().any(|k| k == metric) {
            return Err(ConfigError::Invalid {
                key: "checkpoint_score_attr".into(),
                message: format!(
                    "`{metric}` is not a metric of result.json{}; numeric metrics: {}, learner/<statistic>",
                    closest(metric, known.iter().map(String::as_str))
                        .map(|c| format!(" (did you mean `{c}`?)"))
                        .unwrap_or_default(),
                    known.join(", ")
                ),
            });
        }
        Ok(Self { metric: metric.to_string(), minimize })
    }

    /// The metric's value in one line of `result.json`.
    pub(crate) fn value(&self, result: &Value) -> Option<f64> {
        self.metric.split('/').try_fold(result, |v, key| v.get(key))?.as_f64()
    }

    /// Whether `a` is a better score than `b` (a missing score is worst).
    fn better(&self, a: Option<f64>, b: Option<f64>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) if self.minimize => a < b,
            (Some(a), Some(b)) => a > b,
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// The numeric metrics of `result.json` (the learner's statistics aside,
/// which depend on the algorithm).
fn known_metrics() -> Vec<String> {
    let sample = TrainResult {
        episode_reward_mean: Some(0.0),
        episode_reward_min: Some(0.0),
        episode_reward_max: Some(0.0),
        episode_len_mean: Some(0.0),
        evaluation: Some(EvaluationResult::default()),
        ..Default::default()
    };
    let mut out = Vec::new();
    let json = serde_json::to_value(sample).expect("results serialize");
    for (key, value) in json.as_object().expect("an object") {
        match value {
            Value::Number(_) => out.push(key.clone()),
            Value::Object(inner) if key == "evaluation" => {
                out.extend(inner.keys().map(|k| format!("{key}/{k}")));
            }
            _ => {}
        }
    }
    out
}

/// The run's checkpoints with their scores, best first (ties: newer first).
///
/// # Errors
/// A `result.json` that cannot be read.
pub fn ranked(run_dir: &Path, attr: &ScoreAttr) -> io::Result<Vec<(PathBuf, Option<f64>)>> {
    let results = read_lines(&run_dir.join("result.json"))?;
    // all() lists newest first; a stable sort keeps that order among ties.
    let mut scored: Vec<(PathBuf, Option<f64>)> = checkpoint::all(run_dir)
        .into_iter()
        .map(|path| {
            let iteration = path.file_name().and_then(|n| n.to_str()).and_then(checkpoint::iteration_of).unwrap_or(0);
            let score = results
                .iter()
                .filter(|r| r.get("training_iteration").and_then(Value::as_u64).is_some_and(|i| i <= iteration))
                .filter_map(|r| attr.value(r))
                .next_back();
            (path, score)
        })
        .collect();
    scored.sort_by(|a, b| match (attr.better(a.1, b.1), attr.better(b.1, a.1)) {
        (true, _) => std::cmp::Ordering::Less,
        (_, true) => std::cmp::Ordering::Greater,
        _ => std::cmp::Ordering::Equal,
    });
    Ok(scored)
}

/// Removes every checkpoint of `run_dir` but the best `keep` by `attr` and
/// the newest. Returns the ones removed.
///
/// # Errors
/// A `result.json` that cannot be read, or a checkpoint that cannot be
/// removed.
pub fn prune(run_dir: &Path, keep: usize, attr: &ScoreAttr) -> io::Result<Vec<PathBuf>> {
    let newest = checkpoint::latest(run_dir);
    let mut removed = Vec::new();
    for (path, _) in ranked(run_dir, attr)?.into_iter().skip(keep) {
        if Some(&path) != newest.as_ref() {
            std::fs::remove_dir_all(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// The best checkpoint of a run directory by the `checkpoint_score_attr`
/// its `params.json` names (the newest when it names none or there is
/// none).
///
/// # Errors
/// Unreadable `params.json` or `result.json`, or a run without checkpoints.
pub fn best(run_dir: &Path) -> io::Result<PathBuf> {
    let params_path = run_dir.join("params.json");
    let params: Value = match std::fs::read(&params_path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", params_path.display())))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Value::Null,
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", params_path.display()))),
    };
    let attr = match params.get("checkpoint_score_attr").and_then(Value::as_str) {
        Some(text) => ScoreAttr::parse(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?,
        None => ScoreAttr::newest(),
    };
    ranked(run_dir, &attr)?
        .into_iter()
        .next()
        .map(|(p, _)| p)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{} has no checkpoints", run_dir.display())))
}

/// The lines of `result.json` that parse (a torn last line does not); none
/// for a run without one.
pub(crate) fn read_lines(path: &Path) -> io::Result<Vec<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_dir(name: &str, scores: &[(u64, Option<f64>)], checkpoints: &[u64]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rlx-retention-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lines: Vec<String> = scores
            .iter()
            .map(|(i, s)| {
                let mut r = json!({"training_iteration": i, "episode_reward_mean": *i as f64});
                if let Some(s) = s {
                    r["evaluation"] = json!({"episode_reward_mean": s});
                }
                r.to_string()
            })
            .collect();
        std::fs::write(dir.join("result.json"), lines.join("\n") + "\n").unwrap();
        for i in checkpoints {
            let c = dir.join(checkpoint::dir_name(*i));
            std::fs::create_dir_all(&c).unwrap();
            std::fs::write(c.join("metadata.json"), "{}").unwrap();
        }
        dir
    }

    fn names(paths: &[PathBuf]) -> Vec<u64> {
        paths.iter().filter_map(|p| checkpoint::iteration_of(p.file_name()?.to_str()?)).collect()
    }

    #[test]
    fn keeps_exactly_the_best_n_and_the_newest() {
        // Evaluations at 2, 4, 6, 8, 10; checkpoints at every even iteration.
        let evals = [(2, 50.0), (4, 300.0), (6, 120.0), (8, 480.0), (10, 90.0)];
        let scores: Vec<(u64, Option<f64>)> =
            (1..=10).map(|i| (i, evals.iter().find(|e| e.0 == i).map(|e| e.1))).collect();
        let dir = run_dir("best", &scores, &[2, 4, 6, 8, 10]);
        let attr = ScoreAttr::parse("evaluation/episode_reward_mean").unwrap();
        let removed = prune(&dir, 2, &attr).unwrap();
        assert_eq!(names(&removed), vec![6, 2]);
        assert_eq!(names(&checkpoint::all(&dir)), vec![10, 8, 4], "the best two (8, 4) and the newest (10)");
        std::fs::write(dir.join("params.json"), r#"{"checkpoint_score_attr": "evaluation/episode_reward_mean"}"#)
            .unwrap();
        assert_eq!(names(&[best(&dir).unwrap()]), vec![8]);
        // Lower is better with min-: 10 (90), then 4 (300), then 8 (480).
        let attr = ScoreAttr::parse("min-evaluation/episode_reward_mean").unwrap();
        assert_eq!(names(&prune(&dir, 1, &attr).unwrap()), vec![4, 8]);
        assert_eq!(names(&checkpoint::all(&dir)), vec![10]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_checkpoint_between_evaluations_takes_the_last_one_and_the_default_keeps_the_newest() {
        let dir = run_dir("between", &[(1, Some(10.0)), (2, None), (3, Some(5.0)), (4, None)], &[2, 4]);
        let attr = ScoreAttr::parse("evaluation/episode_reward_mean").unwrap();
        let ranked: Vec<(u64, Option<f64>)> = ranked(&dir, &attr)
            .unwrap()
            .into_iter()
            .map(|(p, s)| (checkpoint::iteration_of(p.file_name().unwrap().to_str().unwrap()).unwrap(), s))
            .collect();
        assert_eq!(ranked, vec![(2, Some(10.0)), (4, Some(5.0))]);
        assert_eq!(names(&prune(&dir, 1, &ScoreAttr::newest()).unwrap()), vec![2]);
        assert_eq!(best(&dir).unwrap(), dir.join(checkpoint::dir_name(4)), "no params.json: the newest");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unknown_metric_is_named() {
        let err = ScoreAttr::parse("evaluation/episode_reward_maen").unwrap_err().to_string();
        assert!(err.contains("did you mean `evaluation/episode_reward_mean`"), "{err}");
        assert!(ScoreAttr::parse("learner/total_loss").is_ok());
        assert!(ScoreAttr::parse("min-time_total_s").unwrap().minimize);
    }
}
