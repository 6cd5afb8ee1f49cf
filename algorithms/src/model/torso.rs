//! What each observation space gets: the [`Input`] encoding, the
//! [`Torso`] (fully connected, convolutional, per-entry for a `Dict`, or
//! custom) and the [`Body`] (the torso, then an optional LSTM) that an
//! algorithm puts its heads on.

use super::custom::{self, CustomInput, CustomNetwork};
use super::device::NetDevice;
use super::layers::{Conv2d, Linear, Lstm};
use super::params::Params;
use super::tensors::{Activation, Matrix, Taped};
use super::ModelConfig;
use dfdx::prelude::*;
use rlx::config::ConfigError;
use rlx::export::{Encoding, Layer, LstmCell};
use rlx::{PolicyError, Space, Values};
use std::borrow::Cow;
use std::ops::Range;

/// A dfdx tape the networks run with: `NoneTape` to act, `OwnedTape` to
/// learn. It picks a custom network's matching forward pass.
pub trait TapeKind<D: NetDevice>: Tape<f32, D> + Merge<Self> + 'static {
    /// `net`'s forward pass with this tape.
    fn custom(net: &dyn CustomNetwork<D>, p: &Params<D>, x: Matrix<D, Self>) -> Matrix<D, Self>;
}

impl<D: NetDevice> TapeKind<D> for NoneTape {
    fn custom(net: &dyn CustomNetwork<D>, p: &Params<D>, x: Matrix<D, Self>) -> Matrix<D, Self> {
        net.forward(p, x)
    }
}

impl<D: NetDevice> TapeKind<D> for OwnedTape<f32, D> {
    fn custom(net: &dyn CustomNetwork<D>, p: &Params<D>, x: Matrix<D, Self>) -> Matrix<D, Self> {
        net.forward_taped(p, x)
    }
}

/// How observation rows enter a network.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// The values as they are, flattened in row-major order.
    Flat(usize),
    /// Each element of a `Discrete` (one element) or `MultiDiscrete`
    /// observation one-hot encoded, concatenated.
    OneHot(Vec<usize>),
    /// A height × width × channels image, as it is (channels last).
    Image {
        /// Rows of pixels.
        height: usize,
        /// Columns of pixels.
        width: usize,
        /// Channels.
        channels: usize,
    },
    /// A `Dict` observation: each entry encoded on its own, the encodings
    /// side by side in the entries' order.
    Dict {
        /// The space, which reads packed rows of bytes
        /// ([`Space::unpack_rows`]).
        space: Space,
        /// Each entry's encoding.
        entries: Vec<Input>,
    },
}

impl Input {
    /// The encoding of `space` for fully connected layers (no reordering).
    pub fn flat(space: &Space) -> Self {
        match space {
            Space::Box { .. } => Input::Flat(space.flat_dim()),
            Space::Discrete { n } => Input::OneHot(vec![*n as usize]),
            Space::MultiDiscrete { nvec } => Input::OneHot(nvec.iter().map(|&n| n as usize).collect()),
            Space::Dict { entries } => {
                Input::Dict { space: space.clone(), entries: entries.iter().map(|(_, s)| Input::flat(s)).collect() }
            }
        }
    }

    /// The encoding for export.
    ///
    /// # Errors
    /// A `Dict` observation: export takes one array per observation.
    pub fn exported(&self) -> Result<Encoding, PolicyError> {
        match self {
            Input::Flat(width) => Ok(Encoding::Flat { width: *width }),
            Input::OneHot(sizes) => Ok(Encoding::OneHot { sizes: sizes.clone() }),
            &Input::Image { height, width, channels } => Ok(Encoding::Image { height, width, channels }),
            Input::Dict { space, .. } => Err(PolicyError::Other(format!(
                "a policy on Dict observations ({space}) cannot be exported yet: the exported model takes one \
                 array per observation"
            ))),
        }
    }

    /// Width of an observation row as the env writes it.
    pub fn raw_width(&self) -> usize {
        match self {
            Input::Flat(w) => *w,
            Input::OneHot(sizes) => sizes.len(),
            Input::Image { height, width, channels } => height * width * channels,
            Input::Dict { entries, .. } => entries.iter().map(Input::raw_width).sum(),
        }
    }

    /// Features of an encoded row.
    pub fn features(&self) -> usize {
        match self {
            Input::OneHot(sizes) => sizes.iter().sum(),
            Input::Dict { entries, .. } => entries.iter().map(Input::features).sum(),
            other => other.raw_width(),
        }
    }

