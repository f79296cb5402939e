//! Deletion vectors end to end: `Transaction::delete_rows` deletes rows of a file by
//! position (the rows go, concurrent deletes of other rows of the file unite, one of the
//! same row conflicts, bad input is refused with nothing committed), and a deletion
//! vector is loaded once per table handle (reads of the same file and a merge-on-read
//! MERGE all succeed with every GET of a DV file failing after the first read).
//!
//! Deletion vectors also run through other files, by what they exercise: DELETE, UPDATE
//! and MERGE writing them inline or in files (`dml.rs`), corrupt ones (`bad_input.rs`),
//! Spark's (`golden.rs`, `../interop/spark_features.rs`), concurrent ones
//! (`../concurrency/`), their cleanup (`vacuum.rs`) and other readers of Tarn's
//! (`../interop/interop.rs`, `../interop/duckdb.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit, target_col};
use tarn::{ChangeStrategy, ConflictReason, Error, RetryPolicy, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::fixtures::sales_table_of;
use tarn_tests::rows::sorted_ids;

/// The ids the table holds, sorted.
async fn ids(table: &Table) -> Vec<i64> {
    sorted_ids(&table.scan().select(["id"]).collect().await.unwrap())
}

/// A one-file table of ids `0..rows` with deletion vectors on.
async fn dv_table(dir: &std::path::Path, rows: i64) -> Table {
    let mut table = sales_table_of(dir, rows).await;
    let _ = table
        .set_properties([("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_deleted_by_position_go_and_the_file_goes_with_its_last_row() {
    let root = tempfile::tempdir().unwrap();
    let mut table = dv_table(&root.path().join("t"), 10).await;
    let add = table.snapshot().files().next().unwrap().clone();
    let (batch, positions) = table.snapshot().read_file_positions(&add).await.unwrap();
    assert_eq!(batch.num_rows(), 10);
    assert_eq!(positions, (0..10).collect::<Vec<u64>>());

    let mut txn = table.transaction();
    txn.delete_rows(&add, &[2, 5]).await.unwrap();
    let outcome = table.commit(txn).await.unwrap();
    assert_eq!(outcome.version, table.version());
    assert_eq!(ids(&table).await, vec![0, 1, 3, 4, 6, 7, 8, 9]);
    let add = table.snapshot().files().next().unwrap().clone();
    assert_eq!(add.deletion_vector.as_ref().unwrap().cardinality, 2);
    let (_, positions) = table.snapshot().read_file_positions(&add).await.unwrap();
    assert_eq!(positions, vec![0, 1, 3, 4, 6, 7, 8, 9]);

    // The rest of the rows: the file is removed, not marked whole.
    let mut txn = table.transaction();
    txn.delete_rows(&add, &positions).await.unwrap();
    let _ = table.commit(txn).await.unwrap();
    assert_eq!(table.snapshot().files().count(), 0);
    assert!(ids(&table).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deletes_of_other_rows_unite_and_of_one_row_conflict() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t");
    let table = dv_table(&dir, 10).await;
    let add = table.snapshot().files().next().unwrap().clone();
    // Group commit off: the second must rebase on its own.
    let alone = RetryPolicy {
        group_commit: false,
        ..RetryPolicy::default()
    };
    let mut a = Table::open(dir.to_str().unwrap())
        .await
        .unwrap()
        .with_retry_policy(alone);
    let mut b = Table::open(dir.to_str().unwrap())
        .await
        .unwrap()
        .with_retry_policy(alone);
    let mut c = Table::open(dir.to_str().unwrap())
        .await
        .unwrap()
        .with_retry_policy(alone);
    let (mut ta, mut tb, mut tc) = (a.transaction(), b.transaction(), c.transaction());
    ta.delete_rows(&add, &[1]).await.unwrap();
    tb.delete_rows(&add, &[7, 8]).await.unwrap();
    tc.delete_rows(&add, &[8]).await.unwrap();
    let first = a.commit(ta).await.unwrap();
    let second = b.commit(tb).await.unwrap();
    assert_eq!(second.version, first.version + 1);
    assert_eq!(second.rebased_over, vec![first.version]);
    b.refresh().await.unwrap();
    assert_eq!(ids(&b).await, vec![0, 2, 3, 4, 5, 6, 9]);
    let live = b.snapshot().files().next().unwrap().clone();
    assert_eq!(live.deletion_vector.as_ref().unwrap().cardinality, 3);

    let third = c.commit(tc).await;
    match third {
        Err(Error::Conflict {
            reason: ConflictReason::ConcurrentDeletionVectorOverlap { rows, .. },
            winning_version,
            ..
        }) => {
            assert_eq!((rows, winning_version), (1, second.version));
        }
        other => panic!("expected an overlap conflict, got {other:?}"),
    }
    b.refresh().await.unwrap();
    assert_eq!(b.version(), second.version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_positions_stale_files_and_tables_without_dvs_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let plain = sales_table_of(&root.path().join("plain"), 4).await;
    let add = plain.snapshot().files().next().unwrap().clone();
    let mut txn = plain.transaction();
    let refused = txn.delete_rows(&add, &[0]).await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidArgument {
                name: "delete_rows",
                ..
            })
        ),
        "{refused:?}"
    );

    let mut table = dv_table(&root.path().join("dv"), 4).await;
    let before = table.version();
    let add = table.snapshot().files().next().unwrap().clone();
    let mut txn = table.transaction();
    let past = txn.delete_rows(&add, &[1, 4]).await;
    assert!(
        matches!(&past, Err(Error::InvalidArgument { reason, .. }) if reason.contains("past its 4 rows")),
        "{past:?}"
    );
    // Nothing was recorded: the transaction commits no change.
    let _ = table.commit(txn).await.unwrap();
    assert_eq!(ids(&table).await, vec![0, 1, 2, 3]);

    // The file as an older version held it (without the DV it has now).
    let mut txn = table.transaction();
    txn.delete_rows(&add, &[0]).await.unwrap();
    let _ = table.commit(txn).await.unwrap();
    let mut txn = table.transaction();
    let stale = txn.delete_rows(&add, &[1]).await;
    assert!(
        matches!(&stale, Err(Error::InvalidArgument { reason, .. }) if reason.contains("not a live file")),
        "{stale:?}"
    );
    assert_eq!(ids(&table).await, vec![1, 2, 3]);
    assert!(table.version() > before);
}

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(Int64Array::from_iter_values(ids.map(|i| i * 10))),
        ],
    )
    .unwrap()
}

