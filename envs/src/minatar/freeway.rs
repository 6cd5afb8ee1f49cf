//! MinAtar Freeway, matching `minatar.environments.freeway` (1.0.15).
//!
//! A chicken in column 4 crosses eight lanes of traffic from the bottom
//! row to the top. Wrapped by [`MinAtar`](super::MinAtar) as
//! `MinAtar/Freeway-v1`:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, 7])`; channels 0 chicken, 1 car, 2–6 the cell behind a car by its speed (2: moves every step, …, 6: every 5th step) |
//! | action | `Discrete(3)`: 0 no-op, 1 up, 2 down (MinAtar actions `n u d`), sticky with probability 0.1 |
//! | reward | +1 each time the chicken reaches row 0, after which it returns to row 9 and the cars get new speeds |
//! | termination | after 2,500 steps (the package's time limit, reported as termination) |
//! | truncation | none |
//! | reset | chicken on row 9; one car per row 1–8 at column 0, each with a speed `randint(1, 6)` (8 draws) and a direction from the sign of `rand() − 0.5` (8 draws) |
//!
//! The chicken moves at most once every 3 steps. A car moves one cell
//! when its timer reaches 0 (then waits `|speed|` steps), wraps around
//! the sides, and sends the chicken back to row 9 when they share a cell
//! (checked before and after the car moves).

use super::{cell, Game, Mt19937, GRID};
use serde::{Deserialize, Serialize};

const CHICKEN: usize = 0;
const CAR: usize = 1;
/// The trail channel of a car of speed 1; speed `s` uses `SPEED1 + s − 1`.
const SPEED1: usize = 2;

/// MinAtar's full action indices of "up" and "down".
const UP: usize = 2;
const DOWN: usize = 4;

/// Steps between two moves of the chicken.
const PLAYER_SPEED: i32 = 3;
/// Steps until the game ends.
const TIME_LIMIT: i32 = 2500;
/// The chicken's column.
const CHICKEN_X: i32 = 4;
/// Lanes, rows 1–8.
const CARS: usize = 8;

/// The car of lane `i` (row `i + 1`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Car {
    x: i32,
    /// Steps until it moves.
    timer: i32,
    /// Steps between moves, signed by direction (positive: right); 0 only
    /// if `rand()` drew exactly 0.5, as in the package.
    speed: i32,
}

/// The state of a Freeway game.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FreewayGame {
    cars: [Car; CARS],
    pos: i32,
    move_timer: i32,
    terminate_timer: i32,
    terminal: bool,
}

impl FreewayGame {
    /// The chicken's row.
    pub fn chicken(&self) -> usize {
        self.pos as usize
    }

    /// The package's `_randomize_cars`: 8 speeds in 1..6, then 8
    /// directions; with `initialize`, every car also goes back to column 0
    /// with its timer at its speed.
    fn randomize_cars(&mut self, initialize: bool, rng: &mut Mt19937) {
        let speeds: Vec<i32> = (0..CARS).map(|_| rng.randint(1, 6).expect("non-empty range") as i32).collect();
        let signs: Vec<i32> = (0..CARS)
            .map(|_| {
                let d = rng.random_sample() - 0.5;
                if d > 0.0 {
                    1
                } else if d < 0.0 {
                    -1
                } else {
                    0
                }
            })
            .collect();
        for (i, car) in self.cars.iter_mut().enumerate() {
            let speed = speeds[i] * signs[i];
            car.timer = speed.abs();
            car.speed = speed;
            if initialize {
                car.x = 0;
            }
        }
    }

    /// Sends the chicken back to the bottom if car `i` is on its cell.
    fn hit(&mut self, i: usize) {
        if (self.cars[i].x, i as i32 + 1) == (CHICKEN_X, self.pos) {
            self.pos = 9;
        }
    }
}

impl Game for FreewayGame {
    const NAME: &'static str = "MinAtar/Freeway-v1";
    const CHANNELS: usize = 7;
    const MINIMAL_ACTIONS: &'static [usize] = &[0, UP, DOWN];

    fn new(_difficulty_ramping: bool) -> Self {
        Self {
            cars: [Car { x: 0, timer: 0, speed: 0 }; CARS],
            pos: 9,
            move_timer: PLAYER_SPEED,
            terminate_timer: TIME_LIMIT,
            terminal: false,
        }
    }

    fn reset(&mut self, rng: &mut Mt19937) {
        *self = Self::new(false);
        self.randomize_cars(true, rng);
    }

    fn act(&mut self, action: usize, rng: &mut Mt19937) -> (f64, bool) {
        let mut reward = 0.0;
        if self.terminal {
            return (reward, true);
        }
        if action == UP && self.move_timer == 0 {
            self.move_timer = PLAYER_SPEED;
            self.pos = (self.pos - 1).max(0);
        } else if action == DOWN && self.move_timer == 0 {
            self.move_timer = PLAYER_SPEED;
            self.pos = (self.pos + 1).min(9);
        }
        if self.pos == 0 {
            reward += 1.0;
            self.randomize_cars(false, rng);
            self.pos = 9;
        }
        for i in 0..CARS {
            self.hit(i);
            let car = &mut self.cars[i];
            if car.timer == 0 {
                car.timer = car.speed.abs();
                car.x += if car.speed > 0 { 1 } else { -1 };
                car.x = car.x.rem_euclid(GRID as i32);
                self.hit(i);
            } else {
                car.timer -= 1;
            }
        }
        if self.move_timer > 0 {
            self.move_timer -= 1;
        }
        self.terminate_timer -= 1;
        if self.terminate_timer < 0 {
            self.terminal = true;
        }
        (reward, self.terminal)
    }

    fn write_state(&self, obs: &mut [f32]) {
        const C: usize = FreewayGame::CHANNELS;
        obs[cell(self.pos as usize, CHICKEN_X as usize, CHICKEN, C)] = 1.0;
        for (i, car) in self.cars.iter().enumerate() {
            let row = i + 1;
            obs[cell(row, car.x as usize, CAR, C)] = 1.0;
            // A car of speed 0 (never drawn in practice) has no trail.
            if car.speed != 0 {
                let back = (car.x - car.speed.signum()).rem_euclid(GRID as i32);
                obs[cell(row, back as usize, SPEED1 + car.speed.unsigned_abs() as usize - 1, C)] = 1.0;
            }
        }
    }

    const GLYPHS: &'static [(usize, char)] = &[(CHICKEN, 'C'), (CAR, '#')];

    /// Whether `act` can run on this state: the chicken and cars on the
    /// grid, speeds the package draws.
    fn valid(&self) -> bool {
        let on_grid = |v: i32| (0..GRID as i32).contains(&v);
        on_grid(self.pos)
            && (0..=PLAYER_SPEED).contains(&self.move_timer)
            && (-1..=TIME_LIMIT).contains(&self.terminate_timer)
            && self.cars.iter().all(|c| on_grid(c.x) && (0..=5).contains(&c.timer) && c.speed.abs() <= 5)
    }
}
