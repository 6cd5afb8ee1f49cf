//! Where a run's evaluators live: in this process (the default) or on
//! worker nodes started with `rlx node`.
//!
//! Four config keys, taken out before the algorithm sees its config:
//! - `"backend"`: `"ractor"` (default) or `"actix"`: which actor library
//!   runs the local evaluators (actix: a `SyncArbiter` thread each).
//! - `"nodes"`: `["127.0.0.1:7000", ...]` (or one comma-separated string);
//!   evaluators are placed on them round-robin.
//! - `"cookie"`: the nodes' shared secret (also `--cookie` or `RLX_COOKIE`).
//!   It is never written to `params.json` or checkpoints.
//! - `"cluster"`: how the driver supervises its nodes, with `"nodes"` only:
//!   `{"heartbeat_s": 1, "node_timeout_s": 10, "call_timeout_s": 120,
//!   "connect_timeout_s": 5, "redial_max_s": 30, "max_node_connections": 1024,
//!   "node_restart": {"max_restarts": 3, "window_s": 60}}`
//!   (the defaults; `node_restart`, the budget for lost nodes, is the run's
//!   `restart` unless given). The run's `restart` stays the evaluator-level
//!   policy, on the nodes as locally. `"tls": {"ca": PEM, "cert": PEM,
//!   "key": PEM, "server_name": NAME}` (also `--tls-ca`, `--tls-cert`,
//!   `--tls-key`, `--tls-server-name`) runs every node connection over TLS,
//!   trusting nodes whose certificate `ca` signed, and with `cert`/`key`
//!   presents the driver's certificate (for nodes that require one).
//!
//! Nodes re-run the same algorithm build from the algorithm name, env and
//! config ([`node_resolver`]), so an evaluator on a node is the one the
//! driver would have built itself.

use futures::future::BoxFuture;
use rlx::config::ConfigError;
use rlx::placement::{PlacedWorkers, Placement, WorkerSet};
use rlx::restart::RestartPolicy;
use rlx::{EvaluatorFactory, HandleError, Trainer};
use rlx_algorithms::{BuildError, EnvMaker};
use rlx_cluster::wire::SpawnSpec;
use rlx_cluster::{Cluster, ClusterOptions, Resolver};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Builds a trainer for `algorithm` on the registered env `env`, with the
/// JSON `overrides` merged over the algorithm's defaults, and its evaluators
/// where the deployment keys say: in this process (the default, as
/// [`rlx_algorithms::build_trainer`]), on worker nodes, or as actix actors.
/// Returns the trainer and the full resolved config, which keeps these keys
/// but never the cookie.
///
/// # Errors
/// Unknown algorithm or env, a bad config key or value, an evaluator that
/// fails to start, or no usable node.
pub async fn build_deployed_trainer(
    algorithm: &str,
    env: &str,
    overrides: &Value,
) -> Result<(Trainer, Value), BuildError> {
    check_keys(algorithm, overrides)?;
    let (deployment, overrides) = split(overrides)?;
    let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
    let make_env = env_maker(env, &kwargs)?;
    let on_nodes = !deployment.nodes.is_empty() || deployment.node_listen.is_some();
    if env.starts_with(rlx_cluster::external::PREFIX) && on_nodes {
        return Err(BuildError::Config(ConfigError::Invalid {
            key: "nodes".into(),
            message: "an external env's clients connect to this process; it cannot run on nodes".into(),
        }));
    }
    if deployment.actix {
        let (trainer, mut resolved) = build_on_actix(algorithm, make_env, &overrides).await?;
        resolved["backend"] = serde_json::json!("actix");
        return Ok((trainer, resolved));
    }
    if deployment.nodes.is_empty() && deployment.node_listen.is_none() {
        return build(algorithm, make_env, &overrides, None).await;
    }
    let (trainer, mut resolved) = build_on_nodes(algorithm, env, make_env, &overrides, &deployment).await?;
    resolved["nodes"] = serde_json::json!(deployment.nodes);
    if let Some(listen) = deployment.node_listen {
        resolved["node_listen"] = serde_json::json!(listen.to_string());
    }
    if deployment.cluster != ClusterKeys::default() {
        resolved["cluster"] = serde_json::to_value(&deployment.cluster).expect("cluster keys serialize");
    }
    if let Value::Object(keys) = serde_json::to_value(&deployment.placement).expect("placement keys serialize") {
        if let Some(resolved) = resolved.as_object_mut() {
            resolved.extend(keys);
        }
    }
    Ok((trainer, resolved))
}

