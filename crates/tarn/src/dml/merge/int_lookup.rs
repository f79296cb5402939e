//! One integer merge key's source rows, looked up by value: a target key column is
//! probed on its values directly, with no row encoding of every target row.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType as ArrowType, Int64Type};

/// One integer merge key's source rows, for probing target values without encoding them.
/// Rows sharing a key are chained (`next`), so a unique key costs one map entry and one
/// slot, not a vector of its own.
pub(super) struct IntLookup {
    /// Each key's first source row.
    first: HashMap<i64, u32, BuildHasherDefault<IntHasher>>,
    /// Per source row, the next row with its key ([`NO_ROW`] for none).
    next: Vec<u32>,
    min: i64,
    max: i64,
}

/// The end of a chain of source rows.
const NO_ROW: u32 = u32::MAX;

impl IntLookup {
    /// The lookup of a single integer key column; `None` for other keys.
    pub(super) fn of(source_keys: &[ArrayRef]) -> Option<IntLookup> {
        let [key] = source_keys else {
            return None;
        };
        let values = as_i64(key)?;
        let mut first: HashMap<i64, u32, BuildHasherDefault<IntHasher>> =
            HashMap::with_capacity_and_hasher(values.len(), Default::default());
        let mut next = vec![NO_ROW; values.len()];
        // Backwards, so each chain runs in source order.
        for i in (0..values.len()).rev() {
            if values.is_valid(i)
                && let Some(after) = first.insert(values.value(i), i as u32)
            {
                next[i] = after;
            }
        }
        let min = first.keys().min().copied().unwrap_or(i64::MAX);
        let max = first.keys().max().copied().unwrap_or(i64::MIN);
        Some(IntLookup {
            first,
            next,
            min,
            max,
        })
    }

    /// The (target row, source row) pairs of a target key column, in target order; `None`
    /// when the column is not an integer one.
    pub(super) fn pairs(&self, key: &ArrayRef) -> Option<(Vec<u32>, Vec<u32>)> {
        let values = as_i64(key)?;
        let (mut t_idx, mut s_idx) = (Vec::new(), Vec::new());
        let mut probe = |i: usize, v: i64| {
            // Most target keys fall outside the source's range: one comparison each.
            if v < self.min || v > self.max {
                return;
            }
            let mut s = self.first.get(&v).copied().unwrap_or(NO_ROW);
            while s != NO_ROW {
                t_idx.push(i as u32);
                s_idx.push(s);
                s = self.next[s as usize];
            }
        };
        if values.null_count() == 0 {
            for (i, v) in values.values().iter().enumerate() {
                probe(i, *v);
            }
        } else {
            for (i, v) in values.iter().enumerate() {
                if let Some(v) = v {
                    probe(i, v);
                }
            }
        }
        Some((t_idx, s_idx))
    }
}

/// A hasher for integer keys: one multiplication, where the default SipHash costs
/// tens of nanoseconds on every probe of every target row. Keys come from the caller's
/// data, not an adversary's, and a bad spread only slows the probe.
#[derive(Default)]
pub(super) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_i64(&mut self, v: i64) {
        let h = (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// An integer column as 64-bit integers (no copy for `Int64`).
fn as_i64(array: &ArrayRef) -> Option<arrow::array::Int64Array> {
    match array.data_type() {
        ArrowType::Int64 => Some(array.as_primitive::<Int64Type>().clone()),
        ArrowType::Int32 | ArrowType::Int16 | ArrowType::Int8 => {
            arrow::compute::cast(array, &ArrowType::Int64)
                .ok()
                .map(|a| a.as_primitive::<Int64Type>().clone())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use arrow::array::{Int32Array, Int64Array, StringArray};

    #[test]
    fn integer_keys_pair_like_encoded_rows_and_skip_nulls() {
        let source: ArrayRef = Arc::new(Int32Array::from(vec![Some(5), None, Some(7), Some(5)]));
        let int = IntLookup::of(&[Arc::clone(&source)]).unwrap();
        let target: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(7),
            None,
            Some(5),
            Some(100),
            Some(-3),
        ]));
        let (t, s) = int.pairs(&target).unwrap();
        assert_eq!(t, vec![0, 2, 2]);
        assert_eq!(s, vec![2, 0, 3]);
        let no_nulls: ArrayRef = Arc::new(Int64Array::from(vec![4, 5, 6, 7]));
        assert_eq!(
            int.pairs(&no_nulls).unwrap(),
            (vec![1, 1, 3], vec![0, 3, 2])
        );
        // Other key types take the row-encoded path.
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        assert!(IntLookup::of(&[Arc::clone(&strings)]).is_none());
        assert!(int.pairs(&strings).is_none());
        assert!(IntLookup::of(&[Arc::clone(&source), source]).is_none());
    }
}
