//! Distributional Q-learning: C51 (Bellemare, Dabney & Munos, "A
//! Distributional Perspective on Reinforcement Learning", ICML 2017), as
//! Rainbow (Hessel et al., AAAI 2018) uses it.
//!
//! The network gives, for every action, a categorical distribution over
//! `num_atoms` fixed returns `z_i = v_min + i Δz`, `Δz = (v_max − v_min) /
//! (num_atoms − 1)`; `Q(s, a) = Σ_i p_i(s, a) z_i`. The target of a
//! transition is the distribution of `R + γ^k (1 − terminated) z` under the
//! target network's distribution at the next state's best action,
//! projected back onto the atoms ([`project`], the paper's Algorithm 1);
//! the loss is its cross-entropy with the predicted distribution of the
//! action taken. Prioritized replay takes that cross-entropy as the
//! priority (Rainbow's choice).

/// The fixed atoms `z_i`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Support {
    v_min: f32,
    v_max: f32,
    atoms: usize,
}

impl Support {
    /// `atoms ≥ 2` atoms evenly spaced from `v_min` to `v_max > v_min`
    /// (the config's checks guarantee both).
    pub fn new(v_min: f32, v_max: f32, atoms: usize) -> Self {
        debug_assert!(atoms >= 2 && v_max > v_min, "{atoms} atoms on [{v_min}, {v_max}]");
        Self { v_min, v_max, atoms }
    }

    /// The number of atoms.
    pub fn atoms(&self) -> usize {
        self.atoms
    }

    /// `Δz`, the spacing of the atoms.
    fn delta(&self) -> f32 {
        (self.v_max - self.v_min) / (self.atoms - 1) as f32
    }

    /// Atom `i`'s return `z_i`.
    pub fn z(&self, i: usize) -> f32 {
        self.v_min + i as f32 * self.delta()
    }

    /// The mean `Σ_i p_i z_i` of each distribution in `probs` (rows of
    /// `atoms` probabilities).
    pub fn means(&self, probs: &[f32]) -> Vec<f32> {
        probs.chunks_exact(self.atoms).map(|p| p.iter().enumerate().map(|(i, p)| p * self.z(i)).sum()).collect()
    }

    /// The distribution of `reward + discount · Z`, `Z ~ next`, projected
    /// onto the atoms: each shifted atom `clamp(reward + discount z_j,
    /// v_min, v_max)` splits its probability between its two neighbouring
    /// atoms in proportion to closeness. `discount` is `γ^k (1 −
    /// terminated)`, so a terminal transition puts all mass at `reward`.
    pub fn project(&self, next: &[f32], reward: f32, discount: f32) -> Vec<f32> {
        let mut m = vec![0.0; self.atoms];
        let last = (self.atoms - 1) as f32;
        for (j, &p) in next.iter().enumerate() {
            let tz = (reward + discount * self.z(j)).clamp(self.v_min, self.v_max);
            let b = ((tz - self.v_min) / self.delta()).clamp(0.0, last);
            let (l, u) = (b.floor(), b.ceil());
            if l == u {
                m[l as usize] += p;
            } else {
                m[l as usize] += p * (u - b);
                m[u as usize] += p * (b - l);
            }
        }
        m
    }
}

/// The cross-entropy `−Σ_i m_i log p_i` of each row's target `m` against
/// its predicted `p` (rows of `atoms`), floored at `p = 1e-8`.
pub fn cross_entropy(targets: &[f32], probs: &[f32], atoms: usize) -> Vec<f32> {
    targets
        .chunks_exact(atoms)
        .zip(probs.chunks_exact(atoms))
        .map(|(m, p)| -m.iter().zip(p).map(|(m, p)| m * p.max(1e-8).ln()).sum::<f32>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::distributions::softmax_rows;

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    /// Atoms {0, 5, 10}, next-state probabilities [0.2, 0.5, 0.3], reward
    /// 1, discount 0.5: the shifted atoms 1, 3.5 and 6 sit at 0.2, 0.7 and
    /// 1.2 atom spacings, so they split as 0.2 → (0.16, 0.04), 0.5 →
    /// (0.15, 0.35), 0.3 → (0.24, 0.06).
    #[test]
    fn projection_matches_the_worked_example() {
        let s = Support::new(0.0, 10.0, 3);
        let m = s.project(&[0.2, 0.5, 0.3], 1.0, 0.5);
        assert!(close(&m, &[0.31, 0.63, 0.06]), "{m:?}");
        // Inside the support the projection keeps the mean: 1 + 0.5 · 5.5.
        assert!((s.means(&m)[0] - 3.75).abs() < 1e-5);
        // Terminal transitions put everything at the (clamped) reward.
        assert!(close(&s.project(&[0.2, 0.5, 0.3], 12.0, 0.0), &[0.0, 0.0, 1.0]));
        assert!(close(&s.project(&[0.2, 0.5, 0.3], -3.0, 0.0), &[1.0, 0.0, 0.0]));
        assert!(close(&s.project(&[0.2, 0.5, 0.3], 7.5, 0.0), &[0.0, 0.5, 0.5]));
        // An atom landing exactly on another gives it all its mass.
        assert!(close(&s.project(&[0.0, 1.0, 0.0], 0.0, 1.0), &[0.0, 1.0, 0.0]));
    }

    #[test]
    fn projection_keeps_total_probability_on_rllibs_default_support() {
        let s = Support::new(-10.0, 10.0, 51);
        let next: Vec<f32> = (0..51).map(|i| (i * 7 % 13) as f32 + 1.0).collect();
        let total: f32 = next.iter().sum();
        let next: Vec<f32> = next.iter().map(|p| p / total).collect();
        for (r, d) in [(0.3, 0.99), (-4.0, 0.97), (25.0, 0.99), (0.0, 0.0)] {
            let m = s.project(&next, r, d);
            assert!((m.iter().sum::<f32>() - 1.0).abs() < 1e-5, "r {r} d {d}");
            assert!(m.iter().all(|&p| p >= 0.0));
        }
    }

    #[test]
    fn softmax_and_cross_entropy_by_hand() {
        let p = softmax_rows(&[0.0, (2.0f32).ln(), 5.0, 5.0], 2);
        assert!(close(&p, &[1.0 / 3.0, 2.0 / 3.0, 0.5, 0.5]), "{p:?}");
        let ce = cross_entropy(&[0.0, 1.0, 1.0, 0.0], &p, 2);
        assert!(close(&ce, &[-(2.0f32 / 3.0).ln(), (2.0f32).ln()]), "{ce:?}");
    }
}
