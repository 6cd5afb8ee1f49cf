//! Episode videos through the binary: `rlx rollout --video` writes a GIF
//! (decoded here) or an MP4 (counted by ffprobe) with one frame per env
//! step of the episode, showing the env's state; `record_video_interval`
//! writes the first evaluation episode of the evaluations it names into
//! the run directory, frame for step, also when evaluation workers play
//! and the driver replays their first episode; MinAtar, a board game and a
//! Gymnasium env draw; bad flags and keys are named.
//!
//! MP4 needs ffmpeg: without it that test skips with a printed reason (a
//! failure under `RLX_REQUIRE_FFMPEG=1`, as in CI). The Gymnasium case
//! needs Python as the other bridge tests do (`RLX_REQUIRE_PYTHON=1`).

mod common;
use rlx::Env;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(RLX).args(args).envs(envs.iter().copied()).output().expect("run rlx")
}

/// A short `algorithm` run on `env` with `config`, checkpointed at the
/// end; its run directory.
fn train(name: &str, algorithm: &str, env: &str, config: &str, iterations: u64, envs: &[(&str, &str)]) -> PathBuf {
    let results = common::tmp("video", name);
    let stop = format!(r#"{{"training_iteration": {iterations}}}"#);
    let args = ["train", "--run", algorithm, "--env", env, "--config", config, "--stop", &stop, "--checkpoint-at-end"];
    let out = rlx(&[&args[..], &["--results-dir", results.to_str().unwrap()]].concat(), envs);
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path()
}

/// The frames of a GIF, as (width, height, RGBA pixels).
fn gif_frames(path: &Path) -> Vec<(u16, u16, Vec<u8>)> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(std::fs::File::open(path).unwrap()).unwrap();
    let mut frames = Vec::new();
    while let Some(f) = decoder.read_next_frame().unwrap() {
        frames.push((f.width, f.height, f.buffer.to_vec()));
    }
    frames
}

/// `rlx rollout --episodes 1 --video <file>` of `dir`; the episode's
/// length, from what it printed.
fn rollout_video(dir: &Path, video: &Path, envs: &[(&str, &str)]) -> u64 {
    let out = rlx(&["rollout", dir.to_str().unwrap(), "--episodes", "1", "--video", video.to_str().unwrap()], envs);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains(&format!("video: {}", video.display())), "{said}");
    let line = said.lines().find(|l| l.starts_with("episode   1:")).unwrap_or_else(|| panic!("{said}"));
    line.rsplit("length ").next().unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

/// The pixel at (x, y) of an RGBA frame `width` wide.
fn pixel(rgba: &[u8], width: u16, x: f64, y: f64) -> [u8; 3] {
    let i = 4 * (y as usize * usize::from(width) + x as usize);
    [rgba[i], rgba[i + 1], rgba[i + 2]]
}

/// A CartPole rollout's GIF has a frame per step, 600×400 as Gymnasium's,
/// and the first shows the cart and the pole where the env's first state
/// puts them (rollout resets episode 1 with seed 1,000,000).
#[test]
fn a_rollout_gif_has_a_frame_per_step_showing_the_state() {
    let dir = train("cartpole", "PPO", "CartPole-v1", "{}", 1, &[]);
    let video = dir.join("episode.gif");
    let length = rollout_video(&dir, &video, &[]);
    let frames = gif_frames(&video);
    assert_eq!(frames.len() as u64, length, "one frame per step");
    assert!(length > 5, "{length}");
    let (w, h, first) = &frames[0];
    assert_eq!((*w, *h), (600, 400));
    let mut env = rlx_envs::CartPole::new();
    env.reset(Some(1_000_000), &mut [0.0; 4]).unwrap();
    let [x, _, theta, _] = env.state();
    let cart = 300.0 + x * 125.0;
    assert_eq!(pixel(first, *w, cart - 20.0, 310.0), [0, 0, 0], "the cart at x = {x}");
    let mid = (cart + 80.0 * theta.sin(), 292.5 - 80.0 * theta.cos());
    assert_eq!(pixel(first, *w, mid.0, mid.1), [202, 152, 101], "the pole at θ = {theta}");
    assert_eq!(pixel(first, *w, cart + 150.0, 100.0), [255, 255, 255], "nothing else");
    let moved = frames.iter().filter(|(_, _, f)| f != first).count();
    assert!(moved as u64 >= length - 2, "the frames follow the episode: {moved} of {length} differ from the first");
}

