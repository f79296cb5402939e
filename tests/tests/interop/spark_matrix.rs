//! Every table feature, one table each, through the same life both ways. Spark creates
//! the table with the feature, inserts, updates, deletes, merges and optimizes (deletion
//! vectors where the table has them); Tarn reads every version as Spark does; Tarn then
//! appends, deletes (both strategies), merges and updates; Spark reads every version
//! back with Tarn's rows, and `DESCRIBE HISTORY` lists every commit. And the other way:
//! Tarn creates the table with the feature and changes it every way, Spark reads every
//! version and changes it every way, Tarn reads every version as Spark does. The files of single
//! features (`spark_features.rs`, `row_tracking.rs`, `variant.rs`) test what is special
//! to each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::ChangeStrategy;
use tarn::Table;
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};
use tarn_tests::spark::spark;
use tarn_tests::spark_checks::{assert_same_in_spark, assert_tarn_reads_like_spark, spark_sql};

/// One feature: its table's name, the `CREATE TABLE` (columns `id BIGINT, v STRING,
/// p INT` and what the feature adds; `{t}` is the table) and what Spark does with the
/// feature after its first insert.
struct Case {
    name: &'static str,
    create: &'static str,
    spark: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "deletion-vectors",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        spark: &[],
    },
    Case {
        name: "column-mapping-name",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT, extra STRING) USING delta \
                 TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
        spark: &[
            "ALTER TABLE {t} RENAME COLUMN p TO q",
            "ALTER TABLE {t} RENAME COLUMN q TO p",
            "ALTER TABLE {t} DROP COLUMN extra",
        ],
    },
    Case {
        name: "column-mapping-id",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.columnMapping.mode' = 'id')",
        spark: &["ALTER TABLE {t} ADD COLUMNS (added STRING)"],
    },
    Case {
        name: "row-tracking",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.enableRowTracking' = 'true', \
                 'delta.enableDeletionVectors' = 'true')",
        spark: &[],
    },
    Case {
        name: "in-commit-timestamps",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
        spark: &[],
    },
    Case {
        name: "v2-checkpoints",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', \
                 'delta.checkpointInterval' = '3')",
        spark: &[],
    },
    Case {
        name: "type-widening",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        spark: &["ALTER TABLE {t} ALTER COLUMN p TYPE BIGINT"],
    },
    Case {
        name: "timestamp-ntz",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT, ts TIMESTAMP_NTZ) USING delta",
        spark: &["UPDATE {t} SET ts = TIMESTAMP_NTZ '2024-01-02 03:04:05' WHERE id % 2 = 0"],
    },
    Case {
        name: "clustering",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta CLUSTER BY (id)",
        spark: &[],
    },
    Case {
        name: "check-constraints",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta",
        spark: &["ALTER TABLE {t} ADD CONSTRAINT sane CHECK (id >= 0 AND length(v) > 0)"],
    },
    Case {
        name: "generated-columns",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT, \
                 g BIGINT GENERATED ALWAYS AS (id * 2 + p), \
                 tag STRING GENERATED ALWAYS AS (upper(substring(v, 1, 3)))) USING delta",
        spark: &[],
    },
    Case {
        name: "identity-columns",
        create: "CREATE TABLE {t} (k BIGINT GENERATED ALWAYS AS IDENTITY, \
                 id BIGINT, v STRING, p INT) USING delta",
        spark: &[],
    },
    Case {
        name: "change-data-feed",
        create: "CREATE TABLE {t} (id BIGINT, v STRING, p INT) USING delta \
                 TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
        spark: &[],
    },
];

/// Spark's changes after its first insert and the feature's own statements.
const SPARK_CHANGES: &[&str] = &[
    "UPDATE {t} SET v = 'spark-updated' WHERE id < 5",
    "DELETE FROM {t} WHERE id >= 25",
    "MERGE INTO {t} AS t USING (SELECT id, 'spark-merged' AS v, CAST(1 AS INT) AS p \
     FROM range(20, 35)) AS s ON t.id = s.id \
     WHEN MATCHED THEN UPDATE SET v = s.v \
     WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, s.v, s.p)",
    "OPTIMIZE {t}",
];

