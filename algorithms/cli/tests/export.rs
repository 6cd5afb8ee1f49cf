//! `rlx export` through the binary: runs train for a few iterations, the
//! policy is exported, and the written file, run by tract (and by
//! onnxruntime in the Python-backed test), computes what rlx computes on
//! 1,000 observations recorded from the env: the same greedy actions
//! except near-ties, and values, probabilities and continuous actions to
//! a relative 1e-4.

mod common;
use rlx::filter::MeanStdFilter;
use rlx::{fields, Column, PolicyGraph, PolicyInput, SampleBatch};
use rlx_cli::export::parity;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RLX: &str = env!("CARGO_BIN_EXE_rlx");

fn rlx(args: &[&str]) -> Output {
    Command::new(RLX).args(args).output().expect("run rlx")
}

/// A short run of `algorithm` on `env` with `config`, and its export;
/// the run directory and the model file.
fn train_and_export(name: &str, algorithm: &str, env: &str, config: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let results = common::tmp("export", name);
    let r = results.to_str().unwrap();
    let out = rlx(&[
        "train",
        "--run",
        algorithm,
        "--env",
        env,
        "--config",
        config,
        "--stop",
        r#"{"training_iteration": 2}"#,
        "--checkpoint-at-end",
        "--results-dir",
        r,
    ]);
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let dir = std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path();
    let model = results.join(format!("{name}.onnx"));
    let out = rlx(&[&["export", dir.to_str().unwrap(), "-o", model.to_str().unwrap()], extra].concat());
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("checked on 1000 observations"), "{name}: {said}");
    (dir, model)
}

/// The run's newest checkpoint: its policy with weights and state, its
/// observation filter and a fresh env (what `rlx export` restores).
fn restore(dir: &Path) -> (Box<dyn PolicyGraph>, Option<MeanStdFilter>, Box<dyn rlx::Env>) {
    let mut restored = rlx_cli::rollout::restore(dir, rlx_cli::args::Pick::Latest, 0).unwrap();
    let filter = restored.filter();
    restored.load_policy_state().unwrap();
    (restored.policy, filter, restored.env)
}

/// A DreamerV3 run small enough for a test: the export reads the actor
/// and the acting half of the world model, whatever the batches they
/// learned from. 75 updates of 4 × 16 rows (the defaults' 300 updates of
/// 16 × 64 took about 130 s a run on shared cores, seven runs here).
const DREAMER: &str = r#"{"model_size": "nano", "batch_size_B": 4, "batch_length_T": 16, "horizon_H": 5,
    "training_ratio": 16, "learning_starts": 100, "timesteps_per_iteration": 200}"#;

