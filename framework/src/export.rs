//! A policy's acting network, described for other runtimes.
//!
//! [`PolicyGraph::export`](crate::PolicyGraph::export) answers with a
//! [`PolicyExport`]: copies of the weights and the few operations acting
//! runs (fully connected layers, convolutions, an LSTM cell, the action
//! head), with no reference back to the policy. `rlx export` writes it as
//! ONNX; another format would read the same description.
//!
//! The description stops where the policy's greedy action is decided:
//! exploration (sampling, ε-greedy, noise) stays in rlx, and so does the
//! observation filter, which lives in the evaluators rather than the
//! policy (the exporter adds it from the checkpoint).

use crate::filter::MeanStdFilter;

/// What a policy computes to act greedily, from encoded observations to
/// the action.
///
/// The data flow is fixed:
///
/// ```text
/// observation ─ [normalization] ─ encoding ─ body ─ [recurrent] ─ head ─ action
///                  │          └──────────────────── value (on_features)
///                  └─────────────────────────────── value (own layers)
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyExport {
    /// A normalization the policy applies to raw observations itself (ES
    /// and ARS keep observation statistics in the policy).
    pub normalization: Option<Normalization>,
    /// How observation rows become the networks' input.
    pub encoding: Encoding,
    /// Layers from the encoding to the features.
    pub body: Vec<Layer>,
    /// A recurrent step after the body, whose state travels with each row.
    pub recurrent: Option<Recurrent>,
    /// Layers from the features (the recurrent step's, with one) to the
    /// action head's input.
    pub head: Vec<Layer>,
    /// The state value `V(s)`, where the policy has one.
    pub value: Option<ValueNet>,
    /// How the head's outputs become actions.
    pub action: ActionHead,
}

/// `clip((x − mean) · inv_std, ±clip)` of each observation value.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalization {
    /// One per observation value.
    pub mean: Vec<f32>,
    /// `1 / (std + 1e-8)`, one per observation value.
    pub inv_std: Vec<f32>,
    /// The bound of the normalized values.
    pub clip: f32,
}

impl From<&MeanStdFilter> for Normalization {
    /// The filter's current statistics (the filter divides in `f64`; the
    /// normalization multiplies in `f32`, which differs in the last bits).
    fn from(f: &MeanStdFilter) -> Self {
        let stat = f.global();
        Self {
            mean: stat.mean().iter().map(|&m| m as f32).collect(),
            inv_std: (0..stat.width()).map(|i| (1.0 / (stat.variance(i).sqrt() + 1e-8)) as f32).collect(),
            clip: f.clip() as f32,
        }
    }
}

/// How an observation row enters the networks.
#[derive(Clone, Debug, PartialEq)]
pub enum Encoding {
    /// The values as they are.
    Flat {
        /// Values per row.
        width: usize,
    },
    /// Each element a discrete value, one-hot encoded, the encodings side
    /// by side.
    OneHot {
        /// Choices of each element.
        sizes: Vec<usize>,
    },
    /// A `height × width × channels` image, channels last.
    Image {
        /// Rows of pixels.
        height: usize,
        /// Columns of pixels.
        width: usize,
        /// Channels.
        channels: usize,
    },
}

impl Encoding {
    /// Values of an observation row as the env writes it.
    pub fn raw_width(&self) -> usize {
        match self {
            Encoding::Flat { width } => *width,
            Encoding::OneHot { sizes } => sizes.len(),
            Encoding::Image { height, width, channels } => height * width * channels,
        }
    }
}

/// One step of a network.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// `y = x · W + b`.
    Dense {
        /// Input features.
        inputs: usize,
        /// Output features.
        outputs: usize,
        /// `W`, `(inputs, outputs)`, row-major.
        weight: Vec<f32>,
        /// `b`, one per output.
        bias: Vec<f32>,
    },
    /// A square convolution, no padding, on channels-last images; its
    /// output is channels last too, so flattening it gives rlx's order.
    Conv {
        /// Input image height.
        height: usize,
        /// Input image width.
        width: usize,
        /// Input channels.
        in_channels: usize,
        /// Filters.
        out_channels: usize,
        /// Kernel side.
        kernel: usize,
        /// Stride on both sides.
        stride: usize,
        /// Filters `(out_channels, kernel, kernel, in_channels)`, row-major.
        weight: Vec<f32>,
        /// One per filter.
        bias: Vec<f32>,
    },
    /// `tanh(x)`.
    Tanh,
    /// `max(x, 0)`.
    Relu,
    /// `x · σ(x)` (SiLU).
    Silu,
    /// `(x − mean) / sqrt(var + eps)` over each row's values, with no
    /// scale or offset of its own (DreamerV3's layers).
    LayerNorm {
        /// Added to the variance.
        eps: f32,
    },
    /// Zero pixels around each row's channels-last image: `before` rows
    /// above and columns left of it, `after` rows below and columns right
    /// (a "same" convolution's padding; DreamerV3's image encoder).
    Pad {
        /// Input image height.
        height: usize,
        /// Input image width.
        width: usize,
        /// Channels.
        channels: usize,
        /// `[rows above, columns left]`.
        before: [usize; 2],
        /// `[rows below, columns right]`.
        after: [usize; 2],
    },
    /// [`LayerNorm`](Layer::LayerNorm) over each run of `channels`
    /// values: each pixel's channels of a channels-last image.
    ChannelNorm {
        /// Values normalized together.
        channels: usize,
        /// Added to the variance.
        eps: f32,
    },
    /// `sign(x) · ln(1 + |x|)` of each value (DreamerV3's observations).
    Symlog,
}

