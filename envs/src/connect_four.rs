//! `ConnectFour`: the two-player game on a board of 6 rows and 7 columns.
//! `player_0` (`x`) opens; a move names a column (0 to 6, left to right),
//! and the piece falls to the lowest free cell of it; a full column is
//! refused. Four of one player's pieces in a row, a column or a diagonal
//! win (+1 for the winner, −1 for the loser); a full board without one is
//! a draw (0). The rules are those of OpenSpiel's `connect_four`, checked
//! move for move against it by a test of the Python-backed suite.
//!
//! Each player observes the board from its own side as an image,
//! `Box(0, 1, [6, 7, 2])` (rows top to bottom, columns left to right, its
//! own pieces in the first channel, the opponent's in the second), so the
//! `model` section's convolutions apply (`conv_filters: []` gives an MLP on
//! the 84 values).

use rlx::game::{illegal, Ending, Game, GameError};
use rlx::video::{Canvas, Frame};
use rlx::Space;

/// Rows of the board.
pub const ROWS: usize = 6;
/// Columns of the board, and moves.
pub const COLS: usize = 7;

/// The game (see the module docs): a [`Game`], and an env through
/// [`rlx::GameEnv`] (`--env ConnectFour`).
#[derive(Clone, Debug)]
pub struct ConnectFour {
    /// Row by row from the top: 0 empty, 1 `player_0`'s piece, 2 `player_1`'s.
    cells: [u8; ROWS * COLS],
    /// Pieces in each column.
    heights: [u8; COLS],
    to_move: usize,
    moves: usize,
    /// Set by the move that ends the game.
    result: Option<Ending>,
    obs_space: Space,
}

impl Default for ConnectFour {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectFour {
    /// An empty board, `x` to move.
    pub fn new() -> Self {
        Self {
            cells: [0; ROWS * COLS],
            heights: [0; COLS],
            to_move: 0,
            moves: 0,
            result: None,
            obs_space: Space::uniform_box(0.0, 1.0, vec![ROWS, COLS, 2]).expect("valid bounds"),
        }
    }

    /// The piece at `row` (from the top) and `col`: 0 empty, 1 `x`, 2 `o`.
    pub fn cell(&self, row: usize, col: usize) -> u8 {
        self.cells[row * COLS + col]
    }

    /// Whether the piece just placed at (`row`, `col`) completes four.
    fn completes_four(&self, row: usize, col: usize) -> bool {
        let mark = self.cell(row, col);
        let run = |dr: isize, dc: isize| {
            let mut n = 0;
            let (mut r, mut c) = (row as isize + dr, col as isize + dc);
            while (0..ROWS as isize).contains(&r)
                && (0..COLS as isize).contains(&c)
                && self.cell(r as usize, c as usize) == mark
            {
                n += 1;
                (r, c) = (r + dr, c + dc);
            }
            n
        };
        [(0, 1), (1, 0), (1, 1), (1, -1)].iter().any(|&(dr, dc)| 1 + run(dr, dc) + run(-dr, -dc) >= 4)
    }
}

impl Game for ConnectFour {
    fn name(&self) -> &str {
        "ConnectFour"
    }

    fn num_actions(&self) -> usize {
        COLS
    }

    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    /// The board as `player` sees it: height × width × (own, opponent's).
    fn observe(&self, player: usize, obs: &mut [f32]) {
        let (mine, theirs) = (player as u8 + 1, 2 - player as u8);
        for (i, &cell) in self.cells.iter().enumerate() {
            obs[2 * i] = f32::from(u8::from(cell == mine));
            obs[2 * i + 1] = f32::from(u8::from(cell == theirs));
        }
    }

    fn reset(&mut self) {
        *self = Self { obs_space: self.obs_space.clone(), ..Self::new() };
    }

    fn to_move(&self) -> usize {
        self.to_move
    }

    fn is_legal(&self, col: usize) -> bool {
        self.result.is_none() && col < COLS && usize::from(self.heights[col]) < ROWS
    }

