//! Native resets against Gymnasium's and NumPy's own numbers, recorded by
//! `envs/scripts/record_resets.py`: NumPy's PCG64 outputs for eight seeds,
//! and for each classic-control env and seeds 0 to 19 the start after
//! `reset(seed=s)` and after two more unseeded resets. Everything is
//! compared bit for bit.

use rlx::Env;
use rlx_envs::pcg64::Pcg64;
use serde::Deserialize;

fn fixture<T: for<'de> Deserialize<'de>>(name: &str) -> T {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bits(values: &[String]) -> Vec<u64> {
    values.iter().map(|v| v.parse().unwrap()).collect()
}

#[derive(Deserialize)]
struct Generators {
    generators: Vec<Generator>,
}

#[derive(Deserialize)]
struct Generator {
    seed: String,
    raw: Vec<String>,
    random: Vec<String>,
    uniform: Vec<String>,
}

#[test]
fn pcg64_matches_numpy_bit_for_bit() {
    let recorded: Generators = fixture("numpy-pcg64.json");
    assert_eq!(recorded.generators.len(), 8);
    for g in &recorded.generators {
        let seed: u64 = g.seed.parse().unwrap();
        let mut rng = Pcg64::from_seed(seed);
        let raw: Vec<u64> = (0..g.raw.len()).map(|_| rng.next_u64()).collect();
        assert_eq!(raw, bits(&g.raw), "raw outputs of seed {seed}");
        let mut rng = Pcg64::from_seed(seed);
        let random: Vec<u64> = (0..g.random.len()).map(|_| rng.next_f64().to_bits()).collect();
        assert_eq!(random, bits(&g.random), "random() of seed {seed}");
        let mut rng = Pcg64::from_seed(seed);
        let uniform = [
            rng.uniform(-0.05, 0.05),
            rng.uniform(-0.6, -0.4),
            rng.uniform(-std::f64::consts::PI, std::f64::consts::PI),
        ];
        assert_eq!(uniform.map(f64::to_bits).to_vec(), bits(&g.uniform), "uniform() of seed {seed}");
    }
}

#[derive(Deserialize)]
struct Resets {
    resets: Vec<Reset>,
}

#[derive(Deserialize)]
struct Reset {
    env: String,
    seed: u64,
    starts: Vec<Start>,
}

#[derive(Deserialize)]
struct Start {
    obs: Vec<u32>,
    state: Vec<String>,
}

/// Resets `env` as recorded in `r` (seeded, then unseeded) and compares
/// each observation and `state(env)` bit for bit.
fn check<E: Env>(mut env: E, r: &Reset, state: impl Fn(&E) -> Vec<f64>) {
    for (i, start) in r.starts.iter().enumerate() {
        let mut obs = vec![0.0f32; start.obs.len()];
        env.reset((i == 0).then_some(r.seed), &mut obs).unwrap();
        let what = format!("{} seed {} reset {i}", r.env, r.seed);
        assert_eq!(obs.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), start.obs, "{what}: obs {obs:?}");
        let state: Vec<u64> = state(&env).iter().map(|x| x.to_bits()).collect();
        assert_eq!(state, bits(&start.state), "{what}: state");
    }
}

#[test]
fn seeded_resets_start_where_gymnasium_starts() {
    use rlx_envs::{Acrobot, CartPole, MountainCar, MountainCarContinuous, Pendulum};
    let recorded: Resets = fixture("gymnasium-resets.json");
    assert_eq!(recorded.resets.len(), 5 * 20);
    for r in &recorded.resets {
        match r.env.as_str() {
            "CartPole-v1" => check(CartPole::new(), r, |e| e.state().to_vec()),
            "MountainCar-v0" => check(MountainCar::new(), r, |e| e.state().to_vec()),
            "MountainCarContinuous-v0" => check(MountainCarContinuous::new(), r, |e| e.state().to_vec()),
            "Acrobot-v1" => check(Acrobot::new(), r, |e| e.state().to_vec()),
            "Pendulum-v1" => check(Pendulum::new(), r, |e| e.state().to_vec()),
            other => panic!("unexpected env {other}"),
        }
    }
}
