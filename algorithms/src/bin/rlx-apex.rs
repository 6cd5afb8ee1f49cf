//! `rlx-apex --env ENV [--config JSON] [--stop JSON]`: Ape-X DQN alone, the
//! same as `rlx train --run APEX`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("APEX").await
}
