//! `rlx-es --env ENV [--config JSON] [--stop JSON]`: ES alone, the same as
//! `rlx train --run ES`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("ES"))
}
