//! Scalar and full-text indices over Arrow arrays, stored as immutable objects in an
//! object store and queried by byte ranges.
//!
//! The crate knows nothing of tables. An index maps values to **row addresses**: a `u64`
//! holding a file ordinal (high 32 bits) and a row number in that file (low 32 bits), see
//! [`row_address`]. Each kind builds from a stream of Arrow arrays with their row
//! addresses, serialises into one object with a format version, checksums and a
//! documented layout (see [`mod@format`]), opens from an object store, and answers a query
//! with a [`RoaringTreemap`] of row addresses:
//!
//! - [`btree`]: sorted `(value, address)` pairs in pages of a fixed row count, with a
//!   small page lookup (min, max, null count, byte range, checksum per page) read once and
//!   cached; equality, `IN`, ranges and string prefixes fetch only the pages they need.
//! - [`bitmap`]: one roaring bitmap of addresses per distinct value, with a sorted value
//!   directory, for low-cardinality columns; equality, `IN`, ranges and `IS NULL`.
//! - [`fts`] (feature `fts`, default): a tantivy index over a string column, stored as one
//!   bundle and searched through a tantivy `Directory` that serves byte ranges from the
//!   object store; term, phrase and boolean queries, with BM25 scores.
//!
//! Building is CPU work: `write` methods run it on a blocking thread, off the async
//! threads. Opening reads one suffix of the object (the footer and the lookup, usually in
//! one GET); a query then reads only the byte ranges it needs, in parallel.

pub mod bitmap;
pub mod btree;
mod error;
pub mod format;
#[cfg(feature = "fts")]
pub mod fts;
mod query;
mod values;

pub use bitmap::{BitmapBuilder, BitmapIndex};
pub use btree::{BTreeBuilder, BTreeIndex, BTreeOptions};
pub use error::{Error, Result};
pub use format::{IndexKind, ObjectInfo};
pub use query::ScalarQuery;
pub use roaring::RoaringTreemap;

/// The row address of row `row` of the file with ordinal `file`.
pub fn row_address(file: u32, row: u32) -> u64 {
    (u64::from(file) << 32) | u64::from(row)
}

/// The file ordinal of a row address.
pub fn file_of(address: u64) -> u32 {
    (address >> 32) as u32
}

/// The row number, in its file, of a row address.
pub fn row_of(address: u64) -> u32 {
    address as u32
}

/// The rows of one file in a set of row addresses, as row numbers.
pub fn rows_of_file(addresses: &RoaringTreemap, file: u32) -> RoaringTreemap {
    addresses
        .bitmaps()
        .find(|(hi, _)| *hi == file)
        .map(|(_, rows)| RoaringTreemap::from_bitmaps([(0, rows.clone())]))
        .unwrap_or_default()
}

/// Each file's rows in a set of row addresses: `(file ordinal, row numbers)`.
pub fn rows_by_file(
    addresses: &RoaringTreemap,
) -> impl Iterator<Item = (u32, RoaringTreemap)> + '_ {
    addresses
        .bitmaps()
        .map(|(file, rows)| (file, RoaringTreemap::from_bitmaps([(0, rows.clone())])))
}

/// Whether `data_type` can be indexed by a BTree or a Bitmap: integers, decimals, dates,
/// timestamps, strings, binary and booleans (and dictionaries of those).
pub fn is_scalar_type(data_type: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType as T;
    matches!(
        data_type,
        T::Boolean
            | T::Int8
            | T::Int16
            | T::Int32
            | T::Int64
            | T::UInt8
            | T::UInt16
            | T::UInt32
            | T::UInt64
            | T::Decimal32(..)
            | T::Decimal64(..)
            | T::Decimal128(..)
            | T::Decimal256(..)
            | T::Date32
            | T::Date64
            | T::Timestamp(..)
            | T::Time32(_)
            | T::Time64(_)
            | T::Utf8
            | T::LargeUtf8
            | T::Binary
            | T::LargeBinary
            | T::FixedSizeBinary(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_file_and_row() {
        let a = row_address(7, 123_456);
        assert_eq!((file_of(a), row_of(a)), (7, 123_456));
        let set: RoaringTreemap = [row_address(1, 5), row_address(2, 3), row_address(2, 9)]
            .into_iter()
            .collect();
        assert_eq!(rows_of_file(&set, 2).iter().collect::<Vec<_>>(), vec![3, 9]);
        assert!(rows_of_file(&set, 3).is_empty());
    }
}
