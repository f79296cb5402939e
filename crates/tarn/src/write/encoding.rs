//! Per-file Parquet settings: the codec, page sizes, and how each column is encoded.
//!
//! The codec is the table's (`tarn.parquet.compression`), LZ4_RAW unless it says
//! otherwise: at about Snappy's size, it decompresses about twice as fast, and a full scan
//! of plain doubles or strings spends most of its time decompressing.
//!
//! A dictionary pays for a column with few distinct values. For a column of mostly unique
//! values (ids, keys, prices) the writer would fill a 1 MiB dictionary, give up and
//! write plain pages after it anyway: the interning costs encode time, and the dictionary
//! page stays at the head of every column chunk, so a read of a few rows (an index hit, a
//! merge's matches) fetches it beside the one page it needs. Each file looks at the first
//! rows it is given and writes such columns without a dictionary from the start.
//!
//! Of those, integer columns whose values step by small amounts (sorted ids, sequence
//! numbers, timestamps in arrival order) are written `DELTA_BINARY_PACKED`: each value is
//! its difference from the one before, packed in as few bits as its block of 32 needs, so
//! a column of consecutive ids takes a few bits per block instead of 8 bytes a value, and
//! decodes without the decompression a plain page needs. Readers of this encoding: every
//! Parquet reader built on parquet-mr, Spark from 3.3 (vectorized), arrow-rs (delta-rs,
//! DataFusion), Arrow C++ (pyarrow, Polars), DuckDB and Trino.

use std::collections::{HashSet, VecDeque};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

/// Rows per data page, at most.
pub(crate) const DATA_PAGE_ROWS: usize = 16 * 1024;
/// Rows looked at to judge a column's cardinality.
const SAMPLE_ROWS: usize = 4096;
/// Most batches looked ahead for a file's sample.
const AHEAD_BATCHES: usize = 64;
/// Fewer non-null values than this say too little: the column keeps its dictionary.
const MIN_SAMPLE_ROWS: usize = 512;
/// A column whose sample is more distinct than this is written without a dictionary.
const PLAIN_ABOVE: f64 = 0.5;
/// An integer column is delta-encoded when its sample's deltas pack into at most this
/// fraction of its plain width (a plain page with Snappy takes about half).
const DELTA_AT_MOST: f64 = 0.25;
/// Values per miniblock of `DELTA_BINARY_PACKED`, each packed with its own bit width.
const MINIBLOCK: usize = 32;

/// Tarn's default settings with the table's codec, without the per-column choices.
fn base(compression: Compression) -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(compression)
        // Pages of at most this many rows: a read of a few rows (through an index, a
        // deletion vector's complement, a merge's hits) fetches a few pages of a file
        // through the offset index, not whole column chunks.
        .set_data_page_row_count_limit(DATA_PAGE_ROWS)
}

/// The settings of a new data file whose first rows are `sample`: Tarn's defaults, with
/// the dictionary turned off for top-level columns whose sampled values are mostly
/// distinct, and those of them that are integers stepping by small amounts
/// delta-encoded.
fn file_properties(sample: &RecordBatch, compression: Compression) -> WriterProperties {
    let mut builder = base(compression);
    for (field, column) in sample.schema().fields().iter().zip(sample.columns()) {
        if distinct_fraction(column.as_ref()).is_some_and(|f| f > PLAIN_ABOVE) {
            let path = ColumnPath::from(field.name().as_str());
            builder = builder.set_column_dictionary_enabled(path.clone(), false);
            if delta_fraction(column.as_ref()).is_some_and(|f| f <= DELTA_AT_MOST) {
                builder = builder.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
            }
        }
    }
    builder.build()
}

/// The batches of a write, read with room to look ahead: a file that opens on the last
/// few rows of a batch (a stream of a few rows at a time, the remainder where a write is
/// split between encoders) judges its columns by the rows that follow too.
pub(crate) struct Input<I> {
    rest: I,
    ahead: VecDeque<RecordBatch>,
}

impl<I: Iterator<Item = RecordBatch>> Input<I> {
    pub(crate) fn new(batches: impl IntoIterator<IntoIter = I>) -> Self {
        Input {
            rest: batches.into_iter(),
            ahead: VecDeque::new(),
        }
    }

