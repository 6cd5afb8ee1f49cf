//! Replays trajectories recorded from the `minatar` 1.0.15 package (see
//! `envs/scripts/record_minatar.py`) and checks rlx produces exactly the
//! same observations, rewards, terminations and truncations, with the same
//! random numbers: the fixtures' generator draws (sticky actions, ball
//! starts) come from NumPy's legacy `RandomState`, which
//! `rlx_envs::minatar::mt19937` reproduces bit for bit, also checked here
//! against recorded NumPy outputs.

use rlx::{Action, Env};
use rlx_envs::minatar::{AsterixGame, BreakoutGame, FreewayGame, SeaquestGame, SpaceInvadersGame};
use rlx_envs::minatar::{Game, MinAtar, Mt19937};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Fixture {
    env: String,
    episodes: Vec<Episode>,
}

#[derive(Deserialize)]
struct Episode {
    seed: Option<u64>,
    init_obs: String,
    actions: Vec<i64>,
    obs: Vec<String>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

fn read(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Decodes standard base64 (with padding).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 character {:?}", c as char),
        }
    };
    let bytes = text.as_bytes();
    assert_eq!(bytes.len() % 4, 0, "base64 length");
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        let n = chunk[..4 - pad].iter().fold(0u32, |acc, &c| acc << 6 | value(c)) << (6 * pad);
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
    }
    out
}

/// An observation as recorded: `np.packbits` of the flattened bool state.
fn decode_obs(text: &str, len: usize) -> Vec<f32> {
    let bytes = base64_decode(text);
    assert_eq!(bytes.len(), len.div_ceil(8));
    (0..len).map(|i| ((bytes[i / 8] >> (7 - i % 8)) & 1) as f32).collect()
}

fn show(obs: &[f32], channels: usize) -> String {
    let mut s = String::new();
    for ch in 0..channels {
        s.push_str(&format!("channel {ch}:\n"));
        for r in 0..10 {
            for c in 0..10 {
                s.push(if obs[(r * 10 + c) * channels + ch] == 1.0 { '#' } else { '.' });
            }
            s.push('\n');
        }
    }
    s
}

struct Coverage {
    steps: usize,
    terminations: usize,
    seeded: usize,
    max_return: f64,
    max_ramp: u32,
}

fn replay<G: Game>(fixture_name: &str) -> Coverage {
    let fixture: Fixture = serde_json::from_str(&read(fixture_name)).unwrap();
    assert_eq!(fixture.env, G::NAME);
    // One env for the whole file, as the recording: the sticky-action memory
    // carries over resets, seeded or not.
    let mut env = MinAtar::<G>::new();
    let dim = env.observation_space().flat_dim();
    let mut obs = vec![0.0f32; dim];
    let mut cov = Coverage { steps: 0, terminations: 0, seeded: 0, max_return: 0.0, max_ramp: 0 };
    for (e, ep) in fixture.episodes.iter().enumerate() {
        env.reset(ep.seed, &mut obs).unwrap();
        cov.seeded += ep.seed.is_some() as usize;
        let want = decode_obs(&ep.init_obs, dim);
        assert!(
            obs == want,
            "episode {e}: initial observation\n{}\nwanted\n{}",
            show(&obs, G::CHANNELS),
            show(&want, G::CHANNELS)
        );
        let mut ret = 0.0;
        for t in 0..ep.actions.len() {
            let step = env.step(Action::Discrete(ep.actions[t]), &mut obs).unwrap();
            let want = decode_obs(&ep.obs[t], dim);
            assert!(
                obs == want,
                "episode {e} step {t} (action {}): observation\n{}\nwanted\n{}",
                ep.actions[t],
                show(&obs, G::CHANNELS),
                show(&want, G::CHANNELS)
            );
            assert_eq!(step.reward, ep.rewards[t], "episode {e} step {t}: reward");
            assert_eq!(step.terminated, ep.terminated[t], "episode {e} step {t}: terminated");
            assert_eq!(step.truncated, ep.truncated[t], "episode {e} step {t}: truncated");
            assert!(env.observation_space().contains_row(&obs));
            ret += step.reward;
            cov.steps += 1;
            cov.terminations += step.terminated as usize;
            cov.max_ramp = cov.max_ramp.max(env.difficulty_ramp().unwrap_or(0));
        }
        cov.max_return = cov.max_return.max(ret);
    }
    cov
}

