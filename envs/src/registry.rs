//! Envs by name, with the metadata Gymnasium's registry keeps.

use crate::minatar::{AsterixGame, BreakoutGame, FreewayGame, Game, MinAtar, SeaquestGame, SpaceInvadersGame};
use crate::{Acrobot, CartPole, DictCue, MaskedMaze, MountainCar, MountainCarContinuous, Pendulum, StatelessCartPole};
use rlx::config::{closest_n, from_value};
use rlx::{Env, EnvError, TimeLimit};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// A registered env.
#[derive(Clone, Copy)]
pub struct EnvSpec {
    /// The name it is made by, e.g. `"CartPole-v1"`.
    pub name: &'static str,
    /// One line for `rlx list`.
    pub description: &'static str,
    /// The mean return at which the env counts as solved (Gymnasium's
    /// `reward_threshold`), if it has one.
    pub reward_threshold: Option<f64>,
    /// The keyword arguments `env_config` may set (`max_episode_steps`
    /// where the env has a time limit to change).
    pub kwargs: &'static [&'static str],
    /// Makes the env from its `name` (for errors) and keyword arguments.
    make: fn(&str, &Value) -> Result<Box<dyn Env>, EnvError>,
}

/// Keyword arguments every env accepts.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Common {
    /// Replaces the registered time limit (or adds one where there is none).
    max_episode_steps: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GoalVelocity {
    max_episode_steps: Option<usize>,
    goal_velocity: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TorqueNoise {
    max_episode_steps: Option<usize>,
    torque_noise_max: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Gravity {
    max_episode_steps: Option<usize>,
    g: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Side {
    max_episode_steps: Option<usize>,
    side: Option<usize>,
}

/// For envs that take no keyword arguments (a board game has no time limit).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NoArguments {}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Agents {
    max_episode_steps: Option<usize>,
    num_agents: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MinAtarOptions {
    max_episode_steps: Option<usize>,
    sticky_action_prob: Option<f64>,
    difficulty_ramping: Option<bool>,
}

/// Parses `kwargs` (a JSON object, or null for none) into `T`, naming the
/// env and the bad key on error.
fn parse<T: DeserializeOwned + Default>(env: &str, kwargs: &Value) -> Result<T, EnvError> {
    if kwargs.is_null() {
        return Ok(T::default());
    }
    from_value(kwargs.clone()).map_err(|e| EnvError::BadArgument { env: env.to_string(), message: e.to_string() })
}

/// `env` under a time limit of `steps`, if any.
fn limited<E: Env + 'static>(env: E, steps: Option<usize>) -> Box<dyn Env> {
    match steps {
        Some(n) => Box::new(TimeLimit::new(env, n)),
        None => Box::new(env),
    }
}

/// An env that takes only the [`Common`] keyword arguments, made by `new`
/// and limited to `default_steps` unless `max_episode_steps` says
/// otherwise: what the envs without options of their own share.
fn time_limited<E: Env + 'static>(
    name: &str,
    kwargs: &Value,
    new: fn() -> E,
    default_steps: usize,
) -> Result<Box<dyn Env>, EnvError> {
    let k: Common = parse(name, kwargs)?;
    Ok(limited(new(), Some(k.max_episode_steps.unwrap_or(default_steps))))
}

/// The MinAtar game `G` with the package's keyword arguments and defaults
/// ([`MinAtarOptions`]), under a time limit only if `max_episode_steps`
/// sets one: every MinAtar entry is this.
/// The entry of MinAtar game `G`: no reward threshold, the package's
/// keyword arguments.
const fn minatar_spec<G: Game + 'static>(name: &'static str, description: &'static str) -> EnvSpec {
    let kwargs = &["max_episode_steps", "sticky_action_prob", "difficulty_ramping"];
    EnvSpec { name, description, reward_threshold: None, kwargs, make: minatar::<G> }
}

fn minatar<G: Game + 'static>(name: &str, kwargs: &Value) -> Result<Box<dyn Env>, EnvError> {
    let k: MinAtarOptions = parse(name, kwargs)?;
    let env = MinAtar::<G>::with_options(k.sticky_action_prob.unwrap_or(0.1), k.difficulty_ramping.unwrap_or(true))?;
    Ok(limited(env, k.max_episode_steps))
}