/// An [`EnvMaker`] for `env` with `kwargs`: a registered or `gym:` env
/// ([`rlx_algorithms::env_maker`]), or `external:<address>`, a server
/// that external applications connect to ([`rlx_cluster::external`]).
///
/// # Errors
/// An unknown env, bad keyword arguments, or an external env without its
/// spaces or cookie.
pub fn env_maker(env: &str, kwargs: &Value) -> Result<EnvMaker, BuildError> {
    let Some(address) = env.strip_prefix(rlx_cluster::external::PREFIX) else {
        return Ok(rlx_algorithms::env_maker(env, kwargs)?);
    };
    let bad = |message: String| BuildError::Config(ConfigError::Invalid { key: "env_config".into(), message });
    let config: ExternalConfig = serde_json::from_value(kwargs.clone())
        .map_err(|e| bad(format!("{env}: {e} (it takes `spaces_of` and `cookie_file`)")))?;
    let listen = address
        .parse()
        .map_err(|e| bad(format!("{env}: `{address}` is not an address to listen on, such as 127.0.0.1:9900 ({e})")))?;
    let like = rlx_envs::make_with(&config.spaces_of, &Value::Null)?;
    let signature = rlx::EnvSignature::new(env, like.observation_space().clone(), like.action_space().clone());
    drop(like);
    // Read as the cluster's cookie is: a file without its trailing newline,
    // else $RLX_COOKIE.
    let cookie = crate::cookie::resolve(None, config.cookie_file.as_deref())
        .map_err(|e| bad(format!("{env}: {e}")))?
        .ok_or_else(|| {
        bad(format!("{env}: clients prove a cookie: give env_config.cookie_file, or set RLX_COOKIE"))
    })?;
    let spec = rlx_cluster::external::ExternalSpec { listen, signature, cookie };
    Ok(Arc::new(move || Ok(Box::new(rlx_cluster::external::ExternalEnv::new(spec.clone())) as Box<dyn rlx::Env>)))
}

/// The `env_config` of an `external:<address>` env.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExternalConfig {
    /// A registered env (or `gym:` id) whose observation and action spaces
    /// the clients' observations and actions lie in.
    spaces_of: String,
    /// A file holding the cookie clients prove (else `$RLX_COOKIE`).
    cookie_file: Option<PathBuf>,
}

/// The deployment keys of a config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Deployment {
    /// Node addresses; empty for a single-process run.
    pub nodes: Vec<String>,
    /// Where nodes started with `rlx node --join` dial in (`node_listen`).
    pub node_listen: Option<std::net::SocketAddr>,
    /// The nodes' cookie.
    pub cookie: Option<String>,
    /// Local evaluators as actix sync actors instead of ractor actors.
    pub actix: bool,
    /// The `"cluster"` key.
    pub cluster: ClusterKeys,
    /// The resource requests and placement keys.
    pub placement: PlacementKeys,
}

/// What each evaluator needs from a node, and how evaluators are placed:
/// top-level keys, RLlib's names (`num_cpus_per_env_runner`,
/// `num_gpus_per_env_runner` and `custom_resources_per_env_runner` are
/// read as the `_per_worker` keys). They apply to evaluators on nodes; a
/// run in one process accepts and ignores them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementKeys {
    /// CPUs per evaluator (default 0: placement only counts evaluators).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_cpus_per_worker: Option<f64>,
    /// GPUs per evaluator (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_gpus_per_worker: Option<f64>,
    /// Custom labels per evaluator, e.g. `{"sim_license": 1}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_resources_per_worker: Option<std::collections::BTreeMap<String, f64>>,
    /// `"spread"` (default) or `"pack"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_strategy: Option<rlx_cluster::resources::Strategy>,
    /// `"wait"` (default) or `"local"`: what an evaluator that fits no
    /// node does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_fallback: Option<rlx_cluster::resources::Fallback>,
}