/// MP4 through ffmpeg: ffprobe counts a frame per step.
#[test]
fn a_rollout_mp4_has_a_frame_per_step() {
    if !rlx::video::ffmpeg_available() {
        assert!(
            std::env::var("RLX_REQUIRE_FFMPEG").map_or(true, |v| v != "1"),
            "RLX_REQUIRE_FFMPEG=1, but no ffmpeg on the PATH"
        );
        println!("skipped: no ffmpeg on the PATH to write MP4; set RLX_REQUIRE_FFMPEG=1 to make this an error");
        return;
    }
    let dir = train("pendulum", "PPO", "Pendulum-v1", "{}", 1, &[]);
    let video = dir.join("episode.mp4");
    let length = rollout_video(&dir, &video, &[]);
    assert_eq!(length, 200, "Pendulum's episodes are 200 steps");
    let probe = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames,width,height,codec_name", "-of", "csv=p=0"])
        .arg(&video)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&probe.stdout);
    assert_eq!(said.trim(), format!("h264,500,500,{length}"), "{said}{}", String::from_utf8_lossy(&probe.stderr));
}

/// `record_video_interval` records the first evaluation episode of every
/// second evaluation: the video has as many frames as result.json says
/// that episode had steps. With an evaluation worker the driver replays
/// the worker's first episode, and the replay is that episode.
#[test]
fn evaluation_videos_hold_the_first_evaluation_episode() {
    for (name, workers) in [("evaluation_local", 0), ("evaluation_workers", 1)] {
        let config = format!(
            r#"{{"evaluation_interval": 1, "evaluation_duration": 1, "evaluation_num_workers": {workers},
                "record_video_interval": 2}}"#
        );
        let dir = train(name, "PPO", "CartPole-v1", &config, 2, &[]);
        let videos: Vec<String> = std::fs::read_dir(dir.join("videos"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(videos, ["iteration_000002.gif"], "{name}");
        let results = std::fs::read_to_string(dir.join("result.json")).unwrap();
        let second: Value = serde_json::from_str(results.lines().nth(1).unwrap()).unwrap();
        let length = second["evaluation"]["episode_len_mean"].as_f64().unwrap();
        let frames = gif_frames(&dir.join("videos/iteration_000002.gif"));
        assert_eq!(frames.len() as f64, length, "{name}: a frame per step of the evaluation episode");
    }
}

