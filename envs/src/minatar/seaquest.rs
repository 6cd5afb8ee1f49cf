//! MinAtar Seaquest, matching `minatar.environments.seaquest` (1.0.15).
//!
//! A two-cell submarine shoots fish and enemy submarines, picks up divers
//! and must surface for oxygen. Wrapped by [`MinAtar`](super::MinAtar) as
//! `MinAtar/Seaquest-v1`:
//!
//! | | |
//! |---|---|
//! | observation | `Box(0, 1, [10, 10, 10])`; channels 0 sub front, 1 sub back, 2 its bullets, 3 trail, 4 enemy bullets, 5 fish, 6 enemy subs, 7 oxygen gauge, 8 diver gauge (both on row 9), 9 divers |
//! | action | `Discrete(6)`: 0 no-op, 1 left, 2 up, 3 right, 4 down, 5 fire (all of MinAtar's actions), sticky with probability 0.1 |
//! | reward | +1 per fish or sub shot; surfacing with 6 divers adds `oxygen · 10 / 200` |
//! | termination | a fish, a sub or an enemy bullet on the sub's cell; oxygen at 0; surfacing without divers |
//! | truncation | none |
//! | reset | sub at row 0, column 5, facing left, 200 oxygen, no divers; no random draws |
//!
//! The package keeps its bullets, fish, subs and divers in Python lists,
//! walks them back to front while removing from them, and removes by value
//! (`list.remove` drops the first element *equal* to the one given). Two
//! objects can be equal, and a removed sub still runs the rest of its turn
//! (it may fire). [`PyList`] reproduces those semantics so that every
//! step matches the package, quirks included: surfacing with six divers
//! leaves a diver count of −1, as the package's `_surface` does.

use super::{cell, Game, Mt19937, FIRE, GRID, LEFT, RIGHT};
use serde::{Deserialize, Serialize};

const SUB_FRONT: usize = 0;
const SUB_BACK: usize = 1;
const FRIENDLY_BULLET: usize = 2;
const TRAIL: usize = 3;
const ENEMY_BULLET: usize = 4;
const FISH: usize = 5;
const ENEMY_SUB: usize = 6;
const OXYGEN_GAUGE: usize = 7;
const DIVER_GAUGE: usize = 8;
const DIVER: usize = 9;

/// MinAtar's full action indices of "up" and "down".
const UP: usize = 2;
const DOWN: usize = 4;

const MAX_OXYGEN: i32 = 200;
const INIT_SPAWN_SPEED: i32 = 20;
const DIVER_SPAWN_SPEED: i32 = 30;
const INIT_MOVE_INTERVAL: i32 = 5;
const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const DIVER_MOVE_INTERVAL: i32 = 5;
/// Divers the sub carries at most.
const MAX_DIVERS: i32 = 6;

/// A bullet: `[x, y, moving right]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Bullet {
    x: i32,
    y: i32,
    right: bool,
}

impl Bullet {
    fn step_x(&mut self) {
        self.x += if self.right { 1 } else { -1 };
    }
}

/// A fish, an enemy sub or a diver: `[x, y, moving right, move timer]`,
/// and a sub's shot timer (`None` for fish and divers, which the package
/// stores as four-element lists).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Mover {
    x: i32,
    y: i32,
    right: bool,
    move_timer: i32,
    shot_timer: Option<i32>,
}

impl Mover {
    fn step_x(&mut self) {
        self.x += if self.right { 1 } else { -1 };
    }
}

fn on_grid(x: i32) -> bool {
    (0..GRID as i32).contains(&x)
}

/// A Python list of objects with identity: each element keeps an id
/// (not part of its value), removal is by value, and iteration back to
/// front follows CPython's `reversed(list)` (an index that stops once it
/// leaves the list's current length).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PyList<T> {
    items: Vec<(u64, T)>,
}

impl<T> Default for PyList<T> {
    fn default() -> Self {
        Self { items: Vec::new() }
    }
}

impl<T: PartialEq + Copy> PyList<T> {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn push(&mut self, id: u64, value: T) {
        self.items.push((id, value));
    }

    fn values(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map(|(_, v)| v)
    }