/// The recurrent step between the body and the head.
#[derive(Clone, Debug, PartialEq)]
pub enum Recurrent {
    /// An LSTM cell; the features are its `h'`.
    Lstm(LstmCell),
    /// DreamerV3's world model filtering one observation; the features
    /// are `[h', z']`.
    Latent(LatentStep),
}

/// One step of a recurrent state-space model (DreamerV3's world model)
/// as greedy acting runs it, the body's output being the observation's
/// embedding `e`:
///
/// ```text
/// x  = gru_input([z, a])
/// [r c u] = gates([x, h])            (3 · units values)
/// h' = σ(u − 1) ⊙ tanh(σ(r) ⊙ c) + (1 − σ(u − 1)) ⊙ h
/// z' = the most likely class of each categorical of posterior([h', e]), one-hot
/// ```
///
/// A row's state is `[h, z, a, started]`: `a` the previous action as the
/// model reads it (one-hot, or the action in `[−1, 1]`), `started` 1
/// after the first step. Zeros start an episode. The step's state out
/// holds the action the head chose.
#[derive(Clone, Debug, PartialEq)]
pub struct LatentStep {
    /// Layers from `[z, a]` to the GRU's input.
    pub gru_input: Vec<Layer>,
    /// Layers from `[x, h]` to the GRU's `3 · units` gate values.
    pub gates: Vec<Layer>,
    /// Units of `h`.
    pub units: usize,
    /// Layers from `[h', e]` to the posterior's logits, `categoricals ·
    /// classes` of them.
    pub posterior: Vec<Layer>,
    /// Categoricals of `z`.
    pub categoricals: usize,
    /// Classes of each.
    pub classes: usize,
    /// Values of `a` in the state.
    pub action_inputs: usize,
}

impl LatentStep {
    /// Values of a row's state: `[h, z, a, started]`.
    pub fn state_width(&self) -> usize {
        self.units + self.categoricals * self.classes + self.action_inputs + 1
    }
}

/// An LSTM cell, PyTorch's gate order `i, f, g, o`:
/// `[i f g o] = x W_ih + h W_hh + b`, `c' = σ(f) c + σ(i) tanh(g)`,
/// `h' = σ(o) tanh(c')`. A row's state is `[h, c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LstmCell {
    /// Input features.
    pub inputs: usize,
    /// Units (`h` and `c` are each this wide).
    pub cell: usize,
    /// `W_ih`, `(inputs, 4 · cell)`, row-major.
    pub w_ih: Vec<f32>,
    /// `W_hh`, `(cell, 4 · cell)`, row-major.
    pub w_hh: Vec<f32>,
    /// `b`, `4 · cell`.
    pub bias: Vec<f32>,
}

/// The value network.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueNet {
    /// `true`: the layers read the features (shared layers); `false`:
    /// they read the encoding.
    pub on_features: bool,
    /// Layers to one output.
    pub layers: Vec<Layer>,
}

/// How the head's outputs become actions.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionHead {
    /// Logits of independent categoricals side by side (one for
    /// `Discrete`); the greedy action is each one's arg max.
    Categorical {
        /// Choices of each.
        nvec: Vec<usize>,
    },
    /// Q-values of `actions` actions; greedy is the arg max. With
    /// `support`, the head gives each action's logits over these returns
    /// (C51), and Q is the mean of their softmax.
    QValues {
        /// Actions.
        actions: usize,
        /// The atoms' returns, if distributional.
        support: Option<Vec<f32>>,
    },
    /// A diagonal Gaussian's means, with log standard deviations that do
    /// not depend on the state; greedy is the mean.
    Gaussian {
        /// `log σ`, one per action dimension.
        log_std: Vec<f32>,
    },
    /// Means then raw log standard deviations of a Gaussian squashed by
    /// `tanh` and scaled to the bounds (SAC): greedy is
    /// `low + (tanh(mean) + 1)/2 · (high − low)`, and `log σ` is the raw
    /// value squashed into `log_std_range`.
    SquashedGaussian {
        /// Lower bounds of the actions.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
        /// `(min, max)` of `log σ`: `min + (tanh(raw) + 1)/2 · (max − min)`.
        log_std_range: (f32, f32),
    },
    /// The head's outputs clipped to the bounds (ES and ARS on
    /// continuous actions).
    Clipped {
        /// Lower bounds of the actions.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
    },
    /// Means then raw spreads of a Gaussian on `[−1, 1]` whose mean is
    /// `tanh` of the first half (DreamerV3's actor): greedy is
    /// `low + (tanh(mean) + 1)/2 · (high − low)`, and the standard
    /// deviation (on `[−1, 1]`) `min_std + (1 − min_std) · σ(raw + 2)`.
    TanhMeanGaussian {
        /// Lower bounds of the actions.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
        /// The smallest standard deviation.
        min_std: f32,
    },
    /// A deterministic action `low + (tanh(head) + 1)/2 · (high − low)`
    /// (DDPG, TD3).
    Tanh {
        /// Lower bounds of the actions.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
    },
}

impl ActionHead {
    /// Outputs of the head's last layer.
    pub fn head_width(&self) -> usize {
        match self {
            ActionHead::Categorical { nvec } => nvec.iter().sum(),
            ActionHead::QValues { actions, support } => actions * support.as_ref().map_or(1, Vec::len),
            ActionHead::Gaussian { log_std } => log_std.len(),
            ActionHead::SquashedGaussian { low, .. } | ActionHead::TanhMeanGaussian { low, .. } => 2 * low.len(),
            ActionHead::Tanh { low, .. } | ActionHead::Clipped { low, .. } => low.len(),
        }
    }
}
