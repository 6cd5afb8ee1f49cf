//! Checkpoints resume a run exactly: k iterations, a checkpoint, a restore
//! into a fresh trainer and m more iterations give the same weights, counters
//! and returns as k + m iterations straight. Damaged or mismatched
//! checkpoints are refused with an error naming the file.

use rlx::checkpoint::{self, Checkpoint, RunInfo};
use rlx::Trainer;
use rlx_algorithms::build_trainer;
use serde_json::{json, Value};
use std::path::PathBuf;

fn config() -> Value {
    // One evaluator actor (plus the learner in the driver), a running
    // observation filter, minibatch shuffling: every piece of state a
    // checkpoint must carry.
    json!({
        "num_workers": 1, "num_envs_per_worker": 4, "train_batch_size": 256, "sgd_minibatch_size": 64,
        "num_sgd_iter": 3, "observation_filter": "MeanStdFilter", "seed": 7
    })
}

async fn trainer() -> (Trainer, Value) {
    build_trainer("PPO", "CartPole-v1", &config()).await.unwrap()
}

fn weights(t: &Trainer) -> Vec<f32> {
    t.evaluators().local().policy().get_weights()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-test-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_continues_exactly() {
    restores_exactly("PPO", "CartPole-v1", config(), "exact").await;
}

/// The same for an LSTM (its carried states and stored sequences), a
/// Gaussian policy (its log-std), one with scaled rewards, and an env with
/// action masks. (DQN's
/// checkpoints do not save the replay buffer, so they say they are not
/// exact.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurrent_continuous_and_masked_runs_restore_exactly() {
    let mut lstm = config();
    lstm["model"] = json!({"use_lstm": true, "lstm_cell_size": 16, "fcnet_hiddens": [16], "max_seq_len": 8});
    restores_exactly("PPO", "StatelessCartPole-v1", lstm, "lstm").await;
    restores_exactly("PPO", "Pendulum-v1", config(), "gaussian").await;
    restores_exactly("PPO", "MaskedMaze-v0", config(), "masked").await;
    // Reward scaling's statistics and each copy's discounted return.
    let mut scaled = config();
    scaled["normalize_rewards"] = json!(true);
    scaled["model"] = json!({"log_std_init": -1.0});
    restores_exactly("PPO", "Pendulum-v1", scaled, "reward-scaled").await;
}

/// Multi-agent runs too: two policies on MultiAgentCartPole (each
/// policy's weights and optimizer state, the agents' episodes in
/// progress), and TicTacToe under one shared policy (each player's last
/// move still waiting for its outcome).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_agent_runs_restore_exactly() {
    let mut two = config();
    two["multiagent"] = json!({"policy_mapping": "p{i}"});
    restores_exactly("PPO", "MultiAgentCartPole", two, "multi-agent").await;
    restores_exactly("PPO", "TicTacToe", config(), "turns").await;
}