fn sum(batches: &[RecordBatch], column: &str) -> i64 {
    batches
        .iter()
        .map(|b| {
            let values = b.column_by_name(column).unwrap();
            let values = values.as_any().downcast_ref::<Int64Array>().unwrap();
            values.iter().flatten().sum::<i64>()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_are_read_once_per_table_handle() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&batch(0..1).schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([batch(0..1000)]).await.unwrap();
    table
        .delete(col("id").lt(lit(100i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();

    let faulty = FaultStore::new(Arc::clone(location.store()), 1)
        .with_rule(FaultRule::new(FaultOp::Get, Fault::FailBefore).with_glob("*deletion_vector_*"));
    let control = faulty.control();
    control.set_enabled(false);
    let mut through = Table::open_at(location.clone().with_store(Arc::new(faulty)))
        .await
        .unwrap();
    let first = through.scan().collect().await.unwrap();
    assert_eq!(sum(&first, "id"), (100..1000).sum::<i64>());

    control.set_enabled(true);
    let again = through.scan().collect().await.unwrap();
    assert_eq!(sum(&again, "id"), (100..1000).sum::<i64>());
    // Updating from the target's own values: keys, then the matched rows, then the DV.
    through
        .merge([batch(500..510)])
        .on(["id"])
        .when_matched_update(None, [("value", target_col("value") + lit(1i64))])
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        control.injected(),
        0,
        "no deletion vector was fetched again"
    );
    control.set_enabled(false);
    let after = Table::open_at(location).await.unwrap();
    let rows = after.scan().collect().await.unwrap();
    assert_eq!(
        sum(&rows, "value"),
        (100..1000).map(|i| i * 10).sum::<i64>() + 10
    );
}
