//! Sampling throughput (env steps/s) with evaluators on 1, 2 and 4 worker
//! node processes over loopback, against the same evaluators as local
//! actors in this process (the baseline, measured in the same run).
//!
//! PPO's 2×64 tanh policy on CartPole-v1; 4 evaluators × 8 envs; each
//! iteration is one `parallel_rollouts` of 4096 env steps. On a machine
//! with fewer cores than node processes the nodes share cores, so this
//! measures the cost of the cluster path (serialization, loopback TCP, one
//! process per node), not a speed-up.

mod common;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rlx::operators::parallel_rollouts;
use rlx_benches::nodes::{self, NodeProcess};
use rlx_cli::build_deployed_trainer;
use serde_json::json;

const STEPS_PER_ROUND: usize = 4096;
const EVALUATORS: usize = 4;

fn cluster_sampling(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "cluster/sampling");
    group.throughput(Throughput::Elements(STEPS_PER_ROUND as u64));
    let nodes: Vec<NodeProcess> = (0..4).map(|_| NodeProcess::start()).collect();
    for count in [0usize, 1, 2, 4] {
        let mut config =
            json!({"num_workers": EVALUATORS, "num_envs_per_worker": 8, "train_batch_size": STEPS_PER_ROUND});
        if count > 0 {
            config["nodes"] = json!(nodes[..count].iter().map(|n| n.addr.clone()).collect::<Vec<_>>());
            config["cookie"] = json!(nodes::COOKIE);
        }
        let (mut trainer, _) = rt.block_on(build_deployed_trainer("PPO", "CartPole-v1", &config)).expect("build");
        let id = if count == 0 { "local_actors".to_string() } else { format!("{count}_nodes") };
        group.bench_function(BenchmarkId::new(id, format!("{EVALUATORS}_evaluators")), |b| {
            b.iter(|| {
                let evaluators = trainer.evaluators_mut();
                let rollouts = rt.block_on(parallel_rollouts(evaluators)).expect("sample");
                assert!(rollouts.iter().map(|r| r.batch.len()).sum::<usize>() >= STEPS_PER_ROUND);
            })
        });
        // One cluster connection per process at a time: drop before the next.
        drop(trainer);
    }
    group.finish();
}

criterion_group!(benches, cluster_sampling);

// The worker nodes are this binary, re-run.
fn main() {
    common::main_serving_nodes(benches);
}
