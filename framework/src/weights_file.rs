//! Policy weights as safetensors files (Hugging Face's format: a JSON
//! header of names, dtypes and shapes, then the raw little-endian values),
//! which PyTorch, JAX and NumPy read. Checkpoints keep the learner's weights
//! in one ([`crate::checkpoint::WEIGHTS_FILE`]), and
//! [`PolicyGraph::save_weights`](crate::PolicyGraph::save_weights) writes one.

use std::fs;
use std::path::{Path, PathBuf};

/// A weights file that could not be written or read, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct WeightsFileError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

fn error(path: &Path, reason: String) -> WeightsFileError {
    WeightsFileError { path: path.to_path_buf(), reason }
}

/// One named `f32` tensor of a safetensors file: name, shape, values
/// (row-major).
pub type NamedTensor = (String, Vec<usize>, Vec<f32>);

/// Writes `tensors` as a safetensors file of `f32` tensors.
///
/// # Errors
/// A [`WeightsFileError`] naming the file if it cannot be written or a
/// tensor's shape does not match its values.
pub fn write_safetensors(path: &Path, tensors: &[NamedTensor]) -> Result<(), WeightsFileError> {
    let fail = |e: &dyn std::fmt::Debug| error(path, format!("{e:?}"));
    let bytes: Vec<Vec<u8>> =
        tensors.iter().map(|(_, _, values)| values.iter().flat_map(|w| w.to_le_bytes()).collect()).collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b)
                .map(|view| (name.as_str(), view))
                .map_err(|e| fail(&e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::tensor::serialize_to_file(views, &None, path).map_err(|e| fail(&e))
}

/// Reads every tensor of a safetensors file written by
/// [`write_safetensors`], in no particular order (look them up by name).
///
/// # Errors
/// A [`WeightsFileError`] naming the file and the problem: unreadable, not
/// safetensors, or a tensor that is not `f32`.
pub fn read_safetensors(path: &Path) -> Result<Vec<NamedTensor>, WeightsFileError> {
    let fail = |what: String| error(path, what);
    let bytes = fs::read(path).map_err(|e| fail(e.to_string()))?;
    let tensors =
        safetensors::SafeTensors::deserialize(&bytes).map_err(|e| fail(format!("not a safetensors file ({e:?})")))?;
    let mut out = Vec::new();
    for (name, t) in tensors.tensors() {
        if t.dtype() != safetensors::Dtype::F32 {
            return Err(fail(format!("`{name}` is {:?}, expected F32", t.dtype())));
        }
        let values = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        out.push((name, t.shape().to_vec(), values));
    }
    Ok(out)
}

/// Writes `weights` as a safetensors file with one `f32` tensor named
/// `"weights"` (the default
/// [`PolicyGraph::save_weights`](crate::PolicyGraph::save_weights)).
///
/// # Errors
/// A [`WeightsFileError`] naming the file if it cannot be written.
pub fn write_flat_safetensors(path: &Path, weights: &[f32]) -> Result<(), WeightsFileError> {
    write_safetensors(path, &[("weights".into(), vec![weights.len()], weights.to_vec())])
}

/// Reads the `"weights"` tensor written by [`write_flat_safetensors`].
///
/// # Errors
/// A [`WeightsFileError`] naming the file and the problem.
pub fn read_flat_safetensors(path: &Path) -> Result<Vec<f32>, WeightsFileError> {
    let tensors = read_safetensors(path)?;
    let found = tensors.into_iter().find(|(name, _, _)| name == "weights");
    found.map(|(_, _, values)| values).ok_or_else(|| error(path, "no tensor named `weights`".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_safetensors_roundtrip_and_errors() {
        let dir = std::env::temp_dir().join(format!("rlx-weights-file-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.safetensors");
        let w = vec![1.5f32, -2.0, 0.0, f32::MIN_POSITIVE];
        write_flat_safetensors(&path, &w).unwrap();
        assert_eq!(read_flat_safetensors(&path).unwrap(), w);
        fs::write(&path, b"garbage").unwrap();
        let err = read_flat_safetensors(&path).unwrap_err().to_string();
        assert!(err.contains("w.safetensors") && err.contains("not a safetensors file"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }
}
