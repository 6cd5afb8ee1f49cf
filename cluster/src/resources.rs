//! What a node offers and what an evaluator asks for: CPUs, GPUs, memory
//! and custom labels, in the shape of Ray's resources (RLlib's
//! `num_cpus_per_env_runner`, `num_gpus_per_env_runner` and
//! `custom_resources_per_env_runner` are requests against them).
//!
//! A node advertises its [`NodeResources`] when a driver admits it; the
//! driver keeps what each node has left and places an evaluator only where
//! its [`ResourceRequest`] fits ([`Placing`] says how to choose, and what to
//! do when nothing fits).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// What a node offers its drivers' evaluators.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeResources {
    /// CPUs (`--num-cpus`; default: the machine's available parallelism).
    pub num_cpus: f64,
    /// GPUs (`--num-gpus`; default: those the NVIDIA driver lists).
    pub num_gpus: f64,
    /// Memory in bytes (the machine's total; informative, not placed on).
    pub memory_bytes: u64,
    /// Custom labels with amounts (`--resources '{"sim_license": 2}'`).
    pub custom: BTreeMap<String, f64>,
}

impl NodeResources {
    /// This machine: its available parallelism, the GPUs the NVIDIA driver
    /// lists (`/proc/driver/nvidia/gpus`), its total memory, no labels.
    pub fn detect() -> Self {
        let num_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let num_gpus = std::fs::read_dir("/proc/driver/nvidia/gpus").map_or(0, |d| d.count()) as f64;
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.split_whitespace().next()?.parse().ok())
            .map_or(0, |kib: u64| kib * 1024);
        Self { num_cpus, num_gpus, memory_bytes, custom: BTreeMap::new() }
    }

    /// Parses `--resources`: a JSON object of label to a non-negative number.
    ///
    /// # Errors
    /// Text that is not such an object, naming what is wrong.
    pub fn parse_custom(text: &str) -> Result<BTreeMap<String, f64>, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("not JSON ({e}); expected e.g. '{{\"sim_license\": 2}}'"))?;
        let serde_json::Value::Object(map) = value else {
            return Err(format!(
                "expected a JSON object of label to amount, e.g. '{{\"sim_license\": 2}}', got {value}"
            ));
        };
        map.into_iter()
            .map(|(label, amount)| match amount.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok((label, x)),
                _ => Err(format!("`{label}`: expected a non-negative number, got {amount}")),
            })
            .collect()
    }
}

impl fmt::Display for NodeResources {
    /// `2 CPUs, 0 GPUs, 23.4 GiB memory, sim_license 2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} CPUs, {} GPUs, {:.1} GiB memory",
            self.num_cpus,
            self.num_gpus,
            self.memory_bytes as f64 / 1073741824.0
        )?;
        for (label, amount) in &self.custom {
            write!(f, ", {label} {amount}")?;
        }
        Ok(())
    }
}

/// What one evaluator needs from its node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceRequest {
    /// CPUs (`num_cpus_per_worker`).
    pub num_cpus: f64,
    /// GPUs (`num_gpus_per_worker`).
    pub num_gpus: f64,
    /// Custom labels (`custom_resources_per_worker`).
    pub custom: BTreeMap<String, f64>,
}

impl ResourceRequest {
    /// Whether the request asks for nothing (then only counts place).
    pub fn is_empty(&self) -> bool {
        self.num_cpus == 0.0 && self.num_gpus == 0.0 && self.custom.values().all(|x| *x == 0.0)
    }

    /// Checks every amount is a finite, non-negative number.
    ///
    /// # Errors
    /// The key and the value at fault.
    pub fn validate(&self) -> Result<(), String> {
        match self.bad_amount() {
            Some((key, value)) => Err(format!("`{key}`: expected a non-negative number, got {value}")),
            None => Ok(()),
        }
    }

    /// The first amount that is negative or not finite, with its config
    /// key (`num_cpus_per_worker`, `num_gpus_per_worker`,
    /// `custom_resources_per_worker.<label>`).
    pub fn bad_amount(&self) -> Option<(String, f64)> {
        let amounts =
            [("num_cpus_per_worker".to_string(), self.num_cpus), ("num_gpus_per_worker".into(), self.num_gpus)];
        let custom = self.custom.iter().map(|(label, v)| (format!("custom_resources_per_worker.{label}"), *v));
        amounts.into_iter().chain(custom).find(|(_, value)| !value.is_finite() || *value < 0.0)
    }

