//! ES on Pendulum-v1 (every episode is 200 steps, so the work per
//! iteration does not depend on what the policy has learned): perturbation
//! evaluations (episodes) per second with 1 and 2 worker actors, flat and
//! nested (each worker supervising 2 child workers), and the bytes one
//! iteration puts on the wire.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::filter::RunningStat;
use rlx::optimizer::PolicyOptimizer;
use rlx_algorithms::env_maker;
use rlx_algorithms::es::{self, EsConfig};
use rlx_algorithms::evolution::{EvalRequest, FlatPolicy, NoiseTable, Perturbations, Perturber, PerturberSpec, Task};
use serde_json::Value;

const PERTURBATIONS: usize = 32;

fn config(workers: usize, children: usize) -> EsConfig {
    let perturbations = Perturbations {
        num_workers: workers,
        num_children_per_worker: children,
        num_perturbations: PERTURBATIONS,
        noise_size: 1_000_000,
        ..Perturbations::default()
    };
    EsConfig { perturbations, ..EsConfig::default() }
}

fn evaluations(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "es_perturbations/pendulum");
    group.throughput(Throughput::Elements(2 * PERTURBATIONS as u64));
    for (workers, children) in [(1, 0), (2, 0), (1, 2), (2, 2)] {
        let make_env = env_maker("Pendulum-v1", &Value::Null).expect("env");
        let (mut evaluators, mut optimizer) =
            rt.block_on(es::optimizer(make_env, config(workers, children))).expect("build");
        let id = BenchmarkId::new(if children == 0 { "flat" } else { "nested" }, format!("{workers}x{children}"));
        group.bench_function(id, |b| b.iter(|| rt.block_on(optimizer.step(&mut evaluators)).expect("step")));
    }
    group.finish();
}

/// Prints what one iteration sends (MessagePack + LZ4, as on the wire):
/// θ and the statistics to each worker, (offset, returns, statistics) back,
/// next to what shipping the perturbations themselves would cost.
fn wire_bytes(_: &mut Criterion) {
    let make_env = env_maker("Pendulum-v1", &Value::Null).expect("env");
    let env = make_env().expect("env");
    let cfg = EsConfig::default();
    let policy = FlatPolicy::new(env.observation_space(), env.action_space(), &cfg.perturbations.model, true, 0)
        .expect("policy");
    let spec = PerturberSpec {
        make_env,
        model: cfg.perturbations.model.clone(),
        normalize: true,
        noise_seed: 1,
        noise_size: 100_000,
    };
    let mut perturber = Perturber::new(&spec).expect("perturber");
    let weights = rlx::PolicyGraph::get_weights(&policy);
    let request = EvalRequest { weights: weights.clone(), obs_stat: RunningStat::new(3), noise_stdev: 0.02 };
    let noise = NoiseTable::shared(1, 100_000);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let tasks: Vec<Task> = (0..PERTURBATIONS)
        .map(|_| Task { noise_offset: noise.random_offset(&mut rng, weights.len()), env_seed: rng.gen() })
        .collect();
    let results = perturber.evaluate(&request, &tasks).expect("evaluate");
    let request_bytes = rlx::codec::encode_value(&(&request, &tasks)).expect("encode").len();
    let results_bytes = rlx::codec::encode_value(&results).expect("encode").len();
    let naive = PERTURBATIONS * weights.len() * 4;
    println!(
        "es_wire_bytes/pendulum: {} weights, {PERTURBATIONS} pairs: request {request_bytes} B (θ, statistics, tasks), results {results_bytes} B; the perturbations themselves would be {naive} B",
        weights.len()
    );
}

criterion_group!(benches, evaluations, wire_bytes);
criterion_main!(benches);
