//! Spark with Delta Lake, the reference implementation, against Tarn both ways: every
//! kind of table and commit Tarn writes reads in Spark with Tarn's rows at every version,
//! with `DESCRIBE HISTORY` and time travel working; and tables Spark writes (deletion
//! vectors, column mapping, V2 checkpoints, INT96 timestamps) read in Tarn as Spark reads
//! them. One Spark process serves the whole file (see `tarn_tests::spark`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, TimestampMicrosecondType};
use futures::future::BoxFuture;
use tarn::ChangeStrategy;
use tarn::expr::{col, lit, source_col};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{CommitOutcome, SchemaMode, Table, WriteMode};
use tarn_tests::fixtures::{all_types_batch, all_types_schema, sales_batch, sales_schema};
use tarn_tests::grouped::{Write, append_write, commit_grouped, delete_write};
use tarn_tests::rows::{canonical_rows, row_count};
use tarn_tests::spark::{delta_table, spark};
use tarn_tests::spark_checks::{
    assert_same_in_spark, assert_same_in_spark_at, assert_tarn_reads_like_spark, spark_sql,
};

async fn wait_checkpoint(outcome: &tarn::CommitOutcome) {
    if let Some(task) = &outcome.checkpoint {
        task.wait().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_writes_read_the_same_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();

    // Every data type Tarn writes, over two appends.
    let dir = root.path().join("types");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&all_types_schema())
        .execute()
        .await
        .unwrap();
    table.append([all_types_batch(0, 50)]).await.unwrap();
    table.append([all_types_batch(50, 120)]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "every data type").await;

    // Partitioned by values that need escaping and by nulls; checkpointed every 3;
    // overwritten whole and by partition.
    let dir = root.path().join("sales");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.checkpointInterval", "3")
        .execute()
        .await
        .unwrap();
    for i in 0..4 {
        let outcome = table
            .append([sales_batch(i * 25, i * 25 + 25)])
            .await
            .unwrap();
        wait_checkpoint(&outcome.commit).await;
    }
    assert!(
        dir.join("_delta_log/00000000000000000003.checkpoint.parquet")
            .exists()
    );
    table
        .write([tarn_tests::fixtures::only_country(
            &sales_batch(500, 540),
            "../x y=z%/:#",
        )])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("../x y=z%/:#")))
        .execute()
        .await
        .unwrap();
    table
        .delete_partitions(col("country").is_null())
        .await
        .unwrap();
    let outcome = table.overwrite([sales_batch(1000, 1030)]).await.unwrap();
    wait_checkpoint(&outcome.commit).await;
    assert_same_in_spark(spark, &table, &dir, "partitioned, checkpointed").await;

    // Schema evolution and property changes.
    let dir = root.path().join("evolving");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 20)]).await.unwrap();
    let _ = table
        .add_columns([StructField::new(
            "note",
            DeltaType::Primitive(PrimitiveType::String),
            true,
        )])
        .await
        .unwrap();
    let wider = tarn_tests::fixtures::with_column(
        &sales_batch(20, 30),
        Field::new("rank", DataType::Int64, true),
        Arc::new(Int64Array::from_iter((20..30).map(Some))),
    );
    table
        .write([wider])
        .with_schema_mode(SchemaMode::AddColumns)
        .execute()
        .await
        .unwrap();
    let _ = table
        .set_properties([
            ("delta.logRetentionDuration", "interval 60 days"),
            ("team", "tarn"),
        ])
        .await
        .unwrap();
    table.append([sales_batch(30, 35)]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "evolving schema and properties").await;
    let properties = spark.sql(&format!("SHOW TBLPROPERTIES {}", delta_table(&dir)));
    assert!(
        properties
            .iter()
            .any(|r| r["key"] == "team" && r["value"] == "tarn"),
        "{properties:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_changes_read_the_same_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    for (name, strategy, inline) in [
        ("cow", ChangeStrategy::CopyOnWrite, "64"),
        ("mor-inline", ChangeStrategy::MergeOnRead, "4096"),
        ("mor-files", ChangeStrategy::MergeOnRead, "0"),
    ] {
        let dir = root.path().join(name);
        let mut table = Table::create(dir.to_str().unwrap())
            .with_arrow_schema(&sales_schema())
            .with_partition_columns(["country"])
            .with_property("delta.enableDeletionVectors", "true")
            .with_property(tarn::protocol::properties::DV_INLINE_THRESHOLD, inline)
            .execute()
            .await
            .unwrap();
        table.append([sales_batch(0, 200)]).await.unwrap();
        table.append([sales_batch(200, 300)]).await.unwrap();
        table
            .delete(col("customer").eq(lit("customer-3")))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        table
            .update()
            .filter(col("id").lt(lit(50i64)))
            .set("amount", col("amount") * lit(2.0))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        // A second delete on files that already have a deletion vector unions them.
        table
            .delete(col("id").gt_eq(lit(280i64)))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        let source = sales_batch(150, 320);
        table
            .merge([source])
            .on(["id"])
            .when_matched_update(None, [("amount", source_col("amount") + lit(1.0))])
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        let dvs = table
            .snapshot()
            .files()
            .filter(|a| a.deletion_vector.is_some())
            .count();
        assert_eq!(dvs > 0, strategy == ChangeStrategy::MergeOnRead, "{name}");
        table.optimize().execute().await.unwrap();
        assert_same_in_spark(spark, &table, &dir, name).await;

        // Vacuum leaves the latest version readable in Spark.
        let tomorrow = tarn::ManualClock::starting_now();
        tomorrow.advance(86_400_000);
        let vacuumed = table
            .clone()
            .with_clock(Arc::new(tomorrow))
            .vacuum()
            .with_retention(Duration::ZERO)
            .with_enforce_retention(false)
            .execute()
            .await
            .unwrap();
        assert!(!vacuumed.files.is_empty(), "{name}: vacuum deleted nothing");
        assert_same_in_spark_at(spark, &dir, table.version(), name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_time_travels_to_tarn_versions_by_timestamp() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("travel");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    for i in 0..3 {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
    }
    for tarn::VersionInfo {
        version,
        timestamp_ms: millis,
    } in table.versions().await.unwrap()
    {
        let at = chrono::DateTime::from_timestamp_millis(millis)
            .unwrap()
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string();
        let theirs = spark.read_at_timestamp(&dir, &at);
        assert_eq!(
            row_count(&theirs),
            version as usize * 10,
            "version {version} at {at}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_spark_writes_read_the_same_in_tarn() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();

    // Deletion vectors: deletes, updates and a merge, then OPTIMIZE.
    let dir = root.path().join("dv");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, name STRING, part INT) USING delta PARTITIONED BY (part) \
             TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
            "INSERT INTO {t} SELECT id, CONCAT('n', CAST(id AS STRING)), CAST(id % 3 AS INT) FROM range(300)",
            "DELETE FROM {t} WHERE id % 7 = 0",
            "UPDATE {t} SET name = 'updated' WHERE id % 11 = 0",
            "MERGE INTO {t} AS t USING (SELECT id, 'merged' AS name, CAST(id % 3 AS INT) AS part \
             FROM range(250, 350)) AS s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT *",
            "OPTIMIZE {t}",
        ],
    );
    let table = assert_tarn_reads_like_spark(spark, &dir, "Spark deletion vectors").await;
    assert!(
        table
            .snapshot()
            .protocol()
            .has_reader_feature("deletionVectors")
    );

    // Column mapping, by name and by id, with a rename and a drop.
    for mode in ["name", "id"] {
        let dir = root.path().join(format!("mapping-{mode}"));
        spark_sql(
            spark,
            &dir,
            &[
                &format!(
                    "CREATE TABLE {{t}} (id BIGINT, old_name STRING, gone DOUBLE, p STRING) USING delta \
                     PARTITIONED BY (p) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')"
                ),
                "INSERT INTO {t} VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (3, NULL, NULL, NULL)",
                "ALTER TABLE {t} RENAME COLUMN old_name TO new_name",
                "ALTER TABLE {t} DROP COLUMN gone",
                "ALTER TABLE {t} ADD COLUMNS (extra INT)",
                "INSERT INTO {t} VALUES (4, 'd', 'x', 40)",
            ],
        );
        assert_tarn_reads_like_spark(spark, &dir, &format!("Spark column mapping {mode}")).await;
    }

    // V2 checkpoints.
    let dir = root.path().join("v2");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta TBLPROPERTIES \
             ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')",
            "INSERT INTO {t} VALUES (1, 'a')",
            "INSERT INTO {t} VALUES (2, 'b')",
            "INSERT INTO {t} VALUES (3, 'c')",
            "DELETE FROM {t} WHERE id = 2",
            "INSERT INTO {t} VALUES (5, 'e')",
        ],
    );
    let v2_checkpoints = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.contains(".checkpoint.") && name.matches('.').count() >= 3
        })
        .count();
    assert!(v2_checkpoints > 0, "Spark wrote no V2 checkpoint");
    assert_tarn_reads_like_spark(spark, &dir, "Spark V2 checkpoints").await;
}

