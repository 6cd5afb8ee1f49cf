//! Round-trip time of a small request answered with a tiny batch (8 rows of
//! CartPole observations, 128 bytes), sent one at a time and awaited:
//!
//! - `direct`: a plain method call, the floor;
//! - `tokio_channel`: an mpsc request with a oneshot reply, what an actor
//!   mailbox costs at least;
//! - `ractor`: a local ractor actor (`ActorRef::call`), as rlx's evaluators;
//! - `actix_context`: an actix actor on the caller's arbiter (`Addr::send`);
//! - `actix_sync_arbiter`: an actix `SyncArbiter` actor on its own OS thread.
//! - `ractor_remote`: an actor on a second node process over loopback
//!   (ractor_cluster), request and reply encoded as rlx encodes every
//!   message (MessagePack + LZ4).
//!
//! RLlib's figure for a local Ray actor call is ~200 µs (Liang et al. 2018);
//! DESIGN.md records ~1 ms sequential on this machine.

mod common;

use actix::prelude::*;
use criterion::{criterion_group, BenchmarkId, Criterion};
use ractor::{Actor as RactorActor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rlx_benches::nodes::{self, NodeProcess};
use rlx_cluster::wire::{self, SpawnSpec, Wire};
use rlx_cluster::{Cluster, ClusterOptions};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The answer: 8 observations of 4 floats.
type Tiny = Vec<f32>;

/// What every variant does to answer: build the tiny batch from the request.
fn answer(seed: u64) -> Tiny {
    (0..32).map(|i| (seed + i) as f32).collect()
}

struct Direct;
impl Direct {
    #[inline(never)]
    fn sample(&mut self, seed: u64) -> Tiny {
        answer(seed)
    }
}

// ---- ractor

enum RactorMsg {
    Sample(u64, RpcReplyPort<Tiny>),
}

impl ractor::Message for RactorMsg {}

struct RactorSampler;

impl RactorActor for RactorSampler {
    type Msg = RactorMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(&self, _: ActorRef<Self::Msg>, msg: Self::Msg, _: &mut ()) -> Result<(), ActorProcessingErr> {
        let RactorMsg::Sample(seed, reply) = msg;
        let _ = reply.send(answer(seed));
        Ok(())
    }
}

// ---- actix

#[derive(Message)]
#[rtype(result = "Tiny")]
struct ActixSample(u64);

/// Answers [`ActixSample`] on the caller's arbiter (`ActixSampler<false>`,
/// an actix `Context`) or on its own OS thread (`ActixSampler<true>`, a
/// `SyncContext` under a `SyncArbiter`).
struct ActixSampler<const SYNC: bool>;

impl actix::Actor for ActixSampler<false> {
    type Context = Context<Self>;
}

impl actix::Actor for ActixSampler<true> {
    type Context = SyncContext<Self>;
}

impl<const SYNC: bool> Handler<ActixSample> for ActixSampler<SYNC>
where
    Self: actix::Actor,
{
    type Result = MessageResult<ActixSample>;
    fn handle(&mut self, msg: ActixSample, _: &mut Self::Context) -> Self::Result {
        MessageResult(answer(msg.0))
    }
}

fn messaging(c: &mut Criterion) {
    let mut group = common::group(c, "messaging/round_trip");

    let mut direct = Direct;
    group.bench_function(BenchmarkId::new("direct", "tiny_batch"), |b| {
        let mut seed = 0u64;
        b.iter(|| {
            seed += 1;
            black_box(direct.sample(black_box(seed)))
        })
    });

    let rt = rlx_benches::runtime();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, tokio::sync::oneshot::Sender<Tiny>)>(64);
    rt.spawn(async move {
        while let Some((seed, reply)) = rx.recv().await {
            let _ = reply.send(answer(seed));
        }
    });
    runtime_round_trip(&mut group, &rt, "tokio_channel", tx);

    let (actor, handle) = rt.block_on(RactorSampler::spawn(None, RactorSampler, ())).expect("spawn ractor actor");
    runtime_round_trip(&mut group, &rt, "ractor", actor.clone());
    actor.stop(None);
    rt.block_on(handle).expect("ractor actor stops");

    // actix: one System (actix's own current-thread runtime) for both actors.
    let system = actix::System::new();
    let (context_addr, sync_addr) =
        system.block_on(async { (ActixSampler::<false>.start(), SyncArbiter::start(1, || ActixSampler::<true>)) });
    actix_round_trip(&mut group, &system, "actix_context", context_addr);
    actix_round_trip(&mut group, &system, "actix_sync_arbiter", sync_addr);

    // A second node process, reached through ractor_cluster.
    let node = NodeProcess::start();
    let spec = SpawnSpec { algorithm: "PPO".into(), env: "CartPole-v1".into(), config_json: "{}".into() };
    let cluster = rt
        .block_on(Cluster::connect(std::slice::from_ref(&node.addr), spec, ClusterOptions::new(nodes::COOKIE)))
        .expect("connect to the node");
    let echo: ActorRef<Wire<nodes::EchoProtocol>> = ractor::pg::get_members(&nodes::ECHO_GROUP.to_string())
        .into_iter()
        .find(|cell| !cell.get_id().is_local())
        .expect("the node's echo actor")
        .into();
    runtime_round_trip(&mut group, &rt, "ractor_remote", echo);
    drop(cluster);
    drop(node);
    group.finish();
}

