//! The evaluation keys every algorithm takes (RLlib's names), and the
//! evaluators they build: see [`rlx::evaluation`] for what an evaluation
//! does.
//!
//! The keys are read here, by the registry, for every algorithm at once,
//! so no algorithm's config or file mentions them: an algorithm is built
//! from its own keys, and its policies are built a second time, with
//! `evaluation_config` applied, for the evaluation evaluators.

use crate::common::build_context::BuildContext;
use crate::common::fitted_q::QModelConfig;
use crate::common::sampling::{spawn_evaluators, PolicyMaker, SamplingSettings};
use crate::error::BuildError;
use documented::DocumentedFields;
use rlx::config::{check_count, deep_merge, merge_json, ConfigError, Validate};
use rlx::env::EnvMaker;
use rlx::evaluation::{Evaluation, EvaluationSettings, Videos};
use rlx::experience::{ExperienceReader, InputSpec};
use rlx::filter::ObservationFilter;
use rlx::off_policy_estimation::{Estimator, OffPolicyEstimation};
use rlx::{EnvShards, RestartPolicy, Trainer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Evaluation during training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default, deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Evaluate after every N training iterations (0: never). An
    /// evaluation plays whole episodes with the learner's current policy,
    /// greedily by default, on evaluators of its own, and reports them
    /// under `evaluation` in result.json (`--stop
    /// '{"evaluation/episode_reward_mean": 475}'` stops on it).
    pub evaluation_interval: u64,
    /// Episodes per evaluation.
    pub evaluation_duration: usize,
    /// Evaluator actors that play the evaluation episodes while the next
    /// iteration trains (on the weights it starts with); 0 plays them in
    /// the driver after the iteration. They run in the driver's process,
    /// also when training's evaluators are on nodes.
    pub evaluation_num_workers: usize,
    /// Overrides of this config for the evaluation evaluators, e.g.
    /// `{"num_envs_per_worker": 4}` (not `env_config`: evaluation envs are
    /// made like training's), plus `explore`
    /// (default false: the most likely action) and `seed` (default: the
    /// run's seed + 1,000,000,007, so evaluation episodes differ from
    /// training's).
    pub evaluation_config: Value,
    /// A run from `input`: off-policy estimates of the current policy's
    /// return from the dataset's episodes, reported with each evaluation
    /// under `off_policy_estimation` in result.json: any of `is`
    /// (importance sampling), `wis` (weighted), `dm` (the direct method,
    /// fitted Q evaluation) and `dr` (doubly robust). Discrete actions, and a
    /// dataset with the behaviour policy's `action_logp`.
    pub off_policy_estimation_methods: Vec<Estimator>,
    /// Episodes of `input` per off-policy estimate (read in turn, over and
    /// over).
    pub off_policy_estimation_episodes: usize,
    /// The `Q̂` that `dm` and `dr` fit: `{"type": "linear"}` (linear in
    /// the one-hot action times `(1, s)`, solved exactly) or `{"type":
    /// "neural"}` (a network trained by fitted Q evaluation, with
    /// `hiddens` [64, 64], at most `iterations` 100 passes, `tolerance`
    /// 0.001, `lr` 0.001, `minibatch_size` 256, `seed` 0), as RLlib's
    /// `q_model_config`.
    pub off_policy_estimation_q_model: QModelConfig,
    /// Record a video of the first evaluation episode after every N
    /// training iterations (0: never; a multiple of
    /// `evaluation_interval`). `rlx train` writes
    /// `videos/iteration_<N>.<format>` into the run directory, 30 frames a
    /// second, one frame per step. The env must draw frames
    /// (`Env::render_rgb`: the bundled envs, MinAtar, the board games, and
    /// Gymnasium envs with `rgb_array` rendering).
    pub record_video_interval: u64,
    /// The videos' format: `gif` (pure Rust, always available) or `mp4`
    /// (H.264 through `ffmpeg`, which must be installed).
    pub record_video_format: VideoFormat,
}

