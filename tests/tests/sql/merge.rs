//! MERGE INTO through SQL: one Tarn commit with the table's strategy, leaving the same rows
//! as DuckDB's MERGE of the same source into a copy of the table; statements Tarn cannot
//! express are refused before anything is committed.

use tarn::ChangeStrategy;
use tarn_tests::python::query_with_duckdb_after;
use tarn_tests::rows::{align, canonical_rows};

use super::{count, run, sales, session};

/// The source both engines merge: an update, two deletes, a row matching one deleted
/// before (so inserted again) and a new row.
const SOURCE: &str = "CREATE TABLE src AS SELECT * FROM (VALUES \
     (1, 'update', 11.0, 'FR'), \
     (2, 'delete', 0.0, 'DE'), \
     (3, 'delete', 0.0, 'NL'), \
     (14, 'insert', 14.5, 'NL'), \
     (5000, 'insert', 50.0, 'US')) AS v(id, op, amount, country)";

/// The MERGE both engines run, on a target named `target`.
fn merge_into(target: &str) -> String {
    format!(
        "MERGE INTO {target} AS tgt USING src AS s ON tgt.id = s.id \
         WHEN MATCHED AND s.op = 'delete' THEN DELETE \
         WHEN MATCHED THEN UPDATE SET amount = s.amount, customer = 'merged' \
         WHEN NOT MATCHED THEN INSERT (id, customer, country, amount) \
             VALUES (s.id, 'new', s.country, s.amount) \
         WHEN NOT MATCHED BY SOURCE AND tgt.id >= 390 THEN DELETE"
    )
}

/// The data files with deletion vectors, and how many rows each marks.
fn marked(snapshot: &tarn::Snapshot) -> std::collections::BTreeSet<(String, i64)> {
    snapshot
        .files()
        .filter_map(|a| Some((a.path.clone(), a.deletion_vector.as_ref()?.cardinality)))
        .collect()
}

async fn merge_leaves_duckdbs_rows(strategy: ChangeStrategy) {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales(dir.path()).await;
    let name = match strategy {
        ChangeStrategy::MergeOnRead => "merge-on-read",
        ChangeStrategy::CopyOnWrite => "copy-on-write",
    };
    let _ = table
        .set_properties([(tarn::protocol::properties::DML_STRATEGY, name)])
        .await
        .unwrap();
    let (ctx, provider) = session(table);
    let start = provider.snapshot().version();
    let marked_before = marked(&provider.snapshot());

    // DuckDB merges the same source into a copy of the table as it is now.
    let expected = query_with_duckdb_after(
        dir.path(),
        &[
            "CREATE TABLE m AS SELECT * FROM t",
            SOURCE,
            &merge_into("m"),
        ],
        "SELECT * FROM m",
    );

    run(&ctx, SOURCE).await;
    let merged = run(&ctx, &merge_into("t")).await;
    // 1 updated, 2 and 3 deleted, 14 and 5000 inserted, and 390..399 less the multiples
    // of 7 (392, 399) deleted as not matched by the source.
    assert_eq!(count(&merged), 1 + 2 + 2 + 8);
    let snapshot = provider.snapshot();
    assert_eq!(snapshot.version(), start + 1, "one commit");
    let marked_after = marked(&snapshot);
    match strategy {
        // The merge marked its deleted and updated rows in deletion vectors.
        ChangeStrategy::MergeOnRead => assert!(!marked_after.is_subset(&marked_before)),
        // Copy-on-write rewrote the files it touched: no deletion vector is new.
        ChangeStrategy::CopyOnWrite => assert!(marked_after.is_subset(&marked_before)),
    }

    let ours = run(&ctx, "SELECT * FROM t").await;
    let expected = align(&expected, &ours[0].schema());
    assert_eq!(canonical_rows(&ours), canonical_rows(&expected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_merge_leaves_the_rows_duckdbs_merge_does() {
    merge_leaves_duckdbs_rows(ChangeStrategy::MergeOnRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_on_write_merge_leaves_the_rows_duckdbs_merge_does() {
    merge_leaves_duckdbs_rows(ChangeStrategy::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_tarn_cannot_express_is_refused_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, provider) = session(sales(dir.path()).await);
    run(&ctx, SOURCE).await;
    run(
        &ctx,
        "CREATE TABLE narrow AS SELECT CAST(id AS INT) AS id FROM src",
    )
    .await;
    let version = provider.snapshot().version();
    for (sql, says) in [
        // Keys of different types reach the provider cast, and are refused by name.
        (
            "MERGE INTO t USING narrow AS s ON t.id = s.id WHEN MATCHED THEN DELETE",
            "keys of one type",
        ),
        (
            "MERGE INTO t USING src AS s ON t.id > s.id WHEN MATCHED THEN DELETE",
            "equality between a target and a source column",
        ),
        (
            "MERGE INTO t USING src AS s ON t.id = s.id \
             WHEN MATCHED AND s.op LIKE 'del%' THEN DELETE",
            "no Tarn equivalent",
        ),
        (
            "MERGE INTO t USING src AS s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET customer = upper(s.op)",
            "no Tarn equivalent",
        ),
    ] {
        let result = match ctx.sql(sql).await {
            Ok(frame) => frame.collect().await.map(|_| ()),
            Err(e) => Err(e),
        };
        let err = result.expect_err(sql).to_string();
        assert!(err.contains(says), "{sql}: {err}");
    }
    // A source row matching two target rows is Tarn's duplicate-match error.
    run(
        &ctx,
        "CREATE TABLE twice AS SELECT * FROM (VALUES (1, 'a'), (1, 'b')) AS v(id, op)",
    )
    .await;
    let err = ctx
        .sql("MERGE INTO t USING twice AS s ON t.id = s.id WHEN MATCHED THEN DELETE")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    let tarn_error = err.find_root().to_string().to_lowercase();
    assert!(tarn_error.contains("match"), "{tarn_error}");
    assert_eq!(provider.snapshot().version(), version, "nothing committed");
}
