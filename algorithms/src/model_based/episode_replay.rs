//! [`EpisodeReplay`]: DreamerV3's replay of whole episodes, from which
//! the world model learns on sequences.
//!
//! Evaluators send transitions (`obs`, `actions`, `rewards`, `new_obs`,
//! `terminateds`, `truncateds`), cut into fragments and interleaved
//! across env copies. The replay stitches each env copy's fragments back
//! into its episode: a row continues the episode whose last row's
//! [`fields::STATE_OUT`] equals its own [`fields::STATE_IN`] bit for bit
//! (the recurrent state an evaluator carried from one step to the next);
//! any other row starts an episode (DreamerV3's policy never writes the
//! zero state an episode starts from).
//!
//! An episode is stored observation by observation, as the world model
//! reads it: row `t` holds `o_t`, the action `a_{t−1}` that led to it, the
//! reward `r_t` received on arriving and whether `o_t` is terminal; row 0
//! holds the first observation with no action and no reward. A training
//! batch is `B` windows of `T` rows, time-major (row `t · B + b`), each
//! starting at a uniformly drawn row of the replay; a window that reaches
//! the end of its episode goes on from the start of another, drawn at
//! random. [`IS_FIRST`] marks where the world model starts from its
//! initial state: every episode's first row and every window's first.
//! The oldest episodes leave when the rows exceed the capacity; one
//! episode longer than the capacity loses its oldest rows.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rlx::replay::{ReplayError, ReplayStore};
use rlx::{fields, Column, SampleBatch};
use std::collections::{HashMap, VecDeque};

/// 1.0 on a row the world model starts from its initial state.
pub const IS_FIRST: &str = "is_first";
/// The action that led to a row's observation (0 on first rows).
pub const PREV_ACTIONS: &str = "prev_actions";

/// One episode, observation-major.
#[derive(Clone, Debug, Default)]
struct Episode {
    obs: Vec<f32>,
    prev_actions: Vec<f32>,
    rewards: Vec<f32>,
    terminals: Vec<f32>,
}

impl Episode {
    fn len(&self) -> usize {
        self.rewards.len()
    }

    fn push(&mut self, obs: &[f32], prev_action: &[f32], reward: f32, terminal: bool) {
        self.obs.extend_from_slice(obs);
        self.prev_actions.extend_from_slice(prev_action);
        self.rewards.push(reward);
        self.terminals.push(if terminal { 1.0 } else { 0.0 });
    }

    fn heap_bytes(&self) -> usize {
        4 * (self.obs.capacity() + self.prev_actions.capacity() + self.rewards.capacity() + self.terminals.capacity())
    }

    /// Drops the first `k` rows: the episode goes on from row `k`, which
    /// becomes its first (no action, no reward, as a start is stored).
    fn drop_front(&mut self, k: usize) {
        let (o, a) = (self.obs.len() / self.len(), self.prev_actions.len() / self.len());
        self.obs.drain(..k * o);
        self.prev_actions.drain(..k * a);
        self.rewards.drain(..k);
        self.terminals.drain(..k);
        self.prev_actions[..a].fill(0.0);
        self.rewards[0] = 0.0;
    }
}

/// The widths of a stored row, fixed by the first batch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Widths {
    obs: usize,
    action: usize,
}

/// Whole episodes for sequence training (see the module docs).
#[derive(Clone, Debug)]
pub struct EpisodeReplay {
    capacity: usize,
    length: usize,
    widths: Option<Widths>,
    episodes: VecDeque<Episode>,
    /// The id of `episodes[0]`; ids count up from 0.
    first_id: u64,
    /// Episodes still going: the bits of their last row's state out.
    open: HashMap<Vec<u32>, u64>,
    rows: usize,
}

impl EpisodeReplay {
    /// An empty replay of at most `capacity` rows, drawn in windows of
    /// `length`.
    ///
    /// # Errors
    /// A capacity or length of 0, or a capacity below one window.
    pub fn new(capacity: usize, length: usize) -> Result<Self, ReplayError> {
        if length == 0 || capacity < length {
            return Err(ReplayError::Invalid(format!(
                "an episode replay of {capacity} rows cannot hold one sequence of {length}"
            )));
        }
        Ok(Self {
            capacity,
            length,
            widths: None,
            episodes: VecDeque::new(),
            first_id: 0,
            open: HashMap::new(),
            rows: 0,
        })
    }

    /// Episodes stored (the oldest may have lost nothing yet; whole
    /// episodes leave).
    pub fn num_episodes(&self) -> usize {
        self.episodes.len()
    }

