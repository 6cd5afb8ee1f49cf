//! Networks built at run time from the env's spaces and the `model` config
//! key.
//!
//! Every deep algorithm's config has a `model` key with RLlib's names
//! ([`ModelConfig`]). What network an env gets follows its observation
//! space ([`Torso`]):
//!
//! | observation space | network in front of the heads |
//! |---|---|
//! | `Box` of rank 1 or 2 | fully connected layers `fcnet_hiddens` with `fcnet_activation` |
//! | `Box` of rank 3 (height × width × channels) | convolutions `conv_filters` (chosen for the image size when `null`), flattened, then the fully connected layers |
//! | `Discrete`, `MultiDiscrete` | one-hot encoded, then the fully connected layers |
//! | `Dict` | each image entry through its own convolutions, the other entries encoded as above, joined, then the fully connected layers |
//! | any, with `custom_model` | the registered [`CustomNetwork`] |
//!
//! With `use_lstm` an [`Lstm`] of `lstm_cell_size` units follows ([`Body`]):
//! evaluators carry its state from step to step, and learners unroll
//! stored sequences of at most `max_seq_len` steps ([`sequences`]). The
//! algorithm puts its heads on top; all of it lives in one [`Params`].

mod cpu;
pub mod custom;
pub mod device;
#[cfg(test)]
pub(crate) mod grad_check;
mod host;
mod layers;
mod noisy;
mod params;
pub mod sequences;
mod tensors;
mod torso;

pub use cpu::tanh_approx;
pub(crate) use cpu::{side_by_side_pair, wide_loop};
pub use custom::{CustomInput, CustomModel, CustomNetwork};
pub use host::HostNet;
pub use layers::{Conv2d, Linear, Lstm};
pub use noisy::{Noise, NoisyLinear};
pub use params::{ParamId, Params};
pub use tensors::{Activation, ConvGeometry, Flat, Matrix, Taped};
pub use torso::{default_conv_filters, to_vec, Body, ConvStack, Input, Mlp, SeqLayout, TapeKind, Torso};

use rlx::config::{check, ConfigError};
use serde::{Deserialize, Serialize};

/// The `model` config key: the network a deep algorithm builds, in RLlib's
/// terms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Widths of the fully connected hidden layers (after the convolutions
    /// for image observations); `[]` for none.
    pub fcnet_hiddens: Vec<usize>,
    /// Nonlinearity of the fully connected layers: `"tanh"` or `"relu"`.
    pub fcnet_activation: Activation,
    /// Convolutions for image observations (a `Box` of rank 3, height ×
    /// width × channels), each `[out_channels, kernel, stride]` with a
    /// square kernel and no padding; `null` chooses by image size (one
    /// 16-filter 3×3 layer below 36 pixels a side, as in the MinAtar paper;
    /// the Nature DQN stack `[[32, 8, 4], [64, 4, 2], [64, 3, 1]]` from
    /// there, e.g. for 84×84 Atari frames); `[]` flattens the image into
    /// the fully connected layers.
    pub conv_filters: Option<Vec<[usize; 3]>>,
    /// Nonlinearity after each convolution: `"relu"` or `"tanh"`.
    pub conv_activation: Activation,
    /// Put an LSTM after the layers above; both the policy and the value
    /// heads read its output (PPO, A2C, A3C, PG, IMPALA and APPO).
    pub use_lstm: bool,
    /// Units of the LSTM.
    pub lstm_cell_size: usize,
    /// The longest sequence the learner unrolls the LSTM over (truncated
    /// backpropagation through time); longer trajectories are cut into
    /// pieces that start from the stored state.
    pub max_seq_len: usize,
    /// The value head shares the policy's hidden layers (one network with
    /// two heads) instead of having its own (always shared with
    /// `use_lstm`).
    pub vf_share_layers: bool,
    /// A network registered with
    /// `rlx_algorithms::model::custom::register_custom_model` to use in
    /// place of the fully connected and convolutional layers.
    pub custom_model: Option<String>,
    /// Options handed to the custom model's builder.
    pub custom_model_config: serde_json::Value,
    /// The starting log standard deviation of a Gaussian policy's actions
    /// (continuous actions of the actor-critic family; SB3's
    /// `log_std_init`). 0 starts every action dimension at a standard
    /// deviation of 1; rl-baselines3-zoo's MuJoCo settings start PPO at −2
    /// (0.14), which explores less at first.
    pub log_std_init: f64,
}