    fn play(&mut self, col: usize) -> Result<(), GameError> {
        if self.result.is_some() {
            return Err(GameError::Over { game: self.name().into() });
        }
        if !self.is_legal(col) {
            let why = if col < COLS { "the column is full" } else { "off the board" };
            return Err(illegal(self, col, why));
        }
        let row = ROWS - 1 - usize::from(self.heights[col]);
        self.cells[row * COLS + col] = self.to_move as u8 + 1;
        self.heights[col] += 1;
        self.moves += 1;
        self.result = Ending::after_move(self.to_move, self.completes_four(row, col), self.moves == ROWS * COLS);
        if self.result.is_none() {
            self.to_move = 1 - self.to_move;
        }
        Ok(())
    }

    fn terminal_value(&self, player: usize) -> Option<f32> {
        self.result.map(|ending| ending.value(player))
    }

    fn boxed_clone(&self) -> Box<dyn Game> {
        Box::new(self.clone())
    }

    /// The board as OpenSpiel prints it: rows from the top, `x`, `o` and
    /// `.`; then the column numbers.
    fn render(&self) -> String {
        let mut out = String::new();
        for row in self.cells.chunks(COLS) {
            out.extend(row.iter().map(|&c| ['.', 'x', 'o'][c as usize]));
            out.push('\n');
        }
        out.push_str("0123456");
        out
    }

    /// The board, 420×360 pixels: a blue frame with `player_0`'s pieces
    /// red and `player_1`'s yellow.
    fn render_rgb(&self) -> Option<Frame> {
        let mut canvas = Canvas::new(60 * COLS as u32, 60 * ROWS as u32, [30, 70, 200]);
        for (i, &piece) in self.cells.iter().enumerate() {
            let centre = (60.0 * (i % COLS) as f64 + 30.0, 60.0 * (i / COLS) as f64 + 30.0);
            let color = [[255, 255, 255], [220, 40, 40], [240, 210, 30]][piece as usize];
            canvas.fill_circle(centre, 24.0, color);
        }
        Some(canvas.into_frame())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        Some(rlx::env::encode_state(&(self.cells.to_vec(), self.to_move)))
    }

