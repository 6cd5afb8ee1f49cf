//! Every registered single-agent env snapshots itself (`save_state`) and,
//! restored into a fresh env (`load_state`), continues bit for bit: what
//! checkpoints rely on to resume episodes in progress. (A multi-agent env
//! snapshots in its vector form; `algorithms/tests/checkpoint.rs` resumes
//! those runs exactly.)

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::{Action, Env, Space};

/// An action that owns its values, so a sequence can be replayed.
enum OwnedAction {
    Discrete(i64),
    Continuous(Vec<f32>),
}

impl OwnedAction {
    fn as_action(&self) -> Action<'_> {
        match self {
            OwnedAction::Discrete(a) => Action::Discrete(*a),
            OwnedAction::Continuous(a) => Action::Continuous(a),
        }
    }
}

/// `n` uniformly random valid actions of `space`, from `seed`.
fn random_actions(space: &Space, n: usize, seed: u64) -> Vec<OwnedAction> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| match space {
            Space::Discrete { n } => OwnedAction::Discrete(rng.gen_range(0..*n)),
            Space::Box { low, high, .. } => {
                OwnedAction::Continuous(low.iter().zip(high).map(|(&l, &h)| rng.gen_range(l..=h)).collect())
            }
            Space::MultiDiscrete { .. } | Space::Dict { .. } => unreachable!("no registered env acts in these"),
        })
        .collect()
}

/// What one step produced, with floats as bits so equality is exact.
#[derive(Debug, PartialEq)]
struct Record {
    obs: Vec<u32>,
    reward: u64,
    terminated: bool,
    truncated: bool,
}

/// Plays `actions` from the env's current state, resetting (without a seed)
/// when an episode ends, and records every step; then resets once more and
/// records that observation, so that every env's generator is checked even
/// where no episode ends.
fn play(env: &mut dyn Env, obs: &mut [f32], actions: &[OwnedAction]) -> Vec<Record> {
    let bits = |obs: &[f32]| obs.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for action in actions {
        let step = env.step(action.as_action(), obs).unwrap();
        out.push(Record {
            obs: bits(obs),
            reward: step.reward.to_bits(),
            terminated: step.terminated,
            truncated: step.truncated,
        });
        if step.done() {
            env.reset(None, obs).unwrap();
            out.push(Record { obs: bits(obs), reward: 0, terminated: false, truncated: false });
        }
    }
    env.reset(None, obs).unwrap();
    out.push(Record { obs: bits(obs), reward: 0, terminated: false, truncated: false });
    out
}

/// The registered envs with one agent (a multi-agent env steps only in a
/// vector env).
fn single_agent_specs() -> Vec<rlx_envs::EnvSpec> {
    rlx_envs::specs().iter().copied().filter(|s| rlx_envs::make(s.name).unwrap().agent_ids().is_none()).collect()
}

/// A fresh env registered as `name`, reset with `seed`, and its first
/// observation.
fn reset_env(name: &str, seed: u64) -> (Box<dyn Env>, Vec<f32>) {
    let mut env = rlx_envs::make(name).unwrap();
    let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
    env.reset(Some(seed), &mut obs).unwrap();
    (env, obs)
}

#[test]
fn a_restored_env_continues_bit_for_bit() {
    for spec in single_agent_specs() {
        let name = spec.name;
        let (mut env, mut obs) = reset_env(name, 7);
        for action in random_actions(env.action_space(), 50, 1) {
            if env.step(action.as_action(), &mut obs).unwrap().done() {
                env.reset(None, &mut obs).unwrap();
            }
        }
        let snapshot = env.save_state().unwrap_or_else(|| panic!("{name}: no snapshot"));
        let saved_obs = obs.clone();
        let actions = random_actions(env.action_space(), 300, 2);
        let want = play(&mut env, &mut obs, &actions);
        let episode_ends = want.iter().filter(|r| r.terminated || r.truncated).count();

        let mut restored = rlx_envs::make(name).unwrap();
        restored.reset(Some(12_345), &mut obs).unwrap();
        restored.load_state(&snapshot).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut obs = saved_obs;
        let got = play(&mut restored, &mut obs, &actions);
        assert_eq!(got.len(), want.len(), "{name}: episodes end at different steps");
        for (t, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got, want, "{name}: record {t} differs after restoring ({episode_ends} episode ends)");
        }
        // Saving again gives the same bytes as the run that was never restored.
        assert_eq!(restored.save_state(), env.save_state(), "{name}");
    }
}

