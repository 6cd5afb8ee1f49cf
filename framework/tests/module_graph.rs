//! The framework's modules import each other in one direction: no circle of
//! imports, except the one pair that is one concept in two files (a
//! `VectorEnv` may step its copies in env shards, and the shards hold
//! vector envs). A circle would mean a module cannot be read, tested or
//! moved without the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The pairs allowed to import each other.
const ALLOWED: &[[&str; 2]] = &[["env_shards", "vector_env"]];

/// Module → the framework modules its code (not its docs or tests) names
/// through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let rel = path.strip_prefix(&src).unwrap();
        let module = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = graph.entry(module.to_string()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if !name.is_empty() && name != module {
                    deps.insert(name);
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|deps| deps.retain(|d| modules.contains(d)));
    graph
}

/// The modules reachable from `from`.
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for d in &graph[&m] {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn framework_modules_import_each_other_in_one_direction() {
    let graph = imports();
    assert!(graph.len() > 20 && graph["evaluator"].contains("policy"), "the parser sees the imports: {graph:?}");
    let mut circles = BTreeSet::new();
    for m in graph.keys() {
        let from_m = reachable(&graph, m);
        for other in graph.keys().filter(|o| *o > m && from_m.contains(*o)) {
            if reachable(&graph, other).contains(m) && !ALLOWED.contains(&[m.as_str(), other.as_str()]) {
                circles.insert(format!("{m} <-> {other}"));
            }
        }
    }
    assert!(circles.is_empty(), "modules that reach each other through imports: {circles:?}");
}