    /// Whether `free` has room for this request.
    pub fn fits(&self, free: &NodeResources) -> bool {
        const SLACK: f64 = 1e-9;
        self.num_cpus <= free.num_cpus + SLACK
            && self.num_gpus <= free.num_gpus + SLACK
            && self.custom.iter().all(|(k, v)| *v <= free.custom.get(k).copied().unwrap_or(0.0) + SLACK)
    }

    /// `free` less `count` times this request (a negative count gives
    /// that many back).
    pub fn take_from(&self, free: &mut NodeResources, count: f64) {
        free.num_cpus -= count * self.num_cpus;
        free.num_gpus -= count * self.num_gpus;
        for (k, v) in &self.custom {
            *free.custom.entry(k.clone()).or_default() -= count * v;
        }
    }
}

impl fmt::Display for ResourceRequest {
    /// `1 CPU, 1 GPU, sim_license 1` (the parts asked for; `nothing`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.num_cpus > 0.0 {
            parts.push(format!("{} CPU", self.num_cpus));
        }
        if self.num_gpus > 0.0 {
            parts.push(format!("{} GPU", self.num_gpus));
        }
        parts.extend(self.custom.iter().map(|(k, v)| format!("{k} {v}")));
        if parts.is_empty() {
            return write!(f, "nothing");
        }
        write!(f, "{}", parts.join(", "))
    }
}

/// How evaluators are spread over nodes ([Ray's placement strategies]
/// are the model).
///
/// [Ray's placement strategies]: https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Each evaluator on the node with the fewest evaluators per CPU that
    /// has room (the default).
    #[default]
    Spread,
    /// Each evaluator on the first node, in the order given, that has room.
    Pack,
}

/// What happens to an evaluator that fits no live node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// It waits until a node with room is admitted, and the driver says so
    /// once, naming what it needs and what each node offers (the default).
    #[default]
    Wait,
    /// It runs in the driver's process until a node has room.
    Local,
}

/// How a cluster places evaluators.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placing {
    /// What each evaluator needs.
    pub request: ResourceRequest,
    /// Spread or pack.
    pub strategy: Strategy,
    /// Wait, or run in the driver, when nothing fits.
    pub fallback: Fallback,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpus: f64, gpus: f64) -> NodeResources {
        NodeResources { num_cpus: cpus, num_gpus: gpus, ..Default::default() }
    }

    #[test]
    fn a_request_fits_what_is_left_and_gives_it_back() {
        let one_cpu = ResourceRequest { num_cpus: 1.0, ..Default::default() };
        let mut free = node(3.0, 0.0);
        for _ in 0..3 {
            assert!(one_cpu.fits(&free));
            one_cpu.take_from(&mut free, 1.0);
        }
        assert!(!one_cpu.fits(&free), "{free:?}");
        one_cpu.take_from(&mut free, -1.0);
        assert!(one_cpu.fits(&free));
        let gpu = ResourceRequest { num_gpus: 1.0, ..Default::default() };
        assert!(!gpu.fits(&node(16.0, 0.0)) && gpu.fits(&node(0.0, 1.0)));
        let license = ResourceRequest { custom: [("sim".to_string(), 1.0)].into(), ..Default::default() };
        let mut with = node(1.0, 0.0);
        assert!(!license.fits(&with));
        with.custom.insert("sim".into(), 2.0);
        assert!(license.fits(&with));
    }

    #[test]
    fn malformed_custom_resources_and_requests_are_refused_with_the_reason() {
        assert_eq!(NodeResources::parse_custom(r#"{"sim_license": 2}"#).unwrap()["sim_license"], 2.0);
        assert!(NodeResources::parse_custom("sim_license=2").unwrap_err().contains("not JSON"));
        assert!(NodeResources::parse_custom("[1, 2]").unwrap_err().contains("expected a JSON object"));
        let e = NodeResources::parse_custom(r#"{"sim_license": -1}"#).unwrap_err();
        assert!(e.contains("`sim_license`: expected a non-negative number, got -1"), "{e}");
        let bad = ResourceRequest { num_gpus: -0.5, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("`num_gpus_per_worker`"));
        let nan = ResourceRequest { custom: [("x".to_string(), f64::NAN)].into(), ..Default::default() };
        assert!(nan.validate().unwrap_err().contains("`custom_resources_per_worker.x`"));
    }
}
