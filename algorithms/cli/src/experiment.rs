//! What to run: `--run`, `--env`, `--config`, `--stop` and RLlib-shaped
//! YAML experiment files resolved into [`Experiment`]s, with RLlib's newer
//! key names translated.

use crate::{arg_error, CliError, TrainArgs};
use rlx::checkpoint::Checkpoint;
use rlx::config::{closest, deep_merge, ConfigError};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

fn parse_json(flag: &str, text: Option<&str>) -> Result<Value, CliError> {
    match text {
        None => Ok(Value::Null),
        Some(t) => {
            serde_json::from_str(t).map_err(|e| arg_error(flag, ConfigError::Malformed(format!("not valid JSON: {e}"))))
        }
    }
}

/// One experiment to run: what a YAML entry and the flags resolve to.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    /// The experiment's name in the file, if it came from one.
    pub name: Option<String>,
    /// Algorithm.
    pub run: String,
    /// Env.
    pub env: String,
    /// Config overrides (merged over the defaults, or over a restored
    /// checkpoint's config).
    pub config: Value,
    /// Stop criteria as given (`null`: the env's reward threshold).
    pub stop: Value,
    /// Checkpoint every N iterations (0: never).
    pub checkpoint_freq: u64,
    /// Checkpoint when the run stops.
    pub checkpoint_at_end: bool,
    /// Keep only this many checkpoints, the best by `checkpoint_score_attr`,
    /// and the newest (`None`: keep all).
    pub keep_checkpoints_num: Option<usize>,
    /// What "best" means for `keep_checkpoints_num` and `rlx rollout --pick
    /// best` (`None`: the newest are best).
    pub checkpoint_score_attr: Option<String>,
    /// The experiment file and experiment it came from, as errors name
    /// them (`exp.yaml: experiment \`cartpole\``), if it came from one.
    pub file: Option<String>,
    /// Where each top-level config key was given: the file's `config`,
    /// `--config`, or the flag that sets it (`--seed`, `--nodes`,
    /// `--cookie`, `--cookie-file`, the `--tls-*` flags), the last one
    /// that set it.
    pub config_sources: BTreeMap<String, String>,
    /// Whether `--stop` gave some of them.
    pub stop_flag: bool,
}

impl Experiment {
    /// Where the config key `key` (a path such as `model.fcnet_hiddens`)
    /// was given ([`config_sources`](Self::config_sources)), if it was.
    pub fn config_source(&self, key: &str) -> Option<&str> {
        let top = key.split(['.', '/']).next().unwrap_or(key);
        self.config_sources.get(top).map(String::as_str)
    }

    /// Where the stop criteria came from: `--stop`, or the file's `stop`.
    pub fn stop_source(&self) -> String {
        match &self.file {
            Some(file) if !self.stop_flag => format!("{file}: stop"),
            _ => "--stop".into(),
        }
    }
}

pub(crate) const EXPERIMENT_KEYS: &[&str] = &[
    "run",
    "env",
    "config",
    "stop",
    "checkpoint_freq",
    "checkpoint_at_end",
    "keep_checkpoints_num",
    "checkpoint_score_attr",
];

/// RLlib config keys that have no meaning in rlx; experiment files that set
/// them still run, with a note.
const RLLIB_IGNORED: &[&str] = &[
    "framework",
    "num_gpus",
    "eager_tracing",
    "log_level",
    "enable_rl_module_and_learner",
    "enable_env_runner_and_connector_v2",
    "_enable_new_api_stack",
    // rlx's evaluator actors always evaluate in parallel with training.
    "evaluation_parallel_to_training",
];

/// RLlib's newer names for rlx config keys.
const RLLIB_RENAMED: &[(&str, &str)] = &[
    ("num_env_runners", "num_workers"),
    ("num_cpus_per_env_runner", "num_cpus_per_worker"),
    ("num_gpus_per_env_runner", "num_gpus_per_worker"),
    ("custom_resources_per_env_runner", "custom_resources_per_worker"),
    ("num_rollout_workers", "num_workers"),
    ("num_envs_per_env_runner", "num_envs_per_worker"),
    ("evaluation_num_env_runners", "evaluation_num_workers"),
    ("num_epochs", "num_sgd_iter"),
    ("minibatch_size", "sgd_minibatch_size"),
];