    /// The rows of episode `i` (0 the oldest stored): observations, for
    /// tests and inspection.
    pub fn episode_obs(&self, i: usize) -> Option<&[f32]> {
        self.episodes.get(i).map(|e| e.obs.as_slice())
    }

    fn episode_mut(&mut self, id: u64) -> Option<&mut Episode> {
        let at = id.checked_sub(self.first_id)?;
        self.episodes.get_mut(at as usize)
    }

    /// The action rows of `batch` as `f32` (discrete actions as their index).
    fn actions(batch: &SampleBatch) -> Result<(Vec<f32>, usize), ReplayError> {
        match batch.get(fields::ACTIONS) {
            Some(Column::F32 { data, width }) => Ok((data.clone(), *width)),
            Some(Column::I64 { data, width }) => Ok((data.iter().map(|&a| a as f32).collect(), *width)),
            _ => Err(ReplayError::Invalid("an episode replay needs an `actions` column of numbers".into())),
        }
    }

    /// Whole episodes leave, oldest first, until the rows fit; an episode
    /// that alone is longer than the capacity (an env that never ends)
    /// loses its oldest rows instead, keeping at least one window.
    fn drop_oldest(&mut self) {
        while self.rows > self.capacity && self.episodes.len() > 1 {
            let gone = self.episodes.pop_front().expect("more than one episode");
            self.rows -= gone.len();
            self.first_id += 1;
            let first = self.first_id;
            self.open.retain(|_, id| *id >= first);
        }
        if let Some(only) = self.episodes.front_mut().filter(|_| self.rows > self.capacity) {
            let k = self.rows - self.capacity;
            only.drop_front(k);
            self.rows -= k;
        }
    }
}

/// The bits of a state row, as a key.
fn bits(row: &[f32]) -> Vec<u32> {
    row.iter().map(|x| x.to_bits()).collect()
}

impl ReplayStore for EpisodeReplay {
    fn add(&mut self, batch: &SampleBatch, _: Option<&[f32]>) -> Result<(), ReplayError> {
        let n = batch.len();
        if n == 0 {
            return Ok(());
        }
        let obs = batch.values(fields::OBS)?.to_f32().into_owned();
        let new_obs = batch.values(fields::NEW_OBS)?.to_f32().into_owned();
        let (actions, action_width) = Self::actions(batch)?;
        let (rewards, terminated, truncated) =
            (batch.f32(fields::REWARDS)?, batch.f32(fields::TERMINATEDS)?, batch.f32(fields::TRUNCATEDS)?);
        let missing = |f: &str| {
            ReplayError::Invalid(format!(
                "an episode replay stitches fragments by `{f}`, which the batch lacks (is the policy recurrent?)"
            ))
        };
        let state_in = batch.f32(fields::STATE_IN).map_err(|_| missing(fields::STATE_IN))?;
        let state_out = batch.f32(fields::STATE_OUT).map_err(|_| missing(fields::STATE_OUT))?;
        let widths = Widths { obs: obs.len() / n, action: action_width };
        if *self.widths.get_or_insert(widths) != widths {
            return Err(ReplayError::Invalid(format!(
                "rows of {} observation and {} action values, but the replay holds {:?}",
                widths.obs, widths.action, self.widths
            )));
        }
        let (s, o, a) = (state_in.len() / n, widths.obs, widths.action);
        let no_action = vec![0.0; a];
        for r in 0..n {
            let continued = self.open.remove(&bits(&state_in[r * s..(r + 1) * s]));
            let id = match continued.filter(|&id| id >= self.first_id) {
                Some(id) => id,
                None => {
                    let mut episode = Episode::default();
                    episode.push(&obs[r * o..(r + 1) * o], &no_action, 0.0, false);
                    self.episodes.push_back(episode);
                    self.rows += 1;
                    self.first_id + self.episodes.len() as u64 - 1
                }
            };
            let terminal = terminated[r] != 0.0;
            let episode = self.episode_mut(id).expect("an open episode is stored");
            episode.push(&new_obs[r * o..(r + 1) * o], &actions[r * a..(r + 1) * a], rewards[r], terminal);
            self.rows += 1;
            if !terminal && truncated[r] == 0.0 {
                self.open.insert(bits(&state_out[r * s..(r + 1) * s]), id);
            }
        }
        self.drop_oldest();
        Ok(())
    }