    /// Encodes observation rows (`[rows, raw_width]`, row-major) as a
    /// `(rows, features)` matrix on `dev`. Rows of bytes (a `uint8` box,
    /// [`Values::U8`]) become `f32` here, `b / 255`, and nowhere before.
    ///
    /// # Errors
    /// Values that are not a whole number of rows, or a discrete value
    /// outside its space.
    pub fn encode<'a, D: NetDevice>(&self, dev: &D, obs: impl Into<Values<'a>>) -> Result<Matrix<D>, PolicyError> {
        let data = self.encode_host(obs)?;
        let rows = data.len() / self.features().max(1);
        Ok(dev.tensor_from_vec(data, (rows, self.features())))
    }

    /// [`encode`](Self::encode) into a host vector, `[rows, features]`.
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_host<'a>(&self, obs: impl Into<Values<'a>>) -> Result<Vec<f32>, PolicyError> {
        let obs = match (self, obs.into()) {
            // A Dict's bytes are packed rows, which only its space reads.
            (Input::Dict { space, .. }, Values::U8(bytes)) => {
                let mut rows = Vec::new();
                space.unpack_rows(bytes, &mut rows).map_err(PolicyError::Other)?;
                Cow::Owned(rows)
            }
            (_, values) => values.to_f32(),
        };
        let raw = self.raw_width();
        if raw == 0 || obs.len() % raw != 0 {
            return Err(PolicyError::Other(format!(
                "{} observation values is not a whole number of rows of {raw}",
                obs.len()
            )));
        }
        let rows = obs.len() / raw;
        let data = match self {
            Input::Flat(_) | Input::Image { .. } => obs.into_owned(),
            Input::Dict { entries, .. } => encode_entries(entries, &obs, raw)?,
            Input::OneHot(sizes) => {
                let width: usize = sizes.iter().sum();
                let mut data = vec![0.0; rows * width];
                for (row, out) in obs.chunks_exact(raw).zip(data.chunks_exact_mut(width)) {
                    let mut start = 0;
                    for (&v, &n) in row.iter().zip(sizes) {
                        if v.fract() != 0.0 || v < 0.0 || v as usize >= n {
                            return Err(PolicyError::Other(format!(
                                "observation value {v} is not one of 0..{n} (a discrete observation)"
                            )));
                        }
                        out[start + v as usize] = 1.0;
                        start += n;
                    }
                }
                data
            }
        };
        Ok(data)
    }
}

/// [`Input::encode_host`] of a `Dict`'s rows (`raw` `f32` values each):
/// each entry's columns encoded by the entry's input, laid side by side.
fn encode_entries(entries: &[Input], obs: &[f32], raw: usize) -> Result<Vec<f32>, PolicyError> {
    let rows = obs.len() / raw;
    let features: usize = entries.iter().map(Input::features).sum();
    let mut data = vec![0.0; rows * features];
    let (mut at, mut out_at) = (0, 0);
    for entry in entries {
        let (w, f) = (entry.raw_width(), entry.features());
        let block: Vec<f32> = obs.chunks_exact(raw).flat_map(|row| row[at..at + w].iter().copied()).collect();
        let encoded = entry.encode_host(&block[..])?;
        for (out, e) in data.chunks_exact_mut(features).zip(encoded.chunks_exact(f.max(1))) {
            out[out_at..out_at + f].copy_from_slice(e);
        }
        (at, out_at) = (at + w, out_at + f);
    }
    Ok(data)
}

/// Fully connected layers with one nonlinearity after each.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    inputs: usize,
    layers: Vec<Linear>,
    activation: Activation,
}

impl Mlp {
    /// Layers of `hiddens` units after `inputs` features, named
    /// `{name}.0`, `{name}.1`, ….
    pub fn new<D: NetDevice>(
        p: &mut Params<D>,
        name: &str,
        inputs: usize,
        hiddens: &[usize],
        activation: Activation,
    ) -> Self {
        let mut layers = Vec::new();
        let mut width = inputs;
        for (i, &h) in hiddens.iter().enumerate() {
            layers.push(Linear::new(p, &format!("{name}.{i}"), width, h));
            width = h;
        }
        Self { inputs, layers, activation }
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[Linear] {
        &self.layers
    }

    /// The nonlinearity after each layer.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// Output features (the input's without layers).
    pub fn features(&self) -> usize {
        self.layers.last().map_or(self.inputs, Linear::outputs)
    }

    /// The layers for export, each followed by the nonlinearity.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        self.layers.iter().flat_map(|l| [l.exported(p), self.activation.into()]).collect()
    }

    /// The layers' forward pass.
    ///
    /// # Shapes
    /// `x` is `(rows, inputs)`; the result `(rows, features())`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.forward_with(p, x, true)
    }

    /// [`forward`](Self::forward) as a function of `x` alone, the weights
    /// constants of the pass ([`Linear::forward_frozen`]).
    pub fn forward_frozen<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        self.forward_with(p, x, false)
    }

    fn forward_with<D: NetDevice, T: Tape<f32, D>>(
        &self,
        p: &Params<D>,
        mut x: Matrix<D, T>,
        weights_grad: bool,
    ) -> Matrix<D, T> {
        for layer in &self.layers {
            x = layer.forward_with(p, x, Some(self.activation), weights_grad);
        }
        x
    }
}

