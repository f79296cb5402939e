//! Planning prunes by statistics parsed once per version: the files a plan keeps are those
//! whose statistics allow a match, the same on a second plan (served from the parsed
//! columns) as on the first, and a new version (an append, a delete leaving loose bounds)
//! is planned from its own statistics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{Expr, col, lit};
use tarn::{ChangeStrategy, Table};

/// File `k` holds ids `k*100 .. k*100+99`, day `d{k % 3}`, and a tag that is null in
/// every row of odd files and `t{k}` in even ones.
fn file(k: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("tag", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (k * 100..k * 100 + 100).collect();
    let tag = if k % 2 == 0 {
        Some(format!("t{k}"))
    } else {
        None
    };
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(vec![format!("d{}", k % 3); 100])),
            Arc::new(StringArray::from(vec![tag; 100])),
        ],
    )
    .unwrap()
}

/// The files (by the first id they hold, over 100) a plan keeps.
async fn planned(table: &Table, predicate: &Expr) -> BTreeSet<i64> {
    let plan = table.scan().filter(predicate.clone()).plan().await.unwrap();
    let mut kept = BTreeSet::new();
    for add in plan.files {
        let rows = table.snapshot().read_file(&add).await.unwrap();
        let ids = rows.column_by_name("id").unwrap();
        let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
        kept.insert(ids.value(0) / 100);
    }
    kept
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_keep_the_files_statistics_allow_and_a_new_version_is_planned_anew() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().join("t").to_str().unwrap())
        .with_arrow_schema(&file(0).schema())
        .with_partition_columns(["day"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    for k in 0..12 {
        table.append([file(k)]).await.unwrap();
    }
    let cases: Vec<(Expr, BTreeSet<i64>)> = vec![
        (col("id").eq(lit(734i64)), [7].into()),
        (
            col("id").gt_eq(lit(250i64)).and(col("id").lt(lit(420i64))),
            [2, 3, 4].into(),
        ),
        (
            col("id").lt(lit(500i64)).and(col("day").eq(lit("d1"))),
            [1, 4].into(),
        ),
        (col("tag").is_null(), [1, 3, 5, 7, 9, 11].into()),
        (col("tag").eq(lit("t4")), [4].into()),
        (col("id").gt(lit(5_000i64)), BTreeSet::new()),
    ];
    for (predicate, expected) in &cases {
        // The first plan parses; the second is served from the parsed columns.
        assert_eq!(&planned(&table, predicate).await, expected, "{predicate}");
        assert_eq!(
            &planned(&table, predicate).await,
            expected,
            "{predicate} again"
        );
    }

    // A new version: file 12 joins, and a merge-on-read delete leaves file 7 with loose
    // bounds (its statistics still bound the deleted row, so it is still kept).
    table.append([file(12)]).await.unwrap();
    assert_eq!(
        planned(&table, &col("id").gt_eq(lit(1_234i64))).await,
        [12].into()
    );
    table
        .delete(col("id").eq(lit(734i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        planned(&table, &col("id").eq(lit(734i64))).await,
        [7].into()
    );
    let rows: usize = table
        .scan()
        .filter(col("id").eq(lit(734i64)))
        .collect()
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(rows, 0);
    // Reopened (no parsed statistics yet) it plans the same.
    let reopened = Table::open(dir.path().join("t").to_str().unwrap())
        .await
        .unwrap();
    for (predicate, expected) in &cases[..3] {
        assert_eq!(
            &planned(&reopened, predicate).await,
            expected,
            "{predicate}"
        );
    }
}

/// One row per file, `id` = the file's number, `day` = `d{id % 3}`.
fn one_row(id: i64) -> RecordBatch {
    let full = file(id);
    let ids = Int64Array::from(vec![id]);
    RecordBatch::try_new(
        full.schema(),
        vec![
            Arc::new(ids),
            Arc::new(StringArray::from(vec![format!("d{}", id % 3)])),
            Arc::new(StringArray::from(vec![Some(format!("t{id}"))])),
        ],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_many_files_plans_on_every_core_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().join("many").to_str().unwrap())
        .with_arrow_schema(&file(0).schema())
        .with_partition_columns(["day"])
        .execute()
        .await
        .unwrap();
    // 1,200 files in one commit: past the size where planning parses in parallel.
    table
        .write((0..1200).map(one_row).collect::<Vec<_>>())
        .with_target_file_size(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(table.snapshot().file_count(), 1200);
    let ids_of = |plan: tarn::ScanPlan| plan.files.len();
    for (predicate, expected) in [
        (col("id").eq(lit(734i64)), 1),
        (col("id").gt_eq(lit(1_100i64)), 100),
        (col("id").lt(lit(300i64)).and(col("day").eq(lit("d1"))), 100),
        (col("tag").eq(lit("t5")), 1),
    ] {
        for _ in 0..2 {
            let plan = table.scan().filter(predicate.clone()).plan().await.unwrap();
            assert_eq!(ids_of(plan), expected, "{predicate}");
        }
        let rows: usize = table
            .scan()
            .filter(predicate.clone())
            .collect()
            .await
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum();
        assert_eq!(rows, expected, "{predicate}");
    }
}

#[tokio::test]
async fn scans_filter_by_function_calls_as_rows_do() {
    use tarn::expr::parse_sql;
    use tarn_tests::fixtures::sales_table_of;
    use tarn_tests::rows::row_count;
    let dir = tempfile::tempdir().unwrap();
    let table = sales_table_of(dir.path(), 100).await;
    let all = table.scan().collect().await.unwrap();
    // The same predicate evaluated by hand on every row.
    let expected = all
        .iter()
        .map(|b| {
            let ids = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let customers = b
                .column_by_name("customer")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..b.num_rows())
                .filter(|i| {
                    use arrow::array::Array;
                    !customers.is_null(*i)
                        && customers.value(*i).ends_with('3')
                        && ids.value(*i) % 2 == 0
                })
                .count()
        })
        .sum::<usize>();
    assert!(expected > 0);
    let predicate =
        parse_sql("substring(upper(customer), -1) = '3' AND CAST(id / 2 AS INT) * 2 = id").unwrap();
    let found = table.scan().filter(predicate).collect().await.unwrap();
    assert_eq!(row_count(&found), expected);
}

/// Parquet statistics leave NaN out, so a file of `[1, 2, NaN]` has max 2; a NaN row is
/// above every number in the total order rows are compared in, so `f > 5` must keep the
/// file: the scan returns the NaN row and a delete removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_float_range_keeps_files_whose_nan_rows_statistics_leave_out() {
    use arrow::array::{AsArray, Float64Array};
    use arrow::datatypes::Float64Type;
    use futures::TryStreamExt;

    let schema = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, false)]));
    let batch = |values: Vec<f64>| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Float64Array::from(values))],
        )
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().join("t").to_str().unwrap())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    table
        .write(vec![batch(vec![1.0, 2.0, f64::NAN])])
        .execute()
        .await
        .unwrap();
    table
        .write(vec![batch(vec![10.0, 11.0])])
        .execute()
        .await
        .unwrap();
    let above = col("f").gt(lit(5.0f64));
    let rows = table.scan().filter(above.clone()).count().await.unwrap();
    assert_eq!(rows, 3, "10, 11 and NaN are above 5");
    let outcome = table.delete(above).execute().await.unwrap();
    assert_eq!(outcome.metrics.rows_deleted, 3);
    let left: Vec<f64> = table
        .scan()
        .execute()
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Float64Type>().values().to_vec())
        .collect();
    let mut left = left;
    left.sort_by(f64::total_cmp);
    assert_eq!(left, [1.0, 2.0]);
}

