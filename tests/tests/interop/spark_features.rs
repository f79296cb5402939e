//! Table features against Spark, both ways: tables Spark creates with a feature take
//! Tarn's writes and read back in Spark with Tarn's rows at every version, and tables
//! Tarn creates with it read in Spark and take Spark's changes. Column mapping (name and
//! id, with renames and drops) and in-commit timestamps so far; the features Tarn cannot
//! maintain yet refuse every write that would break them. One Spark process serves the
//! whole file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::ChangeStrategy;
use tarn::expr::{col, lit, source_col};
use tarn::{SchemaMode, Table};
use tarn_tests::fixtures::{
    all_types_batch, all_types_schema, country_sales_table, sales_batch, sales_schema, snapshot_at,
    with_column,
};
use tarn_tests::log::in_commit_timestamps;
use tarn_tests::rows::{Change, align, canonical_rows, change_rows};
use tarn_tests::spark::spark;
use tarn_tests::spark_checks::{
    assert_same_in_spark, assert_same_in_spark_at, assert_tarn_reads_like_spark, spark_sql,
};

/// Rows `(id, v)`, `v` the id after `prefix`.
fn id_rows(ids: std::ops::Range<i64>, prefix: &str) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    let values: StringArray = ids.clone().map(|i| Some(format!("{prefix}{i}"))).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(values),
        ],
    )
    .unwrap()
}

