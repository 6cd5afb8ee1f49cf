//! DDPG, TD3 and SAC on Pendulum-v1 shapes: learner updates per second
//! (one replayed minibatch through `learn_on_batch`: critic targets, the
//! critics' and (when due) the actor's backward passes, Adam, soft target
//! updates; SAC also its temperature), at minibatches of 128 (what the
//! learning tests use) and 256 (the default).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::postprocessing::N_STEP_DISCOUNTS;
use rlx::{fields, PolicyGraph, SampleBatch, Space};
use rlx_algorithms::{ddpg, sac, td3};

/// `rows` Pendulum-shaped transitions with random contents.
fn transitions(rng: &mut ChaCha8Rng, rows: usize) -> SampleBatch {
    let mut b = SampleBatch::new();
    b.insert_f32(fields::OBS, (0..rows * 3).map(|_| rng.gen_range(-1.0..1.0)).collect(), 3).unwrap();
    b.insert_f32(fields::NEW_OBS, (0..rows * 3).map(|_| rng.gen_range(-1.0..1.0)).collect(), 3).unwrap();
    b.insert_f32(fields::ACTIONS, (0..rows).map(|_| rng.gen_range(-2.0..2.0)).collect(), 1).unwrap();
    b.insert_f32(fields::REWARDS, (0..rows).map(|_| rng.gen_range(-16.0..0.0)).collect(), 1).unwrap();
    b.insert_f32(fields::TERMINATEDS, vec![0.0; rows], 1).unwrap();
    b.insert_f32(fields::TRUNCATEDS, (0..rows).map(|i| (i % 200 == 199) as u8 as f32).collect(), 1).unwrap();
    b.insert_f32(N_STEP_DISCOUNTS, vec![0.99; rows], 1).unwrap();
    b
}

fn learner(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let obs = Space::uniform_box(-8.0, 8.0, vec![3]).unwrap();
    let act = Space::uniform_box(-2.0, 2.0, vec![1]).unwrap();
    let mut group = common::group(c, "continuous_learner/pendulum");
    group.throughput(Throughput::Elements(1));
    for rows in [128usize, 256] {
        let batch = transitions(&mut rng, rows);
        let policies: [(&str, Box<dyn PolicyGraph>); 3] = [
            ("DDPG", ddpg::make_policy(&ddpg::DdpgConfig::default(), &obs, &act, 0).unwrap()),
            ("TD3", td3::make_policy(&td3::Td3Config::default(), &obs, &act, 0).unwrap()),
            ("SAC", sac::make_policy(&sac::SacConfig::default(), &obs, &act, 0).unwrap()),
        ];
        for (name, mut policy) in policies {
            group.bench_function(BenchmarkId::new(name, format!("batch_{rows}")), |b| {
                b.iter(|| policy.learn_on_batch(&batch).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, learner);
criterion_main!(benches);
