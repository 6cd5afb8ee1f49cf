//! Evaluators in both homes, with a tiny env and policy declared here:
//! sampling sizes and episode accounting, weight broadcast, and supervision
//! (restart with current weights, one-for-all over a set grown with `add`;
//! a clear error past the budget), and an algorithm's own sampling in
//! place of the env's.

mod common;

use common::CounterPolicy;
use rlx::actor::RactorEvaluatorSet;
use rlx::env::invalid_action;
use rlx::RestartStrategy;
use rlx::{
    fields, Action, Env, EnvError, EnvSignature, EvaluatorFactory, EvaluatorHandle, FlatGradients, HandleError,
    LearnerStats, LocalEvaluator, PolicyError, PolicyEvaluator, PolicyGraph, RestartPolicy, SampleBatch, Space, Step,
    TimeLimit, VectorEnv,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Walk from 0 to +3 (terminated, reward 1) on a line; -0.1 per step.
/// Panics on the step when the shared counter reaches `panic_at`.
struct Corridor {
    pos: i64,
    signature: EnvSignature,
    steps: Arc<AtomicUsize>,
    panic_at: usize,
    delay: std::time::Duration,
}

impl Corridor {
    fn boxed(steps: Arc<AtomicUsize>, panic_at: usize) -> Box<dyn Env> {
        Self::slow(steps, panic_at, std::time::Duration::ZERO)
    }

    /// Like [`boxed`](Self::boxed), but every step takes `delay`.
    fn slow(steps: Arc<AtomicUsize>, panic_at: usize, delay: std::time::Duration) -> Box<dyn Env> {
        let env = Corridor {
            pos: 0,
            signature: EnvSignature::new(
                "Corridor",
                Space::uniform_box(-100.0, 100.0, vec![1]).unwrap(),
                Space::discrete(2),
            ),
            steps,
            panic_at,
            delay,
        };
        Box::new(TimeLimit::new(env, 7))
    }
}

impl Env for Corridor {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }
    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        self.pos = 0;
        obs[0] = 0.0;
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Action::Discrete(a @ 0..=1) = action else { return Err(invalid_action(self, action)) };
        if self.steps.fetch_add(1, Ordering::SeqCst) + 1 == self.panic_at {
            panic!("injected env failure");
        }
        std::thread::sleep(self.delay);
        self.pos += 2 * a - 1;
        obs[0] = self.pos as f32;
        let terminated = self.pos >= 3;
        Ok(Step { reward: if terminated { 1.0 } else { -0.1 }, terminated, truncated: false })
    }
}

fn factory(steps: Arc<AtomicUsize>, panic_at: usize, num_envs: usize, sample_size: usize) -> EvaluatorFactory {
    Arc::new(move |_index, _generation| {
        let envs = (0..num_envs).map(|_| Corridor::boxed(steps.clone(), panic_at)).collect();
        let env = VectorEnv::new(envs)?;
        PolicyEvaluator::new(Box::new(CounterPolicy::for_env(&env)), env, sample_size, 0)
    })
}

