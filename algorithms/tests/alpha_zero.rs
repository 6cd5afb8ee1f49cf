//! AlphaZero on TicTacToe: after a short run its search never loses to a
//! perfect minimax player that breaks ties at random (100 games in each
//! seat). The network alone (its most probable legal move) is reported
//! beside it: early in the run it still loses to minimax, so the arena
//! measures what was learned.

use rlx_algorithms::build_trainer;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn alpha_zero_never_loses_tic_tac_toe_to_minimax() {
    let iterations = 200;
    let config = json!({
        "seed": 1, "num_workers": 2, "games_in_flight": 16, "games_per_iteration": 32,
        "num_simulations": 200, "leaf_batch": 8, "temperature_moves": 9,
        "train_batch_size": 128, "replay_capacity": 20000, "num_sgd_steps": 20, "lr": 0.002,
        "model": {"fcnet_hiddens": [64, 64]},
        "arena_interval": 25, "arena_games": 200, "arena_opponents": ["minimax", "random"],
    });
    let (mut trainer, resolved) = build_trainer("AlphaZero", "TicTacToe", &config).await.unwrap();
    assert_eq!(resolved["num_simulations"], 200);
    let mut arenas = Vec::new();
    for _ in 0..iterations {
        let result = trainer.train().await.unwrap();
        if let Some(evaluation) = result.evaluation {
            eprintln!("iteration {} ({:.1} s): {:?}", result.training_iteration, result.time_total_s, evaluation.arena);
            arenas.push(evaluation.arena);
        }
    }
    assert_eq!(arenas.len(), iterations / 25);
    let (first, last) = (&arenas[0]["minimax"], &arenas[arenas.len() - 1]["minimax"]);
    let (first_raw, raw) = (first.without_search.unwrap(), last.without_search.unwrap());
    assert_eq!(last.games, 200);
    assert_eq!(last.loss, 0.0, "with search, never a loss to minimax: {last:?}");
    assert!(raw.loss <= 0.05, "the network alone nearly never loses: {raw:?}");
    assert!(first_raw.loss > 0.1, "after 25 iterations the network alone still lost: {first_raw:?}");
    let random = &arenas[arenas.len() - 1]["random"];
    assert!(random.win > 0.85 && random.loss == 0.0, "{random:?}");
}
