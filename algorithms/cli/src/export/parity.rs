//! Whether an exported model computes what rlx computes: both run on the
//! same observations, and their actions, values and action parameters are
//! compared. `rlx export` checks every model it writes this way; the
//! tests check with onnxruntime too.

use rlx::filter::MeanStdFilter;
use rlx::{fields, Column, PolicyGraph, PolicyInput, SampleBatch, Space};
use std::collections::HashMap;
use tract_onnx::prelude::*;

/// How far apart two scores may be and still count as a tie, whose arg
/// max may fall either way in another runtime's floats.
pub const TIE: f32 = 1e-4;

/// The comparison of a model with its policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Parity {
    /// Observations compared.
    pub rows: usize,
    /// Steps on each: 2 for a recurrent policy (from zeros, then from the
    /// state the first step gave), else 1.
    pub steps: usize,
    /// Row-steps whose greedy actions agree.
    pub same_actions: usize,
    /// Row-steps left out of the action count: their two best scores are
    /// within [`TIE`] of each other.
    pub ties: usize,
    /// The largest error of the continuous outputs rlx also gives
    /// (actions, values, probabilities), relative to `max(1, |rlx's|)`.
    pub max_error: f64,
}

impl Parity {
    /// Row-steps compared.
    pub fn compared(&self) -> usize {
        self.rows * self.steps
    }

    /// Whether every non-tied action agrees, the outputs are within `1e-4`,
    /// and ties are at most a tenth of the rows (a model whose scores were
    /// all alike would otherwise pass on ties alone).
    pub fn holds(&self) -> bool {
        self.same_actions + self.ties == self.compared() && self.ties * 10 <= self.compared() && self.max_error <= 1e-4
    }
}

impl std::fmt::Display for Parity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let steps = if self.steps > 1 { ", two steps of the recurrent state" } else { "" };
        write!(
            f,
            "{} of {} greedy actions agree with rlx ({} near-ties left out{steps}), largest error {:.1e}",
            self.same_actions,
            self.compared() - self.ties,
            self.ties,
            self.max_error
        )
    }
}

/// Raw observations (before the filter) from `rows` env steps, the
/// policy acting with exploration so that they spread, episodes reset
/// with seeds from `seed`.
///
/// # Errors
/// An env or policy failure.
pub fn record(
    env: &mut dyn rlx::Env,
    policy: &mut dyn PolicyGraph,
    filter: Option<&MeanStdFilter>,
    rows: usize,
    seed: u64,
) -> Result<Vec<f32>, String> {
    let space = env.action_space().clone();
    let width = env.observation_space().flat_dim();
    let mut obs = vec![0.0f32; width];
    let mut recorded = Vec::with_capacity(rows * width);
    let mut acting = rlx::acting::Acting::new(policy, 1);
    let mut out = SampleBatch::new();
    let mut episode = 0;
    let mut mask = vec![1.0f32; space.mask_width().unwrap_or(0)];
    let mut len = 0u64;
    env.reset(Some(seed), &mut obs).map_err(|e| e.to_string())?;
    acting.episode_started(0);
    for _ in 0..rows {
        recorded.extend_from_slice(&obs);
        let mut input = obs.clone();
        if let Some(f) = filter {
            f.normalize(&mut input);
        }
        // The env's mask where it has one: the policy visits legal states.
        let masked = !mask.is_empty() && rlx::env::read_action_mask(env, &mut mask, len).map_err(|e| e.to_string())?;
        acting.act(policy, &input, masked.then_some(&mask[..]), true, &mut out).map_err(|e| e.to_string())?;
        len += 1;
        let step = crate::rollout::step_with(env, &out, &mut obs)?;
        if step.done() {
            episode += 1;
            len = 0;
            env.reset(Some(seed + episode), &mut obs).map_err(|e| e.to_string())?;
            acting.episode_started(0);
        }
    }
    Ok(recorded)
}

/// `rows` observations drawn from `space` with `seed`: uniform within
/// bounds, standard normal where a bound is infinite (or wider than a
/// million), whole numbers
/// for discrete spaces, whole bytes (`b / 255`) for a byte image.
pub fn draw(space: &Space, rows: usize, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    use rand_distr::StandardNormal;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let one = |rng: &mut rand_chacha::ChaCha8Rng, out: &mut Vec<f32>, space: &Space| match space {
        Space::Box { low, high, dtype: rlx::space::Dtype::U8, .. } => {
            out.extend(low.iter().zip(high).map(|_| rlx::space::from_byte(rng.gen::<u8>())))
        }
        Space::Box { low, high, .. } => out.extend(low.iter().zip(high).map(|(&l, &h)| {
            // CartPole's velocity bounds are f32::MAX: "unbounded" too.
            if l.is_finite() && h.is_finite() && h - l < 1e6 {
                rng.gen_range(l..=h)
            } else {
                rng.sample::<f32, _>(StandardNormal)
            }
        })),
        Space::Discrete { n } => out.push(rng.gen_range(0..*n) as f32),
        Space::MultiDiscrete { nvec } => out.extend(nvec.iter().map(|&n| rng.gen_range(0..n) as f32)),
        Space::Dict { .. } => {}
    };
    let mut out = Vec::with_capacity(rows * space.flat_dim());
    for _ in 0..rows {
        match space {
            Space::Dict { entries } => entries.iter().for_each(|(_, s)| one(&mut rng, &mut out, s)),
            other => one(&mut rng, &mut out, other),
        }
    }
    out
}

