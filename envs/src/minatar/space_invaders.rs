//! MinAtar Space Invaders, matching `minatar.environments.space_invaders`
//! (1.0.15).
//!
//! A cannon on the bottom row shoots at a 4×6 block of aliens that marches
//! sideways, stepping down and turning at the walls, and shoots back. Wrapped
//! by [`MinAtar`](super::MinAtar) as `MinAtar/SpaceInvaders-v1`:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, 6])`; channels 0 cannon, 1 aliens, 2 aliens if marching left, 3 aliens if marching right, 4 the cannon's bullets, 5 the aliens' bullets |
//! | action | `Discrete(4)`: 0 no-op, 1 left, 2 right, 3 fire (MinAtar actions `n`, `l`, `r`, `f`), sticky with probability 0.1 |
//! | reward | +1 per alien shot (several can fall in one step) |
//! | termination | an alien bullet or an alien reaches the cannon, or the aliens step down while on the bottom row |
//! | truncation | none |
//! | reset | cannon at column 5, aliens on rows 0–3, columns 2–7, marching left; no random draws |
//!
//! The cannon may fire every 5 steps; its bullets rise one row per step.
//! Every 10 steps the alien nearest the cannon's column (nearest column
//! first, the lower column on ties, then the lowest alien in it) drops a
//! bullet that falls one row per step. The aliens move every
//! `min(aliens left, interval)` steps, so they speed up as they thin out.
//! When a wave is cleared a new one appears (keeping the marching direction)
//! and, with difficulty ramping, the interval drops by one, from 12 down to 6.
//! Rewards still count on the step that ends the episode.

use super::{cell, Game, Mt19937, FIRE, GRID, LEFT, RIGHT};
use serde::{Deserialize, Serialize};

const CANNON: usize = 0;
const ALIEN: usize = 1;
const ALIEN_LEFT: usize = 2;
const ALIEN_RIGHT: usize = 3;
const FRIENDLY_BULLET: usize = 4;
const ENEMY_BULLET: usize = 5;

const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_MOVE_INTERVAL: i32 = 12;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const MIN_MOVE_INTERVAL: i32 = 6;

type Grid = [[bool; GRID]; GRID];

/// The state of a Space Invaders game.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpaceInvadersGame {
    ramping: bool,
    pos: usize,
    friendly_bullets: Grid,
    enemy_bullets: Grid,
    aliens: Grid,
    alien_dir: i32,
    enemy_move_interval: i32,
    alien_move_timer: i32,
    alien_shot_timer: i32,
    ramp_index: u32,
    shot_timer: i32,
    terminal: bool,
}

fn count(grid: &Grid) -> usize {
    grid.iter().flatten().filter(|&&b| b).count()
}

fn column_occupied(grid: &Grid, col: usize) -> bool {
    grid.iter().any(|row| row[col])
}

fn spawn_wave(aliens: &mut Grid) {
    for row in &mut aliens[0..4] {
        row[2..8].fill(true);
    }
}

impl SpaceInvadersGame {
    /// The cannon's column (it sits on row 9).
    pub fn cannon(&self) -> usize {
        self.pos
    }

    /// Number of aliens left in the current wave.
    pub fn aliens_left(&self) -> usize {
        count(&self.aliens)
    }

    /// The current move interval of the aliens (12 at the start, down to 6).
    pub fn enemy_move_interval(&self) -> i32 {
        self.enemy_move_interval
    }

    /// The lowest alien in the occupied column nearest `pos`.
    fn nearest_alien(&self, pos: usize) -> Option<(usize, usize)> {
        let mut order: Vec<usize> = (0..GRID).collect();
        order.sort_by_key(|&c| c.abs_diff(pos)); // stable: the lower column wins ties
        order.into_iter().find_map(|c| (0..GRID).rev().find(|&r| self.aliens[r][c]).map(|r| (r, c)))
    }
}

impl Game for SpaceInvadersGame {
    const NAME: &'static str = "MinAtar/SpaceInvaders-v1";
    const CHANNELS: usize = 6;
    const MINIMAL_ACTIONS: &'static [usize] = &[0, LEFT, RIGHT, FIRE];

