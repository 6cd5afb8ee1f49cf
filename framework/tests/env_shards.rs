//! Env shards (the supervision level below an evaluator): sharding changes
//! where env copies step, not what is sampled; a panicking env restarts its
//! shard and costs only its copies' episodes in progress; shards past their
//! budget fail the evaluator, whose supervisor restarts it; and a runtime
//! that cannot host shards is an error, not a panic.

mod common;

use common::CounterPolicy;
use rlx::actor::RactorEvaluatorSet;
use rlx::env::{decode_state, encode_state, invalid_action, EnvState};
use rlx::evaluator::evaluator_seed;
use rlx::{
    fields, Action, Env, EnvError, EnvMaker, EnvShards, EnvSignature, EvaluatorFactory, EvaluatorHandle, HandleError,
    PolicyEvaluator, RestartPolicy, RestartStrategy, Rollout, SampleBatch, Space, Step, VectorEnv,
};
use std::sync::Arc;

/// A noisy walk whose randomness comes from its reset seed. Observations
/// are `[position, tag]`, where the tag is the seed of the last seeded
/// reset, so a test can tell the copies' rows apart. Optionally panics on
/// the `k`-th step after being seeded with `s` (`panic_at: Some((s, k))`).
struct Drift {
    rng: u64,
    tag: f32,
    pos: f32,
    t: u32,
    steps_since_seed: u32,
    seed: u64,
    panic_at: Option<(u64, u32)>,
    signature: EnvSignature,
}

impl Drift {
    fn maker(panic_at: Option<(u64, u32)>) -> EnvMaker {
        Arc::new(move || {
            Ok(Box::new(Drift {
                rng: 0,
                tag: 0.0,
                pos: 0.0,
                t: 0,
                steps_since_seed: 0,
                seed: 0,
                panic_at,
                signature: EnvSignature::new(
                    "Drift",
                    Space::uniform_box(-1e6, 1e6, vec![2]).unwrap(),
                    Space::discrete(2),
                ),
            }) as Box<dyn Env>)
        })
    }

    /// Uniform in [-1, 1) from a SplitMix64 stream.
    fn uniform(&mut self) -> f32 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

impl Env for Drift {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let Some(s) = seed {
            (self.rng, self.tag, self.seed, self.steps_since_seed) = (s, s as f32, s, 0);
        }
        self.pos = 0.5 * self.uniform();
        self.t = 0;
        obs.copy_from_slice(&[self.pos, self.tag]);
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Action::Discrete(a @ 0..=1) = action else { return Err(invalid_action(self, action)) };
        self.steps_since_seed += 1;
        if self.panic_at == Some((self.seed, self.steps_since_seed)) {
            panic!("drift env crashed");
        }
        self.t += 1;
        self.pos += 0.3 * (2 * a - 1) as f32 + 0.2 * self.uniform();
        obs.copy_from_slice(&[self.pos, self.tag]);
        let terminated = self.pos.abs() > 2.0;
        Ok(Step { reward: f64::from(1.0 - self.pos.abs() / 2.0), terminated, truncated: !terminated && self.t >= 12 })
    }
    fn save_state(&self) -> Option<EnvState> {
        Some(encode_state(&(self.rng, self.tag, self.pos, self.t, self.steps_since_seed, self.seed)))
    }
    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        (self.rng, self.tag, self.pos, self.t, self.steps_since_seed, self.seed) = decode_state("Drift", state)?;
        Ok(())
    }
}

const COPIES: usize = 4;
const ROWS: usize = COPIES * 10;
const SEED: u64 = 100;

fn evaluator(env: VectorEnv, seed: u64) -> PolicyEvaluator {
    PolicyEvaluator::new(Box::new(CounterPolicy::for_env(&env)), env, ROWS, seed).unwrap()
}

fn shards(num_shards: usize, strategy: RestartStrategy, max_restarts: usize) -> EnvShards {
    EnvShards { num_shards, restart: RestartPolicy { strategy, max_restarts, window_s: 60.0 }, ..EnvShards::default() }
}

fn unsharded(copies: usize, seed: u64) -> PolicyEvaluator {
    let make = Drift::maker(None);
    evaluator(VectorEnv::new((0..copies).map(|_| make().unwrap()).collect()).unwrap(), seed)
}

