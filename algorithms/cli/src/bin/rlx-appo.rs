//! `rlx-appo --env ENV [--config JSON] [--stop JSON]`: APPO alone, the
//! same as `rlx train --run APPO`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("APPO"))
}
