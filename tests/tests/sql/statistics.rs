//! The log's statistics reach DataFusion's planner: live rows, and per column bounds and
//! null counts, exact only where they are (so an aggregate answered from them is right);
//! a filtered scan estimates the rows its filters keep.

use std::sync::Arc;

use arrow::util::pretty::pretty_format_batches;
use datafusion::catalog::TableProvider;
use datafusion::common::ScalarValue;
use datafusion::common::stats::Precision;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::prelude::SessionContext;
use tarn::Table;
use tarn_tests::fixtures::{sales_batch, sales_schema};

use super::{run, sales, session};

/// A sales table at `dir`, partitioned by country, holding ids 0..200 and 200..400 from
/// two appends (so each country has two files).
async fn two_appends(dir: &std::path::Path) -> Table {
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 200)]).await.unwrap();
    table.append([sales_batch(200, 400)]).await.unwrap();
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_are_exact_without_deletion_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_appends(dir.path()).await;
    let (ctx, provider) = session(table);
    let statistics = provider.statistics().unwrap();
    assert_eq!(statistics.num_rows, Precision::Exact(400));
    let [id, customer, country, amount, ..] = statistics.column_statistics.as_slice() else {
        panic!("{statistics:?}");
    };
    assert_eq!(id.min_value, Precision::Exact(ScalarValue::Int64(Some(0))));
    assert_eq!(
        id.max_value,
        Precision::Exact(ScalarValue::Int64(Some(399)))
    );
    assert_eq!(id.null_count, Precision::Exact(0));
    // Every 13th customer is null: 0, 13, ..., 390.
    assert_eq!(customer.null_count, Precision::Exact(31));
    // Partition values bound their column; strings and doubles are bounds, not values.
    assert_eq!(
        country.min_value,
        Precision::Inexact(ScalarValue::Utf8(Some("../x y=z%/:#".into())))
    );
    // One country in five is a null partition value.
    assert_eq!(country.null_count, Precision::Exact(80));
    assert_eq!(
        amount.max_value,
        Precision::Inexact(ScalarValue::Float64(Some(399.0 * 1.5)))
    );

    // Exact bounds answer MIN and MAX with no scan.
    let explained = run(&ctx, "EXPLAIN SELECT min(id), max(id) FROM t").await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    assert!(!text.contains("TarnScanExec"), "{text}");
    let answered = run(&ctx, "SELECT min(id) AS low, max(id) AS high FROM t").await;
    let text = pretty_format_batches(&answered).unwrap().to_string();
    assert!(text.contains("| 0   | 399  |"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_make_bounds_and_null_counts_inexact() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, provider) = session(sales(dir.path()).await);
    let statistics = Arc::new(provider.statistics().unwrap());
    // 400 rows less the 58 multiples of 7, which deletion vectors remove.
    assert_eq!(statistics.num_rows, Precision::Exact(342));
    let id = &statistics.column_statistics[0];
    assert_eq!(
        id.max_value,
        Precision::Inexact(ScalarValue::Int64(Some(399)))
    );
    assert!(!id.null_count.is_exact().unwrap_or(false));
    // 399 is a multiple of 7, deleted: the answer comes from the rows.
    let answered = run(&ctx, "SELECT max(id) AS high FROM t").await;
    let text = pretty_format_batches(&answered).unwrap().to_string();
    assert!(text.contains("| 398  |"), "{text}");
    let explained = run(&ctx, "EXPLAIN SELECT max(id) FROM t").await;
    let text = pretty_format_batches(&explained).unwrap().to_string();
    assert!(text.contains("TarnScanExec"), "{text}");
}

/// The row count the one Tarn scan in `sql`'s physical plan reports to the planner.
async fn scan_rows(ctx: &SessionContext, sql: &str) -> Precision<usize> {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut pending = vec![plan];
    while let Some(node) = pending.pop() {
        if node.name() == "TarnScanExec" {
            let context = StatisticsContext::new();
            return context
                .compute(node.as_ref(), &StatisticsArgs::new())
                .unwrap()
                .num_rows;
        }
        pending.extend(node.children().into_iter().cloned());
    }
    panic!("no Tarn scan in the plan of {sql}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_scan_estimates_the_rows_its_filters_keep() {
    let dir = tempfile::tempdir().unwrap();
    let table = two_appends(dir.path()).await;
    let (ctx, _) = session(table);
    let cases = [
        // No filter: the log's count.
        ("SELECT id FROM t", Precision::Exact(400)),
        // Interval analysis over the bounds 0..=399.
        ("SELECT id FROM t WHERE id < 100", Precision::Inexact(100)),
        // Strings cannot be analysed: DataFusion's default selectivity, 20%.
        (
            "SELECT id FROM t WHERE customer = 'customer-3'",
            Precision::Inexact(80),
        ),
        // The default counts once per equality or IN list (short ones, which DataFusion
        // rewrites as ORs, and long ones), and once for the other conjuncts together:
        // 400 x 0.2 x 0.2 x 0.2...
        (
            "SELECT id FROM t WHERE customer = 'customer-3' AND customer IN ('customer-3', \
             'customer-4') AND customer > 'customer-0'",
            Precision::Inexact(3),
        ),
        (
            "SELECT id FROM t WHERE customer = 'customer-3' AND customer IN ('customer-1', \
             'customer-2', 'customer-3', 'customer-4') AND customer > 'customer-0'",
            Precision::Inexact(3),
        ),
        // ... so two ranges count as one: 400 x 0.2 x 0.2.
        (
            "SELECT id FROM t WHERE customer = 'customer-3' AND customer < 'customer-5' \
             AND customer > 'customer-0'",
            Precision::Inexact(16),
        ),
        // Null counts: every 13th customer is null, 31 of 400.
        (
            "SELECT id FROM t WHERE customer IS NULL",
            Precision::Inexact(31),
        ),
        // A partition value: the files the plan kept hold 80 rows.
        (
            "SELECT id FROM t WHERE country = 'NL'",
            Precision::Inexact(80),
        ),
        // The null partition's files hold the 80 null rows, counted once, not twice.
        (
            "SELECT id FROM t WHERE country IS NULL",
            Precision::Inexact(80),
        ),
        // A limit bounds the estimate.
        (
            "SELECT id FROM t WHERE id < 100 LIMIT 10",
            Precision::Inexact(10),
        ),
        // The smaller of the plan's rows and the analysis's, then 20% of it: the plan
        // keeps the first append's NL file (40 rows), the analysis half the table...
        (
            "SELECT id FROM t WHERE country = 'NL' AND id < 200 AND customer = 'customer-3'",
            Precision::Inexact(8),
        ),
        // ... or a twentieth of it, 20 rows.
        (
            "SELECT id FROM t WHERE country = 'NL' AND id < 20 AND customer = 'customer-3'",
            Precision::Inexact(4),
        ),
    ];
    for (sql, rows) in cases {
        assert_eq!(scan_rows(&ctx, sql).await, rows, "{sql}");
    }
}
