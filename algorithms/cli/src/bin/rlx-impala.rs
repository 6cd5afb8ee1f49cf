//! `rlx-impala --env ENV [--config JSON] [--stop JSON]`: IMPALA alone, the
//! same as `rlx train --run IMPALA`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("IMPALA"))
}
