//! The arena: the learner's network with its search, and the network
//! alone, against fixed opponents, half the games in each seat. Its
//! results go to `result.json` as `evaluation.arena.<opponent>`. A
//! [`round_robin`] plays checkpoints and fixed opponents against each
//! other for an Elo table (`rlx arena`, [`super::elo`]).
//!
//! Opponents, by name:
//! - `random`: a uniformly random legal move;
//! - `mcts_<simulations>`: pure Monte Carlo tree search, the same search
//!   with a uniform prior (`c_puct·P = 1`) and the outcome of one random
//!   play-out as each leaf's value;
//! - `minimax`: perfect play, by exhaustive search of the game (with a
//!   table of solved positions), breaking ties between equally good moves
//!   at random. Only small games can be solved: past
//!   [`MINIMAX_POSITIONS`] positions it stops with an error.

use super::elo::Pairing;
use super::mcts::{search, value_for, LeafEvaluator, NetworkPrior, RandomRollouts, SearchSettings, Tree};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::evaluation::{ArenaRecord, EvaluationResult, Outcomes};
use rlx::game::Game;
use rlx::{PolicyError, PolicyGraph};
use std::collections::{BTreeMap, HashMap};

/// The most positions `minimax` solves before giving up.
pub const MINIMAX_POSITIONS: usize = 5_000_000;

/// An arena opponent (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opponent {
    /// Uniformly random legal moves.
    Random,
    /// Pure MCTS with this many simulations.
    Mcts(usize),
    /// Perfect play, ties broken at random.
    Minimax,
}

impl Opponent {
    /// The opponent called `name`.
    ///
    /// # Errors
    /// A name that is none of `random`, `mcts_<simulations ≥ 1>`, `minimax`.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "random" => Ok(Self::Random),
            "minimax" => Ok(Self::Minimax),
            _ => match name.strip_prefix("mcts_").map(str::parse::<usize>) {
                Some(Ok(n)) if n >= 1 => Ok(Self::Mcts(n)),
                _ => Err(format!("`{name}` is not an opponent: random, minimax or mcts_<simulations>, e.g. mcts_100")),
            },
        }
    }

    /// Its name in results.
    pub fn name(&self) -> String {
        match self {
            Self::Random => "random".into(),
            Self::Mcts(n) => format!("mcts_{n}"),
            Self::Minimax => "minimax".into(),
        }
    }
}

/// Chooses moves for positions where it is to move.
trait Mover {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError>;
}

/// The learner: its network with a search, or alone.
struct Learner<'a> {
    policy: &'a mut dyn PolicyGraph,
    /// `None`: the network alone (its most probable legal move).
    search: Option<SearchSettings>,
}

impl Mover for Learner<'_> {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        let mut prior = NetworkPrior::new(self.policy);
        match self.search {
            Some(settings) => {
                let mut trees: Vec<Tree> = positions.iter().map(|p| Tree::new(p.boxed_clone(), settings)).collect();
                let mut refs: Vec<&mut Tree> = trees.iter_mut().collect();
                search(&mut refs, &mut prior, rng)?;
                Ok(trees.iter().map(|t| t.choose(0.0, rng)).collect())
            }
            None => {
                let values = prior.evaluate(positions)?;
                Ok(positions.iter().zip(values).map(|(p, v)| most_probable_legal(*p, &v.priors)).collect())
            }
        }
    }
}

fn most_probable_legal(position: &dyn Game, priors: &[f32]) -> usize {
    let legal = position.legal_actions();
    legal
        .into_iter()
        .fold(None, |best: Option<usize>, a| match best {
            Some(b) if priors[b] >= priors[a] => Some(b),
            _ => Some(a),
        })
        .expect("a position that is not terminal has a legal move")
}

struct RandomMover;

impl Mover for RandomMover {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        Ok(positions
            .iter()
            .map(|p| {
                let legal = p.legal_actions();
                legal[rng.gen_range(0..legal.len())]
            })
            .collect())
    }
}

struct PureMcts {
    simulations: usize,
}

impl Mover for PureMcts {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        let Some(first) = positions.first() else { return Ok(Vec::new()) };
        let settings = SearchSettings {
            num_simulations: self.simulations,
            c_puct: first.num_actions() as f32,
            dirichlet_alpha: 1.0,
            dirichlet_fraction: 0.0,
            leaf_batch: 1,
        };
        let mut trees: Vec<Tree> = positions.iter().map(|p| Tree::new(p.boxed_clone(), settings)).collect();
        let mut refs: Vec<&mut Tree> = trees.iter_mut().collect();
        let mut rollouts = RandomRollouts { rollouts: 1, rng: ChaCha8Rng::from_rng(&mut *rng).expect("seeds") };
        search(&mut refs, &mut rollouts, rng)?;
        Ok(trees.iter().map(|t| t.choose(0.0, rng)).collect())
    }
}

