//! `rlx-ppo --env CartPole-v1 [--config JSON] [--stop JSON]`: PPO alone,
//! the same as `rlx train --run PPO`.

use clap::Parser;

/// Train PPO on an env.
#[derive(Parser)]
#[command(name = "rlx-ppo", version, about)]
struct Cli {
    #[command(flatten)]
    args: rlx_algorithms::cli::TrainArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match rlx_algorithms::cli::train("PPO", &cli.args).await {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => rlx_algorithms::cli::fail(e),
    }
}
