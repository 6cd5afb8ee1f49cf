//! `rlx rollout`: plays a checkpoint's policy and prints return statistics.

use crate::args::Pick;
use crate::{CliError, RolloutArgs};
use rlx::checkpoint::Checkpoint;
use rlx::video::VideoWriter;
use rlx::{fields, Action, Column, SampleBatch, Space};
use rlx_algorithms::{make_policy_for_env, BuildError};
use serde_json::Value;
use std::io::IsTerminal;
use std::time::Duration;

/// Return statistics of `rlx rollout`.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutSummary {
    /// Each episode's return.
    pub returns: Vec<f64>,
    /// Each episode's length.
    pub lengths: Vec<u64>,
}

impl RolloutSummary {
    /// Mean return.
    pub fn mean(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len().max(1) as f64
    }

    /// Population standard deviation of the returns.
    pub fn std(&self) -> f64 {
        let m = self.mean();
        (self.returns.iter().map(|r| (r - m).powi(2)).sum::<f64>() / self.returns.len().max(1) as f64).sqrt()
    }
}

/// Steps `env` with the `actions` column of `out` (one row), writing the
/// next observation into `obs`; continuous actions are clipped to the
/// space's bounds, as evaluators clip them.
///
/// # Errors
/// No actions, actions written as bytes, or the env's error, as text.
pub(crate) fn step_with(env: &mut dyn rlx::Env, out: &SampleBatch, obs: &mut [f32]) -> Result<rlx::Step, String> {
    let space = env.action_space().clone();
    match (out.get(fields::ACTIONS), &space) {
        (Some(Column::I64 { data, .. }), Space::MultiDiscrete { .. }) => env.step(Action::MultiDiscrete(data), obs),
        (Some(Column::I64 { data, .. }), _) => env.step(Action::Discrete(data[0]), obs),
        (Some(Column::F32 { data, .. }), space) => {
            let mut clipped = data.clone();
            space.clip(&mut clipped);
            env.step(Action::Continuous(&clipped), obs)
        }
        (None, _) => return Err("the policy wrote no actions".into()),
        (Some(Column::U8 { .. }), _) => return Err("the policy wrote its actions as bytes".into()),
    }
    .map_err(|e| e.to_string())
}

/// A checkpoint's policy with its weights, and a fresh copy of its env.
pub struct Restored {
    /// The checkpoint.
    pub ckpt: Checkpoint,
    /// The run's `env_config`.
    pub kwargs: Value,
    /// The env.
    pub env: Box<dyn rlx::Env>,
    /// The policy, its weights loaded (its state not).
    pub policy: Box<dyn rlx::PolicyGraph>,
}

impl Restored {
    /// The observation filter of the run's local evaluator, if it had one.
    pub fn filter(&self) -> Option<rlx::filter::MeanStdFilter> {
        self.ckpt.state.evaluators.iter().find(|e| e.index == 0).and_then(|e| e.filter.clone())
    }

    /// Restores the local evaluator's policy state into the policy:
    /// policies that keep part of what they compute in their state (ES and
    /// ARS: the observation statistics) need it to act as trained.
    ///
    /// # Errors
    /// A state the policy cannot read.
    pub fn load_policy_state(&mut self) -> Result<(), rlx::PolicyError> {
        match self.ckpt.state.evaluators.iter().find(|e| e.index == 0).and_then(|e| e.policy.as_ref()) {
            Some(state) => self.policy.load_state(state),
            None => Ok(()),
        }
    }
}

/// Opens `checkpoint` (a checkpoint directory, or a run directory's
/// checkpoint by `pick`), makes its env and its policy (seeded with
/// `seed`) and loads the weights.
///
/// # Errors
/// A bad checkpoint, `--pick best` on a checkpoint, or an env or policy
/// that cannot be made.
pub fn restore(checkpoint: &std::path::Path, pick: Pick, seed: u64) -> Result<Restored, CliError> {
    let path = match pick {
        Pick::Latest => checkpoint.to_path_buf(),
        Pick::Best if checkpoint.join("metadata.json").is_file() => {
            return Err(CliError::Usage(format!(
                "{} is a checkpoint; --pick best chooses among a run directory's checkpoints",
                checkpoint.display()
            )))
        }
        Pick::Best => crate::retention::best(checkpoint)?,
    };
    let ckpt = Checkpoint::load(&path)?;
    ckpt.warnings.iter().for_each(|w| errln!("warning: {w}"));
    let meta = &ckpt.metadata;
    let kwargs = meta.config.get("env_config").cloned().unwrap_or(Value::Null);
    let env = rlx_envs::make_with(&meta.env, &kwargs).map_err(BuildError::from)?;
    let mut policy = make_policy_for_env(&meta.algorithm, &meta.config, env.as_ref(), seed)?;
    ckpt.load_weights(policy.as_mut())?;
    Ok(Restored { ckpt, kwargs, env, policy })
}