#[test]
fn breakout_matches_minatar() {
    let cov = replay::<BreakoutGame>("MinAtar-Breakout-v1");
    assert!(cov.steps >= 10_000 && cov.terminations >= 50 && cov.seeded >= 5, "{} {}", cov.steps, cov.terminations);
    // Some episode broke all 30 bricks, so the refill is covered.
    assert!(cov.max_return > 30.0, "{}", cov.max_return);
}

#[test]
fn space_invaders_matches_minatar() {
    let cov = replay::<SpaceInvadersGame>("MinAtar-SpaceInvaders-v1");
    assert!(cov.steps >= 8_000 && cov.terminations >= 50 && cov.seeded >= 5, "{} {}", cov.steps, cov.terminations);
    // Some episode cleared a wave, so the difficulty ramp is covered.
    assert!(cov.max_return > 24.0 && cov.max_ramp >= 1, "{} {}", cov.max_return, cov.max_ramp);
}

#[test]
fn asterix_matches_minatar() {
    let cov = replay::<AsterixGame>("MinAtar-Asterix-v1");
    assert!(cov.steps >= 10_000 && cov.terminations >= 50 && cov.seeded >= 5, "{} {}", cov.steps, cov.terminations);
    // Long episodes reached the ramp's faster spawns and moves.
    assert!(cov.max_return > 30.0 && cov.max_ramp >= 5, "{} {}", cov.max_return, cov.max_ramp);
}

#[test]
fn freeway_matches_minatar() {
    let cov = replay::<FreewayGame>("MinAtar-Freeway-v1");
    // Every episode that ended ran into the 2,500-step limit; crossings
    // re-drew the cars' speeds.
    assert!(cov.steps >= 9_000 && cov.terminations >= 3 && cov.seeded >= 3, "{} {}", cov.steps, cov.terminations);
    assert!(cov.max_return > 20.0, "{}", cov.max_return);
}

#[test]
fn seaquest_matches_minatar() {
    let cov = replay::<SeaquestGame>("MinAtar-Seaquest-v1");
    assert!(cov.steps >= 10_000 && cov.terminations >= 30 && cov.seeded >= 5, "{} {}", cov.steps, cov.terminations);
    // Some episode surfaced with divers, so the ramp moved.
    assert!(cov.max_return > 10.0 && cov.max_ramp >= 2, "{} {}", cov.max_return, cov.max_ramp);
}

#[test]
fn mt19937_matches_numpy_random_state() {
    let doc: Value = serde_json::from_str(&read("MinAtar-mt19937")).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 60);
    let mut ops = 0;
    for case in cases {
        let seed = case["seed"].as_u64().unwrap();
        let mut g = Mt19937::from_u64_seed(seed);
        for (i, op) in case["ops"].as_array().unwrap().iter().enumerate() {
            let op = op.as_array().unwrap();
            let at = format!("seed {seed} op {i} {op:?}");
            match op[0].as_str().unwrap() {
                "rand" => assert_eq!(g.random_sample(), op[1].as_f64().unwrap(), "{at}"),
                "randint" => {
                    let (lo, hi) = (op[1].as_i64().unwrap(), op[2].as_i64().unwrap());
                    assert_eq!(g.randint(lo, hi), Some(op[3].as_i64().unwrap()), "{at}");
                }
                "choice" => {
                    let n = op[1].as_u64().unwrap() as usize;
                    assert_eq!(g.choice(n), Some(op[2].as_u64().unwrap() as usize), "{at}");
                }
                "skip_u32" => {
                    for _ in 0..op[1].as_u64().unwrap() {
                        g.next_u32();
                    }
                }
                other => panic!("unknown op {other}"),
            }
            ops += 1;
        }
    }
    assert!(ops > 5000);
}

#[test]
fn registered_under_the_minatar_gym_names() {
    for (name, n, channels) in [
        ("MinAtar/Breakout-v1", 3, 4),
        ("MinAtar/SpaceInvaders-v1", 4, 6),
        ("MinAtar/Asterix-v1", 5, 4),
        ("MinAtar/Freeway-v1", 3, 7),
        ("MinAtar/Seaquest-v1", 6, 10),
    ] {
        let env = rlx_envs::make(name).unwrap();
        assert_eq!(env.name(), name);
        assert_eq!(env.action_space().to_string(), format!("Discrete({n})"));
        assert_eq!(env.observation_space().to_string(), format!("Box(0, 1, [10, 10, {channels}], uint8)"));
        assert_eq!(rlx_envs::spec(name).unwrap().reward_threshold, None);
    }
}