const REGISTRY: &[EnvSpec] = &[
    EnvSpec {
        name: "CartPole-v1",
        description: "balance a pole on a cart; Box(4) obs, Discrete(2) actions, 500-step limit (Gymnasium 1.0)",
        reward_threshold: Some(475.0),
        kwargs: &["max_episode_steps"],
        make: |name, kw| time_limited(name, kw, CartPole::new, 500),
    },
    EnvSpec {
        name: "StatelessCartPole-v1",
        description: "CartPole-v1 observing cart position and pole angle only (no velocities): needs memory, e.g. model.use_lstm",
        reward_threshold: Some(475.0),
        kwargs: &["max_episode_steps"],
        make: |name, kw| time_limited(name, kw, StatelessCartPole::new, 500),
    },
    EnvSpec {
        name: "MaskedMaze-v0",
        description: "reach the goal of a 6×6 maze; Box(36) one-hot obs, Discrete(4) moves, walls masked (Env::action_mask), bumping ends the episode at -1, 50-step limit",
        reward_threshold: Some(0.8),
        kwargs: &["max_episode_steps"],
        make: |name, kw| time_limited(name, kw, MaskedMaze::new, 50),
    },
    EnvSpec {
        name: "DictCue-v0",
        description: "a Dict observation, a 5×5 (`side`) uint8 image with one lit pixel left or right of centre and a ±1 flag; one of 4 actions per (side, flag) pays 1 (needs both entries); 8 steps, best return 8, one entry 4, random 2",
        reward_threshold: Some(7.5),
        kwargs: &["max_episode_steps", "side"],
        make: |name, kw| {
            let k: Side = parse(name, kw)?;
            Ok(limited(DictCue::with_side(k.side.unwrap_or(5))?, k.max_episode_steps))
        },
    },
    EnvSpec {
        name: "MountainCar-v0",
        description: "drive an underpowered car up a hill; Box(2) obs, Discrete(3) actions, 200-step limit (Gymnasium 1.0)",
        reward_threshold: Some(-110.0),
        kwargs: &["max_episode_steps", "goal_velocity"],
        make: |name, kw| {
            let k: GoalVelocity = parse(name, kw)?;
            let env = MountainCar::with_goal_velocity(k.goal_velocity.unwrap_or(0.0))?;
            Ok(limited(env, Some(k.max_episode_steps.unwrap_or(200))))
        },
    },
    EnvSpec {
        name: "MountainCarContinuous-v0",
        description: "drive an underpowered car up a hill; Box(2) obs, Box(-1, 1, [1]) force (clipped), 999-step limit (Gymnasium 1.0)",
        reward_threshold: Some(90.0),
        kwargs: &["max_episode_steps", "goal_velocity"],
        make: |name, kw| {
            let k: GoalVelocity = parse(name, kw)?;
            let env = MountainCarContinuous::with_goal_velocity(k.goal_velocity.unwrap_or(0.0))?;
            Ok(limited(env, Some(k.max_episode_steps.unwrap_or(999))))
        },
    },
    EnvSpec {
        name: "Acrobot-v1",
        description: "swing up a two-link chain; Box(6) obs, Discrete(3) torques, 500-step limit (Gymnasium 1.0)",
        reward_threshold: Some(-100.0),
        kwargs: &["max_episode_steps", "torque_noise_max"],
        make: |name, kw| {
            let k: TorqueNoise = parse(name, kw)?;
            let env = Acrobot::with_torque_noise(k.torque_noise_max.unwrap_or(0.0))?;
            Ok(limited(env, Some(k.max_episode_steps.unwrap_or(500))))
        },
    },
    EnvSpec {
        name: "Pendulum-v1",
        description: "swing up and balance a pendulum; Box(3) obs, Box(-2, 2, [1]) torque (clipped), 200-step limit (Gymnasium 1.0)",
        reward_threshold: None,
        kwargs: &["max_episode_steps", "g"],
        make: |name, kw| {
            let k: Gravity = parse(name, kw)?;
            let env = Pendulum::with_gravity(k.g.unwrap_or(10.0))?;
            Ok(limited(env, Some(k.max_episode_steps.unwrap_or(200))))
        },
    },
    EnvSpec {
        name: "MultiAgentCartPole",
        description: "num_agents (default 2) CartPole-v1 copies, one per agent `agent_i`; an agent is done with its pole, the episode when all are (RLlib's example env)",
        reward_threshold: None,
        kwargs: &["max_episode_steps", "num_agents"],
        make: |name, kw| {
            let k: Agents = parse(name, kw)?;
            let (n, steps) = (k.num_agents.unwrap_or(2), k.max_episode_steps.unwrap_or(500));
            if n == 0 {
                return Err(EnvError::BadArgument { env: name.into(), message: "num_agents must be at least 1".into() });
            }
            let make: rlx::MultiAgentMaker = std::sync::Arc::new(move || {
                Ok(Box::new(crate::multi_cartpole::multi_agent_cartpole_limited(n, steps)) as Box<dyn rlx::MultiAgentEnv>)
            });
            Ok(Box::new(rlx::AgentSlots::new(make)?))
        },
    },
    EnvSpec {
        name: "TicTacToe",
        description: "two players (`player_0` X opens, `player_1` O) in turns; Box(18) board from the mover's side, Discrete(9) cells, free cells masked; +1 win, -1 loss, 0 draw (for self-play); no keyword arguments",
        reward_threshold: None,
        kwargs: &[],
        make: |name, kw| {
            let _: NoArguments = parse(name, kw)?;
            let make: rlx::MultiAgentMaker =
                std::sync::Arc::new(|| Ok(Box::new(rlx::GameEnv::new(crate::TicTacToe::new())) as Box<dyn rlx::MultiAgentEnv>));
            Ok(Box::new(rlx::AgentSlots::new(make)?))
        },
    },
    EnvSpec {
        name: "ConnectFour",
        description: "two players (`player_0` x opens, `player_1` o) in turns on 6 rows x 7 columns, OpenSpiel's rules; Box(0, 1, [6, 7, 2]) board from the mover's side, Discrete(7) columns, full columns masked; +1 win, -1 loss, 0 draw; no keyword arguments",
        reward_threshold: None,
        kwargs: &[],
        make: |name, kw| {
            let _: NoArguments = parse(name, kw)?;
            let make: rlx::MultiAgentMaker =
                std::sync::Arc::new(|| Ok(Box::new(rlx::GameEnv::new(crate::ConnectFour::new())) as Box<dyn rlx::MultiAgentEnv>));
            Ok(Box::new(rlx::AgentSlots::new(make)?))
        },
    },
    minatar_spec::<BreakoutGame>("MinAtar/Breakout-v1", "MinAtar Breakout; Box(0, 1, [10, 10, 4]) binary obs, Discrete(3) actions, sticky actions, no time limit (minatar 1.0.15)"),
    minatar_spec::<SpaceInvadersGame>("MinAtar/SpaceInvaders-v1", "MinAtar Space Invaders; Box(0, 1, [10, 10, 6]) binary obs, Discrete(4) actions, sticky actions, no time limit (minatar 1.0.15)"),
    minatar_spec::<AsterixGame>("MinAtar/Asterix-v1", "MinAtar Asterix; Box(0, 1, [10, 10, 4]) binary obs, Discrete(5) actions, sticky actions, no time limit (minatar 1.0.15)"),
    minatar_spec::<FreewayGame>("MinAtar/Freeway-v1", "MinAtar Freeway; Box(0, 1, [10, 10, 7]) binary obs, Discrete(3) actions, sticky actions, ends after 2,500 steps (minatar 1.0.15)"),
    minatar_spec::<SeaquestGame>("MinAtar/Seaquest-v1", "MinAtar Seaquest; Box(0, 1, [10, 10, 10]) binary obs, Discrete(6) actions, sticky actions, no time limit (minatar 1.0.15)"),
];

