//! DDPG, TD3 and SAC on Pendulum-v1 shapes: learner updates per second
//! (one replayed minibatch through `learn_on_batch`: critic targets, the
//! critics' and (when due) the actor's backward passes, Adam, soft target
//! updates; SAC also its temperature), at minibatches of 128 (what the
//! learning tests use) and 256 (the default).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::PolicyGraph;
use rlx_algorithms::{ddpg, sac, td3};

fn learner(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let (obs, act) = (common::pendulum_observations(), common::pendulum_actions());
    let mut group = common::group(c, "continuous_learner/pendulum");
    group.throughput(Throughput::Elements(1));
    for rows in [128usize, 256] {
        let batch = common::pendulum_transitions(&mut rng, rows);
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
