//! Frame sharing: image observations in replay as bytes, each distinct
//! image plane stored once.
//!
//! An Atari transition holds two stacks of four 84 × 84 frames, `obs` and
//! `new_obs`, and consecutive transitions share all but one frame. Stored
//! as `f32` columns that is 226 KB a transition; a buffer of the usual
//! 1M transitions would need 226 GB. Dopamine and the DQN Zoo store each
//! frame once, as bytes, in the order the env produced them, and rebuild
//! stacks by index arithmetic when sampling. rlx's replay receives rows
//! from many env copies, already cut into n-step transitions, so it finds
//! shared frames by content instead: every observation of a
//! [`FrameLayout`] is split into its channel planes (one frame each in a
//! channels-last stack), each plane is converted to bytes and interned in
//! a [`FrameStore`] under its hash (equal bytes, one copy, counted
//! references), and a slot keeps only its planes' ids. A stack's newest
//! frame is new; the others, and every plane of `new_obs`, are found
//! already stored. Rows arrive as bytes ([`Column::U8`](crate::Column::U8))
//! and leave as bytes. That makes a stored Atari transition one frame (7,056
//! bytes) plus ids and the other columns, whatever the stacking, the
//! number of env copies, n-step or priorities, and the rebuilt rows are the
//! stored ones exactly.

use super::ReplayError;
use crate::sample_batch::Values;
use crate::space::{to_bytes, Dtype, Space};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The shape of the image observations a buffer shares frames of: a
/// `height × width × channels` box of bytes, channels last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    /// Rows of a plane.
    pub height: usize,
    /// Columns of a plane.
    pub width: usize,
    /// Planes per observation (the frame stack, or an image's channels).
    pub channels: usize,
}

impl FrameLayout {
    /// The layout of a rank-3 `Box` of [`Dtype::U8`] (an image from the
    /// Gymnasium bridge, MinAtar's grids); `None` for any other space,
    /// whose observations are stored as rows as they come.
    pub fn of(space: &Space) -> Option<Self> {
        match space {
            Space::Box { shape, dtype: Dtype::U8, .. } if shape.len() == 3 && shape.iter().all(|&d| d > 0) => {
                Some(Self { height: shape[0], width: shape[1], channels: shape[2] })
            }
            _ => None,
        }
    }

    /// Values in one plane.
    pub fn plane(&self) -> usize {
        self.height * self.width
    }

    /// Values in one observation.
    pub fn values(&self) -> usize {
        self.plane() * self.channels
    }
}

/// No plane: a slot not written yet.
const NONE: u32 = u32::MAX;

/// The distinct planes of a buffer's observations, and each slot's.
#[derive(Clone, Debug)]
pub struct FrameStore {
    layout: FrameLayout,
    /// Plane `id`'s bytes at `id · plane ..`.
    bytes: Vec<u8>,
    /// References from slots to each plane; 0 for a free id.
    refs: Vec<u32>,
    free: Vec<u32>,
    /// The first plane of each hash; the others of that hash follow
    /// through `chain` (collisions are rare, but equal bytes decide).
    by_hash: HashMap<u64, u32>,
    chain: Vec<u32>,
    /// Each slot's plane ids: `obs`'s channels, then `new_obs`'s.
    slots: Vec<u32>,
}

/// Which observation of a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The observation acted on (`obs`).
    Obs,
    /// The observation after (`new_obs`).
    NewObs,
}

impl FrameStore {
    /// An empty store for a buffer of `capacity` slots.
    pub fn new(layout: FrameLayout, capacity: usize) -> Self {
        Self {
            layout,
            bytes: Vec::new(),
            refs: Vec::new(),
            free: Vec::new(),
            by_hash: HashMap::new(),
            chain: Vec::new(),
            slots: vec![NONE; capacity * 2 * layout.channels],
        }
    }

    /// The layout.
    pub fn layout(&self) -> FrameLayout {
        self.layout
    }

    /// Where plane `id`'s bytes are in `bytes`.
    fn span(&self, id: u32) -> std::ops::Range<usize> {
        let plane = self.layout.plane();
        id as usize * plane..(id as usize + 1) * plane
    }

    /// Distinct planes held.
    pub fn planes(&self) -> usize {
        self.refs.len() - self.free.len()
    }

    /// Bytes this store holds on the heap: its vectors' capacity, and its
    /// hash index's (a bucket holds an aligned key and value plus a control
    /// byte, and there are about 8 buckets per 7 entries of capacity).
    pub fn heap_bytes(&self) -> usize {
        let ids = self.refs.capacity() + self.free.capacity() + self.slots.capacity() + self.chain.capacity();
        let buckets = self.by_hash.capacity() * 8 / 7;
        self.bytes.capacity() + ids * 4 + buckets * (std::mem::size_of::<(u64, u32)>() + 1)
    }