/// Microseconds since the epoch of a UTC date and time.
fn micros(text: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .unwrap()
        .and_utc()
        .timestamp_micros()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int96_timestamps_spark_writes_read_exactly_across_their_range() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("int96");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, ts TIMESTAMP) USING delta",
            "INSERT INTO {t} VALUES (1, TIMESTAMP '9999-12-31 23:59:59.999999 UTC'), \
             (2, TIMESTAMP '0001-01-01 00:00:00 UTC'), (3, TIMESTAMP '1970-01-01 00:00:00.000001 UTC'), \
             (4, TIMESTAMP '1677-09-21 00:12:43.145224 UTC'), (5, NULL)",
        ],
    );
    let data = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "parquet"))
        .unwrap();
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(data.path()).unwrap())
            .unwrap();
    let descr = parquet::file::reader::FileReader::metadata(&reader)
        .file_metadata()
        .schema_descr_ptr();
    assert_eq!(
        descr.column(1).physical_type(),
        parquet::basic::Type::INT96,
        "Spark wrote the timestamps as INT96"
    );

    let mut table = assert_tarn_reads_like_spark(spark, &dir, "INT96 timestamps").await;
    let expected = [
        (1, Some(micros("9999-12-31 23:59:59.999999"))),
        (2, Some(micros("0001-01-01 00:00:00"))),
        (3, Some(1)),
        (4, Some(micros("1677-09-21 00:12:43.145224"))),
        (5, None),
    ];
    assert_eq!(timestamps(&table).await, expected);
    // Statistics of the extremes prune, and the predicate keeps the right row.
    let late = table
        .scan()
        .filter(col("ts").gt(lit(tarn::expr::Scalar::Timestamp(micros(
            "9000-01-01 00:00:00",
        )))))
        .collect()
        .await
        .unwrap();
    assert_eq!(row_count(&late), 1);

    // A copy-on-write rewrite of the INT96 files keeps every value; Spark agrees.
    table
        .delete(col("id").eq(lit(3i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let kept: Vec<_> = expected
        .iter()
        .filter(|(id, _)| *id != 3)
        .cloned()
        .collect();
    assert_eq!(timestamps(&table).await, kept);
    assert_same_in_spark_at(spark, &dir, table.version(), "INT96 after a rewrite").await;
}

/// `(id, ts)` of every row, sorted by id.
async fn timestamps(table: &Table) -> Vec<(i64, Option<i64>)> {
    let batches = table.scan().collect().await.unwrap();
    let mut out = Vec::new();
    for batch in &batches {
        let ids = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        let ts = batch.column(1).as_primitive::<TimestampMicrosecondType>();
        for i in 0..batch.num_rows() {
            out.push((ids.value(i), ts.is_valid(i).then(|| ts.value(i))));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_tarn_appends_to_tables_spark_created() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shared");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, name STRING) USING delta",
            "INSERT INTO {t} VALUES (1, 'spark')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![2, 3])),
            Arc::new(StringArray::from(vec![Some("tarn"), None])),
        ],
    )
    .unwrap();
    table.append([batch]).await.unwrap();
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (4, 'spark again')"]);
    table.refresh().await.unwrap();
    assert_eq!(table.version(), 3);
    assert_same_in_spark(spark, &table, &dir, "Spark, Tarn, Spark").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_describes_the_history_of_every_kind_of_tarn_commit() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("every-kind");
    let table = tarn_tests::fixtures::every_commit_kind(dir.to_str().unwrap()).await;
    assert_same_in_spark(spark, &table, &dir, "every kind of commit").await;
    let history = spark.history(&dir);
    let custom = history.iter().find(|r| r["operation"] == "CUSTOM").unwrap();
    assert_eq!(
        custom["operationParameters"],
        serde_json::json!({"count": "3", "flags": "[true,false]", "nothing": "null"})
    );
    let properties = history
        .iter()
        .find(|r| r["operation"] == "SET TBLPROPERTIES")
        .unwrap();
    assert_eq!(
        properties["operationParameters"]["properties"],
        serde_json::json!(r#"["owner","delta.checkpointInterval"]"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_and_writes_indexed_tables() {
    use tarn::{IndexKind, IndexMode};
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("indexed");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 120)]).await.unwrap();
    table.create_index("customer").execute().await.unwrap();
    table
        .create_index("id")
        .with_kind(IndexKind::Bitmap)
        .with_mode(IndexMode::Deferred)
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(120, 200)]).await.unwrap();
    table
        .delete(col("customer").eq(lit("customer-4")))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table.optimize_indices().await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "indexed").await;

    // Spark appends and deletes: its files are not indexed, and Tarn still answers
    // exactly, through the index where it covers and statistics elsewhere.
    spark_sql(
        spark,
        &dir,
        &[
            "INSERT INTO {t} SELECT id, 'customer-9', 'NL', 1.0, current_timestamp(), \
             current_date() FROM range(1000, 1010)",
            "DELETE FROM {t} WHERE id = 5",
        ],
    );
    table.refresh().await.unwrap();
    for key in ["customer-9", "customer-1"] {
        let predicate = col("customer").eq(lit(key));
        let with = table
            .scan()
            .filter(predicate.clone())
            .collect()
            .await
            .unwrap();
        let without = table
            .scan()
            .filter(predicate)
            .with_indices(false)
            .collect()
            .await
            .unwrap();
        assert_eq!(canonical_rows(&with), canonical_rows(&without), "{key}");
    }
    assert!(table.snapshot().domain_metadata("tarn.indices").is_some());
    let info = table.indices().unwrap();
    assert!(info.iter().all(|i| i.files_covered < i.files_total));
    table.optimize_indices().await.unwrap();
    assert!(
        table
            .indices()
            .unwrap()
            .iter()
            .all(|i| i.files_covered == i.files_total)
    );
    let _ = table.drop_index("id_idx").await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "indexed, after Spark").await;
}

