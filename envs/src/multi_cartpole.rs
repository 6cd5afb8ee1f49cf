//! `MultiAgentCartPole`: several independent CartPole-v1 copies as one
//! multi-agent env, agent `agent_i` balancing copy `i` (the example
//! multi-agent env RLlib ships too). Each agent's episode ends with its own
//! pole; the multi-agent episode ends when all have.

use crate::cartpole::{cartpole_v1, CartPole};
use rlx::multi_agent::IndependentAgents;
use rlx::TimeLimit;

/// `n` CartPole-v1 agents.
pub type MultiAgentCartPole = IndependentAgents<TimeLimit<CartPole>>;

/// `MultiAgentCartPole` with `n` agents.
///
/// # Panics
/// If `n` is zero.
pub fn multi_agent_cartpole(n: usize) -> MultiAgentCartPole {
    IndependentAgents::new("MultiAgentCartPole", (0..n).map(|_| cartpole_v1()).collect())
}

/// `MultiAgentCartPole` with `n` agents whose episodes end after `steps` steps.
///
/// # Panics
/// If `n` is zero.
pub fn multi_agent_cartpole_limited(n: usize, steps: usize) -> MultiAgentCartPole {
    IndependentAgents::new("MultiAgentCartPole", (0..n).map(|_| TimeLimit::new(CartPole::new(), steps)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::{Action, MultiAgentEnv, Step};

    #[test]
    fn agents_finish_independently_and_all_done_waits_for_the_last() {
        let mut env = multi_agent_cartpole(2);
        assert_eq!(env.agent_ids(), ["agent_0", "agent_1"]);
        let mut obs = vec![vec![0.0; 4]; 2];
        let mut steps = vec![Step::default(); 2];
        env.reset(Some(0), &mut obs).unwrap();
        // Agent 0 always pushes right and falls quickly; agent 1 balances.
        let mut done = [false, false];
        let mut t = 0;
        loop {
            t += 1;
            let balance = Action::Discrete(i64::from(obs[1][2] + 0.3 * obs[1][3] > 0.0));
            let actions = [(!done[0]).then_some(Action::Discrete(1)), (!done[1]).then_some(balance)];
            let all_done = env.step(&actions, &mut obs, &mut steps).unwrap();
            for i in 0..2 {
                done[i] |= steps[i].done();
            }
            if all_done {
                break;
            }
            assert!(t < 600);
        }
        assert!(done[0] && done[1] && t > 20);
        let bad = [Some(Action::Discrete(7)), None];
        let err = env.step(&bad, &mut obs, &mut steps).unwrap_err().to_string();
        assert!(err.contains("CartPole-v1") && err.contains('7'), "{err}");
    }
}