    fn new(difficulty_ramping: bool) -> Self {
        let mut aliens = [[false; GRID]; GRID];
        spawn_wave(&mut aliens);
        Self {
            ramping: difficulty_ramping,
            pos: 5,
            friendly_bullets: [[false; GRID]; GRID],
            enemy_bullets: [[false; GRID]; GRID],
            aliens,
            alien_dir: -1,
            enemy_move_interval: ENEMY_MOVE_INTERVAL,
            alien_move_timer: ENEMY_MOVE_INTERVAL,
            alien_shot_timer: ENEMY_SHOT_INTERVAL,
            ramp_index: 0,
            shot_timer: 0,
            terminal: false,
        }
    }

    fn reset(&mut self, _rng: &mut Mt19937) {
        *self = Self::new(self.ramping);
    }

    fn act(&mut self, action: usize, _rng: &mut Mt19937) -> (f64, bool) {
        if self.terminal {
            return (0.0, true);
        }
        match action {
            FIRE if self.shot_timer == 0 => {
                self.friendly_bullets[9][self.pos] = true;
                self.shot_timer = SHOT_COOL_DOWN;
            }
            LEFT => self.pos = self.pos.saturating_sub(1),
            RIGHT => self.pos = (self.pos + 1).min(9),
            _ => {}
        }

        // The cannon's bullets rise, leaving the top row off the grid.
        self.friendly_bullets.copy_within(1.., 0);
        self.friendly_bullets[9] = [false; GRID];

        // The aliens' bullets fall, leaving the bottom row off the grid.
        self.enemy_bullets.copy_within(..9, 1);
        self.enemy_bullets[0] = [false; GRID];
        if self.enemy_bullets[9][self.pos] {
            self.terminal = true;
        }

        if self.aliens[9][self.pos] {
            self.terminal = true;
        }
        if self.alien_move_timer == 0 {
            self.alien_move_timer = (count(&self.aliens) as i32).min(self.enemy_move_interval);
            let at_wall = (self.alien_dir < 0 && column_occupied(&self.aliens, 0))
                || (self.alien_dir > 0 && column_occupied(&self.aliens, 9));
            if at_wall {
                self.alien_dir = -self.alien_dir;
                if self.aliens[9].iter().any(|&a| a) {
                    self.terminal = true;
                }
                // Down one row; the bottom row wraps to the top, as np.roll does.
                self.aliens.rotate_right(1);
            } else {
                // Sideways one column, wrapping as np.roll does.
                for row in &mut self.aliens {
                    if self.alien_dir > 0 {
                        row.rotate_right(1);
                    } else {
                        row.rotate_left(1);
                    }
                }
            }
            if self.aliens[9][self.pos] {
                self.terminal = true;
            }
        }
        if self.alien_shot_timer == 0 {
            self.alien_shot_timer = ENEMY_SHOT_INTERVAL;
            if let Some((r, c)) = self.nearest_alien(self.pos) {
                self.enemy_bullets[r][c] = true;
            }
        }

        let mut reward = 0.0;
        for (alien_row, bullet_row) in self.aliens.iter_mut().zip(&mut self.friendly_bullets) {
            for (alien, bullet) in alien_row.iter_mut().zip(bullet_row.iter_mut()) {
                if *alien && *bullet {
                    reward += 1.0;
                    *alien = false;
                    *bullet = false;
                }
            }
        }

        if self.shot_timer > 0 {
            self.shot_timer -= 1;
        }
        self.alien_move_timer -= 1;
        self.alien_shot_timer -= 1;
        if count(&self.aliens) == 0 {
            if self.enemy_move_interval > MIN_MOVE_INTERVAL && self.ramping {
                self.enemy_move_interval -= 1;
                self.ramp_index += 1;
            }
            spawn_wave(&mut self.aliens);
        }
        (reward, self.terminal)
    }

    fn write_state(&self, obs: &mut [f32]) {
        const C: usize = SpaceInvadersGame::CHANNELS;
        obs[cell(9, self.pos, CANNON, C)] = 1.0;
        let direction = if self.alien_dir < 0 { ALIEN_LEFT } else { ALIEN_RIGHT };
        for r in 0..GRID {
            for c in 0..GRID {
                if self.aliens[r][c] {
                    obs[cell(r, c, ALIEN, C)] = 1.0;
                    obs[cell(r, c, direction, C)] = 1.0;
                }
                if self.friendly_bullets[r][c] {
                    obs[cell(r, c, FRIENDLY_BULLET, C)] = 1.0;
                }
                if self.enemy_bullets[r][c] {
                    obs[cell(r, c, ENEMY_BULLET, C)] = 1.0;
                }
            }
        }
    }

