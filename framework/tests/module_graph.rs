//! The framework's modules import each other in one direction: no circle of
//! imports, except the one pair that is one concept in two files (a
//! `VectorEnv` may step its copies in env shards, and the shards hold
//! vector envs). A circle would mean a module cannot be read, tested or
//! moved without the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The pairs allowed to import each other.
const ALLOWED: &[[&str; 2]] = &[["env_shards", "vector_env"]];

#[path = "support/module_graph.rs"]
mod graph;

fn imports() -> BTreeMap<String, BTreeSet<String>> {
    graph::imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[])
}

#[test]
fn framework_modules_import_each_other_in_one_direction() {
    let graph = imports();
    assert!(graph.len() > 20 && graph["evaluator"].contains("policy"), "the parser sees the imports: {graph:?}");
    let mut circles = BTreeSet::new();
    for m in graph.keys() {
        let from_m = graph::reachable(&graph, m);
        for other in graph.keys().filter(|o| *o > m && from_m.contains(*o)) {
            if graph::reachable(&graph, other).contains(m) && !ALLOWED.contains(&[m.as_str(), other.as_str()]) {
                circles.insert(format!("{m} <-> {other}"));
            }
        }
    }
    assert!(circles.is_empty(), "modules that reach each other through imports: {circles:?}");
}
