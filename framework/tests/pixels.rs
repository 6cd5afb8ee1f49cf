//! Observations of a `uint8` box stay bytes from the evaluator on: in the
//! sample batch, across the wire format, and in replay (with and without
//! frame sharing), a quarter of their `f32` size, and they read back as
//! exactly the values the env wrote. So do the image entries of a `Dict`,
//! packed with its other entries.

mod common;

use common::CounterPolicy;
use rlx::replay::{FrameLayout, ReplayBuffer};
use rlx::{codec, fields, Action, Column, Env, EnvError, EnvSignature, PolicyEvaluator, SampleBatch, Space, Step};
use rlx::{TimeLimit, VectorEnv};

const SIDE: usize = 16;
/// Channel 0 is the current frame, channel 1 the one before (channels last).
const CHANNELS: usize = 2;
const VALUES: usize = SIDE * SIDE * CHANNELS;

/// A dot walking on a 16 × 16 grid over a gray background whose shade
/// changes every step, drawn as a `uint8` image: the current frame and the
/// previous one. Reward 1 on the right edge.
struct Dots {
    pos: usize,
    t: u8,
    /// A value written where a byte should be, to check the refusal.
    poison: Option<f32>,
    frame: Vec<f32>,
    signature: EnvSignature,
}

impl Dots {
    fn boxed(poison: Option<f32>) -> Box<dyn Env> {
        let space = Space::bytes(vec![SIDE, SIDE, CHANNELS]);
        let signature = EnvSignature::new("Dots", space, Space::discrete(2));
        Box::new(TimeLimit::new(Dots { pos: 0, t: 0, poison, frame: vec![0.0; SIDE * SIDE], signature }, 9))
    }

    fn draw(&mut self, obs: &mut [f32]) {
        let previous = self.frame.clone();
        let shade = f32::from(self.t.wrapping_mul(37)) / 255.0;
        self.frame.iter_mut().for_each(|v| *v = shade);
        self.frame[self.pos] = 1.0;
        for (p, pixel) in obs.chunks_exact_mut(CHANNELS).enumerate() {
            pixel[0] = self.frame[p];
            pixel[1] = previous[p];
        }
        if let Some(x) = self.poison {
            obs[5] = x;
        }
    }
}

impl Env for Dots {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }
    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.pos = 0;
        self.draw(obs);
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Action::Discrete(a @ 0..=1) = action else {
            return Err(rlx::env::invalid_action(self, action));
        };
        self.t = self.t.wrapping_add(1);
        self.pos = if a == 1 { (self.pos + 1).min(SIDE * SIDE - 1) } else { self.pos.saturating_sub(1) };
        self.draw(obs);
        let reward = if self.pos % SIDE == SIDE - 1 { 1.0 } else { 0.0 };
        Ok(Step { reward, terminated: false, truncated: false })
    }
}

fn evaluator(poison: Option<f32>) -> PolicyEvaluator {
    let env = VectorEnv::new((0..4).map(|_| Dots::boxed(poison)).collect()).unwrap();
    let policy = CounterPolicy::for_env(&env);
    PolicyEvaluator::new(Box::new(policy), env, 64, 7).unwrap()
}

/// The `f32` values an env wrote, from a column of bytes.
fn as_written(column: &[u8]) -> Vec<f32> {
    column.iter().map(|&b| rlx::space::from_byte(b)).collect()
}