/// The convolutions chosen for a `height × width` image when
/// `conv_filters` is `null`: the MinAtar paper's single layer of 16 3×3
/// filters (Young & Tian 2019) below 36 pixels a side, the Nature DQN
/// stack (Mnih et al. 2015) from there.
pub fn default_conv_filters(height: usize, width: usize) -> Vec<[usize; 3]> {
    if height.min(width) >= 36 {
        vec![[32, 8, 4], [64, 4, 2], [64, 3, 1]]
    } else {
        vec![[16, 3, 1]]
    }
}

/// Convolutions on a channels-last image, each followed by the
/// nonlinearity: a CNN torso before it flattens the maps.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvStack {
    convs: Vec<Conv2d>,
    activation: Activation,
    /// `(height, width)` of each convolution's input.
    sides: Vec<(usize, usize)>,
    /// Features of the last convolution's output.
    maps: usize,
}

impl ConvStack {
    /// `filters` (`[out_channels, kernel, stride]` each) on `height ×
    /// width × channels` images, named `{name}.conv0`, `{name}.conv1`, ….
    ///
    /// # Errors
    /// A stack that shrinks the image below one pixel (`space` is named).
    fn build<D: NetDevice>(
        params: &mut Params<D>,
        name: &str,
        filters: &[[usize; 3]],
        activation: Activation,
        (height, width, channels): (usize, usize, usize),
        space: &Space,
    ) -> Result<Self, ConfigError> {
        let (mut c, mut h, mut w) = (channels, height, width);
        let (mut convs, mut sides) = (Vec::new(), Vec::new());
        for (i, &[out, kernel, stride]) in filters.iter().enumerate() {
            let (Some(h2), Some(w2)) = (Conv2d::output_side(kernel, stride, h), Conv2d::output_side(kernel, stride, w))
            else {
                return Err(ConfigError::Invalid {
                    key: "model.conv_filters".into(),
                    message: format!(
                        "layer {i} ({kernel}×{kernel} kernel, stride {stride}) does not fit its {h}×{w} input: the \
                         stack {filters:?} shrinks the {height}×{width} images of {space} below one pixel"
                    ),
                });
            };
            convs.push(Conv2d::new(params, &format!("{name}.conv{i}"), c, out, kernel, stride));
            sides.push((h, w));
            (c, h, w) = (out, h2, w2);
        }
        Ok(Self { convs, activation, sides, maps: c * h * w })
    }

    /// Features of the flattened output maps.
    pub fn maps(&self) -> usize {
        self.maps
    }

    /// The convolutions for export, each followed by the nonlinearity.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        self.convs
            .iter()
            .zip(&self.sides)
            .flat_map(|(c, &(h, w))| [c.exported(p, h, w), self.activation.into()])
            .collect()
    }

    /// The convolutions' forward pass on rows of images.
    ///
    /// # Shapes
    /// `x` is `(rows, height · width · channels)`; the result `(rows, maps())`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        let mut y = x;
        for (i, (conv, &(h, w))) in self.convs.iter().zip(&self.sides).enumerate() {
            // The input needs no gradient: its patches are cut on the host.
            let z = conv.forward(p, y, h, w, i > 0);
            y = self.activation.apply(z);
        }
        y
    }
}

/// `(height, width, channels)` of a rank-3 `Box`.
fn image_shape(space: &Space) -> Option<(usize, usize, usize)> {
    match space {
        Space::Box { shape, .. } if shape.len() == 3 => Some((shape[0], shape[1], shape[2])),
        _ => None,
    }
}

/// The layers between the observation and an algorithm's heads (or its
/// LSTM).
pub enum Torso<D: NetDevice> {
    /// Fully connected layers (none: the encoded input itself).
    Mlp {
        /// The input encoding.
        input: Input,
        /// The layers.
        mlp: Mlp,
    },
    /// Convolutions, then fully connected layers on the flattened maps.
    Cnn {
        /// The image's encoding.
        input: Input,
        /// The convolutions.
        convs: ConvStack,
        /// The fully connected layers after flattening.
        mlp: Mlp,
    },
    /// A `Dict` observation: each image entry through its own
    /// convolutions, flattened, the other entries as encoded, all side by
    /// side into the fully connected layers (SB3's `MultiInputPolicy`,
    /// RLlib's network for `Dict` spaces).
    Dict {
        /// The entries' encodings.
        input: Input,
        /// Each entry's columns in an encoded row, and its convolutions
        /// if it is an image.
        entries: Vec<(Range<usize>, Option<ConvStack>)>,
        /// The fully connected layers on the joined features.
        mlp: Mlp,
    },
    /// A registered custom network.
    Custom {
        /// The input encoding.
        input: Input,
        /// The network.
        net: Box<dyn CustomNetwork<D>>,
    },
}