/// MinAtar draws its grid (200×200) and a board game its board: a frame
/// per move, and the board fills up.
#[test]
fn minatar_and_board_games_draw() {
    let dir = train(
        "breakout",
        "PPO",
        "MinAtar/Breakout-v1",
        r#"{"train_batch_size": 512, "sgd_minibatch_size": 128}"#,
        1,
        &[],
    );
    let video = dir.join("breakout.gif");
    let length = rollout_video(&dir, &video, &[]);
    let frames = gif_frames(&video);
    assert_eq!(frames.len() as u64, length);
    assert!(frames.iter().all(|(w, h, _)| (*w, *h) == (200, 200)));
    let dir = train("tictactoe", "AlphaZero", "TicTacToe", r#"{"num_simulations": 8}"#, 1, &[]);
    let video = dir.join("game.gif");
    let out = rlx(&["rollout", dir.to_str().unwrap(), "--episodes", "1", "--video", video.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    let moves: usize = said.split("length ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let frames = gif_frames(&video);
    assert_eq!(frames.len(), moves, "a frame per move: {said}");
    assert!((5..=9).contains(&moves), "{said}");
    // The empty board first, then one more mark per move (X red, O blue):
    // count the cells whose centre is marked.
    let marked = |rgba: &[u8]| {
        (0..9)
            .filter(|i| {
                let (cx, cy) = (100.0 * (i % 3) as f64 + 50.0, 100.0 * (i / 3) as f64 + 50.0);
                // An X crosses its centre; an O's ring lies 28 px out.
                pixel(rgba, 300, cx, cy) == [210, 40, 40] || pixel(rgba, 300, cx + 28.0, cy) == [40, 80, 210]
            })
            .count()
    };
    let counts: Vec<usize> = frames.iter().map(|(_, _, f)| marked(f)).collect();
    assert_eq!(counts, (0..moves).collect::<Vec<_>>(), "{said}");
}

/// A Gymnasium env draws through its `rgb_array` rendering.
#[test]
fn a_gymnasium_env_draws_through_rgb_array() {
    let Some(python) = rlx_envs::gym::testing::python() else { return };
    let envs = [("RLX_PYTHON", python.to_str().unwrap())];
    let dir = train("gym_cartpole", "PPO", "gym:CartPole-v1", "{}", 1, &envs);
    let video = dir.join("gym.gif");
    let length = rollout_video(&dir, &video, &envs);
    let frames = gif_frames(&video);
    assert_eq!(frames.len() as u64, length);
    assert!(frames.iter().all(|(w, h, _)| (*w, *h) == (600, 400)));
}

/// Bad requests are named before anything plays.
#[test]
fn bad_video_requests_are_named() {
    let results = common::tmp("video", "bad");
    let r = results.to_str().unwrap();
    // One iteration at most, should a bad config ever be let through.
    let stop = r#"{"training_iteration": 1}"#;
    let fails = |config: &str, env: &str| {
        let out =
            rlx(&["train", "--run", "PPO", "--env", env, "--config", config, "--stop", stop, "--results-dir", r], &[]);
        assert!(!out.status.success(), "{config} on {env} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = fails(r#"{"evaluation_interval": 2, "record_video_interval": 3}"#, "CartPole-v1");
    assert!(e.contains("record_video_interval") && e.contains("multiple of evaluation_interval (2)"), "{e}");
    let e = fails(r#"{"evaluation_interval": 1, "record_video_interval": 1}"#, "MaskedMaze-v0");
    assert!(e.contains("record_video_interval") && e.contains("draws no frames"), "{e}");
    let e = fails(r#"{"evaluation_interval": 1, "record_video_format": "avi"}"#, "CartPole-v1");
    assert!(e.contains("record_video_format") && e.contains("gif"), "{e}");
    // Copies in env shard actors draw nothing; the error's advice works.
    let sharded = r#"{"evaluation_interval": 1, "record_video_interval": 1, "env_shards": {"num_shards": 2}"#;
    let e = fails(&format!("{sharded}}}"), "CartPole-v1");
    assert!(e.contains("record_video_interval") && e.contains("env shard actors"), "{e}");
    let advised = format!(r#"{sharded}, "evaluation_config": {{"env_shards": {{"num_shards": 0}}}}}}"#);
    let dir = train("sharded_training", "PPO", "CartPole-v1", &advised, 1, &[]);
    assert!(dir.join("videos/iteration_000001.gif").is_file());
    let dir = train("bad_rollout", "PPO", "MaskedMaze-v0", "{}", 1, &[]);
    let d = dir.to_str().unwrap();
    let out = rlx(&["rollout", d, "--video", dir.join("x.webm").to_str().unwrap()], &[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("x.webm") && e.contains(".gif or .mp4"), "{e}");
    let out = rlx(&["rollout", d, "--video", dir.join("x.gif").to_str().unwrap()], &[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("MaskedMaze-v0 draws no frames"), "{e}");
    assert!(!dir.join("x.gif").exists() && !dir.join("x.gif.part").exists(), "no partial video is left");
    let out = rlx(&["rollout", d, "--fps", "30"], &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--video"));
}
