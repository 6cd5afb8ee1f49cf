//! A maze whose walls make moves illegal: the bundled example of action
//! masking ([`rlx::Env::action_mask`]).
//!
//! ```text
//! S S S # . .
//! S # . # . #
//! S # . . . .
//! . # # # # .
//! . . . # . .
//! # # . . . G
//! ```
//!
//! The agent starts on one of the five `S`-marked cells at the top left,
//! drawn at every reset, and must reach `G`. Actions are up, right,
//! down and left; a move into a wall (`#`) or off the grid is illegal, and
//! the env reports which moves are legal at every step. An illegal move
//! ends the episode with a penalty of −1, so a policy that ignores the
//! mask must learn the walls; one that respects it never bumps into one.
//! Each step costs 0.02 and reaching the goal pays 1; episodes are cut
//! after 50 steps. The shortest paths take 8 to 10 steps (returns of 0.86
//! to 0.82); a uniformly random legal walk rarely gets there in time.
//!
//! The observation is the agent's cell, one-hot over the 36 cells.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlx::env::{decode_state, encode_state, invalid_action, EnvState};
use rlx::{Action, Env, EnvError, EnvSignature, Space, Step};

const MAP: [&str; 6] = ["SSS#..", "S#.#.#", "S#....", ".####.", "...#..", "##...G"];
/// The start cells (the `S`s).
const STARTS: [(usize, usize); 5] = [(0, 0), (0, 1), (0, 2), (1, 0), (2, 0)];
const SIDE: usize = 6;
/// Up, right, down, left.
const MOVES: [(i64, i64); 4] = [(-1, 0), (0, 1), (1, 0), (0, -1)];

/// The maze; see the module docs.
pub struct MaskedMaze {
    row: usize,
    col: usize,
    legal: [bool; 4],
    done: bool,
    rng: ChaCha8Rng,
    signature: EnvSignature,
}

impl Default for MaskedMaze {
    fn default() -> Self {
        Self::new()
    }
}

fn wall(row: i64, col: i64) -> bool {
    !(0..SIDE as i64).contains(&row)
        || !(0..SIDE as i64).contains(&col)
        || MAP[row as usize].as_bytes()[col as usize] == b'#'
}

impl MaskedMaze {
    /// A maze; call `reset` before stepping.
    pub fn new() -> Self {
        Self {
            row: 0,
            col: 0,
            legal: [false; 4],
            done: true,
            rng: ChaCha8Rng::seed_from_u64(0),
            signature: EnvSignature::new(
                "MaskedMaze-v0",
                Space::uniform_box(0.0, 1.0, vec![SIDE * SIDE]).expect("bounds are consistent"),
                Space::discrete(4),
            ),
        }
    }

    fn observe(&mut self, obs: &mut [f32]) {
        obs.fill(0.0);
        obs[self.row * SIDE + self.col] = 1.0;
        for (legal, (dr, dc)) in self.legal.iter_mut().zip(MOVES) {
            *legal = !wall(self.row as i64 + dr, self.col as i64 + dc);
        }
    }
}

impl Env for MaskedMaze {
    fn signature(&self) -> &EnvSignature {
        &self.signature
    }

    /// Starts on a random `S` cell.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvError> {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        (self.row, self.col) = STARTS[self.rng.gen_range(0..STARTS.len())];
        self.done = false;
        self.observe(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvError> {
        let Action::Discrete(a @ 0..=3) = action else {
            return Err(invalid_action(self, action));
        };
        if self.done {
            return Err(EnvError::NeedsReset { env: self.name().to_string() });
        }
        if !self.legal[a as usize] {
            // Into a wall: the episode ends with the penalty.
            self.done = true;
            self.observe(obs);
            return Ok(Step { reward: -1.0, terminated: true, truncated: false });
        }
        let (dr, dc) = MOVES[a as usize];
        self.row = (self.row as i64 + dr) as usize;
        self.col = (self.col as i64 + dc) as usize;
        self.observe(obs);
        let goal = MAP[self.row].as_bytes()[self.col] == b'G';
        self.done = goal;
        Ok(Step { reward: if goal { 1.0 } else { -0.02 }, terminated: goal, truncated: false })
    }

    fn action_mask(&self) -> Option<&[bool]> {
        Some(&self.legal)
    }

    fn save_state(&self) -> Option<EnvState> {
        Some(encode_state(&(self.name(), self.row, self.col, self.done, &self.rng)))
    }

    fn load_state(&mut self, state: &EnvState) -> Result<(), EnvError> {
        let (tag, row, col, done, rng): (String, usize, usize, bool, ChaCha8Rng) = decode_state(self.name(), state)?;
        if tag != self.name() || row >= SIDE || col >= SIDE || wall(row as i64, col as i64) {
            return Err(EnvError::Other { env: self.name().into(), message: "not a snapshot of this maze".into() });
        }
        (self.row, self.col, self.done, self.rng) = (row, col, done, rng);
        let mut obs = [0.0; SIDE * SIDE];
        self.observe(&mut obs);
        Ok(())
    }

    fn render(&self) -> Option<String> {
        let mut out = String::new();
        for (r, line) in MAP.iter().enumerate() {
            for (c, ch) in line.chars().enumerate() {
                out.push(if (r, c) == (self.row, self.col) { 'A' } else { ch });
            }
            out.push('\n');
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortest path from `start`, by breadth-first search over legal
    /// moves.
    fn shortest_path(start: (usize, usize)) -> usize {
        let mut dist = [[usize::MAX; SIDE]; SIDE];
        dist[start.0][start.1] = 0;
        let mut queue = std::collections::VecDeque::from([(start.0 as i64, start.1 as i64)]);
        while let Some((r, c)) = queue.pop_front() {
            for (dr, dc) in MOVES {
                let (nr, nc) = (r + dr, c + dc);
                if !wall(nr, nc) && dist[nr as usize][nc as usize] == usize::MAX {
                    dist[nr as usize][nc as usize] = dist[r as usize][c as usize] + 1;
                    queue.push_back((nr, nc));
                }
            }
        }
        dist[SIDE - 1][SIDE - 1]
    }

    #[test]
    fn walls_are_masked_bumping_ends_the_episode_and_the_goal_pays() {
        let paths: Vec<usize> = STARTS.iter().map(|&s| shortest_path(s)).collect();
        assert_eq!(paths, vec![10, 9, 8, 9, 8], "the module docs' figures");
        let mut env = MaskedMaze::new();
        let mut obs = [0.0f32; 36];
        let mut seed = 0;
        while {
            env.reset(Some(seed), &mut obs).unwrap();
            obs[0] != 1.0
        } {
            seed += 1;
        }
        // At S: only right and down are legal.
        assert_eq!(env.action_mask(), Some(&[false, true, true, false][..]));
        let bump = env.step(Action::Discrete(0), &mut obs).unwrap();
        assert_eq!((bump.reward, bump.terminated), (-1.0, true));
        assert!(env.step(Action::Discrete(1), &mut obs).is_err(), "needs a reset");
        // From (0, 0), the shortest path: down 4, right 2, down 1, right 3.
        env.reset(Some(seed), &mut obs).unwrap();
        let mut ret = 0.0;
        for a in [2, 2, 2, 2, 1, 1, 2, 1, 1, 1] {
            assert!(env.action_mask().unwrap()[a as usize], "move {a} is legal");
            ret += env.step(Action::Discrete(a), &mut obs).unwrap().reward;
        }
        assert!((ret - 0.82).abs() < 1e-9, "{ret}");
        assert_eq!(obs[35], 1.0);
    }
}
