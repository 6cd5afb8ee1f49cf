//! DreamerV3 through the `rlx` binary, with a tiny model on CartPole: the
//! world model's prediction loss falls while it trains, the run evaluates
//! and checkpoints, resumes from its checkpoint, and `rlx rollout` plays
//! the checkpoint (a recurrent policy: the evaluator carries the model's
//! state); bad settings are errors naming the key.

mod common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str]) -> Output {
    Command::new(RLX).args(args).output().expect("run rlx")
}

fn run_dirs(results: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    dirs
}

fn result_lines(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The sum of the world model's prediction losses in a result line.
fn prediction_loss(line: &serde_json::Value) -> Option<f64> {
    let l = &line["learner"];
    Some(l["decoder_loss"].as_f64()? + l["reward_loss"].as_f64()? + l["continue_loss"].as_f64()?)
}

const TINY: &str = r#"{"seed": 3, "model_size": "nano", "batch_size_B": 4, "batch_length_T": 16, "horizon_H": 5,
    "training_ratio": 16, "learning_starts": 200, "timesteps_per_iteration": 200, "world_model_lr": 0.003,
    "evaluation_interval": 3, "evaluation_duration": 2}"#;

#[test]
fn dreamer_v3_learns_its_world_model_resumes_and_rolls_out() {
    let results = common::tmp("dreamer_v3", "cartpole");
    let r = results.to_str().unwrap();
    let args = ["train", "--run", "DreamerV3", "--env", "CartPole-v1", "--config", TINY, "--results-dir", r];
    let out = rlx(&[&args[..], &["--stop", r#"{"timesteps_total": 1800}"#, "--checkpoint-freq", "3"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = run_dirs(&results).remove(0);
    let lines = result_lines(&dir);
    assert_eq!(lines.len(), 9);
    // About 1,600 env steps after learning starts, at 16 replayed rows per
    // step: 400 updates of 64 rows.
    let updates: f64 = lines.iter().map(|l| l["learner"]["num_updates"].as_f64().unwrap_or(0.0)).sum();
    assert!((395.0..=405.0).contains(&updates), "{updates} updates");
    let losses: Vec<f64> = lines.iter().filter_map(prediction_loss).collect();
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(last < 0.5 * first, "the world model's prediction loss went from {first} to {last}: {losses:?}");
    assert!(lines[2]["evaluation"]["episode_reward_mean"].as_f64().is_some(), "{}", lines[2]);

    // Resume from the last checkpoint (iteration 9) for one more iteration.
    let out =
        rlx(&[&args[..], &["--stop", r#"{"training_iteration": 10}"#, "--restore", dir.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not saved"), "the resumed run says what the checkpoint lacks: {stderr}");
    let resumed = run_dirs(&results).pop().unwrap();
    let iterations: Vec<u64> =
        result_lines(&resumed).iter().map(|l| l["training_iteration"].as_u64().unwrap()).collect();
    assert_eq!(iterations.last(), Some(&10));

    let out = rlx(&["rollout", dir.to_str().unwrap(), "--episodes", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    for (config, says) in [
        (r#"{"model_size": "XXL"}"#, "model_size"),
        (r#"{"training_ratio": -1}"#, "training_ratio"),
        (r#"{"buffer_size": 8, "learning_starts": 8}"#, "buffer_size"),
    ] {
        let out = rlx(&["train", "--run", "DreamerV3", "--env", "CartPole-v1", "--config", config, "--results-dir", r]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{config}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(says) && !stderr.contains("panicked"), "{stderr}");
    }
    std::fs::remove_dir_all(results).unwrap();
}
