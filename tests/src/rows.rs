//! Comparing tables by their rows, whatever the order, with their types.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every row as one line of text (`col=value|...`), sorted.
pub fn canonical_rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let schema = batch.schema();
        let formatters: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("format column"))
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .zip(schema.fields())
                .map(|(f, field)| format!("{}={}", field.name(), f.value(row)))
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

/// Column names and types of a schema, nullability aside.
pub fn column_types(schema: &Schema) -> Vec<(String, DataType)> {
    schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect()
}

/// Total rows in a set of batches.
pub fn row_count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Reads every `*.parquet` file of a folder (not recursing), as Spark's output folders
/// are laid out.
pub fn read_parquet_dir(dir: &Path) -> Vec<RecordBatch> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    let mut batches = Vec::new();
    for file in files {
        batches.extend(read_parquet_file(&file));
    }
    batches
}

/// Reads one Parquet file.
pub use tarn_test_support::read_parquet_file;

/// The Arrow schema of the Parquet files of a folder (the first file's), even when they
/// hold no rows.
pub fn parquet_dir_schema(dir: &Path) -> Option<arrow::datatypes::SchemaRef> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    let handle = std::fs::File::open(files.first()?).ok()?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(handle).ok()?;
    Some(builder.schema().clone())
}

/// Puts another reader's batches in Tarn's column order and types (nullable), so their
/// rows compare with [`canonical_rows`]. Panics when a column is missing or does not cast.
pub fn align(batches: &[RecordBatch], schema: &SchemaRef) -> Vec<RecordBatch> {
    let nullable = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<Field>>(),
    ));
    batches
        .iter()
        .map(|b| {
            let columns = schema
                .fields()
                .iter()
                .map(|f| {
                    let column = b.column_by_name(f.name()).unwrap_or_else(|| {
                        panic!("the other reader returned no column {:?}", f.name())
                    });
                    cast(column, f.data_type()).unwrap_or_else(|e| {
                        panic!(
                            "column {:?}: cannot cast {} to {}: {e}",
                            f.name(),
                            column.data_type(),
                            f.data_type()
                        )
                    })
                })
                .collect();
            RecordBatch::try_new(Arc::clone(&nullable), columns).expect("aligned batch")
        })
        .collect()
}

/// A change row: `(id, value, _change_type, _commit_version, _commit_timestamp in ms)`.
pub type Change = (Option<i64>, Option<String>, String, i64, i64);

/// The change rows of `Table::changes` batches (with an `id` and a string `value`
/// column), sorted.
pub fn change_rows(batches: &[RecordBatch], value: &str) -> Vec<Change> {
    let mut out = Vec::new();
    for b in batches {
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        let vs = b.column_by_name(value).unwrap().as_string::<i32>();
        let kinds = b
            .column_by_name(tarn::CHANGE_TYPE)
            .unwrap()
            .as_string::<i32>();
        let versions = b
            .column_by_name(tarn::COMMIT_VERSION)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        let stamps = b
            .column_by_name(tarn::COMMIT_TIMESTAMP)
            .unwrap()
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        for i in 0..b.num_rows() {
            out.push((
                ids.is_valid(i).then(|| ids.value(i)),
                vs.is_valid(i).then(|| vs.value(i).to_string()),
                kinds.value(i).to_string(),
                versions.value(i),
                stamps.value(i) / 1000,
            ));
        }
    }
    out.sort();
    out
}

/// The values of the first column (an `Int64` one, as a scan selecting one id column
/// returns) of `batches`, sorted.
pub fn sorted_ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    ids.sort_unstable();
    ids
}
