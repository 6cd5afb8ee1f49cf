//! `rlx-appo --env ENV [--config JSON] [--stop JSON]`: APPO alone, the
//! same as `rlx train --run APPO`.

fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::run_binary(rlx_algorithms::cli::algorithm_main("APPO"))
}