    /// The element with `id`, if it is still in the list.
    fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        self.items.iter_mut().find(|(i, _)| *i == id).map(|(_, v)| v)
    }

    /// `list.remove(value)`: drops the first element equal to `value` and
    /// returns its id.
    fn remove(&mut self, value: &T) -> Option<u64> {
        let at = self.items.iter().position(|(_, v)| v == value)?;
        Some(self.items.remove(at).0)
    }

    /// The id at `reversed()`'s index `at`, or `None` once the walk ends.
    fn reversed_at(&self, at: isize) -> Option<u64> {
        (at >= 0 && (at as usize) < self.items.len()).then(|| self.items[at as usize].0)
    }
}

/// The object a walk is at: in its list, or removed from it (the package
/// goes on using the removed object for the rest of its turn).
struct Current<T> {
    id: u64,
    value: T,
    in_list: bool,
}

impl<T: PartialEq + Copy> Current<T> {
    fn of(list: &PyList<T>, id: u64) -> Self {
        let value = list.items.iter().find(|(i, _)| *i == id).expect("the walk yields listed ids").1;
        Self { id, value, in_list: true }
    }

    /// Changes the object (in its list too, while it is there).
    fn update(&mut self, list: &mut PyList<T>, f: impl FnOnce(&mut T)) {
        f(&mut self.value);
        if self.in_list {
            if let Some(v) = list.get_mut(self.id) {
                *v = self.value;
            }
        }
    }

    /// `list.remove(self)`: by value, which may drop an equal element
    /// before this one.
    fn remove_from(&mut self, list: &mut PyList<T>) {
        if list.remove(&self.value) == Some(self.id) {
            self.in_list = false;
        }
    }
}

/// The state of a Seaquest game.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeaquestGame {
    oxygen: i32,
    diver_count: i32,
    sub_x: i32,
    sub_y: i32,
    /// Facing right.
    sub_right: bool,
    f_bullets: PyList<Bullet>,
    e_bullets: PyList<Bullet>,
    e_fish: PyList<Mover>,
    e_subs: PyList<Mover>,
    divers: PyList<Mover>,
    e_spawn_speed: i32,
    e_spawn_timer: i32,
    d_spawn_timer: i32,
    move_speed: i32,
    ramp_index: u32,
    shot_timer: i32,
    surface: bool,
    terminal: bool,
    ramping: bool,
    /// The next object's id.
    next_id: u64,
}

impl SeaquestGame {
    /// The sub's front cell `(row, col)`.
    pub fn sub(&self) -> (usize, usize) {
        (self.sub_y as usize, self.sub_x as usize)
    }

    /// Divers on board (−1 after surfacing with six, as in the package).
    pub fn divers_on_board(&self) -> i32 {
        self.diver_count
    }

