//! Queries on scalar indices, and the ordered searches BTree pages and Bitmap directories
//! share.

use std::cmp::Ordering;
use std::ops::Bound;

use arrow::array::{Array, ArrayRef, AsArray, DynComparator, make_comparator};
use arrow::compute::SortOptions;
use arrow::datatypes::DataType;

use crate::{Error, Result};

/// A query on a BTree or Bitmap index. Values are Arrow arrays of the indexed column's
/// type; null values never match.
#[derive(Debug, Clone)]
pub enum ScalarQuery {
    /// `column = value`: the array's first value.
    Equals(ArrayRef),
    /// `column IN (values)`: every value of the array.
    In(ArrayRef),
    /// `lower <(=) column <(=) upper`, each bound a one-value array.
    Range {
        /// The lower bound.
        lower: Bound<ArrayRef>,
        /// The upper bound.
        upper: Bound<ArrayRef>,
    },
    /// Strings (or binary values) starting with the array's first value.
    Prefix(ArrayRef),
    /// `column IS NULL`.
    IsNull,
}

impl ScalarQuery {
    /// Fails with [`Error::InvalidInput`] unless every value has type `data_type`.
    pub(crate) fn check(&self, data_type: &DataType) -> Result<()> {
        let check = |a: &ArrayRef| {
            if a.data_type() == data_type {
                Ok(())
            } else {
                Err(Error::InvalidInput {
                    reason: format!(
                        "a query value of type {} on an index of type {data_type}",
                        a.data_type()
                    ),
                })
            }
        };
        match self {
            Self::Equals(v) | Self::In(v) => check(v),
            Self::Prefix(v) => {
                check(v)?;
                if prefix_of(v.as_ref(), 0).is_none() {
                    return Err(Error::InvalidInput {
                        reason: format!("a prefix query needs strings or binary, not {data_type}"),
                    });
                }
                Ok(())
            }
            Self::Range { lower, upper } => {
                for b in [lower, upper] {
                    if let Bound::Included(v) | Bound::Excluded(v) = b {
                        check(v)?;
                    }
                }
                Ok(())
            }
            Self::IsNull => Ok(()),
        }
    }
}

/// Compares `left[i]` with `right[j]`, nulls last.
pub(crate) fn comparator(left: &dyn Array, right: &dyn Array) -> Result<DynComparator> {
    make_comparator(
        left,
        right,
        SortOptions {
            descending: false,
            nulls_first: false,
        },
    )
    .map_err(Error::arrow("comparing index values"))
}

