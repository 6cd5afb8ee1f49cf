//! AlphaZero on TicTacToe: after a short run its search never loses to a
//! perfect minimax player that breaks ties at random (100 games in each
//! seat). The network alone (its most probable legal move) is reported
//! beside it: early in the run it still loses to minimax, so the arena
//! measures what was learned. Self-play on evaluators with search
//! threads delivers every game, the same for a seed.

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

/// Self-play on three evaluators, each splitting its share of the 7 games
/// (3, 2 and 2) over two search threads with copies of the network: every
/// game of every iteration arrives, its moves are the positions, and the
/// same seed gives the same games and the same network whatever the
/// threads' timing.
#[tokio::test(flavor = "multi_thread")]
async fn every_game_arrives_from_evaluators_and_their_search_threads_the_same_for_a_seed() {
    let config = json!({
        "seed": 2, "num_workers": 3, "num_search_workers": 2, "games_per_iteration": 7, "games_in_flight": 2,
        "num_simulations": 8, "train_batch_size": 16, "num_sgd_steps": 2, "arena_interval": 0,
        "model": {"fcnet_hiddens": [16]},
    });
    let (first, second) = (three_iterations(&config).await, three_iterations(&config).await);
    assert_eq!(first.0, second.0, "the same games");
    assert!(first.1 == second.1, "the same network");
}

/// Three iterations of `config` on TicTacToe, checking that each delivers
/// its 7 games: their lengths, and the network's weights at the end.
async fn three_iterations(config: &serde_json::Value) -> (Vec<Vec<u64>>, Vec<f32>) {
    let (mut trainer, _) = build_trainer("AlphaZero", "TicTacToe", config).await.unwrap();
    let mut moves = Vec::new();
    for _ in 0..3 {
        let result = trainer.train().await.unwrap();
        assert_eq!(result.episodes_this_iter, 7, "{result:?}");
        let lengths: Vec<u64> = trainer.last_episodes().iter().map(|e| e.length).collect();
        assert!(lengths.iter().all(|l| (5..=9).contains(l)), "TicTacToe games last 5 to 9 moves: {lengths:?}");
        assert_eq!(result.timesteps_this_iter, lengths.iter().sum::<u64>(), "one position a move");
        assert_eq!(result.num_evaluator_restarts, 0);
        moves.push(lengths);
    }
    let weights = trainer.evaluators().local().policy().get_weights();
    (moves, weights)
}
