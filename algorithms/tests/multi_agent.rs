//! Two PPO policies trained side by side on MultiAgentCartPole: the policy
//! mapping sends `agent_0` to `p0` and `agent_1` to `p1`, the evaluator
//! batches each policy's agents together, and each policy learns from its
//! own batch. Both must learn to balance.

use rlx::multi_agent::{MultiAgentEvaluator, PolicyMapping};
use rlx::{fields, MultiAgentEnv, PolicyGraph};
use rlx_algorithms::ppo::{make_policy, PpoConfig};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

const ENV_STEP_BUDGET: usize = 150_000;
const THRESHOLD: f64 = 150.0;

#[test]
fn two_policies_learn_multi_agent_cartpole() {
    let env = rlx_envs::multi_agent_cartpole(2);
    let (obs_space, act_space) = (env.observation_space(0).clone(), env.action_space(0).clone());
    let mut cfg = PpoConfig::default();
    cfg.sampling.seed = 5;
    let mut policies: BTreeMap<String, Box<dyn PolicyGraph>> = BTreeMap::new();
    for (i, pid) in ["p0", "p1"].iter().enumerate() {
        policies.insert(pid.to_string(), make_policy(&cfg, &obs_space, &act_space, 100 + i as u64).unwrap());
    }
    let mapping: PolicyMapping = Arc::new(|agent: &str| if agent == "agent_0" { "p0".into() } else { "p1".into() });
    let mut evaluator = MultiAgentEvaluator::new(Box::new(env), policies, mapping, 512, 0).unwrap();

    let mut recent: BTreeMap<String, VecDeque<f64>> = BTreeMap::new();
    let mut env_steps = 0;
    loop {
        let mut rollout = evaluator.sample().unwrap();
        env_steps += 512;
        // Both policies acted, each on its own agent only.
        assert_eq!(rollout.batches.keys().collect::<Vec<_>>(), ["p0", "p1"]);
        for (agent, ep) in &rollout.agent_episodes {
            let window = recent.entry(agent.clone()).or_default();
            window.push_back(ep.episode_return);
            if window.len() > 20 {
                window.pop_front();
            }
        }
        evaluator.learn(&mut rollout, &[fields::ADVANTAGES]).unwrap();
        let means: Vec<f64> =
            recent.values().filter(|w| w.len() >= 5).map(|w| w.iter().sum::<f64>() / w.len() as f64).collect();
        if means.len() == 2 && means.iter().all(|&m| m >= THRESHOLD) {
            // Two separately trained policies, not one shared one.
            let w0 = evaluator.policy_mut("p0").unwrap().get_weights();
            let w1 = evaluator.policy_mut("p1").unwrap().get_weights();
            assert_ne!(w0, w1);
            return;
        }
        assert!(
            env_steps < ENV_STEP_BUDGET,
            "not both above {THRESHOLD} within {ENV_STEP_BUDGET} env steps: {means:?}"
        );
    }
}

#[test]
fn mapping_to_a_missing_policy_is_an_error() {
    let env = rlx_envs::multi_agent_cartpole(2);
    let mapping: PolicyMapping = Arc::new(|_: &str| "nobody".into());
    let err = MultiAgentEvaluator::new(Box::new(env), BTreeMap::new(), mapping, 10, 0).err().unwrap().to_string();
    assert!(err.contains("agent_0") && err.contains("nobody"), "{err}");
}
