//! Writes fed by a stream of batches, on the local file system: files are written while
//! the stream is still producing (a stream that waits for the first data file to appear
//! would wait forever if the input were collected first), a `RecordBatchReader` feeds a
//! write as a stream does, a failing stream commits nothing, identity values continue
//! across batches, a later batch that does not fit fails the write, and a long stream is
//! encoded on every core in runs of consecutive rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};
use tarn::{Error, Table, WriteMode};
use tarn_tests::part_rows::{batch, schema};
use tarn_tests::rows::{row_count, sorted_ids};

/// Rows `from..from + n` in partition `p0`.
fn rows(from: i64, n: i64) -> RecordBatch {
    let rows: Vec<(i64, String)> = (from..from + n).map(|i| (i, "p0".to_string())).collect();
    batch(&rows)
}

/// Rows `from..from + n` with their ids scrambled, so they do not encode to nearly
/// nothing and files fill up.
fn scrambled(from: i64, n: i64) -> RecordBatch {
    let rows: Vec<(i64, String)> = (from..from + n)
        .map(|i| {
            (
                (i.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64)) >> 1,
                "p0".to_string(),
            )
        })
        .collect();
    batch(&rows)
}

async fn table(dir: &std::path::Path) -> Table {
    Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .execute()
        .await
        .unwrap()
}

fn data_files(dir: &std::path::Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("_delta_log") {
                out.extend(walk(&path));
            }
        } else {
            out.push(path);
        }
    }
    out
}

async fn count(table: &Table) -> usize {
    row_count(&table.scan().collect().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_written_while_the_stream_is_still_producing() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(dir.path()).await;
    let root = dir.path().to_path_buf();
    const BATCHES: i64 = 60;
    const ROWS: i64 = 10_000;
    let stream = futures::stream::unfold(0i64, move |i| {
        let root = root.clone();
        async move {
            if i == BATCHES {
                return None;
            }
            // Halfway, wait for a data file: a write that collected its input first
            // would never write one, and this stream fails after a minute.
            if i == BATCHES / 2 {
                let mut waited = 0;
                while data_files(&root) == 0 {
                    if waited > 6_000 {
                        let e = ArrowError::ComputeError("no file while streaming".into());
                        return Some((Err(e), BATCHES));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    waited += 1;
                }
            }
            Some((Ok(scrambled(i * ROWS, ROWS)), i + 1))
        }
    });
    let outcome = table
        .write_stream(stream)
        .with_target_file_size(128 * 1024)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.rows_written, (BATCHES * ROWS) as u64);
    assert!(outcome.files_added > 2, "{} files", outcome.files_added);
    assert_eq!(count(&table).await, (BATCHES * ROWS) as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_batch_reader_feeds_a_write_and_an_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(dir.path()).await;
    let batches: Vec<Result<RecordBatch, ArrowError>> =
        (0..5).map(|i| Ok(rows(i * 10, 10))).collect();
    let reader = RecordBatchIterator::new(batches, schema());
    let _ = table.write_reader(reader).execute().await.unwrap();
    assert_eq!(count(&table).await, 50);

    let batches: Vec<Result<RecordBatch, ArrowError>> =
        (0..3).map(|i| Ok(rows(i * 10, 10))).collect();
    let reader = RecordBatchIterator::new(batches, schema());
    let outcome = table
        .write_reader(reader)
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("part").eq(lit("p0")))
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.files_removed, 1);
    assert_eq!(count(&table).await, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reader_or_stream_writes_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(dir.path()).await;
    let empty: Vec<Result<RecordBatch, ArrowError>> = Vec::new();
    let outcome = table
        .write_reader(RecordBatchIterator::new(empty, schema()))
        .execute()
        .await
        .unwrap();
    assert_eq!((outcome.rows_written, outcome.files_added), (0, 0));
    let empty = futures::stream::iter(Vec::<Result<RecordBatch, ArrowError>>::new());
    let outcome = table.write_stream(empty).execute().await.unwrap();
    assert_eq!((outcome.rows_written, outcome.files_added), (0, 0));
    assert_eq!(count(&table).await, 0);
}

/// A reader that yields two batches, then panics.
struct Panicking(i64);

impl Iterator for Panicking {
    type Item = Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0 += 1;
        assert!(self.0 <= 2, "the reader broke");
        Some(Ok(rows(self.0 * 10, 10)))
    }
}

