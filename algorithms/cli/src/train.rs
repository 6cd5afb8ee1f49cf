//! `rlx train`: builds the trainer, restores a checkpoint, and trains until
//! a stop criterion, writing results and checkpoints as it goes.

use crate::experiment::{experiments, Experiment};
use crate::progress::Progress;
use crate::results::{read_history, ResultsWriter};
use crate::retention::{self, ScoreAttr};
use crate::{arg_error, build_deployed_trainer, CliError, TrainArgs};
use rlx::checkpoint::{self, Checkpoint, RunInfo};
use rlx::config::{deep_merge, from_value};
use rlx::{StopCriteria, TrainResult};
use rlx_algorithms::BuildError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// How a `rlx train` run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The last iteration's result.
    pub result: TrainResult,
    /// The run's results directory.
    pub dir: PathBuf,
    /// The last checkpoint written, if any.
    pub checkpoint: Option<PathBuf>,
    /// Whether Ctrl-C stopped it.
    pub interrupted: bool,
}

/// Ctrl-Cs received so far. The first asks `rlx train` to stop after its
/// iteration with a checkpoint; a second exits at once (finished
/// iterations are on disk), unless `second_exits` is false (`rlx tune`,
/// which must stop its trials itself before it exits). The handler is
/// installed by the first call, which `rlx train` makes before building
/// anything, so that an early Ctrl-C is counted, not fatal.
pub(crate) fn interrupts(second_exits: bool) -> Arc<AtomicUsize> {
    static COUNT: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    static SECOND_EXITS: AtomicBool = AtomicBool::new(true);
    SECOND_EXITS.store(second_exits, Ordering::SeqCst);
    COUNT
        .get_or_init(|| {
            let count = Arc::new(AtomicUsize::new(0));
            let c = count.clone();
            tokio::spawn(async move {
                while tokio::signal::ctrl_c().await.is_ok() {
                    let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                    // Waits with no end of their own (an external env with
                    // no client yet) give up now.
                    rlx::interrupt::request();
                    if !SECOND_EXITS.load(Ordering::SeqCst) {
                        continue;
                    }
                    if n >= 2 {
                        errln!("\nsecond Ctrl-C: exiting now (finished iterations are already on disk)");
                        std::process::exit(130);
                    }
                    errln!(
                        "\nCtrl-C: stopping after this iteration and writing a final checkpoint (Ctrl-C again to quit now)"
                    );
                }
            });
            count
        })
        .clone()
}

/// Runs `rlx train`: resolves the experiments, then trains each in turn.
/// Returns how the last one ended.
///
/// # Errors
/// Bad arguments, build failures, training failures, or unwritable results.
pub async fn train(run: Option<&str>, args: &TrainArgs) -> Result<Outcome, CliError> {
    interrupts(true);
    let restored = args.restore.as_deref().map(Checkpoint::load).transpose()?;
    if let Some(ckpt) = &restored {
        ckpt.warnings.iter().for_each(|w| errln!("warning: {w}"));
        if let Some(run_dir) = ckpt.dir.parent() {
            for stale in checkpoint::remove_stale_temporaries(run_dir)? {
                errln!("removed {}, left by a run killed while checkpointing", stale.display());
            }
        }
    }
    let experiments = experiments(run, args, restored.as_ref())?;
    if restored.is_some() && experiments.len() > 1 {
        return Err(CliError::Usage("--restore resumes one run; the experiment file has several".into()));
    }
    let mut last = None;
    for exp in &experiments {
        let outcome = train_experiment(exp, args, restored.as_ref()).await?;
        let interrupted = outcome.interrupted;
        last = Some(outcome);
        if interrupted {
            break;
        }
    }
    Ok(last.expect("experiments() returns at least one"))
}