    fn sample(&self, n: usize, _: u64, rng: &mut ChaCha8Rng) -> Result<SampleBatch, ReplayError> {
        let (t_len, widths) = (self.length, self.widths.ok_or(ReplayError::Empty)?);
        if self.rows == 0 {
            return Err(ReplayError::Empty);
        }
        if n == 0 || !n.is_multiple_of(t_len) {
            return Err(ReplayError::Invalid(format!("{n} rows are not whole sequences of {t_len}")));
        }
        let b_len = n / t_len;
        let starts: Vec<usize> =
            self.episodes.iter().scan(0, |acc, e| Some(std::mem::replace(acc, *acc + e.len()))).collect();
        let (o, a) = (widths.obs, widths.action);
        let (mut obs, mut prev) = (vec![0.0; n * o], vec![0.0; n * a]);
        let (mut rewards, mut terminals, mut first) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        for b in 0..b_len {
            let row = rng.gen_range(0..self.rows);
            let mut e = starts.partition_point(|&s| s <= row) - 1;
            let mut at = row - starts[e];
            for t in 0..t_len {
                if at == self.episodes[e].len() {
                    e = rng.gen_range(0..self.episodes.len());
                    at = 0;
                }
                let (ep, i) = (&self.episodes[e], t * b_len + b);
                let is_first = at == 0 || t == 0;
                obs[i * o..(i + 1) * o].copy_from_slice(&ep.obs[at * o..(at + 1) * o]);
                // A window that starts inside an episode starts the model
                // from its initial state and no action, but its first step
                // still has the reward that led to it (an episode's own
                // first step has none).
                if !is_first {
                    prev[i * a..(i + 1) * a].copy_from_slice(&ep.prev_actions[at * a..(at + 1) * a]);
                }
                rewards[i] = ep.rewards[at];
                terminals[i] = ep.terminals[at];
                first[i] = if is_first { 1.0 } else { 0.0 };
                at += 1;
            }
        }
        let mut out = SampleBatch::new();
        out.insert_f32(fields::OBS, obs, o)?;
        out.insert_f32(PREV_ACTIONS, prev, a)?;
        out.insert_f32(fields::REWARDS, rewards, 1)?;
        out.insert_f32(fields::TERMINATEDS, terminals, 1)?;
        out.insert_f32(IS_FIRST, first, 1)?;
        Ok(out)
    }

    fn len(&self) -> usize {
        self.rows
    }

