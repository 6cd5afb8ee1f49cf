//! # rlx-cli: the `rlx` command line
//!
//! `rlx train` mirrors `rllib train`: the same flags, RLlib-shaped YAML
//! experiment files, a results directory per run (`params.json`,
//! `result.json`, `progress.csv`, `learning_curve.png`) and checkpoints.
//! Everything a run writes is on disk before the next iteration starts, so
//! a killed run loses at most the iteration in progress.
//!
//! The crate also holds what places a run's evaluators outside the driver
//! ([`deploy`]: worker nodes and the actix backend) and `rlx node`, so the
//! algorithm library ([`rlx_algorithms`]) stays free of the command line,
//! the cluster and the second actor library.
//!
//! | module | what |
//! |---|---|
//! | [`args`] | the flags |
//! | [`experiment`] | flags and experiment files resolved into runs |
//! | [`train`] | `rlx train`: the loop, results, checkpoints |
//! | [`progress`] | the progress display |
//! | [`results`] | `result.json`, `progress.csv`, `learning_curve.png` |
//! | [`retention`] | which checkpoints to keep, and the best |
//! | [`tensorboard`] | the TensorBoard event file |
//! | [`tune`] | `rlx tune`: trials, search spaces, ASHA |
//! | [`plot`] | learning curves as PNG (`rlx plot`) |
//! | [`rollout`] | `rlx rollout` |
//! | [`deploy`] | evaluators on worker nodes or actix actors |
//! | [`node`] | `rlx node` |
#![warn(missing_docs)]

// First: its macros (`out!`, `outln!`) serve the modules below.
#[macro_use]
mod output;
pub mod arena;
pub mod args;
pub mod cookie;
pub mod dataset;
pub mod deploy;
pub mod experiment;
pub mod export;
mod node;
pub mod play;
pub mod plot;
pub(crate) mod progress;
pub mod results;
pub mod retention;
pub mod rollout;
pub mod serve;
pub mod tensorboard;
pub mod train;
pub mod tune;

pub use args::{
    ArenaArgs, CheckpointMoves, Cli, ExportArgs, ExportFormat, NodeArgs, PlayArgs, PlotArgs, RolloutArgs, ServeArgs,
    TrainArgs, TuneArgs,
};
pub use deploy::build_deployed_trainer;

/// The old name of [`build_deployed_trainer`], which says what sets it
/// apart from `rlx_algorithms::build_trainer` (it reads the deployment
/// keys).
///
/// # Errors
/// As [`build_deployed_trainer`].
#[deprecated(since = "0.1.0", note = "renamed to `build_deployed_trainer`")]
pub async fn build_trainer(
    algorithm: &str,
    env: &str,
    overrides: &serde_json::Value,
) -> Result<(rlx::Trainer, serde_json::Value), rlx_algorithms::BuildError> {
    build_deployed_trainer(algorithm, env, overrides).await
}
pub use experiment::{experiments, Experiment};
pub use play::{play, PlayOutcome};
pub use rollout::{rollout, RolloutSummary};
pub use train::{train, Outcome};

use args::{Command, DatasetCommand};
use clap::Parser;
use rlx::checkpoint::CheckpointError;
use rlx::config::ConfigError;
use rlx::OptimizerError;
use rlx_algorithms::{config_docs, default_config, BuildError, ALGORITHMS};
use serde_json::json;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

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
    /// The restored run's `result.json` could not be read.
    #[error("cannot read the restored run's history: {0}")]
    History(std::io::Error),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
    /// An episode of `rlx rollout` failed.
    #[error("rollout: {0}")]
    Rollout(String),
    /// The checkpoint's network failed in `rlx play`.
    #[error("play: {0}")]
    Play(String),
    /// `rlx export` could not export the policy, or its model disagreed.
    #[error("export: {0}")]
    Export(String),
}

pub(crate) fn arg_error(flag: impl Into<String>, source: ConfigError) -> CliError {
    CliError::Arg { flag: flag.into(), source }
}

/// Prints `rlx config ALGO`: YAML (usable as an experiment file's `config:`
/// block) with each key's documentation as a comment above it.
fn print_config(algorithm: &str, json_only: bool) -> Result<(), CliError> {
    let cfg = default_config(algorithm)?;
    if json_only {
        outln!("{}", serde_json::to_string_pretty(&cfg).expect("JSON"));
        return Ok(());
    }
    outln!("# {algorithm}'s default config. Every key is optional: override with");
    outln!("# --config '{{\"lr\": 0.0005}}' or under `config:` in a --config-file.");
    for (key, doc) in config_docs(algorithm)? {
        outln!();
        for line in doc.lines() {
            outln!("# {}", line.trim());
        }
        if key == "model" && cfg[key].is_object() {
            // The network's keys, each with its own documentation.
            outln!("model:");
            for (sub, doc) in rlx_algorithms::model_docs() {
                for line in doc.lines() {
                    outln!("  # {}", line.trim());
                }
                let value = serde_yaml_ng::to_string(&json!({ sub: cfg[key][sub] })).expect("YAML");
                out!("  {}", value.trim_end().replace('\n', "\n  "));
                outln!();
            }
            continue;
        }
        let value = serde_yaml_ng::to_string(&json!({ key: cfg[key] })).expect("YAML");
        out!("{value}");
    }
    Ok(())
}