impl arrow::array::RecordBatchReader for Panicking {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        schema()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_stream_or_a_batch_that_does_not_fit_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(dir.path()).await;
    let version = table.version();

    let failing = futures::stream::iter(vec![
        Ok(rows(0, 10)),
        Ok(rows(10, 10)),
        Err(ArrowError::IoError(
            "the source went away".into(),
            std::io::Error::other("gone"),
        )),
    ]);
    let err = table.write_stream(failing).execute().await.unwrap_err();
    assert!(matches!(err, Error::InputStream { .. }), "{err}");
    assert!(err.to_string().contains("the source went away"), "{err}");

    // A reader that panics is a failed input, never an early end.
    let err = table
        .write_reader(Panicking(0))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InputStream { .. }), "{err}");

    // A later batch with a column the first did not bring.
    let wider = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("part", DataType::Utf8, false),
            Field::new("extra", DataType::Int64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![99])),
            Arc::new(StringArray::from(vec!["p0"])),
            Arc::new(Int64Array::from(vec![1])),
        ],
    )
    .unwrap();
    let mixed = futures::stream::iter(vec![Ok::<_, ArrowError>(rows(0, 10)), Ok(wider)]);
    let err = table.write_stream(mixed).execute().await.unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");

    // An overwrite of p0 whose later batch holds a row of p1.
    let outside = batch(&[(5, "p1".to_string())]);
    let stream = futures::stream::iter(vec![Ok::<_, ArrowError>(rows(0, 10)), Ok(outside)]);
    let err = table
        .write_stream(stream)
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("part").eq(lit("p0")))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");

    let reopened = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(reopened.version(), version);
    assert_eq!(count(&reopened).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_values_continue_across_the_batches_of_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut id = StructField::new("id", DeltaType::Primitive(PrimitiveType::Long), false);
    id.metadata.insert("delta.identity.start".into(), 1.into());
    id.metadata.insert("delta.identity.step".into(), 1.into());
    id.metadata
        .insert("delta.identity.allowExplicitInsert".into(), false.into());
    let schema = StructType::new(vec![
        id,
        StructField::new("v", DeltaType::Primitive(PrimitiveType::String), true),
    ]);
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_schema(schema)
        .execute()
        .await
        .unwrap();
    let values = |n: usize| {
        let v: StringArray = (0..n).map(|i| Some(format!("v{i}"))).collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)])),
            vec![Arc::new(v)],
        )
        .unwrap()
    };
    let stream = futures::stream::iter((0..4).map(move |_| Ok::<_, ArrowError>(values(5))));
    let _ = table.write_stream(stream).execute().await.unwrap();
    let _ = table.append([values(2)]).await.unwrap();
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, (1..=22).collect::<Vec<i64>>());
}

/// A stream longer than one encoder's run (64 MiB of Arrow data) is encoded on every
/// core, each run of consecutive rows into files of its own: the files' key ranges tile
/// the input without overlapping, so their statistics stay as tight as a single encoder
/// would leave them, and every row is there once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_stream_is_encoded_in_runs_of_consecutive_rows_on_every_core() {
    const ROWS: i64 = 10_000_000;
    const BATCH: i64 = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let keys = Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, false)]));
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&keys)
        .execute()
        .await
        .unwrap();
    let schema = Arc::clone(&keys);
    let batches = (0..ROWS).step_by(BATCH as usize).map(move |from| {
        let ids = Int64Array::from_iter_values(from..(from + BATCH).min(ROWS));
        RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(ids)])
    });
    let outcome = table
        .write_reader(RecordBatchIterator::new(batches, keys))
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.rows_written, ROWS as u64);
    let mut ranges: Vec<(i64, i64, i64)> = table
        .snapshot()
        .files()
        .map(|add| {
            let stats: serde_json::Value =
                serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
            (
                stats["minValues"]["key"].as_i64().unwrap(),
                stats["maxValues"]["key"].as_i64().unwrap(),
                stats["numRecords"].as_i64().unwrap(),
            )
        })
        .collect();
    ranges.sort();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(ranges.len() > 1, cores > 1, "{ranges:?}");
    let mut next = 0;
    for (min, max, rows) in &ranges {
        assert_eq!((*min, max - min + 1), (next, *rows), "{ranges:?}");
        next = max + 1;
    }
    assert_eq!(next, ROWS);
    assert_eq!(count(&table).await, ROWS as usize);
}
