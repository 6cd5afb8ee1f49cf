//! Population-based training: a PPO population learns CartPole-v1 and
//! exploits along the way; a member killed in the middle of a round is
//! restarted from its snapshot, the lost iterations are counted, and the
//! whole population keeps reporting.

mod common;

use rlx::config::merge_json;
use rlx::PolicyOptimizer;
use rlx_algorithms::pbt::{self, PbtConfig};
use rlx_algorithms::registry::Registry;
use rlx_algorithms::{build_trainer, env_maker};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Small PPO members sampling in their own actors.
fn members() -> Value {
    json!({"num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 512,
           "sgd_minibatch_size": 128, "num_sgd_iter": 6})
}

/// Env steps of the whole population (four members).
const STEP_BUDGET: u64 = 300_000;
const THRESHOLD: f64 = 150.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ppo_population_learns_cartpole_and_exploits() {
    let config = json!({"algorithm": "PPO", "population": 4, "seed": 1, "perturbation_interval": 2,
                        "config": members()});
    let (mut trainer, resolved) = build_trainer("PBT", "CartPole-v1", &config).await.unwrap();
    // The resolved config spells out the default mutations.
    assert!(resolved["hyperparam_mutations"]["lr"]["log"].as_bool().unwrap(), "{resolved}");
    let failure = format!("PBT did not reach a mean return of {THRESHOLD}");
    let r = common::train_until(&mut trainer, &failure, STEP_BUDGET, |_, r| {
        let mean = r.episode_reward_mean.unwrap_or(0.0);
        let l = &r.learner;
        eprintln!(
            "iter {} steps {} mean {mean:.1} best member {} exploits {} lr {:?} t {:.1}s",
            r.training_iteration,
            r.timesteps_total,
            l.get("best_member").unwrap(),
            l.get("num_exploits").unwrap(),
            (0..4).map(|i| l.get(&format!("member_{i}_lr")).unwrap()).collect::<Vec<_>>(),
            r.time_total_s
        );
        // Every member reports its hyperparameters, within their ranges.
        for i in 0..4 {
            assert!((1e-4..=1e-2).contains(&l.get(&format!("member_{i}_lr")).unwrap()));
            assert!((0.1..=0.3).contains(&l.get(&format!("member_{i}_clip_param")).unwrap()));
            assert_eq!(l.get(&format!("member_{i}_iterations")), Some(2.0 * r.training_iteration as f64));
        }
        // One exploit per round: a quarter of four members.
        assert_eq!(l.get("num_exploits"), Some(r.training_iteration as f64));
        Some(common::Score { value: mean, passed: mean >= THRESHOLD && r.episodes_total >= 20 })
    })
    .await;
    // The shadow policy (what checkpoints save) holds a good member's weights.
    let greedy = common::greedy_return(trainer.evaluators().local().policy_mut(), "CartPole-v1", 5);
    eprintln!("greedy return of the best member's weights: {greedy:.1}");
    assert!(greedy >= 100.0, "greedy return {greedy}");
    assert_eq!(r.learner.get("member_restarts"), Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_mid_round_restarts_from_its_snapshot() {
    let overrides = json!({"population": 4, "seed": 2, "perturbation_interval": 4,
                           "config": {"num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 256,
                                      "sgd_minibatch_size": 64, "num_sgd_iter": 2}});
    let cfg: PbtConfig = merge_json(&PbtConfig::default(), &overrides).unwrap();
    let (mut best, mut opt) =
        pbt::build_optimizer(&Registry, env_maker("CartPole-v1", &Value::Null).unwrap(), cfg).await.unwrap();
    let first = opt.step(&mut best).await.unwrap();
    assert_eq!(first.learner.get("member_restarts"), Some(0.0));
    assert_eq!(first.learner.get("member_iterations_lost"), Some(0.0));

    // Kill member 1 once it has trained an iteration of the next round.
    let victim = opt.member(1).clone();
    let progress = opt.member_progress(1);
    let before = progress.load(Ordering::SeqCst);
    assert_eq!(before, 4);
    let killer = async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        while progress.load(Ordering::SeqCst) <= before {
            assert!(Instant::now() < deadline, "member 1 trained nothing in 60 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        victim.kill();
    };
    let (second, ()) = tokio::join!(opt.step(&mut best), killer);
    let second = second.expect("one member failure is within the restart budget");
    let l = &second.learner;
    eprintln!("{l:?}");
    assert_eq!(l.get("member_restarts"), Some(1.0));
    let lost = l.get("member_iterations_lost").unwrap();
    assert!((1.0..4.0).contains(&lost), "iterations lost: {lost}");
    // The replacement started from the snapshot (iteration 4) and trained
    // the whole round again; every member reports.
    for i in 0..4 {
        assert_eq!(l.get(&format!("member_{i}_iterations")), Some(8.0), "member {i}: {l:?}");
        assert!(l.get(&format!("member_{i}_lr")).is_some());
    }
    assert!(second.steps_sampled >= 4 * 4 * 256);

    // Training carries on; the count stays.
    let third = opt.step(&mut best).await.unwrap();
    assert_eq!(third.learner.get("member_restarts"), Some(1.0));
    assert_eq!(third.learner.get("member_iterations_lost"), Some(lost));
    assert_eq!(third.learner.get("member_3_iterations"), Some(12.0));
    assert_eq!(opt.population(), 4);
}

/// PBT's checks against the table of algorithms run wherever the registry
/// reads a PBT config: `rlx train --run PBT`, and `check_config`, which
/// `rlx tune` calls before its first trial.
#[test]
fn the_registry_checks_pbt_configs_against_its_table() {
    let pbt = rlx_algorithms::registry::algorithm("PBT").unwrap();
    let err = |overrides: Value| pbt.check_config(&overrides).unwrap_err().to_string();
    let names = "A2C, A3C, APEX, APPO, ARS, BC, CQL, DDPG, DQN, DreamerV3, ES, IMPALA, IQL, MARWIL, PG, PPO, SAC, TD3";
    assert_eq!(
        err(json!({"algorithm": "PBT"})),
        format!("config key `algorithm` = PBT is out of range: must be one of {names}")
    );
    let e = err(json!({"config": {"num_wrokers": 2}}));
    assert!(e.contains("`config.num_wrokers`") && e.contains("did you mean `num_workers`"), "{e}");
    assert_eq!(
        err(json!({"algorithm": "ES"})),
        "config key `hyperparam_mutations` = {} is out of range: must name at least one numeric key of ES's config \
         to explore"
    );
    let e = err(json!({"hyperparam_mutations": {"num_sgd_iter": {"choice": [4, 8]}}}));
    assert!(e.contains("`hyperparam_mutations.num_sgd_iter`") && e.contains("`choice` cannot be explored"), "{e}");
    // The member algorithm's default mutations, written out as ranges.
    let resolved = pbt.check_config(&json!({})).unwrap();
    assert_eq!(resolved["hyperparam_mutations"]["lr"], json!({"min": 1e-4, "max": 1e-2, "log": true}));
    assert_eq!(
        rlx_algorithms::default_config("PBT").unwrap()["hyperparam_mutations"],
        resolved["hyperparam_mutations"]
    );
    // Ray Tune's range syntax reads as the same range.
    let tune = pbt.check_config(&json!({"hyperparam_mutations": {"lr": {"loguniform": [1e-4, 1e-2]}}})).unwrap();
    assert_eq!(tune["hyperparam_mutations"], json!({"lr": {"min": 1e-4, "max": 1e-2, "log": true}}));
}
