//! A [`PolicyExport`] written as an ONNX graph (opset 17), with tract's
//! protobuf types.
//!
//! Inputs and outputs (`N` rows, a free dimension named `batch`):
//!
//! | name | type | when |
//! |---|---|---|
//! | `obs` | `float32` (or `uint8` for a byte image) `[N, *shape]` | always |
//! | `state_in` | `float32 [N, 2·cell]` (`[h, c]`; zeros start an episode) | LSTM |
//! | `state_in` | `float32 [N, units + C·K + A + 1]` (`[h, z, a, started]`; zeros start an episode) | DreamerV3 |
//! | `action_mask` | `float32 [N, choices]`, 0 = illegal | `--action-mask` |
//! | `actions` | `int64 [N]` (one choice), `[N, k]` (`k > 1` choices) or `float32 [N, dim]` | always |
//! | `logits` | `float32 [N, choices]` | categorical |
//! | `q_values` | `float32 [N, actions]` | Q-learning |
//! | `mean`, `log_std` | `float32 [N, dim]` | Gaussian, SAC |
//! | `mean`, `std` | `float32 [N, dim]`, on the normalized `[−1, 1]` | DreamerV3, continuous |
//! | `value` | `float32 [N]` | actor-critic |
//! | `state_out` | `float32 [N, 2·cell]` or `[N, units + C·K + A + 1]` | LSTM, DreamerV3 |
//!
//! The graph applies the run's observation filter first, so it takes the
//! env's raw observations.

use rlx::export::{ActionHead, Encoding, LatentStep, Layer, LstmCell, Normalization, PolicyExport, Recurrent};
use rlx::filter::MeanStdFilter;
use rlx::space::Dtype;
use rlx::Space;
use tract_onnx::pb;
use tract_onnx::pb::tensor_proto::DataType;

/// The opset the graph is written for.
pub const OPSET: i64 = 17;

/// What the model's metadata says besides the graph.
pub struct Metadata {
    /// `(key, value)` pairs, written as the model's `metadata_props`.
    pub props: Vec<(String, String)>,
}

