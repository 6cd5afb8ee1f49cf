//! `TicTacToe`: the two-player game, for self-play. `player_0` (X) opens,
//! `player_1` (O) answers, in turns; a move on a taken cell is refused, so
//! policies act within the action mask of free cells.
//!
//! Each player observes the board from its own side: 18 values, its own
//! marks on the nine cells (row by row) and then the opponent's. A win is
//! +1 for the winner and −1 for the loser, a full board 0 for both; the
//! player waiting for its turn learns of a loss when the winning move is
//! made.

use rlx::game::{illegal, Ending, Game, GameError};
use rlx::video::{Canvas, Frame};
use rlx::Space;

const LINES: [[usize; 3]; 8] = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];

/// The game (see the module docs): a [`Game`], and an env through
/// [`rlx::GameEnv`] (`--env TicTacToe`).
#[derive(Clone, Debug)]
pub struct TicTacToe {
    /// Per cell: 0 empty, 1 `player_0`'s mark, 2 `player_1`'s.
    cells: [u8; 9],
    to_move: usize,
    /// Set by the move that ends the game.
    result: Option<Ending>,
    obs_space: Space,
}

impl Default for TicTacToe {
    fn default() -> Self {
        Self::new()
    }
}

impl TicTacToe {
    /// An empty board, X to move.
    pub fn new() -> Self {
        Self {
            cells: [0; 9],
            to_move: 0,
            result: None,
            obs_space: Space::uniform_box(0.0, 1.0, vec![18]).expect("valid bounds"),
        }
    }

    fn won(&self, mark: u8) -> bool {
        LINES.iter().any(|line| line.iter().all(|&c| self.cells[c] == mark))
    }
}

impl Game for TicTacToe {
    fn name(&self) -> &str {
        "TicTacToe"
    }

    fn num_actions(&self) -> usize {
        9
    }

    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    /// The board as `player` sees it: its marks, then the opponent's.
    fn observe(&self, player: usize, obs: &mut [f32]) {
        let (mine, theirs) = (player as u8 + 1, 2 - player as u8);
        for (c, &cell) in self.cells.iter().enumerate() {
            obs[c] = f32::from(u8::from(cell == mine));
            obs[9 + c] = f32::from(u8::from(cell == theirs));
        }
    }

    fn reset(&mut self) {
        (self.cells, self.to_move, self.result) = ([0; 9], 0, None);
    }

    fn to_move(&self) -> usize {
        self.to_move
    }

    fn is_legal(&self, cell: usize) -> bool {
        self.result.is_none() && cell < 9 && self.cells[cell] == 0
    }

