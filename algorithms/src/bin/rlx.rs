//! The `rlx` command line: `rlx train --run PPO --env CartPole-v1`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::main().await
}
