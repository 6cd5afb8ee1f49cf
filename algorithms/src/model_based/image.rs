//! DreamerV3's networks for image observations (Hafner et al. 2023,
//! appendix B; RLlib's `CNNAtari` encoder and `ConvTransposeAtari` decoder
//! have the same shape): convolutions that halve the image, and a decoder
//! that mirrors them with transposed convolutions back to the pixels.
//!
//! ```text
//! encoder  x (H × W × C)  → [conv 4×4, stride 2 → norm → silu] × n → flatten
//! decoder  [h, z] → linear → the last maps → [up-conv 4×4, ×2 → norm → silu] × (n − 1)
//!                                          → up-conv 4×4, ×2 to C channels
//! ```
//!
//! Stage `i` has `2^i · depth` channels, `depth` the model size's CNN
//! multiplier (`Sizes::cnn_depth`). The encoder halves while both sides
//! are at least 8 pixels (at least once): `64 × 64` images end at `4 × 4`
//! after four stages, as the paper's, and MinAtar's `10 × 10` at `5 × 5`
//! after one. Odd sides round up, and the decoder's steps give back each
//! stage's exact sides.
//!
//! The normalization is over each pixel's channels, without a scale and
//! offset of its own (as [`super::networks::NormDense`]'s).
//!
//! rlx's [`Conv2d`] has no padding. A "same" convolution is one over the
//! image with a border of zeros, and a transposed convolution with
//! stride 2 is one (of stride 1) over the image spread out with a zero
//! between every two pixels (Dumoulin & Visin 2016, section 4): both are
//! one gather from the image with a zero appended ([`Spread`]), whose
//! backward pass is dfdx's scatter-add, on every device.

use super::networks::{layer_norm, silu, NORM_EPS};
use crate::model::device::NetDevice;
use crate::model::{Conv2d, Linear, Matrix, Params};
use dfdx::prelude::*;
use rlx::export::Layer;

/// Images with a side below this cannot be encoded.
pub const MIN_SIDE: usize = 4;

/// The encoder halves while both sides are at least this.
const HALVE_FROM: usize = 8;

/// Side of the square filters.
const KERNEL: usize = 4;

/// The sides of the maps after each stage of the encoder, from the
/// image's `(height, width)`, the image's own first.
///
/// # Errors
/// An image with a side below [`MIN_SIDE`], named in the message.
pub fn stage_sides(height: usize, width: usize) -> Result<Vec<(usize, usize)>, String> {
    if height.min(width) < MIN_SIDE {
        return Err(format!(
            "DreamerV3's image encoder needs images of at least {MIN_SIDE} × {MIN_SIDE} pixels, not {height} × {width}"
        ));
    }
    let mut sides = vec![(height, width)];
    while let Some(&(h, w)) = sides.last() {
        if sides.len() > 1 && h.min(w) < HALVE_FROM {
            break;
        }
        sides.push((h.div_ceil(2), w.div_ceil(2)));
    }
    Ok(sides)
}

/// A channels-last image with `before` zero pixels above and left of it,
/// `after` below and right (per side: `(height, width)`), and `step − 1`
/// zeros between neighbouring pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spread {
    /// `(height, width, channels)` of the image.
    image: (usize, usize, usize),
    step: usize,
    before: (usize, usize),
    after: (usize, usize),
}

impl Spread {
    /// The padding of a "same" convolution with stride 2, whose output
    /// has half the input's sides (rounded up).
    fn halving(image: (usize, usize, usize)) -> Self {
        let after = |side: usize| if side.is_multiple_of(2) { 1 } else { 2 };
        Self { image, step: 1, before: (1, 1), after: (after(image.0), after(image.1)) }
    }

    /// The spreading of a transposed convolution with stride 2 from
    /// `image` to the sides `to` (about twice its own).
    fn doubling(image: (usize, usize, usize), to: (usize, usize)) -> Self {
        // A stride-1 convolution over (2n − 1) + 2 + a pixels gives
        // 2n − 2 + a, so a = to − 2n + 2.
        let after = |n: usize, to: usize| to + 2 - 2 * n;
        Self { image, step: 2, before: (2, 2), after: (after(image.0, to.0), after(image.1, to.1)) }
    }