    /// Oxygen left, out of 200.
    pub fn oxygen(&self) -> i32 {
        self.oxygen
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn at_sub(&self, x: i32, y: i32) -> bool {
        (x, y) == (self.sub_x, self.sub_y)
    }

    /// The package's `_spawn_enemy`: side, kind, row; nothing if an enemy
    /// already crosses that row the other way.
    fn spawn_enemy(&mut self, r: &mut Mt19937) {
        let right = r.random_sample() < 0.5;
        let is_sub = r.random_sample() < 1.0 / 3.0;
        let y = r.randint(1, 9).expect("non-empty range") as i32;
        let x = if right { 0 } else { 9 };
        if self.e_subs.values().chain(self.e_fish.values()).any(|z| z.y == y && z.right != right) {
            return;
        }
        let id = self.new_id();
        let shot_timer = is_sub.then_some(ENEMY_SHOT_INTERVAL);
        let mover = Mover { x, y, right, move_timer: self.move_speed, shot_timer };
        if is_sub {
            self.e_subs.push(id, mover);
        } else {
            self.e_fish.push(id, mover);
        }
    }

    /// The package's `_spawn_diver`.
    fn spawn_diver(&mut self, r: &mut Mt19937) {
        let right = r.random_sample() < 0.5;
        let y = r.randint(1, 9).expect("non-empty range") as i32;
        let id = self.new_id();
        let diver = Mover { x: if right { 0 } else { 9 }, y, right, move_timer: DIVER_MOVE_INTERVAL, shot_timer: None };
        self.divers.push(id, diver);
    }

    /// The package's `_surface`.
    fn surface_now(&mut self) -> f64 {
        self.surface = true;
        let reward = if self.diver_count == MAX_DIVERS {
            self.diver_count = 0;
            (self.oxygen * 10).div_euclid(MAX_OXYGEN) as f64
        } else {
            0.0
        };
        self.oxygen = MAX_OXYGEN;
        self.diver_count -= 1;
        if self.ramping && (self.e_spawn_speed > 1 || self.move_speed > 2) {
            if self.move_speed > 2 && self.ramp_index % 2 == 1 {
                self.move_speed -= 1;
            }
            if self.e_spawn_speed > 1 {
                self.e_spawn_speed -= 1;
            }
            self.ramp_index += 1;
        }
        reward
    }

    /// The sub's bullets move; each that meets a fish (first) or a sub
    /// removes it and itself.
    fn move_friendly_bullets(&mut self, reward: &mut f64) {
        let mut at = self.f_bullets.len() as isize - 1;
        while let Some(id) = self.f_bullets.reversed_at(at) {
            at -= 1;
            let mut b = Current::of(&self.f_bullets, id);
            b.update(&mut self.f_bullets, Bullet::step_x);
            if !on_grid(b.value.x) {
                b.remove_from(&mut self.f_bullets);
                continue;
            }
            let (x, y) = (b.value.x, b.value.y);
            for enemies in [&mut self.e_fish, &mut self.e_subs] {
                let hit = enemies.values().find(|e| (e.x, e.y) == (x, y)).copied();
                if let Some(hit) = hit {
                    enemies.remove(&hit);
                    b.remove_from(&mut self.f_bullets);
                    *reward += 1.0;
                    break;
                }
            }
        }
    }

    fn move_divers(&mut self) {
        let mut at = self.divers.len() as isize - 1;
        while let Some(id) = self.divers.reversed_at(at) {
            at -= 1;
            let mut d = Current::of(&self.divers, id);
            if self.at_sub(d.value.x, d.value.y) && self.diver_count < MAX_DIVERS {
                d.remove_from(&mut self.divers);
                self.diver_count += 1;
            } else if d.value.move_timer == 0 {
                d.update(&mut self.divers, |d| {
                    d.move_timer = DIVER_MOVE_INTERVAL;
                    d.step_x();
                });
                if !on_grid(d.value.x) {
                    d.remove_from(&mut self.divers);
                } else if self.at_sub(d.value.x, d.value.y) && self.diver_count < MAX_DIVERS {
                    d.remove_from(&mut self.divers);
                    self.diver_count += 1;
                }
            } else {
                d.update(&mut self.divers, |d| d.move_timer -= 1);
            }
        }
    }

    /// Enemy subs (`subs`) or fish move, end the game on the sub's cell,
    /// and are shot by a bullet they move onto; subs also fire.
    fn move_enemies(&mut self, subs: bool, reward: &mut f64) {
        let list_len = if subs { self.e_subs.len() } else { self.e_fish.len() };
        let mut at = list_len as isize - 1;
        loop {
            let list = if subs { &mut self.e_subs } else { &mut self.e_fish };
            let Some(id) = list.reversed_at(at) else { break };
            at -= 1;
            let mut e = Current::of(list, id);
            if self.at_sub(e.value.x, e.value.y) {
                self.terminal = true;
            }
            let list = if subs { &mut self.e_subs } else { &mut self.e_fish };
            if e.value.move_timer == 0 {
                let speed = self.move_speed;
                e.update(list, |e| {
                    e.move_timer = speed;
                    e.step_x();
                });
                let hit = self.f_bullets.values().find(|b| (b.x, b.y) == (e.value.x, e.value.y)).copied();
                if !on_grid(e.value.x) {
                    e.remove_from(list);
                } else if (e.value.x, e.value.y) == (self.sub_x, self.sub_y) {
                    self.terminal = true;
                } else if let Some(hit) = hit {
                    e.remove_from(list);
                    self.f_bullets.remove(&hit);
                    *reward += 1.0;
                }
            } else {
                e.update(list, |e| e.move_timer -= 1);
            }
            if subs {
                // A removed sub still fires, as in the package.
                let list = &mut self.e_subs;
                if e.value.shot_timer == Some(0) {
                    e.update(list, |s| s.shot_timer = Some(ENEMY_SHOT_INTERVAL));
                    let id = self.new_id();
                    self.e_bullets.push(id, Bullet { x: e.value.x, y: e.value.y, right: e.value.right });
                } else {
                    e.update(list, |s| s.shot_timer = s.shot_timer.map(|t| t - 1));
                }
            }
        }
    }

    fn move_enemy_bullets(&mut self) {
        let mut at = self.e_bullets.len() as isize - 1;
        while let Some(id) = self.e_bullets.reversed_at(at) {
            at -= 1;
            let mut b = Current::of(&self.e_bullets, id);
            if self.at_sub(b.value.x, b.value.y) {
                self.terminal = true;
            }
            b.update(&mut self.e_bullets, Bullet::step_x);
            if !on_grid(b.value.x) {
                b.remove_from(&mut self.e_bullets);
            } else if self.at_sub(b.value.x, b.value.y) {
                self.terminal = true;
            }
        }
    }
}

impl Game for SeaquestGame {
    const NAME: &'static str = "MinAtar/Seaquest-v1";
    const CHANNELS: usize = 10;
    const MINIMAL_ACTIONS: &'static [usize] = &[0, LEFT, UP, RIGHT, DOWN, FIRE];

