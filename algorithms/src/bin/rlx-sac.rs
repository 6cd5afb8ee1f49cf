//! `rlx-sac --env ENV [--config JSON] [--stop JSON]`: SAC alone, the
//! same as `rlx train --run SAC`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("SAC").await
}