/// A variant's handle on its answerer: sends one request and awaits the reply.
trait Caller: Clone + Send + 'static {
    /// Sends request `seed` and returns the answer.
    fn round_trip(&self, seed: u64) -> impl std::future::Future<Output = Tiny> + Send;
}

/// `tokio_channel`: an mpsc request with a oneshot reply.
impl Caller for tokio::sync::mpsc::Sender<(u64, tokio::sync::oneshot::Sender<Tiny>)> {
    async fn round_trip(&self, seed: u64) -> Tiny {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.send((seed, reply)).await.expect("receiver alive");
        answer.await.expect("answered")
    }
}

/// `ractor`: a call on a local actor.
impl Caller for ActorRef<RactorMsg> {
    async fn round_trip(&self, seed: u64) -> Tiny {
        let reply = self.call(|r| RactorMsg::Sample(seed, r), None).await.expect("actor alive");
        reply.expect("answered")
    }
}

/// `ractor_remote`: a call on the node's echo actor, encoded as rlx's messages are.
impl Caller for ActorRef<Wire<nodes::EchoProtocol>> {
    async fn round_trip(&self, seed: u64) -> Tiny {
        let request = wire::encode(&seed).expect("encode");
        let reply = self.call(|r| Wire::call(request, r), Some(Duration::from_secs(10))).await.expect("node alive");
        let bytes = reply.expect("answered");
        wire::decode::<Tiny>(&bytes).expect("decode")
    }
}

/// Benches `name` as round trips through `caller`, one at a time, awaited
/// in a task on `rt` (see [`on_runtime`]).
fn runtime_round_trip(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    name: &str,
    caller: impl Caller,
) {
    group.bench_function(BenchmarkId::new(name, "tiny_batch"), |b| {
        b.iter_custom(|iters| {
            let caller = caller.clone();
            on_runtime(rt, async move {
                let t0 = Instant::now();
                for seed in 0..iters {
                    black_box(caller.round_trip(seed).await);
                }
                t0.elapsed()
            })
        })
    });
}

/// Runs the caller's loop as a task on a runtime worker thread, where rlx's
/// driver runs, rather than on the bench thread (a `block_on` caller pays a
/// thread wake-up per reply).
fn on_runtime<F>(rt: &tokio::runtime::Runtime, f: F) -> std::time::Duration
where
    F: std::future::Future<Output = std::time::Duration> + Send + 'static,
{
    rt.block_on(rt.spawn(f)).expect("bench task")
}

fn actix_round_trip<A>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    system: &actix::SystemRunner,
    name: &str,
    addr: Addr<A>,
) where
    A: Handler<ActixSample>,
    A::Context: actix::dev::ToEnvelope<A, ActixSample>,
{
    group.bench_function(BenchmarkId::new(name, "tiny_batch"), |b| {
        b.iter_custom(|iters| {
            system.block_on(async {
                let t0 = Instant::now();
                for seed in 0..iters {
                    black_box(addr.send(ActixSample(seed)).await.expect("actor alive"));
                }
                t0.elapsed()
            })
        })
    });
}

criterion_group!(benches, messaging);

// The remote bar's node is this binary, re-run.
fn main() {
    common::main_serving_nodes(benches);
}