    /// Replays the saved board column by column, so that a board no game
    /// reaches (a floating piece, counts that cannot alternate) is refused.
    fn load_state(&mut self, state: &[u8]) -> Result<(), GameError> {
        let bad = |why: &str| GameError::BadState { game: "ConnectFour".into(), why: why.into() };
        let (cells, to_move): (Vec<u8>, usize) =
            rlx::env::decode_state("ConnectFour", state).map_err(|e| bad(&e.to_string()))?;
        if cells.len() != ROWS * COLS || cells.iter().any(|&c| c > 2) || to_move > 1 {
            return Err(bad("42 cells of 0, 1 or 2 and a player 0 or 1"));
        }
        let mut board = Self { obs_space: self.obs_space.clone(), ..Self::new() };
        for col in 0..COLS {
            let column: Vec<u8> = (0..ROWS).rev().map(|r| cells[r * COLS + col]).collect();
            let height = column.iter().take_while(|&&c| c != 0).count();
            if column[height..].iter().any(|&c| c != 0) {
                return Err(bad(&format!("a floating piece in column {col}")));
            }
            for (r, &c) in column[..height].iter().enumerate() {
                board.cells[(ROWS - 1 - r) * COLS + col] = c;
            }
            board.heights[col] = height as u8;
            board.moves += height;
        }
        let xs = board.cells.iter().filter(|&&c| c == 1).count();
        if !(xs == board.moves - xs || xs == board.moves - xs + 1) {
            return Err(bad("x must have as many pieces as o, or one more"));
        }
        let fours: Vec<usize> = (0..ROWS * COLS)
            .filter(|&i| board.cells[i] != 0 && board.completes_four(i / COLS, i % COLS))
            .map(|i| usize::from(board.cells[i]) - 1)
            .collect();
        board.to_move = to_move;
        board.result = match fours.first() {
            Some(&w) => {
                board.to_move = w;
                Some(Ending::Win(w))
            }
            None => Ending::after_move(to_move, false, board.moves == ROWS * COLS),
        };
        *self = board;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn played(moves: &[usize]) -> ConnectFour {
        let mut g = ConnectFour::new();
        for &m in moves {
            g.play(m).unwrap();
        }
        g
    }

    #[test]
    fn pieces_fall_and_four_in_a_row_wins() {
        // x: 0, 1, 2, 3 along the bottom; o stacks on them.
        let g = played(&[0, 0, 1, 1, 2, 2, 3]);
        assert_eq!((g.terminal_value(0), g.terminal_value(1)), (Some(1.0), Some(-1.0)));
        assert_eq!(g.render(), ".......\n.......\n.......\n.......\nooo....\nxxxx...\n0123456");
        assert!(!g.is_legal(4), "no move after the end");
    }

    #[test]
    fn columns_and_both_diagonals_win() {
        let column = played(&[3, 4, 3, 4, 3, 4, 3]);
        assert_eq!(column.terminal_value(0), Some(1.0));
        // x on the rising diagonal (0,0) (1,1) (2,2) (3,3), counting rows from the bottom.
        let rising = played(&[0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3]);
        assert_eq!(rising.terminal_value(0), Some(1.0), "\n{}", rising.render());
        // o on the falling diagonal (3,0) (2,1) (1,2) (0,3).
        let falling = played(&[6, 3, 2, 2, 1, 1, 0, 1, 0, 0, 5, 0]);
        assert_eq!(falling.terminal_value(1), Some(1.0), "\n{}", falling.render());
        assert_eq!(falling.to_move(), 1, "the winner made the last move");
    }

    #[test]
    fn a_full_column_is_refused_and_a_full_board_draws() {
        let mut g = played(&[0, 0, 0, 0, 0, 0]);
        let err = g.play(0).unwrap_err().to_string();
        assert!(err.contains("column is full") && err.contains("player_0"), "{err}");
        assert!(g.play(7).unwrap_err().to_string().contains("off the board"));
        // Columns filled in pairs 0-1, 2-3, 4-5 (each pair: 3 moves up one
        // column, then the other, so no four ever forms), then 6.
        let mut draw = ConnectFour::new();
        for pair in [[0, 1], [2, 3], [4, 5]] {
            for _ in 0..3 {
                draw.play(pair[0]).unwrap();
                draw.play(pair[1]).unwrap();
            }
            for _ in 0..3 {
                draw.play(pair[1]).unwrap();
                draw.play(pair[0]).unwrap();
            }
        }
        for _ in 0..ROWS {
            assert!(draw.terminal_value(0).is_none(), "\n{}", draw.render());
            draw.play(6).unwrap();
        }
        assert_eq!((draw.terminal_value(0), draw.terminal_value(1)), (Some(0.0), Some(0.0)), "\n{}", draw.render());
    }

    #[test]
    fn observations_are_from_each_players_side() {
        let g = played(&[3]);
        let mut obs = vec![0.0; 84];
        g.observe(0, &mut obs);
        let bottom_middle = 2 * (5 * COLS + 3);
        assert_eq!((obs[bottom_middle], obs[bottom_middle + 1]), (1.0, 0.0));
        g.observe(1, &mut obs);
        assert_eq!((obs[bottom_middle], obs[bottom_middle + 1]), (0.0, 1.0));
    }

    #[test]
    fn a_saved_board_restores_and_a_bad_one_is_refused() {
        let g = played(&[3, 3, 4, 2]);
        let mut back = ConnectFour::new();
        back.load_state(&g.save_state().unwrap()).unwrap();
        assert_eq!((back.render(), back.to_move(), back.legal_actions()), (g.render(), 0, g.legal_actions()));
        let mut floating = vec![0u8; 42];
        floating[0] = 1;
        let err = back.load_state(&rlx::env::encode_state(&(floating, 0usize))).unwrap_err().to_string();
        assert!(err.contains("floating piece in column 0"), "{err}");
    }
}