impl PlacementKeys {
    /// The keys, from the config's top level (removed from it).
    ///
    /// # Errors
    /// A key whose value has the wrong type or range, named.
    fn take(map: &mut serde_json::Map<String, Value>) -> Result<Self, BuildError> {
        fn key<T: serde::de::DeserializeOwned>(
            map: &mut serde_json::Map<String, Value>,
            name: &str,
            expected: &str,
        ) -> Result<Option<T>, BuildError> {
            match map.remove(name) {
                None | Some(Value::Null) => Ok(None),
                Some(value) => serde_json::from_value(value.clone())
                    .map(Some)
                    .map_err(|_| invalid(name, &format!("expected {expected}, got {value}"))),
            }
        }
        let keys = Self {
            num_cpus_per_worker: key(map, "num_cpus_per_worker", "a non-negative number")?,
            num_gpus_per_worker: key(map, "num_gpus_per_worker", "a non-negative number")?,
            custom_resources_per_worker: key(
                map,
                "custom_resources_per_worker",
                "an object of label to amount, e.g. {\"sim_license\": 1}",
            )?,
            placement_strategy: key(map, "placement_strategy", "\"spread\" or \"pack\"")?,
            placement_fallback: key(map, "placement_fallback", "\"wait\" or \"local\"")?,
        };
        keys.placing()?;
        Ok(keys)
    }

    /// The cluster's placement settings.
    ///
    /// # Errors
    /// A negative or non-finite amount, named.
    pub fn placing(&self) -> Result<rlx_cluster::resources::Placing, BuildError> {
        let request = rlx_cluster::resources::ResourceRequest {
            num_cpus: self.num_cpus_per_worker.unwrap_or(0.0),
            num_gpus: self.num_gpus_per_worker.unwrap_or(0.0),
            custom: self.custom_resources_per_worker.clone().unwrap_or_default(),
        };
        if let Some((key, value)) = request.bad_amount() {
            return Err(invalid(&key, &format!("expected a non-negative number, got {value}")));
        }
        Ok(rlx_cluster::resources::Placing {
            request,
            strategy: self.placement_strategy.unwrap_or_default(),
            fallback: self.placement_fallback.unwrap_or_default(),
        })
    }
}

/// The `"cluster"` key: the driver's supervision of its nodes. Every field
/// is optional; see [`ClusterOptions`] for the defaults and meanings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterKeys {
    /// Seconds a node gets to accept the driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout_s: Option<f64>,
    /// Seconds one evaluator request may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_timeout_s: Option<f64>,
    /// Seconds between heartbeats to each node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_s: Option<f64>,
    /// Seconds without a heartbeat reply before a node is lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_timeout_s: Option<f64>,
    /// The budget for lost nodes (one-for-one only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_restart: Option<RestartPolicy>,
    /// The longest wait, in seconds, between two dials of a lost node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redial_max_s: Option<f64>,
    /// Connections `node_listen` holds at once (nodes joined and
    /// handshakes under way); default 1,024.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_node_connections: Option<usize>,
    /// TLS to every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsKeys>,
}

/// The `"cluster"` key's `"tls"`: PEM files, and the name the nodes'
/// certificates carry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsKeys {
    /// The CA that signs the nodes' certificates.
    pub ca: PathBuf,
    /// The driver's certificate, for nodes that require one (with `key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// The driver's private key (with `cert`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// The name the nodes' certificates carry (default: each node's host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

impl ClusterKeys {
    /// `options` with these keys applied.
    ///
    /// # Errors
    /// A duration that is not a positive number of seconds, or options that
    /// do not fit together (named in the message).
    pub fn apply(&self, mut options: ClusterOptions) -> Result<ClusterOptions, BuildError> {
        let seconds = |key: &str, value: f64| {
            Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
                invalid(&format!("cluster.{key}"), &format!("expected a positive number of seconds, got {value}"))
            })
        };
        if let Some(v) = self.connect_timeout_s {
            options.connect_timeout = seconds("connect_timeout_s", v)?;
        }
        if let Some(v) = self.call_timeout_s {
            options.call_timeout = seconds("call_timeout_s", v)?;
        }
        if let Some(v) = self.heartbeat_s {
            options.heartbeat = seconds("heartbeat_s", v)?;
        }
        if let Some(v) = self.node_timeout_s {
            options.node_timeout = seconds("node_timeout_s", v)?;
        }
        if let Some(v) = self.redial_max_s {
            options.redial_max = seconds("redial_max_s", v)?;
        }
        if let Some(n) = self.max_node_connections {
            options.max_node_connections = n;
        }
        if let Some(policy) = self.node_restart {
            policy.validate("cluster.node_restart")?;
            options.node_restart = Some(policy);
        }
        if let Some(tls) = &self.tls {
            let identity = match (&tls.cert, &tls.key) {
                (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
                (None, None) => None,
                _ => return Err(invalid("cluster.tls", "`cert` and `key` go together")),
            };
            options.tls =
                Some(rlx_cluster::DriverTls { ca: tls.ca.clone(), server_name: tls.server_name.clone(), identity });
        }
        options.validate().map_err(|message| invalid("cluster", &message))?;
        Ok(options)
    }
}

