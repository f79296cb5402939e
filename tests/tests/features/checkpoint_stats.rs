//! Typed statistics in checkpoints (`stats_parsed`, `partitionValues_parsed`), written as
//! Spark writes them and read instead of the JSON: tables plan, prune and count the same
//! whichever form a checkpoint holds, and a large checkpoint is read by the columns Tarn
//! decodes, not whole.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStore;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tarn::expr::{col, lit};
use tarn::protocol::Add;
use tarn::{Snapshot, Table};
use tarn_store::CountingStore;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("day", DataType::Int32, true),
    ]))
}

/// File `i`: ids `i*100 .. i*100+100`, in day `i % 3`.
fn batch(i: i64) -> RecordBatch {
    let ids: Vec<i64> = (i * 100..i * 100 + 100).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from_iter(
                ids.iter().map(|id| (id % 7 != 0).then(|| format!("n{id}"))),
            )),
            Arc::new(Int32Array::from(vec![(i % 3) as i32; ids.len()])),
        ],
    )
    .unwrap()
}

/// The `add` struct column of a table's latest checkpoint.
fn checkpoint_adds(dir: &std::path::Path, version: i64) -> arrow::array::StructArray {
    let path = dir.join(format!("_delta_log/{version:020}.checkpoint.parquet"));
    let file = std::fs::File::open(path).unwrap();
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    batch.column_by_name("add").unwrap().as_struct().clone()
}

