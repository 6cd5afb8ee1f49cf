//! Training throughput of the policy-gradient family on CartPole-v1: env
//! steps per second through whole training iterations (sampling, learning
//! and weight sync together) for A2C, A3C and IMPALA with 1 and 2 evaluator
//! actors. For A2C and A3C every sampled step is trained on; IMPALA's
//! learner runs behind a bounded queue, so at steady state it trains what
//! is sampled.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx_algorithms::build_trainer;
use serde_json::json;

fn pg_family(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "train_throughput/cartpole");
    for algorithm in ["A2C", "A3C", "IMPALA"] {
        for workers in [1usize, 2] {
            let (mut trainer, _) =
                rt.block_on(build_trainer(algorithm, "CartPole-v1", &json!({"num_workers": workers}))).expect("build");
            let steps = rt.block_on(trainer.train()).expect("train").timesteps_this_iter;
            group.throughput(Throughput::Elements(steps));
            group.bench_function(BenchmarkId::new(algorithm, format!("{workers}_actors")), |b| {
                b.iter(|| rt.block_on(trainer.train()).expect("train"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, pg_family);
criterion_main!(benches);