/// Creates the env registered as `name` with its default arguments.
///
/// # Errors
/// [`EnvError::Unknown`] listing the closest registered names.
pub fn make(name: &str) -> Result<Box<dyn Env>, EnvError> {
    make_with(name, &Value::Null)
}

/// Creates the env registered as `name` with keyword arguments `kwargs` (a
/// JSON object such as `{"max_episode_steps": 1000}`; `null` for none), as
/// Gymnasium's `make(name, **kwargs)`.
///
/// # Errors
/// [`EnvError::Unknown`] for an unknown name, [`EnvError::BadArgument`]
/// naming an unknown or invalid keyword argument.
///
/// A name starting with `gym:` is a Gymnasium id, made in a Python worker
/// process with `kwargs` passed to `gymnasium.make` ([`crate::gym`]); one
/// starting with `pettingzoo:` a PettingZoo env ([`crate::gym::pettingzoo`]).
pub fn make_with(name: &str, kwargs: &Value) -> Result<Box<dyn Env>, EnvError> {
    if name.starts_with(crate::gym::PREFIX) {
        return crate::gym::make(name, kwargs);
    }
    if name.starts_with(crate::gym::pettingzoo::PREFIX) {
        return crate::gym::pettingzoo::make(name, kwargs);
    }
    (spec(name)?.make)(name, kwargs)
}

