//! The algorithms crate's layers, read from its source.
//!
//! ```text
//! registry, pbt                  the table of algorithms, and PBT over it
//!   build                        evaluation keys, multiagent, self-play
//!     policy_gradient  q_learning  off_policy  evolution  offline  search  model_based   (families)
//!       common                   sections, sampling, deep policy, update rules
//!         model, error           networks, devices; BuildError
//! ```
//!
//! A module imports only its own layer's modules and those below, never
//! in a circle. The tests fail on
//!
//! - any import circle between files (`policy_gradient::ppo`,
//!   `model::cpu`, ...), and
//! - an import upward: `common` or `model` naming a family, `build`, the
//!   registry or PBT; a family naming `build`, the registry or PBT; `build`
//!   naming the registry or PBT. A family may use another family's core
//!   module (below), never its algorithms' files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "../../framework/tests/support/module_graph.rs"]
mod graph;

/// Items `lib.rs` defines over a module: a use of `crate::build_trainer`
/// is a use of the registry.
const LIB_ITEMS: &[(&str, &str)] = &[
    ("ALGORITHMS", "registry"),
    ("build_trainer", "registry"),
    ("build_trainer_with_env", "registry"),
    ("build_trainer_placed", "registry"),
    ("build_trainer_with_mapping", "registry"),
    ("config_docs", "registry"),
    ("default_config", "registry"),
    ("make_policy", "registry"),
    ("make_policy_for_env", "registry"),
    ("model_docs", "model"),
];

/// Each folder's layer; a folder may import its own layer's and lower ones.
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("model", 0),
    ("common", 1),
    ("policy_gradient", 2),
    ("q_learning", 2),
    ("off_policy", 2),
    ("evolution", 2),
    ("offline", 2),
    ("search", 2),
    ("model_based", 2),
    ("build", 3),
    ("pbt", 4),
    ("registry", 4),
];

/// The family modules another family may use: each family's core.
const FAMILY_CORES: &[&str] =
    &["policy_gradient::actor_critic", "q_learning::dqn", "off_policy::core", "evolution", "offline::marwil"];

fn modules() -> BTreeMap<String, BTreeSet<String>> {
    graph::nested_imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LIB_ITEMS)
}

fn layer(module: &str) -> u8 {
    let folder = module.split("::").next().unwrap();
    LAYERS.iter().find(|(f, _)| *f == folder).unwrap_or_else(|| panic!("`{folder}` has no layer in LAYERS")).1
}

#[test]
fn no_file_is_on_an_import_circle() {
    let graph = modules();
    assert!(
        graph["policy_gradient::ppo"].contains("policy_gradient::actor_critic"),
        "the parser sees imports: {graph:?}"
    );
    let found = graph::circles(&graph);
    assert!(found.is_empty(), "import circles: {found:?}");
}

#[test]
fn every_import_goes_down_or_across_to_a_family_core() {
    let graph = modules();
    let family = |m: &str| layer(m) == 2;
    for (module, deps) in &graph {
        for dep in deps {
            let (from, to) = (layer(module), layer(dep));
            assert!(to <= from, "`{module}` imports `{dep}`, a layer above it");
            let other_family = family(module) && family(dep) && module.split("::").next() != dep.split("::").next();
            assert!(
                !other_family || FAMILY_CORES.contains(&dep.as_str()),
                "`{module}` imports `{dep}`, another family's algorithm rather than its core"
            );
        }
    }
}

#[test]
fn the_folders_form_no_circle() {
    let folders = graph::folders(&modules());
    let found = graph::circles(&folders);
    assert!(found.is_empty(), "folder circles: {found:?} ({folders:?})");
}

#[test]
fn the_parser_finds_a_planted_circle_and_an_upward_import() {
    let mut graph = modules();
    graph.get_mut("common::distributions").unwrap().insert("common::update_rules".into());
    graph.get_mut("common::update_rules").unwrap().insert("common::distributions".into());
    let found = graph::circles(&graph);
    assert!(
        found.iter().any(|c| c.contains("common::distributions") && c.contains("common::update_rules")),
        "{found:?}"
    );
    assert!(layer("common::sections") < layer("q_learning::dqn"), "sections naming DQN would be caught");
}
