//! `rlx-test-node`: a worker node whose CartPole panics on purpose, for
//! `tests/cluster.rs` (`Node::start_faulty`), which runs it through
//! `env!("CARGO_BIN_EXE_rlx-test-node")`. Not a user command: it is built
//! only with the `test-node` feature, which this crate's own dev-dependency
//! on itself turns on for `cargo test`, so `cargo build` and `cargo install`
//! leave it out.
//!
//! ```text
//! rlx-test-node <cookie> <panic-at>
//! ```
//!
//! `<panic-at>` is `N` (every env of the node panics at the node's `N`-th
//! env step, counted over all of them), `always` (at every 50th step) or
//! `stall-N` (the `N`-th step blocks its thread for 8 s instead).
//! It prints `listening on <addr>` once it serves on 127.0.0.1 (a free
//! port), and exits by itself after 10 minutes if its parent never kills it.

#[path = "../common/mod.rs"]
mod common;

use rlx_algorithms::{BuildError, EnvMaker};
use rlx_cli::deploy;
use serde_json::Value;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cookie, panic_at] = args.as_slice() else {
        eprintln!("usage: rlx-test-node <cookie> <panic-at: N | always | stall-N>");
        std::process::exit(2);
    };
    let number = |n: &str| -> usize { n.parse().unwrap_or_else(|e| panic!("panic-at {n:?}: {e}")) };
    let make_env = match panic_at.as_str() {
        "always" => common::faulty(|n| n % 50 == 0),
        n if n.starts_with("stall-") => common::stalling(number(&n["stall-".len()..]), Duration::from_secs(8)),
        n => {
            let at = number(n);
            common::faulty(move |n| n == at)
        }
    };
    let envs: deploy::EnvResolver =
        Arc::new(move |_name: &str, _: &Value| -> Result<EnvMaker, BuildError> { Ok(make_env.clone()) });
    rlx_cli::init_logging();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let config = rlx_cluster::NodeConfig::new("127.0.0.1:0".parse().expect("address"), cookie);
        let node = rlx_cluster::Node::start(config, deploy::node_resolver_with(envs)).await.expect("node starts");
        println!("listening on {}", node.addr);
        std::io::stdout().flush().expect("stdout");
        // The parent kills this process; the timeout only ends an orphan.
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
}
