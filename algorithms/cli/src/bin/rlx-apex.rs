//! `rlx-apex --env ENV [--config JSON] [--stop JSON]`: Ape-X DQN alone, the
//! same as `rlx train --run APEX`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("APEX"))
}