    /// `(height, width)` of the spread image.
    fn sides(&self) -> (usize, usize) {
        let side = |n: usize, before: usize, after: usize| (n - 1) * self.step + 1 + before + after;
        (side(self.image.0, self.before.0, self.after.0), side(self.image.1, self.before.1, self.after.1))
    }

    /// For every value of `rows` spread images, the index of the value it
    /// copies in the images' flat values, or one past their end for a
    /// zero.
    fn sources(&self, rows: usize) -> Vec<usize> {
        let (h, w, c) = self.image;
        let (sh, sw) = self.sides();
        let zero = rows * h * w * c;
        let from = |o: usize, before: usize, n: usize| {
            let o = o.checked_sub(before)?;
            (o.is_multiple_of(self.step) && o / self.step < n).then_some(o / self.step)
        };
        let mut out = Vec::with_capacity(rows * sh * sw * c);
        for r in 0..rows {
            for y in 0..sh {
                for x in 0..sw {
                    match (from(y, self.before.0, h), from(x, self.before.1, w)) {
                        (Some(i), Some(j)) => {
                            let at = ((r * h + i) * w + j) * c;
                            out.extend(at..at + c);
                        }
                        _ => out.extend(std::iter::repeat_n(zero, c)),
                    }
                }
            }
        }
        out
    }

    /// The spread images of every row of `x` (`rows × h · w · c`).
    fn apply<D: NetDevice, T: Tape<f32, D>>(&self, x: Matrix<D, T>) -> Matrix<D, T> {
        let (rows, len) = (x.shape().0, x.shape().0 * x.shape().1);
        debug_assert_eq!(x.shape().1, self.image.0 * self.image.1 * self.image.2, "rows of other images");
        let dev = x.device().clone();
        let flat = (x.reshape_like(&(len,)), dev.zeros_like(&(1usize,))).concat_along(Axis::<0>);
        let sources = self.sources(rows);
        let n = sources.len();
        flat.gather(dev.tensor_from_vec(sources, (n,))).reshape_like(&(rows, n / rows.max(1)))
    }
}

/// One convolution of the encoder or decoder: its input spread
/// ([`Spread`]), a 4 × 4 convolution, then, unless it is the decoder's
/// last, the normalization over each pixel's channels and SiLU.
#[derive(Clone, Debug, PartialEq)]
struct ConvLayer {
    spread: Spread,
    conv: Conv2d,
    /// `(height, width, channels)` of the output.
    out: (usize, usize, usize),
    norm: bool,
}

impl ConvLayer {
    fn new<D: NetDevice>(
        p: &mut Params<D>,
        name: &str,
        spread: Spread,
        stride: usize,
        channels: usize,
        norm: bool,
    ) -> Self {
        let (sh, sw) = spread.sides();
        let out = ((sh - KERNEL) / stride + 1, (sw - KERNEL) / stride + 1, channels);
        Self { spread, conv: Conv2d::new(p, name, spread.image.2, channels, KERNEL, stride), out, norm }
    }

    /// The layer for export: the padding, the convolution, and the
    /// normalization and SiLU where it has them. Only the encoder's
    /// layers (which pad, not spread) export.
    fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        debug_assert_eq!(self.spread.step, 1, "a decoder's layer");
        let (height, width, channels) = self.spread.image;
        let (sh, sw) = self.spread.sides();
        let (before, after) =
            ([self.spread.before.0, self.spread.before.1], [self.spread.after.0, self.spread.after.1]);
        let mut layers = vec![Layer::Pad { height, width, channels, before, after }, self.conv.exported(p, sh, sw)];
        if self.norm {
            layers.extend([Layer::ChannelNorm { channels: self.out.2, eps: NORM_EPS }, Layer::Silu]);
        }
        layers
    }

    /// The layer on every row of `x`; `x` gets a gradient only if
    /// `input_grad` (the encoder's input, the observation, needs none).
    fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>, input_grad: bool) -> Matrix<D, T> {
        let rows = x.shape().0;
        let (sh, sw) = self.spread.sides();
        let spread = if input_grad {
            self.spread.apply(x)
        } else {
            let (x, tape) = x.split_tape();
            self.spread.apply(x).put_tape(tape)
        };
        let y = self.conv.forward(p, spread, sh, sw, input_grad);
        if !self.norm {
            return y;
        }
        let (h, w, c) = self.out;
        silu(layer_norm(y.reshape_like(&(rows * h * w, c))).reshape_like(&(rows, h * w * c)))
    }
}

