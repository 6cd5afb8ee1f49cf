//! Typed configuration: JSON overrides merged over a config struct's
//! defaults, with errors that name the key.
//!
//! Every config in rlx is a plain struct with documented defaults, either
//! with `#[serde(deny_unknown_fields)]` or made of `#[serde(flatten)]`
//! sections (whose keys [`merge_json`] checks itself, as serde cannot
//! deny unknown keys through a flatten). [`merge_json`] overlays a user's JSON object on
//! the defaults and reports an unknown key together with the closest valid
//! one, a wrong type with the key's path, and (through [`Validate`]) an
//! out-of-range value with the allowed range. Nothing is silently rewritten.

use serde::de::{self, DeserializeOwned, Visitor};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Display;

/// A config value the user must fix.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A key the config does not have.
    #[error("unknown config key `{key}`{}; valid keys: {}", closest.as_ref().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default(), valid.join(", "))]
    UnknownKey {
        /// The unknown key (with its path, e.g. `restart.max_restarts`).
        key: String,
        /// The valid key closest to it, if any is close.
        closest: Option<String>,
        /// All valid keys at that level.
        valid: Vec<String>,
    },
    /// A value of the wrong type or form.
    #[error("config key `{key}`: {message}")]
    Invalid {
        /// The key's path.
        key: String,
        /// What serde expected.
        message: String,
    },
    /// A value outside its allowed range.
    #[error("config key `{key}` = {value} is out of range: {allowed}")]
    OutOfRange {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// The allowed range, e.g. `must be in (0, 1]`.
        allowed: String,
    },
    /// The overrides are not a JSON object, or not JSON at all.
    #[error("{0}")]
    Malformed(String),
}

/// Range checks a config runs after parsing.
pub trait Validate {
    /// Checks every value's range.
    ///
    /// # Errors
    /// The first [`ConfigError::OutOfRange`] found.
    fn validate(&self) -> Result<(), ConfigError>;
}