/// Like [`factory`], but evaluator `slow` takes `delay` per env step.
fn factory_with_straggler(slow: usize, delay: std::time::Duration) -> EvaluatorFactory {
    let steps = Arc::new(AtomicUsize::new(0));
    Arc::new(move |index, _generation| {
        let delay = if index == slow { delay } else { std::time::Duration::ZERO };
        let env = VectorEnv::new(vec![Corridor::slow(steps.clone(), usize::MAX, delay)])?;
        PolicyEvaluator::new(Box::new(CounterPolicy::for_env(&env)), env, 20, 0)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn straggler_mitigation_learns_without_the_slow_evaluator() {
    use rlx::optimizer::{SyncSamplesConfig, SyncSamplesOptimizer};
    use rlx::{Evaluators, PolicyOptimizer};
    // Evaluator 2 needs 20 steps x 50 ms = 1 s per batch; evaluator 1 microseconds.
    let factory = factory_with_straggler(2, std::time::Duration::from_millis(50));
    let mut evaluators = Evaluators::spawn(factory, 2, RestartPolicy::default()).await.unwrap();
    let config = SyncSamplesConfig { min_sample_fraction: 0.5, ..Default::default() };
    let mut optimizer = SyncSamplesOptimizer::new(config);
    for _ in 0..3 {
        let step = optimizer.step(&mut evaluators).await.unwrap();
        // One batch of 20 rows was learned on; the straggler's was dropped and counted.
        assert_eq!(step.steps_trained, 20);
        assert_eq!(step.learner.get("straggler_batches_dropped"), Some(1.0));
    }
    // The learner's weights advanced once per step (CounterPolicy adds 1 per learn).
    assert_eq!(evaluators.local().policy().get_weights(), vec![3.0]);
}

/// Records every batch it learns on, otherwise a [`CounterPolicy`].
struct Recording {
    inner: CounterPolicy,
    learned: Arc<std::sync::Mutex<Vec<SampleBatch>>>,
}

impl PolicyGraph for Recording {
    fn spaces(&self) -> (&Space, &Space) {
        (self.inner.observation_space(), self.inner.action_space())
    }
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        self.inner.compute_actions(obs, explore, out)
    }
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        self.inner.postprocess_trajectory(traj)
    }
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        self.learned.lock().unwrap().push(batch.clone());
        self.inner.learn_on_batch(batch)
    }
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        self.inner.compute_gradients(batch)
    }
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        self.inner.apply_gradients(grads)
    }
    fn get_weights(&self) -> Vec<f32> {
        self.inner.get_weights()
    }
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        self.inner.set_weights(weights)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_replay_learns_on_whole_sampled_batches_in_order() {
    use rlx::optimizer::{SyncBatchReplayConfig, SyncBatchReplayOptimizer};
    use rlx::{Evaluators, PolicyOptimizer};
    let learned = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = learned.clone();
    let steps = Arc::new(AtomicUsize::new(0));
    let factory: EvaluatorFactory = Arc::new(move |_index, _generation| {
        let env = VectorEnv::new(vec![Corridor::boxed(steps.clone(), usize::MAX)])?;
        let inner = CounterPolicy::for_env(&env);
        PolicyEvaluator::new(Box::new(Recording { inner, learned: seen.clone() }), env, 10, 0)
    });
    let mut evaluators = Evaluators::spawn(factory, 0, RestartPolicy::default()).await.unwrap();
    let config = SyncBatchReplayConfig { buffer_size: 50, learning_starts: 30, train_batch_size: 25, seed: 0 };
    let mut optimizer = SyncBatchReplayOptimizer::new(config).unwrap();
    for i in 0..12 {
        let step = optimizer.step(&mut evaluators).await.unwrap();
        // 10 rows per step: nothing is learned until 30 rows are stored.
        assert_eq!(step.steps_trained, if i < 2 { 0 } else { 30 }, "step {i}");
        assert!(optimizer.len() <= 60, "the oldest batches are dropped");
    }
    let learned = learned.lock().unwrap();
    assert_eq!(learned.len(), 10);
    for batch in learned.iter() {
        // Three whole 10-row batches: each sampled with one weight (`w0`),
        // its observations in the order the corridor produced them.
        let (w0, obs) = (batch.f32("w0").unwrap(), batch.f32(fields::OBS).unwrap());
        for chunk in 0..3 {
            let rows = chunk * 10..chunk * 10 + 10;
            assert!(w0[rows.clone()].iter().all(|&w| w == w0[chunk * 10]), "{w0:?}");
            let new_obs = batch.f32(fields::NEW_OBS).unwrap();
            for r in rows.start..rows.end - 1 {
                let ended = batch.f32(fields::TERMINATEDS).unwrap()[r] + batch.f32(fields::TRUNCATEDS).unwrap()[r];
                assert!(ended > 0.0 || obs[r + 1] == new_obs[r], "row {r} is followed by its successor");
            }
        }
    }
    // Update k learns on batches sampled with weight k or earlier, and
    // older ones do come back: it is replay, not the newest batch alone.
    let mut stale = false;
    for (k, batch) in learned.iter().enumerate() {
        let w0 = batch.f32("w0").unwrap();
        assert!(w0.iter().all(|&w| w <= k as f32), "update {k}: {w0:?}");
        stale |= w0.iter().any(|&w| w < k as f32);
    }
    assert!(stale, "older batches are replayed");
}

