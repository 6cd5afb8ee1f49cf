//! Search spaces: the values a hyperparameter may take, one type for PBT's
//! `hyperparam_mutations` and for `rlx tune`'s search domains.
//!
//! Which do I want?
//! - A number in an interval: a [`Range`], written `{"min": a, "max": b,
//!   "log": true}` in `hyperparam_mutations`, or in Ray Tune's words
//!   `{"uniform": [a, b]}` and `{"loguniform": [a, b]}` (in a tune search
//!   space, and in `hyperparam_mutations` too).
//! - One value of a list drawn per trial: [`Domain::Choice`],
//!   `{"choice": [...]}`.
//! - Every value of a list, each in its own trials: [`Domain::Grid`],
//!   `{"grid_search": [...]}`.
//!
//! PBT explores ranges only: it multiplies a value by 0.8 or 1.2 and
//! clamps it, which a list of choices has no meaning for, so its config
//! check refuses `choice` and `grid_search`, naming the key.
//!
//! The two draw from a range differently, and each keeps its way, so that
//! a seed gives the values it always gave: PBT from the closed range
//! `[min, max]`, which may be one point ([`Range::sample`]); the tuner,
//! as Ray Tune does, from `[low, high)` ([`Domain::sample`]).

use rand::Rng;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::fmt;

/// The keys that make a config object a search domain (Ray Tune's names).
pub const DOMAINS: &[&str] = &["grid_search", "choice", "uniform", "loguniform"];

/// The fields of a [`Range`] written out.
const RANGE_FIELDS: &[&str] = &["min", "max", "log"];

/// One search domain: what a hyperparameter may take.
///
/// In JSON, a range is `{"min", "max", "log"}` or `{"uniform": [low,
/// high]}` / `{"loguniform": [low, high]}`; the others `{"choice": [...]}`
/// and `{"grid_search": [...]}`. It serializes as it is written, a range
/// as `{"min", "max", "log"}`.
#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    /// Every value, each in its own trials (`grid_search`).
    Grid(Vec<Value>),
    /// One value drawn uniformly (`choice`).
    Choice(Vec<Value>),
    /// A number in an interval (`uniform`, `loguniform`, `{min, max, log}`).
    Range(Range),
}

/// A numeric interval, drawn from uniformly or log-uniformly.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, documented::DocumentedFields)]
pub struct Range {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Draw log-uniformly (for scale parameters such as learning rates;
    /// needs `min` > 0) rather than uniformly.
    pub log: bool,
}

impl Range {
    /// A value drawn from `[min, max]`, log-uniformly with `log`: PBT's
    /// starting values and resamples.
    pub fn sample(&self, rng: &mut (impl Rng + ?Sized)) -> f64 {
        let Range { min, max, log } = *self;
        let u: f64 = rng.gen();
        if log {
            (min.ln() + u * (max.ln() - min.ln())).exp()
        } else {
            min + u * (max - min)
        }
    }
}

impl From<Range> for Domain {
    fn from(range: Range) -> Self {
        Domain::Range(range)
    }
}

impl Domain {
    /// The domain an object holds, written in Ray Tune's syntax: `None` if
    /// none of its keys is one of [`DOMAINS`].
    ///
    /// # Errors
    /// A domain key beside other keys, or bad arguments (see
    /// [`parse`](Self::parse)); the message names no path.
    pub fn from_object(map: &Map<String, Value>) -> Result<Option<Domain>, String> {
        let Some(kind) = map.keys().find(|k| DOMAINS.contains(&k.as_str())) else { return Ok(None) };
        if map.len() != 1 {
            return Err(format!("`{kind}` must be the only key of its object, got {}", Value::Object(map.clone())));
        }
        Domain::parse(kind, &map[kind]).map(Some)
    }