fn print_list() {
    outln!("algorithms:");
    for algorithm in ALGORITHMS {
        outln!("  {:<26} {}", algorithm.name(), algorithm.about());
    }
    outln!("envs (keyword arguments go in the config's \"env_config\"):");
    for spec in rlx_envs::specs() {
        let kwargs = if spec.kwargs.is_empty() { "none".to_string() } else { spec.kwargs.join(", ") };
        outln!("  {:<26} {} [env_config: {kwargs}]", spec.name, spec.description);
    }
    outln!(
        "  {:<26} any Gymnasium env, in Python worker processes ($RLX_PYTHON or python3, with gymnasium); `gym:my_pkg.envs:MyEnv-v0` imports my_pkg.envs first; ALE/ ids get DeepMind's Atari preprocessing [env_config: gymnasium.make's keyword arguments, and `atari`]",
        "gym:<id>"
    );
    outln!(
        "  {:<26} any PettingZoo env (multi-agent), AEC or parallel, a Python worker process per copy (with pettingzoo); `pettingzoo:my_pkg.game` takes a module's parallel_env() or env() [env_config: the env's keyword arguments]",
        "pettingzoo:<id>"
    );
    outln!(
        "  {:<26} a server that external applications connect to (PolicyClient, Rust or Python), on this address [env_config: spaces_of, cookie_file]",
        "external:<host:port>"
    );
}

/// Prints `error: ...` and returns a failure exit code.
pub fn fail(e: impl std::fmt::Display) -> ExitCode {
    errln!("error: {e}");
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

/// Runs a binary's main future on a multi-thread tokio runtime that the
/// actix backend shares, so the process has one runtime.
pub fn run_binary(main: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    keep_freed_memory();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => return fail(format!("cannot start the tokio runtime: {e}")),
    };
    rlx_cluster::actix_backend::share_runtime(runtime.clone());
    runtime.block_on(main)
}

/// Has glibc keep freed blocks of up to 32 MiB in the process instead of
/// unmapping them. By default it serves blocks over 128 KiB (a threshold it
/// raises only as it goes) with `mmap` and hands them back on `free`, so a
/// learner that allocates and frees the same tensors every update spends
/// its time in page faults: DQN on MinAtar Breakout spent a median 6.0 s
/// of 18.8 s in the kernel, 1.7 s of 14.3 s with these settings
/// (`book/src/performance.md`). Up to 256 MiB of free heap stays mapped.
/// A `GLIBC_TUNABLES` that sets `glibc.malloc` values is left to rule.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc")) {
        // SAFETY: mallopt only sets two of the allocator's thresholds; it
        // runs before this process starts any thread.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    }
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
    init_logging();
    let cli = Cli::parse();
    // SIGPIPE stays ignored (Rust's default): see `output`.
    if matches!(
        cli.command,
        Command::Rollout(_)
            | Command::Export(_)
            | Command::Play(_)
            | Command::Arena(_)
            | Command::List
            | Command::Config { .. }
            | Command::Plot(_)
            | Command::Dataset(_)
    ) {
        output::exit_when_closed();
    }
    match cli.command {
        Command::Train { run, args } => exit_code(train(run.as_deref(), &args).await),
        Command::Rollout(args) => match rollout(&args) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Serve(args) => match serve::serve(&args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Export(args) => match export::export(&args) {
            Ok(s) => {
                let (path, p) = (s.path.display(), &s.parity);
                outln!("wrote {path} ({} bytes); checked on {} observations ({}): {p}", s.bytes, p.rows, s.source);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Arena(args) => match arena::arena(&args) {
            Ok(table) => {
                out!("{}", arena::render(&table));
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Play(args) => match play(&args, &mut std::io::stdin().lock()) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Plot(args) => match plot::plot_runs(&args.dirs, &args.out, args.size) {
            Ok(()) => {
                outln!("wrote {}", args.out.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Node(args) => match node::node(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Tune(args) => match tune::tune(&args).await {
            Ok(outcome) if outcome.interrupted => ExitCode::from(130),
            Ok(outcome) => {
                // A search with a failed trial is not a success for a script.
                let failed = outcome.trials.iter().filter(|(_, s)| *s == tune::Status::Error).count();
                match failed {
                    0 => ExitCode::SUCCESS,
                    n => fail(format!(
                        "{n} of {} trials failed (see the table above and {})",
                        outcome.trials.len(),
                        outcome.dir.join("summary.csv").display()
                    )),
                }
            }
            Err(e) => fail(e),
        },
        Command::Dataset(DatasetCommand::Info { paths }) => match dataset::print_info(&paths) {
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