    /// The next batches, without taking them: up to [`SAMPLE_ROWS`] rows, in at most
    /// [`AHEAD_BATCHES`] batches.
    pub(crate) fn peek(&mut self) -> &VecDeque<RecordBatch> {
        let mut rows: usize = self.ahead.iter().map(RecordBatch::num_rows).sum();
        while rows < SAMPLE_ROWS && self.ahead.len() < AHEAD_BATCHES {
            let Some(batch) = self.rest.next() else { break };
            rows += batch.num_rows();
            self.ahead.push_back(batch);
        }
        &self.ahead
    }
}

impl<I: Iterator<Item = RecordBatch>> Iterator for Input<I> {
    type Item = RecordBatch;

    fn next(&mut self) -> Option<RecordBatch> {
        self.ahead.pop_front().or_else(|| self.rest.next())
    }
}

/// The settings of each file a write opens. A file whose first rows are too few to
/// judge by takes the settings of the last file judged in the write (its columns are
/// the same, whatever the partition), or, the first time, is judged by the rows that
/// follow it as well.
pub(crate) struct FileSettings {
    compression: Compression,
    last: Option<WriterProperties>,
}

impl FileSettings {
    /// Settings of files compressed with `compression`.
    pub(crate) fn new(compression: Compression) -> Self {
        FileSettings {
            compression,
            last: None,
        }
    }

    /// The settings of a new file whose first rows are `sample`; `after` gives the rows
    /// of the same file that follow them, if they are needed.
    pub(crate) fn of(
        &mut self,
        sample: &RecordBatch,
        after: impl FnOnce() -> Vec<RecordBatch>,
    ) -> WriterProperties {
        let codec = self.compression;
        let props = if sample.num_rows() >= SAMPLE_ROWS {
            file_properties(sample, codec)
        } else if let Some(last) = &self.last {
            return last.clone();
        } else {
            let mut rows = vec![sample.clone()];
            rows.extend(after());
            // A batch of another shape fails the write later; here it only goes unjudged.
            match concat_batches(&sample.schema(), &rows) {
                Ok(longer) => file_properties(&longer, codec),
                Err(_) => file_properties(sample, codec),
            }
        };
        self.last = Some(props.clone());
        props
    }
}