    fn new(difficulty_ramping: bool) -> Self {
        Self {
            oxygen: MAX_OXYGEN,
            diver_count: 0,
            sub_x: 5,
            sub_y: 0,
            sub_right: false,
            f_bullets: PyList::default(),
            e_bullets: PyList::default(),
            e_fish: PyList::default(),
            e_subs: PyList::default(),
            divers: PyList::default(),
            e_spawn_speed: INIT_SPAWN_SPEED,
            e_spawn_timer: INIT_SPAWN_SPEED,
            d_spawn_timer: DIVER_SPAWN_SPEED,
            move_speed: INIT_MOVE_INTERVAL,
            ramp_index: 0,
            shot_timer: 0,
            surface: true,
            terminal: false,
            ramping: difficulty_ramping,
            next_id: 0,
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
        if self.e_spawn_timer == 0 {
            self.spawn_enemy(rng);
            self.e_spawn_timer = self.e_spawn_speed;
        }
        if self.d_spawn_timer == 0 {
            self.spawn_diver(rng);
            self.d_spawn_timer = DIVER_SPAWN_SPEED;
        }
        match action {
            FIRE if self.shot_timer == 0 => {
                let id = self.new_id();
                self.f_bullets.push(id, Bullet { x: self.sub_x, y: self.sub_y, right: self.sub_right });
                self.shot_timer = SHOT_COOL_DOWN;
            }
            LEFT => (self.sub_x, self.sub_right) = ((self.sub_x - 1).max(0), false),
            RIGHT => (self.sub_x, self.sub_right) = ((self.sub_x + 1).min(9), true),
            UP => self.sub_y = (self.sub_y - 1).max(0),
            DOWN => self.sub_y = (self.sub_y + 1).min(8),
            _ => {}
        }
        self.move_friendly_bullets(&mut reward);
        self.move_divers();
        self.move_enemies(true, &mut reward);
        self.move_enemy_bullets();
        self.move_enemies(false, &mut reward);
        for timer in [&mut self.e_spawn_timer, &mut self.d_spawn_timer, &mut self.shot_timer] {
            if *timer > 0 {
                *timer -= 1;
            }
        }
        if self.oxygen <= 0 {
            self.terminal = true;
        }
        if self.sub_y > 0 {
            self.oxygen -= 1;
            self.surface = false;
        } else if !self.surface {
            if self.diver_count == 0 {
                self.terminal = true;
            } else {
                reward += self.surface_now();
            }
        }
        (reward, self.terminal)
    }

    fn write_state(&self, obs: &mut [f32]) {
        const C: usize = SeaquestGame::CHANNELS;
        let (x, y) = (self.sub_x, self.sub_y as usize);
        obs[cell(y, x as usize, SUB_FRONT, C)] = 1.0;
        // NumPy reads a column index of −1 as the last column.
        let back = if self.sub_right { x - 1 } else { x + 1 };
        obs[cell(y, back.rem_euclid(GRID as i32) as usize, SUB_BACK, C)] = 1.0;
        for c in 0..(self.oxygen.max(0) * 10).div_euclid(MAX_OXYGEN) as usize {
            obs[cell(9, c, OXYGEN_GAUGE, C)] = 1.0;
        }
        // `9 - diver_count .. 9`: empty for a count of 0 or less.
        for c in (9 - self.diver_count.clamp(0, 9))..9 {
            obs[cell(9, c as usize, DIVER_GAUGE, C)] = 1.0;
        }
        for b in self.f_bullets.values() {
            obs[cell(b.y as usize, b.x as usize, FRIENDLY_BULLET, C)] = 1.0;
        }
        for b in self.e_bullets.values() {
            obs[cell(b.y as usize, b.x as usize, ENEMY_BULLET, C)] = 1.0;
        }
        for (list, channel) in [(&self.e_fish, FISH), (&self.e_subs, ENEMY_SUB), (&self.divers, DIVER)] {
            for m in list.values() {
                obs[cell(m.y as usize, m.x as usize, channel, C)] = 1.0;
                let back = if m.right { m.x - 1 } else { m.x + 1 };
                if on_grid(back) {
                    obs[cell(m.y as usize, back as usize, TRAIL, C)] = 1.0;
                }
            }
        }
    }

    fn difficulty_ramp(&self) -> Option<u32> {
        Some(self.ramp_index)
    }

    const GLYPHS: &'static [(usize, char)] = &[
        (SUB_FRONT, 'S'),
        (SUB_BACK, 's'),
        (ENEMY_SUB, 'E'),
        (FISH, 'f'),
        (DIVER, 'd'),
        (FRIENDLY_BULLET, '-'),
        (ENEMY_BULLET, '~'),
        (OXYGEN_GAUGE, 'o'),
        (DIVER_GAUGE, 'D'),
        (TRAIL, '.'),
    ];