fn invalid(key: &str, message: &str) -> BuildError {
    BuildError::Config(ConfigError::Invalid { key: key.to_string(), message: message.to_string() })
}

/// Whether `algorithm` drives workers of its own, which no placement puts
/// on nodes or the actix backend ([`Capabilities::runs_own_workers`]).
///
/// [`Capabilities::runs_own_workers`]: rlx_algorithms::registry::Capabilities::runs_own_workers
fn runs_own_workers(algorithm: &str) -> bool {
    rlx_algorithms::registry::algorithm(algorithm).is_ok_and(|a| a.capabilities().runs_own_workers)
}

/// Every top-level key `rlx train` takes for `algorithm`: the algorithm's
/// own ([`rlx_algorithms::Algorithm::config_keys`]) and the deployment
/// keys ([`rlx_algorithms::DEPLOYMENT_KEYS`], which [`split`] takes off).
///
/// # Errors
/// An unknown algorithm.
pub fn config_keys(algorithm: &str) -> Result<Vec<String>, BuildError> {
    let mut keys = rlx_algorithms::registry::algorithm(algorithm)?.config_keys();
    keys.extend(rlx_algorithms::DEPLOYMENT_KEYS.iter().map(|k| k.to_string()));
    Ok(keys)
}

/// Refuses a top-level key that is not in [`config_keys`], with the
/// closest valid one and the whole list.
///
/// # Errors
/// An unknown algorithm or key.
pub fn check_keys(algorithm: &str, overrides: &Value) -> Result<(), BuildError> {
    Ok(rlx::config::check_keys(overrides, &config_keys(algorithm)?)?)
}

/// Checks `overrides` for `algorithm` as `rlx train` would, without an env
/// or evaluators: the keys, the deployment keys' types, and the
/// algorithm's keys, types and ranges ([`rlx_algorithms::Algorithm::check_config`]).
///
/// # Errors
/// The first bad key or value.
pub fn check_config(algorithm: &str, overrides: &Value) -> Result<(), BuildError> {
    check_keys(algorithm, overrides)?;
    let (_, rest) = split(overrides)?;
    rlx_algorithms::registry::algorithm(algorithm)?.check_config(&rest).map(drop)
}

/// Splits `"nodes"`, `"cookie"`, `"backend"` and `"cluster"` off a config.
///
/// # Errors
/// A key of the wrong type.
pub fn split(overrides: &Value) -> Result<(Deployment, Value), BuildError> {
    let mut rest = overrides.clone();
    let Some(map) = rest.as_object_mut() else { return Ok((Deployment::default(), rest)) };
    let bad = |key: &str, expected: &str| invalid(key, &format!("expected {expected}"));
    let nodes = match map.remove("nodes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| v.as_str().map(String::from).ok_or_else(|| bad("nodes", "a list of \"HOST:PORT\" strings")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("nodes", "a list of \"HOST:PORT\" strings")),
    };
    let cookie = match map.remove("cookie") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(bad("cookie", "a string")),
    };
    let actix = match map.remove("backend") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "ractor" => false,
        Some(Value::String(s)) if s == "actix" => true,
        Some(_) => return Err(bad("backend", "\"ractor\" or \"actix\"")),
    };
    if actix && !nodes.is_empty() {
        return Err(bad("backend", "\"ractor\" with \"nodes\" (nodes run their evaluators as ractor actors)"));
    }
    let node_listen = match map.remove("node_listen") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.parse().map_err(|_| {
            invalid("node_listen", &format!("`{s}` is not an IP:PORT to listen on, e.g. 0.0.0.0:7100"))
        })?),
        Some(other) => return Err(invalid("node_listen", &format!("expected an \"IP:PORT\" string, got {other}"))),
    };
    if actix && node_listen.is_some() {
        return Err(bad("backend", "\"ractor\" with \"node_listen\" (nodes run their evaluators as ractor actors)"));
    }
    let cluster = match map.remove("cluster") {
        None | Some(Value::Null) => ClusterKeys::default(),
        Some(value) if nodes.is_empty() && node_listen.is_none() => {
            return Err(invalid("cluster", &format!("applies only with \"nodes\" or \"node_listen\" (got {value})")))
        }
        Some(value) => serde_json::from_value(value).map_err(|e| invalid("cluster", &e.to_string()))?,
    };
    let placement = PlacementKeys::take(map)?;
    Ok((Deployment { nodes, node_listen, cookie, actix, cluster, placement }, rest))
}