fn stats_json(add: &Add) -> serde_json::Value {
    serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_plan_and_count_alike_whichever_statistics_their_checkpoints_hold() {
    // (writeStatsAsJson, writeStatsAsStruct); Spark's default is both.
    for (as_json, as_struct) in [(true, true), (false, true), (true, false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut table = Table::create(dir.path().to_str().unwrap())
            .with_arrow_schema(&schema())
            .with_partition_columns(["day"])
            .with_property("delta.checkpointInterval", "1000")
            .with_property("delta.checkpoint.writeStatsAsJson", as_json.to_string())
            .with_property("delta.checkpoint.writeStatsAsStruct", as_struct.to_string())
            .execute()
            .await
            .unwrap();
        for i in 0..6 {
            table.append([batch(i)]).await.unwrap();
        }
        let before: Vec<(String, serde_json::Value)> = table
            .snapshot()
            .files()
            .map(|a| (a.path.clone(), stats_json(a)))
            .collect();
        let written = table.checkpoint().await.unwrap();

        let adds = checkpoint_adds(dir.path(), written.version);
        let what = format!("json {as_json}, struct {as_struct}");
        assert_eq!(
            adds.column_by_name("stats_parsed").is_some(),
            as_struct,
            "{what}"
        );
        assert_eq!(
            adds.column_by_name("partitionValues_parsed").is_some(),
            as_struct,
            "{what}"
        );
        // Rows of other actions are null too: all null means no file has JSON.
        let json = adds.column_by_name("stats").unwrap();
        assert_eq!(
            json.null_count() == json.len(),
            !as_json,
            "{what}: JSON statistics are written only when asked for"
        );

        // A fresh reader gets the same statistics, from whichever form is there.
        let reopened = Table::open(dir.path().to_str().unwrap()).await.unwrap();
        let mut after: Vec<(String, serde_json::Value)> = reopened
            .snapshot()
            .files()
            .map(|a| (a.path.clone(), stats_json(a)))
            .collect();
        let mut before = before.clone();
        before.sort_by(|a, b| a.0.cmp(&b.0));
        after.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(after, before, "{what}");
        for add in reopened.snapshot().files() {
            assert_eq!(add.stats.as_ref().unwrap().num_records(), Some(100));
        }

        // Pruning by statistics and by partition, and counting from the log.
        let plan = reopened
            .scan()
            .filter(col("id").eq(lit(250i64)))
            .plan()
            .await
            .unwrap();
        assert_eq!((plan.files.len(), plan.skipped_by_stats), (1, 5), "{what}");
        let plan = reopened
            .scan()
            .filter(col("day").eq(lit(1i32)).and(col("id").gt_eq(lit(400i64))))
            .plan()
            .await
            .unwrap();
        assert_eq!(plan.files.len(), 1, "{what}: file 4 of days 1 and 4");
        assert_eq!(plan.skipped_by_partition, 4, "{what}");
        let outcome = reopened.scan().count_outcome().await.unwrap();
        assert_eq!(outcome.rows, 600, "{what}");
        assert_eq!(outcome.files_read, 0, "{what}: counted from the log");
        let bounds = reopened.scan().min_max("id").await.unwrap();
        assert!(bounds.from_log, "{what}: MIN/MAX from the statistics");
        assert_eq!(
            bounds.bounds,
            Some((tarn::expr::Scalar::Long(0), tarn::expr::Scalar::Long(599)))
        );
        let day = reopened
            .scan()
            .filter(col("day").eq(lit(2i32)))
            .count_outcome()
            .await
            .unwrap();
        assert_eq!((day.rows, day.files_read), (200, 0), "{what}");
        let rows = reopened
            .scan()
            .filter(col("name").is_null())
            .count()
            .await
            .unwrap();
        assert_eq!(rows, (0..600).filter(|id| id % 7 == 0).count() as u64);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_checkpoints_are_read_by_the_columns_tarn_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&schema())
        .with_property("delta.checkpointInterval", "1000")
        .execute()
        .await
        .unwrap();
    // 40,000 files (never read) with statistics that compress badly (hashes): a checkpoint
    // of several MiB, most of it the JSON statistics a typed reader does not need.
    let hash = |i: i64, salt: u64| {
        format!(
            "{:016x}",
            (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        )
    };
    for chunk in 0..4 {
        let mut txn = table.transaction();
        for i in chunk * 10_000..(chunk + 1) * 10_000 {
            txn.add_file(Add {
                path: format!("part-{i:06}-with-a-longish-name-like-spark-writes.parquet"),
                partition_values: Default::default(),
                size: 1_000,
                modification_time: i,
                data_change: true,
                stats: Some(
                    format!(
                        r#"{{"numRecords":{n},"minValues":{{"id":{lo},"name":"a{a}{b}"}},"maxValues":{{"id":{hi},"name":"z{c}{d}"}},"nullCount":{{"id":0,"name":{nulls},"day":0}}}}"#,
                        n = 10 + i % 5,
                        lo = i * 10,
                        hi = i * 10 + 9,
                        nulls = i % 3,
                        a = hash(i, 1),
                        b = hash(i, 2),
                        c = hash(i, 3),
                        d = hash(i, 4),
                    )
                    .into(),
                ),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            });
        }
        let _ = table.commit(txn).await.unwrap();
    }
    let written = table.checkpoint().await.unwrap();
    assert!(
        written.size_in_bytes > 4 * 1024 * 1024,
        "{} bytes: too small to be read by columns",
        written.size_in_bytes
    );

    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let counting = CountingStore::new(Arc::clone(location.store()) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let snapshot = Snapshot::builder(location.with_store(Arc::new(counting)))
        .build()
        .await
        .unwrap();
    let read = counter.take();
    assert!(
        read.bytes_read < written.size_in_bytes * 2 / 3,
        "read {} of a {}-byte checkpoint",
        read.bytes_read,
        written.size_in_bytes
    );

    // The same files and statistics as the commits hold.
    let mut want: Vec<(String, serde_json::Value)> = table
        .snapshot()
        .files()
        .map(|a| (a.path.clone(), stats_json(a)))
        .collect();
    let mut got: Vec<(String, serde_json::Value)> = snapshot
        .files()
        .map(|a| (a.path.clone(), stats_json(a)))
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got.len(), 40_000);
    assert_eq!(got, want);
    // And they prune: ids 123,450..123,459 are in file 12,345 alone.
    let plan = snapshot
        .scan()
        .filter(col("id").eq(lit(123_455i64)))
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.files.len(), 1);
    assert!(plan.files[0].path.starts_with("part-012345-"));
}
