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

/// [`imports`] at file granularity, for a crate whose modules nest in
/// folders: each file is a module named by its path (`policy_gradient::ppo`;
/// a folder's `mod.rs` is the folder, `evolution`), and `crate::a::b::C`
/// names the longest module path it starts with (`a::b` if that is a file,
/// else `a`). Declaring a module (`pub mod x;`) is not a use of it.
pub fn nested_imports(src: &Path, lib_items: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    // Module → (its text, the module its `super::` names).
    let mut texts: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_str().unwrap().to_string()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
            parts.push(String::new()); // `super` of a folder's mod.rs is the folder's parent
        }
        if parts == ["lib"] {
            continue;
        }
        let parent = parts[..parts.len() - 1].join("::");
        let name = parts.iter().filter(|p| !p.is_empty()).cloned().collect::<Vec<_>>().join("::");
        let parent = if parts.last().is_some_and(String::is_empty) {
            parts[..parts.len().saturating_sub(2)].join("::")
        } else {
            parent
        };
        texts.insert(name, (std::fs::read_to_string(&path).unwrap(), parent));
    }
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (text, parent)) in &texts {
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            // `super::x` is `crate::<parent>::x`.
            let line = match parent.as_str() {
                "" => line.replace("super::", "crate::"),
                p => line.replace("super::", &format!("crate::{p}::")),
            };
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + 7..];
                // `crate::a::{b, c}` and `crate::{a, b}`: one path per item.
                let (prefix, items): (&str, Vec<&str>) = match rest.find('{') {
                    Some(open) if rest[..open].chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') => {
                        (&rest[..open], rest[open + 1..].split('}').next().unwrap().split(',').collect())
                    }
                    _ => ("", vec![rest]),
                };
                for item in items {
                    let path: String = format!("{prefix}{}", item.trim())
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                    let mut target = None;
                    for n in (1..=segments.len()).rev() {
                        let candidate = segments[..n].join("::");
                        if modules.contains(&candidate) {
                            target = Some(candidate);
                            break;
                        }
                    }
                    let target = match (target, segments.first()) {
                        (Some(t), _) => t,
                        (None, Some(first)) => match lib_items.iter().find(|(item, _)| item == first) {
                            Some((_, m)) => m.to_string(),
                            None => continue,
                        },
                        (None, None) => continue,
                    };
                    if target != *module {
                        deps.insert(target);
                    }
                }
            }
        }
    }
    graph
}

/// The graph of folders (a module's first path segment) that `graph`'s
/// files make: folder `a` depends on folder `b` if a file of `a` imports
/// one of `b`.
pub fn folders(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &String| m.split("::").next().unwrap().to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, deps) in graph {
        let entry = out.entry(top(module)).or_default();
        entry.extend(deps.iter().map(top).filter(|d| *d != top(module)));
    }
    out
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
