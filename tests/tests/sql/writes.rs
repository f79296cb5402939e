//! INSERT, DELETE, UPDATE and TRUNCATE through SQL: one Tarn commit per statement, with
//! the table's strategy (merge-on-read writes deletion vectors), read back by DuckDB with
//! the same rows; statements whose predicate does not reach the table are refused.

use tarn_tests::python::read_with_duckdb;
use tarn_tests::rows::{align, canonical_rows, row_count};

use super::{count, run, sales, session};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_commit_once_each_and_duckdb_reads_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, provider) = session(sales(dir.path()).await);
    let start = provider.snapshot().version();

    let inserted = run(
        &ctx,
        "INSERT INTO t VALUES \
         (1000, 'new', 'NL', 10.5, TIMESTAMP '2024-01-01T00:00:00Z', DATE '2024-01-01'), \
         (1001, NULL, 'FR', 20.0, NULL, NULL)",
    )
    .await;
    assert_eq!(count(&inserted), 2);
    let copied = run(&ctx, "INSERT INTO t SELECT * FROM t WHERE id < 20").await;
    assert_eq!(count(&copied), 17);

    // NL holds the ids that are multiples of 5; multiples of 7 are already gone.
    let deleted = run(
        &ctx,
        "DELETE FROM t WHERE id >= 300 AND id < 1000 AND country = 'NL'",
    )
    .await;
    assert_eq!(count(&deleted), 17);
    let updated = run(
        &ctx,
        "UPDATE t SET amount = amount * 2, customer = 'vip' WHERE id BETWEEN 1000 AND 1001",
    )
    .await;
    assert_eq!(count(&updated), 2);
    let snapshot = provider.snapshot();
    assert_eq!(snapshot.version(), start + 4, "one commit per statement");
    // The table is merge-on-read: the DELETE and UPDATE marked rows in deletion vectors.
    assert!(snapshot.files().any(|add| {
        add.deletion_vector.is_some()
            && add
                .partition_values
                .values()
                .any(|v| v.as_deref() == Some("NL"))
    }));
    let vip = run(
        &ctx,
        "SELECT id, amount FROM t WHERE customer = 'vip' ORDER BY id",
    )
    .await;
    let text = arrow::util::pretty::pretty_format_batches(&vip)
        .unwrap()
        .to_string();
    assert!(text.contains("| 1000 | 21.0"), "{text}");
    assert!(text.contains("| 1001 | 40.0"), "{text}");

    // DuckDB reads what the statements left, row for row.
    let ours = run(&ctx, "SELECT * FROM t").await;
    let theirs = read_with_duckdb(dir.path());
    assert_eq!(theirs.rows, row_count(&ours));
    let theirs = align(&theirs.batches, &ours[0].schema());
    assert_eq!(canonical_rows(&ours), canonical_rows(&theirs));

    let overwritten = run(&ctx, "INSERT OVERWRITE t SELECT * FROM t WHERE id < 50").await;
    assert!(count(&overwritten) > 0);
    let left = run(&ctx, "SELECT count(*) AS n FROM t WHERE id >= 50").await;
    let text = arrow::util::pretty::pretty_format_batches(&left)
        .unwrap()
        .to_string();
    assert!(text.contains("| 0 "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_that_does_not_reach_the_table_is_refused_not_run_on_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, provider) = session(sales(dir.path()).await);
    let version = provider.snapshot().version();
    let refused = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let result = match ctx.sql(sql).await {
                Ok(frame) => frame.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            let err = result.expect_err(sql);
            err.to_string()
        }
    };
    // DataFusion would hand over only the conditions on `t` itself: with a subquery
    // beside one, the statement would change more rows than it names.
    run(&ctx, "CREATE TABLE u AS VALUES (1), (2), (3)").await;
    for sql in [
        "DELETE FROM t WHERE id IN (SELECT column1 FROM u)",
        "DELETE FROM t WHERE country = 'NL' AND id IN (SELECT column1 FROM u)",
        "DELETE FROM t WHERE country = 'NL' AND NOT EXISTS (SELECT 1 FROM u WHERE column1 = t.id)",
        "UPDATE t SET amount = 0 WHERE EXISTS (SELECT 1 FROM u WHERE column1 = 2)",
        "UPDATE t SET amount = (SELECT max(column1) FROM u) WHERE id = 1",
    ] {
        let err = refused(sql).await;
        assert!(err.contains("subqueries"), "{sql}: {err}");
    }
    let err = refused("DELETE FROM t").await;
    assert!(err.contains("TRUNCATE"), "{err}");
    let err = refused("UPDATE t SET amount = 0").await;
    assert!(err.contains("needs a WHERE clause"), "{err}");
    let err = refused("DELETE FROM t WHERE customer LIKE 'c%'").await;
    assert!(err.contains("no Tarn equivalent"), "{err}");
    // DataFusion hands a provider the WHERE but not a LIMIT: run, it would delete every
    // matching row.
    let err = refused("DELETE FROM t WHERE id > 0 LIMIT 1").await;
    assert!(err.contains("LIMIT is not supported"), "{err}");
    assert_eq!(provider.snapshot().version(), version, "nothing committed");

    // A session without Tarn's check refuses DELETE and UPDATE outright.
    let bare = datafusion::prelude::SessionContext::new();
    bare.register_table("t", std::sync::Arc::new(provider.clone()))
        .unwrap();
    let err = bare
        .sql("DELETE FROM t WHERE id = 1")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("tarn_datafusion::register"), "{err}");
    assert_eq!(provider.snapshot().version(), version);

    let emptied = run(&ctx, "TRUNCATE TABLE t").await;
    assert_eq!(count(&emptied), 342);
    assert_eq!(row_count(&run(&ctx, "SELECT * FROM t").await), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_leaves_identity_and_generated_columns_to_tarn() {
    use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};

    let dir = tempfile::tempdir().unwrap();
    let long =
        |name: &str| StructField::new(name, DeltaType::Primitive(PrimitiveType::Long), false);
    let mut id = long("id");
    id.metadata
        .insert("delta.identity.start".into(), 100.into());
    id.metadata.insert("delta.identity.step".into(), 10.into());
    id.metadata
        .insert("delta.identity.allowExplicitInsert".into(), false.into());
    // Nullable, so an explicit NULL reaches Tarn's check rather than DataFusion's.
    let mut twice = StructField::new("twice", DeltaType::Primitive(PrimitiveType::Long), true);
    twice
        .metadata
        .insert("delta.generationExpression".into(), "n * 2".into());
    let table = tarn::Table::create(dir.path().to_str().unwrap())
        .with_schema(StructType::new(vec![id, long("n"), twice]))
        .execute()
        .await
        .unwrap();
    let (ctx, provider) = session(table);

    // DataFusion fills the columns left out with nulls; Tarn draws and computes them.
    run(&ctx, "INSERT INTO t (n) VALUES (1), (2)").await;
    run(&ctx, "INSERT INTO t (n, twice) VALUES (3, 6)").await;
    // Decided per statement from its plan, whatever the source: here a scan of `t`.
    run(&ctx, "INSERT INTO t (n) SELECT n + 10 FROM t WHERE n = 3").await;
    let rows = run(&ctx, "SELECT id, n, twice FROM t ORDER BY n").await;
    let text = arrow::util::pretty::pretty_format_batches(&rows)
        .unwrap()
        .to_string();
    for row in [
        "| 100 | 1  | 2     |",
        "| 110 | 2  | 4     |",
        "| 120 | 3  | 6     |",
        "| 130 | 13 | 26    |",
    ] {
        assert!(text.contains(row), "{row} in\n{text}");
    }
    let version = provider.snapshot().version();
    // A value for a GENERATED ALWAYS identity column, or a generated value that breaks
    // its expression, is refused, and nothing is committed: an explicit NULL too.
    for sql in [
        "INSERT INTO t (id, n) VALUES (7, 4)",
        "INSERT INTO t (id, n) VALUES (NULL, 4)",
        "INSERT INTO t (n, twice) VALUES (4, 9)",
        "INSERT INTO t (n, twice) VALUES (4, NULL)",
    ] {
        let result = match ctx.sql(sql).await {
            Ok(frame) => frame.collect().await.map(|_| ()),
            Err(e) => Err(e),
        };
        result.expect_err(sql);
    }
    assert_eq!(provider.snapshot().version(), version);
    let theirs = read_with_duckdb(dir.path());
    assert_eq!(theirs.rows, 4);
}