    /// `rows` observations (`obs` then `new_obs`, each `rows × values`) as
    /// planes of bytes, every value checked: nothing is stored yet.
    ///
    /// # Errors
    /// A column of the wrong width, or an `f32` value that is not `b / 255`
    /// for a byte `b`.
    pub fn encode(&self, field: &str, values: Values<'_>, rows: usize) -> Result<Vec<u8>, ReplayError> {
        let (n, c) = (self.layout.values(), self.layout.channels);
        if values.len() != rows * n {
            return Err(ReplayError::Invalid(format!(
                "`{field}` has {} values per row, but frame sharing was set up for {}×{}×{} images ({n})",
                values.len() / rows.max(1),
                self.layout.height,
                self.layout.width,
                c
            )));
        }
        // Bytes as they come; `f32` converted (and checked) once.
        let bytes: std::borrow::Cow<'_, [u8]> = match values {
            Values::U8(bytes) => bytes.into(),
            Values::F32(values) => {
                let mut bytes = Vec::with_capacity(values.len());
                to_bytes(values, &mut bytes).map_err(|i| {
                    ReplayError::Invalid(format!(
                        "`{field}` row {} value {} is {}, not a byte over 255: frame sharing stores uint8 images",
                        i / n,
                        i % n,
                        values[i]
                    ))
                })?;
                bytes.into()
            }
        };
        // Channels last in a row (pixel by pixel); plane by plane out.
        let plane = self.layout.plane();
        let mut planes = vec![0u8; bytes.len()];
        for (row, out) in bytes.chunks_exact(n).zip(planes.chunks_exact_mut(n)) {
            for (p, pixel) in row.chunks_exact(c).enumerate() {
                for (k, &b) in pixel.iter().enumerate() {
                    out[k * plane + p] = b;
                }
            }
        }
        Ok(planes)
    }

    /// Points `slot` at the planes of one transition (`obs` then `new_obs`,
    /// as [`encode`](Self::encode) gave them), storing the planes not held
    /// yet and releasing the slot's previous ones.
    pub fn put(&mut self, slot: usize, obs: &[u8], new_obs: &[u8]) {
        let (c, plane) = (self.layout.channels, self.layout.plane());
        let ids: Vec<u32> =
            obs.chunks_exact(plane).chain(new_obs.chunks_exact(plane)).map(|p| self.intern(p)).collect();
        debug_assert_eq!(ids.len(), 2 * c);
        let at = slot * 2 * c..(slot + 1) * 2 * c;
        let old: Vec<u32> = self.slots[at.clone()].to_vec();
        self.slots[at].copy_from_slice(&ids);
        for id in old.into_iter().filter(|&id| id != NONE) {
            self.release(id);
        }
    }

    /// The observations of `slots`, rebuilt as rows of bytes, channels
    /// last as they arrived.
    ///
    /// # Panics
    /// If a slot was never written.
    pub fn rows(&self, slots: &[usize], which: Which) -> Vec<u8> {
        let c = self.layout.channels;
        let mut out = vec![0u8; slots.len() * self.layout.values()];
        for (row, &slot) in out.chunks_exact_mut(self.layout.values()).zip(slots) {
            let first = slot * 2 * c + if which == Which::Obs { 0 } else { c };
            let planes: Vec<&[u8]> = self.slots[first..first + c]
                .iter()
                .map(|&id| {
                    assert_ne!(id, NONE, "slot {slot} holds no transition");
                    &self.bytes[self.span(id)]
                })
                .collect();
            // Written in order, pixel by pixel, reading the planes side by
            // side.
            for (p, pixel) in row.chunks_exact_mut(c).enumerate() {
                for (value, plane) in pixel.iter_mut().zip(&planes) {
                    *value = plane[p];
                }
            }
        }
        out
    }

    /// The id of a plane with these bytes, stored now if none is.
    fn intern(&mut self, plane: &[u8]) -> u32 {
        let hash = hash_of(plane);
        let first = self.by_hash.get(&hash).copied().unwrap_or(NONE);
        let mut at = first;
        while at != NONE {
            if &self.bytes[self.span(at)] == plane {
                self.refs[at as usize] += 1;
                return at;
            }
            at = self.chain[at as usize];
        }
        let id = match self.free.pop() {
            Some(id) => {
                let span = self.span(id);
                self.bytes[span].copy_from_slice(plane);
                id
            }
            None => {
                // Grow by a 64th at a time, not by doubling: at a million
                // Atari frames, a doubled vector would hold gigabytes unused.
                if self.bytes.len() + plane.len() > self.bytes.capacity() {
                    self.bytes.reserve_exact(plane.len() * (self.refs.len() / 64).max(16));
                }
                self.bytes.extend_from_slice(plane);
                self.refs.push(0);
                self.chain.push(NONE);
                (self.refs.len() - 1) as u32
            }
        };
        self.refs[id as usize] = 1;
        self.chain[id as usize] = first;
        self.by_hash.insert(hash, id);
        id
    }

    /// Drops one reference to plane `id`, freeing it with the last.
    fn release(&mut self, id: u32) {
        let refs = &mut self.refs[id as usize];
        *refs -= 1;
        if *refs > 0 {
            return;
        }
        // Unlink `id` from its hash's chain (hashing the plane again costs
        // less than keeping 8 bytes per plane).
        let hash = hash_of(&self.bytes[self.span(id)]);
        let next = self.chain[id as usize];
        if self.by_hash.get(&hash) == Some(&id) {
            if next == NONE {
                self.by_hash.remove(&hash);
            } else {
                self.by_hash.insert(hash, next);
            }
        } else {
            let mut at = self.by_hash.get(&hash).copied().unwrap_or(NONE);
            while at != NONE && self.chain[at as usize] != id {
                at = self.chain[at as usize];
            }
            if at != NONE {
                self.chain[at as usize] = next;
            }
        }
        self.chain[id as usize] = NONE;
        self.free.push(id);
    }
}

