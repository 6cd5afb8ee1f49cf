//! Env shards: env steps per second of one evaluator's 8 CartPole-v1
//! copies, stepped in the evaluator's own thread (`in_thread`) or split
//! over 1, 2 and 4 supervised shard actors, for two step costs:
//!
//! - `cartpole`: the env as it is (tens of nanoseconds a step), where the
//!   shards' message round trip per step is all that shows;
//! - `busy_100us` and `busy_1ms`: each step first spins for 100 µs or
//!   1 ms, a stand-in for a simulator or game engine, where the shards'
//!   parallelism pays.
//!
//! The loop runs as a task on a runtime worker thread, where an evaluator
//! actor steps its env.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rlx::{Action, Column, Env, EnvError, EnvMaker, EnvShards, Step, VectorEnv, Wrapped, Wrapper};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const COPIES: usize = 8;

/// Spins for `cost` before each step of the env it wraps.
struct Busy {
    cost: Duration,
}

impl<E: Env> Wrapper<E> for Busy {
    fn step(&mut self, env: &mut E, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let t0 = Instant::now();
        while t0.elapsed() < self.cost {
            std::hint::spin_loop();
        }
        env.step(action, obs)
    }
}

fn maker(cost: Duration) -> EnvMaker {
    Arc::new(move || Ok(Box::new(Wrapped::wrap(rlx_envs::make("CartPole-v1")?, Busy { cost })) as Box<dyn Env>))
}

fn env_shards(c: &mut Criterion) {
    let rt = rlx_benches::runtime();
    let mut group = common::group(c, "env_shards");
    group.throughput(Throughput::Elements(COPIES as u64));
    let actions = Arc::new(Column::I64 { data: (0..COPIES as i64).map(|i| i % 2).collect(), width: 1 });
    let costs = [("cartpole", 0), ("busy_100us", 100), ("busy_1ms", 1000)];
    for (env, cost) in costs.map(|(env, us)| (env, Duration::from_micros(us))) {
        for shards in [0, 1, 2, 4] {
            let make = maker(cost);
            let venv = {
                let _runtime = rt.enter();
                if shards == 0 {
                    VectorEnv::new((0..COPIES).map(|_| make().unwrap()).collect()).unwrap()
                } else {
                    let s = EnvShards { num_shards: shards, ..EnvShards::default() };
                    VectorEnv::sharded(make, COPIES, &s).unwrap()
                }
            };
            let venv = Arc::new(Mutex::new(venv));
            venv.lock().unwrap().reset(0).unwrap();
            let name = if shards == 0 { "in_thread".to_string() } else { format!("{shards}_shards") };
            group.bench_function(BenchmarkId::new(env, name), |b| {
                b.iter_custom(|iters| {
                    let (venv, actions) = (venv.clone(), actions.clone());
                    let task = rt.spawn(async move {
                        let mut venv = venv.lock().unwrap();
                        let mut out = rlx::vector_env::VectorStep::default();
                        let t0 = Instant::now();
                        for _ in 0..iters {
                            venv.step(&actions, &mut out).expect("valid actions");
                        }
                        t0.elapsed()
                    });
                    rt.block_on(task).expect("bench task")
                })
            });
            // Stop the shards inside the runtime's context.
            let _runtime = rt.enter();
            drop(venv);
        }
    }
    group.finish();
}

criterion_group!(benches, env_shards);
criterion_main!(benches);
