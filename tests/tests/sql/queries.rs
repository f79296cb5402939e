//! Queries through DataFusion answer as DuckDB answers them over the same Delta table,
//! and push what Tarn can take into its planner.

use arrow::util::pretty::pretty_format_batches;
use tarn_tests::python::query_with_duckdb;
use tarn_tests::rows::{canonical_rows, row_count};

use super::{run, sales, session};

/// Queries over `t` whose answers must match DuckDB's (aggregates are rounded and
/// aliased so both engines name and print them alike).
const QUERIES: [&str; 8] = [
    "SELECT count(*) AS n FROM t",
    "SELECT country, count(*) AS n, round(sum(amount), 2) AS total FROM t GROUP BY country",
    "SELECT id, customer, amount FROM t WHERE id BETWEEN 100 AND 140 AND country = 'NL'",
    "SELECT customer, count(*) AS n FROM t WHERE amount > 150 AND customer IS NOT NULL \
     GROUP BY customer ORDER BY n DESC, customer LIMIT 3",
    "SELECT a.country AS country, count(*) AS n FROM t a JOIN t b ON a.id = b.id + 1 \
     GROUP BY a.country",
    "SELECT id FROM t WHERE customer IS NULL OR customer LIKE 'customer-1%'",
    "SELECT min(day) AS first, max(day) AS last, count(*) AS n FROM t \
     WHERE country IN ('FR', 'DE') AND id NOT IN (1, 2, 3)",
    "SELECT id, amount FROM t WHERE id >= 390 OR (id < 5 AND NOT (country = 'US'))",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_answer_as_duckdb_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = session(sales(dir.path()).await);
    for sql in QUERIES {
        let ours = run(&ctx, sql).await;
        let theirs = query_with_duckdb(dir.path(), sql);
        assert!(row_count(&ours) > 0, "{sql}: no rows");
        assert_eq!(canonical_rows(&ours), canonical_rows(&theirs), "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_go_into_tarns_planner_and_explain_shows_the_files_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = session(sales(dir.path()).await);
    let explained = run(
        &ctx,
        "EXPLAIN SELECT id FROM t WHERE country = 'NL' AND id > 300",
    )
    .await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    // Five countries in four appends: partition values leave NL's four files, and their
    // statistics the one holding ids above 300; the filter is Tarn's alone (no FilterExec
    // left above the scan).
    assert!(
        text.contains("TarnScanExec: files=1 of 20 (skipped by partition 16, by statistics 3"),
        "{text}"
    );
    assert!(
        text.contains(r#"predicate=((country = "NL") AND (id > 300))"#),
        "{text}"
    );
    assert!(!text.contains("FilterExec"), "{text}");
    // A filter on a floating-point column stays with DataFusion (NaN and statistics).
    let explained = run(&ctx, "EXPLAIN SELECT id FROM t WHERE amount > 150").await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    assert!(text.contains("FilterExec"), "{text}");
    // A filter Tarn cannot express stays with DataFusion, which applies it.
    let explained = run(&ctx, "EXPLAIN SELECT id FROM t WHERE customer LIKE 'c%'").await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    assert!(text.contains("FilterExec"), "{text}");
    assert!(text.contains("TarnScanExec: files=20 of 20"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_empty_projections_read_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = session(sales(dir.path()).await);
    let limited = run(&ctx, "SELECT * FROM t LIMIT 3").await;
    assert_eq!(row_count(&limited), 3);
    // count(*) reads no column; 400 rows less the 58 multiples of 7.
    let counted = run(&ctx, "SELECT count(*) AS n FROM t WHERE country = 'FR'").await;
    let text = pretty_format_batches(&counted).unwrap().to_string();
    let fr = (0..400).filter(|i| i % 5 == 1 && i % 7 != 0).count();
    assert!(text.contains(&format!("| {fr} ")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joins_build_side_skips_partitions_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = session(sales(dir.path()).await);
    // A small dimension: only NL is in the west, so the join's build side holds NL alone.
    let codes = ["NL", "FR", "DE", "US", "UK"];
    let regions = ["west", "south", "south", "east", "north"];
    let dim = arrow::array::RecordBatch::try_from_iter([
        (
            "code",
            std::sync::Arc::new(arrow::array::StringArray::from(codes.to_vec())) as _,
        ),
        (
            "region",
            std::sync::Arc::new(arrow::array::StringArray::from(regions.to_vec())) as _,
        ),
    ])
    .unwrap();
    ctx.register_batch("dim", dim).unwrap();
    let sql = "SELECT count(*) AS n, round(sum(amount), 2) AS total FROM t \
               JOIN dim ON t.country = dim.code WHERE dim.region = 'west'";
    let direct = "SELECT count(*) AS n, round(sum(amount), 2) AS total FROM t \
                  WHERE country = 'NL'";
    let joined = run(&ctx, sql).await;
    assert_eq!(
        canonical_rows(&joined),
        canonical_rows(&run(&ctx, direct).await)
    );
    assert!(row_count(&joined) == 1, "{joined:?}");
    // The scan planned all 20 files (four per country); once the build side was read,
    // the join's filter on `country` left NL's four.
    let analyzed = run(&ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
    let text = pretty_format_batches(&analyzed).unwrap().to_string();
    assert!(text.contains("TarnScanExec: files=20 of 20"), "{text}");
    assert!(text.contains("run-time filters=[DynamicFilter"), "{text}");
    assert!(text.contains("files_skipped_at_run_time=16"), "{text}");
    // With 16 parts for 20 files of about the same size, a dozen files are split
    // between two parts: each is still counted once, and the answer is the same.
    let parts = ctx.state().config().target_partitions();
    run(&ctx, "SET datafusion.execution.target_partitions = 16").await;
    assert_eq!(
        canonical_rows(&run(&ctx, sql).await),
        canonical_rows(&run(&ctx, direct).await)
    );
    let analyzed = run(&ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
    let text = pretty_format_batches(&analyzed).unwrap().to_string();
    assert!(text.contains("files_skipped_at_run_time=16"), "{text}");
    run(
        &ctx,
        &format!("SET datafusion.execution.target_partitions = {parts}"),
    )
    .await;

    // Two countries, DE and NL: their bounds hold FR too, but the join's own lookup of
    // its keys (a hash table here, not a value list) rules FR out as well.
    run(
        &ctx,
        "SET datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values = 0",
    )
    .await;
    let pair = arrow::array::RecordBatch::try_from_iter([(
        "code",
        std::sync::Arc::new(arrow::array::StringArray::from(vec!["NL", "DE"])) as _,
    )])
    .unwrap();
    ctx.register_batch("pair", pair).unwrap();
    let sql = "SELECT count(*) AS n FROM t JOIN pair ON t.country = pair.code";
    let direct = "SELECT count(*) AS n FROM t WHERE country IN ('NL', 'DE')";
    let joined = run(&ctx, sql).await;
    assert_eq!(
        canonical_rows(&joined),
        canonical_rows(&run(&ctx, direct).await)
    );
    let analyzed = run(&ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
    let text = pretty_format_batches(&analyzed).unwrap().to_string();
    assert!(text.contains("files_skipped_at_run_time=12"), "{text}");

    // A session without `register` keeps DataFusion 55.2's MIN/MAX aggregate filter on,
    // which can drop rows an aggregate needs: its scans take no run-time filter.
    let bare = datafusion::prelude::SessionContext::new();
    bare.register_table("t", ctx.table_provider("t").await.unwrap())
        .unwrap();
    bare.register_table("pair", ctx.table_provider("pair").await.unwrap())
        .unwrap();
    let explained = run(&bare, &format!("EXPLAIN {sql}")).await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    assert!(text.contains("TarnScanExec"), "{text}");
    assert!(!text.contains("run-time filters"), "{text}");
}
