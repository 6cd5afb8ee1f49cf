//! Elo ratings from the games of a round robin.
//!
//! The model is Bradley–Terry's, on Elo's scale: player `i` beats `j` with
//! probability `1 / (1 + 10^((R_j − R_i) / 400))`. A draw counts as half a
//! win for each side. The ratings are its maximum-likelihood fit, found by
//! the minorization–maximization iteration of Hunter (2004, "MM algorithms
//! for generalized Bradley–Terry models"): with strengths `γ_i = 10^(R_i /
//! 400)`, `γ_i ← W_i / Σ_j n_ij / (γ_i + γ_j)`, where `W_i` is `i`'s score
//! and `n_ij` the games between `i` and `j`.
//!
//! A player who won every game has no finite maximum; so each pairing
//! counts one more game, a draw, as a prior (BayesElo does the same with
//! its "prior draws"). With the 20 or more games a pairing usually has,
//! it moves a rating by little; with one game it is felt, and the table
//! says how many games each rating rests on.

/// The games between two players.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pairing {
    /// One player's index.
    pub a: usize,
    /// The other's.
    pub b: usize,
    /// Games `a` won.
    pub a_wins: u32,
    /// Games drawn.
    pub draws: u32,
    /// Games `b` won.
    pub b_wins: u32,
}

/// The iteration stops when no strength moves by more than this share.
const TOLERANCE: f64 = 1e-12;
/// Or after this many rounds (a round robin of a few dozen players
/// converges in a few hundred).
const MAX_ROUNDS: usize = 100_000;

/// Each player's Elo rating, `anchor`'s at 0, fitted to `pairings` (with
/// one prior draw each, see the module docs). A player without games
/// keeps the anchor's rating: nothing says otherwise.
///
/// # Panics
/// A pairing or anchor naming a player `≥ players`, or a player paired
/// with itself: the caller's bug.
pub fn ratings(players: usize, pairings: &[Pairing], anchor: usize) -> Vec<f64> {
    assert!(anchor < players, "anchor {anchor} of {players} players");
    let mut score = vec![0.0; players];
    for p in pairings {
        assert!(p.a < players && p.b < players && p.a != p.b, "pairing {p:?} of {players} players");
        let half_draws = 0.5 * f64::from(p.draws + 1);
        score[p.a] += f64::from(p.a_wins) + half_draws;
        score[p.b] += f64::from(p.b_wins) + half_draws;
    }
    let mut gamma = vec![1.0_f64; players];
    for _ in 0..MAX_ROUNDS {
        let mut moved = 0.0_f64;
        for i in 0..players {
            let denominator: f64 = pairings
                .iter()
                .filter_map(|p| match (p.a == i, p.b == i) {
                    (true, _) => Some((p, p.b)),
                    (_, true) => Some((p, p.a)),
                    _ => None,
                })
                .map(|(p, j)| f64::from(p.a_wins + p.draws + p.b_wins + 1) / (gamma[i] + gamma[j]))
                .sum();
            if denominator > 0.0 {
                let next = score[i] / denominator;
                moved = moved.max((next / gamma[i] - 1.0).abs());
                gamma[i] = next;
            }
        }
        if moved < TOLERANCE {
            break;
        }
    }
    let played = |i: usize| pairings.iter().any(|p| p.a == i || p.b == i);
    (0..players).map(|i| if played(i) { 400.0 * (gamma[i] / gamma[anchor]).log10() } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairing(a: usize, b: usize, a_wins: u32, draws: u32, b_wins: u32) -> Pairing {
        Pairing { a, b, a_wins, draws, b_wins }
    }

    #[test]
    fn two_players_by_hand() {
        // 3 wins of 4, plus the prior draw: 3.5 of 5, p = 0.7, and
        // 400 · log10(0.7 / 0.3) = 147.19 points.
        let r = ratings(2, &[pairing(0, 1, 3, 0, 1)], 1);
        assert!((r[0] - 147.19).abs() < 0.01 && r[1] == 0.0, "{r:?}");
        // Anchored at the other player, the same gap.
        let r = ratings(2, &[pairing(0, 1, 3, 0, 1)], 0);
        assert!((r[1] + 147.19).abs() < 0.01, "{r:?}");
        // Draws are half a win each: an even score is an even rating.
        let r = ratings(2, &[pairing(0, 1, 2, 6, 2)], 0);
        assert!(r[1].abs() < 1e-6, "{r:?}");
        // Every game won is a finite, large gap.
        let r = ratings(2, &[pairing(0, 1, 100, 0, 0)], 1);
        assert!(r[0] > 700.0 && r[0].is_finite(), "{r:?}");
    }

    #[test]
    fn a_consistent_round_robin_gives_back_its_ratings() {
        // Three players 0, 200 and 400 points apart: with many games whose
        // scores are the model's expectations, the fit finds them again
        // (the prior draw moves them by well under a point).
        let truth = [0.0, 200.0, 400.0];
        let expected = |i: usize, j: usize| 1.0 / (1.0 + 10f64.powf((truth[j] - truth[i]) / 400.0));
        let n = 100_000.0;
        let mut pairings = Vec::new();
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            let a_wins = (n * expected(a, b)).round() as u32;
            pairings.push(pairing(a, b, a_wins, 0, n as u32 - a_wins));
        }
        let r = ratings(3, &pairings, 0);
        for (got, want) in r.iter().zip(truth) {
            assert!((got - want).abs() < 0.5, "{r:?}");
        }
    }

    #[test]
    fn a_player_without_games_stays_at_the_anchor() {
        let r = ratings(3, &[pairing(0, 1, 1, 0, 3)], 0);
        assert!(r[1] > 100.0 && r[2] == 0.0, "{r:?}");
    }
}
