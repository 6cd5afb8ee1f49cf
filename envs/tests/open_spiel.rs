//! ConnectFour against OpenSpiel's `connect_four` (the `open_spiel`
//! package): random games of at least 10,000 positions in all, replayed
//! move for move there, agree on every position's legal moves, player to
//! move, end, returns and board.
//!
//! This needs Python with OpenSpiel: `rlx_envs::gym::testing::python`
//! prepares `target/python` on first use, or the test skips with a printed
//! reason (a failure under `RLX_REQUIRE_PYTHON=1`, as in CI).

use rlx::game::Game;
use rlx_envs::gym::testing::python;
use rlx_envs::ConnectFour;
use serde_json::{json, Value};

#[test]
fn connect_four_agrees_with_open_spiel_over_10000_random_positions() {
    let Some(python) = python() else { return };
    let mut rng = 0x5EEDu64;
    let mut next = |n: usize| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) as usize % n
    };
    let (mut games, mut positions, mut ends) = (Vec::new(), 0, [0usize; 3]);
    while positions < 10_000 {
        let mut game = ConnectFour::new();
        let mut moves: Vec<usize> = Vec::new();
        let mut record = Vec::new();
        loop {
            let over = game.is_terminal();
            record.push(json!({
                "moves": moves,
                "terminal": over,
                "returns": if over { json!([game.terminal_value(0), game.terminal_value(1)]) } else { Value::Null },
                "legal": game.legal_actions(),
                "to_move": game.to_move(),
                "board": game.render(),
            }));
            positions += 1;
            if over {
                ends[(game.terminal_value(0).unwrap() + 1.0) as usize] += 1;
                break;
            }
            let legal = game.legal_actions();
            let a = legal[next(legal.len())];
            game.play(a).unwrap();
            moves.push(a);
        }
        games.push(Value::Array(record));
    }
    assert!(ends.iter().all(|&n| n > 0), "wins, losses and draws all occur: {ends:?}");
    let dir = std::env::temp_dir().join(format!("rlx-open-spiel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("games.json");
    std::fs::write(&file, serde_json::to_vec(&games).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/open_spiel_connect_four.py");
    let out = std::process::Command::new(python).arg(script).arg(&file).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), format!("{positions} positions agree"));
}
