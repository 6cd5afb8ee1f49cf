//! `rlx-es --env ENV [--config JSON] [--stop JSON]`: ES alone, the same as
//! `rlx train --run ES`.

fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::run_binary(rlx_algorithms::cli::algorithm_main("ES"))
}