/// Exports each case and compares the file with the checkpoint's policy
/// on observations recorded with other seeds than `rlx export`'s own check.
#[test]
fn exported_models_compute_what_rlx_computes() {
    let cases = [
        ("ppo_discrete", "PPO", "CartPole-v1", r#"{"observation_filter": "MeanStdFilter"}"#),
        ("ppo_continuous", "PPO", "Pendulum-v1", r#"{"observation_filter": "MeanStdFilter"}"#),
        ("ppo_lstm", "PPO", "CartPole-v1", r#"{"model": {"use_lstm": true, "lstm_cell_size": 32}}"#),
        ("ppo_cnn", "PPO", "MinAtar/Breakout-v1", r#"{"train_batch_size": 512, "sgd_minibatch_size": 128}"#),
        ("dqn", "DQN", "CartPole-v1", r#"{"learning_starts": 200}"#),
        ("dqn_c51_noisy", "DQN", "CartPole-v1", r#"{"learning_starts": 200, "num_atoms": 11, "noisy": true}"#),
        ("sac", "SAC", "Pendulum-v1", r#"{"learning_starts": 200, "timesteps_per_iteration": 400}"#),
        ("td3", "TD3", "Pendulum-v1", r#"{"learning_starts": 200, "timesteps_per_iteration": 400}"#),
        ("es", "ES", "CartPole-v1", "{}"),
        ("ars_continuous", "ARS", "Pendulum-v1", "{}"),
        ("dreamer_v3", "DreamerV3", "CartPole-v1", DREAMER),
        ("dreamer_v3_continuous", "DreamerV3", "Pendulum-v1", DREAMER),
        ("dreamer_v3_pixels", "DreamerV3", "MinAtar/Breakout-v1", DREAMER),
    ];
    for (name, algorithm, env, config) in cases {
        let (dir, model) = train_and_export(name, algorithm, env, config, &[]);
        let bytes = std::fs::read(&model).unwrap();
        let (mut policy, filter, mut env) = restore(&dir);
        let obs = parity::record(env.as_mut(), policy.as_mut(), filter.as_ref(), 1000, 77).unwrap();
        let p = parity::compare(&bytes, policy.as_mut(), filter.as_ref(), &obs).unwrap();
        assert_eq!(p.rows, 1000, "{name}");
        assert!(p.holds(), "{name}: {p:?}");
        assert!(p.ties <= 50, "{name}: {} near-ties leave too few actions compared", p.ties);
    }
}

/// IQL's actor, learned from episodes PPO wrote, exports too (an offline
/// algorithm's policy acts like any other).
#[test]
fn an_offline_actor_exports() {
    let data = common::tmp("export", "iql_data");
    let results = common::tmp("export", "iql_ppo");
    let output = format!(r#"{{"output": "{}"}}"#, data.display());
    let out = rlx(&[
        "train",
        "--run",
        "PPO",
        "--env",
        "Pendulum-v1",
        "--config",
        &output,
        "--stop",
        r#"{"training_iteration": 1}"#,
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let input = format!(r#"{{"input": "{}", "learning_starts": 100, "timesteps_per_iteration": 200}}"#, data.display());
    let (dir, model) = train_and_export("iql", "IQL", "Pendulum-v1", &input, &[]);
    let (mut policy, filter, mut env) = restore(&dir);
    let obs = parity::record(env.as_mut(), policy.as_mut(), filter.as_ref(), 1000, 78).unwrap();
    let p = parity::compare(&std::fs::read(&model).unwrap(), policy.as_mut(), filter.as_ref(), &obs).unwrap();
    assert!(p.holds(), "{p:?}");
}

/// One policy of a multi-agent run (`--policy`), and AlphaZero's network
/// without its search: checked on observations drawn from the space, as
/// such envs cannot be stepped by one policy alone.
#[test]
fn a_multi_agent_runs_policy_and_alpha_zeros_network_export() {
    let two = r#"{"multiagent": {"policies": ["p0", "p1"], "policy_mapping": "p{i}"}}"#;
    let (dir, model) = train_and_export("multi_agent", "PPO", "MultiAgentCartPole", two, &["--policy", "p1"]);
    let (mut policy, filter, _) = restore(&dir);
    let p1 = policy.member_mut("p1").unwrap();
    let obs = parity::draw(p1.observation_space(), 1000, 3);
    let p = parity::compare(&std::fs::read(&model).unwrap(), p1, filter.as_ref(), &obs).unwrap();
    assert!(p.holds() && p.ties <= 50, "{p:?}");
    // Without --policy the error lists the ids.
    let out = rlx(&["export", dir.to_str().unwrap(), "-o", model.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("p0, p1") && e.contains("--policy"), "{e}");

    let (dir, model) = train_and_export("alpha_zero", "AlphaZero", "TicTacToe", r#"{"num_simulations": 8}"#, &[]);
    let (mut policy, filter, _) = restore(&dir);
    let obs = parity::draw(policy.observation_space(), 1000, 4);
    let p = parity::compare(&std::fs::read(&model).unwrap(), policy.as_mut(), filter.as_ref(), &obs).unwrap();
    assert!(p.holds() && p.ties <= 50, "{p:?}");
}

/// The comparison can fail: the PPO model against a policy with other
/// weights disagrees (what `rlx export` checks before it writes a file).
#[test]
fn a_model_of_other_weights_is_caught() {
    let (dir, model) = train_and_export("other_weights", "PPO", "CartPole-v1", "{}", &[]);
    let bytes = std::fs::read(&model).unwrap();
    let (policy, filter, mut env) = restore(&dir);
    let config = rlx_algorithms::default_config("PPO").unwrap();
    let mut fresh = rlx_algorithms::make_policy_for_env("PPO", &config, env.as_ref(), 99).unwrap();
    let mut policy = policy;
    let obs = parity::record(env.as_mut(), policy.as_mut(), filter.as_ref(), 1000, 5).unwrap();
    let p = parity::compare(&bytes, fresh.as_mut(), filter.as_ref(), &obs).unwrap();
    assert!(!p.holds() && p.max_error > 1e-2, "{p:?}");
}

/// With `--action-mask`, the model takes a mask and never picks an
/// illegal action, on MaskedMaze (whose walls are masked).
#[test]
fn the_action_mask_input_keeps_actions_legal() {
    let (_, model) = train_and_export("masked", "PPO", "MaskedMaze-v0", "{}", &["--action-mask"]);
    let bytes = std::fs::read(&model).unwrap();
    let space = rlx::Space::uniform_box(0.0, 1.0, vec![36]).unwrap();
    let rows = 40;
    let obs: Vec<f32> = (0..rows * 36).map(|i| if i % 36 == (i / 36) % 36 { 1.0 } else { 0.0 }).collect();
    for legal in 0..4 {
        let mask: Vec<f32> = (0..rows * 4).map(|i| if i % 4 == legal { 1.0 } else { 0.0 }).collect();
        let out = parity::run(&bytes, &space, &obs, None, Some(&mask)).unwrap();
        assert!(out["actions_i64"].iter().all(|&a| a == legal as f32), "legal {legal}: {:?}", out["actions_i64"]);
    }
}

/// Bad requests are errors that name the problem, and write nothing.
#[test]
fn export_errors_name_the_problem() {
    let results = common::tmp("export", "errors");
    let r = results.to_str().unwrap();
    let train = |algorithm: &str, env: &str, config: &str| {
        let before: Vec<_> = std::fs::read_dir(&results).unwrap().map(|e| e.unwrap().path()).collect();
        let stop = r#"{"training_iteration": 1}"#;
        let args = ["train", "--run", algorithm, "--env", env, "--config", config, "--stop", stop];
        let out = rlx(&[&args[..], &["--checkpoint-at-end", "--results-dir", r]].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dirs = std::fs::read_dir(&results).unwrap().map(|e| e.unwrap().path());
        dirs.filter(|d| !before.contains(d)).next().unwrap()
    };
    let dreamer = train("DreamerV3", "CartPole-v1", DREAMER);
    let dict = train("PPO", "DictCue-v0", "{}");
    let target = results.join("x.onnx");
    let t = target.to_str().unwrap();
    let err = |args: &[&str]| {
        let out = rlx(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // A policy on Dict observations has no description yet.
    let e = err(&["export", dict.to_str().unwrap(), "-o", t]);
    assert!(e.contains("PPO on DictCue-v0") && e.contains("Dict observations"), "{e}");
    // DreamerV3's actor reads no action mask.
    let e = err(&["export", dreamer.to_str().unwrap(), "-o", t, "--action-mask"]);
    assert!(e.contains("--action-mask") && e.contains("no action mask"), "{e}");
    let e = err(&["export", "/nonexistent/run", "-o", t]);
    assert!(e.contains("/nonexistent/run"), "{e}");
    let e = err(&["export", dreamer.to_str().unwrap(), "-o", t, "--check-rows", "0"]);
    assert!(e.contains("--check-rows"), "{e}");
    let (sac, _) = train_and_export(
        "continuous_mask",
        "SAC",
        "Pendulum-v1",
        r#"{"learning_starts": 100, "timesteps_per_iteration": 200}"#,
        &[],
    );
    let e = err(&["export", sac.to_str().unwrap(), "-o", t, "--action-mask"]);
    assert!(e.contains("--action-mask") && e.contains("continuous"), "{e}");
    assert!(!target.exists(), "a failed export wrote {t}");
}

/// onnxruntime (PyPI) runs the exported models and agrees with rlx: the
/// test writes the recorded observations and rlx's outputs, and
/// `python/onnx_parity.py` compares.
#[test]
fn onnxruntime_agrees_with_rlx() {
    let Some(python) = rlx_envs::gym::testing::python() else { return };
    let cases = [
        ("ort_ppo", "PPO", "CartPole-v1", r#"{"observation_filter": "MeanStdFilter"}"#),
        ("ort_ppo_continuous", "PPO", "Pendulum-v1", "{}"),
        ("ort_lstm", "PPO", "CartPole-v1", r#"{"model": {"use_lstm": true, "lstm_cell_size": 32}}"#),
        ("ort_cnn", "PPO", "MinAtar/Breakout-v1", r#"{"train_batch_size": 512, "sgd_minibatch_size": 128}"#),
        ("ort_dqn", "DQN", "CartPole-v1", r#"{"learning_starts": 200}"#),
        ("ort_sac", "SAC", "Pendulum-v1", r#"{"learning_starts": 200, "timesteps_per_iteration": 400}"#),
        ("ort_dreamer", "DreamerV3", "CartPole-v1", DREAMER),
        ("ort_dreamer_continuous", "DreamerV3", "Pendulum-v1", DREAMER),
        ("ort_dreamer_pixels", "DreamerV3", "MinAtar/Breakout-v1", DREAMER),
    ];
    for (name, algorithm, env_name, config) in cases {
        let (dir, model) = train_and_export(name, algorithm, env_name, config, &[]);
        let (mut policy, filter, mut env) = restore(&dir);
        let obs = parity::record(env.as_mut(), policy.as_mut(), filter.as_ref(), 1000, 11).unwrap();
        let mut input = obs.clone();
        if let Some(f) = &filter {
            f.normalize(&mut input);
        }
        let state = vec![0.0; 1000 * policy.recurrent_state_size()];
        let mut out = SampleBatch::new();
        let given = PolicyInput {
            obs: &input,
            action_mask: None,
            state: (!state.is_empty()).then_some(&state),
            explore: false,
        };
        policy.compute_actions_from_input(&given, &mut out).unwrap();
        let actions_of = |out: &SampleBatch| -> Vec<f64> {
            match out.get(fields::ACTIONS).unwrap() {
                Column::I64 { data, .. } => data.iter().map(|&a| a as f64).collect(),
                Column::F32 { data, .. } => data.iter().map(|&a| a as f64).collect(),
                Column::U8 { .. } => unreachable!(),
            }
        };
        let actions = actions_of(&out);
        // A recurrent policy's state out, and its second step from it.
        let (state_out, next) = if state.is_empty() {
            (None, None)
        } else {
            let state_out = out.f32(fields::STATE_OUT).unwrap().to_vec();
            let mut second = SampleBatch::new();
            let given = PolicyInput { state: Some(&state_out), ..given };
            policy.compute_actions_from_input(&given, &mut second).unwrap();
            let next = (actions_of(&second), second.f32(fields::STATE_OUT).unwrap().to_vec());
            (Some(state_out), Some(next))
        };
        let values = out.f32(fields::VF_PREDS).ok().map(<[f32]>::to_vec);
        // A categorical policy's probabilities (DQN's are its greedy choice).
        let categorical = algorithm == "PPO" && matches!(policy.action_space(), rlx::Space::Discrete { .. });
        let probs = categorical.then(|| policy.action_probabilities(&input).unwrap());
        let reference = serde_json::json!({
            "algorithm": algorithm,
            "env": env_name,
            "obs": obs,
            "state_size": policy.recurrent_state_size(),
            "actions": actions,
            "values": values,
            "probs": probs,
            "state_out": state_out,
            "next": next.map(|(actions, state_out)| serde_json::json!({"actions": actions, "state_out": state_out})),
        });
        let file = dir.join("reference.json");
        std::fs::write(&file, reference.to_string()).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/onnx_parity.py");
        let out =
            Command::new(&python).args([script, model.to_str().unwrap(), file.to_str().unwrap()]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {said}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(said.contains("agree"), "{name}: {said}");
        println!("{name}: {said}");
    }
}