/// Rows `(id, name, p)` with `p` the id modulo 3, as text.
fn named_rows(ids: std::ops::Range<i64>, prefix: &str) -> RecordBatch {
    let parts: StringArray = ids.clone().map(|i| Some((i % 3).to_string())).collect();
    with_column(
        &renamed(&id_rows(ids, prefix), "v", "name"),
        Field::new("p", DataType::Utf8, true),
        Arc::new(parts),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_spark_maps_take_tarn_writes_around_renames_and_drops() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    for mode in ["name", "id"] {
        let dir = root.path().join(format!("spark-{mode}"));
        let what = format!("Spark-mapped by {mode}");
        spark_sql(
            spark,
            &dir,
            &[
                &format!(
                    "CREATE TABLE {{t}} (id BIGINT, old_name STRING, gone DOUBLE, p STRING) \
                     USING delta PARTITIONED BY (p) TBLPROPERTIES \
                     ('delta.columnMapping.mode' = '{mode}', 'delta.enableDeletionVectors' = 'true')"
                ),
                "INSERT INTO {t} SELECT id, CONCAT('n', CAST(id AS STRING)), id * 1.5, \
                 CAST(id % 3 AS STRING) FROM range(100)",
                "ALTER TABLE {t} RENAME COLUMN old_name TO name",
                "ALTER TABLE {t} DROP COLUMN gone",
                "DELETE FROM {t} WHERE id % 10 = 0",
            ],
        );
        let mut table = assert_tarn_reads_like_spark(spark, &dir, &what).await;

        // Tarn writes every kind of change under Spark's physical names.
        table.append([named_rows(100..150, "t")]).await.unwrap();
        table
            .delete(col("id").lt(lit(20i64)))
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await
            .unwrap();
        table
            .update()
            .filter(col("p").eq(lit("1")))
            .set("name", lit("updated"))
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        table
            .merge([named_rows(140..170, "m")])
            .on(["id"])
            .when_matched_update(None, [("name", source_col("name"))])
            .when_not_matched_insert_all(None)
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        let extra = with_column(
            &named_rows(200..210, "x"),
            Field::new("extra", DataType::Int64, true),
            Arc::new(Int64Array::from_iter_values(0..10)),
        );
        table
            .write([extra])
            .with_schema_mode(SchemaMode::AddColumns)
            .execute()
            .await
            .unwrap();

        // Spark writes to and renames the column Tarn added; Tarn reads and appends again.
        spark_sql(
            spark,
            &dir,
            &[
                "INSERT INTO {t} VALUES (300, 'spark', '0', 7)",
                "ALTER TABLE {t} RENAME COLUMN extra TO renamed",
            ],
        );
        table.refresh().await.unwrap();
        let renamed = with_column(
            &named_rows(400..405, "r"),
            Field::new("renamed", DataType::Int64, true),
            Arc::new(Int64Array::from_iter_values(40..45)),
        );
        table.append([renamed]).await.unwrap();
        assert_same_in_spark(spark, &table, &dir, &what).await;
    }
}

/// The batch with column `from` named `to`.
fn renamed(batch: &RecordBatch, from: &str, to: &str) -> RecordBatch {
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| match f.name() == from {
            true => f.as_ref().clone().with_name(to),
            false => f.as_ref().clone(),
        })
        .collect();
    let columns: Vec<ArrayRef> = batch.columns().to_vec();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// The sales batch with `customer` renamed `client`, and without `day` unless
/// `with_day`, as the table is after Spark's changes.
fn client_rows(start: i64, end: i64, with_day: bool) -> RecordBatch {
    let batch = sales_batch(start, end);
    let keep = ["id", "customer", "country", "amount", "ts", "day"];
    let indices: Vec<usize> = keep[..if with_day { 6 } else { 5 }]
        .iter()
        .map(|n| batch.schema().index_of(n).unwrap())
        .collect();
    renamed(&batch.project(&indices).unwrap(), "customer", "client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_maps_read_in_spark_and_take_its_renames() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    for mode in ["name", "id"] {
        let what = format!("Tarn-mapped by {mode}");
        let dir = root.path().join(format!("tarn-{mode}"));
        let mut table = Table::create(dir.to_str().unwrap())
            .with_arrow_schema(&sales_schema())
            .with_partition_columns(["country"])
            .with_property("delta.columnMapping.mode", mode)
            .with_property("delta.enableDeletionVectors", "true")
            .execute()
            .await
            .unwrap();
        table.append([sales_batch(0, 200)]).await.unwrap();
        table
            .delete(col("customer").eq(lit("customer-2")))
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        assert_same_in_spark(spark, &table, &dir, &what).await;

        spark_sql(
            spark,
            &dir,
            &[
                "ALTER TABLE {t} RENAME COLUMN customer TO client",
                "ALTER TABLE {t} DROP COLUMN day",
                "INSERT INTO {t} (id, client, country, amount, ts) \
                 VALUES (9999, 'spark', 'NL', 1.0, TIMESTAMP '2026-01-01 00:00:00')",
            ],
        );
        table.refresh().await.unwrap();
        assert_same_in_spark_at(spark, &dir, table.version(), &what).await;
        table.append([client_rows(200, 260, false)]).await.unwrap();
        table
            .update()
            .filter(col("client").eq(lit("customer-1")))
            .set("amount", lit(0.5))
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await
            .unwrap();
        assert_same_in_spark(spark, &table, &dir, &what).await;

        // Nested columns: struct fields, list and map values under their ids and names.
        let dir = root.path().join(format!("tarn-nested-{mode}"));
        let mut table = Table::create(dir.to_str().unwrap())
            .with_arrow_schema(&all_types_schema())
            .with_property("delta.columnMapping.mode", mode)
            .execute()
            .await
            .unwrap();
        table.append([all_types_batch(0, 40)]).await.unwrap();
        spark_sql(
            spark,
            &dir,
            &["ALTER TABLE {t} RENAME COLUMN point TO location"],
        );
        table.refresh().await.unwrap();
        table
            .append([renamed(&all_types_batch(40, 60), "point", "location")])
            .await
            .unwrap();
        assert_same_in_spark(spark, &table, &dir, &format!("{what}, nested")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_renames_columns_of_tables_tarn_turned_mapping_on_for() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("upgraded");
    let mut table = country_sales_table(&dir).await;
    let _ = table
        .set_properties([("delta.columnMapping.mode", "name")])
        .await
        .unwrap();
    table.append([sales_batch(100, 150)]).await.unwrap();
    spark_sql(
        spark,
        &dir,
        &["ALTER TABLE {t} RENAME COLUMN customer TO client"],
    );
    let mut table = assert_tarn_reads_like_spark(spark, &dir, "mapping turned on").await;
    table.append([client_rows(150, 170, true)]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "mapping turned on").await;
}

/// Files in the table's `_delta_log`: a refused write must leave them as they were.
fn log_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("_delta_log")).unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_would_break_a_feature_are_refused_and_commit_nothing() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    // (table, what Spark does, the feature Tarn names, whether appends are safe).
    let cases: [(&str, &[&str], &str, bool); 1] = [(
        "column-defaults",
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING DEFAULT 'none') USING delta \
               TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
        ],
        "allowColumnDefaults",
        false,
    )];
    for (name, statements, feature, appends) in cases {
        let dir = root.path().join(name);
        let mut statements = statements.to_vec();
        statements.push("INSERT INTO {t} (id, v) VALUES (1, 'spark'), (2, 'spark')");
        spark_sql(spark, &dir, &statements);
        let mut table = assert_tarn_reads_like_spark(spark, &dir, name).await;
        let refused = |err: tarn::Error| match &err {
            tarn::Error::UnsupportedWriterFeature { feature: f } if f == feature => {}
            other => panic!("{name}: expected {feature} to be named, got {other}"),
        };
        let before = (table.version(), log_files(&dir));
        if appends {
            table.append([id_rows(10..12, "v")]).await.unwrap();
        } else {
            refused(table.append([id_rows(10..12, "v")]).await.unwrap_err());
        }
        let after_append = (table.version(), log_files(&dir));
        assert_eq!(after_append.0 > before.0, appends, "{name}: append");
        for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
            let deleted = table
                .delete(col("id").eq(lit(1i64)))
                .with_strategy(strategy)
                .execute()
                .await;
            refused(deleted.unwrap_err());
        }
        let updated = table
            .update()
            .set("v", lit("tarn"))
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await;
        refused(updated.unwrap_err());
        let merged = table
            .merge([id_rows(1..3, "v")])
            .on(["id"])
            .when_matched_delete(None)
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await;
        refused(merged.unwrap_err());
        assert_eq!(
            (table.version(), log_files(&dir)),
            after_append,
            "{name}: a refused change committed"
        );
        table.refresh().await.unwrap();
        assert_same_in_spark_at(spark, &dir, table.version(), name).await;
    }

    // Reader features Tarn lacks: the table does not even open, so nothing is misread.
    for (name, statements, feature) in [(
        "shredded-variant",
        &[
            "CREATE TABLE {t} (id BIGINT, v VARIANT) USING delta \
             TBLPROPERTIES ('delta.enableVariantShredding' = 'true')",
            "INSERT INTO {t} SELECT 1, PARSE_JSON('{\"a\": 1}')",
        ][..],
        "variantShredding",
    )] {
        let dir = root.path().join(name);
        spark_sql(spark, &dir, statements);
        let err = Table::open(dir.to_str().unwrap()).await.unwrap_err();
        assert!(
            matches!(&err, tarn::Error::UnsupportedReaderFeature { feature: f } if f.starts_with(feature)),
            "{name}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_commit_timestamps_work_both_ways_with_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spark-ict");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta \
             TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
            "INSERT INTO {t} VALUES (1, 'spark'), (2, 'spark')",
        ],
    );
    // Tarn's clock is years ahead of the files' times: only the stamps tell its versions.
    let clock = Arc::new(tarn::ManualClock::new(1_900_000_000_000));
    let mut table = Table::open(dir.to_str().unwrap())
        .await
        .unwrap()
        .with_clock(clock.clone());
    table.append([id_rows(10..20, "v")]).await.unwrap();
    clock.advance(3_600_000);
    table
        .delete(col("id").eq(lit(12i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    clock.advance(3_600_000);
    table
        .merge([id_rows(15..25, "v")])
        .on(["id"])
        .when_matched_delete(None)
        .when_not_matched_insert_all(None)
        .execute()
        .await
        .unwrap();
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (3, 'spark again')"]);
    table.refresh().await.unwrap();
    table.append([id_rows(30..31, "v")]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "Spark's in-commit timestamps").await;

    let spark_stamps = in_commit_timestamps(&dir, 0, table.version()).await;
    assert!(
        spark_stamps.windows(2).all(|w| w[1] > w[0]),
        "{spark_stamps:?}"
    );
    // Spark travels to each version by its stamp and reads Tarn's rows there.
    for (version, stamp) in spark_stamps.iter().enumerate().skip(2) {
        let at = chrono::DateTime::from_timestamp_millis(*stamp)
            .unwrap()
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string();
        let theirs = spark.read_at_timestamp(&dir, &at);
        let ours = snapshot_at(&dir, version as i64)
            .await
            .scan()
            .collect()
            .await
            .unwrap();
        assert_eq!(
            canonical_rows(&align(&theirs, table.snapshot().arrow_schema())),
            canonical_rows(&ours),
            "Spark at {at}, version {version}"
        );
    }

    // A table Tarn creates with them: Spark reads it and writes to it, Tarn follows.
    let dir = root.path().join("tarn-ict");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&id_rows(0..1, "v").schema())
        .with_property("delta.enableInCommitTimestamps", "true")
        .execute()
        .await
        .unwrap();
    table.append([id_rows(0..5, "v")]).await.unwrap();
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (100, 'spark')"]);
    table.refresh().await.unwrap();
    table.append([id_rows(5..8, "v")]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "Tarn's in-commit timestamps").await;
    let stamps = in_commit_timestamps(&dir, 0, table.version()).await;
    assert!(stamps.windows(2).all(|w| w[1] > w[0]), "{stamps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_spark_widened_read_with_the_wide_types_and_take_writes() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("widened");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, i INT, s SMALLINT, f FLOAT, d DECIMAL(6, 2), day DATE) \
             USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true', \
             'delta.enableDeletionVectors' = 'true', 'delta.feature.timestampNtz' = 'supported')",
            "INSERT INTO {t} VALUES (1, 2147483647, 32767, CAST(1.1 AS FLOAT), 1234.56, DATE '2024-02-29'), \
             (2, -5, -3, CAST(-0.5 AS FLOAT), -0.01, DATE '1999-12-31'), (3, NULL, NULL, NULL, NULL, NULL)",
            "ALTER TABLE {t} CHANGE COLUMN i TYPE BIGINT",
            "ALTER TABLE {t} CHANGE COLUMN s TYPE INT",
            "ALTER TABLE {t} CHANGE COLUMN f TYPE DOUBLE",
            "ALTER TABLE {t} CHANGE COLUMN d TYPE DECIMAL(10, 4)",
            "ALTER TABLE {t} CHANGE COLUMN day TYPE TIMESTAMP_NTZ",
            "INSERT INTO {t} VALUES (4, 9000000000000, 100000, 1.1, 123456.7891, \
             TIMESTAMP_NTZ '2024-03-01 12:30:00')",
        ],
    );
    let mut table = assert_tarn_reads_like_spark(spark, &dir, "widened").await;
    let fields: Vec<String> = table
        .snapshot()
        .arrow_schema()
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    assert_eq!(
        fields,
        [
            "id: Int64",
            "i: Int64",
            "s: Int32",
            "f: Float64",
            "d: Decimal128(10, 4)",
            "day: Timestamp(µs)"
        ]
    );
    // Predicates on widened columns select the rows Spark's row-by-row evaluation keeps:
    // the old file's float 1.1 is 1.100000023841858 as a double, above the double 1.1
    // its statistics suggest. (Spark's own `WHERE f > 1.1D` skips that file and returns
    // no row; COUNT_IF evaluates every row.)
    for (predicate, sql) in [
        (col("f").gt(lit(1.1f64)), "f > 1.1D"),
        (col("i").gt(lit(2_147_483_646i64)), "i > 2147483646"),
        (
            col("d").lt(lit(tarn::expr::Scalar::Decimal(0, 10, 4))),
            "d < 0",
        ),
    ] {
        let ours = table.scan().filter(predicate).collect().await.unwrap();
        let t = tarn_tests::spark::delta_table(&dir);
        let theirs = spark.sql(&format!("SELECT COUNT_IF({sql}) AS n FROM {t}"));
        assert_eq!(
            tarn_tests::rows::row_count(&ours) as i64,
            theirs[0]["n"].as_i64().unwrap(),
            "rows where {sql}"
        );
    }
    // Tarn writes the wide types, rewriting the narrow files and marking them.
    let schema = Arc::clone(table.snapshot().arrow_schema());
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![5, 6])),
            Arc::new(Int64Array::from(vec![Some(1i64 << 40), None])),
            Arc::new(arrow::array::Int32Array::from(vec![Some(70_000), Some(1)])),
            Arc::new(arrow::array::Float64Array::from(vec![Some(2.5), None])),
            Arc::new(
                arrow::array::Decimal128Array::from(vec![Some(12_345_678i128), None])
                    .with_precision_and_scale(10, 4)
                    .unwrap(),
            ),
            Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
                Some(1_700_000_000_000_000),
                None,
            ])),
        ],
    )
    .unwrap();
    table.append([batch]).await.unwrap();
    table
        .delete(col("id").eq(lit(2i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    table
        .update()
        .filter(col("id").eq(lit(1i64)))
        .set("f", lit(9.75f64))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_same_in_spark(spark, &table, &dir, "widened").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_only_tables_take_appends_and_refuse_every_removal() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("append-only");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta \
             TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.enableDeletionVectors' = 'true')",
            "INSERT INTO {t} VALUES (1, 'spark'), (2, 'spark')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    table.append([id_rows(10..12, "v")]).await.unwrap();
    // A merge that only inserts appends.
    table
        .merge([id_rows(11..14, "v")])
        .on(["id"])
        .when_not_matched_insert_all(None)
        .execute()
        .await
        .unwrap();
    let before = (table.version(), log_files(&dir));
    let refused = |what: &str, err: tarn::Error| {
        assert!(
            matches!(&err, tarn::Error::AppendOnly { operation, .. } if !operation.is_empty()),
            "{what}: {err}"
        );
    };
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        let err = table
            .delete(col("id").eq(lit(1i64)))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        refused("delete", err);
        let err = table
            .update()
            .set("v", lit("tarn"))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        refused("update", err);
        let err = table
            .merge([id_rows(1..3, "v")])
            .on(["id"])
            .when_matched_delete(None)
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        refused("merge", err);
    }
    let err = table
        .write([id_rows(20..21, "v")])
        .with_mode(tarn::WriteMode::Overwrite)
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, tarn::Error::AppendOnly { operation, .. } if operation == "overwrite"),
        "{err}"
    );
    // A hand-made transaction that removes a file is refused at commit.
    let mut txn = table.transaction();
    let add = table.snapshot().files().next().unwrap().clone();
    txn.remove_file(add.into_remove(0));
    refused("transaction", table.commit(txn).await.unwrap_err());
    assert_eq!(
        (table.version(), log_files(&dir)),
        before,
        "a removal committed"
    );
    assert_same_in_spark(spark, &table, &dir, "append-only").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_values_stay_unique_across_spark_and_tarn() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("identity");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (key BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 10), \
             v STRING) USING delta",
            "INSERT INTO {t} (v) VALUES ('spark 1'), ('spark 2')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let values = |range: std::ops::Range<i64>| {
        let batch = id_rows(range, "tarn ");
        batch.project(&[1]).unwrap()
    };
    table.append([values(0..3)]).await.unwrap();
    // Spark continues after Tarn's high-water mark, Tarn after Spark's.
    spark_sql(spark, &dir, &["INSERT INTO {t} (v) VALUES ('spark 3')"]);
    table.refresh().await.unwrap();
    table.append([values(3..5)]).await.unwrap();
    // A merge's inserts draw keys too.
    table
        .merge([values(4..6)])
        .on(["v"])
        .when_not_matched_insert_all(None)
        .execute()
        .await
        .unwrap();
    table
        .delete(col("v").eq(lit("spark 2")))
        .execute()
        .await
        .unwrap();
    assert_same_in_spark(spark, &table, &dir, "identity").await;
    let t = tarn_tests::spark::delta_table(&dir);
    let keys = spark.sql(&format!(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS distinct_keys, \
         SUM(CASE WHEN (key - 100) % 10 = 0 THEN 1 ELSE 0 END) AS on_step FROM {t}"
    ));
    assert_eq!(keys[0]["n"].as_i64(), Some(8));
    assert_eq!(keys[0]["distinct_keys"].as_i64(), Some(8));
    assert_eq!(keys[0]["on_step"].as_i64(), Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_constraints_hold_both_ways_with_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("checked");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta",
            "ALTER TABLE {t} ADD CONSTRAINT positive CHECK (id > 0 AND v IS NOT NULL)",
            "INSERT INTO {t} VALUES (1, 'spark'), (2, 'spark')",
        ],
    );
    let t = tarn_tests::spark::delta_table(&dir);
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    table.append([id_rows(10..12, "tarn")]).await.unwrap();
    // A row Spark refuses, Tarn refuses, a null included.
    for (id, v) in [("0", "'zero'"), ("NULL", "'null id'"), ("3", "NULL")] {
        let spark_refused = spark
            .try_sql(&format!("INSERT INTO {t} VALUES ({id}, {v})"))
            .is_err();
        let row = RecordBatch::try_new(
            id_rows(0..1, "").schema(),
            vec![
                Arc::new(Int64Array::from(vec![id.parse::<i64>().ok()])),
                Arc::new(StringArray::from(vec![
                    v.strip_prefix('\'').map(|s| s.trim_end_matches('\'')),
                ])),
            ],
        )
        .unwrap();
        let tarn_refused = match table.append([row]).await {
            Ok(_) => false,
            Err(tarn::Error::ConstraintViolated { constraint, .. }) => {
                assert_eq!(constraint, "delta.constraints.positive");
                true
            }
            Err(e) => panic!("({id}, {v}): {e}"),
        };
        assert!(spark_refused, "Spark took ({id}, {v})");
        assert_eq!(tarn_refused, spark_refused, "({id}, {v})");
    }
    // Spark enforces the constraint Tarn adds.
    let _ = table.add_constraint("small", "id < 1000").await.unwrap();
    assert!(
        spark
            .try_sql(&format!("INSERT INTO {t} VALUES (5000, 'big')"))
            .is_err()
    );
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (500, 'fits')"]);
    // Constraints calling functions hold in Tarn as in Spark.
    spark_sql(
        spark,
        &dir,
        &[
            "ALTER TABLE {t} ADD CONSTRAINT short CHECK (length(upper(v)) < 10 AND year(CAST('2024-05-06' AS DATE)) = 2024)",
        ],
    );
    table.refresh().await.unwrap();
    let err = table
        .append([id_rows(40..41, "far too long ")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, tarn::Error::ConstraintViolated { constraint, .. } if constraint == "delta.constraints.short"),
        "{err}"
    );
    assert!(
        spark
            .try_sql(&format!("INSERT INTO {t} VALUES (41, 'far too long 41')"))
            .is_err()
    );
    table.append([id_rows(42..43, "ok")]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "constraints").await;

    // A constraint Tarn cannot read refuses Tarn's writes, naming its SQL.
    let dir = root.path().join("unreadable");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta",
            "ALTER TABLE {t} ADD CONSTRAINT lettered CHECK (v RLIKE '^[a-z]+$')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let err = table.append([id_rows(0..1, "v")]).await.unwrap_err();
    assert!(
        matches!(&err, tarn::Error::InvalidExpression { expression, .. } if expression.contains("RLIKE")),
        "{err}"
    );
    assert_eq!(table.version(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_columns_hold_both_ways_with_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("generated");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING, doubled BIGINT GENERATED ALWAYS AS (id * 2 + 1)) \
             USING delta",
            "INSERT INTO {t} (id, v) VALUES (1, 'spark'), (2, 'spark')",
        ],
    );
    let t = tarn_tests::spark::delta_table(&dir);
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    // Tarn computes what Spark would, and refuses what Spark refuses.
    table.append([id_rows(10..13, "tarn")]).await.unwrap();
    let wrong = with_column(
        &id_rows(20..21, "tarn"),
        Field::new("doubled", DataType::Int64, true),
        Arc::new(Int64Array::from(vec![0])),
    );
    let err = table.append([wrong]).await.unwrap_err();
    assert!(
        matches!(&err, tarn::Error::ConstraintViolated { constraint, .. } if constraint.contains("doubled")),
        "{err}"
    );
    assert!(
        spark
            .try_sql(&format!("INSERT INTO {t} VALUES (20, 'spark', 0)"))
            .is_err()
    );
    table
        .update()
        .filter(col("id").eq(lit(11i64)))
        .set("id", lit(111i64))
        .execute()
        .await
        .unwrap();
    spark_sql(
        spark,
        &dir,
        &["UPDATE {t} SET id = id + 1000 WHERE id = 12"],
    );
    table.refresh().await.unwrap();
    table.append([id_rows(30..31, "tarn")]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "generated").await;
    let rows = spark.sql(&format!(
        "SELECT COUNT(*) AS n, SUM(CASE WHEN doubled = id * 2 + 1 THEN 1 ELSE 0 END) AS right FROM {t}"
    ));
    assert_eq!(rows[0]["n"], rows[0]["right"], "{rows:?}");

    // Generated columns calling functions: Tarn computes what Spark does.
    let dir = root.path().join("generated-functions");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING, ts TIMESTAMP, \
             day DATE GENERATED ALWAYS AS (CAST(ts AS DATE)), \
             yr INT GENERATED ALWAYS AS (YEAR(ts)), \
             tag STRING GENERATED ALWAYS AS (concat(upper(substring(v, 1, 2)), '-', CAST(id AS STRING))), \
             size INT GENERATED ALWAYS AS (coalesce(length(v), -1)), \
             half DOUBLE GENERATED ALWAYS AS (id / 2)) USING delta",
            "INSERT INTO {t} (id, v, ts) VALUES (1, 'spark', TIMESTAMP '2021-03-04 23:30:00')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let rows = sales_batch(100, 104).project(&[0, 1, 4]).unwrap();
    let rows = renamed(&rows, "customer", "v");
    table.append([rows]).await.unwrap();
    table
        .update()
        .filter(col("id").eq(lit(101i64)))
        .set("v", lit(tarn::expr::Scalar::Null))
        .execute()
        .await
        .unwrap();
    assert_same_in_spark(spark, &table, &dir, "generated functions").await;
    let t = tarn_tests::spark::delta_table(&dir);
    let rows = spark.sql(&format!(
        "SELECT COUNT(*) AS n, SUM(CASE WHEN day = CAST(ts AS DATE) AND yr = YEAR(ts) \
         AND tag <=> concat(upper(substring(v, 1, 2)), '-', CAST(id AS STRING)) \
         AND size = coalesce(length(v), -1) AND half = id / 2 THEN 1 ELSE 0 END) AS right, \
         MAX(CASE WHEN id = 101 THEN half END) AS half_of_101 FROM {t}"
    ));
    assert_eq!(rows[0]["n"].as_i64(), Some(5), "{rows:?}");
    assert_eq!(rows[0]["n"], rows[0]["right"], "{rows:?}");
    // Spark's `/` is a double quotient, and Tarn computed it so.
    assert_eq!(rows[0]["half_of_101"].as_f64(), Some(50.5), "{rows:?}");

    // An expression Tarn cannot compute refuses Tarn's writes, naming it.
    let dir = root.path().join("generated-hash");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING, h STRING GENERATED ALWAYS AS (md5(v))) USING delta",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let err = table.append([id_rows(0..1, "v")]).await.unwrap_err();
    assert!(
        matches!(&err, tarn::Error::InvalidExpression { expression, .. } if expression.contains("md5")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustered_tables_take_tarn_writes_and_stay_clustered() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("clustered");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta CLUSTER BY (v)",
            "INSERT INTO {t} SELECT id, CONCAT('s', CAST(id % 7 AS STRING)) FROM range(50)",
            "OPTIMIZE {t}",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    assert!(table.snapshot().protocol().has_writer_feature("clustering"));
    let domain = table
        .snapshot()
        .domain_metadata("delta.clustering")
        .map(str::to_string);
    table.append([id_rows(100..120, "t")]).await.unwrap();
    table
        .delete(col("id").lt(lit(5i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    // Tarn's files have statistics for the clustering column.
    let v = table
        .schema()
        .field("v")
        .unwrap()
        .physical_name()
        .to_string();
    for add in table.snapshot().files() {
        let stats: serde_json::Value =
            serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
        assert!(
            stats["minValues"].get(&v).is_some(),
            "{}: {stats}",
            add.path
        );
    }
    assert_eq!(
        table
            .snapshot()
            .domain_metadata("delta.clustering")
            .map(str::to_string),
        domain
    );
    // Spark still clusters the table, Tarn's files included.
    spark_sql(spark, &dir, &["OPTIMIZE {t}"]);
    let t = tarn_tests::spark::delta_table(&dir);
    let detail = spark.sql(&format!("DESCRIBE DETAIL {t}"));
    assert_eq!(detail[0]["clusteringColumns"], serde_json::json!(["v"]));
    table.refresh().await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "clustered").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_checkpoints_tarn_writes_read_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    // Spark's V2 table, then Tarn's commits and checkpoint; the commits before Tarn's
    // checkpoint go, so Spark must read the table from it.
    let dir = root.path().join("spark-v2");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta TBLPROPERTIES \
             ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '3')",
            "INSERT INTO {t} VALUES (1, 'spark')",
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    let mut checkpointed = None;
    while checkpointed.is_none() {
        let outcome = table.append([id_rows(10..12, "tarn")]).await.unwrap();
        if let Some(task) = &outcome.commit.checkpoint {
            checkpointed = Some(task.wait().await.unwrap().version);
        }
    }
    let at = checkpointed.unwrap();
    assert!(
        dir.join(format!("_delta_log/{at:020}.checkpoint.parquet"))
            .exists()
    );
    for v in 0..at {
        std::fs::remove_file(dir.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (2, 'spark again')"]);
    table.refresh().await.unwrap();
    assert_same_in_spark_at(spark, &dir, table.version(), "Spark V2, Tarn checkpoint").await;
    let reopened = Table::open(dir.to_str().unwrap()).await.unwrap();
    assert_eq!(
        tarn_tests::rows::row_count(&reopened.scan().collect().await.unwrap()),
        tarn_tests::rows::row_count(&table.scan().collect().await.unwrap())
    );
}

fn spark_changes(rows: &[serde_json::Value], value: &str) -> Vec<Change> {
    let mut out: Vec<Change> = rows
        .iter()
        .map(|r| {
            let stamp = chrono::NaiveDateTime::parse_from_str(
                r["_commit_timestamp"].as_str().unwrap(),
                "%Y-%m-%dT%H:%M:%S%.f",
            )
            .unwrap()
            .and_utc()
            .timestamp_millis();
            (
                r["id"].as_i64(),
                r[value].as_str().map(str::to_string),
                r["_change_type"].as_str().unwrap().to_string(),
                r["_commit_version"].as_i64().unwrap(),
                stamp,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_feeds_read_as_spark_reads_them() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    for (name, dvs) in [("feed", "false"), ("feed-dv", "true")] {
        let dir = root.path().join(name);
        spark_sql(
            spark,
            &dir,
            &[
                &format!(
                    "CREATE TABLE {{t}} (id BIGINT, v STRING) USING delta TBLPROPERTIES \
                     ('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = '{dvs}')"
                ),
                "INSERT INTO {t} SELECT id, CONCAT('s', CAST(id AS STRING)) FROM range(20)",
                "UPDATE {t} SET v = 'updated' WHERE id % 4 = 0",
                "DELETE FROM {t} WHERE id % 5 = 0",
            ],
        );
        // Tarn's appends are the feed's inserts.
        let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
        table.append([id_rows(100..103, "tarn")]).await.unwrap();
        spark_sql(
            spark,
            &dir,
            &[
                "MERGE INTO {t} AS t USING (SELECT id, 'merged' AS v FROM range(15, 25)) AS s \
                 ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
            ],
        );
        table.refresh().await.unwrap();
        let path = dir.to_str().unwrap().replace('\'', "\\'");
        for from in [0, 2] {
            let theirs = spark.sql(&format!(
                "SELECT * FROM table_changes_by_path('{path}', {from})"
            ));
            let ours = table.changes(from, None).await.unwrap();
            let (ours, theirs) = (change_rows(&ours, "v"), spark_changes(&theirs, "v"));
            assert!(
                ours.iter().any(|c| c.2 == "update_preimage"),
                "{name}: {ours:?}"
            );
            assert_eq!(ours, theirs, "{name}: changes from version {from}");
        }
        // Versions before the feed was on have none.
        let dir = root.path().join(format!("{name}-late"));
        spark_sql(
            spark,
            &dir,
            &[
                "CREATE TABLE {t} (id BIGINT, v STRING) USING delta",
                "INSERT INTO {t} VALUES (1, 'a')",
                "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
                "INSERT INTO {t} VALUES (2, 'b')",
            ],
        );
        let late = Table::open(dir.to_str().unwrap()).await.unwrap();
        let err = late.changes(0, None).await.unwrap_err();
        assert!(
            matches!(err, tarn::Error::ChangeDataFeedNotEnabled { version: 0 }),
            "{err}"
        );
        let from_on = change_rows(&late.changes(2, None).await.unwrap(), "v");
        assert_eq!(from_on.len(), 1, "{from_on:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_commit_timestamps_tarn_turns_on_read_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ict-later");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v STRING) USING delta",
            "INSERT INTO {t} VALUES (1, 'spark')",
        ],
    );
    let clock = Arc::new(tarn::ManualClock::new(1_900_000_000_000));
    let mut table = Table::open(dir.to_str().unwrap())
        .await
        .unwrap()
        .with_clock(clock.clone());
    table.append([id_rows(10..12, "tarn")]).await.unwrap();
    let _ = table
        .set_properties([("delta.enableInCommitTimestamps", "true")])
        .await
        .unwrap();
    let enabled_at = table.version();
    clock.advance(3_600_000);
    table.append([id_rows(20..22, "tarn")]).await.unwrap();
    spark_sql(spark, &dir, &["INSERT INTO {t} VALUES (2, 'spark again')"]);
    table.refresh().await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "in-commit timestamps turned on").await;
    // Spark travels by the stamps from the enabling version on.
    let stamps = in_commit_timestamps(&dir, enabled_at, table.version()).await;
    for (offset, stamp) in stamps.iter().enumerate() {
        let version = enabled_at + offset as i64;
        let at = chrono::DateTime::from_timestamp_millis(*stamp)
            .unwrap()
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string();
        let theirs = spark.read_at_timestamp(&dir, &at);
        let ours = snapshot_at(&dir, version)
            .await
            .scan()
            .collect()
            .await
            .unwrap();
        assert_eq!(
            canonical_rows(&align(&theirs, table.snapshot().arrow_schema())),
            canonical_rows(&ours),
            "Spark at {at}, version {version}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_feeds_tarn_writes_read_the_same_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    for (name, partitioned) in [("tarn-feed", false), ("tarn-feed-partitioned", true)] {
        let dir = root.path().join(name);
        let value = if partitioned { "name" } else { "v" };
        let rows = |ids: std::ops::Range<i64>, prefix: &str| match partitioned {
            true => named_rows(ids, prefix),
            false => id_rows(ids, prefix),
        };
        let mut create = Table::create(dir.to_str().unwrap())
            .with_arrow_schema(&rows(0..1, "").schema())
            .with_property("delta.enableChangeDataFeed", "true")
            .with_property("delta.enableDeletionVectors", "true");
        if partitioned {
            create = create.with_partition_columns(["p"]);
        }
        let mut table = create.execute().await.unwrap();
        table.append([rows(0..20, "t")]).await.unwrap();
        table
            .delete(col("id").lt(lit(3i64)))
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await
            .unwrap();
        table
            .update()
            .filter(col("id").gt_eq(lit(5i64)).and(col("id").lt(lit(8i64))))
            .set(value, lit("updated"))
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        table
            .merge([rows(15..25, "m")])
            .on(["id"])
            .when_matched_update(None, [(value, source_col(value))])
            .when_not_matched_insert_all(None)
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await
            .unwrap();
        table
            .delete(col("id").eq(lit(10i64)))
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        table
            .merge([rows(3..5, "x"), rows(30..31, "x")])
            .on(["id"])
            .when_matched_delete(None)
            .when_not_matched_insert_all(None)
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .unwrap();
        let ours = change_rows(&table.changes(0, None).await.unwrap(), value);
        // Each commit's changes, by kind.
        let mut counts = std::collections::BTreeMap::new();
        for change in &ours {
            *counts.entry((change.3, change.2.clone())).or_insert(0) += 1;
        }
        let expected: std::collections::BTreeMap<(i64, String), i32> = [
            ((1, "insert"), 20),
            ((2, "delete"), 3),
            ((3, "update_preimage"), 3),
            ((3, "update_postimage"), 3),
            ((4, "update_preimage"), 5),
            ((4, "update_postimage"), 5),
            ((4, "insert"), 5),
            ((5, "delete"), 1),
            ((6, "delete"), 2),
            ((6, "insert"), 1),
        ]
        .into_iter()
        .map(|((v, k), n)| ((v, k.to_string()), n))
        .collect();
        assert_eq!(counts, expected, "{name}");
        let path = dir.to_str().unwrap().replace('\'', "\\'");
        let theirs = spark.sql(&format!("SELECT * FROM table_changes_by_path('{path}', 0)"));
        assert_eq!(
            ours,
            spark_changes(&theirs, value),
            "{name}: Spark's table_changes"
        );
        assert_same_in_spark(spark, &table, &dir, name).await;
    }
}
