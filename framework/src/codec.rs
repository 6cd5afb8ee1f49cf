//! The wire format for [`SampleBatch`]es and other messages: MessagePack
//! (`rmp-serde`) compressed with LZ4 (`lz4_flex`).
//!
//! Layout: the 4-byte magic `RLX1`, the uncompressed length as a little-endian
//! `u32`, then one LZ4 block. Batch columns travel as raw little-endian bytes,
//! so encoding is a copy and LZ4 sees the repetitive structure of pixel
//! observations. Decoding validates everything and never panics: corrupt or
//! hostile bytes give a [`CodecError`].

use crate::sample_batch::{BatchError, Column, SampleBatch};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 4] = b"RLX1";

/// Largest uncompressed message accepted by [`decode`] (1 GiB), so a forged
/// length cannot make the receiver allocate without bound.
pub const MAX_DECODED_BYTES: usize = 1 << 30;

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes do not start with the rlx magic (wrong protocol or version).
    #[error("not an rlx message: bad magic bytes")]
    BadMagic,
    /// The message is shorter than its header.
    #[error("truncated message: {0} bytes")]
    Truncated(usize),
    /// The header claims more than [`MAX_DECODED_BYTES`].
    #[error("message claims {0} bytes uncompressed, more than the {MAX_DECODED_BYTES}-byte limit")]
    TooLarge(usize),
    /// The header claims more than this kind of message can hold (see
    /// [`decode_value_within`]).
    #[error("message claims {claimed} bytes uncompressed, more than the {limit} bytes its kind can hold")]
    OverLimit {
        /// The uncompressed length the header claims.
        claimed: usize,
        /// What the receiver allows for this kind of message.
        limit: usize,
    },
    /// The LZ4 block is corrupt.
    #[error("corrupt LZ4 block: {0}")]
    Lz4(#[from] lz4_flex::block::DecompressError),
    /// The MessagePack payload is malformed.
    #[error("malformed MessagePack payload: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    /// Encoding failed (a value serde cannot represent).
    #[error("cannot encode: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    /// The payload decoded but describes an inconsistent batch.
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
}

/// Serializes any serde value to the wire format.
///
/// # Errors
/// If serde cannot represent the value.
pub fn encode_value<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    frame(&rmp_serde::to_vec(value)?)
}

/// Frames a MessagePack `payload` as [`encode_value`] does: the magic, the
/// length, the LZ4 block. (Fuzz tests frame altered payloads with it, to
/// reach the MessagePack decoder behind the LZ4 layer.)
///
/// # Errors
/// [`CodecError::TooLarge`] past [`MAX_DECODED_BYTES`].
pub fn frame(payload: &[u8]) -> Result<Vec<u8>, CodecError> {
    if payload.len() > MAX_DECODED_BYTES {
        return Err(CodecError::TooLarge(payload.len()));
    }
    let len = payload.len() as u32;
    let compressed = lz4_flex::block::compress(payload);
    let mut out = Vec::with_capacity(8 + compressed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&compressed);
    Ok(out)
}

/// Deserializes a value written by [`encode_value`].
///
/// # Errors
/// A [`CodecError`] naming what is wrong with the bytes.
pub fn decode_value<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    decode_value_within(bytes, MAX_DECODED_BYTES)
}

/// [`decode_value`] for a message whose kind holds at most `limit` bytes
/// uncompressed (weights of a known size, a batch under a configured
/// maximum): a header claiming more is refused before anything is
/// decompressed, so a small message cannot make the receiver allocate what
/// it claims.
///
/// # Errors
/// [`CodecError::OverLimit`], or as [`decode_value`].
pub fn decode_value_within<T: DeserializeOwned>(bytes: &[u8], limit: usize) -> Result<T, CodecError> {
    Ok(rmp_serde::from_slice(&unframe_within(bytes, limit)?)?)
}

/// The MessagePack payload of a framed message, checked and decompressed.
///
/// # Errors
/// A short message, bad magic, a length past [`MAX_DECODED_BYTES`], or a
/// corrupt LZ4 block.
pub fn unframe(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    unframe_within(bytes, MAX_DECODED_BYTES)
}

/// [`unframe`] refusing a message that claims more than `limit` bytes
/// uncompressed.
///
/// # Errors
/// [`CodecError::OverLimit`], or as [`unframe`].
pub fn unframe_within(bytes: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    if bytes.len() < 8 {
        return Err(CodecError::Truncated(bytes.len()));
    }
    if &bytes[..4] != MAGIC {
        return Err(CodecError::BadMagic);
    }
    let len = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
    if len > MAX_DECODED_BYTES {
        return Err(CodecError::TooLarge(len));
    }
    if len > limit {
        return Err(CodecError::OverLimit { claimed: len, limit });
    }
    // An LZ4 block expands at most about 255 times (a match's length grows
    // by 255 per byte of input), so a claim beyond that is a lie: refuse it
    // before allocating what it claims.
    let possible = (bytes.len() - 8).saturating_mul(256).saturating_add(64);
    if len > possible {
        return Err(CodecError::OverLimit { claimed: len, limit: possible });
    }
    Ok(lz4_flex::block::decompress(&bytes[8..], len)?)
}

