//! MinAtar Asterix, matching `minatar.environments.asterix` (1.0.15).
//!
//! The player moves in four directions on rows 1–8. Enemies and gold
//! spawn at either side of a free row and cross the screen. Wrapped by
//! [`MinAtar`](super::MinAtar) as `MinAtar/Asterix-v1`:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, 4])`; channels 0 player, 1 enemy, 2 trail (the cell an entity came from), 3 gold |
//! | action | `Discrete(5)`: 0 no-op, 1 left, 2 up, 3 right, 4 down (MinAtar actions `n l u r d`), sticky with probability 0.1 |
//! | reward | +1 per gold picked up |
//! | termination | the player and an enemy share a cell |
//! | truncation | none |
//! | reset | player at row 5, column 5; no entities; spawn every 10 steps, moves every 5 (draws nothing) |
//!
//! Each step, in the package's order: when the spawn timer is 0 an entity
//! spawns (`rand() < 1/2` picks its side, `rand() < 1/3` makes it gold,
//! then `randint(free rows)` its row; both draws are made even when every
//! row is taken); the player moves; entities on the player's cell are
//! resolved; when the move timer is 0 every entity moves one cell towards
//! the far side, leaving the screen past it, and is resolved again. With
//! difficulty ramping, every 102 steps the spawn interval shrinks by one
//! and, every other time, the move interval, down to 1.

use super::{cell, Game, Mt19937, GRID, LEFT, RIGHT};
use serde::{Deserialize, Serialize};

const PLAYER: usize = 0;
const ENEMY: usize = 1;
const TRAIL: usize = 2;
const GOLD: usize = 3;

/// MinAtar's full action indices of "up" and "down".
const UP: usize = 2;
const DOWN: usize = 4;

/// The package's `ramp_interval`: the ramp timer counts down from it
/// through 0 to −1, so an increase comes every 102 steps.
const RAMP_INTERVAL: i32 = 100;
const INIT_SPAWN_SPEED: i32 = 10;
const INIT_MOVE_INTERVAL: i32 = 5;
/// Entity slots: one per row 1–8.
const SLOTS: usize = 8;

/// An enemy or a piece of gold crossing row `slot + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Entity {
    x: i32,
    /// Moving right (it spawned on the left).
    right: bool,
    gold: bool,
}

/// The state of an Asterix game.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AsterixGame {
    player_x: i32,
    player_y: i32,
    entities: [Option<Entity>; SLOTS],
    spawn_speed: i32,
    spawn_timer: i32,
    move_speed: i32,
    move_timer: i32,
    ramp_timer: i32,
    ramp_index: u32,
    ramping: bool,
    terminal: bool,
}

impl AsterixGame {
    /// The player's cell `(row, col)`.
    pub fn player(&self) -> (usize, usize) {
        (self.player_y as usize, self.player_x as usize)
    }

    /// Entities on the screen.
    pub fn entities(&self) -> usize {
        self.entities.iter().flatten().count()
    }

    /// The package's `_spawn_entity`.
    fn spawn(&mut self, rng: &mut Mt19937) {
        let right = rng.random_sample() < 0.5;
        let gold = rng.random_sample() < 1.0 / 3.0;
        let free: Vec<usize> = (0..SLOTS).filter(|&i| self.entities[i].is_none()).collect();
        if free.is_empty() {
            return;
        }
        let slot = free[rng.randint(0, free.len() as i64).expect("non-empty range") as usize];
        self.entities[slot] = Some(Entity { x: if right { 0 } else { 9 }, right, gold });
    }

    /// Resolves entity `slot` meeting the player: gold is picked up (+1),
    /// an enemy ends the game.
    fn meet(&mut self, slot: usize, reward: &mut f64) {
        let Some(e) = self.entities[slot] else { return };
        if (e.x, slot as i32 + 1) != (self.player_x, self.player_y) {
            return;
        }
        if e.gold {
            self.entities[slot] = None;
            *reward += 1.0;
        } else {
            self.terminal = true;
        }
    }
}

impl Game for AsterixGame {
    const NAME: &'static str = "MinAtar/Asterix-v1";
    const CHANNELS: usize = 4;
    const MINIMAL_ACTIONS: &'static [usize] = &[0, LEFT, UP, RIGHT, DOWN];

