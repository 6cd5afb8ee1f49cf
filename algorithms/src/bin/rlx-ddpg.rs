//! `rlx-ddpg --env ENV [--config JSON] [--stop JSON]`: DDPG alone, the
//! same as `rlx train --run DDPG`.

fn main() -> std::process::ExitCode {
    rlx_algorithms::cli::run_binary(rlx_algorithms::cli::algorithm_main("DDPG"))
}
