//! # Monte Carlo tree search with a prior (PUCT)
//!
//! The search of Silver et al., "Mastering the game of Go without human
//! knowledge" (Nature 2017) and "A general reinforcement learning
//! algorithm that masters chess, shogi, and Go through self-play"
//! (Science 2018). Each simulation walks from the root, at every node
//! taking the move that maximizes
//!
//! ```text
//! Q(s,a) + c_puct · P(s,a) · √N(s) / (1 + N(s,a))
//! ```
//!
//! (`Q` the mean value of the move for the player making it, 0 before its
//! first visit; `P` the prior; `N` visit counts), until it reaches a
//! position not yet expanded. A [`LeafEvaluator`] gives that position's
//! prior over the legal moves and its value for the player to move (a
//! network, or random play-outs); the leaf is expanded with the prior and
//! the value is backed up the path, negated for the other player.
//!
//! - **Batched leaves, virtual loss.** [`search`] runs many trees (an
//!   evaluator's games) at once. In each round every tree selects up to
//!   `leaf_batch` leaves; each selection marks its path *in flight*, and
//!   an in-flight visit counts as a loss for the mover, so the next
//!   selection in the same tree takes another path. All the round's
//!   leaves, across the trees, go to the evaluator in one call.
//! - **Dirichlet noise** at the root: `P ← (1−ε)·P + ε·Dir(α)` when the
//!   root is expanded or becomes the root, in self-play only.
//! - **Tree reuse.** [`Tree::play`] keeps the chosen move's subtree (its
//!   statistics included) as the new root.
//! - **Temperature.** [`Tree::choose`] samples a move in proportion to
//!   `N(s,a)^(1/τ)`, or takes the most visited at `τ = 0`.
//!
//! Games are two-player and zero-sum: one player's value is the other's
//! negated.

use rand::Rng;
use rand_distr::{Distribution, Gamma};
use rlx::game::{Game, GameError};
use rlx::{PolicyError, PolicyGraph};
use std::cmp::Ordering;

/// How a search runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchSettings {
    /// Simulations per move.
    pub num_simulations: usize,
    /// `c_puct`: how much the prior and the visit counts steer exploration.
    pub c_puct: f32,
    /// α of the root's Dirichlet noise.
    pub dirichlet_alpha: f32,
    /// ε, the noise's share of the root's prior (0: no noise).
    pub dirichlet_fraction: f32,
    /// Leaves each tree selects, with virtual loss, per evaluator call.
    pub leaf_batch: usize,
}

impl SearchSettings {
    /// No root noise: for play rather than self-play.
    pub fn without_noise(self) -> Self {
        Self { dirichlet_fraction: 0.0, ..self }
    }
}

/// A leaf evaluator's answer for one position.
#[derive(Clone, Debug, PartialEq)]
pub struct LeafValue {
    /// A prior over all moves (the search keeps the legal ones and
    /// renormalizes them).
    pub priors: Vec<f32>,
    /// The position's value for the player to move, in [−1, 1].
    pub value: f32,
}

/// What gives the search its priors and values: a network, or random
/// play-outs ([`RandomRollouts`]).
pub trait LeafEvaluator {
    /// One answer per position, in order. No position is terminal.
    ///
    /// # Errors
    /// Whatever the evaluator meets (a network's error).
    fn evaluate(&mut self, positions: &[&dyn Game]) -> Result<Vec<LeafValue>, PolicyError>;
}

/// Pure MCTS's evaluator: a uniform prior, and as the value the mean
/// outcome of `rollouts` games played on with uniformly random moves.
pub struct RandomRollouts<R> {
    /// Play-outs per leaf.
    pub rollouts: usize,
    /// Their moves' randomness.
    pub rng: R,
}