/// The size of the first rows of an integer column under `DELTA_BINARY_PACKED`, as a
/// fraction of their plain size: the bits each miniblock of deltas needs (the spread of
/// its deltas), over the values' width. `None` for other types, and for integer types
/// Arrow does not write as a Parquet INT32 or INT64 of its own width.
fn delta_fraction(array: &dyn Array) -> Option<f64> {
    let array = array.slice(0, array.len().min(SAMPLE_ROWS));
    // Dates and timestamps are written as the integers they hold.
    let (width, values): (u64, Vec<i64>) = match array.data_type() {
        DataType::Int32 | DataType::Date32 => {
            let ints = cast(&array, &DataType::Int32).ok()?;
            let ints = ints.as_primitive::<Int32Type>().iter().flatten();
            (32, ints.map(i64::from).collect())
        }
        DataType::Int64 | DataType::Timestamp(_, _) => {
            let ints = cast(&array, &DataType::Int64).ok()?;
            (
                64,
                ints.as_primitive::<Int64Type>().iter().flatten().collect(),
            )
        }
        _ => return None,
    };
    if values.len() < MIN_SAMPLE_ROWS {
        return None;
    }
    let deltas: Vec<i128> = values
        .windows(2)
        .map(|w| i128::from(w[1]) - i128::from(w[0]))
        .collect();
    let bits: u64 = deltas
        .chunks(MINIBLOCK)
        .map(|block| {
            let (lo, hi) = block.iter().fold((i128::MAX, i128::MIN), |(lo, hi), d| {
                (lo.min(*d), hi.max(*d))
            });
            let spread = (hi - lo).max(0) as u128;
            let needed = u64::from(u128::BITS - spread.leading_zeros());
            needed.min(width) * block.len() as u64
        })
        .sum();
    Some(bits as f64 / (deltas.len() as u64 * width) as f64)
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

    use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
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
        let props = file_properties(&batch, Compression::LZ4_RAW);
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
        let props = file_properties(&batch.slice(0, 100), Compression::LZ4_RAW);
        assert!(dictionary_enabled(&props, "id"));
    }

    fn encoding(props: &WriterProperties, column: &str) -> Option<Encoding> {
        props.encoding(&ColumnPath::from(column))
    }

    #[test]
    fn integers_stepping_by_small_amounts_are_delta_encoded() {
        let n = 5000i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("seq", DataType::Int32, true),
            Field::new("scattered", DataType::Int64, false),
            Field::new("price", DataType::Float64, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(1_000_000..1_000_000 + n)),
            // Ascending with gaps of up to 7, and nulls.
            Arc::new(Int32Array::from_iter(
                (0..n as i32).map(|i| (i % 11 != 0).then_some(i * 4 + i % 7)),
            )),
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64)),
            )),
            Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64))),
        ];
        let props = file_properties(
            &RecordBatch::try_new(schema, columns).unwrap(),
            Compression::LZ4_RAW,
        );
        assert_eq!(encoding(&props, "id"), Some(Encoding::DELTA_BINARY_PACKED));
        assert_eq!(encoding(&props, "seq"), Some(Encoding::DELTA_BINARY_PACKED));
        assert_eq!(encoding(&props, "scattered"), None);
        assert_eq!(encoding(&props, "price"), None);
        for column in ["id", "seq", "scattered", "price"] {
            assert!(!dictionary_enabled(&props, column), "{column}");
        }
    }

    #[test]
    fn the_delta_estimate_follows_the_spread_of_each_block() {
        let consecutive = Int64Array::from_iter_values(0..4096);
        assert_eq!(delta_fraction(&consecutive), Some(0.0));
        // Steps of 0 to 15 need 4 bits of 32.
        let steps = Int32Array::from_iter_values((0..4096).scan(0, |v, i| {
            *v += i % 16;
            Some(*v)
        }));
        let f = delta_fraction(&steps).unwrap();
        assert!((f - 4.0 / 32.0).abs() < 0.01, "{f}");
        // Too few values to judge, and not an integer.
        assert_eq!(delta_fraction(&consecutive.slice(0, 100)), None);
        assert_eq!(delta_fraction(&StringArray::from(vec!["a"; 4096])), None);
    }

    fn ids_of(values: impl IntoIterator<Item = i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(values))]).unwrap()
    }

    fn ids(range: std::ops::Range<i64>) -> RecordBatch {
        ids_of(range)
    }

    #[test]
    fn looking_ahead_takes_the_next_batches_without_losing_them() {
        // A remainder of 192 rows, then batches of 1,024 as a Parquet reader yields them.
        let mut input = vec![ids(0..192)];
        input.extend((0..6).map(|i| ids(192 + i * 1024..192 + (i + 1) * 1024)));
        let mut input = Input::new(input);
        let first = input.next().unwrap();
        assert_eq!(first.num_rows(), 192);
        let ahead: Vec<usize> = input.peek().iter().map(RecordBatch::num_rows).collect();
        assert_eq!(ahead, vec![1024; 4]);
        assert_eq!(input.peek().len(), 4, "a second look takes no more");
        let rest: Vec<RecordBatch> = input.collect();
        let ids: Vec<i64> = rest
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(ids, (192..192 + 6 * 1024).collect::<Vec<i64>>());
    }

    #[test]
    fn a_file_opened_on_a_few_rows_is_judged_by_what_follows_then_by_the_last() {
        let mut settings = FileSettings::new(Compression::LZ4_RAW);
        // Nothing follows: too few rows to judge, so the defaults.
        let props = FileSettings::new(Compression::LZ4_RAW).of(&ids(0..100), Vec::new);
        assert_eq!(encoding(&props, "id"), None);
        assert!(dictionary_enabled(&props, "id"));
        // What follows is enough.
        let props = settings.of(&ids(0..100), || vec![ids(100..1100), ids(1100..5000)]);
        assert_eq!(encoding(&props, "id"), Some(Encoding::DELTA_BINARY_PACKED));
        // Later small files take the last settings without looking ahead.
        let props = settings.of(&ids(5000..5100), || panic!("looked ahead"));
        assert_eq!(encoding(&props, "id"), Some(Encoding::DELTA_BINARY_PACKED));
        // A file with enough rows of its own is judged by them.
        let scattered = (0..5000i64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64));
        let props = settings.of(&ids_of(scattered), || panic!("looked ahead"));
        assert_eq!(encoding(&props, "id"), None);
        assert!(!dictionary_enabled(&props, "id"));
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
