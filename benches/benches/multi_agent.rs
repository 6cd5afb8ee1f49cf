//! Multi-agent sampling throughput (agent steps/s) on MultiAgentCartPole
//! with 2, 8 and 32 agents, 2 evaluator actors of 8 env copies each, PPO's
//! 2×64 tanh policy: every agent under one shared policy, and every agent
//! under a policy of its own (one batched forward pass per policy per
//! step). Each iteration is one `parallel_rollouts` of 4096 agent-step
//! slots in total; throughput counts the rows that came back (agents whose
//! pole fell before the others' add slots but no rows).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::operators::parallel_rollouts;
use rlx_algorithms::build_trainer;
use serde_json::json;

const SLOTS_PER_ROUND: usize = 4096;

fn multi_agent(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "multi_agent/cartpole_ppo_policy");
    for agents in [2usize, 8, 32] {
        for mapping in ["shared", "p{i}"] {
            let config = json!({
                "num_workers": 2, "num_envs_per_worker": 8, "train_batch_size": SLOTS_PER_ROUND,
                "env_config": {"num_agents": agents}, "multiagent": {"policy_mapping": mapping},
            });
            let (mut trainer, _) = rt.block_on(build_trainer("PPO", "MultiAgentCartPole", &config)).expect("build");
            // The rows a round returns, for the throughput.
            let rows: usize = rt
                .block_on(parallel_rollouts(trainer.evaluators_mut()))
                .expect("sample")
                .iter()
                .map(|r| r.batch.len())
                .sum();
            group.throughput(Throughput::Elements(rows as u64));
            let policies = if mapping == "shared" { "shared_policy" } else { "policy_per_agent" };
            group.bench_function(BenchmarkId::new(policies, format!("{agents}_agents")), |b| {
                b.iter(|| {
                    let rollouts = rt.block_on(parallel_rollouts(trainer.evaluators_mut())).expect("sample");
                    assert!(rollouts.iter().map(|r| r.batch.len()).sum::<usize>() > 0);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, multi_agent);
criterion_main!(benches);
