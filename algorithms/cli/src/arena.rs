//! `rlx arena`: AlphaZero checkpoints and fixed opponents (`random`,
//! `mcts_<simulations>`, `minimax`) play a round robin, and an Elo table
//! is fitted to the games ([`rlx_algorithms::search::elo`]). It answers
//! what one checkpoint's arena cannot: how much stronger the run's latest
//! network is than its earlier ones.

use crate::play::BoardPlayer;
use crate::results::write_atomic;
use crate::{ArenaArgs, CliError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlx_algorithms::search::arena::{round_robin, Entrant, Opponent};
use rlx_algorithms::search::elo::{ratings, Pairing};
use serde::Serialize;

/// One player's line of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    /// Its name: a checkpoint's directory name, or a fixed opponent's.
    pub name: String,
    /// Its Elo rating, the anchor's at 0.
    pub elo: f64,
    /// Games it played.
    pub games: u32,
    /// Shares of them won, drawn and lost.
    pub win: f64,
    /// Share drawn.
    pub draw: f64,
    /// Share lost.
    pub loss: f64,
}

/// One pairing's games, by the players' names.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairingRecord {
    /// One player.
    pub a: String,
    /// The other.
    pub b: String,
    /// Games `a` won.
    pub a_wins: u32,
    /// Games drawn.
    pub draws: u32,
    /// Games `b` won.
    pub b_wins: u32,
}

/// What `rlx arena` found (and writes with `--out`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArenaTable {
    /// The game played.
    pub game: String,
    /// Games between every two players, half with each first.
    pub games_per_pairing: usize,
    /// Random plies opening each two games.
    pub opening_plies: usize,
    /// The player rated 0: `random` if it played, else the first.
    pub anchor: String,
    /// The players, strongest first.
    pub standings: Vec<Standing>,
    /// Every pairing's games.
    pub pairings: Vec<PairingRecord>,
}

/// Runs `rlx arena`.
///
/// # Errors
/// Fewer than two players, no checkpoint, an odd or zero `--games`, a
/// checkpoint that is not AlphaZero's, checkpoints of different games, an
/// unknown opponent, or a network's error.
pub fn arena(args: &ArenaArgs) -> Result<ArenaTable, CliError> {
    if args.games == 0 || args.games % 2 == 1 {
        return Err(CliError::Usage(format!(
            "--games must be even and at least 2 (half in each seat), not {}",
            args.games
        )));
    }
    if args.checkpoints.is_empty() {
        return Err(CliError::Usage("rlx arena needs at least one checkpoint (its game is the one played)".into()));
    }
    if args.checkpoints.len() + args.opponents.len() < 2 {
        return Err(CliError::Usage("rlx arena needs two players or more: checkpoints and --opponent names".into()));
    }
    let mut entrants = Vec::new();
    let mut game: Option<Box<dyn rlx::game::Game>> = None;
    for path in &args.checkpoints {
        let BoardPlayer { checkpoint, policy, game: own, settings } =
            BoardPlayer::load(path, args.moves.simulations, "rlx arena rates")?;
        let name = checkpoint.dir.file_name().map_or(path.display().to_string(), |n| n.to_string_lossy().into());
        match &game {
            None => game = Some(own),
            Some(first) if first.name() != own.name() => {
                return Err(CliError::Usage(format!(
                    "{} plays {}, the first checkpoint {}: an arena plays one game",
                    checkpoint.dir.display(),
                    own.name(),
                    first.name()
                )))
            }
            Some(_) => {}
        }
        entrants.push(Entrant::network(name, policy, (!args.moves.no_search).then_some(settings)));
    }
    for name in &args.opponents {
        let opponent = Opponent::parse(name).map_err(|e| CliError::Usage(format!("--opponent: {e}")))?;
        entrants.push(Entrant::fixed(opponent));
    }
    let names: Vec<String> = unique_names(entrants.iter().map(|e| e.name.clone()).collect());
    let game = game.expect("one checkpoint or more");
    let mut rng = ChaCha8Rng::seed_from_u64(args.moves.seed);
    let mut progress = |p: &Pairing| {
        errln!("{} – {}: {} won, {} drawn, {} lost", names[p.a], names[p.b], p.a_wins, p.draws, p.b_wins);
    };
    let pairings = round_robin(game.as_ref(), &mut entrants, (args.games, args.opening_plies), &mut rng, &mut progress)
        .map_err(|e| CliError::Play(e.to_string()))?;
    let anchor = names.iter().position(|n| n == "random").unwrap_or(0);
    let elo = ratings(names.len(), &pairings, anchor);
    let table = table(game.name(), (args.games, args.opening_plies), &names, anchor, &elo, &pairings);
    if let Some(out) = &args.out {
        let json = serde_json::to_vec_pretty(&table).expect("a table is JSON");
        write_atomic(out, &json)?;
    }
    Ok(table)
}

