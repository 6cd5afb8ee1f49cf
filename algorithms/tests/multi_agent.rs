//! Multi-agent runs built from config, on the same machinery as
//! single-agent ones: MultiAgentCartPole with independent, shared, frozen
//! and mixed-algorithm policies; evaluator actors sample every agent's
//! rows and each policy learns from its own.

mod common;

use common::{train_until, Score};
use rlx::{MultiPolicy, TrainResult, Trainer};
use rlx_algorithms::build_trainer;
use serde_json::{json, Value};

/// Each named policy's mean return, or nothing until all have one.
fn policy_means(r: &TrainResult, ids: &[&str]) -> Option<Vec<f64>> {
    ids.iter().map(|id| r.policy_reward_mean.get(*id).copied().flatten()).collect()
}

/// The weights of policy `id` in the driver's policy.
fn weights(trainer: &Trainer, id: &str) -> Vec<f32> {
    trainer.policy_weights(id).unwrap_or_else(|| panic!("no policy `{id}`"))
}

/// Trains until every policy in `ids` has a mean return of `threshold`,
/// failing past `budget` agent steps.
async fn train_to(trainer: &mut Trainer, ids: &[&'static str], threshold: f64, budget: u64) -> TrainResult {
    let failure = format!("policies {ids:?} not all at a mean of {threshold}");
    train_until(trainer, &failure, budget, |_, r| {
        let means = policy_means(r, ids)?;
        let worst = means.iter().copied().fold(f64::INFINITY, f64::min);
        Some(Score { value: worst, passed: worst >= threshold })
    })
    .await
}

fn ppo(extra: Value) -> Value {
    let mut config = json!({"seed": 1, "num_workers": 2, "env_config": {"num_agents": 3}});
    rlx::config::deep_merge(&mut config, &extra);
    config
}

/// Two agents under two independent PPO policies, sampled by two evaluator
/// actors, and a third agent under a policy that is not trained: each
/// trained policy's mean return rises from about 22 to 300, its weights
/// move, and the frozen one's stay exactly as they started.
#[tokio::test(flavor = "multi_thread")]
async fn independent_policies_learn_and_a_frozen_one_stays_as_initialized() {
    let config = ppo(json!({"multiagent": {
        "policies": ["p0", "p1", "frozen"],
        "policy_mapping": {"agent_0": "p0", "agent_1": "p1", "agent_2": "frozen"},
        "policies_to_train": ["p0", "p1"],
    }}));
    let (mut trainer, _) = build_trainer("PPO", "MultiAgentCartPole", &config).await.unwrap();
    let before: Vec<Vec<f32>> = ["p0", "p1", "frozen"].iter().map(|id| weights(&trainer, id)).collect();
    assert!(before[0] != before[1], "two policies start from their own seeds");

    let first = trainer.train().await.unwrap();
    let start = policy_means(&first, &["p0", "p1"]).expect("episodes end in the first iteration");
    assert!(start.iter().all(|&m| m < 60.0), "untrained policies balance for about 22 steps: {start:?}");
    let r = train_to(&mut trainer, &["p0", "p1"], 300.0, 600_000).await;

    for (id, initial) in ["p0", "p1"].iter().zip(&before) {
        assert!(&weights(&trainer, id) != initial, "`{id}` learned");
    }
    assert!(weights(&trainer, "frozen") == before[2], "a policy outside policies_to_train keeps its weights");
    let frozen = r.policy_reward_mean["frozen"].unwrap();
    assert!(frozen < 100.0, "the frozen policy did not learn: {frozen}");
    // Per-agent returns, and learner statistics per policy.
    assert_eq!(r.agent_reward_mean.len(), 3);
    assert!(r.learner.get("p0/policy_loss").is_some() && r.learner.get("frozen/policy_loss").is_none());
}

/// Two agents sharing one policy: its batch holds both agents' rows, and
/// it learns from them.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_policy_learns_from_every_agent() {
    let config =
        ppo(json!({"num_workers": 0, "env_config": {"num_agents": 2}, "multiagent": {"policy_mapping": "shared"}}));
    let (mut trainer, _) = build_trainer("PPO", "MultiAgentCartPole", &config).await.unwrap();
    {
        let mut local = trainer.evaluators().local();
        let batch = local.sample().unwrap().batch;
        let agents = batch.i64(rlx::multi_policy::AGENT_INDEX).unwrap();
        let of = |a: i64| agents.iter().filter(|&&x| x == a).count();
        assert!(of(0) > 0 && of(1) > 0, "rows of both agents: {} and {}", of(0), of(1));
        assert_eq!(of(0) + of(1), batch.len());
    }
    let r = train_to(&mut trainer, &["shared"], 300.0, 400_000).await;
    assert_eq!(r.policy_reward_mean.len(), 1);
}

