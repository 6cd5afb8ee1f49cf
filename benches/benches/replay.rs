//! Replay buffer throughput, in transitions per second: adding 256-row
//! CartPole-shaped batches (obs, new_obs, action, reward, flags) to a full
//! 100k-slot buffer, and sampling 256-row minibatches from it, uniform and
//! prioritized (with the priority update that follows a learner step).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::replay::{PrioritizedReplayBuffer, ReplayBuffer, BATCH_INDEXES};
use rlx::{fields, SampleBatch};

const CAPACITY: usize = 100_000;
const ROWS: usize = 256;

fn transitions(rng: &mut ChaCha8Rng) -> SampleBatch {
    let mut b = SampleBatch::new();
    b.insert_f32(fields::OBS, (0..ROWS * 4).map(|_| rng.gen()).collect(), 4).unwrap();
    b.insert_f32(fields::NEW_OBS, (0..ROWS * 4).map(|_| rng.gen()).collect(), 4).unwrap();
    b.insert_i64(fields::ACTIONS, (0..ROWS).map(|_| rng.gen_range(0..2)).collect(), 1).unwrap();
    b.insert_f32(fields::REWARDS, vec![1.0; ROWS], 1).unwrap();
    b.insert_f32(fields::TERMINATEDS, vec![0.0; ROWS], 1).unwrap();
    b
}

fn replay(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let batch = transitions(&mut rng);
    let mut uniform = ReplayBuffer::new(CAPACITY).unwrap();
    let mut prioritized = PrioritizedReplayBuffer::new(CAPACITY, 0.6, 1e-6).unwrap();
    while uniform.len() < CAPACITY {
        uniform.add(&batch).unwrap();
        prioritized.add(&batch, None).unwrap();
    }
    let td_errors: Vec<f32> = (0..ROWS).map(|_| rng.gen()).collect();

    let mut group = common::group(c, "replay/cartpole_100k");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function(BenchmarkId::new("add", "uniform"), |b| b.iter(|| uniform.add(&batch).unwrap()));
    group.bench_function(BenchmarkId::new("add", "prioritized"), |b| {
        b.iter(|| prioritized.add(&batch, Some(&td_errors)).unwrap())
    });
    group.bench_function(BenchmarkId::new("sample", "uniform"), |b| b.iter(|| uniform.sample(ROWS, &mut rng).unwrap()));
    group.bench_function(BenchmarkId::new("sample", "prioritized"), |b| {
        b.iter(|| prioritized.sample(ROWS, 0.4, &mut rng).unwrap())
    });
    group.bench_function(BenchmarkId::new("sample_and_update", "prioritized"), |b| {
        b.iter(|| {
            let s = prioritized.sample(ROWS, 0.4, &mut rng).unwrap();
            prioritized.update_priorities(s.i64(BATCH_INDEXES).unwrap(), &td_errors).unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
