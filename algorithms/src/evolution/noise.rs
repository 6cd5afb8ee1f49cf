//! The noise table: one block of standard-normal noise per `(seed, size)`,
//! generated in every process, so a perturbation travels as an offset.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A block of standard-normal noise generated from a seed (Salimans et al.
/// 2017, §2.1): a perturbation is named by an offset into it, so workers
/// and driver exchange offsets instead of vectors.
pub struct NoiseTable {
    noise: Vec<f32>,
}

impl NoiseTable {
    /// Generates `size` standard-normal values from `seed`.
    pub fn new(seed: u64, size: usize) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self { noise: (0..size).map(|_| rng.sample::<f32, _>(rand_distr::StandardNormal)).collect() }
    }

    /// The table for `(seed, size)`, generated once per process and shared
    /// by every worker in it while any holds it.
    pub fn shared(seed: u64, size: usize) -> Arc<NoiseTable> {
        type Tables = Mutex<HashMap<(u64, usize), Weak<NoiseTable>>>;
        static TABLES: OnceLock<Tables> = OnceLock::new();
        let mut tables = TABLES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = tables.get(&(seed, size)).and_then(Weak::upgrade) {
            return table;
        }
        let table = Arc::new(NoiseTable::new(seed, size));
        tables.insert((seed, size), Arc::downgrade(&table));
        table
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.noise.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.noise.is_empty()
    }

    /// The `dim` values at `offset`.
    ///
    /// # Panics
    /// If the slice runs past the table (offsets come from
    /// [`random_offset`](Self::random_offset)).
    pub fn get(&self, offset: usize, dim: usize) -> &[f32] {
        &self.noise[offset..offset + dim]
    }

    /// A uniformly random offset of a `dim`-long slice.
    pub fn random_offset(&self, rng: &mut impl Rng, dim: usize) -> usize {
        rng.gen_range(0..=self.noise.len() - dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_noise_table_is_one_per_seed_and_reproducible() {
        let a = NoiseTable::shared(7, 1000);
        let b = NoiseTable::shared(7, 1000);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(NoiseTable::new(7, 1000).get(10, 5), a.get(10, 5));
        let mean = a.noise.iter().map(|&x| x as f64).sum::<f64>() / 1000.0;
        let var = a.noise.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / 1000.0;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.15, "mean {mean} var {var}");
    }
}