    fn heap_bytes(&self) -> usize {
        self.episodes.iter().map(Episode::heap_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Rows of one env copy: observations `o`, the state written at each
    /// step (`id` and the step), ending as `end` says.
    fn fragment(id: f32, steps: std::ops::Range<usize>, start_state: bool, end: Option<bool>) -> SampleBatch {
        let n = steps.len();
        let mut b = SampleBatch::new();
        let o: Vec<f32> = steps.clone().map(|t| id * 100.0 + t as f32).collect();
        b.insert_f32(fields::OBS, o.clone(), 1).unwrap();
        b.insert_f32(fields::NEW_OBS, o.iter().map(|x| x + 1.0).collect(), 1).unwrap();
        b.insert(fields::ACTIONS, Column::I64 { data: steps.clone().map(|t| t as i64 % 2).collect(), width: 1 })
            .unwrap();
        b.insert_f32(fields::REWARDS, vec![1.0; n], 1).unwrap();
        let last = |flag: bool| (0..n).map(|i| if i + 1 == n && flag { 1.0 } else { 0.0 }).collect::<Vec<f32>>();
        b.insert_f32(fields::TERMINATEDS, last(end == Some(true)), 1).unwrap();
        b.insert_f32(fields::TRUNCATEDS, last(end == Some(false)), 1).unwrap();
        let state = |t: usize| vec![id, t as f32 + 1.0];
        let state_in: Vec<f32> = steps
            .clone()
            .flat_map(|t| if t == steps.start && start_state { vec![0.0, 0.0] } else { state(t) })
            .collect();
        let state_out: Vec<f32> = steps.clone().flat_map(|t| state(t + 1)).collect();
        b.insert_f32(fields::STATE_IN, state_in, 2).unwrap();
        b.insert_f32(fields::STATE_OUT, state_out, 2).unwrap();
        b
    }

    #[test]
    fn interleaved_fragments_are_stitched_into_their_episodes() {
        let mut replay = EpisodeReplay::new(100, 4).unwrap();
        // Copies 1 and 2 send fragments in turns; copy 1's episode ends
        // (terminated) in its second fragment, copy 2's is truncated.
        for batch in [
            SampleBatch::concat(&[fragment(1.0, 0..3, true, None), fragment(2.0, 0..3, true, None)]).unwrap(),
            SampleBatch::concat(&[fragment(1.0, 3..5, false, Some(true)), fragment(2.0, 3..4, false, Some(false))])
                .unwrap(),
            fragment(1.0, 0..2, true, None),
        ] {
            replay.add(&batch, None).unwrap();
        }
        assert_eq!(replay.num_episodes(), 3);
        assert_eq!(replay.episode_obs(0).unwrap(), &[100.0, 101.0, 102.0, 103.0, 104.0, 105.0]);
        assert_eq!(replay.episode_obs(1).unwrap(), &[200.0, 201.0, 202.0, 203.0, 204.0]);
        assert_eq!(replay.episode_obs(2).unwrap(), &[100.0, 101.0, 102.0], "a new episode after the end");
        assert_eq!(replay.len(), 6 + 5 + 3, "every transition and each episode's first observation");
        let e = &replay.episodes[0];
        assert_eq!(e.terminals, vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(e.prev_actions, vec![0.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        assert_eq!(e.rewards, vec![0.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        // A batch without the recurrent state is refused with the reason.
        let mut no_state = fragment(3.0, 0..2, true, None);
        no_state.remove(fields::STATE_IN);
        let err = replay.add(&no_state, None).unwrap_err().to_string();
        assert!(err.contains("state_in") && err.contains("recurrent"), "{err}");
    }

    #[test]
    fn windows_are_time_major_run_on_into_other_episodes_and_mark_their_starts() {
        let mut replay = EpisodeReplay::new(100, 4).unwrap();
        replay.add(&fragment(1.0, 0..2, true, Some(true)), None).unwrap();
        replay.add(&fragment(2.0, 0..5, true, Some(true)), None).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..20 {
            let b = replay.sample(12, 0, &mut rng).unwrap();
            let (obs, first) = (b.f32(fields::OBS).unwrap(), b.f32(IS_FIRST).unwrap());
            let (prev, rewards) = (b.f32(PREV_ACTIONS).unwrap(), b.f32(fields::REWARDS).unwrap());
            for w in 0..3 {
                assert_eq!(first[w], 1.0, "a window starts from the initial state");
                assert_eq!(prev[w], 0.0);
                // Every transition of `fragment` pays 1; an episode's
                // first observation has no reward, a later one keeps it.
                let episode_start = obs[w] % 100.0 == 0.0;
                assert_eq!(rewards[w], if episode_start { 0.0 } else { 1.0 }, "window {w} starts at {}", obs[w]);
                for t in 1..4 {
                    let (now, before) = (obs[t * 3 + w], obs[(t - 1) * 3 + w]);
                    let next_in_episode = now == before + 1.0 && first[t * 3 + w] == 0.0;
                    let new_episode = now % 100.0 == 0.0 && first[t * 3 + w] == 1.0;
                    assert!(next_in_episode || new_episode, "window {w} step {t}: {before} -> {now}");
                }
            }
        }
        assert!(replay.sample(10, 0, &mut rng).unwrap_err().to_string().contains("whole sequences of 4"));
        // Capacity: the oldest episodes leave, whole.
        let mut small = EpisodeReplay::new(8, 4).unwrap();
        for k in 0..4 {
            small.add(&fragment(k as f32, 0..3, true, Some(true)), None).unwrap();
        }
        assert_eq!((small.num_episodes(), small.len()), (2, 8));
        assert_eq!(small.episode_obs(0).unwrap()[0], 200.0);
        assert!(EpisodeReplay::new(3, 4).is_err());
        // One episode longer than the capacity, still going: its oldest
        // rows leave, the rest keep their order, and the new first row is
        // a start (no action, no reward).
        let mut endless = EpisodeReplay::new(8, 4).unwrap();
        endless.add(&fragment(5.0, 0..6, true, None), None).unwrap();
        endless.add(&fragment(5.0, 6..10, false, None), None).unwrap();
        assert_eq!((endless.num_episodes(), endless.len()), (1, 8));
        assert_eq!(endless.episode_obs(0).unwrap(), &[503.0, 504.0, 505.0, 506.0, 507.0, 508.0, 509.0, 510.0]);
        let e = &endless.episodes[0];
        assert_eq!((e.prev_actions[0], e.rewards[0]), (0.0, 0.0));
        assert_eq!(e.rewards[1..], [1.0; 7]);
        // It still grows at its end and is still drawn from.
        endless.add(&fragment(5.0, 10..11, false, None), None).unwrap();
        assert_eq!(endless.episode_obs(0).unwrap()[7], 511.0);
        assert!(endless.sample(8, 0, &mut rng).is_ok());
    }
}
