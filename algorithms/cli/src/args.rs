//! The command line's flags, as clap reads them.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `rlx`: train and inspect reinforcement-learning agents.
#[derive(Parser, Debug)]
#[command(name = "rlx", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    /// Play a board game against an AlphaZero checkpoint in the terminal.
    Play(PlayArgs),
    /// Rate AlphaZero checkpoints against each other and fixed opponents:
    /// a round robin on their board game, and an Elo table.
    Arena(ArenaArgs),
    /// Serve a checkpoint's policy over HTTP (`POST /v1/actions`, JSON or
    /// MessagePack), batching concurrent requests; `/healthz`, `/metrics`.
    Serve(ServeArgs),
    /// Write a checkpoint's acting policy as an ONNX model (observation
    /// filter, network and greedy action head), checked against rlx.
    Export(ExportArgs),
    /// Overlay the learning curves of several runs in one PNG.
    Plot(PlotArgs),
    /// Run a worker node that drivers place evaluators on
    /// (`rlx train ... --nodes HOST:PORT --cookie SECRET`). Runs until Ctrl-C.
    Node(NodeArgs),
    /// Search hyperparameters: trials of an experiment file whose config
    /// values may be `grid_search`, `choice`, `uniform` or `loguniform`,
    /// run concurrently, with optional ASHA early stopping.
    Tune(TuneArgs),
    /// Inspect datasets of experience (written with the config key `output`).
    #[command(subcommand)]
    Dataset(DatasetCommand),
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

/// `rlx dataset ...`.
#[derive(Subcommand, Debug)]
pub(crate) enum DatasetCommand {
    /// Print a dataset's spaces, columns, files, episodes, steps and
    /// return statistics.
    Info {
        /// Dataset directories (rlx's or Minari's), globs of episode files, or files.
        #[arg(required = true)]
        paths: Vec<String>,
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
    /// Keep only the best N checkpoints by --checkpoint-score-attr, and the
    /// newest (default: keep every checkpoint).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub keep_checkpoints_num: Option<usize>,
    /// The result.json metric that ranks checkpoints, e.g.
    /// `evaluation/episode_reward_mean` (higher is better; a `min-` prefix
    /// for lower). Default: the newest are best.
    #[arg(long)]
    pub checkpoint_score_attr: Option<String>,
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
    /// Accept worker nodes started with `rlx node --join` on this IP:PORT,
    /// during the whole run; same as the config key `node_listen`.
    #[arg(long)]
    pub node_listen: Option<String>,
    /// The worker nodes' cookie (or the env var RLX_COOKIE); never written
    /// to results. Visible to other local users: prefer --cookie-file.
    #[arg(long)]
    pub cookie: Option<String>,
    /// A file holding the worker nodes' cookie (mode 600).
    #[arg(long, conflicts_with = "cookie")]
    pub cookie_file: Option<PathBuf>,
    /// Connect to the nodes over TLS, trusting certificates this CA (PEM)
    /// signed; same as the config key `cluster.tls.ca`.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// The driver's certificate (PEM), for nodes that require one.
    #[arg(long, requires = "tls_key", requires = "tls_ca")]
    pub tls_cert: Option<PathBuf>,
    /// The driver's private key (PEM), with --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The name the nodes' certificates carry (default: each node's host).
    #[arg(long, requires = "tls_ca")]
    pub tls_server_name: Option<String>,
}

/// Arguments of `rlx node`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Address to accept drivers on (port 0 picks a free port; the node prints the address).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: std::net::SocketAddr,
    /// Shared secret: drivers with another cookie are refused (or the env
    /// var RLX_COOKIE). Visible to other local users: prefer --cookie-file.
    #[arg(long)]
    pub cookie: Option<String>,
    /// A file holding the shared secret (mode 600).
    #[arg(long, conflicts_with = "cookie")]
    pub cookie_file: Option<PathBuf>,
    /// The node's name, unique in the cluster (default: node-PORT-PID).
    #[arg(long)]
    pub name: Option<String>,
    /// Largest message accepted, in MiB.
    #[arg(long, default_value_t = rlx_cluster::DEFAULT_MAX_FRAME_BYTES >> 20)]
    pub max_frame_mib: u64,
    /// Connections held at once (each driver needs one); more are closed as
    /// they are accepted.
    #[arg(long, default_value_t = rlx_cluster::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// TLS for the drivers' connections.
    #[command(flatten)]
    pub tls: ServerTlsArgs,
    /// CPUs offered to drivers' evaluators (default: the machine's
    /// available parallelism).
    #[arg(long)]
    pub num_cpus: Option<f64>,
    /// GPUs offered (default: those the NVIDIA driver lists).
    #[arg(long)]
    pub num_gpus: Option<f64>,
    /// Custom resources offered, as a JSON object of label to amount, e.g.
    /// '{"sim_license": 2}' (evaluators ask with custom_resources_per_worker).
    #[arg(long)]
    pub resources: Option<String>,
    /// Join the driver listening on HOST:PORT (`rlx train --node-listen`),
    /// and dial it again whenever it is gone, for as long as the node runs.
    #[arg(long)]
    pub join: Option<String>,
    /// With --join over TLS: trust the driver's certificate if this CA
    /// (PEM) signed it (checked against the host of --join).
    #[arg(long, requires = "join")]
    pub tls_ca: Option<PathBuf>,
}