/// Builds the trainer with its evaluators on `deployment.nodes`.
///
/// # Errors
/// No cookie, an algorithm that cannot run on nodes, no usable node, or
/// what [`build`] reports.
pub async fn build_on_nodes(
    algorithm: &str,
    env: &str,
    make_env: EnvMaker,
    overrides: &Value,
    deployment: &Deployment,
) -> Result<(Trainer, Value), BuildError> {
    if runs_own_workers(algorithm) {
        return Err(BuildError::Unsupported(format!(
            "{algorithm} cannot place its workers on nodes yet (\"nodes\" works for the algorithms whose workers are evaluators)"
        )));
    }
    let cookie = deployment.cookie.clone().or_else(|| std::env::var("RLX_COOKIE").ok()).ok_or_else(|| {
        BuildError::Config(ConfigError::Invalid {
            key: "cookie".into(),
            message: "\"nodes\" needs the nodes' cookie: --cookie-file FILE (or \"cookie\", --cookie, RLX_COOKIE)"
                .into(),
        })
    })?;
    let spec = SpawnSpec { algorithm: algorithm.to_string(), env: env.to_string(), config_json: overrides.to_string() };
    let mut options = deployment.cluster.apply(ClusterOptions::new(cookie))?;
    options.placing = deployment.placement.placing()?;
    options.listen = deployment.node_listen;
    options.validate().map_err(|message| invalid("node_listen", &message))?;
    let cluster =
        Cluster::connect(&deployment.nodes, spec, options).await.map_err(|e| BuildError::Unsupported(e.to_string()))?;
    for line in cluster.failures() {
        errln!("warning: {line}");
    }
    build(algorithm, make_env, overrides, Some(Arc::new(cluster))).await
}

/// Builds the trainer with its local evaluators as actix sync actors.
///
/// # Errors
/// As [`build`].
pub async fn build_on_actix(
    algorithm: &str,
    make_env: EnvMaker,
    overrides: &Value,
) -> Result<(Trainer, Value), BuildError> {
    if runs_own_workers(algorithm) {
        return Err(BuildError::Unsupported(format!(
            "{algorithm} runs its own workers; \"backend\": \"actix\" does not apply"
        )));
    }
    let placement = Arc::new(rlx_cluster::actix_backend::ActixPlacement);
    build(algorithm, make_env, overrides, Some(placement)).await
}

/// The registry entry's build of `algorithm` with its worker evaluators
/// where `placement` puts them (`None`: actors in this process).
///
/// # Errors
/// Unknown algorithm, a bad config, an env it cannot handle, or an
/// evaluator that fails to start.
async fn build(
    algorithm: &str,
    make_env: EnvMaker,
    overrides: &Value,
    placement: Option<Arc<dyn Placement>>,
) -> Result<(Trainer, Value), BuildError> {
    rlx_algorithms::registry::algorithm(algorithm)?.build(make_env, overrides, placement).await
}

/// Builds the env maker for an env name and its `env_config`.
pub type EnvResolver = Arc<dyn Fn(&str, &Value) -> Result<EnvMaker, BuildError> + Send + Sync>;

/// What `rlx node` uses to build an evaluator from a driver's spec: the
/// algorithm's own build, run with a placement that keeps the evaluator
/// factory instead of starting workers. Envs come from the registry.
pub fn node_resolver() -> Resolver {
    node_resolver_with(Arc::new(|name, kwargs| Ok(env_maker(name, kwargs)?)))
}

