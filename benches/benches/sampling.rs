//! Sampling throughput (env steps/s) of CartPole-v1 with PPO's 2×64 tanh
//! policy: the driver alone (0 evaluator actors), 1 and 2 evaluator actors.
//! Each iteration is one `parallel_rollouts` of 4096 env steps in total.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::operators::parallel_rollouts;
use rlx_algorithms::build_trainer;
use serde_json::json;

const STEPS_PER_ROUND: usize = 4096;

fn sampling(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "sampling/cartpole_ppo_policy");
    group.throughput(Throughput::Elements(STEPS_PER_ROUND as u64));
    for workers in [0usize, 1, 2] {
        for envs in [8usize, 64] {
            let config =
                json!({"num_workers": workers, "num_envs_per_worker": envs, "train_batch_size": STEPS_PER_ROUND});
            let (mut trainer, _) = rt.block_on(build_trainer("PPO", "CartPole-v1", &config)).expect("build");
            let id = BenchmarkId::new(format!("{workers}_actors"), format!("{envs}_envs_each"));
            group.bench_function(id, |b| {
                b.iter(|| {
                    let evaluators = trainer.evaluators_mut();
                    let rollouts = rt.block_on(parallel_rollouts(evaluators)).expect("sample");
                    assert!(rollouts.iter().map(|r| r.batch.len()).sum::<usize>() >= STEPS_PER_ROUND);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, sampling);
criterion_main!(benches);