/// Runs the ONNX `model` with tract on raw `obs` rows, and `policy` on the
/// same rows filtered by `filter`, greedy, and compares them. A recurrent
/// policy takes a second step from the state its first gave (the first,
/// from zeros, leaves `h · W_hh` and the forget gate out), and its states
/// out are compared too.
///
/// # Errors
/// A model tract cannot load or run, or a policy failure.
pub fn compare(
    model: &[u8],
    policy: &mut dyn PolicyGraph,
    filter: Option<&MeanStdFilter>,
    obs: &[f32],
) -> Result<Parity, String> {
    let rows = obs.len() / policy.observation_space().flat_dim().max(1);
    let mut filtered = obs.to_vec();
    if let Some(f) = filter {
        f.normalize(&mut filtered);
    }
    let zeros = vec![0.0; rows * policy.recurrent_state_size()];
    let (mut parity, next) = step(model, policy, obs, &filtered, &zeros)?;
    if let Some(next) = next {
        let (second, _) = step(model, policy, obs, &filtered, &next)?;
        parity.steps += 1;
        parity.same_actions += second.same_actions;
        parity.ties += second.ties;
        parity.max_error = parity.max_error.max(second.max_error);
    }
    Ok(parity)
}

/// One step of [`compare`] from the recurrent states `state` (empty for a
/// feed-forward policy): the comparison, and rlx's states out.
fn step(
    model: &[u8],
    policy: &mut dyn PolicyGraph,
    obs: &[f32],
    filtered: &[f32],
    state: &[f32],
) -> Result<(Parity, Option<Vec<f32>>), String> {
    let (obs_space, act_space) = (policy.observation_space().clone(), policy.action_space().clone());
    let rows = obs.len() / obs_space.flat_dim().max(1);
    let recurrent = !state.is_empty();
    let onnx = run(model, &obs_space, obs, recurrent.then_some(state), None).map_err(|e| format!("tract: {e:#}"))?;
    let input = PolicyInput { obs: filtered, action_mask: None, state: recurrent.then_some(state), explore: false };
    let mut out = SampleBatch::new();
    policy.compute_actions_from_input(&input, &mut out).map_err(|e| e.to_string())?;
    let mut parity = Parity { rows, steps: 1, same_actions: 0, ties: 0, max_error: 0.0 };
    let output = |name: &str| onnx.get(name).ok_or_else(|| format!("the model has no output {name}"));
    match out.get(fields::ACTIONS) {
        Some(Column::I64 { data, width: k }) => {
            let actions = output("actions_i64")?;
            let scores = onnx.get("logits").or_else(|| onnx.get("q_values")).ok_or("the model has no scores")?;
            let segments = match &act_space {
                Space::MultiDiscrete { nvec } => nvec.iter().map(|&n| n as usize).collect(),
                other => vec![other.flat_dim().max(scores.len() / rows)],
            };
            let choices: usize = segments.iter().sum();
            for r in 0..rows {
                let row = &scores[r * choices..(r + 1) * choices];
                let mut tied = false;
                let mut from = 0;
                for &n in &segments {
                    let mut best: Vec<f32> = row[from..from + n].to_vec();
                    best.sort_by(|a, b| b.total_cmp(a));
                    tied |= n > 1 && best[0] - best[1] <= TIE * best[0].abs().max(1.0);
                    from += n;
                }
                if tied {
                    parity.ties += 1;
                } else if data[r * k..(r + 1) * k]
                    .iter()
                    .zip(&actions[r * k..(r + 1) * k])
                    .all(|(a, &b)| *a as f32 == b)
                {
                    parity.same_actions += 1;
                }
            }
            // Where rlx gives the probabilities (not ES's or ARS's policies),
            // which it computes from a new episode's state.
            let probs = policy.action_probabilities(filtered);
            if let (Some(logits), Space::Discrete { .. }, Ok(probs), false) =
                (onnx.get("logits"), &act_space, probs, state.iter().any(|&x| x != 0.0))
            {
                parity.max_error =
                    parity.max_error.max(error("probabilities", &probs, &softmax_rows(logits, choices))?);
            }
        }
        Some(Column::F32 { data, .. }) => {
            parity.max_error = parity.max_error.max(error("actions", data, output("actions")?)?);
            parity.same_actions = rows;
        }
        _ => return Err("the policy wrote no actions".into()),
    }
    if let (Some(values), Ok(theirs)) = (out.f32(fields::VF_PREDS).ok(), output("value")) {
        parity.max_error = parity.max_error.max(error("values", values, theirs)?);
    }
    let next = if recurrent {
        let ours = out.f32(fields::STATE_OUT).map_err(|e| e.to_string())?.to_vec();
        parity.max_error = parity.max_error.max(error("recurrent states", &ours, output("state_out")?)?);
        Some(ours)
    } else {
        None
    };
    Ok((parity, next))
}