/// Rows `(id, v, p)` as Tarn writes them.
fn rows(ids: std::ops::Range<i64>, prefix: &str) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("p", DataType::Int32, true),
    ]));
    let v: StringArray = ids.clone().map(|i| Some(format!("{prefix}{i}"))).collect();
    let p = Int32Array::from_iter_values(ids.clone().map(|i| (i % 3) as i32));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(v),
            Arc::new(p),
        ],
    )
    .unwrap()
}

async fn run(case: &Case, root: &std::path::Path) {
    let spark = spark();
    let name = case.name;
    let dir = root.join(name);
    let mut statements = vec![
        case.create,
        "INSERT INTO {t} (id, v, p) SELECT id, CONCAT('spark-', id), CAST(id % 3 AS INT) \
         FROM range(0, 30)",
    ];
    statements.extend(case.spark);
    statements.extend(SPARK_CHANGES);
    spark_sql(spark, &dir, &statements);
    let mut table = assert_tarn_reads_like_spark(spark, &dir, name).await;
    table
        .append([rows(100..110, "tarn-")])
        .await
        .unwrap_or_else(|e| panic!("{name}: Tarn's append: {e}"));
    tarn_changes(&mut table, name, 105..115).await;
    assert_same_in_spark(spark, &table, &dir, name).await;
    // Spark writes on top of Tarn's commits.
    spark_sql(
        spark,
        &dir,
        &["INSERT INTO {t} (id, v, p) VALUES (200, 'spark-after-tarn', 2)"],
    );
    table.refresh().await.unwrap();
    let last = tarn_tests::spark_checks::assert_same_in_spark_at;
    last(spark, &dir, table.version(), name).await;
}