    fn difficulty_ramp(&self) -> Option<u32> {
        Some(self.ramp_index)
    }

    const GLYPHS: &'static [(usize, char)] =
        &[(CANNON, 'A'), (FRIENDLY_BULLET, '|'), (ENEMY_BULLET, '!'), (ALIEN_LEFT, '<'), (ALIEN_RIGHT, '>')];

    /// Whether `act` can run on this state as the package's would: the
    /// cannon on the grid, a marching direction, and timers in their ranges.
    fn valid(&self) -> bool {
        self.pos < GRID
            && self.alien_dir.abs() == 1
            && (MIN_MOVE_INTERVAL..=ENEMY_MOVE_INTERVAL).contains(&self.enemy_move_interval)
            && (0..=ENEMY_MOVE_INTERVAL).contains(&self.alien_move_timer)
            && (0..=ENEMY_SHOT_INTERVAL).contains(&self.alien_shot_timer)
            && (0..=SHOT_COOL_DOWN).contains(&self.shot_timer)
    }

    /// A restore keeps this game's `ramping` setting, which is
    /// configuration.
    fn restored(&self, saved: Self) -> Self {
        Self { ramping: self.ramping, ..saved }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{MinAtar, SpaceInvaders};
    use super::*;
    use rlx::{Action, Env};

    #[test]
    fn reset_layout() {
        let mut env = SpaceInvaders::new();
        let mut obs = vec![0.0f32; 600];
        env.reset(Some(3), &mut obs).unwrap();
        let at = |r, c, ch| obs[cell(r, c, ch, 6)] == 1.0;
        assert!(at(9, 5, CANNON));
        for r in 0..10 {
            for c in 0..10 {
                let alien = r < 4 && (2..8).contains(&c);
                assert_eq!(at(r, c, ALIEN), alien);
                assert_eq!(at(r, c, ALIEN_LEFT), alien);
                assert!(!at(r, c, ALIEN_RIGHT) && !at(r, c, FRIENDLY_BULLET) && !at(r, c, ENEMY_BULLET));
            }
        }
        assert_eq!(env.difficulty_ramp(), Some(0));
    }

    #[test]
    fn firing_kills_an_alien_and_respects_cool_down() {
        let mut env = MinAtar::<SpaceInvadersGame>::with_options(0.0, true).unwrap();
        let mut obs = vec![0.0f32; 600];
        env.reset(Some(0), &mut obs).unwrap();
        // Fire from column 5: the bullet rises to row 8 at once.
        env.step(Action::Discrete(3), &mut obs).unwrap();
        assert_eq!(obs[cell(8, 5, FRIENDLY_BULLET, 6)], 1.0);
        // Firing again during the cool-down does nothing.
        env.step(Action::Discrete(3), &mut obs).unwrap();
        assert_eq!((0..10).filter(|&r| obs[cell(r, 5, FRIENDLY_BULLET, 6)] == 1.0).count(), 1);
        let mut total = 0.0;
        for _ in 0..6 {
            total += env.step(Action::Discrete(0), &mut obs).unwrap().reward;
        }
        assert_eq!(total, 1.0);
        assert_eq!(env.game().aliens_left(), 23);
    }

    #[test]
    fn waves_ramp_down_to_interval_six() {
        let mut game = SpaceInvadersGame::new(true);
        let mut rng = Mt19937::new(0);
        for wave in 1..=8 {
            game.aliens = [[false; GRID]; GRID];
            game.aliens[0][0] = true;
            game.friendly_bullets[1][0] = true;
            let (reward, _) = game.act(0, &mut rng);
            assert_eq!(reward, 1.0);
            assert_eq!(game.aliens_left(), 24);
            assert_eq!(game.enemy_move_interval(), (12 - wave).max(6));
        }
        assert_eq!(game.difficulty_ramp(), Some(6));
        let mut flat = SpaceInvadersGame::new(false);
        flat.aliens = [[false; GRID]; GRID];
        flat.aliens[0][0] = true;
        flat.friendly_bullets[1][0] = true;
        flat.act(0, &mut rng);
        assert_eq!((flat.enemy_move_interval(), flat.difficulty_ramp()), (12, Some(0)));
    }
}
