//! `rlx-dqn --env ENV [--config JSON] [--stop JSON]`: DQN alone, the
//! same as `rlx train --run DQN`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("DQN"))
}
