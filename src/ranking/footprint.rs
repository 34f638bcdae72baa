//! Estimated heap bytes of the trained artifacts: capacities times element sizes,
//! hash tables by hashbrown's layout. What `/v1/admin/stats` reports as the models'
//! memory; the allocator's own overhead and fragmentation are not in it.

use std::collections::{HashMap, VecDeque};
use std::mem::size_of;

pub fn vec<T>(values: &Vec<T>) -> usize {
    values.capacity() * size_of::<T>()
}

pub fn deque<T>(values: &VecDeque<T>) -> usize {
    values.capacity() * size_of::<T>()
}

/// The allocation of a value behind an `Arc` (its two counts and the value).
pub fn shared<T>(_value: &std::sync::Arc<T>) -> usize {
    2 * size_of::<usize>() + size_of::<T>()
}

/// A hash table holds a power-of-two count of buckets, at most 7/8 of them full
/// (all but one below 8), each with one control byte, and one group of spare
/// control bytes.
pub fn map<K, V, S>(map: &HashMap<K, V, S>) -> usize {
    let capacity = map.capacity();
    if capacity == 0 {
        return 0;
    }
    let buckets = match capacity < 8 {
        true => (capacity + 1).next_power_of_two(),
        false => (capacity * 8).div_ceil(7).next_power_of_two(),
    };
    buckets * (size_of::<(K, V)>() + 1) + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_counted_by_its_buckets() {
        let mut table: HashMap<u32, f32> = HashMap::new();
        assert_eq!(map(&table), 0);
        table.extend((0..1000).map(|key| (key, 0.0)));
        // 1000 entries need 2048 buckets of 8 bytes and a control byte each.
        assert_eq!(table.capacity(), 1792);
        assert_eq!(map(&table), 2048 * 9 + 16);
        table.clear();
        assert_eq!(map(&table), 2048 * 9 + 16, "clearing keeps the buckets");
    }
}
