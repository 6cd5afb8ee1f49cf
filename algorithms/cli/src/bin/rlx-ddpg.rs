//! `rlx-ddpg --env ENV [--config JSON] [--stop JSON]`: DDPG alone, the
//! same as `rlx train --run DDPG`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("DDPG"))
}
