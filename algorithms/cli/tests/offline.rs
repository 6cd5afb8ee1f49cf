//! Learning from files, through the built `rlx` binary: a run writes what
//! it samples (`output`, JSON lines or Parquet), `rlx dataset info` counts
//! it, and DQN, BC, MARWIL and CQL learn from it (`input`); a run killed
//! while writing leaves whole files and one partial file that readers
//! skip. With Python: pyarrow reads rlx's Parquet, and rlx reads and
//! learns from Minari's datasets.

mod common;

use rlx_envs::gym::testing::python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str]) -> Output {
    let out = Command::new(RLX).args(args).stdin(Stdio::null()).output().expect("run rlx");
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every line of a run's `result.json`.
fn results(run: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run.join("result.json")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The evaluation returns a run reported, in order.
fn evaluations(run: &Path) -> Vec<f64> {
    results(run).iter().filter_map(|r| r["evaluation"]["episode_reward_mean"].as_f64()).collect()
}

/// `rlx train --run <run> --env <env> --stop <stop> --config <config>
/// --results-dir <results>` plus `extra`, which must succeed; the run's
/// directory (the newest under `results`).
fn train(run: &str, env: &str, stop: &str, config: &str, results: &Path, extra: &[&str]) -> PathBuf {
    let dir = results.to_str().unwrap();
    let args = ["train", "--run", run, "--env", env, "--stop", stop, "--config", config, "--results-dir", dir];
    rlx(&args.iter().chain(extra).copied().collect::<Vec<_>>());
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).collect();
    runs.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    runs.pop().unwrap()
}

/// `rlx dataset info` of `dir`: its `steps:` number, the mean of its
/// `returns:` line, and its whole text.
fn dataset_info(dir: &Path) -> (u64, f64, String) {
    let out = rlx(&["dataset", "info", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{name} {text}"));
    let steps = field("steps:").trim().parse().unwrap();
    let mean =
        field("returns:").split_whitespace().nth(1).map_or(f64::NAN, |m| m.trim_end_matches(',').parse().unwrap());
    (steps, mean, text)
}

/// `{"input": dir}` with greedy evaluations of 20 episodes every 50
/// iterations.
fn input(dir: &Path) -> String {
    input_evaluated_every(dir, 50)
}

/// `{"input": dir}` with greedy evaluations of 20 episodes every
/// `iterations`.
fn input_evaluated_every(dir: &Path, iterations: u32) -> String {
    let greedy = r#""evaluation_duration": 20, "evaluation_config": {"explore": false}"#;
    format!(r#"{{"input": "{}", "evaluation_interval": {iterations}, {greedy}}}"#, dir.display())
}

/// Only good actions in the data: imitation works, and so does CQL, whose
/// penalty keeps the Q-values of the actions never taken down, while plain
/// DQN chases those unchecked values and does worse than random play.
#[test]
fn bc_and_cql_on_episodes_of_a_trained_ppo_reach_a_greedy_475_where_dqn_fails() {
    let root = common::tmp("offline", "bc");
    let (ppo, data) = (root.join("ppo"), root.join("expert"));
    // PPO until it solves CartPole, then the solved policy (lr ~0) writes
    // 20k steps of its episodes, as Parquet.
    let run = train(
        "PPO",
        "CartPole-v1",
        r#"{"episode_reward_mean": 475}"#,
        "{}",
        &ppo,
        &["--seed", "1", "--checkpoint-at-end"],
    );
    let solved = results(&run).last().unwrap()["timesteps_total"].as_u64().unwrap();
    let checkpoint = std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let stop = format!(r#"{{"timesteps_total": {}}}"#, solved + 20_000);
    let output = format!(r#"{{"output": "{}", "output_format": "parquet", "lr": 1e-9}}"#, data.display());
    train("PPO", "CartPole-v1", &stop, &output, &ppo, &["--restore", checkpoint.to_str().unwrap()]);
    let (steps, mean, info) = dataset_info(&data);
    assert!(steps >= 20_000 && mean > 400.0, "expert episodes: {info}");

    let bc = train("BC", "CartPole-v1", r#"{"training_iteration": 150}"#, &input(&data), &root.join("bc"), &[]);
    let evals = evaluations(&bc);
    assert!(evals.last().copied().unwrap_or_default() >= 475.0, "BC's greedy returns: {evals:?}");

    let config = input_evaluated_every(&data, 10);
    let stop = r#"{"training_iteration": 40}"#;
    let cql = evaluations(&train("CQL", "CartPole-v1", stop, &config, &root.join("cql"), &[]));
    let dqn = evaluations(&train("DQN", "CartPole-v1", stop, &config, &root.join("dqn"), &[]));
    // As BC: the last evaluation. (The earlier ones move with the floats:
    // all at 475 or more with gemm 0.15's AVX2 kernels, 463, 406, 497 and
    // 500 with gemm 0.19's AVX-512 ones, on the same machine.)
    assert!(cql.last().copied().unwrap_or_default() >= 475.0, "CQL's greedy returns: {cql:?}");
    // Random play lasts about 22 steps.
    assert!(dqn.iter().all(|&r| r < 50.0), "DQN's greedy returns: {dqn:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A mix of a learning PPO's episodes, poor to solved: MARWIL's weighting
/// by advantage does better than imitating every action alike.
#[test]
fn marwil_beats_bc_on_the_episodes_of_a_learning_ppo() {
    let root = common::tmp("offline", "marwil");
    let data = root.join("mix");
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    train("PPO", "CartPole-v1", r#"{"timesteps_total": 40000}"#, &output, &root.join("ppo"), &["--seed", "2"]);
    let (_, mean, info) = dataset_info(&data);
    assert!(mean < 250.0, "a mix of poor and good episodes: {info}");
    let mut last = Vec::new();
    // PPO's episodes carry its action_logp: MARWIL's run also estimates
    // its own return from them, off-policy, with each evaluation (`dm` and
    // `dr` with a network's fitted Q; the linear one is the framework's
    // unit tests').
    let estimated = input(&data).replacen(
        "{",
        r#"{"off_policy_estimation_methods": ["is", "wis", "dm", "dr"], "off_policy_estimation_episodes": 50,
            "off_policy_estimation_q_model": {"type": "neural", "iterations": 30}, "#,
        1,
    );
    for (algorithm, config) in [("BC", input(&data)), ("MARWIL", estimated)] {
        let run =
            train(algorithm, "CartPole-v1", r#"{"training_iteration": 200}"#, &config, &root.join(algorithm), &[]);
        let evals = evaluations(&run);
        last.push(evals.iter().rev().take(2).sum::<f64>() / 2.0);
        if algorithm == "MARWIL" {
            let estimates: Vec<Value> = results(&run).into_iter().filter(|r| r.get("evaluation").is_some()).collect();
            assert_eq!(estimates.len(), evals.len());
            for r in &estimates {
                let ope = &r["off_policy_estimation"];
                let behavior = ope["is"]["v_behavior"].as_f64().unwrap();
                // γ = 0.99: a logged return lies between 1 and 100.
                assert!((1.0..100.0).contains(&behavior), "{ope}");
                for method in ["is", "wis", "dm", "dr"] {
                    let e = &ope[method];
                    assert_eq!(e["episodes"], 50, "{method}: {e}");
                    assert_eq!(e["v_behavior"].as_f64(), Some(behavior), "{method}: {e}");
                    assert!(e["v_target"].as_f64().is_some_and(f64::is_finite), "{method}: {e}");
                }
                // CartPole pays 1 a step: per-decision WIS gives back the
                // logged return whatever the weights.
                let wis = ope["wis"]["v_target"].as_f64().unwrap();
                assert!((wis - behavior).abs() < 1e-9 * behavior, "{ope}");
            }
        }
    }
    let (bc, marwil) = (last[0], last[1]);
    assert!(marwil >= 475.0 && marwil >= bc + 25.0, "greedy returns, last two evaluations: BC {bc}, MARWIL {marwil}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// The greedy return of a run's last evaluation.
fn last_evaluation(run: &Path) -> f64 {
    *evaluations(run).last().unwrap_or_else(|| panic!("{} evaluated", run.display()))
}

/// Continuous CQL (SAC with `min_q_weight`) and IQL on a medium-replay
/// mix: every episode of a SAC run's first 6,000 steps on Pendulum-v1,
/// from random play to a policy near −150. In the mean over seeds 1–3,
/// CQL's greedy return beats BC's on the same files, and the behaviour's
/// average, by at least 10 % of the logged returns' range; IQL's beats
/// BC's by as much. (Plain SAC from these files does about as well as
/// CQL: they cover the actions widely. The penalty's own worth shows on
/// narrow data, the CartPole expert test above.)
#[test]
fn cql_and_iql_on_a_half_trained_sacs_pendulum_episodes_beat_bc() {
    let root = common::tmp("offline", "cql_pendulum");
    let data = root.join("medium_replay");
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    train("SAC", "Pendulum-v1", r#"{"timesteps_total": 6000}"#, &output, &root.join("sac"), &["--seed", "1"]);
    let (_, behaviour, info) = dataset_info(&data);
    let stat = |name: &str| -> f64 {
        let returns = info.lines().find(|l| l.starts_with("returns:")).unwrap();
        let at = returns.find(name).unwrap() + name.len();
        returns[at..].split([',', ' ']).find(|w| !w.is_empty()).unwrap().parse().unwrap()
    };
    let margin = 0.1 * (stat("max ") - stat("min "));
    assert!(margin > 50.0 && behaviour < -400.0, "a mix of poor and good episodes: {info}");
    let greedy = r#""evaluation_duration": 20, "evaluation_config": {"explore": false}"#;
    let (mut bc, mut cql, mut iql) = (0.0, 0.0, 0.0);
    for seed in ["1", "2", "3"] {
        let config = format!(r#"{{"input": "{}", "evaluation_interval": 100, {greedy}}}"#, data.display());
        let stop = r#"{"training_iteration": 100}"#;
        bc += last_evaluation(&train("BC", "Pendulum-v1", stop, &config, &root.join("bc"), &["--seed", seed])) / 3.0;
        // 3,000 updates after 1,000 rows; 4 drawn actions of each kind a
        // row and minibatches of 128 keep the penalty's passes small.
        let config = format!(
            r#"{{"input": "{}", "min_q_weight": 5.0, "num_actions": 4, "train_batch_size": 128,
                "random_timesteps": 0, "evaluation_interval": 4, {greedy}}}"#,
            data.display()
        );
        let stop = r#"{"timesteps_total": 4000}"#;
        cql += last_evaluation(&train("SAC", "Pendulum-v1", stop, &config, &root.join("cql"), &["--seed", seed])) / 3.0;
        // tuned_examples/iql-pendulum.yaml: 4,000 updates.
        let config = format!(
            r#"{{"input": "{}", "actor_lr": 0.001, "critic_lr": 0.001, "value_lr": 0.001,
                "train_batch_size": 128, "evaluation_interval": 5, {greedy}}}"#,
            data.display()
        );
        let stop = r#"{"timesteps_total": 5000}"#;
        iql += last_evaluation(&train("IQL", "Pendulum-v1", stop, &config, &root.join("iql"), &["--seed", seed])) / 3.0;
    }
    let means = format!(
        "greedy returns over seeds 1-3: CQL {cql:.1}, IQL {iql:.1}, BC {bc:.1}, behaviour {behaviour:.1}, margin {margin:.1}"
    );
    eprintln!("{means}");
    assert!(cql >= bc.max(behaviour) + margin, "{means}");
    assert!(iql >= bc + margin, "{means}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// Pendulum's rewards lie in [−16.3, 0]: at γ = 0.99 a logged episode
/// (at most 200 steps) is worth between this and 0.
const PENDULUM_WORST: f64 = -16.3 * 86.61;

/// Off-policy estimates of continuous policies (Pendulum-v1), from the
/// episodes of PPO (a Gaussian) and of SAC (uniform for its first 1,000
/// steps), each with the log-density of every action drawn: BC's run
/// (a Gaussian target), CQL's (SAC's squashed Gaussian) and IQL's (a
/// clipped Gaussian) estimate with all four estimators, TD3's
/// (deterministic) with `dm` alone; asking TD3's for `is` is refused by
/// name before training.
#[test]
fn continuous_policies_are_estimated_from_pendulum_episodes() {
    let root = common::tmp("offline", "ope_pendulum");
    let (ppo_data, sac_data, runs) = (root.join("ppo"), root.join("sac"), root.join("runs"));
    let output = |dir: &Path| format!(r#"{{"output": "{}"}}"#, dir.display());
    train("PPO", "Pendulum-v1", r#"{"timesteps_total": 4000}"#, &output(&ppo_data), &runs, &["--seed", "1"]);
    train("SAC", "Pendulum-v1", r#"{"timesteps_total": 1000}"#, &output(&sac_data), &runs, &["--seed", "1"]);
    let estimated = |data: &Path, methods: &str, extra: &str| {
        format!(
            r#"{{"input": "{}", "evaluation_interval": 2, "evaluation_duration": 2, {extra}
                "off_policy_estimation_methods": {methods}, "off_policy_estimation_episodes": 5}}"#,
            data.display()
        )
    };
    let all = r#"["is", "wis", "dm", "dr"]"#;
    let cql = r#""min_q_weight": 5.0, "num_actions": 4, "train_batch_size": 128, "random_timesteps": 0,"#;
    let stop = r#"{"training_iteration": 4}"#;
    for (algorithm, data, methods, extra) in [
        ("BC", &ppo_data, all, ""),
        ("SAC", &sac_data, all, cql),
        ("IQL", &sac_data, all, ""),
        ("TD3", &sac_data, r#"["dm"]"#, r#""random_timesteps": 0,"#),
    ] {
        let run = train(algorithm, "Pendulum-v1", stop, &estimated(data, methods, extra), &runs, &[]);
        let estimates: Vec<Value> = results(&run).into_iter().filter(|r| r.get("evaluation").is_some()).collect();
        assert_eq!(estimates.len(), 2, "{algorithm}");
        for r in &estimates {
            let ope = &r["off_policy_estimation"];
            let behavior = ope["dm"]["v_behavior"].as_f64().unwrap();
            assert!((PENDULUM_WORST..0.0).contains(&behavior), "{algorithm}: {ope}");
            let names: Vec<String> = serde_json::from_str(methods).unwrap();
            assert_eq!(ope.as_object().unwrap().len(), names.len(), "{algorithm}: {ope}");
            for method in &names {
                let e = &ope[method];
                assert_eq!((e["episodes"].as_u64(), e["v_behavior"].as_f64()), (Some(5), Some(behavior)), "{e}");
                assert!(e["v_target"].as_f64().is_some_and(f64::is_finite), "{algorithm} {method}: {e}");
            }
            // Per-decision WIS averages each step's rewards with weights
            // that sum to 1: whatever the weights, a return Pendulum pays.
            if let Some(wis) = ope["wis"]["v_target"].as_f64() {
                assert!((PENDULUM_WORST..=0.0).contains(&wis), "{algorithm}: {ope}");
            }
        }
    }
    let config = estimated(&sac_data, r#"["is"]"#, r#""random_timesteps": 0,"#);
    let args = ["train", "--run", "TD3", "--env", "Pendulum-v1", "--stop", stop, "--config", &config, "--results-dir"];
    let out = Command::new(RLX).args(args).arg(&runs).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the target policy is deterministic") && err.contains("dm needs none"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// Multi-agent episodes (RLlib has none offline): a PPO run on
/// MultiAgentCartPole with one shared policy writes each agent's episodes
/// with its `agent_index`; MARWIL then trains two policies from them under
/// another mapping (agent 0 plays `b`, agent 1 plays `a`), each on its
/// agent's rows. A single-agent dataset in a multi-agent run is refused.
#[test]
fn a_mapping_of_agents_to_policies_trains_from_multi_agent_episodes() {
    let root = common::tmp("offline", "multi_agent");
    let data = root.join("ma");
    let output = format!(r#"{{"output": "{}", "output_format": "parquet"}}"#, data.display());
    let stop = r#"{"timesteps_total": 60000}"#;
    train("PPO", "MultiAgentCartPole", stop, &output, &root.join("ppo"), &["--seed", "1"]);
    let (steps, mean, info) = dataset_info(&data);
    assert!(steps >= 60_000 && mean < 300.0 && info.contains("agent_index (i64 x 1)"), "{info}");

    let mapping =
        r#""multiagent": {"policies": {"a": {}, "b": {}}, "policy_mapping": {"agent_0": "b", "agent_1": "a"}}"#;
    let config = input(&data).replacen('{', &format!("{{{mapping}, "), 1);
    let run = train("MARWIL", "MultiAgentCartPole", r#"{"training_iteration": 200}"#, &config, &root.join("m"), &[]);
    let last = results(&run).pop().unwrap();
    for policy in ["a", "b"] {
        assert!(last["learner"][format!("{policy}/policy_loss")].is_number(), "policy {policy} learned: {last}");
    }
    // Each evaluation episode is one agent's; random play lasts about 22 steps.
    let evals = evaluations(&run);
    assert!(evals.last().is_some_and(|&r| r >= 450.0), "MARWIL's greedy returns: {evals:?}");

    let single = root.join("single");
    let output = format!(r#"{{"output": "{}"}}"#, single.display());
    train("DQN", "CartPole-v1", r#"{"timesteps_total": 1000}"#, &output, &root.join("dqn"), &[]);
    let (config, dir) = (input(&single), root.join("refused"));
    let args = ["train", "--run", "BC", "--env", "MultiAgentCartPole", "--config", &config, "--results-dir"];
    let out = Command::new(RLX).args(args).arg(&dir).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("written by a single-agent run"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn every_sampled_step_is_written_and_dqn_learns_from_the_files() {
    let root = common::tmp("offline", "dqn");
    let data = root.join("replay");
    let output = format!(r#"{{"output": "{}", "num_workers": 2, "output_compression": "gzip"}}"#, data.display());
    let run = train("DQN", "CartPole-v1", r#"{"timesteps_total": 30000}"#, &output, &root.join("runs"), &[]);
    let sampled = results(&run).last().unwrap()["timesteps_total"].as_u64().unwrap();
    let (steps, _, info) = dataset_info(&data);
    assert_eq!(steps, sampled, "every step the run counted is in the files: {info}");
    assert!(info.contains("files:             2 (0 partial left out)"), "one file per worker, all finished: {info}");

    let config = input_evaluated_every(&data, 10);
    let run = train("DQN", "CartPole-v1", r#"{"training_iteration": 60}"#, &config, &root.join("from_files"), &[]);
    let evals = evaluations(&run);
    let best = evals.iter().copied().fold(0.0, f64::max);
    // Random play lasts about 22 steps. (Seeds 1-5 on these files: best
    // 230 to 335, last 158 to 335; the default seed's 311 and 171.)
    assert!(best >= 200.0 && *evals.last().unwrap() >= 120.0, "DQN's greedy returns from files: {evals:?}");
    // About 60,000 rows read from 30,000 into a buffer of 50,000: the
    // later passes' rows are not stored again, so minibatches are drawn
    // from the dataset evenly (each row held once).
    let last = results(&run).pop().unwrap();
    assert!(last["timesteps_total"].as_u64() > Some(steps + 5000), "{last}");
    assert_eq!(last["learner"]["replay_buffer_size"].as_f64(), Some(steps as f64), "{}", last["learner"]);

    // Files and the env by weight (RLlib's input with probabilities): about
    // a quarter of the rows are the env's own steps, in whole episodes.
    let mixed = format!(r#"{{"input": {{"sampler": 1, "{}": 3}}}}"#, data.display());
    let run = train("DQN", "CartPole-v1", r#"{"timesteps_total": 8000}"#, &mixed, &root.join("mixed"), &[]);
    let last = results(&run).pop().unwrap();
    let (rows, episodes) = (last["timesteps_total"].as_f64().unwrap(), last["episodes_total"].as_f64().unwrap());
    let env_steps = episodes * last["episode_len_mean"].as_f64().unwrap();
    assert!(
        episodes >= 5.0 && (0.15..0.35).contains(&(env_steps / rows)),
        "{episodes} episodes in {rows} rows: {last}"
    );
    let bad = format!(r#"{{"input": {{"sampler": 1, "{}": -1}}}}"#, data.display());
    let args = ["train", "--run", "DQN", "--env", "CartPole-v1", "--config", &bad];
    let out = Command::new(RLX).args(args).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("weights are finite and >= 0"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_run_killed_while_writing_leaves_finished_files_that_read_whole() {
    let root = common::tmp("offline", "killed");
    let data = root.join("data");
    let config =
        format!(r#"{{"output": "{}", "output_max_file_size": 4096, "output_compression": "none"}}"#, data.display());
    let stop = r#"{"timesteps_total": 100000000}"#;
    let mut child = Command::new(RLX)
        .args(["train", "--run", "DQN", "--env", "CartPole-v1", "--stop", stop, "--config", &config])
        .args(["--results-dir", root.join("runs").to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let finished_files = |d: &Path| -> Vec<PathBuf> {
        let entries =
            std::fs::read_dir(d).map(|r| r.map(|e| e.unwrap().path()).collect()).unwrap_or_else(|_| Vec::new());
        entries.into_iter().filter(|p: &PathBuf| p.extension().is_some_and(|x| x == "jsonl")).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished_files(&data).len() < 5 {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no 5 finished files in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (steps, _, info) = dataset_info(&data);
    // The file after the last finished one is begun when its first episode
    // ends: the kill may have come before.
    let partial = info.contains("(1 partial left out)") && info.contains("left out: its writer did not finish it");
    assert!(partial || info.contains("(0 partial left out)"), "at most one partial file: {info}");
    // The finished files hold whole lines only, and every line is an episode.
    let mut lines = 0;
    for path in finished_files(&data) {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'));
        lines += text.lines().count();
    }
    assert!(info.contains(&format!("episodes:          {lines} (")), "{lines} lines: {info}");
    assert!(steps > 0);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn bad_inputs_are_named_before_training() {
    let root = common::tmp("offline", "bad");
    let (data, runs) = (root.join("cartpole"), root.join("runs"));
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    train("DQN", "CartPole-v1", r#"{"timesteps_total": 2000}"#, &output, &runs, &[]);
    let fails = |run: &str, env: &str, config: &str, needle: &str| {
        let args = ["train", "--run", run, "--env", env, "--config", config, "--results-dir", runs.to_str().unwrap()];
        let out = Command::new(RLX).args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{run} {config}: {err}");
        assert!(err.contains(needle), "{run} {config}: {err}");
    };
    let input = format!(r#"{{"input": "{}"}}"#, data.display());
    fails("DQN", "Acrobot-v1", &input, "the dataset's observation space is Box(low=[-4.8");
    fails("PPO", "CartPole-v1", &input, "PPO learns on-policy");
    fails("BC", "CartPole-v1", "{}", "BC learns from files");
    let missing = format!(r#"{{"input": "{}"}}"#, root.join("nothing").display());
    fails("BC", "CartPole-v1", &missing, "no experience files there");
    let glob = format!(r#"{{"input": "{}/*.jsonl.gz"}}"#, data.display());
    fails("BC", "CartPole-v1", &glob, "no experience files there");
    let both = format!(r#"{{"input": "{0}", "output": "{0}"}}"#, data.display());
    fails("DQN", "CartPole-v1", &both, "a run from `input` samples no episodes to write");
    // DQN's episodes hold no action_logp to weigh them by.
    let estimated = r#""off_policy_estimation_methods": ["wis"], "evaluation_interval": 1"#;
    let config = input.replace("}", &format!(", {estimated}}}"));
    fails(
        "BC",
        "CartPole-v1",
        &config,
        "has no `action_logp` column (Minari's, DQN's, DDPG's and TD3's data hold none)",
    );
    let config = input.replace("}", r#", "off_policy_estimation_methods": ["is"]}"#);
    fails("BC", "CartPole-v1", &config, "set `evaluation_interval` too");
    let q_model = |model: &str| input.replace("}", &format!(r#", "off_policy_estimation_q_model": {model}}}"#));
    fails(
        "BC",
        "CartPole-v1",
        &q_model(r#"{"type": "neural", "lr": 0}"#),
        "`off_policy_estimation_q_model.lr` = 0 is out of range: must be > 0",
    );
    fails("BC", "CartPole-v1", &q_model(r#"{"type": "tabular"}"#), "unknown variant `tabular`");
    // Neither --stop nor evaluation: nothing would ever stop it.
    fails("DQN", "CartPole-v1", &input, "DQN learns from `input` and plays no episodes of its own");
    std::fs::remove_dir_all(&root).unwrap();
}

/// Collects `argv[3]` CartPole episodes of a linear controller (which keeps
/// the pole up for all 500 steps) with Minari's DataCollector, into a
/// Minari dataset of storage `argv[2]` under `argv[1]`; prints the steps.
const MAKE_MINARI: &str = r#"
import os, sys
os.environ["MINARI_DATASETS_PATH"] = sys.argv[1]
import gymnasium as gym
from minari import DataCollector
fmt, n = sys.argv[2], int(sys.argv[3])
env = DataCollector(gym.make("CartPole-v1"), data_format=fmt)
steps = 0
for episode in range(n):
    obs, _ = env.reset(seed=episode)
    done = False
    while not done:
        x, v, angle, spin = obs
        obs, _, terminated, truncated, _ = env.step(int(angle + 0.5 * spin + 0.01 * x + 0.1 * v > 0))
        steps += 1
        done = terminated or truncated
env.create_dataset(dataset_id=f"cartpole/controller-{fmt}-v0", algorithm_name="linear controller", author="rlx tests",
                   author_email="none", code_permalink="none", description="rlx tests")
print(steps)
"#;

/// A Minari dataset made by Minari itself reads the same from either of
/// its storages, and BC learns the controller that made it.
#[test]
fn minari_datasets_read_alike_from_hdf5_and_arrow_and_bc_learns_from_one() {
    let Some(python) = python() else { return };
    let root = common::tmp("offline", "minari");
    std::fs::create_dir_all(&root).unwrap();
    let make = root.join("make_minari.py");
    std::fs::write(&make, MAKE_MINARI).unwrap();
    let mut described = Vec::new();
    for format in ["hdf5", "arrow"] {
        let out = Command::new(&python).arg(&make).arg(&root).args([format, "20"]).output().unwrap();
        assert!(out.status.success(), "making a {format} dataset: {}", String::from_utf8_lossy(&out.stderr));
        let collected: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let (steps, mean, info) = dataset_info(&root.join(format!("cartpole/controller-{format}-v0")));
        assert_eq!((steps, mean), (collected, 500.0), "{format}: {info}");
        described.push(info);
    }
    assert_eq!(described[0], described[1], "the same episodes from either storage");
    assert!(described[0].contains("episodes:          20 (20 complete"), "{}", described[0]);

    let data = root.join("cartpole/controller-arrow-v0");
    let bc = train("BC", "CartPole-v1", r#"{"training_iteration": 300}"#, &input(&data), &root.join("bc"), &[]);
    let evals = evaluations(&bc);
    assert!(evals.last().copied().unwrap_or_default() >= 475.0, "BC's greedy returns: {evals:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// rlx's Parquet files are one table to pyarrow (and so to pandas, polars
/// and Ray Data): a row per step, RLlib's column names, observations as
/// fixed-size lists, an episode's rows under one `eps_id`.
#[test]
fn pyarrow_reads_parquet_output_as_one_table_of_steps() {
    let Some(python) = python() else { return };
    let root = common::tmp("offline", "pyarrow");
    let data = root.join("data");
    let output =
        format!(r#"{{"output": "{}", "output_format": "parquet", "output_compression": "gzip"}}"#, data.display());
    train("DQN", "CartPole-v1", r#"{"timesteps_total": 3000}"#, &output, &root.join("runs"), &[]);
    let (steps, _, info) = dataset_info(&data);
    let read = r#"
import sys, json, pyarrow.dataset as ds
table = ds.dataset(sys.argv[1], format="parquet").to_table()
print(json.dumps({"rows": table.num_rows, "columns": sorted(table.column_names),
                  "obs": str(table.schema.field("obs").type), "episodes": len(set(table.column("eps_id").to_pylist())),
                  "rewards": sum(table.column("rewards").to_pylist())}))
"#;
    let out = Command::new(&python).args(["-c", read]).arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(table["rows"], steps, "{table} {info}");
    assert_eq!(table["rewards"].as_f64(), Some(steps as f64), "CartPole pays 1 a step: {table}");
    assert_eq!(table["obs"], "fixed_size_list<item: float not null>[4]", "{table}");
    let columns: Vec<&str> = table["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for name in ["eps_id", "t", "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds"] {
        assert!(columns.contains(&name), "{name} in {columns:?}");
    }
    let episodes = table["episodes"].as_u64().unwrap();
    assert!(info.contains(&format!("episodes:          {episodes} (")), "{episodes} ids: {info}");
    std::fs::remove_dir_all(&root).unwrap();
}
