//! Tables written through SQL (`tarn-datafusion`) read in Spark: every version an INSERT,
//! UPDATE, DELETE or MERGE made, merge-on-read deletion vectors included, with the rows
//! Tarn reads, and `DESCRIBE HISTORY` naming each statement's operation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use tarn::Table;
use tarn_datafusion::TarnTableProvider;
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::spark::spark;
use tarn_tests::spark_checks::assert_same_in_spark;

async fn run(ctx: &SessionContext, sql: &str) {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_sql_wrote_reads_in_spark() {
    let spark = spark();
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 300)]).await.unwrap();

    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);
    ctx.register_table("t", Arc::new(TarnTableProvider::new(table)))
        .unwrap();
    for sql in [
        "INSERT INTO t SELECT id + 1000, customer, country, amount, ts, day FROM t WHERE id < 50",
        "UPDATE t SET amount = amount + 1, customer = 'sql' WHERE id BETWEEN 10 AND 40",
        "DELETE FROM t WHERE customer = 'customer-3' AND id < 200",
        "CREATE TABLE src AS SELECT * FROM (VALUES (5, 50.0), (11, 110.0), (7000, 7.0)) \
         AS v(id, amount)",
        "MERGE INTO t USING src AS s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET amount = s.amount \
         WHEN NOT MATCHED THEN INSERT (id, customer, country, amount) \
             VALUES (s.id, 'merged', 'NL', s.amount)",
        "INSERT OVERWRITE t SELECT * FROM t WHERE id < 250",
    ] {
        run(&ctx, sql).await;
    }
    let table = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(table.version(), 6);
    assert!(
        table
            .snapshot()
            .files()
            .any(|a| a.deletion_vector.is_some())
            || {
                // The overwrite leaves no deletion vector; an earlier version had them.
                let mut earlier = Table::open(dir.path().to_str().unwrap()).await.unwrap();
                earlier.load_version(5).await.unwrap();
                earlier
                    .snapshot()
                    .files()
                    .any(|a| a.deletion_vector.is_some())
            }
    );
    assert_same_in_spark(spark, &table, dir.path(), "SQL statements").await;
}