/// Each output of the ONNX `model` run by tract on rows of raw
/// observations `obs` of `obs_space`, by name, as `f32` (int64 actions
/// under `actions_i64`): with the recurrent states `state` of a recurrent
/// model, and the action mask `mask` if given (all ones for a model with a
/// mask input when `None`).
///
/// # Errors
/// A model tract cannot load or run on these inputs.
pub fn run(
    model: &[u8],
    obs_space: &Space,
    obs: &[f32],
    state: Option<&[f32]>,
    mask: Option<&[f32]>,
) -> TractResult<HashMap<String, Vec<f32>>> {
    let width = obs_space.flat_dim();
    let rows = obs.len() / width.max(1);
    let proto = tract_onnx::onnx().proto_model_for_read(&mut &model[..])?;
    let graph = proto.graph.as_ref();
    let names: Vec<String> = graph.map(|g| g.output.iter().map(|o| o.name.clone()).collect()).unwrap_or_default();
    // A model with a mask input and no mask given: every action legal.
    let mask_width = graph.and_then(|g| g.input.iter().find(|i| i.name == "action_mask")).and_then(declared_width);
    let ones;
    let mask = match (mask, mask_width) {
        (None, Some(width)) => {
            ones = vec![1.0; rows * width];
            Some(&ones[..])
        }
        (mask, _) => mask,
    };
    let mut net = tract_onnx::onnx().model_for_proto_model(&proto)?;
    let dims: Vec<usize> = match obs_space {
        Space::Box { shape, .. } => std::iter::once(rows).chain(shape.iter().copied()).collect(),
        other => vec![rows, other.flat_dim()],
    };
    let bytes = matches!(obs_space, Space::Box { dtype: rlx::space::Dtype::U8, .. });
    let obs_tensor = if bytes {
        let b: Vec<u8> = obs.iter().map(|&x| rlx::space::to_byte(x).unwrap_or(0)).collect();
        Tensor::from_shape(&dims, &b)?
    } else {
        Tensor::from_shape(&dims, obs)?
    };
    net.set_input_fact(0, InferenceFact::dt_shape(obs_tensor.datum_type(), &dims))?;
    let mut inputs: TVec<TValue> = tvec![obs_tensor.into()];
    if let Some(state) = state {
        let width = state.len() / rows.max(1);
        net.set_input_fact(1, InferenceFact::dt_shape(f32::datum_type(), [rows, width]))?;
        inputs.push(Tensor::from_shape(&[rows, width], state)?.into());
    }
    if let Some(mask) = mask {
        let width = mask.len() / rows.max(1);
        net.set_input_fact(inputs.len(), InferenceFact::dt_shape(f32::datum_type(), [rows, width]))?;
        inputs.push(Tensor::from_shape(&[rows, width], mask)?.into());
    }
    let plan = net.into_optimized()?.into_runnable()?;
    let outputs = plan.run(inputs)?;
    let mut by_name = HashMap::new();
    for (name, value) in names.into_iter().zip(outputs) {
        if value.datum_type() == i64::datum_type() {
            let v: Vec<f32> = value.to_plain_array_view::<i64>()?.iter().map(|&a| a as f32).collect();
            by_name.insert(format!("{name}_i64"), v);
        } else {
            by_name.insert(name, value.cast_to::<f32>()?.to_plain_array_view::<f32>()?.iter().copied().collect());
        }
    }
    Ok(by_name)
}

/// The declared width (second dimension) of a `[batch, width]` input.
fn declared_width(input: &tract_onnx::pb::ValueInfoProto) -> Option<usize> {
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    let tract_onnx::pb::type_proto::Value::TensorType(t) = input.r#type.as_ref()?.value.as_ref()?;
    match t.shape.as_ref()?.dim.get(1)?.value.as_ref()? {
        Value::DimValue(n) => usize::try_from(*n).ok(),
        Value::DimParam(_) => None,
    }
}

/// The largest error of `theirs` against `ours`, relative to
/// `max(1, |ours|)`.
fn error(what: &str, ours: &[f32], theirs: &[f32]) -> Result<f64, String> {
    if ours.len() != theirs.len() {
        return Err(format!("rlx gives {} {what}, the model {}", ours.len(), theirs.len()));
    }
    // A NaN on either side is an infinite error, not one `max` skips.
    let each = ours.iter().zip(theirs).map(|(a, b)| ((a - b).abs() / a.abs().max(1.0)) as f64);
    Ok(each.map(|e| if e.is_nan() { f64::INFINITY } else { e }).fold(0.0, f64::max))
}

/// The softmax of each row of `width` logits.
fn softmax_rows(logits: &[f32], width: usize) -> Vec<f32> {
    logits
        .chunks_exact(width)
        .flat_map(|row| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exp: Vec<f32> = row.iter().map(|&x| (x - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            exp.into_iter().map(move |e| e / sum)
        })
        .collect()
}
