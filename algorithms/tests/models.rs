//! The networks the `model` key builds do what they are for, each shown by
//! learning at a fixed seed within a fixed budget of env steps:
//! continuous actions (PPO on Pendulum-v1), memory (an LSTM on
//! StatelessCartPole-v1, where a feed-forward policy stays far below),
//! images (a CNN on MinAtar Breakout) and legal actions (masks on
//! MaskedMaze-v0, whose masked actions are never taken).
//!
//! The figures in the comments were measured with these configs; each
//! threshold leaves a margin on both sides.

mod common;

use rlx::acting::Acting;
use rlx::{fields, Action, Column, Env, PolicyEvaluator, PolicyGraph, SampleBatch, TrainResult, VectorEnv};
use rlx_algorithms::build_trainer;
use serde_json::{json, Value};

/// Trains `algorithm` on `env` until the 100-episode mean training return
/// reaches `target` or `budget` env steps have been sampled; returns the
/// last result and the learner's greedy return over 20 episodes.
async fn train(algorithm: &str, env: &str, config: Value, target: f64, budget: u64) -> (TrainResult, f64) {
    let (mut trainer, _) = build_trainer(algorithm, env, &config).await.unwrap();
    loop {
        let r = trainer.train().await.unwrap();
        let mean = r.episode_reward_mean.unwrap_or(f64::NEG_INFINITY);
        eprintln!(
            "{algorithm} {env} iter {} steps {} mean {mean:.2} t {:.1}s",
            r.training_iteration, r.timesteps_total, r.time_total_s
        );
        if mean >= target || r.timesteps_total >= budget {
            let greedy = common::greedy_return(trainer.evaluators().local().policy_mut(), env, 20);
            eprintln!("{algorithm} {env}: greedy return {greedy:.2}");
            return (r, greedy);
        }
    }
}

/// PPO with a diagonal Gaussian on Pendulum-v1, with the settings of the
/// Stable-Baselines3 zoo (γ 0.9, 8 × 512 steps a batch, observation
/// normalization; no gSDE). Seeds 0–2 passed −400 (the 100-episode mean)
/// after 100–110k steps and −200 after 120–125k.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_pendulum_with_continuous_actions() {
    let config = json!({
        "seed": 0, "num_workers": 0, "num_envs_per_worker": 8, "train_batch_size": 4096,
        "sgd_minibatch_size": 256, "gamma": 0.9, "lambda": 0.95, "observation_filter": "MeanStdFilter",
    });
    let (r, _) = train("PPO", "Pendulum-v1", config, -400.0, 160_000).await;
    let mean = r.episode_reward_mean.unwrap();
    assert!(
        mean >= -400.0,
        "mean return {mean:.1} after {} steps; a random policy scores about -1200",
        r.timesteps_total
    );
    assert!(r.learner.get("entropy").is_some() && r.learner.get("kl").is_some());
}

/// `model.log_std_init` sets where a Gaussian policy's exploration
/// starts: the log-probability of a sampled action averages
/// `-(log_std + ½ ln 2πe)`, 0.58 at SB3's −2 and −1.42 at the default 0.
/// A discrete action space, or an algorithm whose standard deviation is
/// not a free parameter, refuses the key by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_std_init_sets_the_gaussians_starting_spread() {
    let half_log_2pi_e = 0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E).ln();
    for log_std_init in [0.0, -2.0] {
        let config =
            json!({"seed": 3, "num_workers": 0, "train_batch_size": 4000, "model": {"log_std_init": log_std_init}});
        let (trainer, _) = build_trainer("PPO", "Pendulum-v1", &config).await.unwrap();
        let batch = trainer.evaluators().local().sample().unwrap().batch;
        let logp = batch.f32(fields::ACTION_LOGP).unwrap();
        let mean = logp.iter().map(|&x| x as f64).sum::<f64>() / logp.len() as f64;
        let expected = -(log_std_init + half_log_2pi_e);
        assert!(
            (mean - expected).abs() < 0.05,
            "log_std_init {log_std_init}: mean logp {mean:.3}, expected {expected:.3}"
        );
    }
    let config = json!({"model": {"log_std_init": -2.0}});
    let err = build_trainer("PPO", "CartPole-v1", &config).await.err().unwrap().to_string();
    assert!(err.contains("model.log_std_init") && err.contains("not continuous"), "{err}");
    let err = build_trainer("SAC", "Pendulum-v1", &config).await.err().unwrap().to_string();
    assert!(err.contains("model.log_std_init") && err.contains("SAC has no free log standard deviation"), "{err}");
}

