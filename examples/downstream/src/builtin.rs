//! Step 5: rlx's built-in algorithms on our own envs.
//!
//! The built-in algorithms build their networks from the env's spaces at
//! run time, so an env of any shape trains with them through the public
//! API: an [`EnvMaker`] for our env, a JSON config over the algorithm's
//! defaults, and `rlx_algorithms::build_trainer_with_env`. `model` in the
//! config shapes the network, including a network of our own
//! ([`crate::network`]).

use rlx::env::EnvMaker;
use rlx::{Action, Column, Env, Space, Trainer};
use serde_json::Value;
use std::sync::Arc;

/// Makes [`Ring`](crate::ring::Ring)s: 7 observations, 5 actions.
pub fn ring() -> EnvMaker {
    Arc::new(|| Ok(Box::new(crate::ring::Ring::new()) as Box<dyn Env>))
}

/// Makes [`Reach`](crate::reach::Reach) tasks: 6 observations, 3-d
/// continuous actions.
pub fn reach() -> EnvMaker {
    Arc::new(|| Ok(Box::new(crate::reach::Reach::new()) as Box<dyn Env>))
}

/// Trains the built-in `algorithm` (`"PPO"`, `"DQN"`, `"SAC"`, ...) on
/// `make_env` with `config` over its defaults until `timesteps` env steps
/// have been sampled.
///
/// # Errors
/// A bad config or env, or a failed training step, as text.
pub async fn train(algorithm: &str, make_env: EnvMaker, config: &Value, timesteps: u64) -> Result<Trainer, String> {
    let (mut trainer, _resolved) =
        rlx_algorithms::build_trainer_with_env(algorithm, make_env, config).await.map_err(|e| e.to_string())?;
    while trainer.last_result().timesteps_total < timesteps {
        trainer.train().await.map_err(|e| e.to_string())?;
    }
    Ok(trainer)
}

/// The mean return of `episodes` fresh episodes (seeds from `seed`) with
/// the trainer's learned policy acting greedily (the most likely action,
/// a Gaussian's mean), continuous actions clipped to the bounds as the
/// evaluators do.
///
/// # Errors
/// The env's or the policy's error, as text.
pub fn evaluate(trainer: &mut Trainer, make_env: &EnvMaker, episodes: u64, seed: u64) -> Result<f64, String> {
    let mut local = trainer.evaluators_mut().local_mut();
    let policy = local.policy_mut();
    let mut env = make_env().map_err(|e| e.to_string())?;
    let mut obs = vec![0.0; env.observation_space().flat_dim()];
    let mut out = rlx::SampleBatch::new();
    let mut total = 0.0;
    for episode in 0..episodes {
        env.reset(Some(seed + episode), &mut obs).map_err(|e| e.to_string())?;
        loop {
            policy.compute_actions(&obs, false, &mut out).map_err(|e| e.to_string())?;
            let step = match (out.get(rlx::fields::ACTIONS), env.action_space().clone()) {
                (Some(Column::I64 { data, .. }), _) => env.step(Action::Discrete(data[0]), &mut obs),
                (Some(Column::F32 { data, .. }), space @ Space::Box { .. }) => {
                    let mut a = data.clone();
                    space.clip(&mut a);
                    env.step(Action::Continuous(&a), &mut obs)
                }
                _ => return Err("the policy wrote no usable actions".into()),
            }
            .map_err(|e| e.to_string())?;
            total += step.reward;
            if step.done() {
                break;
            }
        }
    }
    Ok(total / episodes as f64)
}

/// The mean return of `episodes` episodes of uniformly random actions:
/// what a learned policy must beat.
///
/// # Errors
/// The env's error, as text.
pub fn random_return(make_env: &EnvMaker, episodes: u64, seed: u64) -> Result<f64, String> {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut env = make_env().map_err(|e| e.to_string())?;
    let mut obs = vec![0.0; env.observation_space().flat_dim()];
    let mut total = 0.0;
    for episode in 0..episodes {
        env.reset(Some(seed + episode), &mut obs).map_err(|e| e.to_string())?;
        loop {
            let a = env.action_space().sample(&mut rng);
            let step = match env.action_space() {
                Space::Discrete { .. } => env.step(Action::Discrete(a[0] as i64), &mut obs),
                _ => env.step(Action::Continuous(&a), &mut obs),
            }
            .map_err(|e| e.to_string())?;
            total += step.reward;
            if step.done() {
                break;
            }
        }
    }
    Ok(total / episodes as f64)
}
