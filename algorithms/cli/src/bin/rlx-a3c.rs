//! `rlx-a3c --env ENV [--config JSON] [--stop JSON]`: A3C alone, the
//! same as `rlx train --run A3C`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("A3C"))
}
