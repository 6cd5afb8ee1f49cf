//! `rlx-ars --env ENV [--config JSON] [--stop JSON]`: ARS alone, the same as
//! `rlx train --run ARS`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("ARS"))
}
