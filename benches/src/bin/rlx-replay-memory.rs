//! `rlx-replay-memory`: the resident memory of a frame-sharing replay
//! buffer full of Atari transitions (84 × 84 × 4 byte frames from several
//! env copies, n-step `new_obs`), and how fast it samples minibatches.
//!
//! ```sh
//! cargo run --release -p rlx-benches --bin rlx-replay-memory -- --transitions 1000000
//! cargo run --release -p rlx-benches --bin rlx-replay-memory -- --transitions 1000000 --prioritized
//! ```
//!
//! Prints one JSON object: the transitions stored, the process's resident
//! memory before and after filling (`VmRSS`), the difference per
//! transition, the buffer's own count of its heap bytes, the seconds to
//! fill, and the milliseconds per 32-row minibatch sampled: as the buffer
//! hands it over (observations as bytes), and with `obs` and `new_obs`
//! then made `f32` as a network's input layer does.

use clap::Parser;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::replay::{FrameLayout, LinearSchedule, PrioritizedReplayConfig, Replay};
use rlx::sample_batch::fields;
use rlx_benches::atari_stream::{AtariStream, SIDE, STACK};
use rlx_benches::children::resident_kib;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// The buffer's capacity, filled once.
    #[arg(long, default_value_t = 1_000_000)]
    transitions: usize,
    /// Env copies the transitions come from, taking turns.
    #[arg(long, default_value_t = 8)]
    copies: usize,
    /// Prioritized replay (α 0.6) instead of uniform.
    #[arg(long)]
    prioritized: bool,
}

fn main() {
    let args = Args::parse();
    let rss = || resident_kib(std::process::id()).expect("VmRSS of this process") as f64 * 1024.0;
    let prioritized = args.prioritized.then_some(PrioritizedReplayConfig {
        alpha: 0.6,
        beta: LinearSchedule { start: 0.4, end: 1.0, steps: 1_000_000 },
        eps: 1e-6,
    });
    let mut replay = Replay::new(args.transitions, prioritized).expect("a capacity of at least 1");
    replay.share_frames(FrameLayout { height: SIDE, width: SIDE, channels: STACK }).expect("an empty buffer");
    let mut stream = AtariStream::new(args.copies, 3, 1);
    let before = rss();
    let start = Instant::now();
    let mut left = args.transitions;
    while left > 0 {
        let rows = left.min(500);
        replay.add(&stream.batch(rows), None).expect("Atari transitions of the layout");
        left -= rows;
    }
    let fill_s = start.elapsed().as_secs_f64();
    let after = rss();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let start = Instant::now();
    let draws = 1_000;
    for _ in 0..draws {
        std::hint::black_box(replay.sample(32, 0, &mut rng).expect("a full buffer"));
    }
    let sample_ms = start.elapsed().as_secs_f64() * 1e3 / draws as f64;
    let start = Instant::now();
    for _ in 0..draws {
        let batch = replay.sample(32, 0, &mut rng).expect("a full buffer");
        for field in [fields::OBS, fields::NEW_OBS] {
            std::hint::black_box(batch.values(field).expect("observations").to_f32());
        }
    }
    let sample_f32_ms = start.elapsed().as_secs_f64() * 1e3 / draws as f64;
    let n = args.transitions as f64;
    let report = serde_json::json!({
        "transitions": args.transitions,
        "copies": args.copies,
        "prioritized": args.prioritized,
        "rss_before_bytes": before,
        "rss_after_bytes": after,
        "rss_bytes_per_transition": (after - before) / n,
        "heap_bytes_per_transition": replay.heap_bytes() as f64 / n,
        "f32_columns_bytes_per_transition": (2 * SIDE * SIDE * STACK * 4) as f64,
        "fill_s": fill_s,
        "sample_32_ms": sample_ms,
        "sample_32_as_f32_ms": sample_f32_ms,
    });
    println!("{report}");
}