/// The format of evaluation videos (`record_video_format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VideoFormat {
    /// Animated GIF.
    #[default]
    Gif,
    /// H.264 in MP4, through ffmpeg.
    Mp4,
}

impl VideoFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            VideoFormat::Gif => "gif",
            VideoFormat::Mp4 => "mp4",
        }
    }
}

/// Frames per second of evaluation videos.
pub const VIDEO_FPS: u32 = 30;

impl Default for EvaluationConfig {
    fn default() -> Self {
        Self {
            evaluation_interval: 0,
            evaluation_duration: 10,
            evaluation_num_workers: 0,
            evaluation_config: Value::Object(Map::new()),
            off_policy_estimation_methods: Vec::new(),
            off_policy_estimation_episodes: 100,
            off_policy_estimation_q_model: QModelConfig::default(),
            record_video_interval: 0,
            record_video_format: VideoFormat::Gif,
        }
    }
}

impl Validate for EvaluationConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        check_count("evaluation_duration", self.evaluation_duration, 1, 1 << 20)?;
        check_count(
            "evaluation_num_workers",
            self.evaluation_num_workers,
            0,
            crate::common::sections::limits::MAX_WORKERS,
        )?;
        check_count("off_policy_estimation_episodes", self.off_policy_estimation_episodes, 1, 1 << 20)?;
        self.off_policy_estimation_q_model.validate()?;
        if !self.off_policy_estimation_methods.is_empty() && self.evaluation_interval == 0 {
            return Err(ConfigError::Invalid {
                key: "off_policy_estimation_methods".into(),
                message: "estimates are made with each evaluation: set `evaluation_interval` too".into(),
            });
        }
        let every = self.evaluation_interval;
        if self.record_video_interval > 0 && (every == 0 || !self.record_video_interval.is_multiple_of(every)) {
            return Err(ConfigError::Invalid {
                key: "record_video_interval".into(),
                message: format!(
                    "videos record evaluation episodes: it must be a multiple of evaluation_interval ({every}), got {}",
                    self.record_video_interval
                ),
            });
        }
        if !self.evaluation_config.is_object() {
            return Err(ConfigError::Invalid {
                key: "evaluation_config".into(),
                message: format!("must be an object of config overrides, got {}", self.evaluation_config),
            });
        }
        Ok(())
    }
}

/// What the run's seed is offset by for evaluation envs unless
/// `evaluation_config.seed` is given.
pub const SEED_OFFSET: u64 = 1_000_000_007;

/// The evaluation keys.
pub fn keys() -> &'static [&'static str] {
    EvaluationConfig::FIELD_NAMES
}

/// Takes the evaluation keys out of `overrides`: the evaluation config and
/// the rest.
///
/// # Errors
/// An evaluation key of the wrong type or out of range.
pub fn split(overrides: &Value) -> Result<(EvaluationConfig, Value), ConfigError> {
    let Value::Object(map) = overrides else { return Ok((EvaluationConfig::default(), overrides.clone())) };
    let (mine, rest): (Map<String, Value>, Map<String, Value>) =
        map.clone().into_iter().partition(|(k, _)| keys().contains(&k.as_str()));
    let cfg = merge_json(&EvaluationConfig::default(), &Value::Object(mine))?;
    Ok((cfg, Value::Object(rest)))
}

/// The evaluators' part of the config: `resolved` (the algorithm's
/// resolved config) with `evaluation_config` on top, less `explore`; and
/// `explore`.
///
/// # Errors
/// `explore` that is not a boolean.
pub fn evaluator_config(resolved: &Value, cfg: &EvaluationConfig) -> Result<(Value, bool), ConfigError> {
    let mut overrides = cfg.evaluation_config.clone();
    if overrides.get("env_config").is_some() {
        return Err(ConfigError::Invalid {
            key: "evaluation_config.env_config".into(),
            message: "evaluation envs are made like the training envs, with the run's env_config; \
                      another env_config for evaluation is not supported"
                .into(),
        });
    }
    let explore = match overrides.as_object_mut().and_then(|o| o.remove("explore")) {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return Err(ConfigError::Invalid {
                key: "evaluation_config.explore".into(),
                message: format!("must be true or false, got {other}"),
            })
        }
    };
    let mut merged = resolved.clone();
    deep_merge(&mut merged, &overrides);
    Ok((merged, explore))
}