/// Steps `policy` for `steps` steps in MaskedMaze-v0 copies (through an
/// evaluator when `explore`, greedily otherwise) and returns how many
/// actions the mask allowed and how many it did not.
fn legal_and_illegal(policy: Box<dyn PolicyGraph>, explore: bool, steps: usize) -> (usize, usize) {
    if explore {
        let envs = (0..8).map(|_| rlx_envs::make("MaskedMaze-v0").unwrap()).collect();
        let mut evaluator = PolicyEvaluator::new(policy, VectorEnv::new(envs).unwrap(), 1000, 7).unwrap();
        let (mut legal, mut illegal) = (0, 0);
        while legal + illegal < steps {
            let batch = evaluator.sample().unwrap().batch;
            let (mask, actions) = (batch.f32(fields::ACTION_MASK).unwrap(), batch.i64(fields::ACTIONS).unwrap());
            for (r, &a) in actions.iter().enumerate() {
                if mask[r * 4 + a as usize] == 1.0 {
                    legal += 1;
                } else {
                    illegal += 1;
                }
            }
            // Bumping a wall is the only way to score −1 in one step.
            assert!(batch.f32(fields::REWARDS).unwrap().iter().all(|&r| r != -1.0));
        }
        return (legal, illegal);
    }
    let mut policy = policy;
    let mut env = rlx_envs::make("MaskedMaze-v0").unwrap();
    let (mut obs, mut mask, mut out) = (vec![0.0; 36], vec![0.0; 4], SampleBatch::new());
    let mut acting = Acting::new(policy.as_ref(), 1);
    let (mut legal, mut illegal, mut episode) = (0, 0, 0);
    env.reset(Some(0), &mut obs).unwrap();
    while legal + illegal < steps {
        rlx::env::read_action_mask(env.as_ref(), &mut mask, 0).unwrap();
        acting.act(policy.as_mut(), &obs, Some(&mask), false, &mut out).unwrap();
        let Some(Column::I64 { data, .. }) = out.get(fields::ACTIONS) else { panic!("no actions") };
        let a = data[0];
        if mask[a as usize] == 1.0 {
            legal += 1;
        } else {
            illegal += 1;
        }
        if env.step(Action::Discrete(a), &mut obs).unwrap().done() {
            episode += 1;
            env.reset(Some(episode), &mut obs).unwrap();
        }
    }
    (legal, illegal)
}

/// Untrained policies act all over the place; over 10,000 steps each, sampled
/// and greedy, PPO's and DQN's never take a masked action.
#[test]
fn masked_actions_are_never_taken_sampled_or_greedy() {
    let env = rlx_envs::make("MaskedMaze-v0").unwrap();
    let (obs, act) = (env.observation_space().clone(), env.action_space().clone());
    for algorithm in ["PPO", "DQN"] {
        // DQN explores with ε = 1 at first: uniformly among the legal moves.
        for explore in [true, false] {
            let policy = rlx_algorithms::make_policy(algorithm, &json!({}), &obs, &act, 3).unwrap();
            let (legal, illegal) = legal_and_illegal(policy, explore, 10_000);
            assert_eq!(
                illegal,
                0,
                "{algorithm} (explore {explore}) took {illegal} masked actions of {}",
                legal + illegal
            );
        }
    }
}

/// The mean return of uniformly random legal moves in MaskedMaze-v0 over
/// `episodes` episodes.
fn random_legal_return(episodes: u64) -> f64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut env = rlx_envs::make("MaskedMaze-v0").unwrap();
    let (mut obs, mut mask) = (vec![0.0; 36], vec![0.0; 4]);
    let mut total = 0.0;
    for episode in 0..episodes {
        env.reset(Some(episode), &mut obs).unwrap();
        loop {
            rlx::env::read_action_mask(env.as_ref(), &mut mask, 0).unwrap();
            let legal: Vec<i64> = (0..4).filter(|&a| mask[a as usize] == 1.0).collect();
            let step = env.step(Action::Discrete(legal[rng.gen_range(0..legal.len())]), &mut obs).unwrap();
            total += step.reward;
            if step.done() {
                break;
            }
        }
    }
    total / episodes as f64
}