    /// The domain `{kind: args}`, `kind` one of [`DOMAINS`].
    ///
    /// # Errors
    /// An unknown kind; a list of values that is empty or not a list; bounds
    /// that are not two numbers with `low < high` (and `0 < low` for
    /// `loguniform`).
    pub fn parse(kind: &str, args: &Value) -> Result<Domain, String> {
        let values = || match args {
            Value::Array(v) if !v.is_empty() => Ok(v.clone()),
            other => Err(format!("`{kind}` takes a non-empty list of values, got {other}")),
        };
        let bounds = || -> Result<(f64, f64), String> {
            let pair = match args.as_array().map(|v| v.iter().map(Value::as_f64).collect::<Vec<_>>()) {
                Some(v) if v.len() == 2 && v.iter().all(Option::is_some) => (v[0].unwrap(), v[1].unwrap()),
                _ => return Err(format!("`{kind}` takes two numbers [low, high], got {args}")),
            };
            if !(pair.0 < pair.1 && (pair.1 - pair.0).is_finite()) {
                return Err(format!("`{kind}` needs low < high, got {args}"));
            }
            Ok(pair)
        };
        Ok(match kind {
            "grid_search" => Domain::Grid(values()?),
            "choice" => Domain::Choice(values()?),
            "uniform" => {
                let (min, max) = bounds()?;
                Domain::Range(Range { min, max, log: false })
            }
            "loguniform" => {
                let (min, max) = bounds()?;
                if min <= 0.0 {
                    return Err(format!("`loguniform` needs 0 < low < high, got {args}"));
                }
                Domain::Range(Range { min, max, log: true })
            }
            other => return Err(format!("`{other}` is not a search domain; the domains are {}", DOMAINS.join(", "))),
        })
    }

    /// The range, if this is one.
    pub fn range(&self) -> Option<&Range> {
        match self {
            Domain::Range(r) => Some(r),
            _ => None,
        }
    }

    /// The key it is written with: `grid_search`, `choice`, or `uniform` /
    /// `loguniform` for a range.
    pub fn kind(&self) -> &'static str {
        match self {
            Domain::Grid(_) => "grid_search",
            Domain::Choice(_) => "choice",
            Domain::Range(Range { log: false, .. }) => "uniform",
            Domain::Range(Range { log: true, .. }) => "loguniform",
        }
    }

    /// One random value, as a tune trial draws it: a choice's or a grid's
    /// values uniformly; a range from `[min, max)`, log-uniformly with
    /// `log` (a range of one point gives `min`). `rlx tune` enumerates
    /// grids rather than drawing from them.
    pub fn sample(&self, rng: &mut (impl Rng + ?Sized)) -> Value {
        match self {
            Domain::Grid(values) | Domain::Choice(values) => values[rng.gen_range(0..values.len())].clone(),
            Domain::Range(Range { min, max, .. }) if min >= max => Value::from(*min),
            Domain::Range(Range { min, max, log: false }) => Value::from(rng.gen_range(*min..*max)),
            Domain::Range(Range { min, max, log: true }) => Value::from(rng.gen_range(min.ln()..max.ln()).exp()),
        }
    }
}

impl Serialize for Domain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Domain::Range(r) => r.serialize(s),
            Domain::Grid(values) | Domain::Choice(values) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry(self.kind(), values)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Domain {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DomainVisitor)
    }
}

/// A [`Range`] reads as a [`Domain`] that is a range.
impl<'de> Deserialize<'de> for Range {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Domain::deserialize(d)? {
            Domain::Range(r) => Ok(r),
            other => Err(de::Error::custom(format!("`{}` is not a range {{min, max, log}}", other.kind()))),
        }
    }
}

/// Reads `{min, max, log}` field by field, as a derived struct would (so an
/// error names the field: `hyperparam_mutations.lr.min`, an unknown field
/// lists `min`, `max`, `log`), and Ray Tune's `{kind: args}` objects.
struct DomainVisitor;