/// The `add` fields of the checkpoint at `version` (by name), and whether its `stats` column
/// holds any JSON.
fn checkpoint_add_fields(dir: &Path, version: i64) -> (Vec<String>, bool) {
    let path = dir.join(format!("_delta_log/{version:020}.checkpoint.parquet"));
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let (mut fields, mut json) = (Vec::new(), false);
    for batch in reader {
        let batch = batch.unwrap();
        let add = batch.column_by_name("add").unwrap().as_struct();
        fields = add.fields().iter().map(|f| f.name().clone()).collect();
        if let Some(stats) = add.column_by_name("stats") {
            json |= stats.null_count() < stats.len();
        }
    }
    (fields, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_checkpoint_statistics_work_both_ways_with_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();

    // Spark writes typed statistics only: Tarn reads them, prunes and counts with them.
    let dir = root.path().join("spark-typed");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, name STRING, at TIMESTAMP, day DATE, \
             amount DECIMAL(10,2), part INT) USING delta PARTITIONED BY (part) TBLPROPERTIES \
             ('delta.checkpoint.writeStatsAsStruct' = 'true', \
              'delta.checkpoint.writeStatsAsJson' = 'false', 'delta.checkpointInterval' = '3')",
            "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, CONCAT('n', CAST(id AS STRING)), \
             TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id), \
             DATE'2024-01-01' + CAST(id AS INT), CAST(id AS DECIMAL(10,2)) / 4, 0 FROM range(0, 100)",
            "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, CONCAT('n', CAST(id AS STRING)), \
             TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id), \
             DATE'2024-01-01' + CAST(id AS INT), CAST(id AS DECIMAL(10,2)) / 4, 0 FROM range(100, 200)",
            "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, CONCAT('n', CAST(id AS STRING)), \
             TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id), \
             DATE'2024-01-01' + CAST(id AS INT), CAST(id AS DECIMAL(10,2)) / 4, 1 FROM range(200, 300)",
        ],
    );
    let (fields, json) = checkpoint_add_fields(&dir, 3);
    assert!(
        fields.contains(&"stats_parsed".to_string()),
        "Spark wrote {fields:?}"
    );
    assert!(!json, "Spark wrote JSON statistics too");
    let table = assert_tarn_reads_like_spark(spark, &dir, "Spark typed statistics").await;
    let records: u64 = table
        .snapshot()
        .files()
        .map(|a| a.stats.as_ref().and_then(|s| s.num_records()).unwrap())
        .sum();
    assert_eq!(records, 300);
    let plan = table
        .scan()
        .filter(col("id").gt_eq(lit(150i64)).and(col("part").eq(lit(0i32))))
        .plan()
        .await
        .unwrap();
    assert_eq!(
        plan.files.len(),
        1,
        "only the second insert's file holds ids >= 150 in part 0"
    );
    assert_eq!(plan.skipped_by_stats, 1);
    let plan = table
        .scan()
        .filter(col("day").lt(lit(tarn::expr::Scalar::date("2024-02-01").unwrap())))
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.files.len(), 1, "dates bound by typed statistics");
    let counted = table.scan().count_outcome().await.unwrap();
    assert_eq!((counted.rows, counted.files_read), (300, 0));

    // Tarn writes typed statistics only: Spark reads the table the same.
    let dir = root.path().join("tarn-typed");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.checkpoint.writeStatsAsJson", "false")
        .with_property("delta.checkpointInterval", "2")
        .execute()
        .await
        .unwrap();
    for i in 0..3 {
        let outcome = table
            .write([sales_batch(i * 50, i * 50 + 50)])
            .execute()
            .await
            .unwrap();
        wait_checkpoint(&outcome.commit).await;
    }
    let (fields, json) = checkpoint_add_fields(&dir, 2);
    assert!(fields.contains(&"stats_parsed".to_string()), "{fields:?}");
    assert!(!json);
    assert_same_in_spark(spark, &table, &dir, "Tarn typed statistics").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_commits_carrying_other_writers() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("grouped");
    let mut table = tarn_tests::fixtures::country_sales_table(&dir).await;
    let location = table.snapshot().location().clone();
    // Two writers' appends in one commit, then an append carried by the commit of a
    // copy-on-write update (removes and rewritten files beside the carried adds).
    commit_grouped(
        &location,
        append_write(sales_batch(100, 150)),
        append_write(sales_batch(150, 200)),
    )
    .await;
    let update: Write = Box::new(
        |t: &mut Table| -> BoxFuture<'_, tarn::Result<CommitOutcome>> {
            Box::pin(async move {
                t.update()
                    .filter(col("id").lt(lit(40)))
                    .set("amount", col("amount") + lit(1.0))
                    .with_strategy(ChangeStrategy::CopyOnWrite)
                    .execute()
                    .await
                    .map(|o| o.commit)
            })
        },
    );
    let latest = commit_grouped(&location, update, append_write(sales_batch(200, 250))).await;
    table.refresh().await.unwrap();
    assert_eq!(table.version(), latest);
    assert_same_in_spark(spark, &table, &dir, "grouped commits").await;
    // Two merge-on-read deletes of rows in the same files, carried in one commit: each
    // file's DV unites both writers' rows.
    let _ = table
        .set_properties([("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    let delete = |predicate| delete_write(predicate, ChangeStrategy::MergeOnRead);
    let united = commit_grouped(
        &location,
        delete(col("id").lt(lit(10))),
        delete(col("id").gt_eq(lit(60)).and(col("id").lt(lit(70)))),
    )
    .await;
    let actions = tarn_tests::log::actions_at(&location, united).await;
    let adds: Vec<&str> = actions
        .iter()
        .filter_map(|a| a["add"]["path"].as_str())
        .collect();
    let distinct: std::collections::BTreeSet<&str> = adds.iter().copied().collect();
    assert_eq!(adds.len(), distinct.len(), "a file added twice: {adds:?}");
    assert!(
        actions
            .iter()
            .any(|a| a["add"]["deletionVector"]["cardinality"].as_i64() > Some(1)),
        "no DV united rows: {actions:?}"
    );
    table.refresh().await.unwrap();
    assert_eq!(table.version(), united);
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 250 - 20);
    assert_same_in_spark(spark, &table, &dir, "deletion vectors united in a group").await;
}