#[test]
fn uint8_observations_stay_bytes_through_batches_the_wire_and_replay() {
    let batch = evaluator(None).sample().unwrap().batch;
    let rows = batch.len();
    assert_eq!(rows, 64);
    for field in [fields::OBS, fields::NEW_OBS] {
        let column = batch.get(field).unwrap();
        assert!(matches!(column, Column::U8 { width: VALUES, .. }), "`{field}` is {}", column.kind_name());
        assert_eq!(column.size_bytes(), rows * VALUES, "one byte per value");
    }
    let others: usize =
        batch.columns().filter(|(f, _)| ![fields::OBS, fields::NEW_OBS].contains(f)).map(|(_, c)| c.size_bytes()).sum();
    assert_eq!(batch.size_bytes(), others + 2 * rows * VALUES, "where f32 would take {}", others + 8 * rows * VALUES);
    // The bytes are the env's values: each row's previous frame is the
    // frame of the row before it in the same copy (rows are copy-major
    // within an episode after postprocessing, so compare obs with new_obs).
    let (obs, new_obs) = (batch.u8(fields::OBS).unwrap(), batch.u8(fields::NEW_OBS).unwrap());
    for r in 0..rows {
        let (o, n) = (&obs[r * VALUES..(r + 1) * VALUES], &new_obs[r * VALUES..(r + 1) * VALUES]);
        let current: Vec<u8> = o.iter().step_by(CHANNELS).copied().collect();
        let previous_of_next: Vec<u8> = n.iter().skip(1).step_by(CHANNELS).copied().collect();
        assert_eq!(current, previous_of_next, "row {r}: new_obs's previous frame is obs's frame");
        assert!(current.contains(&255), "row {r} shows the dot");
    }

    // The wire: the same batch back, still bytes.
    let back = codec::decode(&codec::encode(&batch).unwrap()).unwrap();
    assert_eq!(back, batch);
    assert!(matches!(back.get(fields::OBS), Some(Column::U8 { .. })));

    // Replay, plain: stored and sampled as bytes.
    let mut plain = ReplayBuffer::new(1000).unwrap();
    plain.add(&batch).unwrap();
    assert_eq!(plain.heap_bytes(), batch.size_bytes(), "the buffer holds the batch's bytes, no more");
    let all: Vec<usize> = (0..rows).collect();
    let stored = plain.gather(&all);
    assert_eq!(stored.u8(fields::OBS).unwrap(), obs);

    // Replay with frame sharing: each distinct plane once, rows rebuilt
    // exactly, still bytes.
    let mut shared = ReplayBuffer::new(1000).unwrap();
    shared.share_frames(FrameLayout { height: SIDE, width: SIDE, channels: CHANNELS }).unwrap();
    shared.add(&batch).unwrap();
    let stored = shared.gather(&all);
    assert_eq!(stored.u8(fields::OBS).unwrap(), obs);
    assert_eq!(stored.u8(fields::NEW_OBS).unwrap(), new_obs);
    assert!(shared.heap_bytes() < plain.heap_bytes(), "{} vs {}", shared.heap_bytes(), plain.heap_bytes());

    // Where a network reads them, they are the values the env wrote.
    let values = stored.values(fields::OBS).unwrap().to_f32();
    assert_eq!(values.as_ref(), as_written(obs).as_slice());
    assert!(values.iter().all(|&x| (0.0..=1.0).contains(&x)));
}

#[test]
fn a_uint8_env_that_writes_something_else_is_refused_by_name() {
    let err = evaluator(Some(0.5)).sample().unwrap_err().to_string();
    assert!(err.contains("Dots") && err.contains("is 0.5") && err.contains("uint8"), "{err}");
}

/// `Dots` with a vector beside its image: a `Dict` of the `uint8` frames
/// and two floats, the step count and a constant.
struct DotsAndClock {
    dots: Box<dyn Env>,
    t: f32,
    signature: EnvSignature,
}

/// The vector's constant.
const FAR: f32 = -1.25;

impl DotsAndClock {
    fn boxed() -> Box<dyn Env> {
        let image = Space::bytes(vec![SIDE, SIDE, CHANNELS]);
        let clock = Space::uniform_box(-100.0, 100.0, vec![2]).unwrap();
        let space = Space::dict(vec![("frames".into(), image), ("clock".into(), clock)]).unwrap();
        let signature = EnvSignature::new("DotsAndClock", space, Space::discrete(2));
        Box::new(DotsAndClock { dots: Dots::boxed(None), t: 0.0, signature })
    }
}