/// With masks, PPO learns the maze: every start is 8 to 10 moves from the
/// goal (returns 0.82 to 0.86), and a random legal walk rarely gets there
/// within the 50 steps. Seed 0 passed a training mean of 0.7 after 5k
/// steps and 0.8 after 11k.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_the_masked_maze() {
    let random = random_legal_return(200);
    assert!(random < 0.0, "random legal moves already score {random:.2}");
    let config = json!({"seed": 0, "num_workers": 0, "entropy_coeff": 0.01});
    let (r, greedy) = train("PPO", "MaskedMaze-v0", config, 0.8, 40_000).await;
    assert!(
        greedy >= 0.8,
        "greedy return {greedy:.2} after {} steps (random legal moves: {random:.2})",
        r.timesteps_total
    );
}

/// PPO on StatelessCartPole-v1 (cart position and pole angle only) with
/// and without an LSTM, at the same config and budget. The LSTM's value
/// head shares the LSTM with the policy, so the value loss is weighted
/// down (as in RLlib's LSTM examples); without it the value gradient
/// drowns the policy's.
fn stateless_config(use_lstm: bool) -> Value {
    json!({
        "seed": 0, "num_workers": 0, "num_envs_per_worker": 8, "train_batch_size": 2048, "sgd_minibatch_size": 256,
        "vf_loss_coeff": 0.001,
        "model": {"use_lstm": use_lstm, "lstm_cell_size": 64, "fcnet_hiddens": [64], "max_seq_len": 20},
    })
}

/// Env steps both runs get.
const STATELESS_BUDGET: u64 = 100_000;

/// Seeds 0 and 1 reached a mean of 268 and 189 after 96k steps (150
/// after 63k and 70k).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lstm_balances_stateless_cartpole() {
    let (r, _) = train("PPO", "StatelessCartPole-v1", stateless_config(true), 150.0, STATELESS_BUDGET).await;
    let mean = r.episode_reward_mean.unwrap();
    assert!(mean >= 150.0, "mean return {mean:.1} after {} steps", r.timesteps_total);
}

/// Without memory the same PPO stays near 50 (seeds 0 and 1: 53 and 50
/// after 96k steps): one frame does not tell which way the pole falls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_memory_ppo_stays_far_below_on_stateless_cartpole() {
    let (r, _) = train("PPO", "StatelessCartPole-v1", stateless_config(false), f64::INFINITY, STATELESS_BUDGET).await;
    let mean = r.episode_reward_mean.unwrap();
    assert!(mean < 90.0, "a feed-forward policy reached {mean:.1}: the env leaks its velocities");
}

/// Every recurrent algorithm trains with an LSTM (a few iterations each,
/// through the whole path: carried states, sequences, padding, V-trace
/// over sequences for IMPALA and APPO, gradients from A3C's workers), and
/// a restored recurrent run continues exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recurrent_algorithm_trains_with_an_lstm() {
    let model = json!({"use_lstm": true, "lstm_cell_size": 16, "fcnet_hiddens": [16], "max_seq_len": 8});
    for algorithm in ["PG", "A2C", "A3C", "PPO", "IMPALA", "APPO"] {
        let config = json!({"seed": 0, "model": model});
        let (mut trainer, _) = build_trainer(algorithm, "StatelessCartPole-v1", &config).await.unwrap();
        for _ in 0..3 {
            let r = trainer.train().await.unwrap();
            let loss = r.learner.get("total_loss").or(r.learner.get("policy_loss"));
            assert!(loss.is_some_and(f64::is_finite), "{algorithm}: {:?}", r.learner);
        }
    }
    let err = build_trainer("DQN", "StatelessCartPole-v1", &json!({"model": model})).await.err().unwrap().to_string();
    assert!(err.contains("model.use_lstm") && err.contains("DQN has no recurrent policy"), "{err}");
    let err = build_trainer("PPO", "CartPole-v1", &json!({"model": model, "num_devices": 2}))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("num_devices") && err.contains("use_lstm"), "{err}");
}

