//! Search spaces: config values that are `grid_search`, `choice`,
//! `uniform` or `loguniform` (Ray Tune's names), expanded into the trials'
//! configs. The domains are PBT's search-space type
//! ([`rlx_algorithms::pbt::space`]), which also reads them.
//!
//! Every `grid_search` multiplies the trials (the grid's full product);
//! `num_samples` repeats the whole grid, and each repeat draws its own
//! value of every random domain. Ray Tune orders trials the same way:
//! sample by sample, the grid inside.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::config::ConfigError;
use rlx_algorithms::pbt::space::{Domain, DOMAINS};
use serde_json::{Map, Value};

/// A trial's config and the values the search chose for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// The config with every domain replaced by a value.
    pub config: Value,
    /// `(path, value)` of each domain, e.g. `("lr", 0.001)`,
    /// `("model/fcnet_hiddens", [64, 64])`.
    pub params: Vec<(String, Value)>,
}

/// The trials of `config`: `num_samples` repeats of the grid's product,
/// random domains drawn from `seed`.
///
/// # Errors
/// A domain with bad bounds or no values, naming its path.
pub fn expand(config: &Value, num_samples: usize, seed: u64) -> Result<Vec<Variant>, ConfigError> {
    let mut domains = Vec::new();
    find(config, &mut Vec::new(), &mut domains)?;
    let grids: Vec<&[Value]> = domains
        .iter()
        .filter_map(|(_, d)| match d {
            Domain::Grid(values) => Some(&values[..]),
            _ => None,
        })
        .collect();
    let points = grids.iter().try_fold(1usize, |n, g| n.checked_mul(g.len()));
    let trials = points.and_then(|p| p.checked_mul(num_samples)).filter(|&n| n <= MAX_TRIALS);
    let (Some(points), Some(_)) = (points, trials) else {
        return Err(ConfigError::Malformed(format!(
            "the search space has more than {MAX_TRIALS} trials (num_samples {num_samples} times the grids' product)"
        )));
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(num_samples * points);
    for _ in 0..num_samples {
        for point in 0..points {
            // The grid point's index in each grid, the first grid slowest.
            let mut rest = point;
            let mut picks = vec![0; grids.len()];
            for (g, pick) in grids.iter().zip(picks.iter_mut()).rev() {
                *pick = rest % g.len();
                rest /= g.len();
            }
            let mut config = config.clone();
            let mut params = Vec::new();
            let mut next_grid = picks.iter();
            for (path, domain) in &domains {
                let value = match domain {
                    Domain::Grid(values) => values[*next_grid.next().expect("one pick per grid")].clone(),
                    random => random.sample(&mut rng),
                };
                set(&mut config, path, value.clone());
                params.push((path.join("/"), value));
            }
            out.push(Variant { config, params });
        }
    }
    Ok(out)
}

/// Collects the domains under `value`, depth first, keys in order.
fn find(value: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Domain)>) -> Result<(), ConfigError> {
    let Value::Object(map) = value else { return Ok(()) };
    if let Some(domain) = domain(map, path)? {
        out.push((path.clone(), domain));
        return Ok(());
    }
    for (key, child) in map {
        path.push(key.clone());
        find(child, path, out)?;
        path.pop();
    }
    Ok(())
}

/// The most trials a search may have: far more than a machine or a small
/// cluster runs, low enough that a typo cannot allocate for minutes.
pub const MAX_TRIALS: usize = 100_000;