/// Perfect play from a table of solved positions (keyed by the game's
/// saved state).
#[derive(Default)]
pub struct Minimax {
    solved: HashMap<Vec<u8>, f32>,
}

impl Minimax {
    /// The value of `position` for its player to move under perfect play.
    ///
    /// # Errors
    /// A game that cannot save its state (the table's key), or one too
    /// large to solve.
    pub fn value(&mut self, position: &dyn Game) -> Result<f32, PolicyError> {
        let player = position.to_move();
        if let Some(v) = position.terminal_value(player) {
            return Ok(v);
        }
        let key = position.save_state().ok_or_else(|| {
            PolicyError::Other(format!("minimax: {} cannot save its state, which keys the table", position.name()))
        })?;
        if let Some(&v) = self.solved.get(&key) {
            return Ok(v);
        }
        if self.solved.len() >= MINIMAX_POSITIONS {
            return Err(PolicyError::Other(format!(
                "minimax: {} has more than {MINIMAX_POSITIONS} positions, too many to solve; use mcts_<n> instead",
                position.name()
            )));
        }
        let mut best = f32::NEG_INFINITY;
        for (_, v) in self.move_values(position)? {
            best = best.max(v);
        }
        self.solved.insert(key, best);
        Ok(best)
    }

    /// Each legal move with its value for the player making it.
    fn move_values(&mut self, position: &dyn Game) -> Result<Vec<(usize, f32)>, PolicyError> {
        let player = position.to_move();
        let mut out = Vec::new();
        for a in position.legal_actions() {
            let mut next = position.boxed_clone();
            next.play(a).map_err(|e| PolicyError::Other(e.to_string()))?;
            let v = match next.terminal_value(player) {
                Some(v) => v,
                None => value_for(next.to_move(), self.value(next.as_ref())?, player),
            };
            out.push((a, v));
        }
        Ok(out)
    }

    /// A best move, chosen at random among equals.
    ///
    /// # Errors
    /// As [`value`](Self::value).
    pub fn best_move(&mut self, position: &dyn Game, rng: &mut impl Rng) -> Result<usize, PolicyError> {
        let values = self.move_values(position)?;
        let best = values.iter().map(|&(_, v)| v).fold(f32::NEG_INFINITY, f32::max);
        let ties: Vec<usize> = values.iter().filter(|&&(_, v)| v == best).map(|&(a, _)| a).collect();
        Ok(ties[rng.gen_range(0..ties.len())])
    }
}

impl Mover for Minimax {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        positions.iter().map(|p| self.best_move(*p, rng)).collect()
    }
}

/// A fixed opponent with what it keeps between moves (minimax's table).
struct Fixed {
    opponent: Opponent,
    minimax: Minimax,
}

impl Fixed {
    fn new(opponent: Opponent) -> Self {
        Self { opponent, minimax: Minimax::default() }
    }
}

impl Mover for Fixed {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        match self.opponent {
            Opponent::Random => RandomMover.moves(positions, rng),
            Opponent::Mcts(simulations) => PureMcts { simulations }.moves(positions, rng),
            Opponent::Minimax => self.minimax.moves(positions, rng),
        }
    }
}

/// `games` games of `learner` against `opponent` (the learner moves first
/// in the even ones), all at once: each side's moves across the games are
/// chosen together. Each two games, one in each seat, begin with the same
/// `opening`: that many plies of uniformly random legal moves, so that
/// two players who choose alike do not play one game over and over.
/// Returns the learner's score of each game (+1, 0, −1) and the games'
/// lengths (the opening's plies included).
fn play_match(
    game: &dyn Game,
    (learner, opponent): (&mut dyn Mover, &mut dyn Mover),
    games: usize,
    opening: usize,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<f32>, Vec<u64>), PolicyError> {
    let mut lengths = vec![0u64; games];
    let mut states: Vec<Box<dyn Game>> = Vec::with_capacity(games);
    for i in 0..games {
        if i % 2 == 1 {
            states.push(states[i - 1].boxed_clone());
            lengths[i] = lengths[i - 1];
            continue;
        }
        let mut g = game.boxed_clone();
        g.reset();
        while (lengths[i] as usize) < opening && !g.is_terminal() {
            let legal = g.legal_actions();
            g.play(legal[rng.gen_range(0..legal.len())]).map_err(|e| PolicyError::Other(e.to_string()))?;
            lengths[i] += 1;
        }
        states.push(g);
    }
    let seat = |i: usize| i % 2;
    loop {
        let live: Vec<usize> = (0..games).filter(|&i| !states[i].is_terminal()).collect();
        if live.is_empty() {
            break;
        }
        for learner_turn in [true, false] {
            let turn: Vec<usize> =
                live.iter().copied().filter(|&i| (states[i].to_move() == seat(i)) == learner_turn).collect();
            if turn.is_empty() {
                continue;
            }
            let positions: Vec<&dyn Game> = turn.iter().map(|&i| states[i].as_ref()).collect();
            let side: &mut dyn Mover = if learner_turn { &mut *learner } else { &mut *opponent };
            let moves = side.moves(&positions, rng)?;
            for (&i, a) in turn.iter().zip(moves) {
                states[i].play(a).map_err(|e| PolicyError::Other(e.to_string()))?;
                lengths[i] += 1;
            }
        }
    }
    let scores = states.iter().enumerate().map(|(i, s)| s.terminal_value(seat(i)).unwrap_or(0.0)).collect();
    Ok((scores, lengths))
}

