//! `rlx-apex --env ENV [--config JSON] [--stop JSON]`: Ape-X DQN alone, the
//! same as `rlx train --run APEX`.

fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::run_binary(rlx_algorithms::cli::algorithm_main("APEX"))
}