#[derive(Serialize, Deserialize)]
enum WireColumn {
    F32 {
        #[serde(with = "serde_bytes")]
        le_bytes: Vec<u8>,
        width: u32,
    },
    I64 {
        #[serde(with = "serde_bytes")]
        le_bytes: Vec<u8>,
        width: u32,
    },
    /// Added after `F32` and `I64`, so older batches decode unchanged.
    U8 {
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
        width: u32,
    },
}

#[derive(Serialize, Deserialize)]
struct WireBatch {
    columns: Vec<(String, WireColumn)>,
}

/// Encodes a batch.
///
/// # Examples
/// ```
/// use rlx::{codec, SampleBatch};
/// let mut batch = SampleBatch::new();
/// batch.insert_f32("obs", vec![0.5; 64], 4).unwrap();
/// let bytes = codec::encode(&batch).unwrap();
/// assert_eq!(codec::decode(&bytes).unwrap(), batch);
/// assert!(codec::decode(&bytes[..bytes.len() / 2]).is_err());
/// ```
///
/// # Errors
/// [`CodecError::TooLarge`] past [`MAX_DECODED_BYTES`], so nothing is sent
/// that the receiver would refuse.
pub fn encode(batch: &SampleBatch) -> Result<Vec<u8>, CodecError> {
    let rows = batch.len();
    let columns = batch
        .columns()
        .map(|(name, col)| {
            let wire = match col {
                Column::F32 { width, .. } => WireColumn::F32 { le_bytes: col.le_bytes(0..rows), width: *width as u32 },
                Column::I64 { width, .. } => WireColumn::I64 { le_bytes: col.le_bytes(0..rows), width: *width as u32 },
                Column::U8 { data, width } => WireColumn::U8 { bytes: data.clone(), width: *width as u32 },
            };
            (name.to_string(), wire)
        })
        .collect();
    encode_value(&WireBatch { columns })
}

/// Decodes a batch written by [`encode`], checking that every column is a
/// whole number of rows and that all columns have the same number of rows.
///
/// # Errors
/// A [`CodecError`] naming what is wrong; never panics.
pub fn decode(bytes: &[u8]) -> Result<SampleBatch, CodecError> {
    decode_within(bytes, MAX_DECODED_BYTES)
}

/// [`decode`] for a batch of at most `limit` bytes uncompressed (see
/// [`decode_value_within`]).
///
/// # Errors
/// As [`decode`] and [`decode_value_within`].
pub fn decode_within(bytes: &[u8], limit: usize) -> Result<SampleBatch, CodecError> {
    let wire: WireBatch = decode_value_within(bytes, limit)?;
    let mut columns = Vec::with_capacity(wire.columns.len());
    for (name, col) in wire.columns {
        let column = match col {
            WireColumn::F32 { le_bytes, width } => {
                check_bytes(&name, le_bytes.len(), 4)?;
                let data =
                    le_bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                Column::F32 { data, width: width as usize }
            }
            WireColumn::I64 { le_bytes, width } => {
                check_bytes(&name, le_bytes.len(), 8)?;
                let data =
                    le_bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
                Column::I64 { data, width: width as usize }
            }
            WireColumn::U8 { bytes, width } => Column::U8 { data: bytes, width: width as usize },
        };
        columns.push((name, column));
    }
    Ok(SampleBatch::from_columns(columns)?)
}