/// Tarn's changes to a table: deletes (merge-on-read where the table has deletion
/// vectors, and copy-on-write), a merge of rows `merged` (updating those there,
/// inserting the rest), an update.
async fn tarn_changes(table: &mut Table, name: &str, merged: std::ops::Range<i64>) {
    let step = |what: &str, result: tarn::Result<()>| {
        result.unwrap_or_else(|e| panic!("{name}: Tarn's {what}: {e}"));
    };
    for (id, strategy) in [
        (3i64, ChangeStrategy::MergeOnRead),
        (4, ChangeStrategy::CopyOnWrite),
    ] {
        // Merge-on-read needs deletion vectors: without them the table's own default.
        let dvs = table
            .snapshot()
            .protocol()
            .has_writer_feature("deletionVectors");
        let builder = table.delete(col("id").eq(lit(id)));
        let builder = match (strategy, dvs) {
            (ChangeStrategy::MergeOnRead, false) => builder,
            _ => builder.with_strategy(strategy),
        };
        step("delete", builder.execute().await.map(|_| ()));
    }
    step(
        "merge",
        table
            .merge([rows(merged, "tarn-merged-")])
            .on(["id"])
            .when_matched_update_all(None)
            .when_not_matched_insert_all(None)
            .execute()
            .await
            .map(|_| ()),
    );
    step(
        "update",
        table
            .update()
            .filter(col("id").eq(lit(10i64)))
            .set("v", lit("tarn-updated"))
            .execute()
            .await
            .map(|_| ()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_spark_writes_takes_tarn_writes_both_ways() {
    let root = tempfile::tempdir().unwrap();
    for case in CASES {
        run(case, root.path()).await;
    }
}

/// A table Tarn creates with a feature: its name, the columns it adds to `(id, v, p)`
/// and its properties.
struct TarnCase {
    name: &'static str,
    extra: fn() -> Vec<StructField>,
    properties: &'static [(&'static str, &'static str)],
}

fn no_columns() -> Vec<StructField> {
    Vec::new()
}

fn long_column(name: &str, metadata: &[(&str, serde_json::Value)]) -> StructField {
    let mut field = StructField::new(name, DeltaType::Primitive(PrimitiveType::Long), true);
    for (key, value) in metadata {
        field.metadata.insert(key.to_string(), value.clone());
    }
    field
}

const TARN_CASES: &[TarnCase] = &[
    TarnCase {
        name: "tarn-deletion-vectors",
        extra: no_columns,
        properties: &[("delta.enableDeletionVectors", "true")],
    },
    TarnCase {
        name: "tarn-column-mapping-name",
        extra: no_columns,
        properties: &[("delta.columnMapping.mode", "name")],
    },
    TarnCase {
        name: "tarn-column-mapping-id",
        extra: no_columns,
        properties: &[("delta.columnMapping.mode", "id")],
    },
    TarnCase {
        name: "tarn-row-tracking",
        extra: no_columns,
        properties: &[
            ("delta.enableRowTracking", "true"),
            ("delta.enableDeletionVectors", "true"),
        ],
    },
    TarnCase {
        name: "tarn-in-commit-timestamps",
        extra: no_columns,
        properties: &[("delta.enableInCommitTimestamps", "true")],
    },
    TarnCase {
        name: "tarn-v2-checkpoints",
        extra: no_columns,
        properties: &[
            ("delta.checkpointPolicy", "v2"),
            ("delta.checkpointInterval", "3"),
        ],
    },
    TarnCase {
        name: "tarn-timestamp-ntz",
        extra: || {
            vec![StructField::new(
                "ts",
                DeltaType::Primitive(PrimitiveType::TimestampNtz),
                true,
            )]
        },
        properties: &[],
    },
    TarnCase {
        name: "tarn-check-constraints",
        extra: no_columns,
        properties: &[("delta.constraints.sane", "id >= 0 AND length(v) > 0")],
    },
    TarnCase {
        name: "tarn-generated-columns",
        extra: || {
            vec![long_column(
                "g",
                &[("delta.generationExpression", "id * 2 + p".into())],
            )]
        },
        properties: &[],
    },
    TarnCase {
        name: "tarn-identity-columns",
        extra: || {
            vec![long_column(
                "k",
                &[
                    ("delta.identity.start", 1.into()),
                    ("delta.identity.step", 1.into()),
                    ("delta.identity.allowExplicitInsert", false.into()),
                ],
            )]
        },
        properties: &[],
    },
    TarnCase {
        name: "tarn-change-data-feed",
        extra: no_columns,
        properties: &[("delta.enableChangeDataFeed", "true")],
    },
];

/// Tarn creates the table and changes it every way; Spark reads every version and
/// changes it every way; Tarn reads every version as Spark does.
async fn run_tarn_made(case: &TarnCase, root: &std::path::Path) {
    let spark = spark();
    let name = case.name;
    let dir = root.join(name);
    let mut fields = StructType::try_from_arrow(&rows(0..1, "").schema())
        .unwrap()
        .fields;
    fields.extend((case.extra)());
    let mut create = Table::create(dir.to_str().unwrap()).with_schema(StructType::new(fields));
    for (key, value) in case.properties {
        create = create.with_property(*key, *value);
    }
    let mut table = create.execute().await.unwrap();
    let step = |what: &str, result: tarn::Result<()>| {
        result.unwrap_or_else(|e| panic!("{name}: Tarn's {what}: {e}"));
    };
    step(
        "append",
        table.append([rows(0..30, "tarn-")]).await.map(|_| ()),
    );
    tarn_changes(&mut table, name, 25..35).await;
    assert_same_in_spark(spark, &table, &dir, name).await;
    let mut statements = vec![
        "INSERT INTO {t} (id, v, p) SELECT id, CONCAT('spark-', id), CAST(id % 3 AS INT) \
         FROM range(40, 50)",
    ];
    statements.extend(SPARK_CHANGES);
    spark_sql(spark, &dir, &statements);
    assert_tarn_reads_like_spark(spark, &dir, name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_tarn_writes_takes_spark_writes_both_ways() {
    let root = tempfile::tempdir().unwrap();
    for case in TARN_CASES {
        run_tarn_made(case, root.path()).await;
    }
}