impl<D: NetDevice> Torso<D> {
    /// The torso `model` asks for on observations of `space`, its tensors
    /// named `{name}.…` in `params`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the `model.…` key and the space when the
    /// model does not fit it: convolutions on observations that are not
    /// images, a stack that shrinks the image below one pixel, or a custom
    /// model that refuses the input.
    pub fn build(model: &ModelConfig, space: &Space, params: &mut Params<D>, name: &str) -> Result<Self, ConfigError> {
        let fc = |params: &mut Params<D>, inputs: usize| {
            Mlp::new(params, name, inputs, &model.fcnet_hiddens, model.fcnet_activation)
        };
        if let Some(model_name) = &model.custom_model {
            let input = Input::flat(space);
            let registered = custom::lookup(model_name).ok_or_else(|| ConfigError::Invalid {
                key: "model.custom_model".into(),
                message: format!("no custom model `{model_name}` is registered"),
            })?;
            let spec = CustomInput { space, features: input.features(), config: &model.custom_model_config, name };
            let build = registered.builder::<D>().ok_or_else(|| ConfigError::Invalid {
                key: "model.custom_model".into(),
                message: format!(
                    "`{model_name}` has no builder for this device: custom models run on the CPU and CUDA"
                ),
            })?;
            let net = build(&spec, params).map_err(|message| ConfigError::Invalid {
                key: "model.custom_model".into(),
                message: format!("`{model_name}` on observations {space}: {message}"),
            })?;
            return Ok(Torso::Custom { input, net });
        }
        if let Space::Dict { entries } = space {
            return Self::build_dict(model, space, entries, params, name);
        }
        let image = image_shape(space);
        let filters = match (&model.conv_filters, image) {
            (Some(f), None) if !f.is_empty() => {
                return Err(ConfigError::Invalid {
                    key: "model.conv_filters".into(),
                    message: format!(
                        "convolutions need image observations (a Box of rank 3, height × width × channels); the \
                         observation space is {space}: use conv_filters: null or []"
                    ),
                })
            }
            (Some(f), Some(_)) => f.clone(),
            (None, Some((h, w, _))) => default_conv_filters(h, w),
            (_, None) => Vec::new(),
        };
        let Some((height, width, channels)) = image.filter(|_| !filters.is_empty()) else {
            let input = Input::flat(space);
            let mlp = fc(params, input.features());
            return Ok(Torso::Mlp { input, mlp });
        };
        let convs = ConvStack::build(params, name, &filters, model.conv_activation, (height, width, channels), space)?;
        let mlp = fc(params, convs.maps());
        let input = Input::Image { height, width, channels };
        Ok(Torso::Cnn { input, convs, mlp })
    }

    /// [`build`](Self::build) for a `Dict`: convolutions (`conv_filters`,
    /// or chosen by size) for each image entry, named
    /// `{name}.{entry}.conv0`, …; the fully connected layers after.
    fn build_dict(
        model: &ModelConfig,
        space: &Space,
        entries: &[(String, Space)],
        params: &mut Params<D>,
        name: &str,
    ) -> Result<Self, ConfigError> {
        if model.conv_filters.as_ref().is_some_and(|f| !f.is_empty())
            && !entries.iter().any(|(_, s)| image_shape(s).is_some())
        {
            return Err(ConfigError::Invalid {
                key: "model.conv_filters".into(),
                message: format!(
                    "convolutions need an image entry (a Box of rank 3, height × width × channels); the \
                     observation space {space} has none: use conv_filters: null or []"
                ),
            });
        }
        let (mut inputs, mut parts, mut at) = (Vec::new(), Vec::new(), 0);
        for (entry, leaf) in entries {
            let image = image_shape(leaf);
            let filters = match (&model.conv_filters, image) {
                (Some(f), _) => f.clone(),
                // An entry too small for the chosen stack is flattened.
                (None, Some((h, w, _))) => Some(default_conv_filters(h, w))
                    .filter(|f| f.iter().all(|&[_, k, s]| Conv2d::output_side(k, s, h.min(w)).is_some()))
                    .unwrap_or_default(),
                (None, None) => Vec::new(),
            };
            let (input, convs) = match image.filter(|_| !filters.is_empty()) {
                Some((height, width, channels)) => {
                    let stack = ConvStack::build(
                        params,
                        &format!("{name}.{entry}"),
                        &filters,
                        model.conv_activation,
                        (height, width, channels),
                        leaf,
                    )?;
                    (Input::Image { height, width, channels }, Some(stack))
                }
                None => (Input::flat(leaf), None),
            };
            let width = input.features();
            parts.push((at..at + width, convs));
            inputs.push(input);
            at += width;
        }
        let joined: usize = parts.iter().map(|(cols, convs)| convs.as_ref().map_or(cols.len(), ConvStack::maps)).sum();
        let mlp = Mlp::new(params, name, joined, &model.fcnet_hiddens, model.fcnet_activation);
        let input = Input::Dict { space: space.clone(), entries: inputs };
        if parts.iter().all(|(_, convs)| convs.is_none()) {
            // No convolutions: the joined encodings are the MLP's input,
            // and acting keeps the fully connected fast paths.
            return Ok(Torso::Mlp { input, mlp });
        }
        Ok(Torso::Dict { input, entries: parts, mlp })
    }