#[test]
fn sample_returns_postprocessed_single_episode_trajectories() {
    let steps = Arc::new(AtomicUsize::new(0));
    let mut ev = factory(steps, usize::MAX, 3, 50)(0, 0).unwrap();
    let rollout = ev.sample().unwrap();
    // 50 rows over 3 copies rounds up to 17 steps each.
    assert_eq!(rollout.batch.len(), 51);
    let b = &rollout.batch;
    for f in [fields::OBS, fields::NEW_OBS, fields::REWARDS, fields::ADVANTAGES, fields::VALUE_TARGETS, "w0"] {
        assert!(b.contains(f), "missing {f}");
    }
    // Every finished episode either terminated at +3 or was truncated at 7 steps.
    assert!(!rollout.episodes.is_empty());
    for e in &rollout.episodes {
        assert!(e.length <= 7);
        assert_eq!(e.truncated, e.length == 7 && e.episode_return < 0.0);
    }
    // Within a trajectory, obs[t+1] == new_obs[t] unless step t ended the episode.
    let (obs, new_obs) = (b.f32(fields::OBS).unwrap(), b.f32(fields::NEW_OBS).unwrap());
    let (term, trunc) = (b.f32(fields::TERMINATEDS).unwrap(), b.f32(fields::TRUNCATEDS).unwrap());
    let mut boundaries = 0;
    for t in 0..b.len() - 1 {
        if term[t] == 0.0 && trunc[t] == 0.0 && obs[t + 1] == new_obs[t] {
            continue;
        }
        boundaries += 1;
    }
    assert!(boundaries >= rollout.episodes.len());
    // Advantages of a terminated trajectory's last step: r - V = reward (V = 0).
    for t in 0..b.len() {
        if term[t] == 1.0 {
            assert_eq!(b.f32(fields::ADVANTAGES).unwrap()[t], 1.0);
        }
    }
    assert_eq!(ev.steps_sampled(), 51);
}

/// An algorithm's own sampling: `rows` rows a call, each holding the
/// policy's first weight and the call's number; after a restore it goes
/// on from the restored row count.
struct WeightRows {
    rows: usize,
    calls: u64,
}

impl rlx::evaluator::Sampler for WeightRows {
    fn sample(&mut self, policy: &mut dyn PolicyGraph) -> Result<rlx::Rollout, rlx::EvaluatorError> {
        self.calls += 1;
        let mut batch = SampleBatch::new();
        batch.insert_f32("w", vec![policy.get_weights()[0]; self.rows], 1)?;
        batch.insert_f32("call", vec![self.calls as f32; self.rows], 1)?;
        Ok(rlx::Rollout { batch, ..Default::default() })
    }

    fn restored(&mut self, steps_sampled: u64) {
        self.calls = steps_sampled / self.rows as u64;
    }
}

#[test]
fn a_sampler_makes_the_rows_with_the_current_weights_instead_of_stepping_the_env() {
    let steps = Arc::new(AtomicUsize::new(0));
    let make = factory(steps.clone(), usize::MAX, 2, 50);
    let with_sampler = |ev: PolicyEvaluator| ev.with_sampler(Box::new(WeightRows { rows: 3, calls: 0 }));
    let mut ev = with_sampler(make(1, 0).unwrap());
    ev.set_weights(&[0.75]).unwrap();
    let rollout = ev.sample().unwrap();
    assert_eq!(rollout.batch.f32("w").unwrap(), &[0.75; 3]);
    assert_eq!(rollout.batch.f32("call").unwrap(), &[1.0; 3]);
    ev.set_weights(&[0.5]).unwrap();
    assert_eq!(ev.sample().unwrap().batch.f32("w").unwrap(), &[0.5; 3]);
    assert_eq!((ev.steps_sampled(), steps.load(Ordering::SeqCst)), (6, 0), "rows counted, the env never stepped");

    // A new home restored from the snapshot goes on with the third call.
    let state = ev.save_state(1);
    let mut moved = with_sampler(make(1, 1).unwrap());
    moved.load_state(&state).unwrap();
    assert_eq!(moved.sample().unwrap().batch.f32("call").unwrap(), &[3.0; 3]);
    assert_eq!(moved.steps_sampled(), 9);
}

