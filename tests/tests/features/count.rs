//! `COUNT(*)` from the log: with no predicate, one on partition columns only, or one
//! statistics show every row meets, a count reads no object at all (the snapshot's
//! `numRecords` minus deletion-vector cardinalities); otherwise it reads rows and still
//! agrees with the scan. A `LIMIT` without a predicate plans only the files it needs.
//! `MIN`/`MAX` come from exact statistics when no deletion vector is in the way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStore;
use tarn::expr::{Scalar, col, lit};
use tarn::{ChangeStrategy, StoreLocation, Table};
use tarn_store::CountingStore;

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
    ]));
    let days: Vec<String> = ids.clone().map(|i| format!("d{}", i % 4)).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(days)),
        ],
    )
    .unwrap()
}

/// A new table on the local file system, partitioned by `day` with deletion vectors on
/// when `partitioned`, else plain.
async fn table(partitioned: bool) -> (tempfile::TempDir, StoreLocation, Table) {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let mut create = Table::create_at(location.clone()).with_arrow_schema(&batch(0..1).schema());
    if partitioned {
        create = create
            .with_partition_columns(["day"])
            .with_property("delta.enableDeletionVectors", "true");
    }
    let table = create.execute().await.unwrap();
    (dir, location, table)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_come_from_the_log_without_reading_data() {
    let (_dir, location, mut table) = table(true).await;
    for i in 0..3 {
        table
            .append([batch(i * 1000..i * 1000 + 1000)])
            .await
            .unwrap();
    }
    // Merge-on-read deletes leave deletion vectors: 10 of every 100 ids go.
    let gone: Vec<i64> = (0..3000).filter(|id| id % 100 < 10).collect();
    table
        .delete(col("id").is_in(gone))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();

    let counting = CountingStore::new(Arc::clone(location.store()) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let counted = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    assert!(
        counted
            .snapshot()
            .files()
            .any(|a| a.deletion_vector.is_some())
    );
    counter.take();

    let all = counted.scan().count_outcome().await.unwrap();
    assert_eq!(all.rows, 2700);
    assert_eq!(all.files_read, 0);
    assert_eq!(all.files_from_log, counted.snapshot().file_count());
    let one_day = counted
        .scan()
        .filter(col("day").eq(lit("d1")))
        .count()
        .await
        .unwrap();
    // ids = 1 mod 4, minus those with id % 100 < 10 (1, 5, 9 of each hundred).
    assert_eq!(one_day, 750 - 90);
    // Statistics show every row meets these: still no data read.
    for always in [col("id").gt_eq(lit(0i64)), col("id").is_not_null()] {
        let counted_all = counted
            .scan()
            .filter(always.clone())
            .count_outcome()
            .await
            .unwrap();
        assert_eq!(counted_all.rows, 2700, "{always}");
        assert_eq!(counted_all.files_read, 0, "{always}");
    }
    let requests = counter.take();
    assert_eq!(requests.requests(), 0, "{requests}");

    // A predicate on a data column reads rows, and agrees with the scan.
    let filtered = counted
        .scan()
        .filter(col("id").gt_eq(lit(2500i64)))
        .count_outcome()
        .await
        .unwrap();
    let scanned: usize = counted
        .scan()
        .filter(col("id").gt_eq(lit(2500i64)))
        .collect()
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(filtered.rows, 450);
    assert_eq!(filtered.rows, scanned as u64);
    assert!(filtered.files_read > 0);
    assert!(counter.take().gets > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_plans_and_reads_only_the_files_it_needs() {
    let (_dir, _, mut table) = table(false).await;
    for i in 0..4 {
        table
            .append([batch(i * 1000..i * 1000 + 1000)])
            .await
            .unwrap();
    }
    let rows = |batches: Vec<RecordBatch>| batches.iter().map(RecordBatch::num_rows).sum::<usize>();

    let plan = table.scan().with_limit(1500).plan().await.unwrap();
    assert_eq!(plan.files.len(), 2);
    assert_eq!(
        rows(table.scan().with_limit(1500).collect().await.unwrap()),
        1500
    );
    assert_eq!(rows(table.scan().with_limit(1).collect().await.unwrap()), 1);
    assert_eq!(rows(table.scan().with_limit(0).collect().await.unwrap()), 0);
    assert_eq!(
        rows(table.scan().with_limit(10_000).collect().await.unwrap()),
        4000
    );
    // A limited stream asked again after its end ends again (it used to panic).
    let mut stream = table.scan().with_limit(10_000).execute().await.unwrap();
    let mut drained = 0;
    while let Some(batch) = futures::StreamExt::next(&mut stream).await {
        drained += batch.unwrap().num_rows();
    }
    assert_eq!(drained, 4000);
    assert!(futures::StreamExt::next(&mut stream).await.is_none());
    assert_eq!(table.scan().with_limit(1500).count().await.unwrap(), 1500);

    // With a predicate every file may be planned; the rows stop at the limit and match.
    let filtered = table
        .scan()
        .filter(col("day").eq(lit("d2")))
        .with_limit(30)
        .collect()
        .await
        .unwrap();
    assert_eq!(rows(filtered.clone()), 30);
    for b in &filtered {
        let days = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert!(days.iter().all(|d| d == Some("d2")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_and_max_come_from_exact_statistics_and_are_read_otherwise() {
    let (_dir, location, mut table) = table(true).await;
    table.append([batch(10..1000)]).await.unwrap();
    table.append([batch(1000..2000)]).await.unwrap();

    let counting = CountingStore::new(Arc::clone(location.store()) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let counted = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    counter.take();
    let all = counted.scan().min_max("id").await.unwrap();
    assert!(all.from_log);
    assert_eq!(all.bounds, Some((Scalar::Long(10), Scalar::Long(1999))));
    // One partition: ids = 2 mod 4.
    let day = counted
        .scan()
        .filter(col("day").eq(lit("d2")))
        .min_max("id")
        .await
        .unwrap();
    assert!(day.from_log);
    assert_eq!(day.bounds, Some((Scalar::Long(10), Scalar::Long(1998))));
    assert_eq!(counter.take().requests(), 0);

    // A data predicate, or a string column (bounds may be truncated), reads the column.
    let filtered = counted
        .scan()
        .filter(col("id").gt_eq(lit(1500i64)))
        .min_max("id")
        .await
        .unwrap();
    assert!(!filtered.from_log);
    assert_eq!(
        filtered.bounds,
        Some((Scalar::Long(1500), Scalar::Long(1999)))
    );
    let days = counted.scan().min_max("day").await.unwrap();
    assert_eq!(
        days.bounds,
        Some((Scalar::String("d0".into()), Scalar::String("d3".into())))
    );
    assert!(!days.from_log);

    // Deleting the extremes leaves deletion vectors: the statistics no longer bound the
    // live rows exactly, so the rows are read.
    table
        .delete(col("id").is_in([10i64, 11, 1998, 1999]))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let after = table.scan().min_max("id").await.unwrap();
    assert!(!after.from_log);
    assert_eq!(after.bounds, Some((Scalar::Long(12), Scalar::Long(1997))));
    let none = table
        .scan()
        .filter(col("id").lt(lit(0i64)))
        .min_max("id")
        .await
        .unwrap();
    assert_eq!(none.bounds, None);
    assert!(matches!(
        table.scan().min_max("nope").await,
        Err(tarn::Error::UnknownColumn { .. })
    ));
}
