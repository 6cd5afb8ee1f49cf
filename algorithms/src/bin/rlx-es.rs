//! `rlx-es --env ENV [--config JSON] [--stop JSON]`: ES alone, the same as
//! `rlx train --run ES`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::algorithm_main("ES").await
}