impl<R: Rng> LeafEvaluator for RandomRollouts<R> {
    fn evaluate(&mut self, positions: &[&dyn Game]) -> Result<Vec<LeafValue>, PolicyError> {
        let mut out = Vec::with_capacity(positions.len());
        for position in positions {
            let player = position.to_move();
            let mut total = 0.0;
            for _ in 0..self.rollouts {
                let mut game = position.boxed_clone();
                let value = loop {
                    if let Some(v) = game.terminal_value(player) {
                        break v;
                    }
                    let legal = game.legal_actions();
                    let a = legal[self.rng.gen_range(0..legal.len())];
                    game.play(a).map_err(|e| PolicyError::Other(e.to_string()))?;
                };
                total += value;
            }
            let n = position.num_actions();
            out.push(LeafValue { priors: vec![1.0 / n as f32; n], value: total / self.rollouts.max(1) as f32 });
        }
        Ok(out)
    }
}

/// A node: the move that led to it and the statistics of that move.
#[derive(Clone, Debug)]
struct Node {
    /// The move from the parent.
    action: u32,
    /// The player who made it (the parent's player to move).
    mover: u8,
    prior: f32,
    /// Finished simulations through this node.
    visits: u32,
    /// The sum of their values for `mover`.
    value_sum: f32,
    /// Simulations through this node waiting for their leaf's value.
    in_flight: u32,
    /// Children are `nodes[first..first + count]`; none before expansion.
    first: u32,
    count: u32,
    /// Selected as a leaf, waiting for its value.
    pending: bool,
    /// At the end of the game: the value for `mover`.
    terminal: Option<f32>,
}

impl Node {
    fn new(action: u32, mover: u8, prior: f32) -> Self {
        Self {
            action,
            mover,
            prior,
            visits: 0,
            value_sum: 0.0,
            in_flight: 0,
            first: 0,
            count: 0,
            pending: false,
            terminal: None,
        }
    }

    fn children(&self) -> std::ops::Range<usize> {
        self.first as usize..(self.first + self.count) as usize
    }
}

/// The value `value` of `player` as `other` sees it (zero-sum, two players).
pub(crate) fn value_for(player: usize, value: f32, other: usize) -> f32 {
    if other == player {
        value
    } else {
        -value
    }
}

/// A leaf [`Tree::select`] chose, waiting for its value.
pub struct PendingLeaf {
    path: Vec<u32>,
    state: Box<dyn Game>,
}

impl PendingLeaf {
    /// The leaf's position.
    pub fn position(&self) -> &dyn Game {
        self.state.as_ref()
    }
}

/// What one selection found.
pub enum Selection {
    /// A position to evaluate.
    Leaf(PendingLeaf),
    /// The end of the game: its value is backed up already.
    Terminal,
    /// A leaf another selection of this round waits on: nothing to do.
    Collision,
}

/// A search tree over the position at its root.
pub struct Tree {
    nodes: Vec<Node>,
    state: Box<dyn Game>,
    settings: SearchSettings,
    /// Root visits when the current move's search began.
    visits_at_start: u32,
}

impl Tree {
    /// A tree of one unexpanded root at `state`.
    pub fn new(state: Box<dyn Game>, settings: SearchSettings) -> Self {
        let mover = state.to_move() as u8;
        Self { nodes: vec![Node::new(0, mover, 1.0)], state, settings, visits_at_start: 0 }
    }

    /// The position at the root.
    pub fn position(&self) -> &dyn Game {
        self.state.as_ref()
    }

    /// Whether this move's search has run its simulations.
    pub fn searched(&self) -> bool {
        let root = &self.nodes[0];
        (root.visits - self.visits_at_start) as usize >= self.settings.num_simulations
    }

    /// The root's visit count per move (0 for illegal moves).
    pub fn visit_counts(&self) -> Vec<u32> {
        let mut counts = vec![0; self.state.num_actions()];
        for child in &self.nodes[self.nodes[0].children()] {
            counts[child.action as usize] = child.visits;
        }
        counts
    }

