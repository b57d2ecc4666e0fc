//! Kafka's default partitioner for keyed records: murmur2 of the key, made positive, modulo
//! the partition count (`BuiltInPartitioner.partitionForKey`), so records land where the Java
//! producer would put them.

/// Kafka's `Utils.murmur2` (MurmurHash2, 32-bit, Kafka's seed).
fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a record with `key` in a topic of `partitions` partitions.
pub(crate) fn partition_for_key(key: &[u8], partitions: usize) -> i32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as usize;
    (positive % partitions.max(1)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka() {
        // Values from Kafka's own UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    #[test]
    fn partitions_are_in_range() {
        for key in [&b"a"[..], b"bb", b"ccc", b"dddd"] {
            assert!((0..3).contains(&partition_for_key(key, 3)));
        }
    }
}
