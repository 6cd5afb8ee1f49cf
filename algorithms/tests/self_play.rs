//! Self-play on TicTacToe: PPO's `main` policy learns against a league of
//! its own frozen snapshots. It comes to win 90 % of its games against a
//! uniformly random legal player (greedy, 1000 games, half from each seat;
//! the best possible is about 97 %), its win rate against its initial
//! snapshot rises, and it never makes an illegal move (the game refuses
//! one, which would fail the run; the games here check every move).

use rlx::multi_agent::MultiAgentEnv;
use rlx::{Action, Column, GameEnv, PolicyGraph, PolicyInput, SampleBatch, Step};
use rlx_algorithms::build_trainer;
use rlx_envs::TicTacToe;
use serde_json::{json, Value};

/// Who plays a seat in [`play`].
enum Player<'a> {
    Policy(&'a mut dyn PolicyGraph),
    /// Uniformly random among the free cells, from a tiny LCG.
    Random(u64),
}

impl Player<'_> {
    fn choose(&mut self, obs: &[f32], free: &[bool]) -> i64 {
        match self {
            Player::Policy(policy) => {
                let mask: Vec<f32> = free.iter().map(|&f| f32::from(u8::from(f))).collect();
                let mut out = SampleBatch::new();
                let input = PolicyInput { obs, action_mask: Some(&mask), state: None, explore: false };
                policy.compute_actions_from_input(&input, &mut out).unwrap();
                let Some(Column::I64 { data, .. }) = out.get(rlx::fields::ACTIONS) else { panic!("no actions") };
                data[0]
            }
            Player::Random(state) => {
                *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let cells: Vec<usize> = (0..9).filter(|&c| free[c]).collect();
                cells[(*state >> 33) as usize % cells.len()] as i64
            }
        }
    }
}

/// Plays `games` games, `a` as X in the first half and as O in the
/// second; returns `a`'s share of wins. Panics on an illegal move.
fn play<'p>(a: &mut Player<'p>, b: &mut Player<'p>, games: usize) -> f64 {
    let mut wins = 0;
    for g in 0..games {
        let mut env = GameEnv::new(TicTacToe::new());
        let mut obs = vec![vec![0.0; 18]; 2];
        let mut steps = vec![Step::default(); 2];
        env.reset(None, &mut obs).unwrap();
        let a_seat = usize::from(g >= games / 2);
        let mut to_move = 0;
        loop {
            let free = env.action_mask(to_move).unwrap().to_vec();
            let player = if to_move == a_seat { &mut *a } else { &mut *b };
            let cell = player.choose(&obs[to_move], &free);
            assert!(free[cell as usize], "illegal move {cell} on\n{}", rlx::Game::render(env.state()));
            let mut actions = [None, None];
            actions[to_move] = Some(Action::Discrete(cell));
            if env.step(&actions, &mut obs, &mut steps).unwrap() {
                wins += usize::from(steps[a_seat].reward > 0.0);
                break;
            }
            to_move = 1 - to_move;
        }
    }
    wins as f64 / games as f64
}

#[tokio::test(flavor = "multi_thread")]
async fn self_play_learns_tic_tac_toe_against_its_league() {
    let config = json!({
        "seed": 1, "num_envs_per_worker": 16, "train_batch_size": 4096, "sgd_minibatch_size": 256,
        "num_sgd_iter": 6, "lr": 0.001, "entropy_coeff": 0.01, "gamma": 0.99,
        "multiagent": {"self_play": {"snapshot_every": 5, "pool": 8}},
    });
    let (mut trainer, resolved) = build_trainer("PPO", "TicTacToe", &config).await.unwrap();
    let (obs, act) = (rlx::Space::uniform_box(0.0, 1.0, vec![18]).unwrap(), rlx::Space::discrete(9));
    let policy = |weights: &[f32]| {
        let single: Value = resolved
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "multiagent")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut p = rlx_algorithms::make_policy("PPO", &single, &obs, &act, 0).unwrap();
        p.set_weights(weights).unwrap();
        p
    };
    let mut vs_initial = Vec::new();
    let mut best_vs_random: f64 = 0.0;
    for iteration in 1..=150 {
        let r = trainer.train().await.unwrap();
        if iteration % 5 != 0 {
            continue;
        }
        // The league's record: `main`'s against each snapshot, `main_v0`
        // being its initial self.
        assert_eq!(r.self_play.len(), 8, "{:?}", r.self_play);
        let record = &r.self_play["main_v0"];
        assert!(record.games > 0, "games against main_v0 ended: {record:?}");
        assert!((record.win + record.draw + record.loss - 1.0).abs() < 1e-9, "{record:?}");
        vs_initial.push(record.win);
        let mut main = policy(&trainer.policy_weights("main").unwrap());
        let vs_random = play(&mut Player::Policy(main.as_mut()), &mut Player::Random(iteration), 1000);
        best_vs_random = best_vs_random.max(vs_random);
        if vs_random >= 0.9 {
            let (first, last) = (vs_initial[0], vs_initial[vs_initial.len() - 1]);
            assert!(last >= first + 0.2 && last >= 0.8, "win rates against the initial snapshot: {vs_initial:?}");
            return;
        }
    }
    panic!("win rate against a random player: best {best_vs_random:.2}, below 0.9");
}
