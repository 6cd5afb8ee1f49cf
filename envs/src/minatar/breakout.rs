//! MinAtar Breakout, matching `minatar.environments.breakout` (1.0.15).
//!
//! A paddle on the bottom row bounces a ball, which moves one cell
//! diagonally per step, into three rows of bricks. Wrapped by
//! [`MinAtar`](super::MinAtar) as `MinAtar/Breakout-v1`:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, 4])`; channels 0 paddle, 1 ball, 2 trail (the ball's previous cell), 3 bricks |
//! | action | `Discrete(3)`: 0 no-op, 1 left, 2 right (MinAtar actions `n`, `l`, `r`), sticky with probability 0.1 |
//! | reward | +1 per brick broken |
//! | termination | the ball reaches the bottom row without hitting the paddle |
//! | truncation | none |
//! | reset | paddle at column 4, bricks on rows 1–3; the ball starts on row 3 either at column 0 heading down-right or at column 9 heading down-left (`randint(2)`) |
//!
//! Walls and bricks reflect the ball. After breaking a brick the ball cannot
//! break another on the very next step (it passes into it instead). The
//! paddle sends the ball back up: straight back if the paddle is under the
//! ball's column, to the other diagonal if the ball comes down onto the
//! paddle's cell. When the ball reaches the bottom row with no bricks left,
//! the three rows are refilled.

use super::{cell, Game, Mt19937, GRID, LEFT, RIGHT};
use serde::{Deserialize, Serialize};

const PADDLE: usize = 0;
const BALL: usize = 1;
const TRAIL: usize = 2;
const BRICK: usize = 3;

/// Ball directions, by index: up-left, up-right, down-right, down-left.
const DIRECTIONS: [(i32, i32); 4] = [(-1, -1), (1, -1), (1, 1), (-1, 1)];
/// The direction after hitting a side wall.
const MIRROR_X: [usize; 4] = [1, 0, 3, 2];
/// The direction after hitting the ceiling, a brick or the paddle's column.
const MIRROR_Y: [usize; 4] = [3, 2, 1, 0];
/// The direction after hitting the paddle with the ball's diagonal.
const MIRROR_XY: [usize; 4] = [2, 3, 0, 1];

/// The state of a Breakout game.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BreakoutGame {
    ball_x: i32,
    ball_y: i32,
    ball_dir: usize,
    last_x: i32,
    last_y: i32,
    pos: i32,
    bricks: [[bool; GRID]; GRID],
    strike: bool,
    terminal: bool,
}

impl BreakoutGame {
    /// The ball's cell `(row, col)`.
    pub fn ball(&self) -> (usize, usize) {
        (self.ball_y as usize, self.ball_x as usize)
    }

    /// The paddle's column (the paddle sits on row 9).
    pub fn paddle(&self) -> usize {
        self.pos as usize
    }

    /// Number of bricks left.
    pub fn bricks_left(&self) -> usize {
        self.bricks.iter().flatten().filter(|&&b| b).count()
    }

    fn fill_bricks(&mut self) {
        for row in &mut self.bricks[1..4] {
            *row = [true; GRID];
        }
    }
}

impl Game for BreakoutGame {
    const NAME: &'static str = "MinAtar/Breakout-v1";
    const CHANNELS: usize = 4;
    const MINIMAL_ACTIONS: &'static [usize] = &[0, LEFT, RIGHT];

    fn new(_difficulty_ramping: bool) -> Self {
        let mut game = Self {
            ball_x: 0,
            ball_y: 3,
            ball_dir: 2,
            last_x: 0,
            last_y: 3,
            pos: 4,
            bricks: [[false; GRID]; GRID],
            strike: false,
            terminal: false,
        };
        game.fill_bricks();
        game
    }

    fn reset(&mut self, rng: &mut Mt19937) {
        let start = rng.randint(0, 2).expect("non-empty range");
        (self.ball_x, self.ball_dir) = if start == 0 { (0, 2) } else { (9, 3) };
        self.ball_y = 3;
        self.pos = 4;
        self.bricks = [[false; GRID]; GRID];
        self.fill_bricks();
        self.strike = false;
        self.last_x = self.ball_x;
        self.last_y = self.ball_y;
        self.terminal = false;
    }