/// RLlib's newer names for stop metrics.
const STOP_RENAMED: &[(&str, &str)] = &[
    ("evaluation/env_runners/episode_return_mean", "evaluation/episode_reward_mean"),
    ("env_runners/episode_return_mean", "episode_reward_mean"),
    ("episode_return_mean", "episode_reward_mean"),
    ("num_env_steps_sampled_lifetime", "timesteps_total"),
];

/// Renames RLlib's keys to rlx's and drops those rlx has no use for,
/// printing a note for each if `notes`.
fn translate_rllib(obj: &mut Value, renamed: &[(&str, &str)], ignored: &[&str], notes: bool) {
    let Some(map) = obj.as_object_mut() else { return };
    let note = |text: String| {
        if notes {
            errln!("note: {text}");
        }
    };
    for key in ignored {
        if map.remove(*key).is_some() {
            note(format!("ignoring RLlib setting `{key}` (it has no meaning in rlx)"));
        }
    }
    for (from, to) in renamed {
        if let Some(v) = map.remove(*from) {
            match map.get(*to) {
                // The rlx name wins (e.g. a `--config` flag over the file).
                Some(kept) => note(format!("ignoring RLlib's `{from}` = {v}: rlx's `{to}` = {kept} is also given")),
                None => {
                    note(format!("RLlib's `{from}` is rlx's `{to}`"));
                    map.insert(to.to_string(), v);
                }
            }
        }
    }
}

/// Renames RLlib's stop metrics to rlx's.
pub(crate) fn translate_stop(stop: &mut Value) {
    translate_rllib(stop, STOP_RENAMED, &[], true);
}

/// A config as `rlx train` reads it: RLlib's names renamed, the settings
/// rlx has no use for dropped, with no notes (`rlx tune` checks its
/// trials' configs with it; each trial prints its own notes).
pub(crate) fn translate_config_quietly(config: &mut Value) {
    translate_rllib(config, RLLIB_RENAMED, RLLIB_IGNORED, false);
}

/// An experiment file's entry: its name (if the file names experiments)
/// and its keys.
pub(crate) type Entry = (Option<String>, Map<String, Value>);

/// Reads an experiment file: YAML (`.yaml`/`.yml`) or JSON, either a map of
/// experiment name → experiment (RLlib's tuned examples) or one experiment.
pub(crate) fn read_experiment_file(path: &Path) -> Result<Vec<Entry>, CliError> {
    let flag = format!("{} {}", crate::args::config_file_flag(), path.display());
    let text = std::fs::read_to_string(path)
        .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("cannot read: {e}"))))?;
    let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    let value: Value = if yaml {
        serde_yaml_ng::from_str(&text)
            .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("not valid YAML: {e}"))))?
    } else {
        serde_json::from_str(&text)
            .map_err(|e| arg_error(&flag, ConfigError::Malformed(format!("not valid JSON: {e}"))))?
    };
    let Value::Object(map) = value else {
        return Err(arg_error(&flag, ConfigError::Malformed("must be a map of experiment name to experiment".into())));
    };
    if map.contains_key("run") || map.contains_key("env") {
        return Ok(vec![(None, map)]);
    }
    if map.is_empty() {
        return Err(arg_error(&flag, ConfigError::Malformed("has no experiments".into())));
    }
    map.into_iter()
        .map(|(name, v)| match v {
            Value::Object(m) => Ok((Some(name), m)),
            other => Err(arg_error(
                &flag,
                ConfigError::Malformed(format!(
                    "experiment `{name}` must be a map with run, env, config, stop; got {other}"
                )),
            )),
        })
        .collect()
}

