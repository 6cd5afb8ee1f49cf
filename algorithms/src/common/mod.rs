//! The layer every algorithm stands on, and which imports none of them:
//! config sections, sampling (evaluators from an env and a policy maker),
//! the deep-policy core, update rules, action distributions, the fitted
//! Q of off-policy estimates, capabilities,
//! the build context, and the nested worker actor (ES's and AlphaZero's).
//!
//! Nothing here names an algorithm; the `module_graph` test fails if
//! anything here imports a family folder, `build`, the registry or PBT.

pub mod build_context;
pub mod capabilities;
pub mod deep_policy;
pub mod distributions;
pub mod fitted_q;
pub mod nested_worker;
pub mod sampling;
pub mod sections;
pub mod update_rules;