    /// The search's policy: visit counts normalized.
    pub fn policy(&self) -> Vec<f32> {
        let counts = self.visit_counts();
        let total: u32 = counts.iter().sum();
        counts.iter().map(|&n| n as f32 / total.max(1) as f32).collect()
    }

    /// The mean value of the root's position for the player to move.
    pub fn root_value(&self) -> f32 {
        let root = &self.nodes[0];
        let children = &self.nodes[root.children()];
        let visits: u32 = children.iter().map(|c| c.visits).sum();
        children.iter().map(|c| c.value_sum).sum::<f32>() / visits.max(1) as f32
    }

    /// A move by the visit counts at temperature `tau`: in proportion to
    /// `N^(1/τ)`, or the most visited at `τ = 0`. Equal counts (none at
    /// all after a single simulation) go to the higher prior, then to the
    /// first move.
    ///
    /// # Panics
    /// If the root has no legal move (the game is over).
    pub fn choose(&self, tau: f32, rng: &mut impl Rng) -> usize {
        let counts = self.visit_counts();
        if tau <= 0.0 || counts.iter().all(|&n| n == 0) {
            let mut priors = vec![0.0f32; counts.len()];
            for child in &self.nodes[self.nodes[0].children()] {
                priors[child.action as usize] = child.prior;
            }
            let best = (0..counts.len()).filter(|&a| self.state.is_legal(a)).max_by(|&a, &b| {
                (counts[a], priors[a]).partial_cmp(&(counts[b], priors[b])).unwrap_or(Ordering::Equal).then(b.cmp(&a))
            });
            return best.expect("a position that is not terminal has a legal move");
        }
        let weights: Vec<f64> = counts.iter().map(|&n| f64::from(n).powf(1.0 / f64::from(tau))).collect();
        let mut x = rng.gen::<f64>() * weights.iter().sum::<f64>();
        for (a, w) in weights.iter().enumerate() {
            if *w > 0.0 && x < *w {
                return a;
            }
            x -= w;
        }
        weights.iter().rposition(|&w| w > 0.0).expect("some move was visited")
    }

    /// Plays `action` at the root and keeps its subtree as the new tree,
    /// with fresh root noise if the new root is expanded.
    ///
    /// # Errors
    /// An illegal move.
    pub fn play(&mut self, action: usize, rng: &mut impl Rng) -> Result<(), GameError> {
        self.state.play(action)?;
        let child = self.nodes[self.nodes[0].children()].iter().position(|c| c.action as usize == action);
        self.nodes = match child {
            Some(i) => self.subtree(self.nodes[0].first as usize + i),
            None => vec![Node::new(action as u32, 0, 1.0)],
        };
        self.visits_at_start = self.nodes[0].visits;
        if self.nodes[0].count > 0 {
            self.add_root_noise(rng);
        }
        Ok(())
    }

    /// The subtree under `top`, copied to a fresh arena (children stay
    /// contiguous).
    fn subtree(&self, top: usize) -> Vec<Node> {
        let mut out = vec![self.nodes[top].clone()];
        let mut i = 0;
        while i < out.len() {
            let range = out[i].children();
            if !range.is_empty() {
                out[i].first = out.len() as u32;
                out.extend_from_slice(&self.nodes[range]);
            }
            i += 1;
        }
        out
    }

    /// Walks from the root to a leaf, marking the path in flight.
    pub fn select(&mut self) -> Selection {
        let mut state = self.state.boxed_clone();
        let mut path = vec![0u32];
        let mut node = 0usize;
        loop {
            let n = &self.nodes[node];
            if let Some(v) = n.terminal {
                let mover = n.mover as usize;
                self.backup(&path, mover, v, false);
                return Selection::Terminal;
            }
            if n.count == 0 {
                break;
            }
            node = self.best_child(node);
            path.push(node as u32);
            state.play(self.nodes[node].action as usize).expect("the tree holds legal moves only");
        }
        if self.nodes[node].pending {
            return Selection::Collision;
        }
        if let Some(v) = state.terminal_value(self.nodes[node].mover as usize) {
            self.nodes[node].terminal = Some(v);
            let mover = self.nodes[node].mover as usize;
            self.backup(&path, mover, v, false);
            return Selection::Terminal;
        }
        self.nodes[node].pending = true;
        for &i in &path {
            self.nodes[i as usize].in_flight += 1;
        }
        Selection::Leaf(PendingLeaf { path, state })
    }

