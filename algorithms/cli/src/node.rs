//! `rlx node`: a worker node that drivers place evaluators on.

use crate::{CliError, NodeArgs};

/// `rlx node`: serves evaluators to drivers until Ctrl-C.
pub(crate) async fn node(args: NodeArgs) -> Result<(), CliError> {
    let cookie = args
        .cookie
        .or_else(|| std::env::var("RLX_COOKIE").ok())
        .ok_or_else(|| CliError::Usage("a node needs a cookie: pass --cookie SECRET (or set RLX_COOKIE)".into()))?;
    if args.max_frame_mib == 0 || args.max_frame_mib > 1024 {
        return Err(CliError::Usage(format!("--max-frame-mib {} is outside [1, 1024]", args.max_frame_mib)));
    }
    let config = rlx_cluster::NodeConfig {
        listen: args.listen,
        cookie,
        name: args.name,
        max_frame_bytes: args.max_frame_mib << 20,
    };
    let node = rlx_cluster::Node::start(config, crate::deploy::node_resolver())
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    // Tests and scripts read this line for the bound address.
    println!("rlx node {} listening on {}", node.name, node.addr);
    let _ = tokio::signal::ctrl_c().await;
    node.stop();
    Ok(())
}