async fn train_experiment(
    exp: &Experiment,
    args: &TrainArgs,
    restored: Option<&Checkpoint>,
) -> Result<Outcome, CliError> {
    let stop: StopCriteria = match &exp.stop {
        Value::Null => {
            let kwargs = exp.config.get("env_config").cloned().unwrap_or(Value::Null);
            // An external env's clients decide what an episode is worth:
            // it has no threshold of its own, so it trains until --stop or Ctrl-C.
            let threshold = if exp.env.starts_with(rlx_cluster::external::PREFIX) {
                None
            } else {
                rlx_envs::reward_threshold(&exp.env, &kwargs).map_err(BuildError::from)?
            };
            if exp.config.get("input").is_some_and(|i| !i.is_null()) {
                // A run from files plays no episodes of its own: only its
                // evaluations can reach the threshold.
                StopCriteria { evaluation_reward_mean: threshold, ..Default::default() }
            } else {
                StopCriteria { episode_reward_mean: threshold, ..Default::default() }
            }
        }
        v => from_value(v.clone()).map_err(|source| arg_error(exp.stop_source(), source))?,
    };
    let mut overrides = exp.config.clone();
    if let Some(ckpt) = restored {
        ckpt.check_matches(&exp.run, &exp.env)?;
        // The checkpoint's config, with what the user changes on top.
        let mut config = ckpt.metadata.config.clone();
        deep_merge(&mut config, &overrides);
        overrides = config;
    }
    let (mut trainer, config) = build_deployed_trainer(&exp.run, &exp.env, &overrides).await.map_err(|e| match e {
        BuildError::Config(source) => {
            // Named where it was given: a flag, the file, or the restored
            // checkpoint's config; a key given nowhere (one that is
            // missing) names no source.
            let given = config_key(&source).and_then(|key| exp.config_source(key));
            match (given, restored) {
                (Some(from), _) => arg_error(from, source),
                (None, Some(ckpt)) => arg_error(format!("the config of {}", ckpt.dir.display()), source),
                (None, None) => CliError::Build(BuildError::Config(source)),
            }
        }
        other => CliError::Build(other),
    })?;
    let evaluates = config.get("evaluation_interval").and_then(Value::as_u64).is_some_and(|i| i > 0);
    if stop.evaluation_reward_mean.is_some() && !evaluates {
        if exp.stop.is_null() {
            return Err(CliError::Usage(format!(
                "{} learns from `input` and plays no episodes of its own, so no return stops it: give --stop \
                 (e.g. '{{\"training_iteration\": 200}}') or `evaluation_interval` (its evaluations then stop \
                 the run at the env's reward threshold)",
                exp.run
            )));
        }
        return Err(CliError::Usage(
            "--stop evaluation/episode_reward_mean needs evaluation: set evaluation_interval in the config".into(),
        ));
    }
    let info = RunInfo { algorithm: exp.run.clone(), env: exp.env.clone(), config: config.clone() };
    // Restore, and read the history up to the checkpoint, before creating
    // the run directory, so a bad checkpoint or history leaves nothing behind.
    let mut history = Vec::new();
    if let Some(ckpt) = restored {
        for gap in ckpt.restore(&mut trainer).await? {
            errln!("warning: not an exact resume: {gap}");
        }
        history = restored_history(ckpt)?;
    }
    let dir = new_run_dir(&args.results_dir, &format!("{}_{}", exp.run, exp.env.replace(['/', ':'], "-")))?;
    let params = json!({
        "run": exp.run, "env": exp.env, "config": config, "stop": stop,
        "experiment": exp.name, "restored_from": restored.map(|c| c.dir.display().to_string()),
        "keep_checkpoints_num": exp.keep_checkpoints_num, "checkpoint_score_attr": exp.checkpoint_score_attr,
    });
    let score_attr = match &exp.checkpoint_score_attr {
        Some(text) => ScoreAttr::parse(text).map_err(|e| arg_error("checkpoint_score_attr", e))?,
        None => ScoreAttr::newest(),
    };
    let mut writer = ResultsWriter::create(&dir, &params)?;
    if let Some(evaluation) = trainer.evaluation_mut() {
        evaluation.record_videos_into(dir.join("videos"));
    }
    if evaluates {
        writer = writer.with_evaluation_columns();
    }
    // Carry the history up to the checkpoint over, so this run's
    // result.json, progress.csv and plot tell the whole story.
    for r in &history {
        writer.append(r)?;
    }
    if let Some(ckpt) = restored {
        errln!("restored {} at iteration {}", ckpt.dir.display(), ckpt.metadata.training_iteration);
    }
    if stop.is_empty() {
        // Given (`--stop` or the file's `stop`), even as an empty map.
        if !exp.stop.is_null() {
            errln!("{} gives no criterion: training until interrupted (Ctrl-C)", exp.stop_source());
        } else {
            errln!("no --stop criteria and the env has no reward threshold: training until interrupted (Ctrl-C)");
        }
    }
    errln!("{} on {}: results in {}", exp.run, exp.env, dir.display());
    let interrupted = interrupts(true);
    let mut progress = Progress::new(&stop, trainer.last_result());
    let mut last_checkpoint = None;
    // The iteration of `last_checkpoint`.
    let mut checkpointed = None;
    loop {
        let result = match trainer.train().await {
            Ok(r) => r,
            Err(source) => {
                // A stop the Ctrl-C itself caused (a wait it broke off),
                // not a failure that happened to follow one.
                let was_interrupted =
                    interrupted.load(Ordering::SeqCst) > 0 && source.to_string().contains(rlx::interrupt::STOPPED);
                progress.abandon();
                if let Err(e) = trainer.finish_output().await {
                    errln!("warning: output: {e}");
                }
                writer.finish()?;
                // The trainer still holds the last finished iteration's
                // state: keep it, so the run can resume from there, unless
                // a checkpoint of that iteration is already on disk.
                let iteration = trainer.last_result().training_iteration;
                let checkpoint = if iteration == 0 || checkpointed == Some(iteration) {
                    last_checkpoint
                } else {
                    match checkpoint::save_after_failure(&mut trainer, &dir, &info, &source.to_string()).await {
                        Ok(path) => Some(path),
                        Err(e) => {
                            errln!("warning: no final checkpoint: {e}");
                            last_checkpoint
                        }
                    }
                };
                if was_interrupted {
                    // Ctrl-C broke a wait of this iteration off: a stop, not a failure.
                    errln!("stopped: {source}");
                    let result = trainer.last_result().clone();
                    return Ok(Outcome { result, dir, checkpoint, interrupted: true });
                }
                return Err(CliError::Train { source: Box::new(source), dir, checkpoint });
            }
        };
        writer.append(&result)?;
        progress.report(&result);
        let stopping = stop.should_stop(&result);
        let was_interrupted = interrupted.load(Ordering::SeqCst) > 0;
        let periodic = exp.checkpoint_freq > 0 && result.training_iteration % exp.checkpoint_freq == 0;
        if periodic || was_interrupted || (stopping && exp.checkpoint_at_end) {
            // The results' lines reach the disk before the checkpoint that
            // holds their iterations.
            writer.sync()?;
            let path = checkpoint::save(&mut trainer, &dir, &info).await?;
            progress.note(&format!("checkpoint: {}", path.display()));
            last_checkpoint = Some(path);
            checkpointed = Some(result.training_iteration);
            if let Some(keep) = exp.keep_checkpoints_num {
                // result.json already holds this iteration's line.
                for removed in retention::prune(&dir, keep, &score_attr)? {
                    progress.note(&format!("removed {} (keep_checkpoints_num: {keep})", removed.display()));
                }
            }
        }
        if stopping || was_interrupted {
            if let Err(e) = trainer.finish_output().await {
                errln!("warning: output: {e}");
            }
            writer.finish()?;
            progress.finish(&result, was_interrupted);
            return Ok(Outcome { result, dir, checkpoint: last_checkpoint, interrupted: was_interrupted });
        }
    }
}

