//! Tree search with a learned network: AlphaZero.
//!
//! | file | what it holds |
//! |---|---|
//! | [`alpha_zero`] | the algorithm: config, loss, training step |
//! | [`mcts`] | the search: PUCT, root noise, virtual loss, batched leaves, tree reuse |
//! | [`self_play`] | self-play as an evaluator's sampling, with search threads |
//! | [`arena`] | the learner against random play, pure MCTS and minimax; round robins |
//! | [`elo`] | Elo ratings fitted to a round robin's games |
//!
//! The games are [`rlx::game::Game`]s (TicTacToe, ConnectFour).

pub mod alpha_zero;
pub mod arena;
pub mod elo;
pub mod mcts;
pub mod self_play;