    /// The child of `node` with the highest PUCT score (the first of equals).
    fn best_child(&self, node: usize) -> usize {
        let parent = &self.nodes[node];
        let sqrt_n = ((parent.visits + parent.in_flight).max(1) as f32).sqrt();
        let c = self.settings.c_puct;
        let mut best = (f32::NEG_INFINITY, parent.first as usize);
        for i in parent.children() {
            let child = &self.nodes[i];
            let n = child.visits + child.in_flight;
            // Each visit in flight counts as a loss for the mover.
            let q = if n == 0 { 0.0 } else { (child.value_sum - child.in_flight as f32) / n as f32 };
            let score = q + c * child.prior * sqrt_n / (1 + n) as f32;
            if score > best.0 {
                best = (score, i);
            }
        }
        best.1
    }

    /// Expands `leaf` with `value`'s prior over its legal moves and backs
    /// its value up the path.
    pub fn expand(&mut self, leaf: PendingLeaf, value: &LeafValue, rng: &mut impl Rng) {
        let node = *leaf.path.last().expect("a path holds the root") as usize;
        let legal = leaf.state.legal_actions();
        let mover = leaf.state.to_move() as u8;
        let total: f32 = legal.iter().map(|&a| value.priors[a].max(0.0)).sum();
        let first = self.nodes.len() as u32;
        for &a in &legal {
            let p = if total > 0.0 { value.priors[a].max(0.0) / total } else { 1.0 / legal.len() as f32 };
            self.nodes.push(Node::new(a as u32, mover, p));
        }
        let n = &mut self.nodes[node];
        (n.first, n.count, n.pending) = (first, legal.len() as u32, false);
        if node == 0 {
            self.add_root_noise(rng);
        }
        self.backup(&leaf.path, mover as usize, value.value.clamp(-1.0, 1.0), true);
    }

    /// Adds `value` (for `player`) to every node of `path`, as its mover
    /// sees it, and takes the path out of flight if it was in.
    fn backup(&mut self, path: &[u32], player: usize, value: f32, in_flight: bool) {
        for &i in path {
            let n = &mut self.nodes[i as usize];
            n.visits += 1;
            n.value_sum += value_for(player, value, n.mover as usize);
            if in_flight {
                n.in_flight -= 1;
            }
        }
    }

    fn add_root_noise(&mut self, rng: &mut impl Rng) {
        let (alpha, eps) = (self.settings.dirichlet_alpha, self.settings.dirichlet_fraction);
        if eps <= 0.0 {
            return;
        }
        let range = self.nodes[0].children();
        let gamma = Gamma::new(alpha, 1.0).expect("alpha > 0 is checked with the config");
        let noise: Vec<f32> = range.clone().map(|_| gamma.sample(rng)).collect();
        let sum: f32 = noise.iter().sum::<f32>().max(f32::MIN_POSITIVE);
        for (i, eta) in range.zip(noise) {
            let p = &mut self.nodes[i].prior;
            *p = (1.0 - eps) * *p + eps * eta / sum;
        }
    }
}