/// The hash a plane is found by.
fn hash_of(plane: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    plane.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> FrameLayout {
        FrameLayout { height: 2, width: 3, channels: 2 }
    }

    /// A channels-last observation whose channel `k` is plane `planes[k]`,
    /// plane `p` having every byte `p`.
    fn obs(planes: [u8; 2]) -> Vec<u8> {
        (0..6).flat_map(|_| planes).collect()
    }

    /// [`obs`] as the `f32` an env writes (`b / 255`).
    fn obs_f32(planes: [u8; 2]) -> Vec<f32> {
        obs(planes).into_iter().map(crate::space::from_byte).collect()
    }

    #[test]
    fn layout_comes_from_byte_images_only() {
        assert_eq!(
            FrameLayout::of(&Space::bytes(vec![84, 84, 4])),
            Some(FrameLayout { height: 84, width: 84, channels: 4 })
        );
        assert_eq!(FrameLayout::of(&Space::bytes(vec![84, 84])), None);
        assert_eq!(FrameLayout::of(&Space::uniform_box(0.0, 1.0, vec![84, 84, 4]).unwrap()), None);
    }

    #[test]
    fn shared_planes_are_stored_once_and_freed_with_their_last_slot() {
        let mut store = FrameStore::new(layout(), 3);
        // A stack sliding by one frame: (1, 2) -> (2, 3), then (2, 3) -> (3, 4).
        let put = |store: &mut FrameStore, slot, a: [u8; 2], b: [u8; 2]| {
            let o = store.encode("obs", Values::U8(&obs(a)), 1).unwrap();
            // Bytes or the `f32` they stand for give the same planes.
            let n = store.encode("new_obs", Values::F32(&obs_f32(b)), 1).unwrap();
            assert_eq!(n, store.encode("new_obs", Values::U8(&obs(b)), 1).unwrap());
            store.put(slot, &o, &n);
        };
        put(&mut store, 0, [1, 2], [2, 3]);
        put(&mut store, 1, [2, 3], [3, 4]);
        assert_eq!(store.planes(), 4, "frames 1 to 4, once each");
        assert_eq!(store.rows(&[1, 0], Which::Obs), [obs([2, 3]), obs([1, 2])].concat());
        assert_eq!(store.rows(&[0], Which::NewObs), obs([2, 3]));
        // Overwriting slot 0 releases frame 1 only; its id is reused.
        put(&mut store, 0, [9, 9], [9, 9]);
        assert_eq!(store.planes(), 4, "frames 2, 3, 4 and 9");
        assert_eq!(store.rows(&[0, 1], Which::NewObs), [obs([9, 9]), obs([3, 4])].concat());
        assert_eq!((store.bytes.len(), store.free.len()), (5 * 6, 1), "frame 1's id is free");
        put(&mut store, 2, [7, 7], [7, 7]);
        assert_eq!(store.bytes.len(), 5 * 6, "frame 7 took frame 1's id");
        assert_eq!(store.rows(&[2, 1], Which::Obs), [obs([7, 7]), obs([2, 3])].concat());
    }

    #[test]
    fn values_that_are_not_bytes_or_the_wrong_width_are_refused_by_name() {
        let store = FrameStore::new(layout(), 1);
        let mut bad = obs_f32([1, 2]);
        bad[5] = 0.5;
        let err = store.encode("obs", Values::F32(&bad), 1).unwrap_err().to_string();
        assert!(err.contains("`obs` row 0 value 5 is 0.5, not a byte"), "{err}");
        let err = store.encode("new_obs", Values::U8(&[0; 7]), 1).unwrap_err().to_string();
        assert!(err.contains("`new_obs` has 7 values per row") && err.contains("2×3×2"), "{err}");
    }
}