/// The ONNX model of `export` for observations of `obs_space`, `filter`
/// applied first, with an `action_mask` input when `action_mask`.
///
/// # Errors
/// An action mask asked of continuous actions, or an observation space
/// whose width differs from the network's input.
pub fn model(
    export: &PolicyExport,
    obs_space: &Space,
    filter: Option<&MeanStdFilter>,
    action_mask: bool,
    meta: Metadata,
) -> Result<pb::ModelProto, String> {
    let raw = export.encoding.raw_width();
    if obs_space.flat_dim() != raw {
        return Err(format!(
            "the observation space {obs_space} has {} values; the network reads {raw}",
            obs_space.flat_dim()
        ));
    }
    let mut g = Graph::default();
    let bytes = matches!(obs_space, Space::Box { dtype: Dtype::U8, .. });
    let obs_dims = match obs_space {
        Space::Box { shape, .. } => shape.clone(),
        other => vec![other.flat_dim()],
    };
    g.input("obs", if bytes { DataType::Uint8 } else { DataType::Float }, &obs_dims);
    let shape = g.ints("rows", &[2], vec![-1, raw as i64]);
    let mut x = g.op("Reshape", &["obs", &shape], vec![]);
    if bytes {
        let f = g.op("Cast", &[&x], vec![int("to", DataType::Float as i64)]);
        let scale = g.floats("inv255", &[], vec![1.0 / 255.0]);
        x = g.op("Mul", &[&f, &scale], vec![]);
    }
    // The run's filter (in the evaluators), then the policy's own.
    for n in filter.map(Normalization::from).iter().chain(&export.normalization) {
        x = g.normalize(&x, n);
    }
    let encoded = g.encode(&x, &export.encoding);
    let mut features = g.layers(&encoded, &export.body);
    // DreamerV3's state out holds the chosen action: written after it.
    let mut latent = None;
    match &export.recurrent {
        Some(Recurrent::Lstm(cell)) => {
            g.input("state_in", DataType::Float, &[2 * cell.cell]);
            let (h, state_out) = g.lstm(&features, "state_in", cell);
            g.output(&state_out, "state_out", DataType::Float, &[Some(2 * cell.cell)]);
            features = h;
        }
        Some(Recurrent::Latent(step)) => {
            let actions = match &export.action {
                ActionHead::Categorical { nvec } if nvec.len() == 1 => nvec[0],
                ActionHead::TanhMeanGaussian { low, .. } => low.len(),
                other => return Err(format!("a world model's state cannot hold the actions of {other:?}")),
            };
            if actions != step.action_inputs {
                return Err(format!(
                    "the world model's state holds {} action values; the action head gives {actions}",
                    step.action_inputs
                ));
            }
            if action_mask {
                return Err("--action-mask: this policy (a world model's actor) reads no action mask".into());
            }
            g.input("state_in", DataType::Float, &[step.state_width()]);
            let (h, z) = g.latent(&features, "state_in", step);
            features = g.op("Concat", &[&h, &z], vec![int("axis", 1)]);
            latent = Some((h, z, step));
        }
        None => {}
    }
    let head = g.layers(&features, &export.head);
    if let Some(value) = &export.value {
        let v = g.layers(if value.on_features { &features } else { &encoded }, &value.layers);
        let flat = g.ints("flat", &[1], vec![-1]);
        let v = g.op("Reshape", &[&v, &flat], vec![]);
        g.output(&v, "value", DataType::Float, &[]);
    }
    let mask = if action_mask {
        let width = match &export.action {
            ActionHead::Categorical { nvec } => nvec.iter().sum(),
            ActionHead::QValues { actions, .. } => *actions,
            _ => {
                return Err(
                    "--action-mask: this policy's actions are continuous, and only discrete ones are masked".into()
                )
            }
        };
        g.input("action_mask", DataType::Float, &[width]);
        Some("action_mask".to_string())
    } else {
        None
    };
    g.action(&head, &export.action, mask.as_deref());
    if let Some((h, z, step)) = latent {
        let a = g.action_inputs(&head, &export.action);
        let first = g.columns(&h, 0, 1);
        let rows = g.op("Shape", &[&first], vec![]);
        let one = g.floats("one", &[1, 1], vec![1.0]);
        let started = g.op("Expand", &[&one, &rows], vec![]);
        let state_out = g.op("Concat", &[&h, &z, &a, &started], vec![int("axis", 1)]);
        g.output(&state_out, "state_out", DataType::Float, &[Some(step.state_width())]);
    }
    let graph = pb::GraphProto {
        name: "rlx_policy".into(),
        node: g.nodes,
        initializer: g.initializers,
        input: g.inputs,
        output: g.outputs,
        ..Default::default()
    };
    Ok(pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: OPSET }],
        producer_name: "rlx".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(graph),
        metadata_props: meta.props.into_iter().map(|(key, value)| pb::StringStringEntryProto { key, value }).collect(),
        ..Default::default()
    })
}

/// A graph under construction: each operation gets a fresh output name.
#[derive(Default)]
struct Graph {
    nodes: Vec<pb::NodeProto>,
    initializers: Vec<pb::TensorProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
    names: usize,
}

impl Graph {
    fn fresh(&mut self, stem: &str) -> String {
        self.names += 1;
        format!("{stem}_{}", self.names)
    }

