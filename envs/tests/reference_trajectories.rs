//! Replays trajectories recorded from Gymnasium (see
//! `envs/scripts/record_fixtures.py`) and checks rlx produces the same
//! observations (to 1e-5), rewards, terminations and truncations.

use rlx::{Action, Env, TimeLimit};
use rlx_envs::{Acrobot, CartPole, MountainCar, MountainCarContinuous, Pendulum};
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// `A` is the type of one action: `i64` for `Discrete`, `Vec<f32>` for `Box`.
#[derive(Deserialize)]
struct Fixture<A> {
    env: String,
    episodes: Vec<Episode<A>>,
}

#[derive(Deserialize)]
struct Episode<A> {
    init_state: Vec<f64>,
    init_obs: Vec<f32>,
    actions: Vec<A>,
    obs: Vec<Vec<f32>>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

fn load<A: DeserializeOwned>(name: &str) -> Fixture<A> {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cartpole_v1_matches_gymnasium() {
    let fixture: Fixture<i64> = load("CartPole-v1");
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

/// How a recorded action is handed to `Env::step`.
trait FixtureAction {
    fn action(&self) -> Action<'_>;
}

impl FixtureAction for i64 {
    fn action(&self) -> Action<'_> {
        Action::Discrete(*self)
    }
}

impl FixtureAction for Vec<f32> {
    fn action(&self) -> Action<'_> {
        Action::Continuous(self)
    }
}

/// What a replayed fixture covered.
#[derive(Debug, Default)]
struct Replayed {
    steps: usize,
    truncations: usize,
    terminations: usize,
}

/// Replays the fixture of `name`: every episode starts from its recorded
/// initial state (`set_state`), then every recorded action must give the
/// recorded observation (to 1e-5, and inside the observation space), reward
/// (exactly), termination and truncation. The initial observation must
/// match to `init_obs_tol`.
fn replay<A, E, const N: usize>(
    name: &str,
    make: impl Fn() -> TimeLimit<E>,
    set_state: impl Fn(&mut E, [f64; N], &mut [f32]),
    init_obs_tol: f32,
) -> (Fixture<A>, Replayed)
where
    A: FixtureAction + DeserializeOwned,
    E: Env,
{
    let fixture: Fixture<A> = load(name);
    assert_eq!(fixture.env, name);
    let mut replayed = Replayed::default();
    for (e, ep) in fixture.episodes.iter().enumerate() {
        let mut env = make();
        assert_eq!(env.name(), name);
        let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
        env.reset(Some(0), &mut obs).unwrap();
        set_state(env.inner_mut(), ep.init_state.as_slice().try_into().unwrap(), &mut obs);
        assert_eq!(obs.len(), ep.init_obs.len());
        for (got, want) in obs.iter().zip(&ep.init_obs) {
            assert!((got - want).abs() <= init_obs_tol, "episode {e}: initial obs {obs:?} vs {:?}", ep.init_obs);
        }
        for t in 0..ep.actions.len() {
            let step = env.step(ep.actions[t].action(), &mut obs).unwrap();
            assert_eq!(obs.len(), ep.obs[t].len());
            for (got, want) in obs.iter().zip(&ep.obs[t]) {
                assert!((got - want).abs() <= 1e-5, "episode {e} step {t}: obs {obs:?} vs {:?}", ep.obs[t]);
            }
            assert!(env.observation_space().contains_row(&obs), "episode {e} step {t}: {obs:?}");
            assert_eq!(step.reward, ep.rewards[t], "episode {e} step {t}: reward");
            assert_eq!(step.terminated, ep.terminated[t], "episode {e} step {t}: terminated");
            assert_eq!(step.truncated, ep.truncated[t], "episode {e} step {t}: truncated");
            replayed.steps += 1;
            replayed.truncations += step.truncated as usize;
            replayed.terminations += step.terminated as usize;
        }
    }
    (fixture, replayed)
}

/// How many recorded continuous actions lie outside `[-bound, bound]`.
fn out_of_range(fixture: &Fixture<Vec<f32>>, bound: f32) -> usize {
    fixture.episodes.iter().flat_map(|ep| &ep.actions).filter(|a| a[0].abs() > bound).count()
}

#[test]
fn mountain_car_v0_matches_gymnasium() {
    let (_, r) = replay::<i64, _, _>("MountainCar-v0", rlx_envs::mountain_car_v0, MountainCar::set_state, 0.0);
    assert!(r.steps >= 10_000 && r.truncations >= 5 && r.terminations >= 5, "{r:?}");
}

#[test]
fn mountain_car_continuous_v0_matches_gymnasium() {
    let (fixture, r) = replay::<Vec<f32>, _, _>(
        "MountainCarContinuous-v0",
        rlx_envs::mountain_car_continuous_v0,
        MountainCarContinuous::set_state,
        0.0,
    );
    assert!(r.steps >= 10_000 && r.truncations >= 3 && r.terminations >= 5, "{r:?}");
    // Out-of-range forces are clipped, as in Gymnasium; the fixture has some.
    assert!(out_of_range(&fixture, 1.0) >= 100);
}

#[test]
fn acrobot_v1_matches_gymnasium() {
    // NumPy computes the first observation's cos/sin from the float32 reset
    // state with its own float32 routines, which can be one ulp off.
    let (_, r) = replay::<i64, _, _>("Acrobot-v1", rlx_envs::acrobot_v1, Acrobot::set_state, 1e-6);
    assert!(r.steps >= 10_000 && r.truncations >= 5 && r.terminations >= 5, "{r:?}");
}

#[test]
fn pendulum_v1_matches_gymnasium() {
    let (fixture, r) = replay::<Vec<f32>, _, _>("Pendulum-v1", rlx_envs::pendulum_v1, Pendulum::set_state, 0.0);
    assert!(r.steps >= 10_000 && r.truncations >= 40 && r.terminations == 0, "{r:?}");
    // Out-of-range torques are clipped, as in Gymnasium; the fixture has some.
    assert!(out_of_range(&fixture, 2.0) >= 100);
}