/// Arguments of `rlx tune`.
#[derive(Args, Debug, Clone, Default)]
pub struct TuneArgs {
    /// The experiment file (YAML or JSON): one experiment with `run`, `env`,
    /// `stop`, a `config` whose values may be search domains, and
    /// optionally `num_samples` and `scheduler` (see the book's
    /// "Hyperparameter search" page).
    #[arg(long, short = 'f')]
    pub config_file: Option<PathBuf>,
    /// Directory under which the search's directory is created.
    #[arg(long, default_value = "rlx_results")]
    pub results_dir: PathBuf,
    /// Trials running at once (default: the machine's cores).
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Resume the search in this directory (its unfinished trials from
    /// their checkpoints).
    #[arg(long, conflicts_with = "config_file")]
    pub restore: Option<PathBuf>,
    /// Seed of the random search domains.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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
    /// Record the first episode as a video: `out.gif` (always) or
    /// `out.mp4` (through ffmpeg), one frame per step.
    #[arg(long, value_name = "FILE")]
    pub video: Option<PathBuf>,
    /// The video's frames per second.
    #[arg(long, default_value_t = 30, requires = "video")]
    pub fps: u32,
    /// Sample actions from the policy instead of taking the most likely one.
    #[arg(long)]
    pub explore: bool,
    /// Seed of the first episode's reset (episode i uses seed + i).
    #[arg(long, default_value_t = 1_000_000)]
    pub seed: u64,
    /// Given a run directory: its `latest` checkpoint, or its `best` by the
    /// run's checkpoint_score_attr.
    #[arg(long, value_enum, default_value_t = Pick::Latest)]
    pub pick: Pick,
}

/// Arguments of `rlx export`.
#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// A checkpoint directory, or a run directory (its newest checkpoint).
    pub checkpoint: PathBuf,
    /// Given a run directory: its `latest` checkpoint, or its `best` by the
    /// run's checkpoint_score_attr.
    #[arg(long, value_enum, default_value_t = Pick::Latest)]
    pub pick: Pick,
    /// The model's format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Onnx)]
    pub format: ExportFormat,
    /// The file to write.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// For a multi-agent run: the id of the policy to export.
    #[arg(long)]
    pub policy: Option<String>,
    /// Give the model an `action_mask` input (discrete actions; 0 marks an
    /// illegal action).
    #[arg(long)]
    pub action_mask: bool,
    /// Observations on which the model must agree with rlx before it is
    /// written: recorded from the env (drawn from the observation space
    /// for a multi-agent env or a game).
    #[arg(long, default_value_t = 1000)]
    pub check_rows: usize,
}