/// Names a key of `evaluation_config` as such in `e`.
pub fn in_evaluation_config(e: ConfigError) -> ConfigError {
    let prefix = |key: String| format!("evaluation_config.{key}");
    match e {
        ConfigError::UnknownKey { key, closest, valid } => ConfigError::UnknownKey { key: prefix(key), closest, valid },
        ConfigError::Invalid { key, message } => ConfigError::Invalid { key: prefix(key), message },
        ConfigError::OutOfRange { key, value, allowed } => ConfigError::OutOfRange { key: prefix(key), value, allowed },
        other => other,
    }
}

/// Builds the evaluation evaluators from the evaluators' config `merged`
/// (see [`evaluator_config`]) and gives them to `trainer`. They act with
/// the run's policy wiring (`ctx`, so a multi-agent run's evaluators hold
/// its policies) and live in this process even when training's
/// evaluators are placed on nodes.
///
/// # Errors
/// An evaluator that fails to start.
pub async fn attach(
    ctx: &BuildContext,
    trainer: Trainer,
    cfg: &EvaluationConfig,
    merged: &Value,
    explore: bool,
    make_env: EnvMaker,
    make_policy: PolicyMaker,
) -> Result<Trainer, BuildError> {
    let given = |key: &str| merged.get(key).filter(|v| !v.is_null()).cloned();
    fn parse<T: serde::de::DeserializeOwned + Default>(key: &str, value: Option<Value>) -> Result<T, ConfigError> {
        value.map_or(Ok(T::default()), |v| {
            serde_json::from_value(v).map_err(|e| ConfigError::Invalid { key: key.into(), message: e.to_string() })
        })
    }
    let seed: u64 = parse("seed", given("seed"))?;
    let seed = if cfg.evaluation_config.get("seed").is_some() { seed } else { seed.wrapping_add(SEED_OFFSET) };
    let num_envs: usize = parse("num_envs_per_worker", given("num_envs_per_worker"))?;
    let observation_filter: ObservationFilter = parse("observation_filter", given("observation_filter"))?;
    let restart: RestartPolicy = parse("restart", given("restart"))?;
    let env_shards: EnvShards = parse("env_shards", given("env_shards"))?;
    let settings = SamplingSettings {
        num_workers: cfg.evaluation_num_workers,
        num_envs_per_worker: num_envs.max(1),
        sample_size: 1,
        observation_filter,
        // Evaluation returns are the env's own; no learner sees its rewards.
        reward_scaling: None,
        seed,
        restart,
        env_shards,
        // Evaluation episodes are not the run's experience.
        output: None,
        input: None,
    };
    let here = BuildContext { placement: None, ..ctx.clone() };
    if cfg.record_video_interval > 0 {
        check_draws(&make_env, cfg.record_video_format, &env_shards)?;
    }
    let evaluators = spawn_evaluators(&here, make_env, make_policy, settings).await?;
    let settings =
        EvaluationSettings { interval: cfg.evaluation_interval, duration: cfg.evaluation_duration, explore, seed };
    let mut evaluation = Evaluation::new(evaluators, settings);
    if cfg.record_video_interval > 0 {
        evaluation = evaluation.with_videos(Videos {
            interval: cfg.record_video_interval,
            format: cfg.record_video_format.extension().into(),
            fps: VIDEO_FPS,
            dir: None,
        });
    }
    let mut trainer = trainer.with_evaluation(evaluation);
    if cfg.off_policy_estimation_methods.is_empty() {
        return Ok(trainer);
    }
    let estimation = off_policy_estimation(cfg, merged)?;
    estimation
        .check_target(trainer.evaluators_mut().local_mut().policy_mut())
        .map_err(|message| ConfigError::Invalid { key: "off_policy_estimation_methods".into(), message })?;
    Ok(trainer.with_off_policy_estimation(estimation))
}

