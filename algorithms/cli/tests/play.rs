//! AlphaZero through the `rlx` binary: `rlx train --run AlphaZero` on
//! TicTacToe writes the arena's win, draw and loss shares to
//! `result.json`, checkpoints and resumes, and self-plays on the actix
//! backend; `rlx play` lets a person play
//! the checkpoint in the terminal, telling them what is wrong with a bad
//! move and asking again; bad input (a game without cloning support, a
//! bad `num_simulations`, an unknown arena opponent, `nodes` without a
//! cookie) is an error naming the problem.

mod common;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str]) -> Output {
    Command::new(RLX).args(args).output().expect("run rlx")
}

fn run_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn result_lines(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `rlx train --run AlphaZero --env TicTacToe` with `config`, `stop` and
/// `flags`, its results under `results`.
fn train_tic_tac_toe(config: &str, stop: &str, results: &Path, flags: &[&str]) -> Output {
    let mut args = vec!["train", "--run", "AlphaZero", "--env", "TicTacToe", "--config", config, "--stop", stop];
    args.extend(flags);
    args.extend(["--results-dir", results.to_str().unwrap()]);
    rlx(&args)
}

/// `rlx play` with `input` typed in; returns its stdout.
fn play(args: &[&str], input: &str) -> String {
    let mut child =
        Command::new(RLX).arg("play").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    // The game prints a few KiB: well within the pipe's buffer.
    let status = common::wait_with_timeout(&mut child, std::time::Duration::from_secs(120));
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(status.success(), "{stdout}");
    stdout
}

fn fails(args: &[&str]) -> String {
    let out = rlx(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: ") && !stderr.contains("panicked"), "{args:?}: {stderr}");
    stderr
}

/// Self-play evaluators on the actix backend, each with two search
/// threads: every iteration's games arrive, one row a move.
#[test]
fn alpha_zero_self_plays_on_the_actix_backend() {
    let results = common::tmp("play", "actix");
    let config = r#"{"backend": "actix", "num_workers": 2, "num_search_workers": 2, "games_per_iteration": 16,
        "num_simulations": 20, "arena_interval": 0}"#;
    let out = train_tic_tac_toe(config, r#"{"training_iteration": 3}"#, &results, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = result_lines(&run_dir(&results));
    assert_eq!(lines.len(), 3);
    for line in &lines {
        assert_eq!(line["episodes_this_iter"], 16, "{line}");
        let moves = line["timesteps_this_iter"].as_u64().unwrap();
        assert!((16 * 5..=16 * 9).contains(&moves), "{line}");
    }
    std::fs::remove_dir_all(results).unwrap();
}

#[test]
fn alpha_zero_trains_resumes_and_plays_a_person() {
    let results = common::tmp("play", "alpha-zero");
    let config = r#"{"seed": 1, "num_workers": 1, "num_search_workers": 2, "games_per_iteration": 16,
        "num_simulations": 30, "arena_interval": 2, "arena_games": 10, "arena_opponents": ["random", "minimax", "mcts_20"]}"#;
    let out = train_tic_tac_toe(config, r#"{"training_iteration": 4}"#, &results, &["--checkpoint-at-end"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = run_dir(&results);
    let lines = result_lines(&dir);
    assert_eq!(lines.len(), 4);
    assert!(lines[0].get("evaluation").is_none(), "the arena runs every 2 iterations: {}", lines[0]);
    for line in [&lines[1], &lines[3]] {
        for opponent in ["random", "minimax", "mcts_20"] {
            let record = &line["evaluation"]["arena"][opponent];
            let shares: f64 = ["win", "draw", "loss"].iter().map(|k| record[k].as_f64().unwrap()).sum();
            assert!((shares - 1.0).abs() < 1e-9, "{opponent}: {record}");
            assert_eq!(record["games"], 10, "{record}");
        }
        assert!(line["evaluation"]["arena"]["minimax"]["win"].as_f64() == Some(0.0), "nobody beats minimax: {line}");
    }
    // 16 games of 5 to 9 moves per iteration.
    let moves = lines[0]["timesteps_this_iter"].as_u64().unwrap();
    assert!((16 * 5..=16 * 9).contains(&moves), "{moves}");

    // Resume for two more iterations.
    let resumed = results.join("resumed");
    let out = rlx(&[
        "train",
        "--restore",
        dir.to_str().unwrap(),
        "--stop",
        r#"{"training_iteration": 6}"#,
        "--checkpoint-at-end",
        "--results-dir",
        resumed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let iterations: Vec<u64> =
        result_lines(&run_dir(&resumed)).iter().map(|l| l["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations, (1..=6).collect::<Vec<_>>());

    // A person plays X: a word, a cell off the board and a taken cell are
    // refused with the legal moves; every cell in turn finishes the game.
    let stdout = play(&[dir.to_str().unwrap()], "hello\n9\n4\n4\n0\n1\n2\n3\n5\n6\n7\n8\n");
    assert!(stdout.contains("you are player_0"), "{stdout}");
    assert!(stdout.contains("`hello` is not a move here: type one of 0 1 2 3 4 5 6 7 8"), "{stdout}");
    assert!(stdout.contains("`9` is not a move here"), "{stdout}");
    assert!(stdout.contains("taken or off the board"), "{stdout}");
    assert!(stdout.contains("AlphaZero plays "), "{stdout}");
    assert!(["You win.", "You lose.", "A draw."].iter().any(|end| stdout.contains(end)), "{stdout}");
    // The second seat, the network alone, and input that ends early.
    let stdout = play(&[dir.to_str().unwrap(), "--seat", "1", "--no-search"], "");
    assert!(stdout.contains("its network alone") && stdout.contains("input ended"), "{stdout}");

    // The checkpoint, the one before it (iteration 4 of 6), minimax and
    // random play in a round robin without random openings (from which
    // minimax could lose): nobody beats minimax, the trained checkpoints
    // rate far above random play, and every pairing played all its games.
    let table_file = results.join("arena.json");
    let resumed_dir = run_dir(&resumed);
    let out = rlx(&[
        "arena",
        resumed_dir.to_str().unwrap(),
        dir.to_str().unwrap(),
        "--opponent",
        "random",
        "--opponent",
        "minimax",
        "--games",
        "20",
        "--opening-plies",
        "0",
        "--out",
        table_file.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout
            .contains("TicTacToe: 4 players, 20 games a pairing (half with each first, each two after 0 random plies)")
            && stdout.contains("Elo with random at 0"),
        "{stdout}"
    );
    let table: serde_json::Value = serde_json::from_slice(&std::fs::read(&table_file).unwrap()).unwrap();
    let pairings = table["pairings"].as_array().unwrap();
    assert_eq!(pairings.len(), 6, "{table}");
    for p in pairings {
        let played: u64 = ["a_wins", "draws", "b_wins"].iter().map(|k| p[k].as_u64().unwrap()).sum();
        assert_eq!(played, 20, "{p}");
        if p["b"] == "minimax" {
            assert_eq!(p["a_wins"], 0, "nobody beats minimax: {p}");
        }
    }
    let elo = |name: &str| {
        let s = table["standings"].as_array().unwrap().iter().find(|s| s["name"] == name).expect(name);
        s["elo"].as_f64().unwrap()
    };
    assert_eq!(elo("random"), 0.0);
    assert!(elo("minimax") > 300.0, "{table}");
    for checkpoint in ["checkpoint_000004", "checkpoint_000006"] {
        assert!(elo(checkpoint) > 200.0, "{checkpoint}: {table}");
    }
    let e = fails(&["arena", dir.to_str().unwrap(), "--games", "3", "--opponent", "random"]);
    assert!(e.contains("--games must be even"), "{e}");
    let e = fails(&["arena", dir.to_str().unwrap(), "--opponent", "alphabeta"]);
    assert!(e.contains("--opponent") && e.contains("`alphabeta` is not an opponent"), "{e}");
    let e = fails(&["arena", dir.to_str().unwrap()]);
    assert!(e.contains("two players or more"), "{e}");

    let e = fails(&["play", dir.to_str().unwrap(), "--simulations", "0"]);
    assert!(e.contains("--simulations"), "{e}");
    let e = fails(&["train", "--run", "AlphaZero", "--env", "CartPole-v1", "--results-dir", results.to_str().unwrap()]);
    assert!(e.contains("AlphaZero searches games it can copy") && e.contains("`CartPole-v1` is not one"), "{e}");
    let rejected = |config: &str| {
        let results = results.to_str().unwrap();
        fails(&["train", "--run", "AlphaZero", "--env", "TicTacToe", "--config", config, "--results-dir", results])
    };
    let e = rejected(r#"{"num_simulations": 0}"#);
    assert!(e.contains("num_simulations") && e.contains("must be in [1, 1000000]"), "{e}");
    let e = rejected(r#"{"arena_opponents": ["mcts_zero"]}"#);
    assert!(e.contains("arena_opponents") && e.contains("mcts_zero"), "{e}");
    // Self-play evaluators go on nodes like any evaluators: "nodes" needs
    // the nodes' cookie.
    let out = Command::new(RLX)
        .args(["train", "--run", "AlphaZero", "--env", "TicTacToe", "--results-dir", results.to_str().unwrap()])
        .args(["--config", r#"{"nodes": ["127.0.0.1:9"]}"#])
        .env_remove("RLX_COOKIE")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && e.contains("\"nodes\" needs the nodes' cookie"), "{e}");
    std::fs::remove_dir_all(results).unwrap();
}
