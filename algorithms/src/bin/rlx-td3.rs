//! `rlx-td3 --env ENV [--config JSON] [--stop JSON]`: TD3 alone, the
//! same as `rlx train --run TD3`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("TD3").await
}