/// The domain `map` holds, if it holds one ([`Domain::from_object`]), with
/// errors naming its path.
fn domain(map: &Map<String, Value>, path: &[String]) -> Result<Option<Domain>, ConfigError> {
    let bad = |message: String| ConfigError::Invalid { key: format!("config.{}", path.join(".")), message };
    if let Some(domain) = Domain::from_object(map).map_err(bad)? {
        return Ok(Some(domain));
    }
    // A lone key a typo away from a domain (`gridsearch`), holding a list
    // as domains do, is one; not in the maps an env or a custom model
    // reads, whose keys are theirs.
    let free_form = path.iter().any(|k| k == "env_config" || k == "custom_model_config");
    let lone_list = map.len() == 1 && map.values().all(Value::is_array);
    let typo = map.keys().next().filter(|_| lone_list && !free_form).and_then(|key| {
        let near = DOMAINS.iter().find(|d| strsim::damerau_levenshtein(&key.to_lowercase(), d) <= 2)?;
        Some((key, near))
    });
    match typo {
        Some((key, near)) => Err(bad(format!(
            "`{key}` is not a search domain (did you mean `{near}`?); the domains are {}",
            DOMAINS.join(", ")
        ))),
        None => Ok(None),
    }
}

fn set(config: &mut Value, path: &[String], value: Value) {
    let mut slot = config;
    for key in path {
        slot = &mut slot[key.as_str()];
    }
    *slot = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grids_multiply_samples_repeat_and_random_domains_stay_in_bounds() {
        let config = json!({
            "lr": {"loguniform": [1e-4, 1e-2]},
            "num_sgd_iter": {"grid_search": [5, 10]},
            "model": {"fcnet_hiddens": {"grid_search": [[64], [64, 64], [256]]}},
            "gamma": {"uniform": [0.9, 0.99]},
            "train_batch_size": {"choice": [1000, 2000]},
            "seed": 3,
        });
        let trials = expand(&config, 2, 7).unwrap();
        assert_eq!(trials.len(), 2 * 2 * 3);
        // The grid's whole product in each sample, in the same order.
        let grid: Vec<(Value, Value)> = trials
            .iter()
            .map(|t| (t.config["num_sgd_iter"].clone(), t.config["model"]["fcnet_hiddens"].clone()))
            .collect();
        assert_eq!(grid[..6], grid[6..]);
        for n in [5, 10] {
            for h in [json!([64]), json!([64, 64]), json!([256])] {
                assert_eq!(grid[..6].iter().filter(|g| **g == (json!(n), h.clone())).count(), 1);
            }
        }
        for t in &trials {
            let lr = t.config["lr"].as_f64().unwrap();
            let gamma = t.config["gamma"].as_f64().unwrap();
            assert!((1e-4..1e-2).contains(&lr) && (0.9..0.99).contains(&gamma), "{}", t.config);
            assert!([1000, 2000].contains(&t.config["train_batch_size"].as_i64().unwrap()));
            assert_eq!(t.config["seed"], 3);
            let mut names: Vec<&str> = t.params.iter().map(|p| p.0.as_str()).collect();
            names.sort_unstable();
            assert_eq!(names, ["gamma", "lr", "model/fcnet_hiddens", "num_sgd_iter", "train_batch_size"]);
        }
        // Random draws differ between trials and repeat with the seed.
        assert_ne!(trials[0].config["lr"], trials[1].config["lr"]);
        assert_eq!(expand(&config, 2, 7).unwrap(), trials);
        assert_eq!(expand(&json!({"lr": 0.1}), 3, 0).unwrap().len(), 3);
    }

    #[test]
    fn bad_domains_name_their_path() {
        for (config, says) in [
            (json!({"lr": {"loguniform": [0, 1]}}), "`config.lr`: `loguniform` needs 0 < low < high"),
            (json!({"lr": {"uniform": [2, 1]}}), "`config.lr`: `uniform` needs low < high"),
            (json!({"lr": {"uniform": [1]}}), "two numbers"),
            (
                json!({"model": {"fcnet_hiddens": {"choice": []}}}),
                "`config.model.fcnet_hiddens`: `choice` takes a non-empty list",
            ),
            (json!({"lr": {"grid_search": [1], "x": 2}}), "must be the only key"),
            (json!({"lr": {"uniform": [-1e308, 1e308]}}), "needs low < high"),
            (
                json!({"a": {"grid_search": vec![0; 1000]}, "b": {"grid_search": vec![0; 1000]}}),
                "more than 100000 trials",
            ),
        ] {
            let err = expand(&config, 1, 0).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}