    /// Whether `act` and `write_state` can run on this state.
    /// Also bounds every timer and counter, so that no step of a restored
    /// game overflows.
    fn valid(&self) -> bool {
        let timer = |t: i32| (0..=1000).contains(&t);
        let listed = |l: &PyList<Mover>| {
            l.values().all(|m| {
                on_grid(m.x) && (1..=8).contains(&m.y) && timer(m.move_timer) && m.shot_timer.is_none_or(timer)
            })
        };
        let bullets = |l: &PyList<Bullet>| l.values().all(|b| on_grid(b.x) && (0..=8).contains(&b.y));
        on_grid(self.sub_x)
            && (0..=8).contains(&self.sub_y)
            && (-1..=MAX_OXYGEN).contains(&self.oxygen)
            && self.diver_count <= MAX_DIVERS
            && listed(&self.e_fish)
            && listed(&self.e_subs)
            && listed(&self.divers)
            && bullets(&self.f_bullets)
            && bullets(&self.e_bullets)
            && self.e_subs.values().all(|s| s.shot_timer.is_some())
            && [self.e_spawn_timer, self.d_spawn_timer, self.shot_timer].into_iter().all(timer)
            && (1..=1000).contains(&self.e_spawn_speed)
            && (1..=1000).contains(&self.move_speed)
            && self.diver_count > -1_000_000
            && self.ramp_index < 1_000_000
    }

    /// A restore keeps this game's `ramping` setting, which is
    /// configuration.
    fn restored(&self, saved: Self) -> Self {
        Self { ramping: self.ramping, ..saved }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPython's `list.remove` drops the first *equal* element, and
    /// `reversed(list)` stops once its index is past the list's end.
    #[test]
    fn py_list_removes_the_first_equal_and_walks_back_like_cpython() {
        let mut l = PyList::default();
        for (id, v) in [(1, 7), (2, 8), (3, 7)] {
            l.push(id, v);
        }
        let mut last = Current::of(&l, 3);
        last.remove_from(&mut l);
        assert!(last.in_list, "removing 7 dropped id 1, the first equal, not the walk's own id 3");
        assert_eq!(l.items, vec![(2, 8), (3, 7)]);
        // The walk was at index 2; its next index, 1, is id 3 again.
        assert_eq!(l.reversed_at(1), Some(3));
        assert_eq!(l.reversed_at(2), None);
        assert_eq!(l.reversed_at(-1), None);
    }

    #[test]
    fn surfacing_with_six_divers_pays_oxygen_and_leaves_minus_one() {
        let mut game = SeaquestGame::new(true);
        let mut rng = Mt19937::new(0);
        game.reset(&mut rng);
        (game.diver_count, game.oxygen, game.surface, game.sub_y) = (6, 150, false, 0);
        let (reward, done) = game.act(0, &mut rng);
        assert_eq!((reward, done), (7.0, false), "150 · 10 / 200 = 7");
        assert_eq!((game.diver_count, game.oxygen, game.ramp_index), (-1, MAX_OXYGEN, 1));
    }
}