/// Arguments of `rlx serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// A checkpoint directory, or a run directory (its newest checkpoint).
    pub checkpoint: PathBuf,
    /// The address to listen on (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: String,
    /// Given a run directory: its `latest` checkpoint, or its `best`.
    #[arg(long, value_enum, default_value_t = Pick::Latest)]
    pub pick: Pick,
    /// Watch the run directory and serve each newer checkpoint as it
    /// appears (between two batches: no request is dropped).
    #[arg(long)]
    pub follow: bool,
    /// How often --follow looks, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub follow_interval_ms: u64,
    /// Rows at which a batch of concurrent requests runs at once.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// How long the first request of a batch waits for others, in
    /// microseconds (0: no batching beyond what is already queued).
    #[arg(long, default_value_t = 200)]
    pub batch_wait_us: u64,
    /// The most observation rows one request may hold (more: 413).
    #[arg(long, default_value_t = 1024)]
    pub max_request_rows: usize,
    /// The largest request body in bytes (more: 413).
    #[arg(long, default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// Require `Authorization: Bearer TOKEN` on /v1/actions.
    #[arg(long)]
    pub token: Option<String>,
    /// Seed of the policy's sampling for `"explore": true`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// HTTPS: the same files as `rlx node`'s TLS.
    #[command(flatten)]
    pub tls: ServerTlsArgs,
}

/// The TLS flags of a server (`rlx node`, `rlx serve`).
#[derive(Args, Debug, Clone, Default)]
pub struct ServerTlsArgs {
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: accept only peers (a node's drivers, the server's
    /// clients) presenting a certificate this CA (PEM) signed.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

impl ServerTlsArgs {
    /// The TLS settings, if --tls-cert and --tls-key are given.
    pub fn settings(&self) -> Option<rlx_cluster::NodeTls> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(rlx_cluster::NodeTls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        }
    }
}

/// Formats `rlx export` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// ONNX (opset 17).
    #[default]
    Onnx,
}

/// Arguments of `rlx play`.
#[derive(Args, Debug, Clone)]
pub struct PlayArgs {
    /// A checkpoint directory, or a run directory (its newest checkpoint).
    pub checkpoint: PathBuf,
    /// Your seat: 0 moves first, 1 second.
    #[arg(long, default_value_t = 0)]
    pub seat: usize,
    /// How the checkpoint moves.
    #[command(flatten)]
    pub moves: CheckpointMoves,
}

/// How a board-game checkpoint moves in `rlx play` and `rlx arena`.
#[derive(Args, Debug, Clone)]
pub struct CheckpointMoves {
    /// Simulations per move of the checkpoint's search (default: its run's
    /// `num_simulations`).
    #[arg(long)]
    pub simulations: Option<usize>,
    /// The checkpoint moves with its network alone (its most probable
    /// legal move), without search.
    #[arg(long)]
    pub no_search: bool,
    /// Seed of the random choices: the search's among equals, the arena's
    /// openings.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Arguments of `rlx arena`.
#[derive(Args, Debug, Clone)]
pub struct ArenaArgs {
    /// AlphaZero checkpoint directories, or run directories (their newest
    /// checkpoint), all of one game.
    pub checkpoints: Vec<PathBuf>,
    /// A fixed opponent to add: `random`, `mcts_<simulations>` (pure MCTS
    /// with random rollouts) or `minimax` (small games only); repeatable.
    #[arg(long = "opponent")]
    pub opponents: Vec<String>,
    /// Games between every two players, half with each moving first.
    #[arg(long, default_value_t = 20)]
    pub games: usize,
    /// Plies of uniformly random moves that open each two games (one with
    /// each player first): without them two checkpoints, which choose
    /// alike every time, would play the same two games over and over.
    #[arg(long, default_value_t = 2)]
    pub opening_plies: usize,
    /// How every checkpoint moves.
    #[command(flatten)]
    pub moves: CheckpointMoves,
    /// Also write the table and every pairing's games as JSON to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

/// Which checkpoint of a run directory `rlx rollout` plays.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pick {
    /// The newest.
    #[default]
    Latest,
    /// The best by the run's `checkpoint_score_attr`.
    Best,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_size_parses() {
        assert_eq!(parse_size("800x500"), Ok((800, 500)));
        assert!(parse_size("800").is_err());
        assert!(parse_size("5x5").unwrap_err().contains("[100, 10000]"));
    }
}

/// The experiment-file flag as the user typed it, `-f` or `--config-file`,
/// for error messages (clap does not tell which form matched).
pub(crate) fn config_file_flag() -> &'static str {
    let short = std::env::args().skip(1).any(|a| a == "-f" || (a.starts_with("-f") && !a.starts_with("--")));
    if short {
        "-f"
    } else {
        "--config-file"
    }
}
