//! Round trips through an evaluator handle: what one request costs on top
//! of the work it asks for, per home. The evaluator is PPO's on
//! CartPole-v1 with one env copy, so a `sample()` of one step is nearly all
//! messaging, and `set_weights` (the 2×64 networks' weights, shared) is
//! all messaging.
//!
//! Homes: the driver's own evaluator (`LocalEvaluator`, no messaging) and
//! one ractor evaluator actor under its supervisor (`RactorEvaluator`).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rlx_algorithms::build_trainer;
use serde_json::json;
use std::sync::Arc;

fn handles(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "handles/round_trip");
    let config = json!({"num_workers": 1, "num_envs_per_worker": 1, "train_batch_size": 1, "sgd_minibatch_size": 1});
    let (trainer, _) = rt.block_on(build_trainer("PPO", "CartPole-v1", &config)).expect("build");
    let evaluators = trainer.evaluators();
    let weights = Arc::new(evaluators.local().policy().get_weights());
    for (home, handle) in [("local", evaluators.local_handle()), ("ractor", evaluators.workers()[0].clone())] {
        group.bench_function(BenchmarkId::new(home, "set_weights"), |b| {
            b.iter(|| rt.block_on(handle.set_weights(weights.clone())).expect("set_weights"))
        });
        group.bench_function(BenchmarkId::new(home, "sample_1_step"), |b| {
            b.iter(|| {
                let rollout = rt.block_on(handle.sample()).expect("sample");
                assert!(!rollout.batch.is_empty());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, handles);
criterion_main!(benches);