/// RLlib's two-trainer example: one agent under PPO, the other under DQN.
/// Each trainer samples with both policies and trains its own; after every
/// iteration each copies its trained policy into the other.
#[tokio::test(flavor = "multi_thread")]
async fn a_ppo_policy_and_a_dqn_policy_learn_side_by_side() {
    let mapping = json!({"agent_0": "ppo", "agent_1": "dqn"});
    let base = json!({"seed": 1, "env_config": {"num_agents": 2}});
    let mut ppo_config = base.clone();
    rlx::config::deep_merge(
        &mut ppo_config,
        &json!({"multiagent": {
            "policies": {"ppo": {}, "dqn": {"run": "DQN"}}, "policy_mapping": mapping, "policies_to_train": ["ppo"],
        }}),
    );
    let mut dqn_config = base.clone();
    rlx::config::deep_merge(
        &mut dqn_config,
        &json!({"multiagent": {
            "policies": {"ppo": {"run": "PPO"}, "dqn": {}}, "policy_mapping": mapping, "policies_to_train": ["dqn"],
        }}),
    );
    let (mut ppo_trainer, _) = build_trainer("PPO", "MultiAgentCartPole", &ppo_config).await.unwrap();
    let (mut dqn_trainer, _) = build_trainer("DQN", "MultiAgentCartPole", &dqn_config).await.unwrap();
    let mut best = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for _ in 0..400 {
        let r = ppo_trainer.train().await.unwrap();
        let d = dqn_trainer.train().await.unwrap();
        ppo_trainer.set_policy_weights("dqn", &weights(&dqn_trainer, "dqn")).await.unwrap();
        dqn_trainer.set_policy_weights("ppo", &weights(&ppo_trainer, "ppo")).await.unwrap();
        let ppo_mean = r.policy_reward_mean["ppo"].unwrap_or(0.0);
        let dqn_mean = d.policy_reward_mean["dqn"].unwrap_or(0.0);
        best = (best.0.max(ppo_mean), best.1.max(dqn_mean));
        if ppo_mean >= 200.0 && dqn_mean >= 150.0 {
            return;
        }
    }
    panic!("PPO at 200 and DQN at 150 not both reached (best {best:?})");
}

/// The asynchronous algorithms too: IMPALA and APPO keep a learner policy
/// of their own, which is a multi-agent policy like the evaluators'. The
/// mapping comes from a Rust closure here.
#[tokio::test(flavor = "multi_thread")]
async fn impala_and_appo_learn_two_policies() {
    for algorithm in ["IMPALA", "APPO"] {
        let config = json!({"seed": 1, "num_workers": 2, "num_envs_per_worker": 4, "env_config": {"num_agents": 2}});
        let mapping: rlx::PolicyMapping = std::sync::Arc::new(|agent: &str| agent.replace("agent_", "p"));
        let (mut trainer, _) =
            rlx_algorithms::build_trainer_with_mapping(algorithm, "MultiAgentCartPole", &config, mapping)
                .await
                .unwrap();
        let r = train_to(&mut trainer, &["p0", "p1"], 150.0, 1_000_000).await;
        assert_eq!(r.policy_reward_mean.len(), 2, "{algorithm}");
    }
}

/// Mistakes in the section are named before any evaluator starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_section_is_refused_by_name() {
    for (section, expected) in [
        (json!({"policies": ["p0"], "policy_mapping": {"agent_0": "p0", "agent_1": "p7"}}), "p7"),
        (json!({"policies": ["p0", "p1", "idle"], "policy_mapping": "p{i}"}), "idle"),
        (json!({"policy_mapping": {"agent_0": "a", "agent_1": "a", "agent_9": "a"}}), "agent_9"),
        (json!({"policy_mapping": "p{i}", "policies_to_train": ["p0", "nobody"]}), "nobody"),
    ] {
        let config = json!({"multiagent": section});
        let err = build_trainer("PPO", "MultiAgentCartPole", &config).await.err().expect("refused").to_string();
        assert!(err.contains(expected), "{err}");
    }
    let err = build_trainer("PPO", "CartPole-v1", &json!({"multiagent": {"policy_mapping": "shared"}}))
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("multi-agent env"), "{err}");
    // What the registry's capabilities say: these two train one policy on a one-agent env.
    for algorithm in ["A3C", "APEX"] {
        let err = build_trainer(algorithm, "MultiAgentCartPole", &json!({})).await.err().expect("refused").to_string();
        assert!(err.contains(&format!("{algorithm} does not train multi-agent envs")), "{err}");
    }
    for (algorithm, config, expected) in [
        ("PPO", json!({"model": {"use_lstm": true}}), "recurrent"),
        ("ES", json!({}), "ES"),
        (
            "PPO",
            json!({"multiagent": {"policies": {"a": {}, "b": {"run": "DQN"}}, "policy_mapping": "shared"}}),
            "shared",
        ),
        (
            "PPO",
            json!({"multiagent": {"policies": {"a": {}, "b": {"run": "DQN"}}, "policy_mapping": {"agent_0": "a", "agent_1": "b"}}}),
            "trainer of its own",
        ),
    ] {
        let err = build_trainer(algorithm, "MultiAgentCartPole", &config).await.err().expect("refused").to_string();
        assert!(err.contains(expected), "{algorithm} {config}: {err}");
    }
    let self_play = json!({"num_envs_per_worker": 4, "multiagent": {"self_play": {"pool": 4}}});
    let err = build_trainer("PPO", "TicTacToe", &self_play).await.err().expect("refused").to_string();
    assert!(err.contains("num_envs_per_worker") && err.contains('8'), "{err}");
}

