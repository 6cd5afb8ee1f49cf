//! DQN on CartPole-v1: learner updates per second (one 64-row minibatch:
//! double-Q targets, dueling head, Huber loss, backward, Adam), alone and
//! with the prioritized-replay work around it (sample, learn, recompute TD
//! errors, update priorities); env steps per second through whole
//! training iterations (sampling, replay and learning together); and Ape-X
//! sampling throughput with 1 and 2 evaluators, the learner running flat
//! out beside them (`training_intensity: null`).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::postprocessing::N_STEP_DISCOUNTS;
use rlx::replay::{LinearSchedule, PrioritizedReplayConfig, Replay};
use rlx::{fields, SampleBatch, Space};
use rlx_algorithms::build_trainer;
use rlx_algorithms::dqn::{self, DqnConfig};
use serde_json::json;

const MINIBATCH: usize = 64;

/// 10k CartPole-shaped transitions with random contents.
fn transitions(rng: &mut ChaCha8Rng, rows: usize) -> SampleBatch {
    let mut b = SampleBatch::new();
    b.insert_f32(fields::OBS, (0..rows * 4).map(|_| rng.gen_range(-1.0..1.0)).collect(), 4).unwrap();
    b.insert_f32(fields::NEW_OBS, (0..rows * 4).map(|_| rng.gen_range(-1.0..1.0)).collect(), 4).unwrap();
    b.insert_i64(fields::ACTIONS, (0..rows).map(|_| rng.gen_range(0..2)).collect(), 1).unwrap();
    b.insert_f32(fields::REWARDS, vec![1.0; rows], 1).unwrap();
    b.insert_f32(fields::TERMINATEDS, (0..rows).map(|i| (i % 50 == 49) as u8 as f32).collect(), 1).unwrap();
    b.insert_f32(fields::TRUNCATEDS, vec![0.0; rows], 1).unwrap();
    b.insert_f32(N_STEP_DISCOUNTS, vec![0.99f32.powi(3); rows], 1).unwrap();
    b
}

fn learner(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let (obs, act) = (Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), Space::discrete(2));
    let mut policy = dqn::make_policy(&DqnConfig::default(), &obs, &act, 0).unwrap();
    let prioritized =
        PrioritizedReplayConfig { alpha: 0.6, beta: LinearSchedule { start: 0.4, end: 1.0, steps: 20_000 }, eps: 1e-6 };
    let mut replay = Replay::new(10_000, Some(prioritized)).unwrap();
    replay.add(&transitions(&mut rng, 10_000), None).unwrap();
    let minibatch = replay.sample(MINIBATCH, 0, &mut rng).unwrap();

    let mut group = common::group(c, "dqn_learner/cartpole");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("update", "learn_on_batch"), |b| {
        b.iter(|| policy.learn_on_batch(&minibatch).unwrap())
    });
    // What prioritized replay does per update: the learning pass's own TD
    // errors become the priorities; and, side by side, the earlier round
    // trip, which computed them again after learning (three more forward
    // passes).
    group.bench_function(BenchmarkId::new("update", "prioritized_round_trip"), |b| {
        b.iter(|| {
            let mb = replay.sample(MINIBATCH, 0, &mut rng).unwrap();
            let (_, td) = policy.learn_with_td_errors(&mb).unwrap();
            replay.update_priorities(&mb, &td).unwrap();
        })
    });
    group.bench_function(BenchmarkId::new("update", "prioritized_round_trip_recomputed"), |b| {
        b.iter(|| {
            let mb = replay.sample(MINIBATCH, 0, &mut rng).unwrap();
            policy.learn_on_batch(&mb).unwrap();
            let td = policy.td_errors(&mb).unwrap();
            replay.update_priorities(&mb, &td).unwrap();
        })
    });
    group.finish();
}

fn train_throughput(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "train_throughput/cartpole");
    for workers in [0usize, 2] {
        let config = json!({"num_workers": workers, "learning_starts": 1000});
        let (mut trainer, _) = rt.block_on(build_trainer("DQN", "CartPole-v1", &config)).expect("build");
        // Past learning_starts, so every measured iteration learns.
        let steps = rt.block_on(trainer.train()).expect("train").timesteps_this_iter;
        rt.block_on(trainer.train()).expect("train");
        group.throughput(Throughput::Elements(steps));
        group.bench_function(BenchmarkId::new("DQN", format!("{workers}_actors")), |b| {
            b.iter(|| rt.block_on(trainer.train()).expect("train"))
        });
    }
    group.finish();
}

/// Ape-X: env steps per second through whole iterations with 1 and 2
/// evaluator actors, 2 replay shards, and the learner thread unthrottled,
/// so sampling runs at its own pace (what the paper scales).
fn apex_sampling(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "apex_sampling/cartpole");
    for workers in [1usize, 2] {
        let config = json!({"num_workers": workers, "training_intensity": null, "timesteps_per_iteration": 2000});
        let (mut trainer, _) = rt.block_on(build_trainer("APEX", "CartPole-v1", &config)).expect("build");
        // Past learning_starts, so the learner runs during every measured iteration.
        let steps = rt.block_on(trainer.train()).expect("train").timesteps_this_iter;
        group.throughput(Throughput::Elements(steps));
        group.bench_function(BenchmarkId::new("APEX", format!("{workers}_evaluators")), |b| {
            b.iter(|| rt.block_on(trainer.train()).expect("train"))
        });
    }
    group.finish();
}

criterion_group!(benches, learner, train_throughput, apex_sampling);
criterion_main!(benches);