/// Resolves the experiments to run from the flags and the experiment file.
/// `run` is `--run` (or the per-algorithm binary's algorithm); a restored
/// checkpoint supplies the algorithm and env when the flags do not.
///
/// # Errors
/// A bad file or flag, or no algorithm or env given.
pub fn experiments(
    run: Option<&str>,
    args: &TrainArgs,
    restored: Option<&Checkpoint>,
) -> Result<Vec<Experiment>, CliError> {
    let entries = match &args.config_file {
        Some(path) => read_experiment_file(path)?,
        None => vec![(None, Map::new())],
    };
    // Only a cookie given as a flag or file; RLX_COOKIE is read where the
    // nodes are connected.
    let cookie = match (&args.cookie, &args.cookie_file) {
        (None, None) => None,
        (flag, file) => crate::cookie::resolve(flag.as_deref(), file.as_deref())?,
    };
    let cli_config = parse_json("--config", args.config.as_deref())?;
    let cli_stop = parse_json("--stop", args.stop.as_deref())?;
    let mut out = Vec::new();
    for (name, mut entry) in entries {
        let flag = match (&args.config_file, &name) {
            (Some(p), Some(n)) => format!("{}: experiment `{n}`", p.display()),
            (Some(p), None) => p.display().to_string(),
            _ => "--config".into(),
        };
        if let Some(key) = entry.keys().find(|k| !EXPERIMENT_KEYS.contains(&k.as_str())) {
            return Err(arg_error(
                &flag,
                ConfigError::UnknownKey {
                    key: key.clone(),
                    closest: closest(key, EXPERIMENT_KEYS.iter().copied()),
                    valid: EXPERIMENT_KEYS.iter().map(|s| s.to_string()).collect(),
                },
            ));
        }
        let text = |entry: &Map<String, Value>, key: &str| -> Result<Option<String>, CliError> {
            match entry.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => {
                    Err(arg_error(&flag, ConfigError::Malformed(format!("`{key}` must be a string, got {other}"))))
                }
            }
        };
        let mut config = entry.remove("config").unwrap_or(Value::Null);
        let env_in_config =
            config.as_object_mut().and_then(|c| c.remove("env")).and_then(|e| e.as_str().map(String::from));
        let file_run = text(&entry, "run")?;
        let file_env = text(&entry, "env")?.or(env_in_config);
        let run = match (run, file_run.clone()) {
            (Some(a), Some(b)) if a != b => {
                return Err(CliError::Usage(format!("{flag} says `run: {b}` but this is `{a}`; drop one of them")))
            }
            (Some(a), _) => a.to_string(),
            (None, Some(b)) => b,
            (None, None) => match restored {
                Some(c) => c.metadata.algorithm.clone(),
                None => return Err(CliError::Usage("no algorithm: pass --run ALGO (see `rlx list`)".into())),
            },
        };
        // An unknown algorithm is named where it was given, before anything runs.
        let run_flag = if file_run.as_deref() == Some(run.as_str()) { format!("{flag}: run") } else { "--run".into() };
        rlx_algorithms::registry::algorithm(&run).map_err(|e| CliError::Usage(format!("{run_flag}: {e}")))?;
        let env = match (args.env.clone().or(file_env), restored) {
            (Some(e), _) => e,
            (None, Some(c)) => c.metadata.env.clone(),
            (None, None) => return Err(CliError::Usage("no env: pass --env ENV (see `rlx list`)".into())),
        };
        if !config.is_null() && !config.is_object() {
            return Err(arg_error(&flag, ConfigError::Malformed(format!("`config` must be a map, got {config}"))));
        }
        if config.is_null() {
            config = json!({});
        }
        let mut sources = BTreeMap::new();
        let mut given = |keys: &Value, source: &str| {
            for key in keys.as_object().into_iter().flat_map(|o| o.keys()) {
                sources.insert(key.clone(), source.to_string());
            }
        };
        given(&config, &format!("{flag}: config"));
        given(&cli_config, "--config");
        if !cli_config.is_null() {
            if !cli_config.is_object() {
                return Err(arg_error("--config", ConfigError::Malformed("must be a JSON object".into())));
            }
            deep_merge(&mut config, &cli_config);
        }
        if let Some(seed) = args.seed {
            config["seed"] = json!(seed);
            given(&json!({"seed": seed}), "--seed");
        }
        if let Some(nodes) = &args.nodes {
            config["nodes"] = json!(nodes);
            given(&json!({"nodes": nodes}), "--nodes");
        }
        if let Some(listen) = &args.node_listen {
            config["node_listen"] = json!(listen);
            given(&json!({"node_listen": listen}), "--node-listen");
        }
        if let Some(cookie) = &cookie {
            config["cookie"] = json!(cookie);
            given(&json!({"cookie": 0}), if args.cookie.is_some() { "--cookie" } else { "--cookie-file" });
        }
        if let Some(tls) = tls_flags(args) {
            given(&json!({"cluster": 0}), "the --tls-* flags");
            if !config.get("cluster").is_some_and(Value::is_object) {
                config["cluster"] = json!({});
            }
            config["cluster"]["tls"] = tls;
        }
        translate_rllib(&mut config, RLLIB_RENAMED, RLLIB_IGNORED, true);
        let mut stop = entry.remove("stop").unwrap_or(Value::Null);
        if !stop.is_null() && !stop.is_object() {
            return Err(arg_error(
                format!("{flag}: stop"),
                ConfigError::Malformed(format!(
                    "must be a map of criteria, such as {{timesteps_total: 100000}}, got {stop}"
                )),
            ));
        }
        if !cli_stop.is_null() && !cli_stop.is_object() {
            return Err(arg_error(
                "--stop",
                ConfigError::Malformed(format!(
                    "must be a JSON object of criteria, such as '{{\"timesteps_total\": 100000}}', got {cli_stop}"
                )),
            ));
        }
        if !cli_stop.is_null() {
            if stop.is_null() {
                stop = json!({});
            }
            deep_merge(&mut stop, &cli_stop);
        }
        translate_stop(&mut stop);
        let freq = match entry.get("checkpoint_freq") {
            None => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                arg_error(
                    &flag,
                    ConfigError::Malformed(format!("`checkpoint_freq` must be a whole number >= 0, got {v}")),
                )
            })?,
        };
        let at_end = match entry.get("checkpoint_at_end") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| {
                arg_error(&flag, ConfigError::Malformed(format!("`checkpoint_at_end` must be true or false, got {v}")))
            })?,
        };
        let keep = match (args.keep_checkpoints_num, entry.get("keep_checkpoints_num")) {
            (Some(n), _) => Some(n),
            (None, None | Some(Value::Null)) => None,
            (None, Some(v)) => Some(v.as_u64().filter(|&n| n >= 1).map(|n| n as usize).ok_or_else(|| {
                arg_error(
                    &flag,
                    ConfigError::Malformed(format!("`keep_checkpoints_num` must be a whole number >= 1, got {v}")),
                )
            })?),
        };
        let score_attr = match (&args.checkpoint_score_attr, text(&entry, "checkpoint_score_attr")?) {
            (Some(a), _) => Some(a.clone()),
            (None, file) => file,
        };
        // A resumed run keeps and ranks its checkpoints as the run it
        // resumes did, unless told otherwise.
        let earlier = restored.and_then(|c| c.dir.parent()).map(|d| d.join("params.json"));
        let earlier: Value =
            earlier.and_then(|p| serde_json::from_slice(&std::fs::read(p).ok()?).ok()).unwrap_or_default();
        let keep = keep.or_else(|| earlier["keep_checkpoints_num"].as_u64().filter(|&n| n >= 1).map(|n| n as usize));
        let score_attr = score_attr.or_else(|| earlier["checkpoint_score_attr"].as_str().map(String::from));
        if let Some(attr) = &score_attr {
            let from = if args.checkpoint_score_attr.is_some() { "--checkpoint-score-attr" } else { flag.as_str() };
            crate::retention::ScoreAttr::parse(attr).map_err(|e| arg_error(from, e))?;
        }
        out.push(Experiment {
            name,
            run,
            env,
            config,
            stop,
            checkpoint_freq: if args.checkpoint_freq > 0 { args.checkpoint_freq } else { freq },
            checkpoint_at_end: args.checkpoint_at_end || at_end,
            keep_checkpoints_num: keep,
            checkpoint_score_attr: score_attr,
            file: args.config_file.as_ref().map(|_| flag.clone()),
            config_sources: sources,
            stop_flag: !cli_stop.is_null(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("rlx-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn rllib_tuned_example_yaml_resolves() {
        let path = write(
            "cartpole-ppo.yaml",
            "cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    env_runners/episode_return_mean: 150\n    timesteps_total: 100000\n  config:\n    framework: torch\n    gamma: 0.99\n    lr: 0.0003\n    num_env_runners: 2\n    num_epochs: 6\n    vf_loss_coeff: 0.01\n",
        );
        let args = TrainArgs { config_file: Some(path.clone()), seed: Some(3), ..Default::default() };
        let exps = experiments(None, &args, None).unwrap();
        assert_eq!(exps.len(), 1);
        let e = &exps[0];
        assert_eq!((e.name.as_deref(), e.run.as_str(), e.env.as_str()), (Some("cartpole-ppo"), "PPO", "CartPole-v1"));
        assert_eq!(
            e.config,
            json!({"gamma": 0.99, "lr": 0.0003, "num_workers": 2, "num_sgd_iter": 6, "vf_loss_coeff": 0.01, "seed": 3})
        );
        assert_eq!(e.stop, json!({"episode_reward_mean": 150, "timesteps_total": 100000}));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn flags_override_the_file_and_bad_files_name_the_problem() {
        let path =
            write("exp.yaml", "x:\n  run: PPO\n  env: CartPole-v1\n  config: {lr: 0.01, restart: {max_restarts: 2}}\n");
        let args = TrainArgs {
            config_file: Some(path.clone()),
            env: Some("Acrobot-v1".into()),
            config: Some(r#"{"restart": {"window_s": 5}}"#.into()),
            ..Default::default()
        };
        let e = &experiments(None, &args, None).unwrap()[0];
        assert_eq!(e.env, "Acrobot-v1");
        assert_eq!(e.config, json!({"lr": 0.01, "restart": {"max_restarts": 2, "window_s": 5}}));
        let err = experiments(Some("A2C"), &args, None).unwrap_err().to_string();
        assert!(err.contains("run: PPO") && err.contains("A2C"), "{err}");

        std::fs::write(&path, "x:\n  run: PPO\n  evn: CartPole-v1\n").unwrap();
        let err = experiments(None, &args, None).unwrap_err().to_string();
        assert!(err.contains("`evn`") && err.contains("did you mean `env`"), "{err}");
        std::fs::write(&path, "x: [1, 2\n").unwrap();
        let err = experiments(None, &args, None).unwrap_err().to_string();
        assert!(err.contains("exp.yaml") && err.contains("not valid YAML"), "{err}");
        std::fs::remove_file(path).unwrap();

        let none = TrainArgs::default();
        assert!(experiments(None, &none, None).unwrap_err().to_string().contains("--run"));
        assert!(experiments(Some("PPO"), &none, None).unwrap_err().to_string().contains("--env"));
    }
}

/// `--tls-ca` and its companions as the config key `cluster.tls`.
fn tls_flags(args: &TrainArgs) -> Option<Value> {
    let ca = args.tls_ca.as_ref()?;
    let mut tls = json!({"ca": ca});
    for (key, value) in [("cert", &args.tls_cert), ("key", &args.tls_key)] {
        if let Some(path) = value {
            tls[key] = json!(path);
        }
    }
    if let Some(name) = &args.tls_server_name {
        tls["server_name"] = json!(name);
    }
    Some(tls)
}