/// DQN on MinAtar Breakout (10×10×4 frames) with its default
/// convolutional torso: one layer of 16 3×3 filters (the MinAtar paper's),
/// then 2×64 ReLU layers. Settings in the spirit of the paper's DQN
/// (Adam at 2.5e-4, no prioritization) at a test-sized budget.
fn breakout_dqn(conv_filters: Value) -> Value {
    json!({
        "seed": 0, "buffer_size": 100_000, "learning_starts": 5000, "exploration_timesteps": 50_000,
        "exploration_final_eps": 0.05, "lr": 0.00025, "target_update_interval": 500, "training_intensity": 8,
        "prioritized_replay": false, "model": {"conv_filters": conv_filters},
    })
}

/// Measured at these settings (100-episode training mean after 123k env
/// steps, seed 0; deterministic with no workers): the CNN 4.51, the same
/// network with the frame flattened into the fully connected layers
/// (`conv_filters: []`) 3.73, and at most 4.05 over its last 20k steps;
/// random play scores about 0.5. The threshold sits between. The book's
/// Models page has both curves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dqn_with_a_cnn_beats_the_flattened_frame_on_minatar_breakout() {
    let (r, _) = train("DQN", "MinAtar/Breakout-v1", breakout_dqn(Value::Null), f64::INFINITY, 123_000).await;
    let mean = r.episode_reward_mean.unwrap();
    assert!(
        mean >= 4.2,
        "the CNN's mean return {mean:.2} after {} steps (the flattened MLP's: 3.73)",
        r.timesteps_total
    );
}

/// PPO on MinAtar Breakout with its CNN learns far above random play
/// (about 0.5) in 100k env steps. Measured (100-episode training mean),
/// seeds 0–7, with the CPU learner's own taped tanh (2026-11-26): the CNN
/// 4.1, 4.5, 4.5, 4.2, 4.5, 4.5, 4.8, 4.7; the flattened frame
/// (`conv_filters: []`) 4.2, 4.4, 4.2, 3.9, 4.2, 4.3, 3.8, 4.2. The CNN
/// leads on 7 of 8 seeds but by little (at 1M both plateau near 6), and
/// not at seed 0, so one seed cannot assert the lead: this test asserts
/// the learning, and the book's Models page has the comparison.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_with_a_cnn_learns_minatar_breakout() {
    let config = json!({
        "seed": 0, "num_workers": 1, "num_envs_per_worker": 16, "train_batch_size": 2048, "sgd_minibatch_size": 256,
        "num_sgd_iter": 4, "lr": 0.0005, "entropy_coeff": 0.01, "model": {"vf_share_layers": true},
    });
    let (r, _) = train("PPO", "MinAtar/Breakout-v1", config, f64::INFINITY, 100_000).await;
    let mean = r.episode_reward_mean.unwrap();
    assert!(mean >= 3.8, "the CNN's mean return {mean:.2} after {} steps (random play: 0.5)", r.timesteps_total);
}