    fn play(&mut self, cell: usize) -> Result<(), GameError> {
        if self.result.is_some() {
            return Err(GameError::Over { game: self.name().into() });
        }
        if !self.is_legal(cell) {
            return Err(illegal(self, cell, "taken or off the board"));
        }
        let mark = self.to_move as u8 + 1;
        self.cells[cell] = mark;
        self.result = Ending::after_move(self.to_move, self.won(mark), self.cells.iter().all(|&c| c != 0));
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

    /// The board as text: `X`, `O` and `.` for free cells.
    fn render(&self) -> String {
        self.cells
            .chunks(3)
            .map(|row| row.iter().map(|&c| ['.', 'X', 'O'][c as usize]).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The board, 300×300 pixels: X (`player_0`) red, O (`player_1`) blue.
    fn render_rgb(&self) -> Option<Frame> {
        let mut canvas = Canvas::new(300, 300, [255, 255, 255]);
        for k in 1..3 {
            let at = 100.0 * f64::from(k);
            canvas.line((at, 5.0), (at, 295.0), 4.0, [0, 0, 0]);
            canvas.line((5.0, at), (295.0, at), 4.0, [0, 0, 0]);
        }
        for (i, &mark) in self.cells.iter().enumerate() {
            let centre = (100.0 * (i % 3) as f64 + 50.0, 100.0 * (i / 3) as f64 + 50.0);
            match mark {
                1 => {
                    for (dx, dy) in [(30.0, 30.0), (30.0, -30.0)] {
                        canvas.line(
                            (centre.0 - dx, centre.1 - dy),
                            (centre.0 + dx, centre.1 + dy),
                            10.0,
                            [210, 40, 40],
                        );
                    }
                }
                2 => {
                    canvas.fill_circle(centre, 33.0, [40, 80, 210]);
                    canvas.fill_circle(centre, 23.0, [255, 255, 255]);
                }
                _ => {}
            }
        }
        Some(canvas.into_frame())
    }

    fn save_state(&self) -> Option<Vec<u8>> {
        Some(rlx::env::encode_state(&(self.cells, self.to_move, self.result.is_some())))
    }

    fn load_state(&mut self, state: &[u8]) -> Result<(), GameError> {
        let bad = |why: String| GameError::BadState { game: "TicTacToe".into(), why };
        let (cells, to_move, _over): ([u8; 9], usize, bool) =
            rlx::env::decode_state("TicTacToe", state).map_err(|e| bad(e.to_string()))?;
        if to_move > 1 || cells.iter().any(|&c| c > 2) {
            return Err(bad("cells must be 0, 1 or 2 and the player 0 or 1".into()));
        }
        (self.cells, self.to_move, self.result) = (cells, to_move, None);
        // Who won (if anyone) follows from the board.
        for (player, mark) in [(0, 1), (1, 2)] {
            if self.won(mark) {
                (self.result, self.to_move) = (Some(Ending::Win(player)), player);
            }
        }
        if self.result.is_none() && cells.iter().all(|&c| c != 0) {
            self.result = Some(Ending::Draw);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::{Action, GameEnv, MultiAgentEnv, Step};

    fn play(env: &mut GameEnv<TicTacToe>, cells: &[i64]) -> (Vec<Step>, bool) {
        let mut obs = vec![vec![0.0; 18]; 2];
        let mut steps = vec![Step::default(); 2];
        let mut over = false;
        for &c in cells {
            let mut actions = [None, None];
            actions[env.state().to_move()] = Some(Action::Discrete(c));
            over = env.step(&actions, &mut obs, &mut steps).unwrap();
        }
        (steps, over)
    }

    #[test]
    fn a_line_wins_for_the_mover_and_loses_for_the_other() {
        let mut env = GameEnv::new(TicTacToe::new());
        env.reset(None, &mut vec![vec![0.0; 18]; 2]).unwrap();
        // X: 0, 1, 2 (top row); O: 3, 4.
        let (steps, over) = play(&mut env, &[0, 3, 1, 4, 2]);
        assert!(over);
        assert_eq!((steps[0].reward, steps[1].reward), (1.0, -1.0));
        assert!(steps[0].terminated && steps[1].terminated);
        assert_eq!(env.state().render(), "XXX\nOO.\n...");
    }

    #[test]
    fn a_full_board_without_a_line_is_a_draw() {
        let mut env = GameEnv::new(TicTacToe::new());
        env.reset(None, &mut vec![vec![0.0; 18]; 2]).unwrap();
        let (steps, over) = play(&mut env, &[0, 1, 2, 4, 3, 5, 7, 6, 8]);
        assert!(over);
        assert_eq!((steps[0].reward, steps[1].reward), (0.0, 0.0));
    }

    #[test]
    fn turns_masks_and_illegal_moves() {
        let mut env = GameEnv::new(TicTacToe::new());
        let mut obs = vec![vec![0.0; 18]; 2];
        env.reset(None, &mut obs).unwrap();
        assert!(env.acting(0) && !env.acting(1));
        let mut steps = vec![Step::default(); 2];
        env.step(&[Some(Action::Discrete(4)), None], &mut obs, &mut steps).unwrap();
        assert!(!env.acting(0) && env.acting(1));
        assert!(!env.action_mask(1).unwrap()[4]);
        // Each player sees its own mark first.
        assert_eq!((obs[0][4], obs[0][13], obs[1][4], obs[1][13]), (1.0, 0.0, 0.0, 1.0));
        let err = env.step(&[None, Some(Action::Discrete(4))], &mut obs, &mut steps).unwrap_err().to_string();
        assert!(err.contains("taken"), "{err}");
        assert!(env.step(&[Some(Action::Discrete(0)), None], &mut obs, &mut steps).is_err(), "not X's turn");
    }
}