#[test]
fn env_errors_are_reported_not_panicked() {
    let steps = Arc::new(AtomicUsize::new(0));
    let env = VectorEnv::new(vec![Corridor::boxed(steps, usize::MAX)]).unwrap();
    let mut out = rlx::vector_env::VectorStep::default();
    let mut env = env;
    env.reset(0).unwrap();
    let err = env.step(&rlx::Column::I64 { data: vec![5], width: 1 }, &mut out).unwrap_err().to_string();
    assert!(err.contains("Corridor") && err.contains('5') && err.contains("Discrete(2)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_handle_reports_a_panic_as_an_error() {
    let steps = Arc::new(AtomicUsize::new(0));
    let ev = factory(steps, 5, 1, 10)(0, 0).unwrap();
    let local = LocalEvaluator::new(0, ev);
    let err = local.sample().await.unwrap_err();
    assert!(err.to_string().contains("injected env failure"), "{err}");
}

/// For each of `rounds` rounds, sends every handle the weights `[round]`,
/// then samples 20 rows from each and checks every row was sampled with
/// this round's weights, even by an evaluator restarted mid-round.
async fn sample_rounds_with_fresh_weights(handles: &mut [rlx::actor::RactorEvaluator], rounds: usize) {
    for round in 1..=rounds {
        let w = Arc::new(vec![round as f32]);
        for h in handles.iter_mut() {
            h.set_weights(w.clone()).await.unwrap();
        }
        for h in handles.iter_mut() {
            let rollout = h.sample().await.unwrap();
            assert_eq!(rollout.batch.len(), 20);
            assert!(rollout.batch.f32("w0").unwrap().iter().all(|&w| w == round as f32), "round {round}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_restarts_with_current_weights_and_keeps_sampling() {
    // The 30th env step anywhere panics, once.
    let steps = Arc::new(AtomicUsize::new(0));
    let policy = RestartPolicy { max_restarts: 2, window_s: 60.0, ..Default::default() };
    let (_set, mut handles) =
        RactorEvaluatorSet::spawn(factory(steps.clone(), 30, 2, 20), vec![1, 2], policy).await.unwrap();
    sample_rounds_with_fresh_weights(&mut handles, 4).await;
    let restarts: u64 = handles.iter().map(|h| h.stats().restarts).sum();
    assert_eq!(restarts, 1);
    assert!(steps.load(Ordering::SeqCst) >= 160);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_for_all_restarts_every_evaluator_of_the_set_including_added_ones() {
    // How a node runs a driver's evaluators: an empty set, one `add` per
    // evaluator placed there. The 30th env step anywhere panics, once.
    let steps = Arc::new(AtomicUsize::new(0));
    let policy = RestartPolicy { strategy: RestartStrategy::OneForAll, max_restarts: 2, window_s: 60.0 };
    let (set, handles) = RactorEvaluatorSet::spawn(factory(steps, 30, 1, 20), vec![], policy).await.unwrap();
    assert!(handles.is_empty());
    let mut handles = vec![set.add(1, 0).await.unwrap(), set.add(2, 0).await.unwrap()];
    let err = set.add(2, 0).await.err().unwrap().to_string();
    assert!(err.contains("evaluator 2") && err.contains("already"), "{err}");
    sample_rounds_with_fresh_weights(&mut handles, 3).await;
    // Evaluator 2 panicked (steps 21..40); one-for-all restarted both.
    assert_eq!(set.restarts(), 2);
    assert_eq!(handles.iter().map(|h| h.stats().restarts).collect::<Vec<_>>(), [1, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_restart_budget_the_error_names_evaluator_and_cause() {
    // Every evaluator's env panics on its 3rd step: each restart fails again.
    let steps = Arc::new(AtomicUsize::new(0));
    let panicky: EvaluatorFactory = Arc::new(move |i, g| {
        let at = steps.load(Ordering::SeqCst) + 3;
        factory(steps.clone(), at, 1, 10)(i, g)
    });
    let policy = RestartPolicy { max_restarts: 2, window_s: 60.0, ..Default::default() };
    let (_set, handles) = RactorEvaluatorSet::spawn(panicky, vec![1], policy).await.unwrap();
    let err = handles[0].sample().await.unwrap_err();
    match &err {
        HandleError::RestartBudgetExceeded { index, failures, max_restarts, last_failure, .. } => {
            assert_eq!((*index, *failures, *max_restarts), (1, 3, 2));
            assert!(last_failure.contains("injected env failure"), "{last_failure}");
        }
        other => panic!("expected RestartBudgetExceeded, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("evaluator 1") && msg.contains("injected env failure"), "{msg}");
    // The handle stays failed rather than hanging.
    assert!(handles[0].sample().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_spawn_is_an_error_naming_the_evaluator() {
    let bad: EvaluatorFactory =
        Arc::new(|i, _| Err(rlx::EvaluatorError::Config(format!("cannot build evaluator {i}: no such env"))));
    let err = RactorEvaluatorSet::spawn(bad, vec![1, 2], RestartPolicy::default()).await.err().unwrap().to_string();
    assert!(err.contains("evaluator 1") && err.contains("no such env"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replay_shard_restarts_and_its_transitions_are_counted_lost() {
    use rlx::optimizer::{AsyncReplayConfig, AsyncReplayOptimizer};
    use rlx::{Evaluators, PolicyOptimizer};
    let steps = Arc::new(AtomicUsize::new(0));
    let mut evaluators =
        Evaluators::spawn(factory(steps, usize::MAX, 1, 10), 2, RestartPolicy::default()).await.unwrap();
    let (obs_space, act_space) = (Space::uniform_box(-100.0, 100.0, vec![1]).unwrap(), Space::discrete(2));
    let learner = Box::new(CounterPolicy::new(obs_space, act_space));
    let config = AsyncReplayConfig {
        num_replay_shards: 2,
        buffer_size: 100_000,
        prioritized: None,
        learning_starts: 50,
        train_batch_size: 16,
        training_intensity: Some(1.0),
        max_weight_sync_delay: 20,
        learner_queue_size: 2,
        timesteps_per_iteration: 100,
        shard_restart: RestartPolicy::default(),
        seed: 3,
        frames: None,
    };
    let mut optimizer = AsyncReplayOptimizer::new(learner, config).await.unwrap();
    // The learner thread reports asynchronously: step until it has.
    let (mut sampled, mut trained) = (0, 0);
    while trained == 0 {
        let step = optimizer.step(&mut evaluators).await.unwrap();
        (sampled, trained) = (sampled + step.steps_sampled, trained + step.steps_trained);
        assert!(sampled < 20_000, "the learner never reported an update");
    }
    // Every sampled transition is in a shard (no buffer is full yet).
    let sizes = optimizer.shards().sizes();
    assert_eq!(sizes.iter().sum::<usize>() as u64, sampled);
    assert!(sizes[0] > 0 && sizes[1] > 0, "{sizes:?}");

    optimizer.shards().actor(0).kill();
    let (mut trained_after, mut last) = (0, None);
    while trained_after == 0 || optimizer.shards().generation(0) == 0 {
        let step = optimizer.step(&mut evaluators).await.unwrap();
        (sampled, trained_after) = (sampled + step.steps_sampled, trained_after + step.steps_trained);
        last = Some(step.learner);
        assert!(sampled < 40_000, "training did not go on after the shard died");
    }
    let last = last.unwrap();
    assert_eq!(optimizer.shards().generation(0), 1, "shard 0 was restarted once");
    assert_eq!(last.get("replay_shard_restarts"), Some(1.0));
    // Exactly what shard 0 held died with it, and it is reported; every
    // other transition is still stored.
    assert_eq!(last.get("replay_lost_transitions"), Some(sizes[0] as f64));
    assert_eq!(optimizer.shards().total_stored() as u64, sampled - sizes[0] as u64);
}

/// Steps right (toward the goal) when asked for its most likely action and
/// left when exploring, otherwise a [`CounterPolicy`].
struct RightWhenGreedy(CounterPolicy);

impl PolicyGraph for RightWhenGreedy {
    fn spaces(&self) -> (&Space, &Space) {
        (self.0.observation_space(), self.0.action_space())
    }
    fn compute_actions(&mut self, obs: &[f32], explore: bool, out: &mut SampleBatch) -> Result<(), PolicyError> {
        self.0.compute_actions(obs, explore, out)?;
        out.insert_i64(fields::ACTIONS, vec![i64::from(!explore); obs.len()], 1)?;
        Ok(())
    }
    fn postprocess_trajectory(&mut self, traj: &mut SampleBatch) -> Result<(), PolicyError> {
        self.0.postprocess_trajectory(traj)
    }
    fn learn_on_batch(&mut self, batch: &SampleBatch) -> Result<LearnerStats, PolicyError> {
        self.0.learn_on_batch(batch)
    }
    fn compute_gradients(&mut self, batch: &SampleBatch) -> Result<(FlatGradients, LearnerStats), PolicyError> {
        self.0.compute_gradients(batch)
    }
    fn apply_gradients(&mut self, grads: &[f32]) -> Result<(), PolicyError> {
        self.0.apply_gradients(grads)
    }
    fn get_weights(&self) -> Vec<f32> {
        self.0.get_weights()
    }
    fn set_weights(&mut self, weights: &[f32]) -> Result<(), PolicyError> {
        self.0.set_weights(weights)
    }
}

/// Evaluation plays whole episodes with the most likely actions unless
/// told to explore, spread over the copies, in the driver and in an actor,
/// and leaves the env's training record alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluate_plays_whole_greedy_episodes_spread_over_the_copies() {
    let make = || {
        let steps = Arc::new(AtomicUsize::new(0));
        let envs = (0..2).map(|_| Corridor::boxed(steps.clone(), usize::MAX)).collect();
        let env = VectorEnv::new(envs).unwrap();
        PolicyEvaluator::new(Box::new(RightWhenGreedy(CounterPolicy::for_env(&env))), env, 4, 0)
    };
    let mut evaluator = make().unwrap();
    // Greedy: right three times to the goal, 2 * -0.1 + 1.
    let greedy = evaluator.evaluate(5, 7, false).unwrap();
    assert_eq!(greedy.len(), 5);
    assert!(
        greedy.iter().all(|e| e.length == 3 && (e.episode_return - 0.8).abs() < 1e-6 && !e.truncated),
        "{greedy:?}"
    );
    // Exploring: left until the 7-step time limit.
    let explored = evaluator.evaluate(3, 7, true).unwrap();
    assert_eq!(explored.len(), 3);
    assert!(
        explored.iter().all(|e| e.length == 7 && (e.episode_return + 0.7).abs() < 1e-6 && e.truncated),
        "{explored:?}"
    );
    // Training's own episode record holds none of these eight: two steps
    // of two copies end at most two episodes.
    assert!(evaluator.sample().unwrap().episodes.len() <= 2);

    let factory: EvaluatorFactory = Arc::new(move |_, _| make());
    let (_set, handles) = RactorEvaluatorSet::spawn(factory, vec![1], RestartPolicy::default()).await.unwrap();
    let played = handles[0].evaluate(4, 11, false).await.unwrap();
    assert_eq!(played.iter().map(|e| e.length).collect::<Vec<_>>(), vec![3; 4]);
}