    fn new(difficulty_ramping: bool) -> Self {
        Self {
            player_x: 5,
            player_y: 5,
            entities: [None; SLOTS],
            spawn_speed: INIT_SPAWN_SPEED,
            spawn_timer: INIT_SPAWN_SPEED,
            move_speed: INIT_MOVE_INTERVAL,
            move_timer: INIT_MOVE_INTERVAL,
            ramp_timer: RAMP_INTERVAL,
            ramp_index: 0,
            ramping: difficulty_ramping,
            terminal: false,
        }
    }

    fn reset(&mut self, _rng: &mut Mt19937) {
        *self = Self::new(self.ramping);
    }

    fn act(&mut self, action: usize, rng: &mut Mt19937) -> (f64, bool) {
        let mut reward = 0.0;
        if self.terminal {
            return (reward, true);
        }
        if self.spawn_timer == 0 {
            self.spawn(rng);
            self.spawn_timer = self.spawn_speed;
        }
        match action {
            LEFT => self.player_x = (self.player_x - 1).max(0),
            RIGHT => self.player_x = (self.player_x + 1).min(9),
            UP => self.player_y = (self.player_y - 1).max(1),
            DOWN => self.player_y = (self.player_y + 1).min(8),
            _ => {}
        }
        for slot in 0..SLOTS {
            self.meet(slot, &mut reward);
        }
        if self.move_timer == 0 {
            self.move_timer = self.move_speed;
            for slot in 0..SLOTS {
                let Some(e) = &mut self.entities[slot] else { continue };
                e.x += if e.right { 1 } else { -1 };
                if !(0..GRID as i32).contains(&e.x) {
                    self.entities[slot] = None;
                    continue;
                }
                self.meet(slot, &mut reward);
            }
        }
        self.spawn_timer -= 1;
        self.move_timer -= 1;
        if self.ramping && (self.spawn_speed > 1 || self.move_speed > 1) {
            if self.ramp_timer >= 0 {
                self.ramp_timer -= 1;
            } else {
                if self.move_speed > 1 && self.ramp_index % 2 == 1 {
                    self.move_speed -= 1;
                }
                if self.spawn_speed > 1 {
                    self.spawn_speed -= 1;
                }
                self.ramp_index += 1;
                self.ramp_timer = RAMP_INTERVAL;
            }
        }
        (reward, self.terminal)
    }

    fn write_state(&self, obs: &mut [f32]) {
        const C: usize = AsterixGame::CHANNELS;
        obs[cell(self.player_y as usize, self.player_x as usize, PLAYER, C)] = 1.0;
        for (slot, e) in self.entities.iter().enumerate() {
            let Some(e) = e else { continue };
            let row = slot + 1;
            obs[cell(row, e.x as usize, if e.gold { GOLD } else { ENEMY }, C)] = 1.0;
            let back = if e.right { e.x - 1 } else { e.x + 1 };
            if (0..GRID as i32).contains(&back) {
                obs[cell(row, back as usize, TRAIL, C)] = 1.0;
            }
        }
    }

    fn difficulty_ramp(&self) -> Option<u32> {
        Some(self.ramp_index)
    }

    const GLYPHS: &'static [(usize, char)] = &[(PLAYER, '@'), (ENEMY, 'X'), (GOLD, '$'), (TRAIL, '.')];

    /// Whether `act` can run on this state: the player and entities on
    /// the grid, timers and speeds in the ranges `act` keeps them in.
    fn valid(&self) -> bool {
        let on_grid = |v: i32| (0..GRID as i32).contains(&v);
        on_grid(self.player_x)
            && (1..=8).contains(&self.player_y)
            && self.entities.iter().flatten().all(|e| on_grid(e.x))
            && (1..=1000).contains(&self.spawn_speed)
            && (1..=1000).contains(&self.move_speed)
            && (0..=1000).contains(&self.spawn_timer)
            && (0..=1000).contains(&self.move_timer)
            && (-1..=RAMP_INTERVAL).contains(&self.ramp_timer)
            && self.ramp_index < 1_000_000
    }

    /// A restore keeps this game's `ramping` setting, which is
    /// configuration.
    fn restored(&self, saved: Self) -> Self {
        Self { ramping: self.ramping, ..saved }
    }
}