/// Runs `rlx rollout`: loads the checkpoint's policy (and observation
/// filter) and plays `episodes` episodes, printing one line each.
///
/// # Errors
/// A bad checkpoint, an env without text rendering with `--render`, or an
/// env or policy error.
pub fn rollout(args: &RolloutArgs) -> Result<RolloutSummary, CliError> {
    if args.episodes == 0 {
        return Err(CliError::Usage("--episodes must be at least 1".into()));
    }
    // Checked before playing: a bad file name or a missing ffmpeg.
    let mut video = match &args.video {
        Some(path) => Some(VideoWriter::create(path, args.fps).map_err(|e| CliError::Usage(e.to_string()))?),
        None => None,
    };
    let mut restored = restore(&args.checkpoint, args.pick, args.seed)?;
    if let Some(agents) = restored.env.agent_ids().map(<[String]>::to_vec) {
        let Restored { ckpt, kwargs, policy, .. } = restored;
        return rollout_agents(args, &ckpt, &kwargs, policy, agents, video);
    }
    let filter = restored.filter();
    if let Err(e) = restored.load_policy_state() {
        errln!("warning: the checkpoint's policy state was not restored ({e}); acting on the weights alone");
    }
    let Restored { ckpt, mut env, mut policy, .. } = restored;
    let meta = &ckpt.metadata;
    if args.render && env.render().is_none() {
        return Err(CliError::Usage(format!("{} has no text rendering; drop --render", meta.env)));
    }
    let animate = args.render && std::io::stdout().is_terminal();
    outln!(
        "{} on {} from {} (iteration {}), {} actions",
        meta.algorithm,
        meta.env,
        ckpt.dir.display(),
        meta.training_iteration,
        if args.explore { "sampled" } else { "greedy" }
    );
    let fail = |e: &dyn std::fmt::Display| CliError::Rollout(e.to_string());
    let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
    let mut out = SampleBatch::new();
    let mut summary = RolloutSummary { returns: Vec::new(), lengths: Vec::new() };
    // Recurrent policies carry their state from step to step; masks come
    // from the env at every step.
    let mut acting = rlx::acting::Acting::new(policy.as_ref(), 1);
    let mut mask = vec![1.0f32; env.action_space().mask_width().unwrap_or(0)];
    for episode in 0..args.episodes {
        env.reset(Some(args.seed + episode as u64), &mut obs).map_err(|e| fail(&e))?;
        acting.episode_started(0);
        let (mut ret, mut len) = (0.0, 0u64);
        loop {
            if args.render {
                let frame = env.render().unwrap_or_default();
                if animate {
                    out!("\x1b[2J\x1b[H");
                }
                outln!("episode {} step {len} return {ret:.1}\n{frame}\n", episode + 1);
                if animate {
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
            if let Some(v) = video.as_mut().filter(|_| episode == 0) {
                record(v, &meta.env, env.render_rgb().map_err(|e| fail(&e))?)?;
            }
            let mut input = obs.clone();
            if let Some(f) = &filter {
                f.normalize(&mut input);
            }
            let masked =
                !mask.is_empty() && rlx::env::read_action_mask(env.as_ref(), &mut mask, len).map_err(|e| fail(&e))?;
            let mask_input = masked.then_some(&mask[..]);
            acting.act(policy.as_mut(), &input, mask_input, args.explore, &mut out).map_err(|e| fail(&e))?;
            let step = step_with(env.as_mut(), &out, &mut obs).map_err(CliError::Rollout)?;
            ret += step.reward;
            len += 1;
            if step.done() {
                break;
            }
        }
        outln!("episode {:>3}: return {ret:>8.1}  length {len}", episode + 1);
        if let Some(v) = video.take() {
            finish_video(v)?;
        }
        summary.returns.push(ret);
        summary.lengths.push(len);
    }
    let (min, max) = summary.returns.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &r| (a.min(r), b.max(r)));
    outln!(
        "{} episode{}: mean return {:.1} ± {:.1} (min {min:.1}, max {max:.1}), mean length {:.1}",
        args.episodes,
        if args.episodes == 1 { "" } else { "s" },
        summary.mean(),
        summary.std(),
        summary.lengths.iter().sum::<u64>() as f64 / args.episodes as f64
    );
    Ok(summary)
}

/// Adds the frame `env` drew to `--video`; an env without frames is a
/// usage error.
fn record(video: &mut VideoWriter, env: &str, drawn: Option<rlx::video::Frame>) -> Result<(), CliError> {
    video.push_drawn(env, drawn).map_err(|e| match e {
        rlx::video::VideoError::NoFrames { .. } => CliError::Usage(format!("{e}; drop --video")),
        other => CliError::Rollout(other.to_string()),
    })
}

/// Finishes `--video` and says where it is.
fn finish_video(video: VideoWriter) -> Result<(), CliError> {
    let path = video.path().to_path_buf();
    let frames = video.finish().map_err(|e| CliError::Rollout(e.to_string()))?;
    outln!("video: {} ({frames} frames)", path.display());
    Ok(())
}

/// `rlx rollout` of a multi-agent checkpoint: every agent acts with its
/// policy, as in training (one env copy, its agents as rows); one line per
/// episode with the total return and each agent's. `video` records the
/// first episode, one frame per env step.
fn rollout_agents(
    args: &RolloutArgs,
    ckpt: &Checkpoint,
    kwargs: &Value,
    mut policy: Box<dyn rlx::PolicyGraph>,
    agents: Vec<String>,
    mut video: Option<VideoWriter>,
) -> Result<RolloutSummary, CliError> {
    let meta = &ckpt.metadata;
    if args.render {
        return Err(CliError::Usage(format!("{} has no text rendering; drop --render", meta.env)));
    }
    let fail = |e: &dyn std::fmt::Display| CliError::Rollout(e.to_string());
    let (name, kwargs) = (meta.env.clone(), kwargs.clone());
    let make: rlx::EnvMaker = std::sync::Arc::new(move || rlx_envs::make_with(&name, &kwargs));
    let mut env = rlx::VectorEnv::build(make, 1, &rlx::EnvShards::default(), true).map_err(|e| fail(&e))?;
    outln!(
        "{} on {} from {} (iteration {}), {} actions, agents {}",
        meta.algorithm,
        meta.env,
        ckpt.dir.display(),
        meta.training_iteration,
        if args.explore { "sampled" } else { "greedy" },
        agents.join(", ")
    );
    let local = ckpt.state.evaluators.iter().find(|e| e.index == 0);
    let filter = local.and_then(|e| e.filter.clone());
    env.reset(args.seed).map_err(|e| fail(&e))?;
    let (mut out, mut step) = (SampleBatch::new(), rlx::vector_env::VectorStep::default());
    let mut summary = RolloutSummary { returns: Vec::new(), lengths: Vec::new() };
    let mut agent_returns = vec![0.0; agents.len()];
    // Bounded: an episode must end within a million steps.
    for _ in 0..1_000_000u64 {
        let mut obs = env.observations().to_vec();
        if let Some(f) = &filter {
            f.normalize(&mut obs);
        }
        if let Some(v) = video.as_mut() {
            record(v, &meta.env, env.render_rgb(0).map_err(|e| fail(&e))?)?;
        }
        let input = rlx::PolicyInput { obs: &obs, action_mask: env.action_masks(), state: None, explore: args.explore };
        policy.compute_actions_from_input(&input, &mut out).map_err(|e| fail(&e))?;
        let actions = out.get(fields::ACTIONS).ok_or_else(|| fail(&"the policy wrote no actions"))?.clone();
        env.step(&actions, &mut step).map_err(|e| fail(&e))?;
        for episode in env.drain_finished() {
            match episode.agent {
                Some(a) => agent_returns[a as usize] = episode.episode_return,
                None => {
                    // The whole game is over, not only one agent's part of it.
                    if let Some(v) = video.take() {
                        finish_video(v)?;
                    }
                    let per_agent: Vec<String> =
                        agents.iter().zip(&agent_returns).map(|(id, r)| format!("{id} {r:.1}")).collect();
                    outln!(
                        "episode {:>3}: return {:>8.1}  length {}  ({})",
                        summary.returns.len() + 1,
                        episode.episode_return,
                        episode.length,
                        per_agent.join(", ")
                    );
                    summary.returns.push(episode.episode_return);
                    summary.lengths.push(episode.length);
                }
            }
        }
        if summary.returns.len() >= args.episodes {
            outln!(
                "{} episodes: mean return {:.1} ± {:.1}, mean length {:.1}",
                args.episodes,
                summary.mean(),
                summary.std(),
                summary.lengths.iter().sum::<u64>() as f64 / args.episodes as f64
            );
            return Ok(summary);
        }
    }
    Err(fail(&"no episode ended within a million steps"))
}