/// Checks, before training, that the videos `record_video_interval` asks
/// for can be made: a copy of the env, built as the evaluators build
/// theirs (`shards`), draws a frame after its reset, and ffmpeg (with
/// H.264) is there for MP4.
///
/// # Errors
/// An env without frames, copies in env shard actors (which draw none),
/// or MP4 without ffmpeg, naming the key.
fn check_draws(make_env: &EnvMaker, format: VideoFormat, shards: &EnvShards) -> Result<(), BuildError> {
    let invalid = |key: &str, message: String| BuildError::Config(ConfigError::Invalid { key: key.into(), message });
    let target = std::path::PathBuf::from(format!("video.{}", format.extension()));
    rlx::video::check_target(&target).map_err(|e| invalid("record_video_format", e.to_string()))?;
    // One copy, so at most one shard.
    let one = EnvShards { num_shards: shards.num_shards.min(1), ..*shards };
    let mut env = rlx::VectorEnv::build(make_env.clone(), 1, &one, true)?;
    env.reset(0)?;
    match env.render_rgb(0)? {
        Some(_) => Ok(()),
        None if env.shards().is_some() => Err(invalid(
            "record_video_interval",
            "the evaluation's env copies step in env shard actors (env_shards.num_shards > 0), which draw no \
             frames: add \"env_shards\": {\"num_shards\": 0} to evaluation_config"
                .into(),
        )),
        None => Err(invalid(
            "record_video_interval",
            rlx::video::VideoError::NoFrames { env: env.name().into() }.to_string(),
        )),
    }
}

/// The off-policy estimation `cfg` asks for, from the run's `input`.
///
/// # Errors
/// No `input`, no `gamma`, or a dataset the estimators cannot use (no
/// `action_logp` for is, wis or dr, actions neither discrete nor a Box).
fn off_policy_estimation(cfg: &EvaluationConfig, merged: &Value) -> Result<OffPolicyEstimation, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid { key: "off_policy_estimation_methods".into(), message };
    let input: InputSpec = match merged.get("input").filter(|v| !v.is_null()) {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| invalid(format!("input: {e}")))?,
        None => return Err(invalid("estimates are made from `input`'s episodes, and this run has no input".into())),
    };
    let gamma = merged
        .get("gamma")
        .and_then(Value::as_f64)
        .ok_or_else(|| invalid("estimates discount by the algorithm's `gamma`, and it has none".into()))?;
    let reader = ExperienceReader::open(&input).map_err(|e| invalid(e.to_string()))?;
    OffPolicyEstimation::new(
        cfg.off_policy_estimation_methods.clone(),
        cfg.off_policy_estimation_episodes,
        gamma,
        reader,
        cfg.off_policy_estimation_q_model.build(),
    )
    .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_takes_the_evaluation_keys_and_checks_them() {
        let (cfg, rest) =
            split(&json!({"lr": 0.1, "evaluation_interval": 2, "evaluation_config": {"explore": true}})).unwrap();
        assert_eq!(cfg.evaluation_interval, 2);
        assert_eq!(cfg.evaluation_duration, 10);
        assert_eq!(rest, json!({"lr": 0.1}));
        let (merged, explore) = evaluator_config(&json!({"lr": 0.1, "seed": 3}), &cfg).unwrap();
        assert!(explore);
        assert_eq!(merged, json!({"lr": 0.1, "seed": 3}));
        let err = split(&json!({"evaluation_duration": 0})).unwrap_err();
        assert!(err.to_string().contains("evaluation_duration"), "{err}");
        let err = split(&json!({"evaluation_interval": -1})).unwrap_err();
        assert!(err.to_string().contains("evaluation_interval"), "{err}");
        let err = split(&json!({"evaluation_config": 3})).unwrap_err();
        assert!(err.to_string().contains("must be an object"), "{err}");
        let (cfg, _) = split(&json!({"evaluation_config": {"explore": "yes"}})).unwrap();
        let err = evaluator_config(&json!({}), &cfg).unwrap_err();
        assert!(err.to_string().contains("evaluation_config.explore"), "{err}");
    }
}
