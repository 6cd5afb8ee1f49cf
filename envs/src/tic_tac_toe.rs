//! `TicTacToe`: the two-player game, for self-play. `player_0` (X) opens,
//! `player_1` (O) answers, in turns; a move on a taken cell is refused, so
//! policies act within the action mask of free cells.
//!
//! Each player observes the board from its own side: 18 values, its own
//! marks on the nine cells (row by row) and then the opponent's. A win is
//! +1 for the winner and −1 for the loser, a full board 0 for both; the
//! player waiting for its turn learns of a loss when the winning move is
//! made.

use rlx::multi_agent::MultiAgentEnv;
use rlx::{Action, EnvError, Space, Step};

const LINES: [[usize; 3]; 8] = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];

/// The game (see the module docs).
pub struct TicTacToe {
    /// Per cell: 0 empty, 1 `player_0`'s mark, 2 `player_1`'s.
    cells: [u8; 9],
    to_move: usize,
    over: bool,
    /// The free cells, for the mover's mask.
    free: [bool; 9],
    agents: Vec<String>,
    obs_space: Space,
    act_space: Space,
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
            over: false,
            free: [true; 9],
            agents: vec!["player_0".into(), "player_1".into()],
            obs_space: Space::uniform_box(0.0, 1.0, vec![18]).expect("valid bounds"),
            act_space: Space::discrete(9),
        }
    }

    /// The board as `player` sees it.
    fn observe(&self, player: usize, obs: &mut [f32]) {
        let (mine, theirs) = (player as u8 + 1, 2 - player as u8);
        for (c, &cell) in self.cells.iter().enumerate() {
            obs[c] = f32::from(u8::from(cell == mine));
            obs[9 + c] = f32::from(u8::from(cell == theirs));
        }
    }

    fn won(&self, mark: u8) -> bool {
        LINES.iter().any(|line| line.iter().all(|&c| self.cells[c] == mark))
    }

    /// The board as text: `X`, `O` and `.` for free cells.
    pub fn render(&self) -> String {
        self.cells
            .chunks(3)
            .map(|row| row.iter().map(|&c| ['.', 'X', 'O'][c as usize]).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl MultiAgentEnv for TicTacToe {
    fn name(&self) -> &str {
        "TicTacToe"
    }

    fn agent_ids(&self) -> &[String] {
        &self.agents
    }

    fn observation_space(&self, _: usize) -> &Space {
        &self.obs_space
    }

    fn action_space(&self, _: usize) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, _: Option<u64>, obs: &mut [Vec<f32>]) -> Result<(), EnvError> {
        self.cells = [0; 9];
        self.free = [true; 9];
        self.to_move = 0;
        self.over = false;
        for (p, o) in obs.iter_mut().enumerate() {
            self.observe(p, o);
        }
        Ok(())
    }

    fn step(
        &mut self,
        actions: &[Option<Action<'_>>],
        obs: &mut [Vec<f32>],
        steps: &mut [Step],
    ) -> Result<bool, EnvError> {
        if self.over {
            return Err(EnvError::NeedsReset { env: self.name().into() });
        }
        let mover = self.to_move;
        let cell = match actions.get(mover).copied().flatten() {
            Some(Action::Discrete(a)) if (0..9).contains(&a) && self.free[a as usize] => a as usize,
            Some(a) => {
                return Err(EnvError::InvalidAction {
                    env: self.name().into(),
                    action: format!("{a} by {} (taken or off the board)", self.agents[mover]),
                    space: format!("{} restricted to the free cells", self.act_space),
                })
            }
            None => {
                return Err(EnvError::BadArgument {
                    env: self.name().into(),
                    message: format!("{} is to move but got no action", self.agents[mover]),
                })
            }
        };
        self.cells[cell] = mover as u8 + 1;
        self.free[cell] = false;
        let won = self.won(mover as u8 + 1);
        self.over = won || self.free.iter().all(|&f| !f);
        for (p, step) in steps.iter_mut().enumerate() {
            let reward = match (won, p == mover) {
                (true, true) => 1.0,
                (true, false) => -1.0,
                (false, _) => 0.0,
            };
            *step = Step { reward, terminated: self.over, truncated: false };
        }
        self.to_move = 1 - mover;
        for (p, o) in obs.iter_mut().enumerate() {
            self.observe(p, o);
        }
        Ok(self.over)
    }

    fn acting(&self, agent: usize) -> bool {
        agent == self.to_move
    }

    fn action_mask(&self, _: usize) -> Option<&[bool]> {
        Some(&self.free)
    }

    fn save_state(&self) -> Option<rlx::env::EnvState> {
        Some(rlx::env::encode_state(&(self.cells, self.to_move, self.over)))
    }

    fn load_state(&mut self, state: &rlx::env::EnvState) -> Result<(), EnvError> {
        let (cells, to_move, over): ([u8; 9], usize, bool) = rlx::env::decode_state("TicTacToe", state)?;
        if to_move > 1 || cells.iter().any(|&c| c > 2) {
            return Err(EnvError::Other { env: "TicTacToe".into(), message: "not a saved board".into() });
        }
        (self.cells, self.to_move, self.over) = (cells, to_move, over);
        self.free = cells.map(|c| c == 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn play(env: &mut TicTacToe, cells: &[i64]) -> (Vec<Step>, bool) {
        let mut obs = vec![vec![0.0; 18]; 2];
        let mut steps = vec![Step::default(); 2];
        let mut over = false;
        for &c in cells {
            let mut actions = [None, None];
            actions[env.to_move] = Some(Action::Discrete(c));
            over = env.step(&actions, &mut obs, &mut steps).unwrap();
        }
        (steps, over)
    }

    #[test]
    fn a_line_wins_for_the_mover_and_loses_for_the_other() {
        let mut env = TicTacToe::new();
        env.reset(None, &mut vec![vec![0.0; 18]; 2]).unwrap();
        // X: 0, 1, 2 (top row); O: 3, 4.
        let (steps, over) = play(&mut env, &[0, 3, 1, 4, 2]);
        assert!(over);
        assert_eq!((steps[0].reward, steps[1].reward), (1.0, -1.0));
        assert!(steps[0].terminated && steps[1].terminated);
        assert_eq!(env.render(), "XXX\nOO.\n...");
    }

    #[test]
    fn a_full_board_without_a_line_is_a_draw() {
        let mut env = TicTacToe::new();
        env.reset(None, &mut vec![vec![0.0; 18]; 2]).unwrap();
        let (steps, over) = play(&mut env, &[0, 1, 2, 4, 3, 5, 7, 6, 8]);
        assert!(over);
        assert_eq!((steps[0].reward, steps[1].reward), (0.0, 0.0));
    }

    #[test]
    fn turns_masks_and_illegal_moves() {
        let mut env = TicTacToe::new();
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
