//! `rlx-a2c --env ENV [--config JSON] [--stop JSON]`: A2C alone, the
//! same as `rlx train --run A2C`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("A2C").await
}
