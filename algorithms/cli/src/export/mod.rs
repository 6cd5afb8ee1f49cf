//! `rlx export`: a checkpoint's acting policy as an ONNX model, checked
//! against rlx before it is kept.
//!
//! The policy describes its network ([`rlx::PolicyGraph::export`]),
//! [`onnx`] writes the description with the run's observation filter in
//! front, and [`parity`] runs the written model in tract beside the policy
//! on observations recorded from the env. A model that disagrees is not
//! written.

pub mod onnx;
pub mod parity;

use crate::args::{ExportArgs, ExportFormat};
use crate::rollout::{restore, Restored};
use crate::CliError;
use prost::Message;

/// What `rlx export` wrote and how it compared.
#[derive(Clone, Debug)]
pub struct ExportSummary {
    /// The model file.
    pub path: std::path::PathBuf,
    /// Its size in bytes.
    pub bytes: usize,
    /// The comparison with the policy.
    pub parity: parity::Parity,
    /// Where the compared observations came from.
    pub source: &'static str,
}

/// Runs `rlx export`.
///
/// # Errors
/// A bad checkpoint, a policy that cannot be exported, a model that
/// disagrees with the policy, or a file that cannot be written.
pub fn export(args: &ExportArgs) -> Result<ExportSummary, CliError> {
    let ExportFormat::Onnx = args.format;
    if args.check_rows == 0 {
        return Err(CliError::Usage("--check-rows must be at least 1".into()));
    }
    let mut restored = restore(&args.checkpoint, args.pick, 0)?;
    let filter = restored.filter();
    restored.load_policy_state().map_err(|e| CliError::Export(format!("the checkpoint's policy state: {e}")))?;
    let Restored { ckpt, mut env, mut policy, .. } = restored;
    let meta = &ckpt.metadata;
    // A multi-agent run with one policy needs no --policy.
    let ids: Vec<String> = policy.weight_layout().into_iter().map(|(id, _)| id).collect();
    let pick = args.policy.clone().or_else(|| (ids.len() == 1).then(|| ids[0].clone()));
    let chosen: &mut dyn rlx::PolicyGraph = match &pick {
        None => policy.as_mut(),
        Some(id) => {
            let ids = ids.join(", ");
            policy.member_mut(id).ok_or_else(|| {
                CliError::Usage(if ids.is_empty() {
                    format!("--policy {id}: the run has one policy; drop --policy")
                } else {
                    format!("--policy {id}: the run's policies are {ids}")
                })
            })?
        }
    };
    let description =
        chosen.export().map_err(|e| CliError::Export(format!("{} on {}: {e}", meta.algorithm, meta.env)))?;
    let (obs_space, act_space) = (chosen.observation_space().clone(), chosen.action_space().clone());
    let json = |s: &rlx::Space| serde_json::to_string(s).unwrap_or_default();
    let mut props = vec![
        ("rlx.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("rlx.algorithm".to_string(), meta.algorithm.clone()),
        ("rlx.env".to_string(), meta.env.clone()),
        ("rlx.training_iteration".to_string(), meta.training_iteration.to_string()),
        ("rlx.checkpoint".to_string(), ckpt.dir.display().to_string()),
        ("rlx.observation_space".to_string(), json(&obs_space)),
        ("rlx.action_space".to_string(), json(&act_space)),
        (
            "rlx.observation_filter".to_string(),
            if filter.is_some() { "MeanStdFilter (in the graph)" } else { "none" }.into(),
        ),
    ];
    props.extend(pick.iter().map(|id| ("rlx.policy".to_string(), id.clone())));
    let model = onnx::model(&description, &obs_space, filter.as_ref(), args.action_mask, onnx::Metadata { props })
        .map_err(CliError::Export)?;
    let bytes = model.encode_to_vec();
    // A single-agent env plays the policy to record observations; a
    // multi-agent one (or a game) cannot be stepped by one policy alone,
    // so its observations are drawn from the observation space.
    let (obs, source) = if env.agent_ids().is_none() {
        let obs = parity::record(env.as_mut(), chosen, filter.as_ref(), args.check_rows, 1_000_000)
            .map_err(|e| CliError::Export(format!("recording observations to check the model: {e}")))?;
        (obs, "recorded from the env")
    } else {
        (parity::draw(&obs_space, args.check_rows, 1_000_000), "drawn from the observation space")
    };
    let parity = parity::compare(&bytes, chosen, filter.as_ref(), &obs).map_err(CliError::Export)?;
    if !parity.holds() {
        let why = if parity.ties * 10 > parity.compared() { " (more than a tenth are near-ties)" } else { "" };
        return Err(CliError::Export(format!(
            "the exported model disagrees with rlx on {} observations: {parity}{why}; nothing was written",
            parity.rows
        )));
    }
    std::fs::write(&args.output, &bytes)?;
    Ok(ExportSummary { path: args.output.clone(), bytes: bytes.len(), parity, source })
}
