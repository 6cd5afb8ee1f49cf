//! The `rlx` command line (and the per-algorithm binaries such as `rlx-ppo`).
//!
//! `rlx train` mirrors `rllib train`: the same flags, RLlib-shaped YAML
//! experiment files, a results directory per run (`params.json`,
//! `result.json`, `progress.csv`, `learning_curve.png`) and checkpoints.
//! Everything a run writes is on disk before the next iteration starts, so
//! a killed run loses at most the iteration in progress.

use crate::{build_trainer, config_docs, default_config, make_policy, BuildError, ALGORITHMS};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rlx::checkpoint::{self, Checkpoint, CheckpointError, RunInfo};
use rlx::config::{closest, deep_merge, from_value, ConfigError};
use rlx::results::{read_results, ResultsWriter};
use rlx::{fields, Action, Column, OptimizerError, SampleBatch, Space, StopCriteria, TrainResult};
use serde_json::{json, Map, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// `rlx`: train and inspect reinforcement-learning agents.
#[derive(Parser, Debug)]
#[command(name = "rlx", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train an algorithm on an env until a stop criterion is met.
    Train {
        /// Algorithm to run (see `rlx list`); optional with --config-file or --restore.
        #[arg(long)]
        run: Option<String>,
        #[command(flatten)]
        args: TrainArgs,
    },
    /// Evaluate a checkpoint's policy and print return statistics.
    Rollout(RolloutArgs),
    /// Overlay the learning curves of several runs in one PNG.
    Plot(PlotArgs),
    /// Run a worker node that drivers place evaluators on
    /// (`rlx train ... --nodes HOST:PORT --cookie SECRET`). Runs until Ctrl-C.
    Node(NodeArgs),
    /// List algorithms and envs, one line each.
    List,
    /// Print an algorithm's default config, each key with its documentation.
    Config {
        /// Algorithm name.
        algorithm: String,
        /// Print plain JSON without the documentation.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments shared by `rlx train` and the per-algorithm binaries.
#[derive(Args, Debug, Clone, Default)]
pub struct TrainArgs {
    /// Env name (see `rlx list`); optional with --config-file or --restore.
    #[arg(long)]
    pub env: Option<String>,
    /// JSON object merged over the algorithm's default config, e.g. '{"num_workers": 2}'.
    #[arg(long)]
    pub config: Option<String>,
    /// A YAML or JSON experiment file in the shape of RLlib's tuned examples
    /// (experiment name → run, env, stop, config). --run, --env, --stop and
    /// --config override what it says.
    #[arg(long, short = 'f')]
    pub config_file: Option<PathBuf>,
    /// JSON object of stop criteria, e.g. '{"episode_reward_mean": 475}'; stops when any is
    /// reached. Metrics: episode_reward_mean, timesteps_total, training_iteration, time_total_s.
    /// Default: the env's reward threshold, if it has one.
    #[arg(long)]
    pub stop: Option<String>,
    /// Write a checkpoint every N iterations (0: never).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_freq: u64,
    /// Write a checkpoint when the run stops.
    #[arg(long)]
    pub checkpoint_at_end: bool,
    /// Resume from a checkpoint directory (or the newest checkpoint of a run directory).
    #[arg(long)]
    pub restore: Option<PathBuf>,
    /// Seed (overrides the config's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Parent directory for this run's results directory.
    #[arg(long, default_value = "rlx_results")]
    pub results_dir: PathBuf,
    /// Run the evaluators on these worker nodes (started with `rlx node`),
    /// comma-separated HOST:PORT; same as the config key `nodes`.
    #[arg(long)]
    pub nodes: Option<String>,
    /// The worker nodes' cookie (or the env var RLX_COOKIE); never written to results.
    #[arg(long)]
    pub cookie: Option<String>,
}

/// Arguments of `rlx node`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Address to accept drivers on (port 0 picks a free port; the node prints the address).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: std::net::SocketAddr,
    /// Shared secret: drivers with another cookie are refused (or the env var RLX_COOKIE).
    #[arg(long)]
    pub cookie: Option<String>,
    /// The node's name, unique in the cluster (default: node-PORT-PID).
    #[arg(long)]
    pub name: Option<String>,
    /// Largest message accepted, in MiB.
    #[arg(long, default_value_t = rlx_cluster::DEFAULT_MAX_FRAME_BYTES >> 20)]
    pub max_frame_mib: u64,
}

/// Arguments of `rlx rollout`.
#[derive(Args, Debug, Clone)]
pub struct RolloutArgs {
    /// A checkpoint directory, or a run directory (its newest checkpoint).
    pub checkpoint: PathBuf,
    /// Episodes to run.
    #[arg(long, default_value_t = 10)]
    pub episodes: usize,
    /// Print each frame as text (envs with a text rendering).
    #[arg(long)]
    pub render: bool,
    /// Sample actions from the policy instead of taking the most likely one.
    #[arg(long)]
    pub explore: bool,
    /// Seed of the first episode's reset (episode i uses seed + i).
    #[arg(long, default_value_t = 1_000_000)]
    pub seed: u64,
}

/// Arguments of `rlx plot`.
#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// Run directories (each with a result.json).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The PNG to write.
    #[arg(long, short = 'o', default_value = "rlx_plot.png")]
    pub out: PathBuf,
    /// Width and height in pixels, e.g. 1000x600.
    #[arg(long, default_value = "1000x600", value_parser = parse_size)]
    pub size: (u32, u32),
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}` is not WIDTHxHEIGHT (e.g. 1000x600)");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if !(100..=10_000).contains(&w) || !(100..=10_000).contains(&h) {
        return Err(format!("`{s}`: width and height must be in [100, 10000]"));
    }
    Ok((w, h))
}

/// A failure the CLI reports before exiting non-zero.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Building the trainer failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A bad `--config`, `--stop` or experiment file.
    #[error("{flag}: {source}")]
    Arg {
        /// The flag or file.
        flag: String,
        /// What is wrong.
        source: ConfigError,
    },
    /// Something required is missing.
    #[error("{0}")]
    Usage(String),
    /// A checkpoint could not be read, written or restored.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Training failed; what was finished is on disk.
    #[error("training failed: {source}\n  results so far: {}\n  last checkpoint: {}", dir.display(), checkpoint.as_ref().map_or("none".into(), |c| c.display().to_string()))]
    Train {
        /// The optimizer's error (boxed: it is large and rare).
        source: Box<OptimizerError>,
        /// The run's results directory.
        dir: PathBuf,
        /// The last checkpoint written, if any.
        checkpoint: Option<PathBuf>,
    },
    /// Results could not be written.
    #[error("cannot write results: {0}")]
    Io(#[from] std::io::Error),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] rlx::plot::PlotError),
    /// An episode of `rlx rollout` failed.
    #[error("rollout: {0}")]
    Rollout(String),
}

fn arg_error(flag: impl Into<String>, source: ConfigError) -> CliError {
    CliError::Arg { flag: flag.into(), source }
}

fn parse_json(flag: &str, text: Option<&str>) -> Result<Value, CliError> {
    match text {
        None => Ok(Value::Null),
        Some(t) => {
            serde_json::from_str(t).map_err(|e| arg_error(flag, ConfigError::Malformed(format!("not valid JSON: {e}"))))
        }
    }
}

/// One experiment to run: what a YAML entry and the flags resolve to.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    /// The experiment's name in the file, if it came from one.
    pub name: Option<String>,
    /// Algorithm.
    pub run: String,
    /// Env.
    pub env: String,
    /// Config overrides (merged over the defaults, or over a restored
    /// checkpoint's config).
    pub config: Value,
    /// Stop criteria as given (`null`: the env's reward threshold).
    pub stop: Value,
    /// Checkpoint every N iterations (0: never).
    pub checkpoint_freq: u64,
    /// Checkpoint when the run stops.
    pub checkpoint_at_end: bool,
}

const EXPERIMENT_KEYS: &[&str] = &["run", "env", "config", "stop", "checkpoint_freq", "checkpoint_at_end"];

/// RLlib config keys that have no meaning in rlx; experiment files that set
/// them still run, with a note.
const RLLIB_IGNORED: &[&str] = &[
    "framework",
    "num_gpus",
    "num_gpus_per_worker",
    "num_cpus_per_worker",
    "num_gpus_per_env_runner",
    "num_cpus_per_env_runner",
    "eager_tracing",
    "log_level",
    "enable_rl_module_and_learner",
    "enable_env_runner_and_connector_v2",
    "_enable_new_api_stack",
];

/// RLlib's newer names for rlx config keys.
const RLLIB_RENAMED: &[(&str, &str)] = &[
    ("num_env_runners", "num_workers"),
    ("num_rollout_workers", "num_workers"),
    ("num_envs_per_env_runner", "num_envs_per_worker"),
    ("num_epochs", "num_sgd_iter"),
    ("minibatch_size", "sgd_minibatch_size"),
];

/// RLlib's newer names for stop metrics.
const STOP_RENAMED: &[(&str, &str)] = &[
    ("env_runners/episode_return_mean", "episode_reward_mean"),
    ("episode_return_mean", "episode_reward_mean"),
    ("num_env_steps_sampled_lifetime", "timesteps_total"),
];

/// Renames RLlib's keys to rlx's and drops those rlx has no use for,
/// printing a note for each.
fn translate_rllib(obj: &mut Value, renamed: &[(&str, &str)], ignored: &[&str]) {
    let Some(map) = obj.as_object_mut() else { return };
    for key in ignored {
        if map.remove(*key).is_some() {
            eprintln!("note: ignoring RLlib setting `{key}` (it has no meaning in rlx)");
        }
    }
    for (from, to) in renamed {
        if let Some(v) = map.remove(*from) {
            match map.get(*to) {
                // The rlx name wins (e.g. a `--config` flag over the file).
                Some(kept) => eprintln!("note: ignoring RLlib's `{from}` = {v}: rlx's `{to}` = {kept} is also given"),
                None => {
                    eprintln!("note: RLlib's `{from}` is rlx's `{to}`");
                    map.insert(to.to_string(), v);
                }
            }
        }
    }
}

/// An experiment file's entry: its name (if the file names experiments)
/// and its keys.
type Entry = (Option<String>, Map<String, Value>);

/// Reads an experiment file: YAML (`.yaml`/`.yml`) or JSON, either a map of
/// experiment name → experiment (RLlib's tuned examples) or one experiment.
fn read_experiment_file(path: &Path) -> Result<Vec<Entry>, CliError> {
    let flag = format!("--config-file {}", path.display());
    let text = std::fs::read_to_string(path)
        .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("cannot read: {e}"))))?;
    let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    let value: Value = if yaml {
        serde_yaml_ng::from_str(&text)
            .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("not valid YAML: {e}"))))?
    } else {
        serde_json::from_str(&text)
            .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("not valid JSON: {e}"))))?
    };
    let Value::Object(map) = value else {
        return Err(arg_error(&flag, ConfigError::Malformed("must be a map of experiment name to experiment".into())));
    };
    if map.contains_key("run") || map.contains_key("env") {
        return Ok(vec![(None, map)]);
    }
    if map.is_empty() {
        return Err(arg_error(&flag, ConfigError::Malformed("has no experiments".into())));
    }
    map.into_iter()
        .map(|(name, v)| match v {
            Value::Object(m) => Ok((Some(name), m)),
            other => Err(arg_error(
                &flag,
                ConfigError::Malformed(format!(
                    "experiment `{name}` must be a map with run, env, config, stop; got {other}"
                )),
            )),
        })
        .collect()
}

/// Resolves the experiments to run from the flags and the experiment file.
/// `run` is `--run` (or the per-algorithm binary's algorithm); a restored
/// checkpoint supplies the algorithm and env when the flags do not.
///
/// # Errors
/// A bad file or flag, or no algorithm or env given.
pub fn experiments(
    run: Option<&str>,
    args: &TrainArgs,
    restored: Option<&Checkpoint>,
) -> Result<Vec<Experiment>, CliError> {
    let entries = match &args.config_file {
        Some(path) => read_experiment_file(path)?,
        None => vec![(None, Map::new())],
    };
    let cli_config = parse_json("--config", args.config.as_deref())?;
    let cli_stop = parse_json("--stop", args.stop.as_deref())?;
    let mut out = Vec::new();
    for (name, mut entry) in entries {
        let flag = match (&args.config_file, &name) {
            (Some(p), Some(n)) => format!("{}: experiment `{n}`", p.display()),
            (Some(p), None) => p.display().to_string(),
            _ => "--config".into(),
        };
        if let Some(key) = entry.keys().find(|k| !EXPERIMENT_KEYS.contains(&k.as_str())) {
            return Err(arg_error(
                &flag,
                ConfigError::UnknownKey {
                    key: key.clone(),
                    closest: closest(key, EXPERIMENT_KEYS.iter().copied()),
                    valid: EXPERIMENT_KEYS.iter().map(|s| s.to_string()).collect(),
                },
            ));
        }
        let text = |entry: &Map<String, Value>, key: &str| -> Result<Option<String>, CliError> {
            match entry.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => {
                    Err(arg_error(&flag, ConfigError::Malformed(format!("`{key}` must be a string, got {other}"))))
                }
            }
        };
        let mut config = entry.remove("config").unwrap_or(Value::Null);
        let env_in_config =
            config.as_object_mut().and_then(|c| c.remove("env")).and_then(|e| e.as_str().map(String::from));
        let file_run = text(&entry, "run")?;
        let file_env = text(&entry, "env")?.or(env_in_config);
        let run = match (run, file_run) {
            (Some(a), Some(b)) if a != b => {
                return Err(CliError::Usage(format!("{flag} says `run: {b}` but this is `{a}`; drop one of them")))
            }
            (Some(a), _) => a.to_string(),
            (None, Some(b)) => b,
            (None, None) => match restored {
                Some(c) => c.metadata.algorithm.clone(),
                None => return Err(CliError::Usage("no algorithm: pass --run ALGO (see `rlx list`)".into())),
            },
        };
        let env = match (args.env.clone().or(file_env), restored) {
            (Some(e), _) => e,
            (None, Some(c)) => c.metadata.env.clone(),
            (None, None) => return Err(CliError::Usage("no env: pass --env ENV (see `rlx list`)".into())),
        };
        if !config.is_null() && !config.is_object() {
            return Err(arg_error(&flag, ConfigError::Malformed(format!("`config` must be a map, got {config}"))));
        }
        if config.is_null() {
            config = json!({});
        }
        if !cli_config.is_null() {
            if !cli_config.is_object() {
                return Err(arg_error("--config", ConfigError::Malformed("must be a JSON object".into())));
            }
            deep_merge(&mut config, &cli_config);
        }
        if let Some(seed) = args.seed {
            config["seed"] = json!(seed);
        }
        if let Some(nodes) = &args.nodes {
            config["nodes"] = json!(nodes);
        }
        if let Some(cookie) = &args.cookie {
            config["cookie"] = json!(cookie);
        }
        translate_rllib(&mut config, RLLIB_RENAMED, RLLIB_IGNORED);
        let mut stop = entry.remove("stop").unwrap_or(Value::Null);
        if !cli_stop.is_null() {
            if stop.is_null() {
                stop = json!({});
            }
            deep_merge(&mut stop, &cli_stop);
        }
        translate_rllib(&mut stop, STOP_RENAMED, &[]);
        let freq = match entry.get("checkpoint_freq") {
            None => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                arg_error(
                    &flag,
                    ConfigError::Malformed(format!("`checkpoint_freq` must be a whole number >= 0, got {v}")),
                )
            })?,
        };
        let at_end = match entry.get("checkpoint_at_end") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| {
                arg_error(&flag, ConfigError::Malformed(format!("`checkpoint_at_end` must be true or false, got {v}")))
            })?,
        };
        out.push(Experiment {
            name,
            run,
            env,
            config,
            stop,
            checkpoint_freq: if args.checkpoint_freq > 0 { args.checkpoint_freq } else { freq },
            checkpoint_at_end: args.checkpoint_at_end || at_end,
        });
    }
    Ok(out)
}

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

/// Set by the first Ctrl-C; a second one exits at once.
fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if f.swap(true, Ordering::SeqCst) {
                    eprintln!("\nsecond Ctrl-C: exiting now (finished iterations are already on disk)");
                    std::process::exit(130);
                }
                eprintln!(
                    "\nCtrl-C: stopping after this iteration and writing a final checkpoint (Ctrl-C again to quit now)"
                );
            }
        });
        flag
    })
    .clone()
}

/// Runs `rlx train`: resolves the experiments, then trains each in turn.
/// Returns how the last one ended.
///
/// # Errors
/// Bad arguments, build failures, training failures, or unwritable results.
pub async fn train(run: Option<&str>, args: &TrainArgs) -> Result<Outcome, CliError> {
    let restored = args.restore.as_deref().map(Checkpoint::load).transpose()?;
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
            let threshold = rlx_envs::spec(&exp.env).map_err(BuildError::from)?.reward_threshold;
            StopCriteria { episode_reward_mean: threshold, ..Default::default() }
        }
        v => from_value(v.clone()).map_err(|source| arg_error("--stop", source))?,
    };
    let mut overrides = exp.config.clone();
    if let Some(ckpt) = restored {
        ckpt.check_matches(&exp.run, &exp.env)?;
        // The checkpoint's config, with what the user changes on top.
        let mut config = ckpt.metadata.config.clone();
        deep_merge(&mut config, &overrides);
        overrides = config;
    }
    let (mut trainer, config) = build_trainer(&exp.run, &exp.env, &overrides).await.map_err(|e| match e {
        BuildError::Config(source) => arg_error("--config", source),
        other => CliError::Build(other),
    })?;
    let info = RunInfo { algorithm: exp.run.clone(), env: exp.env.clone(), config: config.clone() };
    // Restore before creating the run directory, so a bad checkpoint leaves nothing behind.
    if let Some(ckpt) = restored {
        for gap in ckpt.restore(&mut trainer).await? {
            eprintln!("warning: not an exact resume: {gap}");
        }
    }
    let dir = new_run_dir(&args.results_dir, &format!("{}_{}", exp.run, exp.env.replace('/', "-")))?;
    let params = json!({
        "run": exp.run, "env": exp.env, "config": config, "stop": stop,
        "experiment": exp.name, "restored_from": restored.map(|c| c.dir.display().to_string()),
    });
    let mut writer = ResultsWriter::create(&dir, &params)?;
    if let Some(ckpt) = restored {
        // Carry the history up to the checkpoint over, so this run's
        // result.json, progress.csv and plot tell the whole story.
        let iteration = ckpt.metadata.training_iteration;
        if let Some(history) = ckpt.dir.parent().map(|p| p.join("result.json")).filter(|p| p.is_file()) {
            for r in read_results(&history)?.into_iter().filter(|r| r.training_iteration <= iteration) {
                writer.append(&r)?;
            }
        }
        eprintln!("restored {} at iteration {iteration}", ckpt.dir.display());
    }
    if stop.is_empty() {
        eprintln!("no --stop criteria and the env has no reward threshold: training until interrupted (Ctrl-C)");
    }
    eprintln!("{} on {}: results in {}", exp.run, exp.env, dir.display());
    let interrupted = interrupt_flag();
    let mut progress = Progress::new(&stop, trainer.last_result());
    let mut last_checkpoint = None;
    loop {
        let result = match trainer.train().await {
            Ok(r) => r,
            Err(source) => {
                progress.abandon();
                writer.finish()?;
                return Err(CliError::Train { source: Box::new(source), dir, checkpoint: last_checkpoint });
            }
        };
        writer.append(&result)?;
        progress.report(&result);
        let stopping = stop.should_stop(&result);
        let was_interrupted = interrupted.load(Ordering::SeqCst);
        let periodic = exp.checkpoint_freq > 0 && result.training_iteration % exp.checkpoint_freq == 0;
        if periodic || was_interrupted || (stopping && exp.checkpoint_at_end) {
            let path = checkpoint::save(&mut trainer, &dir, &info).await?;
            progress.note(&format!("checkpoint: {}", path.display()));
            last_checkpoint = Some(path);
        }
        if stopping || was_interrupted {
            writer.finish()?;
            progress.finish(&result, was_interrupted);
            return Ok(Outcome { result, dir, checkpoint: last_checkpoint, interrupted: was_interrupted });
        }
    }
}

/// Creates and returns `parent/<name>_<UTC time>`, with `_2`, `_3`...
/// appended if a run started in the same second already took the name.
fn new_run_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
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

/// A progress bar on a terminal (a bar when a stop criterion counts
/// iterations or steps, a spinner otherwise), one line per iteration when
/// output goes to a file or pipe.
struct Progress {
    bar: Option<ProgressBar>,
    /// What the bar counts: iterations (`true`) or env steps.
    by_iteration: bool,
}

impl Progress {
    fn new(stop: &StopCriteria, start: &TrainResult) -> Self {
        // A bar only when a person watches both streams: `rlx train | tee
        // log` gets one line per iteration.
        if !(std::io::stderr().is_terminal() && std::io::stdout().is_terminal()) {
            return Self { bar: None, by_iteration: false };
        }
        let (bar, by_iteration) = match (stop.training_iteration, stop.timesteps_total) {
            (Some(n), _) => (ProgressBar::new(n), true),
            (None, Some(n)) => (ProgressBar::new(n), false),
            (None, None) => (ProgressBar::new_spinner(), false),
        };
        let template = if bar.length().is_some() {
            "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}%\n{msg}"
        } else {
            "{spinner} [{elapsed_precise}] {msg}"
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        bar.set_position(if by_iteration { start.training_iteration } else { start.timesteps_total });
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar: Some(bar), by_iteration }
    }

    fn line(r: &TrainResult) -> String {
        format!(
            "iter {:>4}  steps {:>9}  return {:>7}  len {:>6}  {:>8.0} steps/s  restarts {}  t {:.1}s",
            r.training_iteration,
            r.timesteps_total,
            r.episode_reward_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.episode_len_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.env_steps_per_s,
            r.num_evaluator_restarts,
            r.time_total_s,
        )
    }

    fn report(&mut self, r: &TrainResult) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(if self.by_iteration { r.training_iteration } else { r.timesteps_total });
                bar.set_message(Self::line(r));
            }
            None => println!("{}", Self::line(r)),
        }
    }

    fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => println!("{text}"),
        }
    }

    fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }

    fn finish(&mut self, r: &TrainResult, interrupted: bool) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            println!("{}", Self::line(r));
        }
        println!(
            "{}: mean return {} after {} env steps in {:.1} s",
            if interrupted { "interrupted" } else { "done" },
            r.episode_reward_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.timesteps_total,
            r.time_total_s
        );
    }
}

