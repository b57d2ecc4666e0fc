//! `SkimpyOffsetMap`: the cleaner's bounded map from a key's hash to the latest offset that key
//! was written at. Like Kafka's, it stores a 128-bit hash instead of the key, in a fixed array
//! sized from `log.cleaner.dedupe.buffer.size`, with linear probing.

use std::hash::{BuildHasher, RandomState};

/// Bytes one entry takes: two 64-bit hash halves and the offset.
pub const BYTES_PER_ENTRY: usize = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor` default: the map counts as full at 90%.
const LOAD_FACTOR: f64 = 0.9;

/// An entry: the key's hash halves and `offset + 1` (all zeros is an empty slot).
type Slot = [u64; 3];

pub struct OffsetMap {
    slots: Vec<Slot>,
    /// Two independently keyed hashers: 128 bits make a collision between two keys of one
    /// clean as unlikely as Kafka's MD5 does.
    hashers: [RandomState; 2],
    entries: usize,
    max_entries: usize,
    latest_offset: i64,
}

impl OffsetMap {
    /// A map using at most `memory_bytes` (at least one entry).
    pub fn new(memory_bytes: usize) -> Self {
        let capacity = (memory_bytes / BYTES_PER_ENTRY).max(2);
        Self {
            // Zeroed memory comes from the allocator untouched: pages the map never reaches
            // are never made resident.
            slots: vec![[0; 3]; capacity],
            hashers: [RandomState::new(), RandomState::new()],
            entries: 0,
            max_entries: ((capacity as f64 * LOAD_FACTOR) as usize).max(1),
            latest_offset: -1,
        }
    }

    /// How many keys the map may hold before it counts as full.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Keys in the map.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Whether `more` new keys could still be added.
    pub fn has_room_for(&self, more: usize) -> bool {
        self.entries + more <= self.max_entries
    }

    /// The largest offset put so far (-1 if none).
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    fn hash(&self, key: &[u8]) -> [u64; 2] {
        let [a, b] = &self.hashers;
        // A zero first half is reserved for empty slots.
        [a.hash_one(key).max(1), b.hash_one(key)]
    }

    /// The slot holding `hash`, or the empty slot where it belongs.
    fn find(&self, hash: [u64; 2]) -> usize {
        let mut index = (hash[0] % self.slots.len() as u64) as usize;
        loop {
            let slot = &self.slots[index];
            if slot[0] == 0 || (slot[0] == hash[0] && slot[1] == hash[1]) {
                return index;
            }
            index = (index + 1) % self.slots.len();
        }
    }

    /// Records `offset` as the latest for `key`; false (and nothing stored) if the key is new
    /// and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let hash = self.hash(key);
        let index = self.find(hash);
        let slot = &mut self.slots[index];
        if slot[0] == 0 {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
        }
        *slot = [hash[0], hash[1], offset as u64 + 1];
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The latest offset of `key`, if the map holds it.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let slot = &self.slots[self.find(self.hash(key))];
        (slot[0] != 0).then(|| slot[2] as i64 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn keeps_the_latest_offset_per_key_and_refuses_new_keys_when_full() {
        let mut map = OffsetMap::new(10 * BYTES_PER_ENTRY);
        assert_eq!(map.max_entries(), 9);
        for i in 0..9 {
            assert!(map.put(format!("k{i}").as_bytes(), i));
        }
        assert!(!map.has_room_for(1));
        assert!(!map.put(b"another", 100));
        assert_eq!(map.get(b"another"), None);
        // An existing key still takes a newer offset.
        assert!(map.put(b"k3", 50));
        assert_eq!(map.get(b"k3"), Some(50));
        assert_eq!(map.get(b"k4"), Some(4));
        assert_eq!((map.len(), map.latest_offset()), (9, 50));
    }

    proptest! {
        #[test]
        fn agrees_with_a_hash_map(writes in proptest::collection::vec((0u8..40, 0i64..1_000_000), 0..300)) {
            let mut map = OffsetMap::new(64 * BYTES_PER_ENTRY);
            let mut expected = HashMap::new();
            for (offset, (key, _)) in writes.iter().enumerate() {
                prop_assert!(map.put(&[*key], offset as i64));
                expected.insert(*key, offset as i64);
            }
            for key in 0u8..60 {
                prop_assert_eq!(map.get(&[key]), expected.get(&key).copied());
            }
            prop_assert_eq!(map.len(), expected.len());
        }
    }
}