/// The key a config error names, if it names one.
fn config_key(e: &rlx::config::ConfigError) -> Option<&str> {
    use rlx::config::ConfigError::{Invalid, Malformed, OutOfRange, UnknownKey};
    match e {
        UnknownKey { key, .. } | Invalid { key, .. } | OutOfRange { key, .. } => Some(key),
        Malformed(_) => None,
    }
}

/// The results of the checkpoint's run up to its iteration, from the
/// `result.json` beside it (none if there is none). A torn last line (the
/// run was killed while writing it) is left out with a warning.
///
/// # Errors
/// A `result.json` that cannot be read, or a bad line before its last.
fn restored_history(ckpt: &Checkpoint) -> Result<Vec<TrainResult>, CliError> {
    let Some(path) = ckpt.dir.parent().map(|p| p.join("result.json")).filter(|p| p.is_file()) else {
        return Ok(Vec::new());
    };
    let (results, warning) = read_history(&path).map_err(CliError::History)?;
    if let Some(warning) = warning {
        errln!("warning: {warning}");
    }
    let iteration = ckpt.metadata.training_iteration;
    Ok(results.into_iter().filter(|r| r.training_iteration <= iteration).collect())
}

/// Creates and returns `parent/<name>_<UTC time>`, with `_2`, `_3`...
/// appended if a run started in the same second already took the name.
pub(crate) fn new_run_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(parent).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", parent.display())))?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
    for i in 1.. {
        let dir = parent.join(if i == 1 { format!("{name}_{stamp}") } else { format!("{name}_{stamp}_{i}") });
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
        }
    }
    unreachable!("an unbounded range always yields a free name")
}
