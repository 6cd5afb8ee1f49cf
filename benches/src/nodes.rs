//! Worker-node processes for the cluster benchmarks: a bench binary re-runs
//! itself as a node (with `RLX_BENCH_NODE` set), so no other binary has to
//! be built first. Each node serves rlx evaluators and an echo actor for
//! the messaging round trip. Nodes bind 127.0.0.1 port 0 and are killed
//! when their [`NodeProcess`] drops.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rlx_cluster::wire::{self, Protocol, Wire};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The cookie of bench nodes.
pub const COOKIE: &str = "rlx-bench";
/// The process group of each node's echo actor.
pub const ECHO_GROUP: &str = "rlx.bench.echo";
const NODE_ENV: &str = "RLX_BENCH_NODE";

/// The echo protocol: a seed in, the tiny batch of the messaging bench out.
pub struct EchoProtocol;
impl Protocol for EchoProtocol {
    const VARIANT: &'static str = "rlx.bench.echo.v1";
    type Request = u64;
    type Reply = Vec<f32>;
}

/// The tiny batch the messaging bench answers with: 8 CartPole observations.
pub fn answer(seed: u64) -> Vec<f32> {
    (0..32).map(|i| (seed + i) as f32).collect()
}

/// Answers each seed with [`answer`], encoded as rlx encodes every message.
struct Echo;

impl Actor for Echo {
    type Msg = Wire<EchoProtocol>;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, myself: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        ractor::pg::join(ECHO_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(())
    }

    async fn handle(&self, _: ActorRef<Self::Msg>, msg: Self::Msg, _: &mut ()) -> Result<(), ActorProcessingErr> {
        if let (Ok(seed), Some(reply)) = (wire::decode::<u64>(&msg.payload), msg.reply) {
            let _ = reply.send(wire::encode(&answer(seed))?);
        }
        Ok(())
    }
}

/// In a bench binary's `main`: if this process was started as a node,
/// serves until killed and returns `true`.
pub fn serve_if_node() -> bool {
    if std::env::var_os(NODE_ENV).is_none() {
        return false;
    }
    let runtime = crate::runtime();
    runtime.block_on(async {
        let config = rlx_cluster::NodeConfig::new("127.0.0.1:0".parse().expect("address"), COOKIE);
        let node = rlx_cluster::Node::start(config, rlx_cli::deploy::node_resolver()).await.expect("node starts");
        Actor::spawn(None, Echo, ()).await.expect("echo actor starts");
        println!("listening on {}", node.addr);
        std::future::pending::<()>().await;
    });
    true
}

/// A node in a child process of this bench binary.
pub struct NodeProcess {
    child: Child,
    /// The address it listens on.
    pub addr: String,
}

impl NodeProcess {
    /// Starts a node and waits for its address.
    pub fn start() -> Self {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .env(NODE_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a node process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).expect("node output");
        let addr =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("node said {line:?}")).to_string();
        Self { child, addr }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
