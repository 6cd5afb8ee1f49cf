//! What shared code must know of an algorithm ([`Capabilities`]), stated
//! once in its registry entry.

/// What shared code must know of an algorithm, read from here and never
/// from its name, so that a new algorithm states what it does in its
/// registry entry and nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// It takes the evaluation keys (`evaluation_interval`, ...) and
    /// `multiagent`. Not ES and ARS, whose policies keep observation
    /// statistics in their state (not in the weights an evaluation
    /// copies), nor PBT, which trains several trainers.
    pub evaluates: bool,
    /// It trains multi-agent envs and several policies.
    pub multi_agent: bool,
    /// The batch columns its training step standardizes over the whole
    /// batch; a multi-agent run standardizes them per policy instead.
    pub standardizes: &'static [&'static str],
    /// It plays board games ([`rlx::game::Game`]) in every seat with one
    /// network (AlphaZero): its envs are games, not multi-agent envs to
    /// map to policies.
    pub plays_games: bool,
    /// It drives workers of its own (ES and ARS's perturbation workers,
    /// PBT's trainers) rather than a set of evaluators (AlphaZero's
    /// self-play workers are evaluators), so `nodes` and the actix backend, which place
    /// evaluators, do not apply to it.
    pub runs_own_workers: bool,
}

impl Capabilities {
    /// Evaluates, trains several policies, standardizes nothing.
    pub const ALL: Self =
        Self { evaluates: true, multi_agent: true, standardizes: &[], plays_games: false, runs_own_workers: false };
    /// One policy's weights, perturbed or bred by workers of its own: no
    /// evaluation, one agent.
    pub const ONE_POLICY: Self =
        Self { evaluates: false, multi_agent: false, standardizes: &[], plays_games: false, runs_own_workers: true };
}