/// `names`, with a second and later use of a name numbered (two runs'
/// `checkpoint_000100`s).
fn unique_names(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let taken = out.iter().filter(|n| **n == name || n.starts_with(&format!("{name} #"))).count();
        out.push(if taken == 0 { name } else { format!("{name} #{}", taken + 1) });
    }
    out
}

fn table(
    game: &str,
    (games, opening_plies): (usize, usize),
    names: &[String],
    anchor: usize,
    elo: &[f64],
    pairings: &[Pairing],
) -> ArenaTable {
    let mut standings: Vec<Standing> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let [mut won, mut drawn, mut lost] = [0u32; 3];
            for p in pairings {
                let (w, l) = match (p.a == i, p.b == i) {
                    (true, _) => (p.a_wins, p.b_wins),
                    (_, true) => (p.b_wins, p.a_wins),
                    _ => continue,
                };
                (won, drawn, lost) = (won + w, drawn + p.draws, lost + l);
            }
            let played = won + drawn + lost;
            let share = |k: u32| f64::from(k) / f64::from(played.max(1));
            Standing {
                name: name.clone(),
                elo: elo[i],
                games: played,
                win: share(won),
                draw: share(drawn),
                loss: share(lost),
            }
        })
        .collect();
    standings.sort_by(|a, b| b.elo.total_cmp(&a.elo));
    let pairings = pairings
        .iter()
        .map(|p| PairingRecord {
            a: names[p.a].clone(),
            b: names[p.b].clone(),
            a_wins: p.a_wins,
            draws: p.draws,
            b_wins: p.b_wins,
        })
        .collect();
    let anchor = names[anchor].clone();
    ArenaTable { game: game.into(), games_per_pairing: games, opening_plies, anchor, standings, pairings }
}

/// The table as `rlx arena` prints it.
pub fn render(table: &ArenaTable) -> String {
    let width = table.standings.iter().map(|s| s.name.len()).max().unwrap_or(0).max(6);
    let mut out = format!(
        "{}: {} players, {} games a pairing (half with each first, each two after {} random plies); Elo with {} at 0\n",
        table.game,
        table.standings.len(),
        table.games_per_pairing,
        table.opening_plies,
        table.anchor
    );
    out += &format!(
        "{:>4}  {:<width$}  {:>7}  {:>5}  {:>5}  {:>5}  {:>5}\n",
        "rank", "player", "elo", "games", "win", "draw", "loss"
    );
    for (rank, s) in table.standings.iter().enumerate() {
        out += &format!(
            "{:>4}  {:<width$}  {:>7.0}  {:>5}  {:>5.2}  {:>5.2}  {:>5.2}\n",
            rank + 1,
            s.name,
            s.elo,
            s.games,
            s.win,
            s.draw,
            s.loss
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_are_numbered() {
        let names = unique_names(vec!["checkpoint_000100".into(), "random".into(), "checkpoint_000100".into()]);
        assert_eq!(names, ["checkpoint_000100", "random", "checkpoint_000100 #2"]);
    }

    #[test]
    fn the_table_counts_each_players_games_from_its_side() {
        let names = ["a".to_string(), "b".to_string(), "random".to_string()];
        let pairings = [
            Pairing { a: 0, b: 1, a_wins: 3, draws: 1, b_wins: 0 },
            Pairing { a: 0, b: 2, a_wins: 4, draws: 0, b_wins: 0 },
            Pairing { a: 1, b: 2, a_wins: 2, draws: 0, b_wins: 2 },
        ];
        let elo = ratings(3, &pairings, 2);
        let t = table("TicTacToe", (4, 2), &names, 2, &elo, &pairings);
        assert_eq!(t.anchor, "random");
        let by_name = |n: &str| t.standings.iter().find(|s| s.name == n).unwrap().clone();
        let (a, b) = (by_name("a"), by_name("b"));
        assert_eq!((a.games, a.win, a.draw, a.loss), (8, 7.0 / 8.0, 1.0 / 8.0, 0.0));
        assert_eq!((b.games, b.win, b.draw, b.loss), (8, 2.0 / 8.0, 1.0 / 8.0, 5.0 / 8.0));
        assert_eq!(t.standings[0].name, "a");
        assert!(render(&t).contains("Elo with random at 0"), "{}", render(&t));
    }
}
