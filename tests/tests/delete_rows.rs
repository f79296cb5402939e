//! `Transaction::delete_rows`: deleting rows of a file by position through a deletion
//! vector, on the local file system: the rows go, concurrent deletes of other rows of the
//! file unite, one of the same row conflicts, and bad input is refused with nothing
//! committed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tarn::{ConflictReason, Error, RetryPolicy, Table};
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
