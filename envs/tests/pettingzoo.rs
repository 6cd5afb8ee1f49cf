//! The PettingZoo bridge (`pettingzoo:<id>`) against PettingZoo itself:
//! its tic-tac-toe plays the bundled `TicTacToe`'s games move for move
//! (turns, masks, rewards, waiting rows and boards), a parallel env steps
//! its agents at once with their own ends, and bad envs and names are
//! errors that say why.
//!
//! These need Python with PettingZoo: `rlx_envs::gym::testing::python`
//! prepares `target/python` on first use, or the tests skip with a printed
//! reason (a failure under `RLX_REQUIRE_PYTHON=1`, as in CI).

use rlx::sample_batch::Column;
use rlx::vector_env::VectorStep;
use rlx::{EnvMaker, EnvShards, VectorEnv};
use rlx_envs::gym::testing::python;
use serde_json::{json, Value};
use std::sync::Arc;

fn vector(name: &'static str, config: Value, copies: usize) -> VectorEnv {
    let make: EnvMaker = Arc::new(move || rlx_envs::make_with(name, &config));
    let mut env = VectorEnv::build(make, copies, &EnvShards::default(), true).unwrap();
    env.reset(3).unwrap();
    env
}

/// PettingZoo's board is `[cell, (mine, theirs)]`, the bundled one
/// `[(mine, theirs), cell]`: the same 18 numbers in another order.
fn native_order(pz: &[f32]) -> Vec<f32> {
    (0..18).map(|k| pz[(k % 9) * 2 + k / 9]).collect()
}

/// Random legal games on both, with the same moves: every row of every
/// step agrees (PettingZoo's `player_1` is the bundled `player_0`, X).
/// Masks are compared where a player has a decision to make: PettingZoo
/// masks every cell of the player who just moved, which rlx reads as
/// all legal; the bundled game shows it the free cells (neither is used:
/// that row is completed by the player's next waiting row).
#[test]
fn pettingzoo_tic_tac_toe_plays_the_bundled_games_move_for_move() {
    if python().is_none() {
        return;
    }
    let copies = 3;
    let mut pz = vector("pettingzoo:classic/tictactoe-v3", Value::Null, copies);
    let mut native = vector("TicTacToe", Value::Null, copies);
    assert_eq!(pz.name(), "pettingzoo:classic/tictactoe-v3");
    assert_eq!(pz.num_envs(), 2 * copies, "a row per player per copy");
    assert_eq!(pz.action_space(), native.action_space());
    let (mut a, mut b) = (VectorStep::default(), VectorStep::default());
    let mut rng = 12345u64;
    let (mut games, mut wins) = (0, 0);
    let mut pending = vec![false; 2 * copies];
    let deciding = |masks: &[f32], pending: &[bool]| -> Vec<Vec<f32>> {
        masks.chunks(9).zip(pending).filter(|(_, &p)| !p).map(|(m, _)| m.to_vec()).collect()
    };
    for step in 0..400 {
        for (r, (x, y)) in pz.observations().chunks(18).zip(native.observations().chunks(18)).enumerate() {
            assert_eq!(native_order(x), y, "step {step}, row {r}");
        }
        let (x, y) = (pz.action_masks().unwrap(), native.action_masks().unwrap());
        assert_eq!(deciding(x, &pending), deciding(y, &pending), "step {step}");
        // A random legal move for every row (the waiting ones are ignored).
        let masks = native.action_masks().expect("masked").to_vec();
        let actions: Vec<i64> = masks
            .chunks(9)
            .map(|m| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let legal: Vec<i64> = (0..9).filter(|&c| m[c as usize] > 0.5).collect();
                legal[(rng >> 33) as usize % legal.len()]
            })
            .collect();
        let actions = Column::I64 { data: actions, width: 1 };
        pz.step(&actions, &mut a).unwrap();
        native.step(&actions, &mut b).unwrap();
        assert_eq!((&a.rewards, &a.terminated, &a.truncated), (&b.rewards, &b.terminated, &b.truncated), "step {step}");
        assert_eq!((&a.waiting, &a.pending, &a.interrupted), (&b.waiting, &b.pending, &b.interrupted), "step {step}");
        pending.clone_from(&b.pending);
        assert_eq!(deciding(&a.new_action_mask, &pending), deciding(&b.new_action_mask, &pending), "step {step}");
        for (x, y) in a.new_obs.chunks(18).zip(b.new_obs.chunks(18)) {
            assert_eq!(native_order(x), y, "step {step}");
        }
        games += a.terminated.iter().step_by(2).filter(|&&t| t).count();
        wins += a.rewards.iter().filter(|&&r| r > 0.0).count();
    }
    assert!(games > 30 && wins > 15, "{games} games, {wins} won");
    assert_eq!(pz.drain_finished(), native.drain_finished());
}

