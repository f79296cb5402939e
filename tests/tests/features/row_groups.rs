//! A table of one file with many row groups: a scan decodes its row groups in several runs
//! at once (fewer files than cores) and returns every live row once, with a deletion
//! vector, with a predicate pruning row groups, and through a limit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::file::properties::WriterProperties;
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Table};

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            let ids = b.column_by_name("id").unwrap();
            let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
            ids.values().to_vec()
        })
        .collect();
    out.sort_unstable();
    out
}

/// A new table at `dir/t` of `schema`, with deletion vectors on.
async fn dv_table(dir: &std::path::Path, schema: &arrow::datatypes::SchemaRef) -> Table {
    Table::create(dir.join("t").to_str().unwrap())
        .with_arrow_schema(schema)
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap()
}

/// Writer settings that cut a file into row groups of 7,000 rows.
fn small_row_groups() -> WriterProperties {
    WriterProperties::builder()
        .set_max_row_group_row_count(Some(7_000))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_many_row_groups_reads_every_live_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let data = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from_iter_values(0..100_000))],
    )
    .unwrap();
    let mut table = dv_table(dir.path(), &schema).await;
    table
        .write([data])
        .with_writer_properties(small_row_groups())
        .execute()
        .await
        .unwrap();
    assert_eq!(table.snapshot().file_count(), 1);

    let all = table.scan().collect().await.unwrap();
    assert_eq!(ids(&all), (0..100_000).collect::<Vec<_>>());

    table
        .delete(
            col("id")
                .gt_eq(lit(20_000i64))
                .and(col("id").lt(lit(30_000i64))),
        )
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let live: Vec<i64> = (0..20_000).chain(30_000..100_000).collect();
    assert_eq!(ids(&table.scan().collect().await.unwrap()), live);

    // Row groups outside the range are pruned; the rest split between runs.
    let some = table
        .scan()
        .filter(
            col("id")
                .gt_eq(lit(15_000i64))
                .and(col("id").lt(lit(60_000i64))),
        )
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (15_000..20_000).chain(30_000..60_000).collect();
    assert_eq!(ids(&some), expected);

    let limited: usize = table
        .scan()
        .with_limit(10)
        .collect()
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(limited, 10);
    assert_eq!(table.scan().count().await.unwrap(), 90_000);
}

fn pairs(batches: &[RecordBatch]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = batches
        .iter()
        .flat_map(|b| {
            let column = |name: &str| {
                b.column_by_name(name)
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            };
            column("id").into_iter().zip(column("v"))
        })
        .collect();
    out.sort_unstable();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_changes_to_a_file_of_many_row_groups_mark_the_right_rows() {
    use tarn::expr::{source_col, target_col};
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let rows = |ids: Vec<i64>, v: fn(i64) -> i64| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(Int64Array::from_iter_values(ids.into_iter().map(v))),
            ],
        )
        .unwrap()
    };
    let mut table = dv_table(dir.path(), &schema).await;
    // One file of 15 row groups: a change reading it decodes runs of them at once.
    table
        .write([rows((0..100_000).collect(), |id| id)])
        .with_writer_properties(small_row_groups())
        .execute()
        .await
        .unwrap();
    let mut model: std::collections::BTreeMap<i64, i64> = (0..100_000).map(|i| (i, i)).collect();

    // An update of rows spread over every row group.
    table
        .update()
        .filter(col("v").gt_eq(lit(0i64)).and(col("id").lt(lit(100_000i64))))
        .set("v", col("v") + lit(1i64))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    model.values_mut().for_each(|v| *v += 1);

    // A merge matching rows in the first and last row groups, and inserting new ones.
    let source: Vec<i64> = (10..20).chain(99_990..100_010).collect();
    table
        .merge([rows(source.clone(), |id| -id)])
        .on(["id"])
        .when_matched_delete(Some(target_col("id").lt(lit(15i64))))
        .when_matched_update(None, [("v", source_col("v"))])
        .when_not_matched_insert_all(None)
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    for id in source {
        if id < 15 {
            model.remove(&id);
        } else {
            model.insert(id, -id);
        }
    }
    let want: Vec<(i64, i64)> = model.into_iter().collect();
    assert_eq!(pairs(&table.scan().collect().await.unwrap()), want);
}

/// Every batch of `scan` in `parts` parts, one list per part.
async fn parts_of(scan: &tarn::Scan, parts: usize) -> Vec<Vec<RecordBatch>> {
    let plan = scan.plan().await.unwrap();
    let mut out = Vec::new();
    for part in 0..parts {
        let stream = scan.execute_part(&plan, part, parts).await.unwrap();
        out.push(
            futures::TryStreamExt::try_collect::<Vec<_>>(stream)
                .await
                .unwrap(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parts_of_a_scan_split_a_large_file_by_row_groups_and_read_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = |ids: std::ops::Range<i64>| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from_iter_values(ids))],
        )
        .unwrap()
    };
    let mut table = dv_table(dir.path(), &schema).await;
    // A file of 15 row groups, then one of 2: the second is about a seventh the size.
    for ids in [0..100_000, 100_000..114_000] {
        table
            .write([batch(ids)])
            .with_writer_properties(small_row_groups())
            .execute()
            .await
            .unwrap();
    }
    table
        .delete(
            col("id")
                .gt_eq(lit(20_000i64))
                .and(col("id").lt(lit(30_000i64))),
        )
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let live: Vec<i64> = (0..20_000).chain(30_000..114_000).collect();

    let two = parts_of(&table.scan(), 2).await;
    // The line of bytes is cut inside the large file: both parts read some of it.
    for (part, batches) in two.iter().enumerate() {
        let ids = ids(batches);
        assert!(
            ids.first().is_some_and(|id| *id < 100_000),
            "part {part}: {ids:?}"
        );
    }
    assert_eq!(ids(&two.concat()), live);
    for parts in [3, 5, 16] {
        assert_eq!(
            ids(&parts_of(&table.scan(), parts).await.concat()),
            live,
            "{parts} parts"
        );
    }

    let range = col("id")
        .gt_eq(lit(15_000i64))
        .and(col("id").lt(lit(105_000i64)));
    let expected: Vec<i64> = (15_000..20_000).chain(30_000..105_000).collect();
    for parts in [1, 2, 3] {
        let scan = table.scan().filter(range.clone());
        assert_eq!(
            ids(&parts_of(&scan, parts).await.concat()),
            expected,
            "{parts} parts"
        );
    }
}
