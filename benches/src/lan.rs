//! A private network of "machines" on this one: network namespaces on one
//! bridge, each with an address of `10.79.NET.0/24`, for the benchmark
//! runs that need real hosts (`rlx-chaos`, `rlx-swarm`). Hosts talk to each
//! other across the bridge and to nothing else. A partition takes a host's
//! link down inside its namespace: every packet either way is dropped, and
//! no reset tells the other side, as when a machine's network goes away
//! (the cut-off host's own new connections fail at once: it has no route).
//!
//! It needs root and iproute2 (`ip`). Dropping the [`Lan`] deletes every
//! namespace, veth and the bridge of its `net`; a run that died before that
//! leaves them, and the next [`Lan::create`] with the same `net` removes
//! them first, whatever hosts they had.

use std::process::{Command, Stdio};

/// The namespaces, the bridge and their addresses.
pub struct Lan {
    prefix: String,
    bridge: String,
    hosts: Vec<String>,
    net: u8,
}

impl Lan {
    /// A bridge and one namespace per name in `hosts` (host `i` gets
    /// `10.79.NET.(i+1)`), each with its link and loopback up.
    ///
    /// # Errors
    /// A step that failed (not root, no `ip`, a bad name), named with its
    /// `ip` command line; what was made by then is removed again.
    pub fn create(net: u8, hosts: &[&str]) -> Result<Self, String> {
        if hosts.len() > 250 {
            return Err(format!("{} hosts: a /24 holds 250 at most here", hosts.len()));
        }
        let prefix = format!("rlx{net}");
        let lan =
            Self { bridge: format!("{prefix}br"), hosts: hosts.iter().map(|h| h.to_string()).collect(), prefix, net };
        lan.remove();
        ip(&["link", "add", &lan.bridge, "type", "bridge"])?;
        ip(&["link", "set", &lan.bridge, "up"])?;
        for (i, host) in hosts.iter().enumerate() {
            let ns = lan.namespace(host);
            let outside = format!("{}v{i}", lan.prefix);
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
            ip(&["link", "set", &outside, "master", &lan.bridge, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", lan.ip(host)), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(lan)
    }

    /// The address of `host`.
    ///
    /// # Panics
    /// If `host` is not one of this network's.
    pub fn ip(&self, host: &str) -> String {
        let i = self.hosts.iter().position(|h| h == host).unwrap_or_else(|| panic!("no host {host}"));
        format!("10.79.{}.{}", self.net, i + 1)
    }

    /// `program` run on `host` (`ip netns exec` execs it, so the child's
    /// process id is the program's own and a signal reaches it directly).
    pub fn command(&self, host: &str, program: &std::path::Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.namespace(host)]).arg(program);
        command
    }

    /// Cuts `host` off (`up: false`), or heals it.
    ///
    /// # Errors
    /// The `ip` command failed.
    pub fn set_link(&self, host: &str, up: bool) -> Result<(), String> {
        ip(&["-n", &self.namespace(host), "link", "set", "eth0", if up { "up" } else { "down" }])
    }

    fn namespace(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    /// Deletes every namespace, veth and bridge of this `net`: the veths
    /// by name too (deleting one end removes the pair at once, while a
    /// namespace's own teardown in the kernel may lag behind `netns del`).
    fn remove(&self) {
        let listed = |args: &[&str]| {
            let out = Command::new("ip").args(args).stdin(Stdio::null()).output().ok();
            out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
        };
        let veth = format!("{}v", self.prefix);
        for link in listed(&["-o", "link", "show"]).lines().filter_map(|l| l.split(": ").nth(1)) {
            let name = link.split('@').next().unwrap_or(link);
            if name.strip_prefix(&veth).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                let _ = quiet(&["link", "del", name]);
            }
        }
        let ours = format!("{}-", self.prefix);
        for ns in listed(&["netns", "list"]).lines().filter_map(|l| l.split_whitespace().next()) {
            if ns.starts_with(&ours) {
                let _ = quiet(&["netns", "del", ns]);
            }
        }
        let _ = quiet(&["link", "del", &self.bridge]);
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Runs `ip ARGS`; the error names the command and what `ip` said.
fn ip(args: &[&str]) -> Result<(), String> {
    match Command::new("ip").args(args).stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`ip {}`: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("cannot run `ip` (install iproute2; run as root): {e}")),
    }
}

fn quiet(args: &[&str]) -> std::io::Result<std::process::ExitStatus> {
    Command::new("ip").args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status()
}