/// A parallel env (`rlx_test_agents.two_corridors`): both agents step at
/// once, each ends on its own, and the episode when both have.
#[test]
fn a_parallel_pettingzoo_env_steps_its_agents_at_once() {
    if python().is_none() {
        return;
    }
    let mut env = vector("pettingzoo:rlx_test_agents.two_corridors", json!({"length": 3}), 1);
    assert_eq!(env.num_envs(), 2);
    // The cell one-hot, then the agent's own index.
    let start = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    assert_eq!(env.observations(), &start);
    let mut out = VectorStep::default();
    // `left` goes forward with 0 and arrives in 2 steps; `right` (forward
    // with 1) goes back against the wall first, and arrives in 3.
    let mut seen = Vec::new();
    for m in [[0, 0], [0, 1], [1, 1]] {
        env.step(&Column::I64 { data: m.to_vec(), width: 1 }, &mut out).unwrap();
        seen.push((out.rewards.clone(), out.terminated.clone(), out.interrupted.clone()));
    }
    assert_eq!(seen[0], (vec![-0.1, -0.1], vec![false, false], vec![false, false]));
    assert_eq!(seen[1], (vec![1.0, -0.1], vec![true, false], vec![false, false]));
    // `left` is out of the episode: its row is no transition.
    assert_eq!(seen[2], (vec![0.0, 1.0], vec![false, true], vec![true, false]));
    let finished: Vec<(Option<u32>, f64)> = env.drain_finished().iter().map(|e| (e.agent, e.episode_return)).collect();
    assert_eq!(finished.len(), 3, "{finished:?}");
    assert!(finished[0].0 == Some(0) && (finished[0].1 - 0.9).abs() < 1e-6, "{finished:?}");
    assert!(finished[1].0 == Some(1) && (finished[1].1 - 0.8).abs() < 1e-6, "{finished:?}");
    assert_eq!(finished[2].0, None, "then the whole episode");
    // Reset after the episode: both start again.
    assert_eq!(env.observations(), &start);
}

#[test]
fn bad_pettingzoo_envs_and_names_are_errors_that_say_why() {
    if python().is_none() {
        return;
    }
    let err = |name: &str, config: Value| rlx_envs::make_with(name, &config).err().expect(name).to_string();
    let e = err("pettingzoo:", Value::Null);
    assert!(e.contains("no PettingZoo id"), "{e}");
    let e = err("pettingzoo:classic/no-such-game-v0", Value::Null);
    assert!(e.contains("no-such-game") && e.contains("registry"), "{e}");
    let e = err("pettingzoo:classic/tictactoe-v3", json!([1]));
    assert!(e.contains("env_config must be an object"), "{e}");
    let e = err("pettingzoo:rlx_test_agents.unequal_spaces", Value::Null);
    assert!(e.contains("share their spaces") && e.contains("small"), "{e}");
    let e = err("pettingzoo:classic/tictactoe-v3", json!({"no_such_argument": 1}));
    assert!(e.contains("no_such_argument") && e.contains("Traceback"), "{e}");
}
