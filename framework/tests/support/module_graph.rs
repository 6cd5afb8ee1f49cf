#![allow(dead_code)] // each test uses its part
//! The import graph of a crate's modules, read from its source: what the
//! framework's and the algorithms crate's `module_graph.rs` tests share
//! (each includes this file with `#[path]`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules of the crate at `src` that its code (not its
/// comments or its tests) names through `crate::`, single
/// (`crate::dqn::X`) or grouped (`crate::{a, b}`). `lib_items` maps items
/// `lib.rs` defines to the module they front (`build_trainer` → `registry`).
pub fn imports(src: &Path, lib_items: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let rel = path.strip_prefix(src).unwrap();
        let module = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = graph.entry(module.to_string()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + 7..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap().split(',').collect(),
                    None => vec![rest],
                };
                for name in names {
                    let name: String =
                        name.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    let name = lib_items.iter().find(|(item, _)| *item == name).map_or(name.as_str(), |(_, m)| m);
                    if name != module {
                        deps.insert(name.to_string());
                    }
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|deps| deps.retain(|d| modules.contains(d)));
    graph
}

/// The modules reachable from `from`.
pub fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
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

/// The circles: for each module on one, the modules on a circle with it.
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<BTreeSet<String>> {
    let reach: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reachable(graph, m))).collect();
    graph
        .keys()
        .filter(|m| reach[m].contains(*m))
        .map(|m| reach[m].iter().filter(|o| reach[o].contains(m)).cloned().collect())
        .collect()
}