impl Default for ModelConfig {
    /// RLlib's defaults: two hidden layers of 64 `tanh` units.
    fn default() -> Self {
        Self {
            fcnet_hiddens: vec![64, 64],
            fcnet_activation: Activation::Tanh,
            conv_filters: None,
            conv_activation: Activation::Relu,
            use_lstm: false,
            lstm_cell_size: 256,
            max_seq_len: 20,
            vf_share_layers: false,
            custom_model: None,
            custom_model_config: serde_json::Value::Null,
            log_std_init: 0.0,
        }
    }
}

/// What of [`ModelConfig`] an algorithm can build.
#[derive(Clone, Copy, Debug)]
pub struct ModelSupport {
    /// The algorithm's name, for error messages.
    pub algorithm: &'static str,
    /// Convolutions on image observations.
    pub conv: bool,
    /// `use_lstm`.
    pub lstm: bool,
    /// `custom_model`.
    pub custom: bool,
    /// `log_std_init`: a Gaussian with a free log standard deviation.
    pub log_std: bool,
}

impl ModelSupport {
    /// Every part of `model`: the actor-critic family.
    pub const fn all(algorithm: &'static str) -> Self {
        Self { algorithm, conv: true, lstm: true, custom: true, log_std: true }
    }

    /// Fully connected layers only (the continuous-control and evolution
    /// algorithms' own networks).
    pub const fn mlp(algorithm: &'static str) -> Self {
        Self { algorithm, conv: false, lstm: false, custom: false, log_std: false }
    }
}

/// The algorithms with recurrent policies, for error messages.
pub const RECURRENT_ALGORITHMS: &str = "PPO, A2C, A3C, PG, IMPALA and APPO";

impl ModelConfig {
    /// The same network with `relu` hidden layers (the default of DQN,
    /// DDPG, TD3 and SAC, as in their papers).
    pub fn relu() -> Self {
        Self { fcnet_activation: Activation::Relu, ..Self::default() }
    }