/// Merges a JSON object of overrides over `defaults` and parses the result
/// into `T`, then validates it.
///
/// # Errors
/// A [`ConfigError`] naming the first bad key.
///
/// # Examples
/// ```
/// use rlx::config::{merge_json, ConfigError, Validate};
/// #[derive(serde::Serialize, serde::Deserialize, Debug)]
/// #[serde(deny_unknown_fields)]
/// struct Cfg { num_workers: usize, lr: f64 }
/// impl Validate for Cfg {
///     fn validate(&self) -> Result<(), ConfigError> {
///         rlx::config::check("lr", self.lr, self.lr > 0.0, "must be > 0")
///     }
/// }
/// let defaults = Cfg { num_workers: 0, lr: 1e-3 };
/// let cfg: Cfg = merge_json(&defaults, &serde_json::json!({"num_workers": 2})).unwrap();
/// assert_eq!(cfg.num_workers, 2);
/// let err = merge_json(&defaults, &serde_json::json!({"num_wokers": 2})).unwrap_err();
/// assert!(err.to_string().contains("did you mean `num_workers`"));
/// ```
pub fn merge_json<T>(defaults: &T, overrides: &Value) -> Result<T, ConfigError>
where
    T: Serialize + DeserializeOwned + Validate,
{
    let overrides = match overrides {
        Value::Object(map) => map,
        Value::Null => return Ok(reparse(defaults)?),
        other => return Err(ConfigError::Malformed(format!("config must be a JSON object, got {other}"))),
    };
    let defaults = serde_json::to_value(defaults).map_err(|e| ConfigError::Malformed(e.to_string()))?;
    let mut merged = defaults.clone();
    let valid = valid_keys::<T>(&defaults);
    let obj = merged.as_object_mut().expect("configs serialize to JSON objects");
    for (key, value) in overrides {
        if !valid.is_empty() && !valid.iter().any(|v| v == key) {
            return Err(unknown_key(key, &valid));
        }
        match obj.get_mut(key) {
            Some(default) => deep_merge(default, value),
            None => {
                obj.insert(key.clone(), value.clone());
            }
        }
    }
    let cfg: T = match serde_path_to_error::deserialize(merged) {
        Ok(cfg) => cfg,
        Err(e) => return Err(bad_key::<T>(&defaults, overrides).unwrap_or_else(|| path_error(e))),
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The keys a config accepts: its struct's fields, or, for a config made
/// of `#[serde(flatten)]` sections (which serde reads as a map, so the
/// fields cannot be asked for), the keys its defaults serialize to: every
/// field serializes.
fn valid_keys<T: DeserializeOwned>(defaults: &Value) -> Vec<String> {
    let fields = field_names::<T>();
    if !fields.is_empty() {
        return fields;
    }
    defaults.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// The first override that fails to parse on its own over the defaults,
/// as an error naming it. A value inside a flattened section fails
/// without a path (serde buffers the section's keys before parsing them),
/// so this is how the error still names the key, down to the innermost
/// entry of a nested object that fails on its own.
fn bad_key<T: DeserializeOwned>(defaults: &Value, overrides: &serde_json::Map<String, Value>) -> Option<ConfigError> {
    let fails = |path: &[&str], value: &Value| {
        let mut one = defaults.clone();
        let mut slot = &mut one;
        for key in path {
            slot = slot.get_mut(*key)?;
        }
        deep_merge(slot, value);
        serde_path_to_error::deserialize::<_, T>(one).err()
    };
    let (key, value) = overrides.iter().find(|(k, v)| fails(&[k.as_str()], v).is_some())?;
    let mut path = vec![key.as_str()];
    let mut value = value;
    // Narrow down into objects while a single entry still fails.
    while let Value::Object(map) = value {
        let inner = map.iter().find(|(k, v)| {
            let mut p = path.clone();
            p.push(k.as_str());
            defaults.pointer(&format!("/{}", p.join("/"))).is_some() && fails(&p, v).is_some()
        });
        match inner {
            Some((k, v)) => {
                path.push(k.as_str());
                value = v;
            }
            None => break,
        }
    }
    let e = fails(&path, value)?;
    let lost = matches!(e.path().to_string().as_str(), "." | "");
    Some(if lost { path_error_at(&path.join("."), e) } else { path_error(e) })
}

/// [`path_error`] for an error whose path was lost, placed under `key`.
fn path_error_at(key: &str, e: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
    match path_error(e) {
        ConfigError::UnknownKey { key: inner, closest, valid } => {
            ConfigError::UnknownKey { key: format!("{key}.{inner}"), closest, valid }
        }
        ConfigError::Invalid { message, .. } => ConfigError::Invalid { key: key.to_string(), message },
        other => other,
    }
}

/// Parses a complete JSON config (no defaults), naming the bad key on error.
///
/// # Errors
/// A [`ConfigError`] naming the first bad key.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(path_error)
}

/// Overlays `value` on `base`: objects merge key by key (so
/// `{"restart": {"max_restarts": 1}}` keeps the other restart defaults),
/// anything else replaces.
pub fn deep_merge(base: &mut Value, value: &Value) {
    match (base, value) {
        (Value::Object(b), Value::Object(v)) => {
            for (k, x) in v {
                match b.get_mut(k) {
                    Some(slot) => deep_merge(slot, x),
                    None => {
                        b.insert(k.clone(), x.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn reparse<T: Serialize + DeserializeOwned + Validate>(t: &T) -> Result<T, ConfigError> {
    let cfg: T = from_value(serde_json::to_value(t).map_err(|e| ConfigError::Malformed(e.to_string()))?)?;
    cfg.validate()?;
    Ok(cfg)
}

fn path_error(e: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
    let path = e.path().to_string();
    let message = e.inner().to_string();
    // serde's own unknown-field message (nested structs) lists the valid keys.
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((key, tail)) = rest.split_once('`') {
            let valid: Vec<String> = tail.split('`').skip(1).step_by(2).map(str::to_string).collect();
            // serde_path_to_error's path may or may not end with the key already.
            let full = if path == "." || path.is_empty() {
                key.to_string()
            } else if path == key || path.ends_with(&format!(".{key}")) {
                path.clone()
            } else {
                format!("{path}.{key}")
            };
            let mut err = unknown_key(key, &valid);
            if let ConfigError::UnknownKey { key, .. } = &mut err {
                *key = full;
            }
            return err;
        }
    }
    ConfigError::Invalid { key: path, message }
}

/// Refuses the first top-level key of `overrides` (a JSON object; anything
/// else passes) that is not in `valid`, naming the closest valid key and
/// the whole list.
///
/// # Errors
/// [`ConfigError::UnknownKey`].
pub fn check_keys(overrides: &Value, valid: &[String]) -> Result<(), ConfigError> {
    match overrides.as_object().and_then(|map| map.keys().find(|k| !valid.contains(k))) {
        Some(key) => Err(unknown_key(key, valid)),
        None => Ok(()),
    }
}

fn unknown_key(key: &str, valid: &[String]) -> ConfigError {
    ConfigError::UnknownKey {
        key: key.to_string(),
        closest: closest(key, valid.iter().map(String::as_str)),
        valid: valid.to_vec(),
    }
}

/// The candidate closest to `word` by edit distance, if reasonably close.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest_n(word, candidates, 1).into_iter().next()
}

/// Up to `n` candidates close to `word`, best first.
pub fn closest_n<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>, n: usize) -> Vec<String> {
    let lower = word.to_lowercase();
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .map(|c| (strsim::normalized_damerau_levenshtein(&lower, &c.to_lowercase()), c))
        .filter(|(s, c)| *s >= 0.5 || c.to_lowercase().contains(&lower) || lower.contains(&c.to_lowercase()))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(n).map(|(_, c)| c.to_string()).collect()
}

/// Returns `Ok(())` if `ok`, else an [`ConfigError::OutOfRange`] for `key`.
///
/// # Errors
/// When `ok` is false.
pub fn check(key: &str, value: impl Display, ok: bool, allowed: &str) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange { key: key.to_string(), value: value.to_string(), allowed: allowed.to_string() })
    }
}

/// Checks a count that sizes memory: it must be in `[min, max]`, where
/// `max` is far above what a real run uses, so that a typo (`1e8`) is an
/// error naming the key and the bound instead of minutes of allocation.
///
/// # Errors
/// An [`ConfigError::OutOfRange`] naming `key` and the range.
pub fn check_count(key: &str, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    check(key, value, (min..=max).contains(&value), &format!("must be in [{min}, {max}]"))
}

/// The field names of a struct that derives `Deserialize`, read by asking
/// serde which fields it would accept. Empty for non-structs.
pub fn field_names<T: DeserializeOwned>() -> Vec<String> {
    struct Introspect<'a>(&'a mut Vec<&'static str>);
    impl<'de> de::Deserializer<'de> for Introspect<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("introspection only"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.extend_from_slice(fields);
            Err(de::Error::custom("introspection only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields = Vec::new();
    let _ = T::deserialize(Introspect(&mut fields));
    fields.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        max_restarts: usize,
        window_s: f64,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Cfg {
        num_workers: usize,
        lr: f64,
        restart: Inner,
    }

    impl Validate for Cfg {
        fn validate(&self) -> Result<(), ConfigError> {
            check("lr", self.lr, self.lr > 0.0, "must be > 0")
        }
    }

    fn defaults() -> Cfg {
        Cfg { num_workers: 0, lr: 0.1, restart: Inner { max_restarts: 3, window_s: 60.0 } }
    }

    #[test]
    fn overrides_merge_over_defaults() {
        let cfg = merge_json(&defaults(), &json!({"lr": 0.5, "restart": {"max_restarts": 1}})).unwrap();
        assert_eq!(cfg, Cfg { num_workers: 0, lr: 0.5, restart: Inner { max_restarts: 1, window_s: 60.0 } });
        assert_eq!(merge_json(&defaults(), &Value::Null).unwrap(), defaults());
    }

    #[test]
    fn unknown_key_names_closest() {
        let err = merge_json(&defaults(), &json!({"num_wrokers": 2})).unwrap_err();
        match &err {
            ConfigError::UnknownKey { key, closest, .. } => {
                assert_eq!(key, "num_wrokers");
                assert_eq!(closest.as_deref(), Some("num_workers"));
            }
            other => panic!("{other:?}"),
        }
        let err = merge_json(&defaults(), &json!({"restart": {"max_restart": 2}})).unwrap_err().to_string();
        assert!(err.contains("restart.max_restart") && err.contains("max_restarts"), "{err}");
    }

    /// A config made of flattened sections, as the algorithms' are.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Section {
        num_workers: usize,
        restart: Inner,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Sectioned {
        #[serde(flatten)]
        sampling: Section,
        lr: f64,
    }

    impl Validate for Sectioned {
        fn validate(&self) -> Result<(), ConfigError> {
            Ok(())
        }
    }

    #[test]
    fn flattened_sections_take_flat_keys_and_errors_still_name_them() {
        let d = Sectioned { sampling: Section { num_workers: 1, restart: defaults().restart }, lr: 0.1 };
        let cfg = merge_json(&d, &json!({"num_workers": 3, "restart": {"window_s": 5.0}, "lr": 0.2})).unwrap();
        assert_eq!((cfg.sampling.num_workers, cfg.sampling.restart.window_s, cfg.lr), (3, 5.0, 0.2));
        assert_eq!(serde_json::to_value(&cfg).unwrap()["num_workers"], 3, "serialized flat");
        let err = |v: Value| merge_json(&d, &v).unwrap_err().to_string();
        let e = err(json!({"num_wokers": 2}));
        assert!(e.contains("`num_wokers`") && e.contains("did you mean `num_workers`"), "{e}");
        let e = err(json!({"lr": 0.2, "num_workers": "two"}));
        assert!(e.starts_with("config key `num_workers`: invalid type"), "{e}");
        let e = err(json!({"restart": {"window_s": "x"}}));
        assert!(e.starts_with("config key `restart.window_s`: invalid type"), "{e}");
        let e = err(json!({"restart": {"max_restart": 1}}));
        assert!(e.contains("`restart.max_restart`") && e.contains("did you mean `max_restarts`"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let err = merge_json(&defaults(), &json!({"num_workers": "two"})).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid { key, .. } if key == "num_workers"), "{err}");
        let err = merge_json(&defaults(), &json!({"num_workers": -1})).unwrap_err();
        assert!(err.to_string().contains("num_workers"), "{err}");
    }

    #[test]
    fn out_of_range_names_key_and_range() {
        let err = merge_json(&defaults(), &json!({"lr": -1.0})).unwrap_err().to_string();
        assert!(err.contains("`lr`") && err.contains("must be > 0"), "{err}");
    }

    #[test]
    fn not_an_object() {
        assert!(matches!(merge_json(&defaults(), &json!([1])), Err(ConfigError::Malformed(_))));
    }

    #[test]
    fn field_names_reads_serde_fields() {
        assert_eq!(field_names::<Cfg>(), vec!["num_workers", "lr", "restart"]);
    }
}
