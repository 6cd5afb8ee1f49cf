//! `rlx-sac --env ENV [--config JSON] [--stop JSON]`: SAC alone, the
//! same as `rlx train --run SAC`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("SAC"))
}
