//! The wire codec (MessagePack + LZ4, `rlx::codec`) on real sample batches:
//! encode and decode throughput in bytes of batch data per second on one
//! core, and the compression ratio (printed once per batch kind). Two
//! kinds: CartPole (small float vectors, hard to compress) and MinAtar
//! Breakout (10×10×4 binary pixels, where the paper reports > 10× at about
//! 1 GB/s/core for its pixel batches). Then the two conversions that keep
//! images as bytes between the env and the network.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::space::Action;
use rlx::{codec, fields, SampleBatch};

const ROWS: usize = 4096;

/// `ROWS` transitions of `env_name` under uniformly random actions, with the
/// per-row fields PPO sends along (`action_logp`, `vf_preds`).
fn batch(env_name: &str) -> SampleBatch {
    let mut env = rlx_envs::make(env_name).expect("env");
    let d = env.observation_space().flat_dim();
    let n_actions = match env.action_space() {
        rlx::Space::Discrete { n } => *n,
        other => panic!("{other} is not discrete"),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut obs = vec![0.0; d];
    env.reset(Some(0), &mut obs).expect("reset");
    let (mut all_obs, mut new_obs, mut actions, mut rewards, mut dones) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..ROWS {
        all_obs.extend_from_slice(&obs);
        let a = rng.gen_range(0..n_actions);
        let step = env.step(Action::Discrete(a), &mut obs).expect("step");
        new_obs.extend_from_slice(&obs);
        actions.push(a);
        rewards.push(step.reward as f32);
        dones.push(if step.terminated { 1.0 } else { 0.0 });
        if step.terminated || step.truncated {
            env.reset(None, &mut obs).expect("reset");
        }
    }
    let mut b = SampleBatch::new();
    // As the evaluator hands them on: a `uint8` box's observations
    // (MinAtar's) as bytes.
    if env.observation_space().dtype() == Some(rlx::Dtype::U8) {
        let bytes = |v: Vec<f32>| v.into_iter().map(|x| rlx::space::to_byte(x).expect("a byte")).collect();
        b.insert_u8(fields::OBS, bytes(all_obs), d).unwrap();
        b.insert_u8(fields::NEW_OBS, bytes(new_obs), d).unwrap();
    } else {
        b.insert_f32(fields::OBS, all_obs, d).unwrap();
        b.insert_f32(fields::NEW_OBS, new_obs, d).unwrap();
    }
    b.insert_i64(fields::ACTIONS, actions, 1).unwrap();
    b.insert_f32(fields::REWARDS, rewards, 1).unwrap();
    b.insert_f32(fields::TERMINATEDS, dones, 1).unwrap();
    b.insert_f32(fields::ACTION_LOGP, (0..ROWS).map(|_| -rng.gen::<f32>()).collect(), 1).unwrap();
    b.insert_f32(fields::VF_PREDS, (0..ROWS).map(|_| rng.gen::<f32>()).collect(), 1).unwrap();
    b
}

fn codec_bench(c: &mut Criterion) {
    let mut group = common::group(c, "codec");
    for (kind, env) in [("cartpole_4096", "CartPole-v1"), ("minatar_breakout_4096", "MinAtar/Breakout-v1")] {
        let b = batch(env);
        let encoded = codec::encode(&b).expect("encode");
        let raw = b.size_bytes();
        eprintln!(
            "codec/{kind}: {raw} bytes of batch data -> {} bytes on the wire, ratio {:.1}x",
            encoded.len(),
            raw as f64 / encoded.len() as f64
        );
        assert_eq!(codec::decode(&encoded).expect("decode"), b);
        group.throughput(Throughput::Bytes(raw as u64));
        group.bench_function(BenchmarkId::new("encode", kind), |bench| bench.iter(|| codec::encode(&b).unwrap()));
        group.bench_function(BenchmarkId::new("decode", kind), |bench| bench.iter(|| codec::decode(&encoded).unwrap()));
    }
    group.finish();
}

/// What keeping images as bytes costs per Atari observation (84 × 84 × 4):
/// the evaluator's conversion of the env's `f32` into bytes, and the input
/// layer's conversion back (`Values::to_f32`). Elements are values.
fn bytes_bench(c: &mut Criterion) {
    let mut group = common::group(c, "bytes");
    let n = 84 * 84 * 4;
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
    let values: Vec<f32> = bytes.iter().map(|&b| rlx::space::from_byte(b)).collect();
    group.throughput(Throughput::Elements(n as u64));
    let mut out = Vec::with_capacity(n);
    group.bench_function("to_bytes_atari_observation", |bench| {
        bench.iter(|| {
            out.clear();
            rlx::space::to_bytes(&values, &mut out).unwrap();
        })
    });
    assert_eq!(out, bytes);
    group.bench_function("to_f32_atari_observation", |bench| {
        bench.iter(|| rlx::Values::U8(&bytes).to_f32().into_owned())
    });
    group.finish();
}

criterion_group!(benches, codec_bench, bytes_bench);
criterion_main!(benches);