    fn act(&mut self, action: usize, _rng: &mut Mt19937) -> (f64, bool) {
        let mut reward = 0.0;
        if self.terminal {
            return (reward, true);
        }
        match action {
            LEFT => self.pos = (self.pos - 1).max(0),
            RIGHT => self.pos = (self.pos + 1).min(9),
            _ => {}
        }

        self.last_x = self.ball_x;
        self.last_y = self.ball_y;
        let (dx, dy) = DIRECTIONS[self.ball_dir];
        let mut new_x = self.ball_x + dx;
        let mut new_y = self.ball_y + dy;

        let mut strike_toggle = false;
        if !(0..=9).contains(&new_x) {
            new_x = new_x.clamp(0, 9);
            self.ball_dir = MIRROR_X[self.ball_dir];
        }
        if new_y < 0 {
            new_y = 0;
            self.ball_dir = MIRROR_Y[self.ball_dir];
        } else if self.bricks[new_y as usize][new_x as usize] {
            strike_toggle = true;
            if !self.strike {
                reward += 1.0;
                self.strike = true;
                self.bricks[new_y as usize][new_x as usize] = false;
                new_y = self.last_y;
                self.ball_dir = MIRROR_Y[self.ball_dir];
            }
        } else if new_y == 9 {
            if self.bricks_left() == 0 {
                self.fill_bricks();
            }
            if self.ball_x == self.pos {
                self.ball_dir = MIRROR_Y[self.ball_dir];
                new_y = self.last_y;
            } else if new_x == self.pos {
                self.ball_dir = MIRROR_XY[self.ball_dir];
                new_y = self.last_y;
            } else {
                self.terminal = true;
            }
        }
        if !strike_toggle {
            self.strike = false;
        }

        self.ball_x = new_x;
        self.ball_y = new_y;
        (reward, self.terminal)
    }

    fn write_state(&self, obs: &mut [f32]) {
        const C: usize = BreakoutGame::CHANNELS;
        obs[cell(self.ball_y as usize, self.ball_x as usize, BALL, C)] = 1.0;
        obs[cell(9, self.pos as usize, PADDLE, C)] = 1.0;
        obs[cell(self.last_y as usize, self.last_x as usize, TRAIL, C)] = 1.0;
        for (r, row) in self.bricks.iter().enumerate() {
            for (c, &b) in row.iter().enumerate() {
                if b {
                    obs[cell(r, c, BRICK, C)] = 1.0;
                }
            }
        }
    }

    const GLYPHS: &'static [(usize, char)] = &[(BALL, 'o'), (PADDLE, '='), (BRICK, '#'), (TRAIL, '.')];

    /// Whether `act` can run on this state without indexing off the grid:
    /// the ball, its trail and the paddle on the grid, a ball direction, and
    /// the ball above the bottom row unless the game is over.
    fn valid(&self) -> bool {
        let on_grid = |v: i32| (0..GRID as i32).contains(&v);
        [self.ball_x, self.ball_y, self.last_x, self.last_y, self.pos].into_iter().all(on_grid)
            && self.ball_dir < DIRECTIONS.len()
            && (self.ball_y < 9 || self.terminal)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Breakout, MinAtar};
    use super::*;
    use rlx::{Action, Env};

    fn obs_at(obs: &[f32], r: usize, c: usize, ch: usize) -> bool {
        obs[cell(r, c, ch, 4)] == 1.0
    }

    #[test]
    fn reset_layout() {
        let mut env = Breakout::new();
        let mut obs = vec![0.0f32; 400];
        let mut starts = [0; 2];
        for seed in 0..40 {
            env.reset(Some(seed), &mut obs).unwrap();
            assert!(obs_at(&obs, 9, 4, PADDLE));
            let (r, c) = env.game().ball();
            assert_eq!(r, 3);
            assert!(c == 0 || c == 9);
            starts[c / 9] += 1;
            assert!(obs_at(&obs, 3, c, BALL) && obs_at(&obs, 3, c, TRAIL));
            assert_eq!(env.game().bricks_left(), 30);
            assert!((1..4).all(|r| (0..10).all(|c| obs_at(&obs, r, c, BRICK))));
            assert_eq!(obs.iter().filter(|&&v| v == 1.0).count(), 33);
        }
        assert!(starts[0] > 5 && starts[1] > 5, "{starts:?}");
    }

    #[test]
    fn missing_the_ball_terminates() {
        // Without sticky actions, with the paddle parked in the far corner
        // from where the ball lands, the first bounce off the bottom is missed.
        let mut env = MinAtar::<BreakoutGame>::with_options(0.0, true).unwrap();
        let mut obs = vec![0.0f32; 400];
        env.reset(Some(0), &mut obs).unwrap();
        let away = if env.game().ball().1 == 0 { 1 } else { 2 };
        let mut total = 0.0;
        let mut steps = 0;
        loop {
            let step = env.step(Action::Discrete(away), &mut obs).unwrap();
            total += step.reward;
            steps += 1;
            if step.terminated {
                break;
            }
            assert!(steps < 100);
        }
        assert_eq!(env.game().ball().0, 9);
        assert_eq!(total, 0.0);
    }
}