impl Env for DotsAndClock {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.t = 0.0;
        self.dots.reset(seed, &mut obs[..VALUES])?;
        obs[VALUES..].copy_from_slice(&[self.t, FAR]);
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let step = self.dots.step(action, &mut obs[..VALUES])?;
        self.t += 1.0;
        obs[VALUES..].copy_from_slice(&[self.t, FAR]);
        Ok(step)
    }
}

/// A `Dict` with a `uint8` entry packs each row into bytes: the image one
/// byte a value, the floats four bytes each. The rows keep that size
/// through batches, the wire and replay, and unpack to the values the env
/// wrote.
#[test]
fn a_dict_with_an_image_entry_stays_packed_bytes_through_batches_the_wire_and_replay() {
    let env = VectorEnv::new((0..4).map(|_| DotsAndClock::boxed()).collect()).unwrap();
    let space = env.observation_space().clone();
    let policy = CounterPolicy::for_env(&env);
    let batch = PolicyEvaluator::new(Box::new(policy), env, 64, 7).unwrap().sample().unwrap().batch;
    let (rows, packed) = (batch.len(), VALUES + 2 * 4);
    assert_eq!(space.packed_width(), Some(packed));
    for field in [fields::OBS, fields::NEW_OBS] {
        let column = batch.get(field).unwrap();
        assert!(matches!(column, Column::U8 { width, .. } if *width == packed), "`{field}`: {}", column.kind_name());
        assert_eq!(column.size_bytes(), rows * packed, "where f32 rows would take {}", rows * 4 * (VALUES + 2));
    }
    // Unpacked, each row is an image with its dot and the clock, whose
    // next observation is one step later.
    let unpack = |b: &SampleBatch, field| {
        let mut values = Vec::new();
        space.unpack_rows(b.u8(field).unwrap(), &mut values).unwrap();
        values
    };
    let (obs, new_obs) = (unpack(&batch, fields::OBS), unpack(&batch, fields::NEW_OBS));
    assert_eq!(obs.len(), rows * (VALUES + 2));
    for (o, n) in obs.chunks_exact(VALUES + 2).zip(new_obs.chunks_exact(VALUES + 2)) {
        assert!(o[..VALUES].iter().step_by(CHANNELS).any(|&v| v == 1.0), "the dot");
        assert_eq!((o[VALUES + 1], n[VALUES + 1]), (FAR, FAR));
        assert_eq!(n[VALUES], o[VALUES] + 1.0, "the clock ticks once a step");
        assert!(space.contains_row(o) && space.contains_row(n));
    }
    let back = codec::decode(&codec::encode(&batch).unwrap()).unwrap();
    assert_eq!(back, batch);
    let mut replay = ReplayBuffer::new(1000).unwrap();
    replay.add(&batch).unwrap();
    assert_eq!(replay.heap_bytes(), batch.size_bytes(), "the buffer holds the batch's bytes, no more");
    let stored = replay.gather(&(0..rows).collect::<Vec<_>>());
    assert_eq!(unpack(&stored, fields::OBS), obs);
    assert_eq!(unpack(&stored, fields::NEW_OBS), new_obs);
}

/// Batches of bytes and of `f32` (a filtered env) do not mix silently.
#[test]
fn byte_and_float_observation_batches_do_not_mix() {
    let bytes = evaluator(None).sample().unwrap().batch;
    let mut floats = bytes.clone();
    let values = bytes.values(fields::OBS).unwrap().to_f32().into_owned();
    floats.insert_f32(fields::OBS, values, VALUES).unwrap();
    let err = SampleBatch::concat(&[bytes, floats]).unwrap_err().to_string();
    assert!(err.contains("`obs`") && err.contains("u8") && err.contains("f32"), "{err}");
}
