//! `rlx-pbt --env ENV [--config JSON] [--stop JSON]`: population-based
//! training alone, the same as `rlx train --run PBT`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("PBT"))
}
