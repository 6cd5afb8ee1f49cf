//! `rlx-pg --env ENV [--config JSON] [--stop JSON]`: PG alone, the
//! same as `rlx train --run PG`.

fn main() -> std::process::ExitCode {
    rlx_cli::run_binary(rlx_cli::algorithm_main("PG"))
}