/// The arena's evaluation: `games` games against each opponent with the
/// learner's search (`settings`, without noise), and as many with its
/// network alone.
///
/// # Errors
/// The network's error, or an opponent that cannot play this game.
pub fn evaluate(
    policy: &mut dyn PolicyGraph,
    game: &dyn Game,
    opponents: &[Opponent],
    settings: SearchSettings,
    games: usize,
    rng: &mut ChaCha8Rng,
) -> Result<EvaluationResult, PolicyError> {
    let mut arena = BTreeMap::new();
    let (mut all_scores, mut all_lengths) = (Vec::new(), Vec::new());
    for &opponent in opponents {
        let mut outcomes = [Outcomes::default(); 2];
        let mut fixed = Fixed::new(opponent);
        for (k, search) in [Some(settings.without_noise()), None].into_iter().enumerate() {
            let mut learner = Learner { policy: &mut *policy, search };
            let (scores, lengths) = play_match(game, (&mut learner, &mut fixed), games, 0, rng)?;
            outcomes[k] = Outcomes::of(&scores);
            if k == 0 {
                all_scores.extend(scores);
                all_lengths.extend(lengths);
            }
        }
        let [with, without] = outcomes;
        let record = ArenaRecord {
            win: with.win,
            draw: with.draw,
            loss: with.loss,
            games: games as u64,
            without_search: Some(without),
        };
        arena.insert(opponent.name(), record);
    }
    let episodes: Vec<rlx::EpisodeSummary> = all_scores
        .iter()
        .zip(&all_lengths)
        .map(|(&s, &length)| rlx::EpisodeSummary {
            episode_return: f64::from(s),
            length,
            truncated: false,
            agent: None,
        })
        .collect();
    Ok(EvaluationResult { arena, ..EvaluationResult::of(&episodes) })
}

/// A player in a [`round_robin`]: a checkpoint's network, with its
/// search or alone, or a fixed opponent.
pub struct Entrant {
    /// Its name in the table.
    pub name: String,
    player: Box<dyn Mover>,
}

struct OwnLearner {
    policy: Box<dyn PolicyGraph>,
    search: Option<SearchSettings>,
}

impl Mover for OwnLearner {
    fn moves(&mut self, positions: &[&dyn Game], rng: &mut ChaCha8Rng) -> Result<Vec<usize>, PolicyError> {
        Learner { policy: self.policy.as_mut(), search: self.search }.moves(positions, rng)
    }
}

impl Entrant {
    /// A network that moves with `search` (without root noise), or with
    /// `None` its most probable legal move.
    pub fn network(name: String, policy: Box<dyn PolicyGraph>, search: Option<SearchSettings>) -> Self {
        let search = search.map(SearchSettings::without_noise);
        Self { name, player: Box::new(OwnLearner { policy, search }) }
    }

    /// A fixed opponent, under its name.
    pub fn fixed(opponent: Opponent) -> Self {
        Self { name: opponent.name(), player: Box::new(Fixed::new(opponent)) }
    }
}

