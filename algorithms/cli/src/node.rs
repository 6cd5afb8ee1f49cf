//! `rlx node`: a worker node that drivers place evaluators on.

use crate::{CliError, NodeArgs};

/// `rlx node`: serves evaluators to drivers until Ctrl-C.
pub(crate) async fn node(args: NodeArgs) -> Result<(), CliError> {
    let cookie = crate::cookie::resolve(args.cookie.as_deref(), args.cookie_file.as_deref())?.ok_or_else(|| {
        CliError::Usage("a node needs a cookie: pass --cookie-file FILE (or set RLX_COOKIE, or --cookie SECRET)".into())
    })?;
    if args.max_frame_mib == 0 || args.max_frame_mib > 1024 {
        return Err(CliError::Usage(format!("--max-frame-mib {} is outside [1, 1024]", args.max_frame_mib)));
    }
    if args.max_connections == 0 {
        return Err(CliError::Usage("--max-connections must be at least 1".into()));
    }
    let mut resources = rlx_cluster::resources::NodeResources::detect();
    for (flag, value, amount) in
        [("--num-cpus", args.num_cpus, &mut resources.num_cpus), ("--num-gpus", args.num_gpus, &mut resources.num_gpus)]
    {
        match value {
            Some(v) if !v.is_finite() || v < 0.0 => {
                return Err(CliError::Usage(format!("{flag} {v}: expected a non-negative number")))
            }
            Some(v) => *amount = v,
            None => {}
        }
    }
    if let Some(text) = &args.resources {
        resources.custom = rlx_cluster::resources::NodeResources::parse_custom(text)
            .map_err(|e| CliError::Usage(format!("--resources {text}: {e}")))?;
    }
    if let Some(driver) = &args.join {
        rlx_cluster::node::check_join_address(driver).map_err(|e| CliError::Usage(format!("--join {e}")))?;
    }
    let config = rlx_cluster::NodeConfig {
        resources: resources.clone(),
        join: args.join.clone(),
        join_tls: args.tls_ca.map(|ca| rlx_cluster::DriverTls { ca, server_name: None, identity: None }),
        name: args.name,
        max_frame_bytes: args.max_frame_mib << 20,
        max_connections: args.max_connections,
        tls: args.tls.settings(),
        ..rlx_cluster::NodeConfig::new(args.listen, cookie)
    };
    let node = rlx_cluster::Node::start(config, crate::deploy::node_resolver())
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    // Tests and scripts read this line for the bound address.
    outln!("rlx node {} listening on {}", node.name, node.addr);
    outln!("offering {resources}");
    let _ = tokio::signal::ctrl_c().await;
    node.stop();
    Ok(())
}
