//! `rlx-a2c --env ENV [--config JSON] [--stop JSON]`: A2C alone, the
//! same as `rlx train --run A2C`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("A2C"))
}