fn sharded(copies: usize, seed: u64, s: EnvShards, panic_at: Option<(u64, u32)>) -> PolicyEvaluator {
    evaluator(VectorEnv::sharded(Drift::maker(panic_at), copies, &s).unwrap(), seed)
}

/// The rows whose observation carries `tag`, in batch order.
fn rows_tagged(batch: &SampleBatch, tag: u64) -> SampleBatch {
    let obs = batch.f32(fields::OBS).unwrap();
    let rows: Vec<usize> = (0..batch.len()).filter(|&r| obs[2 * r + 1] == tag as f32).collect();
    batch.gather(&rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_changes_where_copies_step_not_what_is_sampled() {
    // Five copies split 1, 2 and 3 ways (uneven shards included).
    let mut reference = unsharded(5, SEED);
    let expected: Vec<Rollout> = (0..4).map(|_| reference.sample().unwrap()).collect();
    assert!(expected.iter().map(|r| r.episodes.len()).sum::<usize>() > 5, "episodes end within the test");
    for k in [1, 2, 3] {
        let mut ev = sharded(5, SEED, shards(k, RestartStrategy::OneForOne, 3), None);
        assert_eq!(ev.env().shards().map(|s| s.len()), Some(k));
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(&ev.sample().unwrap(), want, "{k} shards, sample {i}");
        }
        // Snapshots have one form: a sharded one restores unsharded, and
        // both then sample alike.
        let snapshot = ev.save_state(1);
        assert_eq!(snapshot.env, reference.save_state(1).env, "{k} shards");
        let mut restored = unsharded(5, SEED + 1);
        restored.load_state(&snapshot).unwrap();
        let mut restored_sharded = sharded(5, SEED + 1, shards(k, RestartStrategy::OneForOne, 3), None);
        restored_sharded.load_state(&snapshot).unwrap();
        let (a, b) = (restored.sample().unwrap(), restored_sharded.sample().unwrap());
        assert_eq!(a.episodes, b.episodes, "{k} shards");
        assert_eq!(a.batch.f32(fields::OBS).unwrap(), b.batch.f32(fields::OBS).unwrap(), "{k} shards");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_env_restarts_its_shard_and_costs_only_its_copies_episodes() {
    // Copy 1 (seed SEED + 1, in shard 0 with copy 0) panics on its 5th step.
    let panic_at = Some((SEED + 1, 5));
    for (strategy, interrupted) in [(RestartStrategy::OneForOne, 2), (RestartStrategy::OneForAll, 4)] {
        let mut reference = unsharded(COPIES, SEED);
        let want = reference.sample().unwrap();
        let mut ev = sharded(COPIES, SEED, shards(2, strategy, 1), panic_at);
        let got = ev.sample().expect("one panic is within the shards' budget");
        let restarted = ev.env().shards().unwrap().restarts();
        assert_eq!(restarted, interrupted as u64 / 2, "{strategy:?}");
        assert_eq!(got.env_shard_restarts, restarted, "{strategy:?}: the rollout reports them");
        // One step of the restarted shards' copies is missing; nothing else.
        assert_eq!(got.batch.len(), ROWS - interrupted, "{strategy:?}");
        assert_eq!(ev.steps_sampled(), (ROWS - interrupted) as u64, "{strategy:?}");
        // Copies untouched by the restart sampled exactly as without shards,
        // advantages included, and so did every copy before the panic.
        for copy in 0..COPIES as u64 {
            let (got, want) = (rows_tagged(&got.batch, SEED + copy), rows_tagged(&want.batch, SEED + copy));
            if copy >= interrupted as u64 {
                assert_eq!(got, want, "{strategy:?}: copy {copy}");
                continue;
            }
            // The crashed shard's copies made 4 steps before the crash. A
            // one-for-all sibling may have answered that step before it was
            // stopped; then it lost the next one instead.
            let k = got.len();
            let sibling = copy >= 2;
            assert!(k == 4 || (sibling && k == 5), "{strategy:?}: copy {copy} kept {k} rows");
            for f in [fields::OBS, fields::ACTIONS, fields::REWARDS, fields::NEW_OBS] {
                assert_eq!(got.get(f), want.slice(0..k).get(f), "{strategy:?}: copy {copy}, {f}");
            }
        }
        // The restarted copies go on from new seeds: the next sample is whole.
        let next = ev.sample().unwrap();
        assert_eq!((next.batch.len(), next.env_shard_restarts), (ROWS, 0), "{strategy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shard_is_replaced_and_only_its_copies_lose_a_step() {
    let mut reference = unsharded(COPIES, SEED);
    let mut ev = sharded(COPIES, SEED, shards(2, RestartStrategy::OneForOne, 1), None);
    assert_eq!(ev.sample().unwrap(), reference.sample().unwrap());
    ev.env().shards().unwrap().actor(1).kill();
    // Let the kill land before the next step reaches the shard.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let (got, want) = (ev.sample().unwrap(), reference.sample().unwrap());
    assert_eq!(got.env_shard_restarts, 1);
    // Shard 1's copies (2 and 3) lost the first step of this sample and
    // went on from new seeds; shard 0's copies are untouched.
    assert_eq!(got.batch.len(), ROWS - 2);
    for copy in 0..2 {
        assert_eq!(rows_tagged(&got.batch, SEED + copy), rows_tagged(&want.batch, SEED + copy), "copy {copy}");
    }
    for copy in 2..4 {
        assert_eq!(rows_tagged(&got.batch, SEED + copy).len(), 0, "copy {copy} has new seeds");
    }
}

/// Evaluators whose shards give up at their first failure; the copy seeded
/// `evaluator_seed + 1` panics on its 3rd step in generations listed in
/// `panicking`.
fn escalating_factory(panicking: &'static [u64]) -> EvaluatorFactory {
    Arc::new(move |index, generation| {
        let seed = evaluator_seed(7, index, generation);
        let panic_at = panicking.contains(&generation).then_some((seed + 1, 3));
        let env = VectorEnv::sharded(Drift::maker(panic_at), COPIES, &shards(2, RestartStrategy::OneForOne, 0))?;
        Ok(evaluator(env, seed))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_past_their_budget_fail_the_evaluator_which_its_supervisor_restarts() {
    let policy = RestartPolicy { max_restarts: 1, window_s: 60.0, ..Default::default() };
    let (_set, handles) = RactorEvaluatorSet::spawn(escalating_factory(&[0]), vec![1], policy).await.unwrap();
    // Generation 0's shard gives up; the evaluator is restarted with new
    // shards and the same request answered by generation 1, whole.
    let rollout = handles[0].sample().await.expect("escalation is within the evaluators' budget");
    assert_eq!(rollout.batch.len(), ROWS);
    assert_eq!(handles[0].stats().restarts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_both_budgets_the_error_names_the_evaluator_the_shard_and_the_panic() {
    let policy = RestartPolicy { max_restarts: 0, window_s: 60.0, ..Default::default() };
    let (_set, handles) = RactorEvaluatorSet::spawn(escalating_factory(&[0, 1]), vec![1], policy).await.unwrap();
    let err = handles[0].sample().await.unwrap_err();
    eprintln!("{err}");
    let HandleError::RestartBudgetExceeded { index: 1, failures: 1, max_restarts: 0, last_failure, .. } = &err else {
        panic!("expected the evaluators' budget to be spent, got {err:?}");
    };
    for part in ["Drift", "env shard child 0 failed 1 times", "at most 0 restarts allowed", "drift env crashed"] {
        assert!(last_failure.contains(part), "`{part}` missing from: {last_failure}");
    }
}

#[tokio::test]
async fn a_current_thread_runtime_is_an_error_not_a_panic() {
    let err = VectorEnv::sharded(Drift::maker(None), 2, &shards(2, RestartStrategy::OneForOne, 1)).err().unwrap();
    assert!(matches!(err, EnvError::Shards { .. }), "{err:?}");
    assert!(err.to_string().contains("multi-threaded tokio runtime"), "{err}");
}

#[test]
fn no_runtime_or_too_many_shards_is_an_error_not_a_panic() {
    let err = VectorEnv::sharded(Drift::maker(None), 2, &shards(2, RestartStrategy::OneForOne, 1)).err().unwrap();
    assert!(err.to_string().contains("no tokio runtime"), "{err}");
    for k in [0, 3] {
        let err = VectorEnv::sharded(Drift::maker(None), 2, &shards(k, RestartStrategy::OneForOne, 1)).err().unwrap();
        assert!(err.to_string().contains(&format!("{k} env shards for 2 copies")), "{err}");
    }
}