fn check_bytes(field: &str, len: usize, elem: usize) -> Result<(), CodecError> {
    if len % elem == 0 {
        Ok(())
    } else {
        Err(BatchError::Ragged { field: field.to_string(), len, width: elem }.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The issue's case: a few MB that decompress to a GB. With its kind's
    /// limit the claim is refused before anything is allocated.
    #[test]
    fn a_message_over_its_kinds_limit_is_refused_before_decompressing() {
        let zeros = frame(&vec![0u8; 64 << 20]).unwrap();
        assert!(zeros.len() < (1 << 20), "{} bytes", zeros.len());
        let err = decode_value_within::<Vec<u8>>(&zeros, 1 << 20).unwrap_err();
        assert!(
            matches!(err, CodecError::OverLimit { claimed, limit } if claimed == 64 << 20 && limit == 1 << 20),
            "{err}"
        );
        let batch = encode(&sample()).unwrap();
        assert!(matches!(decode_within(&batch, 16), Err(CodecError::OverLimit { .. })));
        assert_eq!(decode_within(&batch, 1 << 20).unwrap(), sample());
    }
    use proptest::prelude::*;

    fn sample() -> SampleBatch {
        let mut b = SampleBatch::new();
        b.insert_f32("obs", (0..400).map(|i| (i as f32).sin()).collect(), 4).unwrap();
        b.insert_i64("actions", (0..100).map(|i| i % 3).collect(), 1).unwrap();
        b.insert_f32("rewards", vec![1.0; 100], 1).unwrap();
        b.insert_u8("pixels", (0..900).map(|i| (i * 7 % 256) as u8).collect(), 9).unwrap();
        b
    }

    #[test]
    fn roundtrip_is_exact() {
        let b = sample();
        let bytes = encode(&b).unwrap();
        assert_eq!(decode(&bytes).unwrap(), b);
        let empty = SampleBatch::new();
        assert_eq!(decode(&encode(&empty).unwrap()).unwrap(), empty);
    }

    /// `uint8` observations cross the wire as one byte per value, not four.
    #[test]
    fn byte_columns_cross_the_wire_as_bytes() {
        let pixels: Vec<u8> = (0..64 * 7056).map(|i| (i * 2_654_435_761usize >> 13) as u8).collect();
        let mut bytes = SampleBatch::new();
        bytes.insert_u8("obs", pixels.clone(), 7056).unwrap();
        let mut floats = SampleBatch::new();
        floats.insert_f32("obs", pixels.iter().map(|&b| crate::space::from_byte(b)).collect(), 7056).unwrap();
        let (b, f) = (encode(&bytes).unwrap(), encode(&floats).unwrap());
        assert_eq!(decode(&b).unwrap(), bytes);
        assert!(b.len() <= 64 * 7056 + 1024, "{} bytes for {} pixels", b.len(), 64 * 7056);
        assert!(b.len() * 3 < f.len(), "{} bytes as u8, {} as f32", b.len(), f.len());
    }

    #[test]
    fn binary_pixel_batches_compress_well() {
        // 10x10x4 binary frames, mostly zeros, as MinAtar produces.
        let mut b = SampleBatch::new();
        let obs: Vec<f32> = (0..1000 * 400).map(|i| if i % 37 == 0 { 1.0 } else { 0.0 }).collect();
        b.insert_f32("obs", obs, 400).unwrap();
        let bytes = encode(&b).unwrap();
        assert!(bytes.len() * 10 < b.size_bytes(), "{} vs {}", bytes.len(), b.size_bytes());
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let bytes = encode(&sample()).unwrap();
        assert!(matches!(decode(&bytes[..5]), Err(CodecError::Truncated(5))));
        assert!(matches!(decode(b"XXXX\0\0\0\0"), Err(CodecError::BadMagic)));
        let mut huge = bytes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&huge), Err(CodecError::TooLarge(_))));
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 7);
        assert!(decode(&cut).is_err());
        // A well-formed message whose columns disagree on row count.
        let wire = WireBatch {
            columns: vec![
                ("a".into(), WireColumn::F32 { le_bytes: vec![0; 8], width: 1 }),
                ("b".into(), WireColumn::F32 { le_bytes: vec![0; 4], width: 1 }),
            ],
        };
        let err = decode(&encode_value(&wire).unwrap()).unwrap_err();
        assert!(matches!(err, CodecError::Batch(BatchError::RowMismatch { .. })), "{err}");
        let zero_width = WireBatch { columns: vec![("a".into(), WireColumn::I64 { le_bytes: vec![0; 8], width: 0 })] };
        assert!(decode(&encode_value(&zero_width).unwrap()).is_err());
    }

    /// The batch decoder on every file of the committed `cargo fuzz`
    /// corpus (`fuzz/corpus/batch_codec`) and on
    /// [`FUZZ_CASES`](crate::fuzz::FUZZ_CASES) altered batches, half made
    /// from those files, half from three batches here: float and integer
    /// columns, pixels, empty.
    #[test]
    fn fuzzed_batches_never_panic() {
        let mut pixels = SampleBatch::new();
        pixels.insert_u8("obs", (0..400).map(|i| (i % 3) as u8).collect(), 100).unwrap();
        let corpus = vec![encode(&sample()).unwrap(), encode(&pixels).unwrap(), encode(&SampleBatch::new()).unwrap()];
        crate::fuzz::run_target("batch_codec", &corpus, crate::fuzz::mutate_framed, |bytes| {
            let _ = decode(bytes);
        });
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn flipped_bytes_never_panic(pos in 0usize..1000, val in any::<u8>()) {
            let mut bytes = encode(&sample()).unwrap();
            let i = pos % bytes.len();
            bytes[i] = val;
            let _ = decode(&bytes);
        }
    }
}
