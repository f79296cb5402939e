//! Per-file Parquet settings: page sizes, and which columns get a dictionary.
//!
//! A dictionary pays for a column with few distinct values. For a column of mostly unique
//! values (ids, keys, prices) the writer would fill a 1 MiB dictionary, give up and
//! write plain pages after it anyway: the interning costs encode time, and the dictionary
//! page stays at the head of every column chunk, so a read of a few rows (an index hit, a
//! merge's matches) fetches it beside the one page it needs. Each file looks at the first
//! rows it is given and writes such columns plain from the start.

use std::collections::HashSet;

use arrow::array::{Array, AsArray, RecordBatch};
use parquet::basic::Compression;
use parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

/// Rows per data page, at most.
pub(crate) const DATA_PAGE_ROWS: usize = 16 * 1024;
/// Rows looked at to judge a column's cardinality.
const SAMPLE_ROWS: usize = 4096;
/// Fewer non-null values than this say too little: the column keeps its dictionary.
const MIN_SAMPLE_ROWS: usize = 512;
/// A column whose sample is more distinct than this is written without a dictionary.
const PLAIN_ABOVE: f64 = 0.5;

/// Tarn's default settings, without the per-column choices.
fn base() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        // Pages of at most this many rows: a read of a few rows (through an index, a
        // deletion vector's complement, a merge's hits) fetches a few pages of a file
        // through the offset index, not whole column chunks.
        .set_data_page_row_count_limit(DATA_PAGE_ROWS)
}

/// The settings of a new data file whose first rows are `sample`: Tarn's defaults, with
/// the dictionary turned off for top-level columns whose sampled values are mostly
/// distinct.
pub(crate) fn file_properties(sample: &RecordBatch) -> WriterProperties {
    let mut builder = base();
    for (field, column) in sample.schema().fields().iter().zip(sample.columns()) {
        if distinct_fraction(column.as_ref()).is_some_and(|f| f > PLAIN_ABOVE) {
            builder = builder
                .set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false);
        }
    }
    builder.build()
}

/// The fraction of distinct values among the non-null values of the first rows of a flat
/// column (primitive, string or binary), or `None` for other types and samples with too
/// few values to judge (a dictionary holds only non-null values).
fn distinct_fraction(array: &dyn Array) -> Option<f64> {
    let array = array.slice(0, array.len().min(SAMPLE_ROWS));
    let valid = |i: usize| array.is_valid(i);
    let (distinct, values) = if let Some(width) = array.data_type().primitive_width() {
        let data = array.to_data();
        let bytes = data.buffers().first()?.as_slice();
        let start = data.offset() * width;
        let bytes = bytes.get(start..start + array.len() * width)?;
        let mut seen = HashSet::with_capacity(array.len());
        let mut values = 0;
        for (i, value) in bytes.chunks_exact(width).enumerate() {
            if valid(i) {
                seen.insert(value);
                values += 1;
            }
        }
        (seen.len(), values)
    } else if let Some(s) = array.as_string_opt::<i32>() {
        count_distinct(s.iter())
    } else if let Some(s) = array.as_string_opt::<i64>() {
        count_distinct(s.iter())
    } else if let Some(s) = array.as_string_view_opt() {
        count_distinct(s.iter())
    } else if let Some(b) = array.as_binary_opt::<i32>() {
        count_distinct(b.iter())
    } else if let Some(b) = array.as_binary_opt::<i64>() {
        count_distinct(b.iter())
    } else {
        return None;
    };
    (values >= MIN_SAMPLE_ROWS).then(|| distinct as f64 / values as f64)
}

/// Distinct non-null values and non-null values of an iterator over a column.
fn count_distinct<T: Eq + std::hash::Hash>(
    values: impl Iterator<Item = Option<T>>,
) -> (usize, usize) {
    let mut seen = HashSet::new();
    let mut count = 0;
    for value in values.flatten() {
        seen.insert(value);
        count += 1;
    }
    (seen.len(), count)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn dictionary_enabled(props: &WriterProperties, column: &str) -> bool {
        props.dictionary_enabled(&ColumnPath::from(column))
    }

    #[test]
    fn unique_columns_are_written_plain_and_repetitive_ones_keep_a_dictionary() {
        let n = 5000i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("part", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new("flag", DataType::Boolean, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7919 % n))),
            Arc::new(Int32Array::from_iter_values(
                (0..n).map(|i| (i % 40) as i32),
            )),
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 10 != 0).then(|| format!("name {i}"))),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| ["web", "store"][i as usize % 2]),
            )),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
        ];
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        let props = file_properties(&batch);
        assert!(!dictionary_enabled(&props, "id"));
        assert!(
            !dictionary_enabled(&props, "name"),
            "90% distinct, nulls as one"
        );
        assert!(dictionary_enabled(&props, "part"));
        assert!(dictionary_enabled(&props, "channel"));
        assert!(
            dictionary_enabled(&props, "flag"),
            "booleans are not judged"
        );
        assert_eq!(props.data_page_row_count_limit(), DATA_PAGE_ROWS);

        // A few rows say too little: every column keeps its dictionary.
        let props = file_properties(&batch.slice(0, 100));
        assert!(dictionary_enabled(&props, "id"));
    }

    #[test]
    fn nulls_do_not_count_as_values() {
        // Half null, every other value unique: a dictionary would not pay.
        let half = Int64Array::from_iter((0..4096i64).map(|i| (i % 2 == 0).then_some(i)));
        assert!(distinct_fraction(&half).unwrap() > 0.99);
        // Mostly null: too few values to judge.
        let sparse = Int64Array::from_iter((0..4096i64).map(|i| (i % 100 == 0).then_some(i)));
        assert!(distinct_fraction(&sparse).is_none());
    }

    #[test]
    fn a_sliced_column_is_judged_by_its_own_rows() {
        // The first 4,096 rows repeat one value; the rest are unique.
        let values: Vec<i64> = (0..10_000).map(|i| if i < 4096 { 0 } else { i }).collect();
        let array = Int64Array::from(values);
        assert!(distinct_fraction(&array).unwrap() < 0.01);
        assert!(distinct_fraction(&array.slice(4096, 5000)).unwrap() > 0.99);
    }
}
