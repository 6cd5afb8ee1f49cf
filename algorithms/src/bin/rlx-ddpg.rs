//! `rlx-ddpg --env ENV [--config JSON] [--stop JSON]`: DDPG alone, the
//! same as `rlx train --run DDPG`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("DDPG").await
}
