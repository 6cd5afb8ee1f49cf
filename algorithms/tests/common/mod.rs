//! Helpers shared by the learning tests (each test file uses some of them).
#![allow(dead_code)]

use rlx::{fields, Action, Column, LearnerStats, PolicyGraph, SampleBatch, TrainResult, Trainer};
use rlx_algorithms::build_trainer;
use serde_json::Value;

/// Mean return of `policy`'s greedy actions (no exploration) over
/// `episodes` episodes of the registered env `env`, reset with seeds
/// 1000, 1001, …: what the policy has learned, without the exploration
/// noise the training returns carry. Acts as evaluators do: recurrent
/// state carried, the env's action masks passed, continuous actions
/// clipped to the bounds.
pub fn greedy_return(policy: &mut dyn PolicyGraph, env: &str, episodes: u64) -> f64 {
    let mut env = rlx_envs::make(env).unwrap();
    let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
    let mut mask = vec![1.0f32; env.action_space().mask_width().unwrap_or(0)];
    let mut acting = rlx::acting::Acting::new(policy, 1);
    let mut out = SampleBatch::new();
    let mut total = 0.0;
    for episode in 0..episodes {
        env.reset(Some(1000 + episode), &mut obs).unwrap();
        acting.episode_started(0);
        loop {
            let masked = !mask.is_empty() && rlx::env::read_action_mask(env.as_ref(), &mut mask, 0).unwrap();
            acting.act(policy, &obs, masked.then_some(&mask[..]), false, &mut out).unwrap();
            let step = match out.get(fields::ACTIONS).unwrap() {
                Column::I64 { data, .. } => env.step(Action::Discrete(data[0]), &mut obs),
                Column::F32 { data, .. } => {
                    let mut a = data.clone();
                    env.action_space().clip(&mut a);
                    env.step(Action::Continuous(&a), &mut obs)
                }
                Column::U8 { .. } => panic!("a policy wrote its actions as bytes"),
            }
            .unwrap();
            total += step.reward;
            if step.done() {
                break;
            }
        }
    }
    total / episodes as f64
}

/// What a learning test's check saw after one iteration: the figure it
/// watches, and whether the run passed.
pub struct Score {
    pub value: f64,
    pub passed: bool,
}

/// The loop of a learning test: trains until `check` passes the run, and
/// fails once `budget` env steps have been sampled without. After every
/// iteration `check` gets the trainer (to evaluate its policy) and the
/// result, and returns its [`Score`], or `None` where it does not look.
/// The failure reads `{failure} within {budget} steps (best …)`, with the
/// best value seen. Returns the result that passed.
pub async fn train_until(
    trainer: &mut Trainer,
    failure: &str,
    budget: u64,
    mut check: impl FnMut(&mut Trainer, &TrainResult) -> Option<Score>,
) -> TrainResult {
    let mut best = f64::NEG_INFINITY;
    loop {
        let r = trainer.train().await.unwrap();
        if let Some(score) = check(trainer, &r) {
            best = best.max(score.value);
            if score.passed {
                return r;
            }
        }
        assert!(r.timesteps_total < budget, "{failure} within {budget} steps (best {best:.1})");
    }
}

/// Trains on CartPole-v1 until a greedy evaluation (the run's own, after
/// every iteration: 10 episodes with the most likely actions) reaches a
/// mean return of `threshold`, failing past `budget` env steps. This is
/// the criterion papers and Stable-Baselines3's `EvalCallback` report; the
/// training episodes' mean lags it and carries exploration. Returns the
/// last result's learner stats.
pub async fn learns(algorithm: &str, mut config: Value, threshold: f64, budget: u64) -> LearnerStats {
    config["evaluation_interval"] = 1.into();
    config["evaluation_duration"] = 10.into();
    let (mut trainer, _) = build_trainer(algorithm, "CartPole-v1", &config).await.unwrap();
    let failure = format!("{algorithm}'s greedy evaluation did not reach a mean return of {threshold}");
    let r = train_until(&mut trainer, &failure, budget, |_, r| {
        let greedy = r.evaluation.as_ref().expect("an evaluation every iteration").episode_reward_mean;
        eprintln!(
            "{algorithm} iter {} steps {} greedy {greedy:.1} training mean {:.1} t {:.1}s",
            r.training_iteration,
            r.timesteps_total,
            r.episode_reward_mean.unwrap_or(0.0),
            r.time_total_s
        );
        Some(Score { value: greedy, passed: greedy >= threshold })
    })
    .await;
    r.learner
}
