//! The `rlx` command line (and the per-algorithm binaries such as `rlx-ppo`).

use crate::{build_trainer, default_config, BuildError, ALGORITHMS};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rlx::config::{from_value, ConfigError};
use rlx::results::ResultsWriter;
use rlx::{OptimizerError, StopCriteria, TrainResult};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
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
        /// Algorithm to run (see `rlx list`).
        #[arg(long)]
        run: String,
        #[command(flatten)]
        args: TrainArgs,
    },
    /// List algorithms and envs.
    List,
    /// Print an algorithm's default config as JSON.
    Config {
        /// Algorithm name.
        algorithm: String,
    },
}

/// Arguments shared by `rlx train` and the per-algorithm binaries.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Env name (see `rlx list`).
    #[arg(long)]
    pub env: String,
    /// JSON object merged over the algorithm's default config, e.g. '{"num_workers": 2}'.
    #[arg(long)]
    pub config: Option<String>,
    /// JSON object of stop criteria, e.g. '{"episode_reward_mean": 475}'; stops when any is reached.
    /// Default: the env's reward threshold, if it has one.
    #[arg(long)]
    pub stop: Option<String>,
    /// Seed (overrides the config's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Parent directory for this run's results directory.
    #[arg(long, default_value = "rlx_results")]
    pub results_dir: PathBuf,
}

/// A failure the CLI reports before exiting non-zero.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Building the trainer failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A bad `--config` or `--stop`.
    #[error("{flag}: {source}")]
    Arg {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        source: ConfigError,
    },
    /// Training failed.
    #[error("training failed: {0}")]
    Train(#[from] OptimizerError),
    /// Results could not be written.
    #[error("cannot write results: {0}")]
    Io(#[from] std::io::Error),
}

fn parse_json(flag: &'static str, text: Option<&str>) -> Result<Value, CliError> {
    match text {
        None => Ok(Value::Null),
        Some(t) => serde_json::from_str(t)
            .map_err(|e| CliError::Arg { flag, source: ConfigError::Malformed(format!("not valid JSON: {e}")) }),
    }
}

/// Runs `rlx train`: builds the trainer, writes `params.json`, appends one
/// line per iteration to `result.json`, and stops at the stop criteria.
/// Returns the last result and the results directory.
///
/// # Errors
/// Bad arguments, build failures, training failures, or unwritable results.
pub async fn train(algorithm: &str, args: &TrainArgs) -> Result<(TrainResult, PathBuf), CliError> {
    let mut overrides = parse_json("--config", args.config.as_deref())?;
    if let Some(seed) = args.seed {
        if overrides.is_null() {
            overrides = json!({});
        }
        if let Some(obj) = overrides.as_object_mut() {
            obj.insert("seed".into(), json!(seed));
        }
    }
    let stop: StopCriteria = match parse_json("--stop", args.stop.as_deref())? {
        Value::Null => {
            let threshold = rlx_envs::spec(&args.env).map_err(BuildError::from)?.reward_threshold;
            StopCriteria { episode_reward_mean: threshold, ..Default::default() }
        }
        v => from_value(v).map_err(|source| CliError::Arg { flag: "--stop", source })?,
    };
    let (mut trainer, config) = build_trainer(algorithm, &args.env, &overrides).await.map_err(|e| match e {
        BuildError::Config(source) => CliError::Arg { flag: "--config", source },
        other => CliError::Build(other),
    })?;
    let dir = new_run_dir(&args.results_dir, &format!("{algorithm}_{}", args.env.replace('/', "-")))?;
    let mut writer =
        ResultsWriter::create(&dir, &json!({"run": algorithm, "env": args.env, "config": config, "stop": stop}))?;
    if stop.is_empty() {
        eprintln!("no --stop criteria and the env has no reward threshold: training until interrupted");
    }
    eprintln!("{algorithm} on {}: results in {}", args.env, dir.display());
    let mut progress = Progress::new();
    loop {
        let result = trainer.train().await?;
        writer.append(&result)?;
        progress.report(&result);
        if stop.should_stop(&result) {
            progress.finish(&result);
            return Ok((result, dir));
        }
    }
}

/// Creates and returns `parent/<name>_<UTC time>`, with `_2`, `_3`...
/// appended if a run started in the same second already took the name.
fn new_run_dir(parent: &std::path::Path, name: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
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

/// A spinner with the latest metrics on a terminal, one line per iteration otherwise.
struct Progress(Option<ProgressBar>);

impl Progress {
    fn new() -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("valid template"));
            bar.enable_steady_tick(Duration::from_millis(200));
            Self(Some(bar))
        } else {
            Self(None)
        }
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
        match &self.0 {
            Some(bar) => bar.set_message(Self::line(r)),
            None => println!("{}", Self::line(r)),
        }
    }

    fn finish(&mut self, r: &TrainResult) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
            println!("{}", Self::line(r));
        }
        println!(
            "done: mean return {} after {} env steps in {:.1} s",
            r.episode_reward_mean.map_or("-".into(), |v| format!("{v:.1}")),
            r.timesteps_total,
            r.time_total_s
        );
    }
}

/// Prints `error: ...` and returns a failure exit code.
pub fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

/// Entry point of a per-algorithm binary such as `rlx-ppo`: the arguments of
/// `rlx train` without `--run`.
pub async fn algorithm_main(algorithm: &'static str) -> ExitCode {
    use clap::{Args as _, FromArgMatches as _};
    let command = clap::Command::new(format!("rlx-{}", algorithm.to_lowercase())).version(env!("CARGO_PKG_VERSION"));
    let about = format!("Train {algorithm} on an env (the same as `rlx train --run {algorithm}`)");
    let matches = TrainArgs::augment_args(command).about(about).get_matches();
    let args = match TrainArgs::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    match train(algorithm, &args).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Entry point of the `rlx` binary.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Train { run, args } => match train(&run, &args).await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::List => {
            println!("algorithms:");
            for (name, about) in ALGORITHMS {
                println!("  {name:<26} {about}");
            }
            println!("envs (keyword arguments go in the config's \"env_config\"):");
            for spec in rlx_envs::specs() {
                println!("  {:<26} {}", spec.name, spec.description);
                let kwargs: Vec<&str> =
                    std::iter::once("max_episode_steps").chain(spec.kwargs.iter().copied()).collect();
                println!("  {:<26} env_config: {}", "", kwargs.join(", "));
            }
            ExitCode::SUCCESS
        }
        Command::Config { algorithm } => match default_config(&algorithm) {
            Ok(cfg) => {
                println!("{}", serde_json::to_string_pretty(&cfg).expect("JSON"));
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}
