//! The tensor types every file of `model` shares, and nothing else: the
//! `(rows, features)` [`Matrix`], the [`Taped`] learning tape, a flat
//! [`Flat`] parameter tensor, the hidden-layer [`Activation`] and a
//! convolution's [`ConvGeometry`]. The bottom of `model`'s imports: it
//! names no other file of the crate, so the CPU kernels (`cpu.rs`), the
//! devices (`device.rs`) and the layers above them can all use it.

use dfdx::prelude::*;
use serde::{Deserialize, Serialize};

/// A `(rows, features)` matrix on device `D` with tape `T`.
pub type Matrix<D, T = NoneTape> = Tensor<(usize, usize), f32, D, T>;

/// The gradient tape of a learning pass on device `D`.
pub type Taped<D> = OwnedTape<f32, D>;

/// A flat trainable tensor on device `D`.
pub type Flat<D> = Tensor<(usize,), f32, D>;

/// A hidden-layer nonlinearity (`fcnet_activation`, `conv_activation`).
///
/// [`apply`](Self::apply) runs it on a device (`device.rs`, where the
/// devices' kernels are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// `tanh(x)`.
    #[default]
    Tanh,
    /// `max(x, 0)`.
    Relu,
}

impl From<Activation> for rlx::export::Layer {
    fn from(a: Activation) -> Self {
        match a {
            Activation::Tanh => rlx::export::Layer::Tanh,
            Activation::Relu => rlx::export::Layer::Relu,
        }
    }
}

/// The sizes of one convolution (square `kernel × kernel` filters,
/// `stride`, no padding) over a batch of `rows` channels-last images of
/// `height × width × in_channels`: what a device's `NetDevice::conv2d`
/// needs besides the tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// Images in the batch.
    pub rows: usize,
    /// Input image height in pixels.
    pub height: usize,
    /// Input image width in pixels.
    pub width: usize,
    /// Channels of each input pixel.
    pub in_channels: usize,
    /// Filters, the channels of each output pixel.
    pub out_channels: usize,
    /// Side of the square filters.
    pub kernel: usize,
    /// Step between patches, in pixels, along both sides.
    pub stride: usize,
}

impl ConvGeometry {
    /// Values in one patch: `kernel² · in_channels`.
    pub fn patch(&self) -> usize {
        self.kernel * self.kernel * self.in_channels
    }

    /// `(h', w')`, the output's sides: `(side − kernel) / stride + 1`.
    pub fn out_sides(&self) -> (usize, usize) {
        let (k, s) = (self.kernel, self.stride);
        ((self.height - k) / s + 1, (self.width - k) / s + 1)
    }
}