/// `MultiPolicy` itself: weights are each policy's in id order.
#[test]
fn a_multi_policy_lays_its_policies_weights_end_to_end() {
    let (o, a) = (rlx::Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), rlx::Space::discrete(2));
    let make = |seed| rlx_algorithms::make_policy("PPO", &json!({}), &o, &a, seed).unwrap();
    let (w0, w1) = (make(1).get_weights(), make(2).get_weights());
    let policies = [("b".to_string(), make(2)), ("a".to_string(), make(1))].into_iter().collect();
    let agents = ["a".to_string(), "b".to_string()];
    let multi = MultiPolicy::new(policies, 2, &agents, &agents, &[]).unwrap();
    use rlx::PolicyGraph;
    let layout = multi.weight_layout();
    assert_eq!(layout[0], ("a".to_string(), 0..w0.len()));
    assert!(multi.get_weights() == [w0, w1].concat());
}

/// Rows read from a dataset go to the policy their agent maps to in the
/// reading run, whichever policy logged them; rows without agents, or of
/// an agent the env lacks, are refused by name.
#[test]
fn logged_rows_go_to_the_policy_their_agent_maps_to_now() {
    use rlx::multi_policy::{AGENT_INDEX, POLICY_INDEX};
    use rlx::PolicyGraph;
    let (o, a) = (rlx::Space::uniform_box(-1.0, 1.0, vec![4]).unwrap(), rlx::Space::discrete(2));
    let make = |seed| rlx_algorithms::make_policy("DQN", &json!({}), &o, &a, seed).unwrap();
    let policies = [("a".to_string(), make(1)), ("b".to_string(), make(2))].into_iter().collect();
    // Agent 0 plays `b` (policy index 1), agent 1 plays `a` (index 0).
    let multi = MultiPolicy::new(policies, 2, &["b".to_string(), "a".to_string()], &[], &[]).unwrap();
    let mut rows = rlx::SampleBatch::new();
    rows.insert_i64(AGENT_INDEX, vec![0, 1, 1, 0], 1).unwrap();
    // As logged by a run that mapped both agents to one policy.
    rows.insert_i64(POLICY_INDEX, vec![0, 0, 0, 0], 1).unwrap();
    multi.assign_logged_rows(&mut rows).unwrap();
    assert_eq!(rows.i64(POLICY_INDEX).unwrap(), [1, 0, 0, 1]);

    let mut single_agent = rlx::SampleBatch::new();
    single_agent.insert_f32(rlx::fields::REWARDS, vec![1.0; 3], 1).unwrap();
    let err = multi.assign_logged_rows(&mut single_agent).unwrap_err().to_string();
    assert!(err.contains("no `agent_index` column") && err.contains("single-agent run"), "{err}");
    let mut third = rlx::SampleBatch::new();
    third.insert_i64(AGENT_INDEX, vec![0, 2], 1).unwrap();
    let err = multi.assign_logged_rows(&mut third).unwrap_err().to_string();
    assert!(err.contains("agent 2's") && err.contains("2 agents"), "{err}");
    // A single policy takes logged rows as they are.
    let mut plain = rows.clone();
    make(3).assign_logged_rows(&mut plain).unwrap();
    assert_eq!(plain.i64(POLICY_INDEX).unwrap(), [1, 0, 0, 1]);
}

/// An execution plan of the caller's own (outside the registry) on a
/// multi-agent env: its policy maker builds every policy of the default
/// plan, and the evaluators sample rows of both agents.
#[tokio::test(flavor = "multi_thread")]
async fn a_callers_own_plan_gets_multi_agent_policies_from_its_maker() {
    use rlx_algorithms::common::build_context::BuildContext;
    use rlx_algorithms::common::sampling::{spawn_evaluators, SamplingSettings};
    use rlx_algorithms::policy_gradient::actor_critic::actor_critic_policies;
    let settings = SamplingSettings {
        num_workers: 1,
        num_envs_per_worker: 2,
        sample_size: 64,
        observation_filter: Default::default(),
        reward_scaling: None,
        seed: 3,
        ..Default::default()
    };
    let make_env = rlx_algorithms::env_maker("MultiAgentCartPole", &json!({"num_agents": 2})).unwrap();
    let maker = actor_critic_policies("PPO", rlx_algorithms::ppo::PpoConfig::default());
    let evaluators = spawn_evaluators(&BuildContext::default(), make_env, maker, settings).await.unwrap();
    let layout = evaluators.local().policy().weight_layout();
    assert_eq!(layout.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["default_policy"]);
    let rollout = evaluators.workers()[0].sample().await.unwrap();
    let agents = rollout.batch.i64(rlx::multi_policy::AGENT_INDEX).unwrap();
    assert!(agents.contains(&0) && agents.contains(&1));
}