/// Return statistics of `rlx rollout`.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutSummary {
    /// Each episode's return.
    pub returns: Vec<f64>,
    /// Each episode's length.
    pub lengths: Vec<u64>,
}

impl RolloutSummary {
    /// Mean return.
    pub fn mean(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len().max(1) as f64
    }

    /// Population standard deviation of the returns.
    pub fn std(&self) -> f64 {
        let m = self.mean();
        (self.returns.iter().map(|r| (r - m).powi(2)).sum::<f64>() / self.returns.len().max(1) as f64).sqrt()
    }
}

/// Runs `rlx rollout`: loads the checkpoint's policy (and observation
/// filter) and plays `episodes` episodes, printing one line each.
///
/// # Errors
/// A bad checkpoint, an env without text rendering with `--render`, or an
/// env or policy error.
pub fn rollout(args: &RolloutArgs) -> Result<RolloutSummary, CliError> {
    if args.episodes == 0 {
        return Err(CliError::Usage("--episodes must be at least 1".into()));
    }
    let ckpt = Checkpoint::load(&args.checkpoint)?;
    let meta = &ckpt.metadata;
    let kwargs = meta.config.get("env_config").cloned().unwrap_or(Value::Null);
    let mut env = rlx_envs::make_with(&meta.env, &kwargs).map_err(BuildError::from)?;
    let mut policy =
        make_policy(&meta.algorithm, &meta.config, env.observation_space(), env.action_space(), args.seed)?;
    ckpt.load_weights(policy.as_mut())?;
    let local = ckpt.state.evaluators.iter().find(|e| e.index == 0);
    let filter = local.and_then(|e| e.filter.clone());
    // Policies that keep part of what they compute in their state (ES and
    // ARS: the observation statistics) need it to act as trained.
    if let Some(state) = local.and_then(|e| e.policy.as_ref()) {
        if let Err(e) = policy.load_state(state) {
            eprintln!("warning: the checkpoint's policy state was not restored ({e}); acting on the weights alone");
        }
    }
    if args.render && env.render().is_none() {
        return Err(CliError::Usage(format!("{} has no text rendering; drop --render", meta.env)));
    }
    let animate = args.render && std::io::stdout().is_terminal();
    println!(
        "{} on {} from {} (iteration {}), {} actions",
        meta.algorithm,
        meta.env,
        ckpt.dir.display(),
        meta.training_iteration,
        if args.explore { "sampled" } else { "greedy" }
    );
    let fail = |e: &dyn std::fmt::Display| CliError::Rollout(e.to_string());
    let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
    let mut out = SampleBatch::new();
    let mut summary = RolloutSummary { returns: Vec::new(), lengths: Vec::new() };
    // Recurrent policies carry their state from step to step; masks come
    // from the env at every step.
    let mut acting = rlx::acting::Acting::new(policy.as_ref(), 1);
    let mut mask = vec![1.0f32; env.action_space().mask_width().unwrap_or(0)];
    for episode in 0..args.episodes {
        env.reset(Some(args.seed + episode as u64), &mut obs).map_err(|e| fail(&e))?;
        acting.episode_started(0);
        let (mut ret, mut len) = (0.0, 0u64);
        loop {
            if args.render {
                let frame = env.render().unwrap_or_default();
                if animate {
                    print!("\x1b[2J\x1b[H");
                }
                println!("episode {} step {len} return {ret:.1}\n{frame}\n", episode + 1);
                if animate {
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
            let mut input = obs.clone();
            if let Some(f) = &filter {
                f.normalize(&mut input);
            }
            let masked =
                !mask.is_empty() && rlx::env::read_action_mask(env.as_ref(), &mut mask, len).map_err(|e| fail(&e))?;
            let mask_input = masked.then_some(&mask[..]);
            acting.act(policy.as_mut(), &input, mask_input, args.explore, &mut out).map_err(|e| fail(&e))?;
            let step = match (out.get(fields::ACTIONS), env.action_space()) {
                (Some(Column::I64 { data, .. }), Space::MultiDiscrete { .. }) => {
                    env.step(Action::MultiDiscrete(data), &mut obs)
                }
                (Some(Column::I64 { data, .. }), _) => env.step(Action::Discrete(data[0]), &mut obs),
                (Some(Column::F32 { data, .. }), space) => {
                    // Within the bounds, as evaluators step envs.
                    let mut clipped = data.clone();
                    space.clip(&mut clipped);
                    env.step(Action::Continuous(&clipped), &mut obs)
                }
                (None, _) => return Err(CliError::Rollout("the policy wrote no actions".into())),
            }
            .map_err(|e| fail(&e))?;
            ret += step.reward;
            len += 1;
            if step.done() {
                break;
            }
        }
        println!("episode {:>3}: return {ret:>8.1}  length {len}", episode + 1);
        summary.returns.push(ret);
        summary.lengths.push(len);
    }
    let (min, max) = summary.returns.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &r| (a.min(r), b.max(r)));
    println!(
        "{} episode{}: mean return {:.1} ± {:.1} (min {min:.1}, max {max:.1}), mean length {:.1}",
        args.episodes,
        if args.episodes == 1 { "" } else { "s" },
        summary.mean(),
        summary.std(),
        summary.lengths.iter().sum::<u64>() as f64 / args.episodes as f64
    );
    Ok(summary)
}

/// Prints `rlx config ALGO`: YAML (usable as an experiment file's `config:`
/// block) with each key's documentation as a comment above it.
fn print_config(algorithm: &str, json_only: bool) -> Result<(), CliError> {
    let cfg = default_config(algorithm)?;
    if json_only {
        println!("{}", serde_json::to_string_pretty(&cfg).expect("JSON"));
        return Ok(());
    }
    println!("# {algorithm}'s default config. Every key is optional: override with");
    println!("# --config '{{\"lr\": 0.0005}}' or under `config:` in a --config-file.");
    for (key, doc) in config_docs(algorithm)? {
        println!();
        for line in doc.lines() {
            println!("# {}", line.trim());
        }
        if key == "model" && cfg[key].is_object() {
            // The network's keys, each with its own documentation.
            println!("model:");
            for (sub, doc) in crate::model_docs() {
                for line in doc.lines() {
                    println!("  # {}", line.trim());
                }
                let value = serde_yaml_ng::to_string(&json!({ sub: cfg[key][sub] })).expect("YAML");
                print!("  {}", value.trim_end().replace('\n', "\n  "));
                println!();
            }
            continue;
        }
        let value = serde_yaml_ng::to_string(&json!({ key: cfg[key] })).expect("YAML");
        print!("{value}");
    }
    Ok(())
}

fn print_list() {
    println!("algorithms:");
    for (name, about) in ALGORITHMS {
        println!("  {name:<26} {about}");
    }
    println!("envs (keyword arguments go in the config's \"env_config\"):");
    for spec in rlx_envs::specs() {
        let kwargs: Vec<&str> = std::iter::once("max_episode_steps").chain(spec.kwargs.iter().copied()).collect();
        println!("  {:<26} {} [env_config: {}]", spec.name, spec.description, kwargs.join(", "));
    }
}

/// Prints `error: ...` and returns a failure exit code.
pub fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

fn exit_code(outcome: Result<Outcome, CliError>) -> ExitCode {
    match outcome {
        // 130 = 128 + SIGINT, the shell's convention for a run stopped by Ctrl-C.
        Ok(o) if o.interrupted => ExitCode::from(130),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Entry point of a per-algorithm binary such as `rlx-ppo`: the arguments of
/// `rlx train` without `--run`.
pub async fn algorithm_main(algorithm: &'static str) -> ExitCode {
    use clap::{Args as _, FromArgMatches as _};
    default_sigpipe();
    init_logging();
    let command = clap::Command::new(format!("rlx-{}", algorithm.to_lowercase())).version(env!("CARGO_PKG_VERSION"));
    let about = format!("Train {algorithm} on an env (the same as `rlx train --run {algorithm}`)");
    let matches = TrainArgs::augment_args(command).about(about).get_matches();
    let args = match TrainArgs::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    exit_code(train(Some(algorithm), &args).await)
}

/// Dies quietly on a closed pipe (`rlx rollout --render | head`) like other
/// command-line tools, instead of panicking on the next print.
fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: restores the default disposition of one signal at start-up,
    // before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `rlx node`: serves evaluators to drivers until Ctrl-C.
async fn node(args: NodeArgs) -> Result<(), CliError> {
    let cookie = args
        .cookie
        .or_else(|| std::env::var("RLX_COOKIE").ok())
        .ok_or_else(|| CliError::Usage("a node needs a cookie: pass --cookie SECRET (or set RLX_COOKIE)".into()))?;
    if args.max_frame_mib == 0 || args.max_frame_mib > 1024 {
        return Err(CliError::Usage(format!("--max-frame-mib {} is outside [1, 1024]", args.max_frame_mib)));
    }
    let config = rlx_cluster::NodeConfig {
        listen: args.listen,
        cookie,
        name: args.name,
        max_frame_bytes: args.max_frame_mib << 20,
    };
    let node = rlx_cluster::Node::start(config, crate::deploy::node_resolver())
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    // Tests and scripts read this line for the bound address.
    println!("rlx node {} listening on {}", node.name, node.addr);
    let _ = tokio::signal::ctrl_c().await;
    node.stop();
    Ok(())
}

/// Runs a binary's main future on a multi-thread tokio runtime that the
/// actix backend shares, so the process has one runtime.
pub fn run_binary(main: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => return fail(format!("cannot start the tokio runtime: {e}")),
    };
    rlx_cluster::actix_backend::share_runtime(runtime.clone());
    runtime.block_on(main)
}

/// Logs to stderr: rlx's cluster events (nodes joining, lost, evaluators
/// re-placed) at `info`, everything else at `warn` (restarts of actors
/// among it); `RUST_LOG` overrides.
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,rlx_cluster=info,ractor=error,ractor_cluster=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

/// Entry point of the `rlx` binary.
pub async fn main() -> ExitCode {
    default_sigpipe();
    init_logging();
    let cli = Cli::parse();
    match cli.command {
        Command::Train { run, args } => exit_code(train(run.as_deref(), &args).await),
        Command::Rollout(args) => match rollout(&args) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Plot(args) => match rlx::plot::plot_runs(&args.dirs, &args.out, args.size) {
            Ok(()) => {
                println!("wrote {}", args.out.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Node(args) => match node(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::List => {
            print_list();
            ExitCode::SUCCESS
        }
        Command::Config { algorithm, json } => match print_config(&algorithm, json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("rlx-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn rllib_tuned_example_yaml_resolves() {
        let path = write(
            "cartpole-ppo.yaml",
            "cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    env_runners/episode_return_mean: 150\n    timesteps_total: 100000\n  config:\n    framework: torch\n    gamma: 0.99\n    lr: 0.0003\n    num_env_runners: 2\n    num_epochs: 6\n    vf_loss_coeff: 0.01\n",
        );
        let args = TrainArgs { config_file: Some(path.clone()), seed: Some(3), ..Default::default() };
        let exps = experiments(None, &args, None).unwrap();
        assert_eq!(exps.len(), 1);
        let e = &exps[0];
        assert_eq!((e.name.as_deref(), e.run.as_str(), e.env.as_str()), (Some("cartpole-ppo"), "PPO", "CartPole-v1"));
        assert_eq!(
            e.config,
            json!({"gamma": 0.99, "lr": 0.0003, "num_workers": 2, "num_sgd_iter": 6, "vf_loss_coeff": 0.01, "seed": 3})
        );
        assert_eq!(e.stop, json!({"episode_reward_mean": 150, "timesteps_total": 100000}));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn flags_override_the_file_and_bad_files_name_the_problem() {
        let path =
            write("exp.yaml", "x:\n  run: PPO\n  env: CartPole-v1\n  config: {lr: 0.01, restart: {max_restarts: 2}}\n");
        let args = TrainArgs {
            config_file: Some(path.clone()),
            env: Some("Acrobot-v1".into()),
            config: Some(r#"{"restart": {"window_s": 5}}"#.into()),
            ..Default::default()
        };
        let e = &experiments(None, &args, None).unwrap()[0];
        assert_eq!(e.env, "Acrobot-v1");
        assert_eq!(e.config, json!({"lr": 0.01, "restart": {"max_restarts": 2, "window_s": 5}}));
        let err = experiments(Some("A2C"), &args, None).unwrap_err().to_string();
        assert!(err.contains("run: PPO") && err.contains("A2C"), "{err}");

        std::fs::write(&path, "x:\n  run: PPO\n  evn: CartPole-v1\n").unwrap();
        let err = experiments(None, &args, None).unwrap_err().to_string();
        assert!(err.contains("`evn`") && err.contains("did you mean `env`"), "{err}");
        std::fs::write(&path, "x: [1, 2\n").unwrap();
        let err = experiments(None, &args, None).unwrap_err().to_string();
        assert!(err.contains("exp.yaml") && err.contains("not valid YAML"), "{err}");
        std::fs::remove_file(path).unwrap();

        let none = TrainArgs::default();
        assert!(experiments(None, &none, None).unwrap_err().to_string().contains("--run"));
        assert!(experiments(Some("PPO"), &none, None).unwrap_err().to_string().contains("--env"));
    }

    #[test]
    fn config_docs_cover_every_key() {
        for (name, _) in ALGORITHMS {
            let cfg = default_config(name).unwrap();
            let docs = config_docs(name).unwrap();
            let keys: Vec<&str> = docs.iter().map(|d| d.0).collect();
            let mut expected: Vec<&str> = cfg.as_object().unwrap().keys().map(String::as_str).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            expected.sort();
            assert_eq!(sorted, expected, "{name}");
            assert!(docs.iter().all(|d| !d.1.trim().is_empty()), "{name}: an undocumented key");
        }
    }

    #[test]
    fn plot_size_parses() {
        assert_eq!(parse_size("800x500"), Ok((800, 500)));
        assert!(parse_size("800").is_err());
        assert!(parse_size("5x5").unwrap_err().contains("[100, 10000]"));
    }
}