    /// A `float32` constant.
    fn floats(&mut self, stem: &str, dims: &[usize], data: Vec<f32>) -> String {
        let name = self.fresh(stem);
        self.initializers.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: DataType::Float as i32,
            float_data: data,
            ..Default::default()
        });
        name
    }

    /// An `int64` constant.
    fn ints(&mut self, stem: &str, dims: &[usize], data: Vec<i64>) -> String {
        let name = self.fresh(stem);
        self.initializers.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: DataType::Int64 as i32,
            int64_data: data,
            ..Default::default()
        });
        name
    }

    /// A node of `op` on `inputs`; its output's name.
    fn op(&mut self, op: &str, inputs: &[&str], attribute: Vec<pb::AttributeProto>) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.nodes.push(pb::NodeProto {
            op_type: op.into(),
            name: out.clone(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute,
            ..Default::default()
        });
        out
    }

    /// A graph input `[batch, *dims]`.
    fn input(&mut self, name: &str, dtype: DataType, dims: &[usize]) {
        let dims: Vec<Option<usize>> = dims.iter().map(|&d| Some(d)).collect();
        self.inputs.push(value_info(name, dtype, &dims));
    }

    /// `value` as the graph output `name`, `[batch, *dims]`.
    fn output(&mut self, value: &str, name: &str, dtype: DataType, dims: &[Option<usize>]) {
        self.nodes.push(pb::NodeProto {
            op_type: "Identity".into(),
            name: name.into(),
            input: vec![value.into()],
            output: vec![name.into()],
            ..Default::default()
        });
        self.outputs.push(value_info(name, dtype, dims));
    }

    /// `x[:, from..to]`.
    fn columns(&mut self, x: &str, from: usize, to: usize) -> String {
        let (starts, ends, axes) = (
            self.ints("start", &[1], vec![from as i64]),
            self.ints("end", &[1], vec![to as i64]),
            self.ints("axis", &[1], vec![1]),
        );
        self.op("Slice", &[x, &starts, &ends, &axes], vec![])
    }

    /// `clip((x − mean) · inv_std, ±clip)`.
    fn normalize(&mut self, x: &str, n: &Normalization) -> String {
        let mean = self.floats("obs_mean", &[n.mean.len()], n.mean.clone());
        let inv = self.floats("obs_inv_std", &[n.inv_std.len()], n.inv_std.clone());
        let centered = self.op("Sub", &[x, &mean], vec![]);
        let scaled = self.op("Mul", &[&centered, &inv], vec![]);
        let (lo, hi) = (self.floats("clip_lo", &[], vec![-n.clip]), self.floats("clip_hi", &[], vec![n.clip]));
        self.op("Clip", &[&scaled, &lo, &hi], vec![])
    }

    /// Observation rows encoded as the network reads them.
    fn encode(&mut self, x: &str, encoding: &Encoding) -> String {
        let Encoding::OneHot { sizes } = encoding else { return x.to_string() };
        // Each element compared with 0..n is its one-hot row.
        let parts: Vec<String> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let col = self.columns(x, i, i + 1);
                let choices = self.floats("choices", &[1, n], (0..n).map(|c| c as f32).collect());
                let hot = self.op("Equal", &[&col, &choices], vec![]);
                self.op("Cast", &[&hot], vec![int("to", DataType::Float as i64)])
            })
            .collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        self.op("Concat", &parts, vec![int("axis", 1)])
    }

    /// `layers` on `x`.
    fn layers(&mut self, x: &str, layers: &[Layer]) -> String {
        let mut x = x.to_string();
        for layer in layers {
            x = match layer {
                Layer::Dense { inputs, outputs, weight, bias } => {
                    let w = self.floats("weight", &[*inputs, *outputs], weight.clone());
                    let b = self.floats("bias", &[*outputs], bias.clone());
                    let y = self.op("MatMul", &[&x, &w], vec![]);
                    self.op("Add", &[&y, &b], vec![])
                }
                Layer::Conv { height, width, in_channels, out_channels, kernel, stride, weight, bias } => {
                    self.conv(&x, (*height, *width, *in_channels), (*out_channels, *kernel, *stride), weight, bias)
                }
                Layer::Tanh => self.op("Tanh", &[&x], vec![]),
                Layer::Relu => self.op("Relu", &[&x], vec![]),
                Layer::Silu => {
                    let s = self.op("Sigmoid", &[&x], vec![]);
                    self.op("Mul", &[&x, &s], vec![])
                }
                Layer::LayerNorm { eps } => self.layer_norm(&x, 1, *eps),
                Layer::Pad { height, width, channels, before, after } => {
                    self.pad(&x, (*height, *width, *channels), *before, *after)
                }
                Layer::ChannelNorm { channels, eps } => {
                    let groups = self.ints("groups", &[3], vec![0, -1, *channels as i64]);
                    let grouped = self.op("Reshape", &[&x, &groups], vec![]);
                    let normed = self.layer_norm(&grouped, 2, *eps);
                    let rows = self.ints("rows", &[2], vec![0, -1]);
                    self.op("Reshape", &[&normed, &rows], vec![])
                }
                Layer::Symlog => {
                    let sign = self.op("Sign", &[&x], vec![]);
                    let abs = self.op("Abs", &[&x], vec![]);
                    let one = self.floats("one", &[], vec![1.0]);
                    let shifted = self.op("Add", &[&abs, &one], vec![]);
                    let log = self.op("Log", &[&shifted], vec![]);
                    self.op("Mul", &[&sign, &log], vec![])
                }
            };
        }
        x
    }

    /// `(x − mean) / sqrt(var + eps)` along `axis`.
    fn layer_norm(&mut self, x: &str, axis: i64, eps: f32) -> String {
        let mean = |g: &mut Self, v: &str| g.op("ReduceMean", &[v], vec![ints("axes", &[axis]), int("keepdims", 1)]);
        let m = mean(self, x);
        let centered = self.op("Sub", &[x, &m], vec![]);
        let squared = self.op("Mul", &[&centered, &centered], vec![]);
        let var = mean(self, &squared);
        let eps = self.floats("eps", &[], vec![eps]);
        let shifted = self.op("Add", &[&var, &eps], vec![]);
        let std = self.op("Sqrt", &[&shifted], vec![]);
        self.op("Div", &[&centered, &std], vec![])
    }

    /// Zeros around channels-last images: ONNX's `Pad` on NHWC.
    fn pad(&mut self, x: &str, (h, w, c): (usize, usize, usize), before: [usize; 2], after: [usize; 2]) -> String {
        let image = self.ints("image", &[4], vec![-1, h as i64, w as i64, c as i64]);
        let nhwc = self.op("Reshape", &[x, &image], vec![]);
        let [top, left] = before.map(|p| p as i64);
        let [bottom, right] = after.map(|p| p as i64);
        let pads = self.ints("pads", &[8], vec![0, top, left, 0, 0, bottom, right, 0]);
        let padded = self.op("Pad", &[&nhwc, &pads], vec![]);
        let width = (h + before[0] + after[0]) * (w + before[1] + after[1]) * c;
        let rows = self.ints("rows", &[2], vec![-1, width as i64]);
        self.op("Reshape", &[&padded, &rows], vec![])
    }

    /// A convolution on channels-last rows: to NCHW, ONNX's `Conv`, and
    /// back to channels-last rows.
    fn conv(
        &mut self,
        x: &str,
        (h, w, c): (usize, usize, usize),
        (out, kernel, stride): (usize, usize, usize),
        weight: &[f32],
        bias: &[f32],
    ) -> String {
        let image = self.ints("image", &[4], vec![-1, h as i64, w as i64, c as i64]);
        let nhwc = self.op("Reshape", &[x, &image], vec![]);
        let nchw = self.op("Transpose", &[&nhwc], vec![ints("perm", &[0, 3, 1, 2])]);
        // rlx's filters are (out, k, k, in); ONNX's (out, in, k, k).
        let mut filters = vec![0.0; weight.len()];
        for o in 0..out {
            for ky in 0..kernel {
                for kx in 0..kernel {
                    for i in 0..c {
                        filters[((o * c + i) * kernel + ky) * kernel + kx] =
                            weight[((o * kernel + ky) * kernel + kx) * c + i];
                    }
                }
            }
        }
        let wt = self.floats("filters", &[out, c, kernel, kernel], filters);
        let b = self.floats("bias", &[out], bias.to_vec());
        let k = kernel as i64;
        let s = stride as i64;
        let y = self.op("Conv", &[&nchw, &wt, &b], vec![ints("kernel_shape", &[k, k]), ints("strides", &[s, s])]);
        let back = self.op("Transpose", &[&y], vec![ints("perm", &[0, 2, 3, 1])]);
        let (oh, ow) = ((h - kernel) / stride + 1, (w - kernel) / stride + 1);
        let rows = self.ints("rows", &[2], vec![-1, (oh * ow * out) as i64]);
        self.op("Reshape", &[&back, &rows], vec![])
    }

    /// One LSTM step: the features `h'` and the state out `[h', c']`.
    fn lstm(&mut self, x: &str, state: &str, cell: &LstmCell) -> (String, String) {
        let k = cell.cell;
        let (h, c) = (self.columns(state, 0, k), self.columns(state, k, 2 * k));
        let w_ih = self.floats("w_ih", &[cell.inputs, 4 * k], cell.w_ih.clone());
        let w_hh = self.floats("w_hh", &[k, 4 * k], cell.w_hh.clone());
        let b = self.floats("lstm_bias", &[4 * k], cell.bias.clone());
        let (xi, hh) = (self.op("MatMul", &[x, &w_ih], vec![]), self.op("MatMul", &[&h, &w_hh], vec![]));
        let sum = self.op("Add", &[&xi, &hh], vec![]);
        let gates = self.op("Add", &[&sum, &b], vec![]);
        let gate = |g: &mut Self, j: usize, op: &str| {
            let part = g.columns(&gates, j * k, (j + 1) * k);
            g.op(op, &[&part], vec![])
        };
        let (i, f, gg, o) =
            (gate(self, 0, "Sigmoid"), gate(self, 1, "Sigmoid"), gate(self, 2, "Tanh"), gate(self, 3, "Sigmoid"));
        let (fc, ig) = (self.op("Mul", &[&f, &c], vec![]), self.op("Mul", &[&i, &gg], vec![]));
        let c_next = self.op("Add", &[&fc, &ig], vec![]);
        let tc = self.op("Tanh", &[&c_next], vec![]);
        let h_next = self.op("Mul", &[&o, &tc], vec![]);
        let state_out = self.op("Concat", &[&h_next, &c_next], vec![int("axis", 1)]);
        (h_next, state_out)
    }

    /// One filtering step of a world model ([`LatentStep`]) on the
    /// embedding `e`: `h'` and the one-hot `z'`.
    fn latent(&mut self, e: &str, state: &str, step: &LatentStep) -> (String, String) {
        let (k, latent) = (step.units, step.categoricals * step.classes);
        let h = self.columns(state, 0, k);
        let z = self.columns(state, k, k + latent);
        let a = self.columns(state, k + latent, k + latent + step.action_inputs);
        let za = self.op("Concat", &[&z, &a], vec![int("axis", 1)]);
        let x = self.layers(&za, &step.gru_input);
        let xh = self.op("Concat", &[&x, &h], vec![int("axis", 1)]);
        let parts = self.layers(&xh, &step.gates);
        let (r, c, u) =
            (self.columns(&parts, 0, k), self.columns(&parts, k, 2 * k), self.columns(&parts, 2 * k, 3 * k));
        let reset = self.op("Sigmoid", &[&r], vec![]);
        let gated = self.op("Mul", &[&reset, &c], vec![]);
        let candidate = self.op("Tanh", &[&gated], vec![]);
        let one = self.floats("one", &[], vec![1.0]);
        let shifted = self.op("Sub", &[&u, &one], vec![]);
        let update = self.op("Sigmoid", &[&shifted], vec![]);
        let keep = self.op("Sub", &[&one, &update], vec![]);
        let (new, old) = (self.op("Mul", &[&update, &candidate], vec![]), self.op("Mul", &[&keep, &h], vec![]));
        let h_next = self.op("Add", &[&new, &old], vec![]);
        let he = self.op("Concat", &[&h_next, e], vec![int("axis", 1)]);
        let logits = self.layers(&he, &step.posterior);
        let groups = self.ints("groups", &[3], vec![-1, step.categoricals as i64, step.classes as i64]);
        let grouped = self.op("Reshape", &[&logits, &groups], vec![]);
        // The mixed probabilities rise with the logits: the same arg max.
        let best = self.op("ArgMax", &[&grouped], vec![int("axis", 2), int("keepdims", 0)]);
        let hot = self.one_hot(&best, step.classes);
        let rows = self.ints("rows", &[2], vec![-1, latent as i64]);
        let z_next = self.op("Reshape", &[&hot, &rows], vec![]);
        (h_next, z_next)
    }

    /// `float32` one-hot rows (a new last axis of `classes`) of `int64`
    /// indices.
    fn one_hot(&mut self, indices: &str, classes: usize) -> String {
        let depth = self.ints("depth", &[], vec![classes as i64]);
        let values = self.floats("off_on", &[2], vec![0.0, 1.0]);
        self.op("OneHot", &[indices, &depth, &values], vec![int("axis", -1)])
    }

    /// The chosen action as a world model reads it: one-hot of a
    /// categorical's, or the mean's `tanh` on `[−1, 1]` (the heads
    /// [`model`] lets through).
    fn action_inputs(&mut self, head: &str, action: &ActionHead) -> String {
        match action {
            ActionHead::Categorical { nvec } if nvec.len() == 1 => {
                let best = self.op("ArgMax", &[head], vec![int("axis", 1), int("keepdims", 0)]);
                self.one_hot(&best, nvec[0])
            }
            ActionHead::TanhMeanGaussian { low, .. } => {
                let mean = self.columns(head, 0, low.len());
                self.op("Tanh", &[&mean], vec![])
            }
            other => unreachable!("checked in `model`: {other:?}"),
        }
    }

    /// `scores` with the illegal entries (mask 0) at the lowest float.
    fn masked(&mut self, scores: &str, mask: Option<&str>) -> String {
        let Some(mask) = mask else { return scores.to_string() };
        let zero = self.floats("zero", &[], vec![0.0]);
        let lowest = self.floats("lowest", &[], vec![f32::MIN]);
        let illegal = self.op("Equal", &[mask, &zero], vec![]);
        self.op("Where", &[&illegal, &lowest, scores], vec![])
    }

    /// The arg max of each row's `n` columns from `from`, `[N, 1]`.
    fn argmax(&mut self, x: &str, from: usize, n: usize, whole: bool) -> String {
        let part = if whole { x.to_string() } else { self.columns(x, from, from + n) };
        self.op("ArgMax", &[&part], vec![int("axis", 1), int("keepdims", 1)])
    }

    /// `low + (tanh(x) + 1)/2 · (high − low)`.
    fn scaled_tanh(&mut self, x: &str, low: &[f32], high: &[f32]) -> String {
        let t = self.op("Tanh", &[x], vec![]);
        let one = self.floats("one", &[], vec![1.0]);
        let t1 = self.op("Add", &[&t, &one], vec![]);
        let half_range =
            self.floats("half_range", &[low.len()], low.iter().zip(high).map(|(l, h)| 0.5 * (h - l)).collect());
        let low = self.floats("low", &[low.len()], low.to_vec());
        let scaled = self.op("Mul", &[&t1, &half_range], vec![]);
        self.op("Add", &[&low, &scaled], vec![])
    }

    /// The action outputs of `head`.
    fn action(&mut self, head: &str, action: &ActionHead, mask: Option<&str>) {
        let flat = |g: &mut Self, x: &str| {
            let shape = g.ints("flat", &[1], vec![-1]);
            g.op("Reshape", &[x, &shape], vec![])
        };
        match action {
            ActionHead::Categorical { nvec } => {
                self.output(head, "logits", DataType::Float, &[Some(nvec.iter().sum())]);
                let scores = self.masked(head, mask);
                let mut from = 0;
                let mut parts = Vec::new();
                for &n in nvec {
                    parts.push(self.argmax(&scores, from, n, nvec.len() == 1));
                    from += n;
                }
                if let [one] = &parts[..] {
                    let a = flat(self, one);
                    self.output(&a, "actions", DataType::Int64, &[]);
                } else {
                    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                    let a = self.op("Concat", &parts, vec![int("axis", 1)]);
                    self.output(&a, "actions", DataType::Int64, &[Some(nvec.len())]);
                }
            }
            ActionHead::QValues { actions, support } => {
                let q = match support {
                    None => head.to_string(),
                    Some(z) => {
                        let shape = self.ints("atoms", &[3], vec![-1, *actions as i64, z.len() as i64]);
                        let logits = self.op("Reshape", &[head, &shape], vec![]);
                        let p = self.op("Softmax", &[&logits], vec![int("axis", 2)]);
                        let support = self.floats("support", &[z.len(), 1], z.clone());
                        let q = self.op("MatMul", &[&p, &support], vec![]);
                        let rows = self.ints("rows", &[2], vec![-1, *actions as i64]);
                        self.op("Reshape", &[&q, &rows], vec![])
                    }
                };
                self.output(&q, "q_values", DataType::Float, &[Some(*actions)]);
                let scores = self.masked(&q, mask);
                let a = self.argmax(&scores, 0, *actions, true);
                let a = flat(self, &a);
                self.output(&a, "actions", DataType::Int64, &[]);
            }
            ActionHead::Gaussian { log_std } => {
                let dim = log_std.len();
                self.output(head, "mean", DataType::Float, &[Some(dim)]);
                self.output(head, "actions", DataType::Float, &[Some(dim)]);
                let ls = self.floats("log_std", &[dim], log_std.clone());
                let shape = self.op("Shape", &[head], vec![]);
                let ls = self.op("Expand", &[&ls, &shape], vec![]);
                self.output(&ls, "log_std", DataType::Float, &[Some(dim)]);
            }
            ActionHead::SquashedGaussian { low, high, log_std_range: (min, max) } => {
                let dim = low.len();
                let mean = self.columns(head, 0, dim);
                let raw = self.columns(head, dim, 2 * dim);
                self.output(&mean, "mean", DataType::Float, &[Some(dim)]);
                let (lo, hi) = (vec![*min; dim], vec![*max; dim]);
                let ls = self.scaled_tanh(&raw, &lo, &hi);
                self.output(&ls, "log_std", DataType::Float, &[Some(dim)]);
                let a = self.scaled_tanh(&mean, low, high);
                self.output(&a, "actions", DataType::Float, &[Some(dim)]);
            }
            ActionHead::TanhMeanGaussian { low, high, min_std } => {
                let dim = low.len();
                let raw_mean = self.columns(head, 0, dim);
                let raw = self.columns(head, dim, 2 * dim);
                let mean = self.op("Tanh", &[&raw_mean], vec![]);
                self.output(&mean, "mean", DataType::Float, &[Some(dim)]);
                let two = self.floats("two", &[], vec![2.0]);
                let shifted = self.op("Add", &[&raw, &two], vec![]);
                let s = self.op("Sigmoid", &[&shifted], vec![]);
                let (spread, floor) =
                    (self.floats("spread", &[], vec![1.0 - min_std]), self.floats("min_std", &[], vec![*min_std]));
                let scaled = self.op("Mul", &[&s, &spread], vec![]);
                let std = self.op("Add", &[&scaled, &floor], vec![]);
                self.output(&std, "std", DataType::Float, &[Some(dim)]);
                let a = self.scaled_tanh(&raw_mean, low, high);
                self.output(&a, "actions", DataType::Float, &[Some(dim)]);
            }
            ActionHead::Clipped { low, high } => {
                let (lo, hi) =
                    (self.floats("low", &[low.len()], low.clone()), self.floats("high", &[high.len()], high.clone()));
                let above = self.op("Max", &[head, &lo], vec![]);
                let a = self.op("Min", &[&above, &hi], vec![]);
                self.output(&a, "actions", DataType::Float, &[Some(low.len())]);
            }
            ActionHead::Tanh { low, high } => {
                let a = self.scaled_tanh(head, low, high);
                self.output(&a, "actions", DataType::Float, &[Some(low.len())]);
            }
        }
    }
}

/// A value's type: `[batch, *dims]` (`None`: a free dimension).
fn value_info(name: &str, dtype: DataType, dims: &[Option<usize>]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let batch = Dimension { value: Some(Value::DimParam("batch".into())), ..Default::default() };
    let rest = dims.iter().map(|d| Dimension {
        value: Some(match d {
            Some(n) => Value::DimValue(*n as i64),
            None => Value::DimParam("width".into()),
        }),
        ..Default::default()
    });
    let shape = pb::TensorShapeProto { dim: std::iter::once(batch).chain(rest).collect() };
    let tensor = pb::type_proto::Tensor { elem_type: dtype as i32, shape: Some(shape) };
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto { value: Some(pb::type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

fn int(name: &str, i: i64) -> pb::AttributeProto {
    use pb::attribute_proto::AttributeType;
    pb::AttributeProto { name: name.into(), r#type: AttributeType::Int as i32, i, ..Default::default() }
}

fn ints(name: &str, ints: &[i64]) -> pb::AttributeProto {
    use pb::attribute_proto::AttributeType;
    pb::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: ints.to_vec(),
        ..Default::default()
    }
}