    /// How observations are encoded for this torso.
    pub fn input(&self) -> &Input {
        match self {
            Torso::Mlp { input, .. }
            | Torso::Cnn { input, .. }
            | Torso::Dict { input, .. }
            | Torso::Custom { input, .. } => input,
        }
    }

    /// Features per output row.
    pub fn features(&self) -> usize {
        match self {
            Torso::Mlp { mlp, .. } | Torso::Cnn { mlp, .. } | Torso::Dict { mlp, .. } => mlp.features(),
            Torso::Custom { net, .. } => net.features(),
        }
    }

    /// The encoding and the layers for export.
    ///
    /// # Errors
    /// A `Dict` observation or a custom network, which have no description.
    pub fn exported(&self, p: &Params<D>) -> Result<(Encoding, Vec<Layer>), PolicyError> {
        match self {
            Torso::Mlp { input, mlp } => Ok((input.exported()?, mlp.exported(p))),
            Torso::Cnn { input, convs, mlp } => {
                Ok((input.exported()?, convs.exported(p).into_iter().chain(mlp.exported(p)).collect()))
            }
            Torso::Dict { input, .. } => Err(input.exported().expect_err("a Dict's input")),
            Torso::Custom { .. } => Err(PolicyError::Other(
                "a policy with a custom network (model.custom_model) cannot be exported: rlx cannot see inside it"
                    .into(),
            )),
        }
    }

    /// The forward pass of encoded rows ([`Input::encode`]).
    ///
    /// # Shapes
    /// `x` is `(rows, input().features())`; the result `(rows, features())`.
    pub fn forward<T: TapeKind<D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        match self {
            Torso::Mlp { mlp, .. } => mlp.forward(p, x),
            Torso::Cnn { convs, mlp, .. } => mlp.forward(p, convs.forward(p, x)),
            Torso::Dict { entries, mlp, .. } => {
                // Each entry reads its columns of `x` with an empty tape
                // but the last, which takes the tape; joining the parts
                // merges the tapes again.
                let mut x = Some(x);
                let mut joined: Option<Matrix<D, T>> = None;
                for (i, (cols, convs)) in entries.iter().enumerate() {
                    let part = if i + 1 < entries.len() {
                        x.as_ref().expect("taken at the last entry").with_empty_tape()
                    } else {
                        x.take().expect("the last entry")
                    };
                    let part = part.slice((.., cols.clone()));
                    let part = match convs {
                        Some(convs) => convs.forward(p, part),
                        None => part,
                    };
                    joined = Some(match joined {
                        None => part,
                        Some(left) => (left, part).concat_along(Axis::<1>),
                    });
                }
                mlp.forward(p, joined.expect("a Dict has an entry"))
            }
            Torso::Custom { net, .. } => T::custom(net.as_ref(), p, x),
        }
    }
}

/// A [`Torso`], then an optional [`Lstm`]: what an algorithm's heads read.
pub struct Body<D: NetDevice> {
    /// The torso.
    pub torso: Torso<D>,
    /// The LSTM after it (`use_lstm`).
    pub lstm: Option<Lstm>,
}

/// How a learning pass's rows form sequences for the LSTM: `num_seqs`
/// sequences of `max_len` rows each (padded), sequence after sequence,
/// each starting from its row of `initial_state` (`[num_seqs, 2 · cell]`).
pub struct SeqLayout<'a> {
    /// Sequences in the batch.
    pub num_seqs: usize,
    /// Rows of each (with padding).
    pub max_len: usize,
    /// `[h, c]` of each sequence's first row.
    pub initial_state: &'a [f32],
}

impl<D: NetDevice> Body<D> {
    /// The body `model` asks for, its tensors named `{name}.…`.
    ///
    /// # Errors
    /// As [`Torso::build`].
    pub fn build(model: &ModelConfig, space: &Space, params: &mut Params<D>, name: &str) -> Result<Self, ConfigError> {
        let torso = Torso::build(model, space, params, &format!("{name}.torso"))?;
        let lstm =
            model.use_lstm.then(|| Lstm::new(params, &format!("{name}.lstm"), torso.features(), model.lstm_cell_size));
        Ok(Self { torso, lstm })
    }