/// Runs this move's search on every tree not yet [`searched`](Tree::searched):
/// rounds in which each selects up to `leaf_batch` leaves, then one call of
/// `evaluator` for all of them. Returns the number of evaluator calls.
///
/// # Errors
/// The evaluator's.
pub fn search(
    trees: &mut [&mut Tree],
    evaluator: &mut dyn LeafEvaluator,
    rng: &mut impl Rng,
) -> Result<usize, PolicyError> {
    let mut calls = 0;
    loop {
        let mut leaves: Vec<(usize, PendingLeaf)> = Vec::new();
        for (t, tree) in trees.iter_mut().enumerate() {
            let mut selected = 0;
            let wanted = tree.settings.leaf_batch.max(1);
            while selected < wanted && !tree.searched() {
                let in_flight = tree.nodes[0].in_flight as usize;
                if (tree.nodes[0].visits - tree.visits_at_start) as usize + in_flight >= tree.settings.num_simulations {
                    break;
                }
                match tree.select() {
                    Selection::Leaf(leaf) => {
                        leaves.push((t, leaf));
                        selected += 1;
                    }
                    Selection::Terminal => selected += 1,
                    Selection::Collision => break,
                }
            }
        }
        if leaves.is_empty() {
            if trees.iter().all(|t| t.searched()) {
                return Ok(calls);
            }
            continue;
        }
        let positions: Vec<&dyn Game> = leaves.iter().map(|(_, l)| l.position()).collect();
        let values = evaluator.evaluate(&positions)?;
        calls += 1;
        if values.len() != leaves.len() {
            return Err(PolicyError::WrongLength { what: "leaf values", expected: leaves.len(), got: values.len() });
        }
        for ((t, leaf), value) in leaves.into_iter().zip(&values) {
            trees[t].expand(leaf, value, rng);
        }
    }
}

/// A network as the leaf evaluator ([`PolicyGraph::policy_and_value`]):
/// each position observed from the side of the player to move, all of
/// them in one forward pass.
pub struct NetworkPrior<'a> {
    policy: &'a mut dyn PolicyGraph,
    obs: Vec<f32>,
}

impl<'a> NetworkPrior<'a> {
    /// Evaluates with `policy`.
    pub fn new(policy: &'a mut dyn PolicyGraph) -> Self {
        Self { policy, obs: Vec::new() }
    }
}