#[test]
fn a_snapshot_taken_at_termination_needs_a_reset() {
    let mut terminating = Vec::new();
    for spec in single_agent_specs() {
        let (mut env, mut obs) = reset_env(spec.name, 7);
        let actions = random_actions(env.action_space(), 1000, 3);
        // Envs that random play never terminates (MountainCar, Pendulum) are skipped.
        let Some(last) = actions.iter().position(|a| {
            let step = env.step(a.as_action(), &mut obs).unwrap();
            if step.truncated && !step.terminated {
                env.reset(None, &mut obs).unwrap();
            }
            step.terminated
        }) else {
            continue;
        };
        let mut restored = rlx_envs::make(spec.name).unwrap();
        restored.reset(Some(1), &mut obs).unwrap();
        restored.load_state(&env.save_state().unwrap()).unwrap();
        let err = restored.step(actions[last].as_action(), &mut obs).unwrap_err();
        assert!(matches!(err, rlx::EnvError::NeedsReset { .. }), "{}: {err}", spec.name);
        terminating.push(spec.name);
    }
    assert!(terminating.len() >= 3, "{terminating:?}");
}

#[test]
fn a_restored_env_differs_from_one_that_was_not_restored() {
    // Guards the test above: without `load_state` the replay must differ.
    for spec in single_agent_specs() {
        let (mut env, mut obs) = reset_env(spec.name, 7);
        let actions = random_actions(env.action_space(), 300, 2);
        let want = play(&mut env, &mut obs, &actions);
        env.reset(Some(12_345), &mut obs).unwrap();
        assert_ne!(play(&mut env, &mut obs, &actions), want, "{}", spec.name);
    }
}

#[test]
fn bad_snapshots_are_errors_that_change_nothing() {
    let snapshot_of = |name: &str| reset_env(name, 3).0.save_state().unwrap();
    for spec in single_agent_specs() {
        let name = spec.name;
        let (mut env, _) = reset_env(name, 5);
        let before = env.save_state().unwrap();
        let mut garbage = vec![vec![], b"garbage".to_vec(), vec![0xff; 64], before[..before.len() / 2].to_vec()];
        let mut noise = ChaCha8Rng::seed_from_u64(9);
        garbage.extend((0..20).map(|_| (0..noise.gen_range(1..200)).map(|_| noise.gen()).collect()));
        for bytes in &garbage {
            let err = env.load_state(bytes).expect_err(name);
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
        // Every other env's snapshot (CartPole's into MountainCar, ...).
        for other in single_agent_specs().into_iter().filter(|o| o.name != name) {
            let err = env.load_state(&snapshot_of(other.name)).expect_err(other.name).to_string();
            assert!(err.contains(name), "{name} loading {}: {err}", other.name);
        }
        assert_eq!(env.save_state().unwrap(), before, "{name}: a failed load changed the env");
    }
}

#[test]
fn every_registered_env_renders_text() {
    for spec in single_agent_specs() {
        let (env, _) = reset_env(spec.name, 0);
        let frame = env.render().unwrap_or_else(|| panic!("{}: no render", spec.name));
        assert!(!frame.trim().is_empty(), "{}", spec.name);
        if spec.name.starts_with("MinAtar/") {
            let rows: Vec<&str> = frame.split('\n').collect();
            assert_eq!(rows.len(), 10, "{}:\n{frame}", spec.name);
            assert!(rows.iter().all(|r| r.chars().count() == 10), "{}:\n{frame}", spec.name);
        }
    }
}

#[test]
fn frames_show_the_state() {
    let mut obs = [0.0f32; 4];
    let mut cartpole = rlx_envs::CartPole::new();
    cartpole.set_state([0.0, 0.0, 0.1, 0.0], &mut obs);
    assert_eq!(cartpole.render().unwrap(), "[--------------------/--------------------] x=+0.000 θ=+5.7°");
    cartpole.set_state([-2.4, 0.0, -0.1, 0.0], &mut obs);
    assert!(cartpole.render().unwrap().starts_with("[\\----"), "{}", cartpole.render().unwrap());

    let mut car = rlx_envs::MountainCar::new();
    car.set_state([-0.3, 0.01], &mut obs);
    assert_eq!(car.render().unwrap(), "[____________________o_________________G__] x=-0.300 v=+0.0100");

    let mut breakout = rlx_envs::Breakout::new();
    let mut obs = vec![0.0f32; 400];
    breakout.reset(Some(0), &mut obs).unwrap();
    let frame = breakout.render().unwrap();
    let rows: Vec<&str> = frame.lines().collect();
    assert_eq!(&rows[1..3], ["##########", "##########"]);
    assert_eq!(rows[9], "    =     ");
    assert!(rows[3] == "o#########" || rows[3] == "#########o", "{frame}");

    let mut invaders = rlx_envs::SpaceInvaders::new();
    let mut obs = vec![0.0f32; 600];
    invaders.reset(Some(0), &mut obs).unwrap();
    let frame = invaders.render().unwrap();
    assert_eq!(frame.lines().next(), Some("  <<<<<<  "), "{frame}");
    assert_eq!(frame.lines().last(), Some("     A    "), "{frame}");
}
