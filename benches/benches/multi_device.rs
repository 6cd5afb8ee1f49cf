//! Learner throughput of PPO's SGD: samples per second through one epoch of
//! minibatch SGD on an 8192-row CartPole batch (16 minibatches of 512),
//! for the policy's own single-device learner and for the multi-device
//! learner with 1 and 2 CPU replicas, at the built-in width (2×64) and a
//! wider network (2×256), where the per-minibatch compute is large enough
//! for a second replica to pay for its thread hand-offs.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::optimizer::{MultiDeviceConfig, MultiDeviceLearner};
use rlx::{fields, PolicyEvaluator, PolicyGraph, SampleBatch, Space, VectorEnv};
use rlx_algorithms::common::sections::{Learning, SyncBatch};
use rlx_algorithms::model::ModelConfig;
use rlx_algorithms::ppo::{self, PpoConfig};

const ROWS: usize = 8192;
const MINIBATCH: usize = 512;

fn config(width: usize) -> PpoConfig {
    let model = ModelConfig { fcnet_hiddens: vec![width, width], ..ModelConfig::default() };
    let d = PpoConfig::default();
    PpoConfig {
        num_sgd_iter: 1,
        sgd_minibatch_size: MINIBATCH,
        batch: SyncBatch { train_batch_size: ROWS, ..d.batch },
        learning: Learning { model, ..d.learning },
        ..d
    }
}

fn spaces() -> (Space, Space) {
    let env = rlx_envs::make("CartPole-v1").expect("env");
    (env.observation_space().clone(), env.action_space().clone())
}

fn make(width: usize, seed: u64) -> Box<dyn PolicyGraph> {
    let (o, a) = spaces();
    ppo::make_policy(&config(width), &o, &a, seed).expect("policy")
}

/// A postprocessed CartPole batch sampled by an untrained policy.
fn batch() -> SampleBatch {
    let envs = (0..8).map(|_| rlx_envs::make("CartPole-v1").expect("env")).collect();
    let mut evaluator =
        PolicyEvaluator::new(make(64, 1), VectorEnv::new(envs).expect("envs"), ROWS, 2).expect("evaluator");
    let mut batch = evaluator.sample().expect("sample").batch;
    batch.standardize(fields::ADVANTAGES).expect("advantages");
    batch.slice(0..ROWS)
}

fn multi_device(c: &mut Criterion) {
    let batch = batch();
    let mut group = common::group(c, "ppo_learner/cartpole_8192x1_epoch");
    group.throughput(Throughput::Elements(ROWS as u64));
    for width in [64, 256] {
        let mut own = make(width, 0);
        group.bench_function(BenchmarkId::new(format!("2x{width}"), "policy_learn_on_batch"), |b| {
            b.iter(|| own.learn_on_batch(&batch).expect("learn"))
        });
        for devices in [1, 2] {
            let mut local = make(width, 0);
            let replicas = (1..devices).map(|i| make(width, i as u64)).collect();
            let settings = MultiDeviceConfig { num_sgd_iter: 1, sgd_minibatch_size: Some(MINIBATCH), seed: 0 };
            let mut learner = MultiDeviceLearner::new(replicas, settings).expect("learner");
            group.bench_function(BenchmarkId::new(format!("2x{width}"), format!("multi_device_{devices}")), |b| {
                b.iter(|| learner.learn(local.as_mut(), batch.clone()).expect("learn"))
            });
        }
    }
    group.finish();
}

/// With `--features cuda` on a machine with a GPU: the same learners on the
/// CPU and on `cuda:0`, at sizes where a GPU has work to do. PPO: one epoch
/// of minibatches of 512 over 65,536 rows at 2×256 and over 8,192 rows at
/// 2×1024. SAC: one update at 2×256 (its default) on 256 and 4,096 rows,
/// and at 2×1024 on 1,024 rows. Skipped (with a message) when no GPU can be
/// opened.
#[cfg(feature = "cuda")]
fn cpu_vs_gpu(c: &mut Criterion) {
    use rand::SeedableRng;
    use rlx_algorithms::model::device::DeviceSpec;
    use rlx_algorithms::sac::{self, SacConfig};
    for (rows, width) in [(65_536, 256), (8192, 1024)] {
        let cfg = PpoConfig { batch: SyncBatch { train_batch_size: rows, ..config(width).batch }, ..config(width) };
        let mut batch = batch();
        while batch.len() < rows {
            let copy = batch.clone();
            batch.append(&copy).expect("append");
        }
        let batch = batch.slice(0..rows);
        let (o, a) = spaces();
        let make = |device| {
            let learning = Learning { device, ..cfg.learning.clone() };
            ppo::make_policy(&PpoConfig { learning, ..cfg.clone() }, &o, &a, 0)
        };
        let name = format!("ppo_learner/cartpole_{rows}x1_epoch_2x{width}");
        on_both(c, &name, rows, make(DeviceSpec::Cpu), make(DeviceSpec::Cuda(0)), &batch);
    }
    let (o, a) = (common::pendulum_observations(), common::pendulum_actions());
    for (rows, width) in [(256, 256), (4096, 256), (1024, 1024)] {
        let batch = common::pendulum_transitions(&mut rand_chacha::ChaCha8Rng::seed_from_u64(0), rows);
        let make = |device| {
            let d = SacConfig::default();
            let model = ModelConfig { fcnet_hiddens: vec![width, width], ..d.learning.model.clone() };
            sac::make_policy(&SacConfig { learning: Learning { model, device, ..d.learning }, ..d }, &o, &a, 0)
        };
        let name = format!("sac_learner/pendulum_{rows}_2x{width}");
        on_both(c, &name, 1, make(DeviceSpec::Cpu), make(DeviceSpec::Cuda(0)), &batch);
    }
}

/// Times `learn_on_batch` of the same learner on the CPU and on the GPU.
#[cfg(feature = "cuda")]
fn on_both(
    c: &mut Criterion,
    name: &str,
    elements: usize,
    cpu: Result<Box<dyn PolicyGraph>, rlx_algorithms::BuildError>,
    gpu: Result<Box<dyn PolicyGraph>, rlx_algorithms::BuildError>,
    batch: &SampleBatch,
) {
    let (mut cpu, mut gpu) = match (cpu, gpu) {
        (Ok(cpu), Ok(gpu)) => (cpu, gpu),
        (_, Err(e)) | (Err(e), _) => {
            eprintln!("{name} skipped: {e}");
            return;
        }
    };
    let mut group = common::group(c, name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(elements as u64));
    group.bench_function("cpu", |b| b.iter(|| cpu.learn_on_batch(batch).expect("learn")));
    group.bench_function("cuda_0", |b| b.iter(|| gpu.learn_on_batch(batch).expect("learn")));
    group.finish();
}

#[cfg(not(feature = "cuda"))]
criterion_group!(benches, multi_device);
#[cfg(feature = "cuda")]
criterion_group!(benches, multi_device, cpu_vs_gpu);
criterion_main!(benches);