/// `games` games (half with each side first, each two from the same
/// `opening` of random plies) between every two of `entrants`; the
/// pairings in order `(0, 1)`, `(0, 2)`, …, `(1, 2)`, …; `progress` hears
/// of each pairing when it is done.
///
/// # Errors
/// A network's error, or an opponent that cannot play this game.
pub fn round_robin(
    game: &dyn Game,
    entrants: &mut [Entrant],
    (games, opening): (usize, usize),
    rng: &mut ChaCha8Rng,
    progress: &mut dyn FnMut(&Pairing),
) -> Result<Vec<Pairing>, PolicyError> {
    let mut pairings = Vec::new();
    for b in 1..entrants.len() {
        for a in 0..b {
            let (left, right) = entrants.split_at_mut(b);
            let (first, second): (&mut dyn Mover, &mut dyn Mover) = (left[a].player.as_mut(), right[0].player.as_mut());
            let (scores, _) = play_match(game, (first, second), games, opening, rng)?;
            let count = |keep: fn(f32) -> bool| scores.iter().filter(|&&s| keep(s)).count() as u32;
            let pairing =
                Pairing { a, b, a_wins: count(|s| s > 0.0), draws: count(|s| s == 0.0), b_wins: count(|s| s < 0.0) };
            progress(&pairing);
            pairings.push(pairing);
        }
    }
    pairings.sort_by_key(|p| (p.a, p.b));
    Ok(pairings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_envs::TicTacToe;

    #[test]
    fn opponents_parse_by_name_and_bad_names_are_explained() {
        assert_eq!(Opponent::parse("mcts_200"), Ok(Opponent::Mcts(200)));
        assert_eq!(Opponent::parse("minimax").map(|o| o.name()), Ok("minimax".to_string()));
        for bad in ["mcts_0", "mcts_", "alphabeta", "mcts_x"] {
            assert!(Opponent::parse(bad).unwrap_err().contains("random, minimax or mcts_<simulations>"), "{bad}");
        }
    }

    #[test]
    fn minimax_solves_tictactoe_as_a_draw_and_never_loses_to_random_play() {
        let mut minimax = Minimax::default();
        assert_eq!(minimax.value(&TicTacToe::new()).unwrap(), 0.0, "perfect play draws");
        // TicTacToe has 5,478 legal positions; those with a move to make are solved.
        assert!(minimax.solved.len() < 5_478, "{}", minimax.solved.len());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (scores, _) = play_match(&TicTacToe::new(), (&mut minimax, &mut RandomMover), 200, 0, &mut rng).unwrap();
        let o = Outcomes::of(&scores);
        assert_eq!(o.loss, 0.0);
        assert!(o.win > 0.8, "{o:?}");
    }

    #[test]
    fn a_round_robin_of_fixed_opponents_ranks_them_by_strength() {
        let mut entrants: Vec<Entrant> =
            ["random", "mcts_50", "minimax"].iter().map(|n| Entrant::fixed(Opponent::parse(n).unwrap())).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut heard = 0;
        let pairings = round_robin(&TicTacToe::new(), &mut entrants, (20, 0), &mut rng, &mut |_| heard += 1).unwrap();
        assert_eq!(heard, 3);
        let ab: Vec<(usize, usize)> = pairings.iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(ab, [(0, 1), (0, 2), (1, 2)]);
        for p in &pairings {
            assert_eq!(p.a_wins + p.draws + p.b_wins, 20, "{p:?}");
        }
        // Nobody beats minimax, and it beats random play in most games.
        assert_eq!((pairings[1].a_wins, pairings[2].a_wins), (0, 0), "{pairings:?}");
        assert!(pairings[1].b_wins >= 14, "{pairings:?}");
        let elo = super::super::elo::ratings(3, &pairings, 0);
        assert!(elo[2] > elo[1] && elo[1] > elo[0] + 100.0, "{elo:?}");
    }

    #[test]
    fn each_two_games_share_a_random_opening_with_the_seats_swapped() {
        // With 3 random plies no game ends before its fifth.
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let (scores, lengths) =
            play_match(&TicTacToe::new(), (&mut RandomMover, &mut RandomMover), 40, 3, &mut rng).unwrap();
        assert!(lengths.iter().all(|&l| (5..=9).contains(&l)), "{lengths:?}");
        assert_eq!(scores.len(), 40);
        let (mut a, mut b) = (Minimax::default(), Minimax::default());
        let (scores, _) = play_match(&TicTacToe::new(), (&mut a, &mut b), 40, 3, &mut rng).unwrap();
        // Perfect play from a random opening: some openings are lost for
        // one side, and the pair's other game gives it the other seat.
        assert!(scores.iter().any(|&s| s != 0.0), "{scores:?}");
        for pair in scores.chunks(2) {
            assert_eq!(pair[0], -pair[1], "the same opening, seats swapped, perfect play: {scores:?}");
        }
    }

    #[test]
    fn pure_mcts_beats_random_play_and_never_beats_minimax() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let (scores, _) =
            play_match(&TicTacToe::new(), (&mut PureMcts { simulations: 200 }, &mut RandomMover), 40, 0, &mut rng)
                .unwrap();
        let o = Outcomes::of(&scores);
        assert!(o.win > 0.7 && o.loss < 0.1, "{o:?}");
        let (scores, _) = play_match(
            &TicTacToe::new(),
            (&mut PureMcts { simulations: 200 }, &mut Minimax::default()),
            20,
            0,
            &mut rng,
        )
        .unwrap();
        assert_eq!(Outcomes::of(&scores).win, 0.0);
    }
}