    /// The encoding, the torso's layers and the LSTM for export.
    ///
    /// # Errors
    /// As [`Torso::exported`].
    pub fn exported(&self, p: &Params<D>) -> Result<(Encoding, Vec<Layer>, Option<LstmCell>), PolicyError> {
        let (encoding, layers) = self.torso.exported(p)?;
        Ok((encoding, layers, self.lstm.as_ref().map(|l| l.exported(p))))
    }

    /// Features per output row.
    pub fn features(&self) -> usize {
        self.lstm.as_ref().map_or(self.torso.features(), Lstm::cell)
    }

    /// Width of a row's recurrent state (0 without an LSTM).
    pub fn state_size(&self) -> usize {
        self.lstm.as_ref().map_or(0, |l| 2 * l.cell())
    }

    /// Acting on observation rows: the features and, with an LSTM, each
    /// row's next state. A missing `state` is all zeros (a new episode).
    ///
    /// # Errors
    /// Bad observations, or a state of the wrong size.
    pub fn act<'a>(
        &self,
        p: &Params<D>,
        obs: impl Into<Values<'a>>,
        state: Option<&[f32]>,
    ) -> Result<(Matrix<D>, Option<Vec<f32>>), PolicyError> {
        self.act_on(p, self.torso.input().encode(p.device(), obs)?, state)
    }

    /// [`act`](Self::act) on rows already encoded ([`Input::encode`]).
    ///
    /// # Errors
    /// A state of the wrong size.
    pub fn act_on(
        &self,
        p: &Params<D>,
        x: Matrix<D>,
        state: Option<&[f32]>,
    ) -> Result<(Matrix<D>, Option<Vec<f32>>), PolicyError> {
        let x = self.torso.forward(p, x);
        let Some(lstm) = &self.lstm else { return Ok((x, None)) };
        let rows = x.shape().0;
        let (h, c) = split_state(p.device(), state, rows, lstm.cell())?;
        let (h, c) = lstm.step(p, x, h, c);
        let (h_host, c_host) = (to_vec(&h), to_vec(&c));
        let k = lstm.cell();
        let mut next = Vec::with_capacity(rows * 2 * k);
        for r in 0..rows {
            next.extend_from_slice(&h_host[r * k..(r + 1) * k]);
            next.extend_from_slice(&c_host[r * k..(r + 1) * k]);
        }
        Ok((h, Some(next)))
    }

    /// Learning on observation rows: the features on the gradient tape.
    /// With an LSTM the rows must form `seqs`, which it unrolls from their
    /// initial states (truncated backpropagation through time).
    ///
    /// # Errors
    /// Bad observations; an LSTM without `seqs`, or rows that do not form
    /// them.
    pub fn learn<'a>(
        &self,
        p: &Params<D>,
        obs: impl Into<Values<'a>>,
        seqs: Option<&SeqLayout<'_>>,
    ) -> Result<Matrix<D, Taped<D>>, PolicyError> {
        let x = self.torso.forward(p, self.torso.input().encode(p.device(), obs)?.leaky_traced());
        let Some(lstm) = &self.lstm else { return Ok(x) };
        let seqs = seqs.ok_or_else(|| PolicyError::Other("a recurrent policy learns on sequences".into()))?;
        let (b, t, f, k) = (seqs.num_seqs, seqs.max_len, x.shape().1, lstm.cell());
        if x.shape().0 != b * t {
            return Err(PolicyError::Other(format!("{} rows are not {b} sequences of {t}", x.shape().0)));
        }
        let (h0, c0) = split_state(p.device(), Some(seqs.initial_state), b, k)?;
        let (mut h, mut c) = (h0.retaped::<Taped<D>>(), c0.retaped::<Taped<D>>());
        let mut x3 = Some(x.reshape_like(&(b, t, f)));
        let mut outputs = Vec::with_capacity(t);
        for step in 0..t {
            // Every step reads a copy of the input with an empty tape but
            // the last, which takes the tape itself into the output.
            let xs = if step + 1 < t {
                x3.as_ref().expect("taken at the last step").with_empty_tape()
            } else {
                x3.take().expect("the last step")
            };
            let x_t = xs.slice((.., step..step + 1, ..)).reshape_like(&(b, f));
            let (h_next, c_next) = lstm.step(p, x_t, h, c);
            h = h_next.with_empty_tape();
            c = c_next;
            outputs.push(h_next);
        }
        let stacked = outputs.stack();
        Ok(stacked.permute::<(usize, usize, usize), Axes3<1, 0, 2>>().reshape_like(&(b * t, k)))
    }
}

