//! Replays trajectories recorded from Gymnasium (see
//! `envs/scripts/record_fixtures.py`) and checks rlx produces the same
//! observations (to 1e-5), rewards, terminations and truncations.

use rlx::{Action, Env};
use rlx_envs::CartPole;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    env: String,
    episodes: Vec<Episode>,
}

#[derive(Deserialize)]
struct Episode {
    init_state: Vec<f64>,
    init_obs: Vec<f32>,
    actions: Vec<i64>,
    obs: Vec<Vec<f32>>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

fn load(name: &str) -> Fixture {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cartpole_v1_matches_gymnasium() {
    let fixture = load("CartPole-v1");
    assert_eq!(fixture.env, "CartPole-v1");
    let (mut steps, mut truncations, mut terminations) = (0, 0, 0);
    for (e, ep) in fixture.episodes.iter().enumerate() {
        let mut env = rlx_envs::cartpole_v1();
        let mut obs = [0.0f32; 4];
        env.reset(Some(0), &mut obs).unwrap();
        let state: [f64; 4] = ep.init_state.clone().try_into().unwrap();
        env.inner_mut().set_state(state, &mut obs);
        assert_eq!(obs.to_vec(), ep.init_obs, "episode {e}: initial observation");
        for t in 0..ep.actions.len() {
            let step = env.step(Action::Discrete(ep.actions[t]), &mut obs).unwrap();
            for (got, want) in obs.iter().zip(&ep.obs[t]) {
                assert!((got - want).abs() <= 1e-5, "episode {e} step {t}: obs {obs:?} vs {:?}", ep.obs[t]);
            }
            assert_eq!(step.reward, ep.rewards[t], "episode {e} step {t}: reward");
            assert_eq!(step.terminated, ep.terminated[t], "episode {e} step {t}: terminated");
            assert_eq!(step.truncated, ep.truncated[t], "episode {e} step {t}: truncated");
            steps += 1;
            truncations += step.truncated as usize;
            terminations += step.terminated as usize;
        }
    }
    // The fixture must exercise both ways an episode ends.
    assert!(steps >= 10_000 && truncations >= 5 && terminations >= 5, "{steps} {truncations} {terminations}");
}

#[test]
fn cartpole_observation_space_matches_gymnasium() {
    let env = CartPole::new();
    assert_eq!(
        env.observation_space().to_string(),
        format!(
            "Box(low={:?}, high={:?}, shape=[4])",
            [-4.8f32, -f32::MAX, -0.41887903, -f32::MAX],
            [4.8f32, f32::MAX, 0.41887903, f32::MAX]
        )
    );
    assert_eq!(env.action_space().to_string(), "Discrete(2)");
}