/// The first position in `0..len` whose value is not less than the probe (`cmp(i)`
/// compares position `i` with it), or, with `strict`, greater than it.
pub(crate) fn search(len: usize, cmp: impl Fn(usize) -> Ordering, strict: bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let before = match cmp(mid) {
            Ordering::Less => true,
            Ordering::Equal => strict,
            Ordering::Greater => false,
        };
        if before {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The positions of a sorted array (nulls last, `non_null` values before them) that a
/// query selects, as ranges.
pub(crate) fn select_sorted(
    values: &dyn Array,
    non_null: usize,
    query: &ScalarQuery,
) -> Result<Vec<std::ops::Range<usize>>> {
    let bound = |probe: &ArrayRef, index: usize, strict: bool| -> Result<usize> {
        let cmp = comparator(values, probe.as_ref())?;
        Ok(search(non_null, |i| cmp(i, index), strict))
    };
    Ok(match query {
        ScalarQuery::IsNull => std::iter::once(non_null..values.len()).collect(),
        ScalarQuery::Equals(v) => {
            if v.is_empty() || v.is_null(0) {
                return Ok(Vec::new());
            }
            std::iter::once(bound(v, 0, false)?..bound(v, 0, true)?).collect()
        }
        ScalarQuery::In(v) => {
            let mut ranges = Vec::new();
            for i in 0..v.len() {
                if v.is_valid(i) {
                    let r = bound(v, i, false)?..bound(v, i, true)?;
                    if !r.is_empty() {
                        ranges.push(r);
                    }
                }
            }
            ranges.sort_by_key(|r| r.start);
            ranges.dedup();
            ranges
        }
        ScalarQuery::Range { lower, upper } => {
            let start = match lower {
                Bound::Unbounded => 0,
                Bound::Included(v) if v.is_valid(0) => bound(v, 0, false)?,
                Bound::Excluded(v) if v.is_valid(0) => bound(v, 0, true)?,
                _ => return Ok(Vec::new()),
            };
            let end = match upper {
                Bound::Unbounded => non_null,
                Bound::Included(v) if v.is_valid(0) => bound(v, 0, true)?,
                Bound::Excluded(v) if v.is_valid(0) => bound(v, 0, false)?,
                _ => return Ok(Vec::new()),
            };
            (start < end).then_some(start..end).into_iter().collect()
        }
        ScalarQuery::Prefix(v) => {
            let Some(prefix) = prefix_of(v.as_ref(), 0) else {
                return Ok(Vec::new());
            };
            let start = bound(v, 0, false)?;
            let mut end = start;
            while end < non_null && prefix_of(values, end).is_some_and(|s| s.starts_with(&prefix)) {
                end += 1;
            }
            std::iter::once(start..end).collect()
        }
    })
}

/// Whether a page or directory entry whose values lie in `[min, max]` (position `i` of
/// the two arrays, non-null) may hold values the query selects.
pub(crate) fn may_hold(
    min: &dyn Array,
    max: &dyn Array,
    i: usize,
    query: &ScalarQuery,
) -> Result<bool> {
    if min.is_null(i) || max.is_null(i) {
        return Ok(false);
    }
    let within = |v: &ArrayRef, j: usize| -> Result<bool> {
        let lo = comparator(min, v.as_ref())?;
        let hi = comparator(max, v.as_ref())?;
        Ok(lo(i, j) != Ordering::Greater && hi(i, j) != Ordering::Less)
    };
    Ok(match query {
        ScalarQuery::IsNull => false,
        ScalarQuery::Equals(v) => v.is_valid(0) && within(v, 0)?,
        ScalarQuery::In(v) => {
            for j in 0..v.len() {
                if v.is_valid(j) && within(v, j)? {
                    return Ok(true);
                }
            }
            false
        }
        ScalarQuery::Range { lower, upper } => {
            let above_lower = match lower {
                Bound::Unbounded => true,
                Bound::Included(v) => comparator(max, v.as_ref())?(i, 0) != Ordering::Less,
                Bound::Excluded(v) => comparator(max, v.as_ref())?(i, 0) == Ordering::Greater,
            };
            let below_upper = match upper {
                Bound::Unbounded => true,
                Bound::Included(v) => comparator(min, v.as_ref())?(i, 0) != Ordering::Greater,
                Bound::Excluded(v) => comparator(min, v.as_ref())?(i, 0) == Ordering::Less,
            };
            above_lower && below_upper
        }
        ScalarQuery::Prefix(v) => {
            let Some(prefix) = prefix_of(v.as_ref(), 0) else {
                return Ok(false);
            };
            // Values with the prefix sort at or after it, and before anything greater
            // that does not start with it.
            let max_reaches = comparator(max, v.as_ref())?(i, 0) != Ordering::Less;
            let min_before = comparator(min, v.as_ref())?(i, 0) != Ordering::Greater
                || prefix_of(min, i).is_some_and(|m| m.starts_with(&prefix));
            max_reaches && min_before
        }
    })
}

/// The bytes of a string or binary value, for prefix matching.
pub(crate) fn prefix_of(array: &dyn Array, i: usize) -> Option<Vec<u8>> {
    if i >= array.len() || array.is_null(i) {
        return None;
    }
    Some(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes().to_vec(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(i).as_bytes().to_vec(),
        DataType::Binary => array.as_binary::<i32>().value(i).to_vec(),
        DataType::LargeBinary => array.as_binary::<i64>().value(i).to_vec(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(i).to_vec(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    #[test]
    fn sorted_selections_find_equal_ranges_and_prefixes() {
        let values = Int64Array::from(vec![Some(1), Some(3), Some(3), Some(7), None]);
        let three: ArrayRef = Arc::new(Int64Array::from(vec![3]));
        let q = ScalarQuery::Equals(Arc::clone(&three));
        assert_eq!(select_sorted(&values, 4, &q).unwrap(), vec![1..3]);
        let q = ScalarQuery::Range {
            lower: Bound::Excluded(three),
            upper: Bound::Unbounded,
        };
        assert_eq!(select_sorted(&values, 4, &q).unwrap(), vec![3..4]);
        assert_eq!(
            select_sorted(&values, 4, &ScalarQuery::IsNull).unwrap(),
            vec![4..5]
        );
        let words = StringArray::from(vec!["apple", "apply", "b", "banana"]);
        let q = ScalarQuery::Prefix(Arc::new(StringArray::from(vec!["app"])));
        assert_eq!(select_sorted(&words, 4, &q).unwrap(), vec![0..2]);
        let (min, max) = (
            StringArray::from(vec!["b"]),
            StringArray::from(vec!["banana"]),
        );
        assert!(!may_hold(&min, &max, 0, &q).unwrap());
        let q = ScalarQuery::Prefix(Arc::new(StringArray::from(vec!["ba"])));
        assert!(may_hold(&min, &max, 0, &q).unwrap());
    }
}