/// `h` and `c` of `rows` rows from a `[rows, 2 · cell]` state (zeros if
/// `None`).
fn split_state<D: NetDevice>(
    dev: &D,
    state: Option<&[f32]>,
    rows: usize,
    cell: usize,
) -> Result<(Matrix<D>, Matrix<D>), PolicyError> {
    let (mut h, mut c) = (vec![0.0; rows * cell], vec![0.0; rows * cell]);
    if let Some(state) = state {
        if state.len() != rows * 2 * cell {
            return Err(PolicyError::WrongLength {
                what: "recurrent state values",
                expected: rows * 2 * cell,
                got: state.len(),
            });
        }
        for (r, row) in state.chunks_exact(2 * cell).enumerate() {
            h[r * cell..(r + 1) * cell].copy_from_slice(&row[..cell]);
            c[r * cell..(r + 1) * cell].copy_from_slice(&row[cell..]);
        }
    }
    Ok((dev.tensor_from_vec(h, (rows, cell)), dev.tensor_from_vec(c, (rows, cell))))
}

/// A tensor's values on the host (a plain copy; dfdx's `as_vec` walks the
/// tensor element by element through its strides).
pub fn to_vec<S: Shape, D: NetDevice, T>(t: &Tensor<S, f32, D, T>) -> Vec<f32> {
    let mut v = vec![0.0; t.shape().num_elements()];
    t.copy_into(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: usize, w: usize, c: usize) -> Space {
        Space::uniform_box(0.0, 1.0, vec![h, w, c]).unwrap()
    }

    #[test]
    fn each_space_gets_its_network() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let model = ModelConfig::default();
        let vector = Torso::build(&model, &Space::uniform_box(-1.0, 1.0, vec![7]).unwrap(), &mut p, "a").unwrap();
        assert!(matches!(&vector, Torso::Mlp { .. }) && vector.features() == 64);
        let minatar = Torso::build(&model, &image(10, 10, 4), &mut p, "b").unwrap();
        assert!(matches!(&minatar, Torso::Cnn { convs, .. } if convs.maps() == 1024), "one 3×3 of 16 on 10×10: 8·8·16");
        let atari = Torso::build(&model, &image(84, 84, 4), &mut p, "c").unwrap();
        assert!(matches!(&atari, Torso::Cnn { convs, .. } if convs.maps() == 3136), "Nature: 84 → 20 → 9 → 7, × 64");
        let flat = ModelConfig { conv_filters: Some(vec![]), ..ModelConfig::default() };
        let flattened = Torso::build(&flat, &image(10, 10, 4), &mut p, "d").unwrap();
        assert!(matches!(flattened.input(), Input::Flat(400)));
        let discrete = Torso::build(&model, &Space::discrete(16), &mut p, "e").unwrap();
        assert_eq!(discrete.input(), &Input::OneHot(vec![16]));
        let x = discrete.input().encode(p.device(), &[3.0, 15.0]).unwrap();
        assert_eq!(x.shape(), &(2, 16));
        assert_eq!(
            to_vec(&x).iter().enumerate().filter(|(_, &v)| v == 1.0).map(|(i, _)| i).collect::<Vec<_>>(),
            vec![3, 31]
        );
        assert!(discrete.input().encode(p.device(), &[16.0]).is_err());
    }

    #[test]
    fn models_that_do_not_fit_the_space_name_the_key_and_the_space() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let conv = ModelConfig { conv_filters: Some(vec![[16, 3, 1]]), ..ModelConfig::default() };
        let vector = Space::uniform_box(-1.0, 1.0, vec![4]).unwrap();
        let e = Torso::build(&conv, &vector, &mut p, "x").err().unwrap().to_string();
        assert!(e.contains("model.conv_filters") && e.contains("Box(-1, 1, [4])"), "{e}");
        let shrink =
            ModelConfig { conv_filters: Some(vec![[16, 3, 2], [16, 3, 2], [16, 3, 2]]), ..ModelConfig::default() };
        let e = Torso::build(&shrink, &image(10, 10, 4), &mut p, "x").err().unwrap().to_string();
        assert!(e.contains("model.conv_filters") && e.contains("layer 2") && e.contains("below one pixel"), "{e}");
        let e = Torso::build(&ModelConfig::default(), &image(2, 2, 1), &mut p, "x").err().unwrap().to_string();
        assert!(e.contains("model.conv_filters"), "{e}");
    }

    #[test]
    fn a_dict_gets_a_cnn_per_image_entry_and_reads_packed_bytes_as_floats() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let flag = Space::uniform_box(-1.0, 1.0, vec![1]).unwrap();
        let space = Space::dict(vec![
            ("image".into(), Space::bytes(vec![5, 5, 1])),
            ("flag".into(), flag),
            ("mode".into(), Space::discrete(3)),
        ])
        .unwrap();
        let torso = Torso::build(&ModelConfig::default(), &space, &mut p, "t").unwrap();
        let Torso::Dict { entries, .. } = &torso else { panic!("not a Dict torso") };
        assert_eq!(entries[0].0, 0..25);
        assert_eq!(entries[0].1.as_ref().map(ConvStack::maps), Some(3 * 3 * 16));
        assert_eq!((entries[1].0.clone(), entries[2].0.clone()), (25..26, 26..29), "the flag, then mode one-hot");
        assert!(entries[1].1.is_none() && entries[2].1.is_none());
        assert_eq!(torso.input().features(), 29);
        // Two rows, as the env writes them and packed as a batch holds them.
        let mut rows = vec![0.0; 2 * 27];
        rows[7] = 1.0;
        rows[12] = rlx::space::from_byte(9);
        (rows[25], rows[26]) = (-1.0, 2.0);
        rows[27 + 3] = 1.0;
        (rows[27 + 25], rows[27 + 26]) = (1.0, 0.0);
        let mut packed = Vec::new();
        space.pack_rows(&rows, &mut packed).unwrap();
        let from_floats = torso.input().encode_host(&rows).unwrap();
        let from_bytes = torso.input().encode_host(Values::U8(&packed)).unwrap();
        assert_eq!(from_floats, from_bytes);
        assert_eq!(&from_floats[25..29], &[-1.0, 0.0, 0.0, 1.0], "flag -1, mode 2 one-hot");
        assert_eq!(&from_floats[29 + 25..29 + 29], &[1.0, 1.0, 0.0, 0.0]);
        // The flag changes the output: it reaches the layers after the join.
        let x = torso.input().encode(p.device(), &rows).unwrap();
        let out = to_vec(&torso.forward(&p, x));
        let mut flipped = rows.clone();
        flipped[25] = 1.0;
        let y = to_vec(&torso.forward(&p, torso.input().encode(p.device(), &flipped).unwrap()));
        assert_eq!(out.len(), 2 * 64);
        assert_ne!(out[..64], y[..64]);
        assert_eq!(out[64..], y[64..]);
        let flat = ModelConfig { conv_filters: Some(vec![]), ..ModelConfig::default() };
        let flattened = Torso::build(&flat, &space, &mut p, "f").unwrap();
        assert!(matches!(&flattened, Torso::Mlp { input: Input::Dict { .. }, .. }), "no convolutions: an MLP");
        assert_eq!(flattened.input().encode_host(Values::U8(&packed)).unwrap(), from_bytes);
        // An image entry too small for the chosen stack is flattened.
        let tiny = Space::dict(vec![("i".into(), Space::bytes(vec![2, 2, 1])), ("v".into(), Space::discrete(2))]);
        let tiny = Torso::build(&ModelConfig::default(), &tiny.unwrap(), &mut p, "s").unwrap();
        assert!(matches!(&tiny, Torso::Mlp { .. }) && tiny.input().features() == 6);
        let conv_on_vectors = ModelConfig { conv_filters: Some(vec![[4, 3, 1]]), ..ModelConfig::default() };
        let vectors = Space::dict(vec![("a".into(), Space::discrete(2))]).unwrap();
        let e = Torso::build(&conv_on_vectors, &vectors, &mut p, "x").err().unwrap().to_string();
        assert!(e.contains("model.conv_filters") && e.contains("no") && e.contains("image entry"), "{e}");
    }

    #[test]
    fn the_unrolled_lstm_equals_stepping_it() {
        let mut p = Params::new(Cpu::seed_from_u64(0));
        let model = ModelConfig { use_lstm: true, lstm_cell_size: 5, fcnet_hiddens: vec![6], ..ModelConfig::default() };
        let space = Space::uniform_box(-1.0, 1.0, vec![3]).unwrap();
        let body = Body::build(&model, &space, &mut p, "pi").unwrap();
        assert_eq!((body.features(), body.state_size()), (5, 10));
        // Two sequences of three steps, sequence-major, from given states.
        let obs: Vec<f32> = (0..2 * 3 * 3).map(|i| (i as f32 * 0.61).sin()).collect();
        let init: Vec<f32> = (0..2 * 10).map(|i| (i as f32 * 0.3).cos() * 0.5).collect();
        let layout = SeqLayout { num_seqs: 2, max_len: 3, initial_state: &init };
        let unrolled = to_vec(&body.learn(&p, &obs, Some(&layout)).unwrap());
        for s in 0..2 {
            let mut state = init[s * 10..(s + 1) * 10].to_vec();
            for t in 0..3 {
                let row = &obs[(s * 3 + t) * 3..(s * 3 + t + 1) * 3];
                let (h, next) = body.act(&p, row, Some(&state)).unwrap();
                let (h, got) = (to_vec(&h), &unrolled[(s * 3 + t) * 5..(s * 3 + t + 1) * 5]);
                assert!(h.iter().zip(got).all(|(a, b)| (a - b).abs() < 1e-5), "seq {s} step {t}: {h:?} vs {got:?}");
                state = next.unwrap();
            }
        }
    }
}
