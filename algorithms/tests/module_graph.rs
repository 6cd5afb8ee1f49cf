//! The algorithms crate's import circles, held to a shrinking list.
//!
//! A circle of imports means no module in it can be read, tested or moved
//! without all the others. Today two circles remain (issue 44 takes them
//! apart): the shared modules reach up into the algorithms (`sections`
//! names algorithm configs, `execution` calls `multi_agent`, which builds
//! through the `registry`, which imports every algorithm), and `model` and
//! `device` import each other. This test fails when
//!
//! - a module joins a circle that is not in [`KNOWN_CIRCLES`] (a new
//!   import circle), or
//! - a module of [`KNOWN_CIRCLES`] is in no circle any more: take it off
//!   the list, so that it cannot slip back in.
//!
//! The goal is an empty list, as in the framework's `module_graph.rs`.

use std::collections::BTreeSet;
use std::path::Path;

/// Each circle of today, as the set of modules in it.
const KNOWN_CIRCLES: &[&[&str]] = &[
    &[
        "a2c",
        "a3c",
        "actor_critic",
        "apex",
        "appo",
        "ars",
        "continuous",
        "ddpg",
        "dqn",
        "es",
        "evaluation",
        "evolution",
        "execution",
        "impala",
        "multi_agent",
        "pbt",
        "pg",
        "ppo",
        "registry",
        "sac",
        "sections",
        "self_play",
        "td3",
    ],
    &["device", "model"],
];

/// Functions `lib.rs` defines over a module: a use of `crate::build_trainer`
/// is a use of the registry.
const LIB_ITEMS: &[(&str, &str)] = &[
    ("ALGORITHMS", "registry"),
    ("build_trainer", "registry"),
    ("build_trainer_with_env", "registry"),
    ("config_docs", "registry"),
    ("default_config", "registry"),
    ("make_policy", "registry"),
    ("make_policy_for_env", "registry"),
    ("model_docs", "model"),
];

#[path = "../../framework/tests/support/module_graph.rs"]
mod graph;

#[test]
fn the_import_circles_are_the_known_ones_and_no_more() {
    let graph = graph::imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LIB_ITEMS);
    assert!(graph.contains_key("ppo") && graph["ppo"].contains("actor_critic"), "the parser sees imports: {graph:?}");
    let found = graph::circles(&graph);
    let known: BTreeSet<BTreeSet<String>> =
        KNOWN_CIRCLES.iter().map(|c| c.iter().map(|m| m.to_string()).collect()).collect();
    for circle in &found {
        let within = known.iter().any(|k| circle.is_subset(k));
        assert!(within, "a new import circle: {circle:?} (graph: {graph:?})");
    }
    let on_circles: BTreeSet<&String> = found.iter().flatten().collect();
    for module in known.iter().flatten() {
        assert!(
            on_circles.contains(module),
            "`{module}` is on no import circle any more: take it off KNOWN_CIRCLES in {}",
            file!()
        );
    }
}

#[test]
fn the_parser_finds_a_planted_circle() {
    let mut graph = graph::imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LIB_ITEMS);
    graph.get_mut("distributions").unwrap().insert("optim".into());
    graph.get_mut("optim").unwrap().insert("distributions".into());
    let found = graph::circles(&graph);
    assert!(found.iter().any(|c| c.contains("distributions") && c.contains("optim")), "{found:?}");
}
