//! [`SumTree`]: the segment tree behind proportional prioritized replay
//! (Schaul et al. 2016, appendix B.2.1): O(log n) priority updates, O(log n)
//! sampling of an index with probability `p_i / Σp`, and the smallest
//! positive priority (for the importance weights' normalization).

/// Priorities of `len` slots, with prefix-sum search.
#[derive(Clone, Debug)]
pub struct SumTree {
    len: usize,
    /// Leaves start here (a power of two ≥ `len`).
    leaves: usize,
    /// `sums[i]` = sum of node `i`'s leaves; root at 1.
    sums: Vec<f64>,
    /// `mins[i]` = smallest positive priority under node `i` (∞ if none).
    mins: Vec<f64>,
}

impl SumTree {
    /// Bytes its two trees take on the heap.
    pub fn heap_bytes(&self) -> usize {
        (self.sums.capacity() + self.mins.capacity()) * 8
    }

    /// A tree of `len` slots, all with priority 0.
    pub fn new(len: usize) -> Self {
        let leaves = len.max(1).next_power_of_two();
        Self { len, leaves, sums: vec![0.0; 2 * leaves], mins: vec![f64::INFINITY; 2 * leaves] }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree has no slots.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets slot `i`'s priority (finite, ≥ 0: the caller checks).
    ///
    /// # Panics
    /// If `i` is out of range or `p` is negative or not finite.
    pub fn set(&mut self, i: usize, p: f64) {
        assert!(i < self.len, "slot {i} of a tree of {}", self.len);
        assert!(p >= 0.0 && p.is_finite(), "priority {p}");
        let mut node = self.leaves + i;
        self.sums[node] = p;
        self.mins[node] = if p > 0.0 { p } else { f64::INFINITY };
        while node > 1 {
            node /= 2;
            self.sums[node] = self.sums[2 * node] + self.sums[2 * node + 1];
            self.mins[node] = self.mins[2 * node].min(self.mins[2 * node + 1]);
        }
    }

    /// Slot `i`'s priority.
    ///
    /// # Panics
    /// If `i` is out of range.
    pub fn get(&self, i: usize) -> f64 {
        assert!(i < self.len, "slot {i} of a tree of {}", self.len);
        self.sums[self.leaves + i]
    }

    /// Sum of all priorities.
    pub fn total(&self) -> f64 {
        self.sums[1]
    }

    /// The smallest positive priority, if any slot has one.
    pub fn min_positive(&self) -> Option<f64> {
        Some(self.mins[1]).filter(|m| m.is_finite())
    }

    /// The slot where the running sum of priorities first exceeds `mass`,
    /// for `mass` in `[0, total)`: drawn with `mass` uniform, slot `i` comes
    /// out with probability `p_i / total`. Slots with priority 0 never do.
    /// `None` if every priority is 0.
    pub fn find(&self, mut mass: f64) -> Option<usize> {
        if self.total() <= 0.0 {
            return None;
        }
        let mut node = 1;
        while node < self.leaves {
            let left = 2 * node;
            if mass < self.sums[left] {
                node = left;
            } else {
                mass -= self.sums[left];
                node = left + 1;
            }
        }
        let mut i = node - self.leaves;
        // Rounding can carry a mass at the very top past the last positive
        // slot; the right answer is then the last positive slot before it.
        while i >= self.len || self.sums[self.leaves + i] == 0.0 {
            i = i.checked_sub(1)?;
        }
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The slot a linear scan over the prefix sums picks.
    fn brute_find(p: &[f64], mass: f64) -> usize {
        let mut acc = 0.0;
        for (i, &x) in p.iter().enumerate() {
            acc += x;
            if mass < acc {
                return i;
            }
        }
        p.iter().rposition(|&x| x > 0.0).unwrap()
    }

    fn tree_of(p: &[f64]) -> SumTree {
        let mut t = SumTree::new(p.len());
        p.iter().enumerate().for_each(|(i, &x)| t.set(i, x));
        t
    }

    #[test]
    fn find_matches_a_linear_scan() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for len in [1, 2, 3, 7, 8, 100, 1000] {
            // Some zero priorities, spread over the range.
            let p: Vec<f64> = (0..len).map(|i| if i % 5 == 3 { 0.0 } else { rng.gen_range(0.0..10.0) }).collect();
            let t = tree_of(&p);
            let total: f64 = p.iter().sum();
            assert!((t.total() - total).abs() < 1e-9 * total.max(1.0));
            for _ in 0..500 {
                let mass = rng.gen::<f64>() * total;
                let i = t.find(mass).unwrap();
                assert_eq!(i, brute_find(&p, mass), "len {len} mass {mass}");
                assert!(p[i] > 0.0);
            }
            let min = p.iter().copied().filter(|&x| x > 0.0).fold(f64::INFINITY, f64::min);
            assert_eq!(t.min_positive(), Some(min).filter(|m| m.is_finite()));
        }
    }

    #[test]
    fn sampling_frequencies_follow_priorities_after_updates() {
        let mut p = vec![1.0, 0.0, 3.0, 6.0, 0.5, 0.0, 2.0];
        let mut t = tree_of(&p);
        // Updates: raise one, zero another, revive a zero.
        for (i, x) in [(0, 4.0), (3, 0.0), (5, 1.5)] {
            t.set(i, x);
            p[i] = x;
        }
        let total: f64 = p.iter().sum();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws = 200_000;
        let mut counts = vec![0usize; p.len()];
        for _ in 0..draws {
            counts[t.find(rng.gen::<f64>() * t.total()).unwrap()] += 1;
        }
        for (i, (&c, &x)) in counts.iter().zip(&p).enumerate() {
            let expected = x / total;
            let sd = (expected * (1.0 - expected) / draws as f64).sqrt();
            let got = c as f64 / draws as f64;
            assert!((got - expected).abs() <= 5.0 * sd + 1e-12, "slot {i}: {got} vs {expected}");
            if x == 0.0 {
                assert_eq!(c, 0, "slot {i} has priority 0 but was drawn");
            }
        }
    }

    #[test]
    fn edge_cases() {
        let mut t = SumTree::new(3);
        assert_eq!(t.find(0.0), None, "all zero");
        assert_eq!(t.min_positive(), None);
        t.set(2, 1.0);
        // Masses at and past the total land on the last positive slot.
        assert_eq!(t.find(0.0), Some(2));
        assert_eq!(t.find(1.0), Some(2));
        assert_eq!(t.find(5.0), Some(2));
        t.set(2, 0.0);
        assert_eq!(t.total(), 0.0);
        assert_eq!(t.find(0.0), None);
        let t = SumTree::new(0);
        assert!(t.is_empty() && t.find(0.0).is_none());
    }
}