    /// Range checks, and whether the algorithm builds what is asked for.
    /// Whether the model fits the env's spaces is checked when the policy
    /// is built ([`Torso::build`]).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the `model.…` key.
    pub fn validate(&self, support: ModelSupport) -> Result<(), ConfigError> {
        let hiddens = format!("{:?}", self.fcnet_hiddens);
        check("model.fcnet_hiddens", hiddens, self.fcnet_hiddens.iter().all(|&h| h > 0), "widths must be >= 1")?;
        if let Some(filters) = &self.conv_filters {
            let ok = filters.iter().all(|f| f.iter().all(|&x| x > 0));
            check("model.conv_filters", format!("{filters:?}"), ok, "out_channels, kernel and stride must be >= 1")?;
        }
        check("model.lstm_cell_size", self.lstm_cell_size, self.lstm_cell_size >= 1, "must be >= 1")?;
        check("model.max_seq_len", self.max_seq_len, self.max_seq_len >= 1, "must be >= 1")?;
        // exp(±20) is already 2e-9 or 5e8: beyond that is a typo, not a choice.
        let ok = self.log_std_init.is_finite() && self.log_std_init.abs() <= 20.0;
        check("model.log_std_init", self.log_std_init, ok, "must be a finite number in [-20, 20]")?;
        let unsupported = |key: &str, what: &str| ConfigError::Invalid {
            key: format!("model.{key}"),
            message: format!("{} {what}", support.algorithm),
        };
        if self.use_lstm && !support.lstm {
            return Err(unsupported(
                "use_lstm",
                &format!("has no recurrent policy; use_lstm works with {RECURRENT_ALGORITHMS}"),
            ));
        }
        if self.conv_filters.as_ref().is_some_and(|f| !f.is_empty()) && !support.conv {
            return Err(unsupported("conv_filters", "takes vector observations only (conv_filters: null or [])"));
        }
        if self.log_std_init != 0.0 && !support.log_std {
            return Err(unsupported(
                "log_std_init",
                "has no free log standard deviation (its policy is deterministic or computes the \
                 standard deviation from the observation); log_std_init works with PPO, A2C, A3C, PG, \
                 IMPALA and APPO on continuous actions",
            ));
        }
        if let Some(name) = &self.custom_model {
            if !support.custom {
                return Err(unsupported("custom_model", "cannot use a custom model"));
            }
            if custom::lookup(name).is_none() {
                let registered = custom::registered_custom_models();
                return Err(ConfigError::Invalid {
                    key: "model.custom_model".into(),
                    message: format!(
                        "no custom model `{name}` is registered (registered: {}); register it with \
                         rlx_algorithms::model::custom::register_custom_model before building the trainer",
                        if registered.is_empty() { "none".to_string() } else { registered.join(", ") }
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn support(lstm: bool) -> ModelSupport {
        ModelSupport { algorithm: "DQN", conv: true, lstm, custom: true, log_std: false }
    }

    #[test]
    fn validation_names_the_key() {
        let err = |cfg: ModelConfig, lstm| cfg.validate(support(lstm)).unwrap_err().to_string();
        assert!(ModelConfig::default().validate(support(false)).is_ok());
        assert!(
            err(ModelConfig { fcnet_hiddens: vec![64, 0], ..Default::default() }, true).contains("model.fcnet_hiddens")
        );
        let e = err(ModelConfig { conv_filters: Some(vec![[16, 0, 1]]), ..Default::default() }, true);
        assert!(e.contains("model.conv_filters"), "{e}");
        assert!(err(ModelConfig { max_seq_len: 0, ..Default::default() }, true).contains("model.max_seq_len"));
        let e = err(ModelConfig { use_lstm: true, ..Default::default() }, false);
        assert!(e.contains("model.use_lstm") && e.contains("DQN has no recurrent policy"), "{e}");
        let e = err(ModelConfig { log_std_init: f64::NAN, ..Default::default() }, true);
        assert!(e.contains("model.log_std_init"), "{e}");
        let e = err(ModelConfig { log_std_init: -2.0, ..Default::default() }, true);
        assert!(e.contains("model.log_std_init") && e.contains("DQN has no free log standard deviation"), "{e}");
        let e = err(ModelConfig { custom_model: Some("nope".into()), ..Default::default() }, true);
        assert!(e.contains("no custom model `nope` is registered"), "{e}");
    }

    #[test]
    fn bad_keys_and_values_are_config_errors() {
        use rlx::config::{merge_json, Validate};
        #[derive(Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        struct Holder {
            model: ModelConfig,
        }
        impl Default for Holder {
            fn default() -> Self {
                Self { model: ModelConfig::default() }
            }
        }
        impl Validate for Holder {
            fn validate(&self) -> Result<(), ConfigError> {
                self.model.validate(support(true))
            }
        }
        let err = |v| merge_json(&Holder::default(), &v).err().unwrap().to_string();
        let e = err(serde_json::json!({"model": {"fcnet_activation": "gelu"}}));
        assert!(e.contains("model.fcnet_activation") && e.contains("tanh"), "{e}");
        let e = err(serde_json::json!({"model": {"lstm_size": 8}}));
        assert!(e.contains("did you mean `lstm_cell_size`"), "{e}");
        let e = err(serde_json::json!({"model": {"conv_filters": [[16, [3, 3], 1]]}}));
        assert!(e.contains("model.conv_filters"), "{e}");
        let merged: Holder =
            merge_json(&Holder::default(), &serde_json::json!({"model": {"fcnet_hiddens": [8]}})).unwrap();
        assert_eq!(
            merged.model,
            ModelConfig { fcnet_hiddens: vec![8], ..Default::default() },
            "the rest stays default"
        );
    }
}
