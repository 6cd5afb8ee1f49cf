//! Where a policy's tensors live: `"device": "cpu"` (the default) or
//! `"cuda"` / `"cuda:N"` in an algorithm's config.
//!
//! The built-in policies are generic over the dfdx device, so the same
//! algorithm code runs on either. CUDA needs rlx built with the `cuda`
//! feature (which turns on dfdx's); without it, asking for a GPU is a
//! config error that says how to rebuild, never a panic. See the book's
//! "Building with CUDA" page for what the build needs.

use rlx::config::ConfigError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A dfdx device: the CPU, or a CUDA GPU by ordinal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    /// dfdx's `Cpu` device (matrix multiplies on the calling thread).
    #[default]
    Cpu,
    /// dfdx's `Cuda` device on GPU `N` (`"cuda"` is `"cuda:0"`).
    Cuda(usize),
}

impl DeviceSpec {
    /// Whether this build can run on the device.
    pub fn available_in_build(self) -> bool {
        matches!(self, DeviceSpec::Cpu) || cfg!(feature = "cuda")
    }

    /// The device of replica `i` of a multi-device learner: CPU replicas
    /// all use the CPU (one thread each); GPU replicas take consecutive
    /// ordinals from this one.
    pub fn replica(self, i: usize) -> DeviceSpec {
        match self {
            DeviceSpec::Cpu => DeviceSpec::Cpu,
            DeviceSpec::Cuda(n) => DeviceSpec::Cuda(n + i),
        }
    }

    /// A config error unless this build supports the device.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the `device` key and the rebuild
    /// command.
    pub fn check_available(self) -> Result<(), ConfigError> {
        if self.available_in_build() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            key: "device".into(),
            message: format!(
                "\"{self}\" needs CUDA, but this rlx was built without it; rebuild with \
                 `cargo build --release --features cuda` (see the book's \"Building with CUDA\" page) or use \"cpu\""
            ),
        })
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown device {s:?}: expected \"cpu\", \"cuda\" or \"cuda:N\"");
        match s {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            _ => match s.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceSpec::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

/// Opens CUDA device `ordinal` with `seed` for dfdx's random initializers.
///
/// # Errors
/// [`BuildError::Unsupported`] if the device cannot be opened: no driver
/// or GPU, or no such ordinal. cudarc 0.9 panics on those instead of
/// returning an error, so the panic is caught here and reported.
#[cfg(feature = "cuda")]
pub fn open_cuda(ordinal: usize, seed: u64) -> Result<dfdx::prelude::Cuda, crate::BuildError> {
    use crate::BuildError;
    let opened = std::panic::catch_unwind(|| dfdx::prelude::Cuda::try_build(ordinal, seed));
    match opened {
        Ok(Ok(dev)) => Ok(dev),
        Ok(Err(e)) => Err(BuildError::Unsupported(format!("cannot open CUDA device cuda:{ordinal}: {e:?}"))),
        Err(_) => Err(BuildError::Unsupported(format!(
            "cannot open CUDA device cuda:{ordinal}: no CUDA driver or no such GPU (see the message above)"
        ))),
    }
}

impl Serialize for DeviceSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (text, spec) in [("cpu", DeviceSpec::Cpu), ("cuda", DeviceSpec::Cuda(0)), ("cuda:3", DeviceSpec::Cuda(3))] {
            assert_eq!(text.parse::<DeviceSpec>().unwrap(), spec);
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<DeviceSpec>(&json).unwrap(), spec);
        }
        for bad in ["tpu", "cuda:", "cuda:x", "CPU "] {
            let err = bad.parse::<DeviceSpec>().unwrap_err();
            assert!(err.contains("expected \"cpu\""), "{err}");
        }
        assert_eq!(DeviceSpec::Cuda(1).replica(2), DeviceSpec::Cuda(3));
        assert_eq!(DeviceSpec::Cpu.replica(2), DeviceSpec::Cpu);
    }

    #[test]
    fn cuda_without_the_feature_is_a_config_error() {
        assert!(DeviceSpec::Cpu.check_available().is_ok());
        let result = DeviceSpec::Cuda(0).check_available();
        if cfg!(feature = "cuda") {
            assert!(result.is_ok());
        } else {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("device") && err.contains("--features cuda"), "{err}");
        }
    }
}