/// The encoder of images (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ImageEncoder {
    layers: Vec<ConvLayer>,
}

impl ImageEncoder {
    /// The encoder of `height × width × channels` images, `depth`
    /// channels in its first stage, named `{name}.conv0`, ….
    ///
    /// # Errors
    /// Images too small to encode ([`stage_sides`]).
    pub fn new<D: NetDevice>(
        p: &mut Params<D>,
        name: &str,
        (height, width, channels): (usize, usize, usize),
        depth: usize,
    ) -> Result<Self, String> {
        let sides = stage_sides(height, width)?;
        let mut image = (height, width, channels);
        let mut layers = Vec::with_capacity(sides.len() - 1);
        for i in 0..sides.len() - 1 {
            let layer = ConvLayer::new(p, &format!("{name}.conv{i}"), Spread::halving(image), 2, depth << i, true);
            debug_assert_eq!((layer.out.0, layer.out.1), sides[i + 1]);
            image = layer.out;
            layers.push(layer);
        }
        Ok(Self { layers })
    }

    /// Features of an encoded image: the last maps, flattened.
    pub fn features(&self) -> usize {
        let (h, w, c) = self.layers.last().expect("at least one stage").out;
        h * w * c
    }

    /// The encoder for export.
    pub fn exported<D: NetDevice>(&self, p: &Params<D>) -> Vec<Layer> {
        self.layers.iter().flat_map(|layer| layer.exported(p)).collect()
    }

    /// The encoder on every row of `x` (`rows × height · width · channels`).
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, x: Matrix<D, T>) -> Matrix<D, T> {
        let mut layers = self.layers.iter();
        let first = layers.next().expect("at least one stage").forward(p, x, false);
        layers.fold(first, |x, layer| layer.forward(p, x, true))
    }
}

/// The decoder of images: the encoder's stages in reverse (see the
/// module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ImageDecoder {
    linear: Linear,
    layers: Vec<ConvLayer>,
}

impl ImageDecoder {
    /// The decoder from `features` to the images `encoder` encodes, named
    /// `{name}.linear`, `{name}.conv0`, ….
    pub fn new<D: NetDevice>(p: &mut Params<D>, name: &str, features: usize, encoder: &ImageEncoder) -> Self {
        let linear = Linear::new(p, &format!("{name}.linear"), features, encoder.features());
        let stages = encoder.layers.len();
        let mut layers = Vec::with_capacity(stages);
        for i in (0..stages).rev() {
            let from = encoder.layers[i].out;
            // Back to the stage's input: the image itself last, unnormalized.
            let to = match i {
                0 => encoder.layers[0].spread.image,
                _ => encoder.layers[i - 1].out,
            };
            let spread = Spread::doubling(from, (to.0, to.1));
            layers.push(ConvLayer::new(p, &format!("{name}.conv{}", stages - 1 - i), spread, 1, to.2, i > 0));
        }
        Self { linear, layers }
    }