/// The mean return at which the env `name` with `kwargs` counts as
/// solved, if it has one: the registry's, or for `gym:<id>` Gymnasium's
/// `spec.reward_threshold` (which asks a worker process).
///
/// # Errors
/// As [`make_with`].
pub fn reward_threshold(name: &str, kwargs: &Value) -> Result<Option<f64>, EnvError> {
    if name.starts_with(crate::gym::PREFIX) {
        return crate::gym::reward_threshold(name, kwargs);
    }
    if name.starts_with(crate::gym::pettingzoo::PREFIX) {
        return Ok(None);
    }
    Ok(spec(name)?.reward_threshold)
}

/// The registration of `name`.
///
/// # Errors
/// [`EnvError::Unknown`] listing the closest registered names.
pub fn spec(name: &str) -> Result<&'static EnvSpec, EnvError> {
    REGISTRY.iter().find(|s| s.name == name).ok_or_else(|| EnvError::Unknown {
        name: name.to_string(),
        closest: closest_n(name, REGISTRY.iter().map(|s| s.name), 3),
    })
}

/// Every registered env.
pub fn specs() -> &'static [EnvSpec] {
    REGISTRY
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    #[test]
    fn unknown_names_suggest_close_ones() {
        let err = super::make("CartPole-v0").err().unwrap().to_string();
        assert!(err.contains("CartPole-v0") && err.contains("CartPole-v1"), "{err}");
        assert!(super::make("CartPole-v1").is_ok());
        assert_eq!(super::spec("CartPole-v1").unwrap().reward_threshold, Some(475.0));
        let err = super::make("breakout").err().unwrap().to_string();
        assert!(err.contains("MinAtar/Breakout-v1"), "{err}");
    }

    #[test]
    fn kwargs_are_typed_and_checked() {
        use rlx::Action;
        let mut env = super::make_with("CartPole-v1", &json!({"max_episode_steps": 3})).unwrap();
        let mut obs = [0.0f32; 4];
        env.reset(Some(0), &mut obs).unwrap();
        let steps: Vec<_> = (0..3).map(|i| env.step(Action::Discrete(i % 2), &mut obs).unwrap()).collect();
        assert!(steps[2].truncated && !steps[1].truncated);

        let err = super::make_with("Pendulum-v1", &json!({"gravity": 9.8})).err().unwrap().to_string();
        assert!(err.contains("Pendulum-v1") && err.contains("gravity") && err.contains('g'), "{err}");
        let err =
            super::make_with("MinAtar/Breakout-v1", &json!({"sticky_action_prob": 2.0})).err().unwrap().to_string();
        assert!(err.contains("sticky_action_prob"), "{err}");
        let err = super::make_with("Acrobot-v1", &json!({"torque_noise_max": "lots"})).err().unwrap().to_string();
        assert!(err.contains("torque_noise_max"), "{err}");
        assert!(super::make_with("MountainCar-v0", &json!({"goal_velocity": 0.01})).is_ok());
    }

    #[test]
    fn every_registered_env_builds_steps_and_rejects_bad_actions() {
        use rlx::{Action, Space};
        for spec in super::specs() {
            let mut env = super::make(spec.name).unwrap();
            assert_eq!(env.name(), spec.name);
            if let Some(agents) = env.agent_ids() {
                // A multi-agent env steps as a vector env of its agents.
                let rows = agents.len();
                let make: rlx::EnvMaker = std::sync::Arc::new(move || super::make(spec.name));
                let mut vector = rlx::VectorEnv::build(make, 1, &rlx::EnvShards::default(), true).unwrap();
                vector.reset(1).unwrap();
                let d = vector.obs_dim();
                assert!(vector.observations().chunks(d).all(|o| vector.observation_space().contains_row(o)));
                let Space::Discrete { n } = vector.action_space().clone() else { unreachable!("discrete") };
                let bad = rlx::Column::I64 { data: vec![n; rows], width: 1 };
                let err = vector.step(&bad, &mut Default::default()).expect_err(spec.name).to_string();
                assert!(err.contains(spec.name), "{err}");
                continue;
            }
            let mut obs = vec![0.0f32; env.observation_space().flat_dim()];
            env.reset(Some(1), &mut obs).unwrap();
            assert!(env.observation_space().contains_row(&obs), "{}: {obs:?}", spec.name);
            let bad = match env.action_space().clone() {
                Space::Discrete { n } => env.step(Action::Discrete(n), &mut obs),
                Space::Box { low, .. } => env.step(Action::Continuous(&vec![f32::NAN; low.len()]), &mut obs),
                Space::MultiDiscrete { .. } | Space::Dict { .. } => unreachable!("no registered env acts in these"),
            };
            let err = bad.expect_err(spec.name).to_string();
            assert!(err.contains(spec.name), "{err}");
        }
    }
}