/// [`node_resolver`] with envs from `envs` (e.g. a node program with envs
/// of its own).
pub fn node_resolver_with(envs: EnvResolver) -> Resolver {
    Arc::new(move |spec: SpawnSpec| -> BoxFuture<'static, Result<EvaluatorFactory, String>> {
        let envs = envs.clone();
        Box::pin(async move {
            let overrides: Value =
                serde_json::from_str(&spec.config_json).map_err(|e| format!("config from the driver: {e}"))?;
            let kwargs = overrides.get("env_config").cloned().unwrap_or(Value::Null);
            let make_env = envs(&spec.env, &kwargs).map_err(|e| e.to_string())?;
            let capture = Arc::new(Capture::default());
            let built = build(&spec.algorithm, make_env, &overrides, Some(capture.clone())).await;
            let factory = capture.0.lock().expect("capture lock").take();
            match (factory, built) {
                (Some(factory), _) => Ok(factory),
                (None, Err(e)) => Err(e.to_string()),
                (None, Ok(_)) => Err(format!("{} builds no evaluators to place", spec.algorithm)),
            }
        })
    })
}

/// A placement that records the evaluator factory and starts nothing.
#[derive(Default)]
struct Capture(Mutex<Option<EvaluatorFactory>>);

struct NoWorkers;
impl WorkerSet for NoWorkers {
    fn restarts(&self) -> u64 {
        0
    }
}

