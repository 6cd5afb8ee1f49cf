//! `rlx-ppo --env ENV [--config JSON] [--stop JSON]`: PPO alone, the
//! same as `rlx train --run PPO`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("PPO"))
}