/// A `Dict` observation of a 5 × 5 `uint8` image and a ±1 flag
/// (DictCue-v0), whose rewarded action needs both entries: random play
/// returns 2 of 8, the best policy that reads only one entry 4. PPO gives
/// the image entry its own convolutions, joins their maps with the flag,
/// and learns the task; the image stays bytes in the batches it learns
/// from. With these defaults seeds 0–3 passed a training mean of 7.6
/// after 13–15k steps, greedy on all 40 cues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_a_dict_of_an_image_and_a_vector_with_a_cnn_on_the_image() {
    let config = json!({"seed": 0, "num_workers": 0, "num_envs_per_worker": 8});
    let (mut trainer, _) = build_trainer("PPO", "DictCue-v0", &config).await.unwrap();
    {
        let mut local = trainer.evaluators().local();
        let batch = local.sample().unwrap().batch;
        let obs = batch.get(fields::OBS).unwrap();
        assert!(matches!(obs, Column::U8 { width: 29, .. }), "25 pixels and a 4-byte float: {}", obs.kind_name());
        let path = std::env::temp_dir().join(format!("rlx-test-dict-cue-{}.safetensors", std::process::id()));
        local.policy_mut().save_weights(&path).unwrap();
        let tensors = rlx::weights_file::read_safetensors(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let conv = tensors.iter().find(|(name, _, _)| name == "pi.torso.image.conv0.weight");
        assert_eq!(conv.map(|(_, shape, _)| shape.as_slice()), Some(&[16, 3, 3, 1][..]), "the image's 3×3 filters");
        let first = tensors.iter().find(|(name, _, _)| name == "pi.torso.0.weight").unwrap();
        assert_eq!(first.1, [64, 3 * 3 * 16 + 1], "the maps and the flag, joined");
    }
    let mut last = None;
    for _ in 0..60 {
        let r = trainer.train().await.unwrap();
        let mean = r.episode_reward_mean.unwrap_or(0.0);
        eprintln!("DictCue iter {} steps {} mean {mean:.2}", r.training_iteration, r.timesteps_total);
        let done = mean >= 7.6 || r.timesteps_total >= 60_000;
        last = Some(r);
        if done {
            break;
        }
    }
    let r = last.unwrap();
    // Every one of the 40 cues (20 pixels, 2 flags) gets its action.
    let mut wrong = Vec::new();
    for (flag, row, col) in
        [-1.0f32, 1.0].into_iter().flat_map(|f| (0..5).flat_map(move |r| [0, 1, 3, 4].map(|c| (f, r, c))))
    {
        let mut obs = vec![0.0f32; 26];
        (obs[row * 5 + col], obs[25]) = (1.0, flag);
        let mut out = SampleBatch::new();
        trainer.evaluators().local().policy_mut().compute_actions(&obs, false, &mut out).unwrap();
        if out.i64(fields::ACTIONS).unwrap()[0] != 2 * i64::from(col > 2) + i64::from(flag > 0.0) {
            wrong.push((row, col, flag));
        }
    }
    assert!(wrong.is_empty(), "greedy actions are wrong for (row, column, flag) {wrong:?}");
    let greedy = common::greedy_return(trainer.evaluators().local().policy_mut(), "DictCue-v0", 20);
    assert!(
        greedy >= 7.5,
        "greedy return {greedy:.2} of 8 after {} steps (one entry: 4, random: 2)",
        r.timesteps_total
    );
}

/// A contextual bandit with a `Discrete(3)` observation (one-hot encoded by
/// the network) and `MultiDiscrete([3, 4])` actions: element 0 must match
/// the observation and element 1 must be `(observation + 1) % 4`, one point
/// each. Episodes last 10 steps.
struct Dials {
    obs: i64,
    t: u32,
    rng: rand_chacha::ChaCha8Rng,
    signature: rlx::EnvSignature,
}

impl Env for Dials {
    fn signature(&self) -> &rlx::EnvSignature {
        &self.signature
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), rlx::EnvError> {
        use rand::{Rng, SeedableRng};
        if let Some(seed) = seed {
            self.rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        }
        (self.obs, self.t) = (self.rng.gen_range(0..3), 0);
        obs[0] = self.obs as f32;
        Ok(())
    }
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<rlx::Step, rlx::EnvError> {
        use rand::Rng;
        let Action::MultiDiscrete(a) = action else { return Err(rlx::env::invalid_action(self, action)) };
        if !self.action_space().contains(action) {
            return Err(rlx::env::invalid_action(self, action));
        }
        let reward = f64::from(u8::from(a[0] == self.obs)) + f64::from(u8::from(a[1] == (self.obs + 1) % 4));
        (self.obs, self.t) = (self.rng.gen_range(0..3), self.t + 1);
        obs[0] = self.obs as f32;
        Ok(rlx::Step { reward, terminated: false, truncated: self.t == 10 })
    }
}

/// PPO learns `Dials`: random actions score 10 · (1/3 + 1/4) ≈ 5.8 per
/// episode, the best 20.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppo_learns_multi_discrete_actions_from_discrete_observations() {
    use rand::SeedableRng;
    let make: rlx::env::EnvMaker = std::sync::Arc::new(|| {
        let signature =
            rlx::EnvSignature::new("Dials", rlx::Space::discrete(3), rlx::Space::MultiDiscrete { nvec: vec![3, 4] });
        Ok(Box::new(Dials { obs: 0, t: 0, rng: rand_chacha::ChaCha8Rng::seed_from_u64(0), signature }) as Box<dyn Env>)
    });
    let config = json!({"seed": 0, "num_workers": 0});
    let (mut trainer, _) = rlx_algorithms::build_trainer_with_env("PPO", make, &config).await.unwrap();
    let mut mean = 0.0;
    while trainer.last_result().timesteps_total < 30_000 {
        mean = trainer.train().await.unwrap().episode_reward_mean.unwrap_or(0.0);
    }
    assert!(mean > 17.0, "mean return {mean:.1}; random actions score about 5.8");
}
