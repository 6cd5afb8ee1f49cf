//! `rlx-td3 --env ENV [--config JSON] [--stop JSON]`: TD3 alone, the
//! same as `rlx train --run TD3`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("TD3"))
}