    /// The decoded images of every row of `feats`, `rows × height · width
    /// · channels`.
    pub fn forward<D: NetDevice, T: Tape<f32, D>>(&self, p: &Params<D>, feats: Matrix<D, T>) -> Matrix<D, T> {
        self.layers.iter().fold(self.linear.forward(p, feats), |x, layer| layer.forward(p, x, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grad_check::numeric_grad;

    #[test]
    fn the_encoder_halves_to_the_papers_sides_and_the_decoder_gives_back_every_image_size() {
        assert_eq!(stage_sides(64, 64).unwrap(), [(64, 64), (32, 32), (16, 16), (8, 8), (4, 4)]);
        assert_eq!(stage_sides(10, 10).unwrap(), [(10, 10), (5, 5)]);
        assert_eq!(stage_sides(84, 21).unwrap(), [(84, 21), (42, 11), (21, 6)]);
        assert_eq!(stage_sides(4, 4).unwrap(), [(4, 4), (2, 2)]);
        let err = stage_sides(3, 10).unwrap_err();
        assert!(err.contains("at least 4 × 4") && err.contains("3 × 10"), "{err}");

        let dev = Cpu::seed_from_u64(0);
        for (h, w, c) in [(10, 10, 4), (64, 64, 3), (84, 21, 1), (4, 5, 2)] {
            let mut p = Params::new(dev.clone());
            let enc = ImageEncoder::new(&mut p, "enc", (h, w, c), 2).unwrap();
            let dec = ImageDecoder::new(&mut p, "dec", 6, &enc);
            let x = dev.sample_normal_like(&(3usize, h * w * c));
            let e = enc.forward(&p, x);
            assert_eq!(e.shape().1, enc.features(), "{h}×{w}");
            let out = dec.forward(&p, dev.sample_normal_like(&(3usize, 6usize)));
            assert_eq!(*out.shape(), (3, h * w * c), "{h}×{w}×{c}");
        }
    }

    #[test]
    fn spreading_pads_and_interleaves_zeros() {
        // A 2 × 2 image of one channel, spread with step 2 and one zero
        // before and after: a 5 × 5 image whose pixels sit at odd places.
        let spread = Spread { image: (2, 2, 1), step: 2, before: (1, 1), after: (1, 1) };
        assert_eq!(spread.sides(), (5, 5));
        let dev = Cpu::default();
        let x = dev.tensor_from_vec(vec![1.0f32, 2.0, 3.0, 4.0], (1usize, 4usize));
        #[rustfmt::skip]
        let expected = [
            0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 1.0, 0.0, 2.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 3.0, 0.0, 4.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        assert_eq!(spread.apply(x).as_vec(), expected);
    }

    #[test]
    fn encoder_and_decoder_gradients_match_finite_differences() {
        // Images of 5 × 4 × 2 through the encoder (one stage), then the
        // decoder back from a projection of the code: every weight
        // reaches the loss, through padding and spreading both.
        let dev = Cpu::seed_from_u64(3);
        let mut p = Params::new(dev.clone());
        let enc = ImageEncoder::new(&mut p, "enc", (5, 4, 2), 3).unwrap();
        let dec = ImageDecoder::new(&mut p, "dec", enc.features(), &enc);
        let x: Vec<f32> = (0..2 * 40).map(|i| (i as f32 * 0.37).sin()).collect();
        let target: Vec<f32> = (0..2 * 40).map(|i| (i as f32 * 0.11).cos()).collect();
        let run = |p: &Params<Cpu>, taped: bool| -> (f32, Option<Gradients<f32, Cpu>>) {
            let x = dev.tensor_from_vec(x.clone(), (2usize, 40usize));
            let t = dev.tensor_from_vec(target.clone(), (2usize, 40usize));
            if taped {
                let loss = (dec.forward(p, enc.forward(p, x.leaky_traced())) - t).square().sum::<Rank0, _>();
                (loss.as_vec()[0], Some(loss.backward()))
            } else {
                ((dec.forward(p, enc.forward(p, x)) - t).square().sum::<Rank0, _>().as_vec()[0], None)
            }
        };
        let (_, grads) = run(&p, true);
        let analytic = p.grads(&mut grads.unwrap(), 0..p.len());
        let mut worst = 0.0f32;
        for i in 0..p.len() {
            let numeric = numeric_grad(&mut p, i, &|p| run(p, false).0);
            worst = worst.max((numeric - analytic[i]).abs() / (5e-2 + numeric.abs()));
        }
        assert!(analytic.iter().filter(|g| g.abs() > 1e-3).count() > p.len() / 2, "{analytic:?}");
        // Central differences with a step of 1e-2 through the normalization
        // of three channels are off by up to 6 % here; a misplaced pixel
        // or a lost tape is off by far more.
        assert!(worst < 1e-1, "worst relative gradient error {worst}");
    }
}
