//! Frame-sharing replay holds Atari transitions in under 7.5 KB each, and
//! gives back exactly what was stored.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx::replay::LinearSchedule;
use rlx::replay::{FrameLayout, PrioritizedReplayConfig, Replay};
use rlx::sample_batch::fields;
use rlx_benches::atari_stream::{AtariStream, SIDE, STACK};

const LAYOUT: FrameLayout = FrameLayout { height: SIDE, width: SIDE, channels: STACK };

/// Fills a buffer of 1,000 slots with 3,000 transitions from 4 env copies
/// (so it has wrapped twice), then divides what it holds by its capacity.
fn bytes_per_transition(prioritized: Option<PrioritizedReplayConfig>) -> f64 {
    let capacity = 1_000;
    let mut replay = Replay::new(capacity, prioritized).unwrap();
    replay.share_frames(LAYOUT).unwrap();
    let mut stream = AtariStream::new(4, 3, 7);
    let mut last = Vec::new();
    for _ in 0..30 {
        let batch = stream.batch(100);
        replay.add(&batch, None).unwrap();
        last.push(batch);
    }
    // The newest 100 rows went to slots 900..1000, in order: they come back
    // exactly.
    let newest = last.pop().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let sampled = replay.sample(256, 10_000, &mut rng).unwrap();
    let slots = sampled.i64(rlx::replay::BATCH_INDEXES).unwrap();
    let width = SIDE * SIDE * STACK;
    let mut checked = 0;
    for (row, &slot) in slots.iter().enumerate() {
        if slot >= 900 {
            let i = slot as usize - 900;
            for field in [fields::OBS, fields::NEW_OBS] {
                let want = &newest.u8(field).unwrap()[i * width..(i + 1) * width];
                assert_eq!(&sampled.u8(field).unwrap()[row * width..(row + 1) * width], want, "{field} of slot {slot}");
            }
            checked += 1;
        }
    }
    assert!(checked > 5, "only {checked} of the sampled rows were of the newest batch");
    replay.heap_bytes() as f64 / capacity as f64
}

#[test]
fn an_atari_transition_takes_under_7_5_kb_uniform_and_prioritized() {
    let uniform = bytes_per_transition(None);
    let prioritized = bytes_per_transition(Some(PrioritizedReplayConfig {
        alpha: 0.6,
        beta: LinearSchedule { start: 0.4, end: 1.0, steps: 1000 },
        eps: 1e-6,
    }));
    eprintln!("bytes per stored transition: uniform {uniform:.0}, prioritized {prioritized:.0}");
    // One 84 × 84 frame is 7,056 bytes; as f32 columns a transition was
    // 225,792 bytes of observations alone.
    for b in [uniform, prioritized] {
        assert!(b <= 7_500.0, "{b:.0} bytes per transition");
        assert!(b >= 7_056.0, "{b:.0}: below one frame per transition, the measure is wrong");
    }
}

#[test]
fn images_that_do_not_fit_the_layout_are_refused_and_nothing_is_stored() {
    let mut replay = Replay::new(100, None).unwrap();
    replay.share_frames(FrameLayout { height: SIDE, width: SIDE, channels: 3 }).unwrap();
    let err = replay.add(&AtariStream::new(1, 1, 0).batch(2), None).unwrap_err().to_string();
    assert!(err.contains("`obs` has 28224 values per row") && err.contains("84×84×3"), "{err}");
    assert!(replay.is_empty());
    // A filtered observation arrives as f32 that are not bytes.
    let mut filtered = AtariStream::new(1, 1, 0).batch(2);
    let mut values = filtered.values(fields::NEW_OBS).unwrap().to_f32().into_owned();
    values[3] = 0.3;
    filtered.insert_f32(fields::NEW_OBS, values, SIDE * SIDE * STACK).unwrap();
    let mut replay = Replay::new(100, None).unwrap();
    replay.share_frames(LAYOUT).unwrap();
    let err = replay.add(&filtered, None).unwrap_err().to_string();
    assert!(err.contains("`new_obs` row 0 value 3 is 0.3, not a byte"), "{err}");
    assert!(replay.is_empty());
    replay.add(&AtariStream::new(1, 1, 0).batch(2), None).unwrap();
    assert!(replay.share_frames(LAYOUT).is_err(), "only while empty");
    let empty = FrameLayout { height: 0, width: SIDE, channels: STACK };
    let err = Replay::new(100, None).unwrap().share_frames(empty).unwrap_err().to_string();
    assert!(err.contains("at least 1×1×1"), "{err}");
}
