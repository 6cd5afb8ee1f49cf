//! The `rlx` command line: `rlx train --run PPO --env CartPole-v1`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::main())
}