impl Placement for Capture {
    fn place(
        &self,
        factory: EvaluatorFactory,
        _: Vec<usize>,
        _: RestartPolicy,
    ) -> BoxFuture<'static, Result<PlacedWorkers, HandleError>> {
        self.0.lock().expect("capture lock").get_or_insert(factory);
        Box::pin(async { Ok(PlacedWorkers { handles: Vec::new(), keep_alive: Box::new(NoWorkers) }) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_keys_are_split_off() {
        let (d, rest) = split(&json!({"nodes": "127.0.0.1:1, 127.0.0.1:2", "cookie": "s", "lr": 0.1})).unwrap();
        assert_eq!(d.nodes, ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(d.cookie.as_deref(), Some("s"));
        assert_eq!(rest, json!({"lr": 0.1}));
        let (d, _) = split(&json!({"nodes": ["a:1"]})).unwrap();
        assert_eq!(d.nodes, ["a:1"]);
        assert!(split(&json!({"nodes": 3})).unwrap_err().to_string().contains("nodes"));
        assert!(split(&json!({"cookie": 3})).unwrap_err().to_string().contains("cookie"));
        assert!(split(&json!({"backend": "actix"})).unwrap().0.actix);
        assert!(!split(&json!({"backend": "ractor"})).unwrap().0.actix);
        let err = split(&json!({"backend": "akka"})).unwrap_err().to_string();
        assert!(err.contains("backend") && err.contains("actix"), "{err}");
        assert!(split(&json!({"backend": "actix", "nodes": ["a:1"]})).is_err());
    }

    /// `rlx_algorithms::build_trainer` refuses exactly the keys this
    /// module reads, so none reaches an algorithm's config from here.
    #[test]
    fn split_takes_every_key_the_library_refuses() {
        let all = json!({
            "nodes": ["a:1"], "node_listen": "127.0.0.1:7100", "cookie": "s", "backend": "ractor",
            "cluster": {"heartbeat_s": 1},
            "num_cpus_per_worker": 1, "num_gpus_per_worker": 0, "custom_resources_per_worker": {"sim": 1},
            "placement_strategy": "pack", "placement_fallback": "local",
        });
        let keys: Vec<&str> = all.as_object().unwrap().keys().map(String::as_str).collect();
        let mut refused = rlx_algorithms::DEPLOYMENT_KEYS.to_vec();
        refused.sort_unstable();
        assert_eq!(keys, refused);
        assert_eq!(split(&all).unwrap().1, json!({}));
    }

    #[test]
    fn node_listen_is_an_address_and_allows_the_cluster_key() {
        let (d, _) = split(&json!({"node_listen": "0.0.0.0:7100", "cluster": {"heartbeat_s": 0.5}})).unwrap();
        assert_eq!(d.node_listen, Some("0.0.0.0:7100".parse().unwrap()));
        assert!(d.nodes.is_empty());
        let err = split(&json!({"node_listen": "driver:7100"})).unwrap_err().to_string();
        assert!(err.contains("config key `node_listen`: `driver:7100` is not an IP:PORT to listen on"), "{err}");
        let err = split(&json!({"node_listen": 7100})).unwrap_err().to_string();
        assert!(err.contains("node_listen") && err.contains("7100"), "{err}");
    }

    #[test]
    fn placement_keys_are_read_and_a_bad_one_is_named() {
        let (d, rest) =
            split(&json!({"num_cpus_per_worker": 1, "custom_resources_per_worker": {"sim": 2}, "lr": 0.1})).unwrap();
        assert_eq!(rest, json!({"lr": 0.1}));
        let placing = d.placement.placing().unwrap();
        assert_eq!((placing.request.num_cpus, placing.request.custom["sim"]), (1.0, 2.0));
        assert_eq!(placing.strategy, rlx_cluster::resources::Strategy::Spread);
        assert_eq!(placing.fallback, rlx_cluster::resources::Fallback::Wait);
        for (config, named) in [
            (
                json!({"num_cpus_per_worker": -1}),
                "config key `num_cpus_per_worker`: expected a non-negative number, got -1",
            ),
            (json!({"num_gpus_per_worker": "one"}), "config key `num_gpus_per_worker`: expected a non-negative number"),
            (json!({"custom_resources_per_worker": {"sim": -2}}), "`custom_resources_per_worker.sim`"),
            (json!({"custom_resources_per_worker": [1]}), "`custom_resources_per_worker`: expected an object"),
            (json!({"placement_strategy": "packed"}), "`placement_strategy`: expected \"spread\" or \"pack\""),
            (json!({"placement_fallback": "driver"}), "`placement_fallback`: expected \"wait\" or \"local\""),
        ] {
            let err = split(&config).unwrap_err().to_string();
            assert!(err.contains(named), "{config}: {err}");
        }
    }

    #[test]
    fn cluster_keys_are_checked_and_name_the_bad_one() {
        let with = |cluster: Value| split(&json!({"nodes": ["a:1"], "cluster": cluster}));
        let (d, _) = with(json!({"heartbeat_s": 0.25, "node_timeout_s": 2})).unwrap();
        let options = d.cluster.apply(ClusterOptions::new("s")).unwrap();
        assert_eq!((options.heartbeat, options.node_timeout), (Duration::from_millis(250), Duration::from_secs(2)));
        assert_eq!(options.call_timeout, Duration::from_secs(120), "unset keys keep their defaults");
        let err = with(json!({"heartbeat": 1})).unwrap_err().to_string();
        assert!(err.contains("cluster") && err.contains("heartbeat_s"), "{err}");
        let err = split(&json!({"cluster": {"heartbeat_s": 1}})).unwrap_err().to_string();
        assert!(err.contains("\"nodes\""), "{err}");
        let apply = |cluster: Value| with(cluster).unwrap().0.cluster.apply(ClusterOptions::new("s"));
        let err = apply(json!({"node_timeout_s": -1.0})).unwrap_err().to_string();
        assert!(err.contains("cluster.node_timeout_s") && err.contains("-1"), "{err}");
        let err = apply(json!({"heartbeat_s": 5, "node_timeout_s": 2})).unwrap_err().to_string();
        assert!(err.contains("heartbeat_s") && err.contains("shorter"), "{err}");
        let one_for_all = json!({"node_restart": {"strategy": "one_for_all", "max_restarts": 1, "window_s": 60}});
        let err = apply(one_for_all).unwrap_err().to_string();
        assert!(err.contains("one_for_one"), "{err}");
        let budget = apply(json!({"node_restart": {"max_restarts": 1, "window_s": 30}})).unwrap().node_restart;
        assert_eq!(budget.map(|p| (p.max_restarts, p.window_s)), Some((1, 30.0)));
        assert_eq!(options.max_node_connections, rlx_cluster::DEFAULT_MAX_NODE_CONNECTIONS);
        assert_eq!(apply(json!({"max_node_connections": 4096})).unwrap().max_node_connections, 4096);
        let err = apply(json!({"max_node_connections": 0})).unwrap_err().to_string();
        assert!(err.contains("max_node_connections must be at least 1"), "{err}");
        let err = with(json!({"max_node_connections": -3})).unwrap_err().to_string();
        assert!(err.contains("cluster") && err.contains("-3"), "{err}");
    }
}