/// k iterations, a checkpoint, a restore into a fresh trainer and m more
/// iterations give the weights, counters and returns of k + m straight.
async fn restores_exactly(algorithm: &str, env: &str, config: Value, name: &str) {
    let (k, m) = (3, 4);
    let dir = tmp(name);
    let build = || build_trainer(algorithm, env, &config);
    let (mut straight, resolved) = build().await.unwrap();
    let info = RunInfo { algorithm: algorithm.into(), env: env.into(), config: resolved };
    let mut path = None;
    for i in 1..=k + m {
        straight.train().await.unwrap();
        if i == k {
            // Saving must not disturb the run it is taken from.
            path = Some(checkpoint::save(&mut straight, &dir, &info).await.unwrap());
        }
    }
    let path = path.unwrap();
    assert_eq!(path.file_name().unwrap(), "checkpoint_000003");
    let ckpt = Checkpoint::load(&path).unwrap();
    assert!(ckpt.metadata.exact_resume, "{name}: {:?}", ckpt.metadata.notes);
    assert_eq!(ckpt.metadata.training_iteration, k);

    let (mut resumed, _) = build().await.unwrap();
    let gaps = ckpt.restore(&mut resumed).await.unwrap();
    assert!(gaps.is_empty(), "{name}: {gaps:?}");
    let mut last = None;
    for _ in 0..m {
        last = Some(resumed.train().await.unwrap());
    }
    let (a, b) = (straight.last_result(), last.unwrap());
    assert_eq!(weights(&straight), weights(&resumed), "{name}: weights differ after k + m iterations");
    assert_eq!(
        (a.training_iteration, a.timesteps_total, a.episodes_total, a.episode_reward_mean),
        (b.training_iteration, b.timesteps_total, b.episodes_total, b.episode_reward_mean),
        "{name}"
    );
    assert!(b.time_total_s >= ckpt.metadata.time_total_s);

    // A control: without the restore, a fresh trainer goes elsewhere.
    let (mut fresh, _) = build().await.unwrap();
    for _ in 0..m {
        fresh.train().await.unwrap();
    }
    assert_ne!(weights(&fresh), weights(&straight), "{name}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_and_mismatched_checkpoints_are_refused() {
    let dir = tmp("damaged");
    let (mut t, resolved) = trainer().await;
    t.train().await.unwrap();
    let info = RunInfo { algorithm: "PPO".into(), env: "CartPole-v1".into(), config: resolved };
    let path = checkpoint::save(&mut t, &dir, &info).await.unwrap();
    // A run directory resolves to its newest checkpoint.
    assert_eq!(Checkpoint::load(&dir).unwrap().dir, path);

    let err = Checkpoint::load(&path).unwrap().check_matches("A2C", "CartPole-v1").unwrap_err().to_string();
    assert!(err.contains("PPO on CartPole-v1") && err.contains("A2C on CartPole-v1"), "{err}");

    // Sound files, but another network: said so, not called corrupt.
    let mut wider = config();
    wider["model"] = json!({"fcnet_hiddens": [32]});
    let (mut other, _) = build_trainer("PPO", "CartPole-v1", &wider).await.unwrap();
    let before = weights(&other);
    let err = Checkpoint::load(&path).unwrap().restore(&mut other).await.unwrap_err().to_string();
    assert!(err.contains("do not fit the network built for this run") && !err.contains("corrupt"), "{err}");
    assert_eq!(weights(&other), before, "a refused restore leaves the weights alone");

    let weights_file = path.join(checkpoint::WEIGHTS_FILE);
    let good = std::fs::read(&weights_file).unwrap();
    std::fs::write(&weights_file, &good[..good.len() / 2]).unwrap();
    let err = Checkpoint::load(&path).unwrap_err().to_string();
    assert!(err.contains("policy.safetensors") && err.contains("SHA-256"), "{err}");
    std::fs::write(&weights_file, good).unwrap();

    let state_file = path.join(checkpoint::STATE_FILE);
    let bytes = std::fs::read(&state_file).unwrap();
    std::fs::write(&state_file, &bytes[..bytes.len() - 10]).unwrap();
    let err = Checkpoint::load(&path).unwrap_err().to_string();
    assert!(err.contains("state.bin") && err.contains("corrupt"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A checkpoint small enough to flip every bit of: PPO with a 4-unit
/// network on CartPole, the driver sampling.
async fn small_checkpoint(dir: &std::path::Path, iterations: u64) -> Vec<PathBuf> {
    let cfg = json!({
        "num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 64, "sgd_minibatch_size": 32,
        "num_sgd_iter": 1, "seed": 5, "model": {"fcnet_hiddens": [4]}
    });
    let (mut t, resolved) = build_trainer("PPO", "CartPole-v1", &cfg).await.unwrap();
    let info = RunInfo { algorithm: "PPO".into(), env: "CartPole-v1".into(), config: resolved };
    let mut paths = Vec::new();
    for _ in 0..iterations {
        t.train().await.unwrap();
        paths.push(checkpoint::save(&mut t, dir, &info).await.unwrap());
    }
    paths
}

/// Every single-bit flip anywhere in a checkpoint (each file, each byte,
/// each bit) is an error on load, never a silently different run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_single_bit_flip_is_detected() {
    let dir = tmp("bitflips");
    let path = small_checkpoint(&dir, 1).await.pop().unwrap();
    let files =
        [checkpoint::METADATA_FILE, checkpoint::WEIGHTS_FILE, checkpoint::STATE_FILE, checkpoint::CHECKSUMS_FILE];
    let mut flips = 0;
    for file in files {
        let file = path.join(file);
        let good = std::fs::read(&file).unwrap();
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[i] ^= 1 << bit;
                std::fs::write(&file, &bad).unwrap();
                if let Ok(loaded) = Checkpoint::load(&path) {
                    panic!("{} byte {i} bit {bit} flipped, and it loaded: {:?}", file.display(), loaded.warnings);
                }
                flips += 1;
            }
        }
        std::fs::write(&file, good).unwrap();
    }
    assert!(Checkpoint::load(&path).unwrap().warnings.is_empty());
    eprintln!("{flips} single-bit flips, all detected");
    assert!(flips > 10_000, "a checkpoint of a few kilobytes: {flips} bits");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Checkpoint loading past its checksums (a `SHA256SUMS` rewritten to
/// match damaged files, or a version 1 checkpoint), as the `cargo fuzz`
/// target `checkpoint_files` does it (`metadata.json`, a NUL byte,
/// `state.bin`: `rlx::fuzz::parse_checkpoint_input`): every file of its
/// committed corpus (`fuzz/corpus/checkpoint_files`) as-is, then
/// [`FUZZ_CASES`](rlx::fuzz::FUZZ_CASES) inputs with an altered
/// `metadata.json` and as many with an altered `state.bin`, half made from
/// a checkpoint saved here, half from those files: errors, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_checkpoint_files_never_panic() {
    use rlx::fuzz::{
        checkpoint_input, mutate_checkpoint_metadata, mutate_checkpoint_state, parse_checkpoint_input, replay_corpus,
        run, with_committed, write_seeds,
    };
    let dir = tmp("fuzz");
    let path = small_checkpoint(&dir, 2).await.pop().unwrap();
    let metadata = std::fs::read(path.join(checkpoint::METADATA_FILE)).unwrap();
    let state = std::fs::read(path.join(checkpoint::STATE_FILE)).unwrap();
    let input = checkpoint_input(&metadata, Some(&state));
    assert!(parse_checkpoint_input(&input).is_ok());
    write_seeds("checkpoint_files", std::slice::from_ref(&input));
    let decode = |i: &[u8]| {
        let _ = parse_checkpoint_input(i);
    };
    let corpus = with_committed(&[input], &replay_corpus("checkpoint_files", decode));
    run(&corpus, mutate_checkpoint_metadata, decode);
    run(&corpus, mutate_checkpoint_state, decode);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A damaged newest checkpoint is passed over for the previous good one,
/// with a warning naming the file; checkpoints are ordered by iteration,
/// and temporary directories of a killed save are removed by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_checkpoint_falls_back_to_the_previous_good_one() {
    let dir = tmp("fallback");
    let stale = dir.join(".checkpoint_000009.tmp-4194303");
    std::fs::create_dir_all(stale.join("inner")).unwrap();
    let paths = small_checkpoint(&dir, 2).await;
    assert!(!stale.exists(), "the next save removes a killed save's temporary directory");
    let weights = paths[1].join(checkpoint::WEIGHTS_FILE);
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    std::fs::write(&weights, bytes).unwrap();
    for asked in [&dir, &paths[1]] {
        let loaded = Checkpoint::load(asked).unwrap();
        assert_eq!(loaded.dir, paths[0], "asked for {}", asked.display());
        assert_eq!(loaded.metadata.training_iteration, 1);
        let said = loaded.warnings.join("\n");
        assert!(said.contains("policy.safetensors") && said.contains("previous good checkpoint"), "{said}");
    }
    // Asked for the older one, it loads without a word.
    assert!(Checkpoint::load(&paths[0]).unwrap().warnings.is_empty());

    // Iteration 1,000,000 is newer than 999,999, though it sorts first as text.
    for n in [999_999u64, 1_000_000] {
        let d = dir.join(format!("checkpoint_{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(checkpoint::METADATA_FILE), b"{}").unwrap();
    }
    assert_eq!(checkpoint::latest(&dir).unwrap(), dir.join("checkpoint_1000000"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// IMPALA learns on a thread of its own with requests always in flight: its
/// checkpoints say they are not exact, and a restore still hands the saved
/// weights to the learner thread (not only to the evaluators).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_restore_is_approximate_but_keeps_the_weights() {
    let dir = tmp("impala");
    let cfg = json!({"num_workers": 1, "num_envs_per_worker": 4, "train_batch_size": 256, "seed": 3});
    let (mut t, resolved) = build_trainer("IMPALA", "CartPole-v1", &cfg).await.unwrap();
    for _ in 0..5 {
        t.train().await.unwrap();
    }
    let info = RunInfo { algorithm: "IMPALA".into(), env: "CartPole-v1".into(), config: resolved };
    let path = checkpoint::save(&mut t, &dir, &info).await.unwrap();
    let saved = weights(&t);
    drop(t);
    let ckpt = Checkpoint::load(&path).unwrap();
    assert!(!ckpt.metadata.exact_resume);
    assert!(ckpt.metadata.notes.iter().any(|n| n.contains("learner thread")), "{:?}", ckpt.metadata.notes);

    let (mut fresh, _) = build_trainer("IMPALA", "CartPole-v1", &cfg).await.unwrap();
    let init = weights(&fresh);
    let gaps = ckpt.restore(&mut fresh).await.unwrap();
    assert!(!gaps.is_empty());
    assert_eq!(weights(&fresh), saved);
    fresh.train().await.unwrap();
    let dist = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>().sqrt();
    let after = weights(&fresh);
    assert!(
        dist(&after, &saved) < dist(&init, &saved) / 4.0,
        "the learner continued from {} away from the checkpoint (fresh weights are {} away)",
        dist(&after, &saved),
        dist(&init, &saved)
    );
    std::fs::remove_dir_all(dir).unwrap();
}