impl<'de> Visitor<'de> for DomainVisitor {
    type Value = Domain;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a range {min, max, log} or a search domain ({uniform: [low, high]}, ...)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Domain, A::Error> {
        let (mut min, mut max, mut log) = (None, None, None);
        let mut domains = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "min" if min.is_some() => return Err(de::Error::duplicate_field("min")),
                "max" if max.is_some() => return Err(de::Error::duplicate_field("max")),
                "log" if log.is_some() => return Err(de::Error::duplicate_field("log")),
                "min" => min = Some(map.next_value::<f64>()?),
                "max" => max = Some(map.next_value::<f64>()?),
                "log" => log = Some(map.next_value::<bool>()?),
                kind if DOMAINS.contains(&kind) => {
                    let args = map.next_value::<Value>()?;
                    domains.insert(key, args);
                }
                other => return Err(de::Error::unknown_field(other, RANGE_FIELDS)),
            }
        }
        if !domains.is_empty() {
            // Any range field written beside it is an error that shows it.
            for (field, value) in
                [("min", min.map(|x| json!(x))), ("max", max.map(|x| json!(x))), ("log", log.map(Value::from))]
            {
                if let Some(value) = value {
                    domains.insert(field.into(), value);
                }
            }
            let domain = Domain::from_object(&domains).map_err(de::Error::custom)?;
            return domain.ok_or_else(|| de::Error::custom("not a search domain"));
        }
        let min = min.ok_or_else(|| de::Error::missing_field("min"))?;
        let max = max.ok_or_else(|| de::Error::missing_field("max"))?;
        Ok(Domain::Range(Range { min, max, log: log.unwrap_or(false) }))
    }

    /// `[min, max]` or `[min, max, log]`: the list form serde's derived
    /// struct took, still read.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Domain, A::Error> {
        let min = seq.next_element::<f64>()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let max = seq.next_element::<f64>()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
        let log = seq.next_element::<bool>()?.unwrap_or(false);
        Ok(Domain::Range(Range { min, max, log }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn read(v: Value) -> Result<Domain, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn both_syntaxes_read_and_a_range_writes_min_max_log() {
        let r = Range { min: 1e-4, max: 1e-2, log: true };
        assert_eq!(read(json!({"min": 1e-4, "max": 1e-2, "log": true})), Ok(Domain::Range(r)));
        assert_eq!(read(json!({"loguniform": [1e-4, 1e-2]})), Ok(Domain::Range(r)));
        assert_eq!(read(json!({"min": 0.1, "max": 2})), Ok(Domain::Range(Range { min: 0.1, max: 2.0, log: false })));
        assert_eq!(read(json!({"uniform": [0.1, 2]})), read(json!({"min": 0.1, "max": 2})));
        assert_eq!(read(json!({"choice": [1, "a"]})), Ok(Domain::Choice(vec![json!(1), json!("a")])));
        assert_eq!(read(json!({"grid_search": [[64]]})), Ok(Domain::Grid(vec![json!([64])])));
        assert_eq!(serde_json::to_value(Domain::Range(r)).unwrap(), json!({"min": 1e-4, "max": 1e-2, "log": true}));
        assert_eq!(serde_json::to_value(Domain::Choice(vec![json!(1)])).unwrap(), json!({"choice": [1]}));
        let range: Range = serde_json::from_value(json!({"uniform": [0.0, 1.0]})).unwrap();
        assert_eq!(range, Range { min: 0.0, max: 1.0, log: false });
        let err = serde_json::from_value::<Range>(json!({"choice": [1]})).unwrap_err().to_string();
        assert!(err.contains("`choice` is not a range"), "{err}");
    }

    #[test]
    fn bad_domains_say_what_is_wrong() {
        for (v, says) in [
            (json!({"min": 0.1, "mx": 1}), "unknown field `mx`, expected one of `min`, `max`, `log`"),
            (json!({"min": 0.1}), "missing field `max`"),
            (json!({"min": "a", "max": 1}), "invalid type: string \"a\", expected f64"),
            (json!({"loguniform": [0, 1]}), "`loguniform` needs 0 < low < high"),
            (json!({"uniform": [2, 1]}), "`uniform` needs low < high"),
            (json!({"uniform": [1]}), "`uniform` takes two numbers [low, high]"),
            (json!({"choice": []}), "`choice` takes a non-empty list of values"),
            (json!({"uniform": [0, 1], "log": true}), "`uniform` must be the only key of its object"),
            (json!(0.1), "expected a range {min, max, log} or a search domain"),
        ] {
            let err = read(v).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn pbt_draws_from_the_closed_range_and_tune_from_the_half_open_one() {
        let r = Range { min: 1e-4, max: 1e-2, log: true };
        let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(3), ChaCha8Rng::seed_from_u64(3));
        for _ in 0..100 {
            let x = r.sample(&mut a);
            assert!((1e-4..=1e-2).contains(&x));
            let y = Domain::Range(r).sample(&mut b).as_f64().unwrap();
            assert!((1e-4..1e-2).contains(&y));
        }
        let point = Range { min: 0.5, max: 0.5, log: false };
        assert_eq!(point.sample(&mut a), 0.5);
        assert_eq!(Domain::Range(point).sample(&mut a), json!(0.5));
    }
}