impl LeafEvaluator for NetworkPrior<'_> {
    fn evaluate(&mut self, positions: &[&dyn Game]) -> Result<Vec<LeafValue>, PolicyError> {
        let Some(first) = positions.first() else { return Ok(Vec::new()) };
        let (width, n) = (first.observation_space().flat_dim(), first.num_actions());
        self.obs.clear();
        self.obs.resize(width * positions.len(), 0.0);
        for (position, row) in positions.iter().zip(self.obs.chunks_exact_mut(width)) {
            position.observe(position.to_move(), row);
        }
        let (probs, values) = self.policy.policy_and_value(&self.obs)?;
        if probs.len() != n * positions.len() || values.len() != positions.len() {
            return Err(PolicyError::WrongLength {
                what: "the network's policy and value rows",
                expected: positions.len(),
                got: values.len(),
            });
        }
        Ok(probs.chunks_exact(n).zip(values).map(|(p, value)| LeafValue { priors: p.to_vec(), value }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rlx_envs::{ConnectFour, TicTacToe};

    /// A TicTacToe position from a board of `X`, `O` and `.` (X moves first).
    fn board(cells: &str) -> Box<dyn Game> {
        let (xs, os): (Vec<usize>, Vec<usize>) = (
            cells.chars().enumerate().filter(|(_, c)| *c == 'X').map(|(i, _)| i).collect(),
            cells.chars().enumerate().filter(|(_, c)| *c == 'O').map(|(i, _)| i).collect(),
        );
        let mut game = TicTacToe::new();
        for k in 0..xs.len().max(os.len()) {
            for side in [&xs, &os] {
                if let Some(&c) = side.get(k) {
                    game.play(c).unwrap();
                }
            }
        }
        Box::new(game)
    }

    fn pure(num_simulations: usize, leaf_batch: usize, actions: usize) -> SearchSettings {
        SearchSettings {
            num_simulations,
            c_puct: actions as f32,
            dirichlet_alpha: 1.0,
            dirichlet_fraction: 0.0,
            leaf_batch,
        }
    }

    fn searched(position: Box<dyn Game>, settings: SearchSettings, seed: u64) -> Tree {
        let mut tree = Tree::new(position, settings);
        let mut rollouts = RandomRollouts { rollouts: 1, rng: ChaCha8Rng::seed_from_u64(seed) };
        search(&mut [&mut tree], &mut rollouts, &mut ChaCha8Rng::seed_from_u64(seed + 1)).unwrap();
        tree
    }

    #[test]
    fn finds_a_win_in_one_and_a_forced_win_in_two() {
        for leaf_batch in [1, 8] {
            // X takes 2 and wins (O threatens 5).
            let win_in_one = searched(board("XX.OO...."), pure(400, leaf_batch, 9), 1);
            assert_eq!(win_in_one.choose(0.0, &mut ChaCha8Rng::seed_from_u64(0)), 2, "{:?}", win_in_one.visit_counts());
            // X at 4 threatens both 7 and 8; 4 is the only move that wins.
            let win_in_two = searched(board("XXOO....."), pure(3000, leaf_batch, 9), 2);
            assert_eq!(win_in_two.choose(0.0, &mut ChaCha8Rng::seed_from_u64(0)), 4, "{:?}", win_in_two.visit_counts());
            assert!(win_in_two.root_value() > 0.5, "{}", win_in_two.root_value());
        }
    }

    /// Priors that favour one move; every position is worth 0.
    struct Favours(usize);

    impl LeafEvaluator for Favours {
        fn evaluate(&mut self, positions: &[&dyn Game]) -> Result<Vec<LeafValue>, PolicyError> {
            let leaf = |n: usize| LeafValue {
                priors: (0..n).map(|a| if a == self.0 { 0.5 } else { 0.05 }).collect(),
                value: 0.0,
            };
            Ok(positions.iter().map(|p| leaf(p.num_actions())).collect())
        }
    }

    #[test]
    fn a_single_simulation_plays_the_highest_prior() {
        let mut tree = Tree::new(board("........."), pure(1, 1, 9));
        search(&mut [&mut tree], &mut Favours(6), &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
        assert_eq!(tree.visit_counts(), vec![0; 9]);
        assert_eq!(tree.choose(0.0, &mut ChaCha8Rng::seed_from_u64(0)), 6);
        assert_eq!(tree.choose(1.0, &mut ChaCha8Rng::seed_from_u64(0)), 6);
    }

    #[test]
    fn a_connect_four_threat_is_blocked() {
        // x has three in the bottom row (0, 1, 2); o must take 3.
        let mut game = ConnectFour::new();
        for m in [0, 0, 1, 1, 2] {
            game.play(m).unwrap();
        }
        let tree = searched(Box::new(game), pure(2000, 4, 7), 3);
        assert_eq!(tree.choose(0.0, &mut ChaCha8Rng::seed_from_u64(0)), 3, "{:?}", tree.visit_counts());
    }

    /// Plain MCTS, written the obvious way (recursion, a node per move),
    /// with the same selection rule, to check the arena tree against.
    struct RefNode {
        mover: usize,
        prior: f32,
        visits: u32,
        value_sum: f32,
        children: Vec<(usize, RefNode)>,
    }

    impl RefNode {
        fn new(mover: usize, prior: f32) -> Self {
            Self { mover, prior, visits: 0, value_sum: 0.0, children: Vec::new() }
        }

        /// One simulation from this node at `state`: the leaf's (player, value).
        fn simulate(&mut self, state: &mut dyn Game, eval: &mut dyn LeafEvaluator, c: f32) -> (usize, f32) {
            let (player, value) = if let Some(v) = state.terminal_value(self.mover) {
                (self.mover, v)
            } else if self.children.is_empty() {
                let leaf = eval.evaluate(&[&*state]).unwrap().remove(0);
                let legal = state.legal_actions();
                let total: f32 = legal.iter().map(|&a| leaf.priors[a]).sum();
                let to_move = state.to_move();
                self.children = legal.iter().map(|&a| (a, RefNode::new(to_move, leaf.priors[a] / total))).collect();
                (to_move, leaf.value)
            } else {
                let sqrt_n = (self.visits.max(1) as f32).sqrt();
                let score = |n: &RefNode| {
                    let q = if n.visits == 0 { 0.0 } else { n.value_sum / n.visits as f32 };
                    q + c * n.prior * sqrt_n / (1 + n.visits) as f32
                };
                let mut best = 0;
                for i in 1..self.children.len() {
                    if score(&self.children[i].1) > score(&self.children[best].1) {
                        best = i;
                    }
                }
                let (action, child) = &mut self.children[best];
                state.play(*action).unwrap();
                child.simulate(state, eval, c)
            };
            self.visits += 1;
            self.value_sum += value_for(player, value, self.mover);
            (player, value)
        }
    }

    #[test]
    fn visit_counts_match_a_plain_mcts_and_stay_close_with_batched_leaves() {
        for (cells, sims) in [(".........", 500), ("X...O....", 800), ("XXOO.....", 800)] {
            let start = board(cells);
            let mut reference = RefNode::new(1 - start.to_move(), 1.0);
            let mut rollouts = RandomRollouts { rollouts: 1, rng: ChaCha8Rng::seed_from_u64(5) };
            for _ in 0..sims {
                reference.simulate(start.boxed_clone().as_mut(), &mut rollouts, 9.0);
            }
            let mut expected = vec![0; 9];
            for (a, child) in &reference.children {
                expected[*a] = child.visits;
            }
            let tree = searched(board(cells), pure(sims, 1, 9), 5);
            assert_eq!(tree.visit_counts(), expected, "{cells}: one leaf at a time is plain MCTS");

            // With 8 leaves a call, the visits spread a little more.
            let batched = searched(board(cells), pure(sims, 8, 9), 5).policy();
            let plain = tree.policy();
            let distance: f32 = plain.iter().zip(&batched).map(|(a, b)| (a - b).abs()).sum::<f32>() / 2.0;
            assert!(distance < 0.2, "{cells}: total variation {distance}: {plain:?} vs {batched:?}");
        }
    }

    #[test]
    fn the_chosen_subtree_is_kept_and_noise_only_touches_the_root() {
        let settings = SearchSettings { dirichlet_fraction: 0.25, ..pure(300, 4, 9) };
        let mut tree = searched(board("........."), settings, 9);
        let counts = tree.visit_counts();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let action = tree.choose(0.0, &mut rng);
        let kept = counts[action];
        tree.play(action, &mut rng).unwrap();
        assert_eq!(tree.nodes[0].visits, kept, "the new root keeps its visits");
        assert_eq!(tree.visit_counts().iter().sum::<u32>() + 1, kept, "its children hold all but its own expansion");
        let priors: f32 = tree.nodes[tree.nodes[0].children()].iter().map(|c| c.prior).sum();
        assert!((priors - 1.0).abs() < 1e-4, "noisy priors still sum to 1: {priors}");
        // The next search adds its own simulations.
        let mut rollouts = RandomRollouts { rollouts: 1, rng: ChaCha8Rng::seed_from_u64(1) };
        search(&mut [&mut tree], &mut rollouts, &mut rng).unwrap();
        assert_eq!(tree.nodes[0].visits, kept + 300);
    }

    #[test]
    fn temperature_draws_in_proportion_to_visits() {
        let tree = searched(board("........."), pure(200, 1, 9), 4);
        let counts = tree.visit_counts();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut drawn = [0u32; 9];
        for _ in 0..20_000 {
            drawn[tree.choose(1.0, &mut rng)] += 1;
        }
        for a in 0..9 {
            let expected = counts[a] as f64 / 200.0;
            let got = f64::from(drawn[a]) / 20_000.0;
            assert!((expected - got).abs() < 0.02, "move {a}: {got} vs {expected}");
        }
    }
}