/// Every row of `batches` as (id, day), sorted.
fn ids_and_days(batches: &[RecordBatch]) -> Vec<(i64, String)> {
    let mut rows = Vec::new();
    for batch in batches {
        let ids = batch.column_by_name("id").unwrap();
        let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
        let days = batch.column_by_name("day").unwrap();
        let days = days.as_any().downcast_ref::<StringArray>().unwrap();
        rows.extend((0..batch.num_rows()).map(|i| (ids.value(i), days.value(i).to_string())));
    }
    rows.sort();
    rows
}

/// Every batch of `plan` read by `scan` in `parts` parts.
async fn read_parts(scan: &tarn::Scan, plan: &tarn::ScanPlan, parts: usize) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    for part in 0..parts {
        let stream = scan.execute_part(plan, part, parts).await.unwrap();
        batches.extend(
            futures::TryStreamExt::try_collect::<Vec<_>>(stream)
                .await
                .unwrap(),
        );
    }
    batches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_parts_give_each_file_its_own_partition_values_even_when_the_plan_is_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().join("t").to_str().unwrap())
        .with_arrow_schema(&file(0).schema())
        .with_partition_columns(["day"])
        .execute()
        .await
        .unwrap();
    for k in 0..6 {
        table.append([file(k)]).await.unwrap();
    }
    let expected: Vec<(i64, String)> = (0..600)
        .map(|id| (id, format!("d{}", id / 100 % 3)))
        .collect();
    for predicate in [None, Some(col("id").gt_eq(lit(200i64)))] {
        let scan = match &predicate {
            Some(p) => table.scan().filter(p.clone()),
            None => table.scan(),
        };
        let want: Vec<(i64, String)> = expected
            .iter()
            .filter(|(id, _)| predicate.is_none() || *id >= 200)
            .cloned()
            .collect();
        let plan = scan.plan().await.unwrap();
        // As planned, in three parts.
        assert_eq!(
            ids_and_days(&read_parts(&scan, &plan, 3).await),
            want,
            "{predicate:?} as planned"
        );
        // The plan's public file list reordered: each file still gets its own values.
        let mut changed = plan.clone();
        changed.files.reverse();
        assert_eq!(
            ids_and_days(&read_parts(&scan, &changed, 2).await),
            want,
            "{predicate:?} reordered"
        );
        // A plan narrowed by an engine keeps the values of the files it keeps.
        let narrowed = plan.with_files_where(|i, _| i % 2 == 1);
        let rows = ids_and_days(&read_parts(&scan, &narrowed, 1).await);
        assert_eq!(
            rows.len(),
            narrowed.files.len() * 100,
            "{predicate:?} narrowed"
        );
        assert!(
            rows.iter()
                .all(|(id, day)| *day == format!("d{}", id / 100 % 3))
        );
    }
}
