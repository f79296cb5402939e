//! Inspecting and rolling back a table on local disk: `Table::history` lists every commit
//! with what its `commitInfo` recorded; `Table::describe` and `Snapshot::files_batch`
//! say what the table holds; `Table::restore` brings back every earlier version's rows
//! (deletion vectors, overwritten partitions and added columns included) in one commit
//! with Spark's metrics, by version or by timestamp, and refuses what it cannot do
//! without committing anything.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Error, Snapshot, Table};
use tarn_tests::fixtures::{every_commit_kind, sales_batch, sales_table_of, snapshot_at};
use tarn_tests::rows::canonical_rows;
use tarn_tests::spark_checks::operations;

async fn rows(snapshot: &Snapshot) -> Vec<String> {
    canonical_rows(&snapshot.scan().collect().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_every_commit_newest_first_with_what_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let table = every_commit_kind(dir.path().to_str().unwrap()).await;
    let latest = table.version();

    let history = table.history(None).await.unwrap();
    let versions: Vec<i64> = history.iter().map(|c| c.version).collect();
    assert_eq!(versions, (0..=latest).rev().collect::<Vec<_>>());
    let mut expected = operations(dir.path(), latest);
    expected.reverse();
    let listed: Vec<String> = history
        .iter()
        .map(|c| c.operation.clone().unwrap())
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(
        history.last().unwrap().operation.as_deref(),
        Some("CREATE TABLE")
    );

    let times: Vec<i64> = table
        .versions()
        .await
        .unwrap()
        .iter()
        .rev()
        .map(|v| v.timestamp_ms)
        .collect();
    assert_eq!(
        history.iter().map(|c| c.timestamp_ms).collect::<Vec<_>>(),
        times,
        "history's times are the ones time travel goes by"
    );
    for commit in &history {
        assert!(commit.engine_info.as_deref().unwrap().starts_with("tarn/"));
        assert!(!commit.txn_id.as_deref().unwrap().is_empty());
        if commit.version > 0 {
            assert_eq!(commit.read_version, Some(commit.version - 1), "{commit:?}");
        }
    }

    let custom = &history[0];
    assert_eq!(custom.operation.as_deref(), Some("CUSTOM"));
    assert_eq!(custom.parameters["count"], "3");
    assert_eq!(custom.parameters["flags"], "[true,false]");
    assert_eq!(custom.parameters["nothing"], "null");
    assert_eq!(custom.metrics["numThings"], "2");
    let stream = &history[1];
    assert_eq!(stream.app_transactions.len(), 1);
    assert_eq!(stream.app_transactions[0].app_id, "stream-1");
    assert_eq!(stream.app_transactions[0].version, 7);
    let append = &history[history.len() - 2];
    assert_eq!(append.operation.as_deref(), Some("WRITE"));
    assert_eq!(append.is_blind_append, Some(true));
    let merge = history
        .iter()
        .find(|c| c.operation.as_deref() == Some("MERGE"))
        .unwrap();
    // Metrics by the names Spark's Delta gives each operation.
    for name in [
        "numTargetRowsUpdated",
        "numTargetRowsInserted",
        "numTargetRowsDeleted",
        "numTargetFilesAdded",
        "numTargetFilesRemoved",
    ] {
        assert!(merge.metrics.contains_key(name), "{name}: {merge:?}");
    }
    assert!(!merge.metrics.contains_key("numUpdatedRows"), "{merge:?}");
    let delete = history
        .iter()
        .find(|c| c.operation.as_deref() == Some("DELETE"))
        .unwrap();
    assert!(delete.metrics.contains_key("numDeletedRows"), "{delete:?}");
    assert!(delete.metrics.contains_key("numRemovedFiles"), "{delete:?}");
    assert!(!delete.metrics.contains_key("numUpdatedRows"), "{delete:?}");
    assert_eq!(merge.is_blind_append, Some(false));

    // A limit keeps the newest; a handle at an old version lists up to it.
    let newest: Vec<i64> = table
        .history(Some(3))
        .await
        .unwrap()
        .iter()
        .map(|c| c.version)
        .collect();
    assert_eq!(newest, [latest, latest - 1, latest - 2]);
    let mut old = table.clone();
    old.load_version(2).await.unwrap();
    let listed: Vec<i64> = old
        .history(None)
        .await
        .unwrap()
        .iter()
        .map(|c| c.version)
        .collect();
    assert_eq!(listed, [2, 1, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_brings_back_the_rows_of_every_earlier_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = every_commit_kind(dir.path().to_str().unwrap()).await;
    let last_written = table.version();
    // From each state to the next, forwards and back: every restore starts from the
    // state the one before it left, deletion vectors and added columns included.
    let mut order: Vec<i64> = (0..last_written).collect();
    order.extend((1..last_written - 1).rev().step_by(3));
    for target in order {
        let expected = snapshot_at(dir.path(), target).await;
        let before = table.version();
        let outcome = table.restore().to_version(target).execute().await.unwrap();
        assert_eq!(outcome.commit.version, before + 1);
        assert_eq!(outcome.restored_version, target);
        assert_eq!(table.version(), before + 1);
        assert_eq!(
            table.schema(),
            expected.schema(),
            "version {target}: schema"
        );
        assert_eq!(
            rows(table.snapshot()).await,
            rows(&expected).await,
            "version {target}: rows"
        );
        assert_eq!(outcome.files_after, expected.file_count());
        assert_eq!(table.snapshot().file_count(), expected.file_count());

        // A fresh handle reads the same; the commit records Spark's metrics.
        let fresh = Table::open(dir.path().to_str().unwrap()).await.unwrap();
        assert_eq!(rows(fresh.snapshot()).await, rows(&expected).await);
        let commit = &fresh.history(Some(1)).await.unwrap()[0];
        assert_eq!(commit.operation.as_deref(), Some("RESTORE"));
        assert_eq!(commit.parameters["version"], target.to_string());
        for (metric, value) in [
            ("numRestoredFiles", outcome.files_added as u64),
            ("restoredFilesSize", outcome.bytes_added),
            ("numRemovedFiles", outcome.files_removed as u64),
            ("removedFilesSize", outcome.bytes_removed),
            ("numOfFilesAfterRestore", outcome.files_after as u64),
            ("tableSizeAfterRestore", outcome.bytes_after),
        ] {
            assert_eq!(commit.metrics[metric], value.to_string(), "{metric}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_counts_the_files_it_adds_back_and_takes_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table_of(dir.path(), 100).await;
    let _ = table
        .set_properties([("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    let one = table.snapshot().clone();
    table.append([sales_batch(100, 150)]).await.unwrap();
    table
        .delete(col("id").lt(lit(10i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    // Version 4: the first file carries a DV, the second file is new.
    let outcome = table.restore().to_version(2).execute().await.unwrap();
    let size = |s: &Snapshot| s.files().map(|a| a.size as u64).sum::<u64>();
    assert_eq!(outcome.files_added, 1, "the first file without its DV");
    assert_eq!(
        outcome.files_removed, 2,
        "the file with the DV and the appended one"
    );
    assert_eq!(outcome.files_after, 1);
    assert_eq!(outcome.bytes_after, size(&one));
    assert_eq!(outcome.bytes_added, size(&one));
    assert_eq!(rows(table.snapshot()).await, rows(&one).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_by_timestamp_takes_the_newest_version_at_or_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table_of(dir.path(), 10).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    table.append([sales_batch(10, 20)]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    table.append([sales_batch(20, 30)]).await.unwrap();
    let versions = table.versions().await.unwrap();
    let at_two = versions[2].timestamp_ms;
    let outcome = table
        .restore()
        .to_timestamp(at_two + 1)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.restored_version, 2);
    assert_eq!(outcome.files_removed, 1);
    let restored = rows(table.snapshot()).await;
    assert_eq!(restored, rows(&snapshot_at(dir.path(), 2).await).await);
    let commit = &table.history(Some(1)).await.unwrap()[0];
    assert_eq!(commit.parameters["timestamp"], (at_two + 1).to_string());

    // Before the first commit there is nothing to restore.
    let err = table
        .restore()
        .to_timestamp(versions[0].timestamp_ms - 60_000)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimestampOutOfRange { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_refuses_what_it_cannot_do_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let mut table = sales_table_of(dir.path(), 10).await;
    table.overwrite([sales_batch(10, 20)]).await.unwrap();
    let latest = table.version();

    for target in [latest, latest + 3, -1] {
        let err = table
            .restore()
            .to_version(target)
            .execute()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    name: "restore",
                    ..
                }
            ),
            "{err}"
        );
    }
    let err = table.restore().execute().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                name: "restore",
                ..
            }
        ),
        "{err}"
    );

    // A vacuum with no retention deletes version 1's file: restoring it would commit a
    // table that cannot be read.
    table
        .vacuum()
        .with_retention(Duration::ZERO)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    let err = table.restore().to_version(1).execute().await.unwrap_err();
    let Error::RestoreFilesMissing { version, missing } = &err else {
        panic!("expected RestoreFilesMissing, got {err}");
    };
    assert_eq!(*version, 1);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(
        err.to_string().contains("cannot restore version 1"),
        "{err}"
    );
    let reopened = Table::open(url).await.unwrap();
    assert_eq!(reopened.version(), latest, "nothing was committed");
    assert_eq!(table.version(), latest);

    // An append-only table takes no restore that removes files, whatever the old
    // version's properties said.
    let _ = table
        .set_properties([("delta.appendOnly", "true")])
        .await
        .unwrap();
    let err = table.restore().to_version(1).execute().await.unwrap_err();
    assert!(matches!(err, Error::AppendOnly { .. }), "{err}");
    assert_eq!(Table::open(url).await.unwrap().version(), latest + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_the_files_batch_say_what_the_table_holds() {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;
    use tarn::IndexKind;

    let dir = tempfile::tempdir().unwrap();
    let mut table = tarn_tests::fixtures::country_sales_table(dir.path()).await;
    let _ = table
        .set_properties([("owner", "ops"), ("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    table
        .delete(col("id").lt(lit(5i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table
        .create_index("customer")
        .with_kind(IndexKind::Bitmap)
        .execute()
        .await
        .unwrap();

    let detail = table.describe().unwrap();
    let snapshot = table.snapshot();
    assert_eq!(detail.version, table.version());
    assert_eq!(detail.timestamp_ms, snapshot.timestamp_ms());
    assert_eq!(detail.id, snapshot.metadata().id);
    assert_eq!(detail.partition_columns, ["country"]);
    assert_eq!(detail.properties["owner"], "ops");
    assert!(detail.protocol.has_writer_feature("deletionVectors"));
    assert_eq!(detail.files, snapshot.file_count());
    assert_eq!(
        detail.bytes,
        snapshot.files().map(|a| a.size as u64).sum::<u64>()
    );
    assert_eq!(detail.rows, Some(95));
    assert_eq!(detail.deleted_rows, 5);
    assert!(detail.files_with_deletion_vectors >= 1);
    assert_eq!(
        detail.files_with_deletion_vectors,
        snapshot
            .files()
            .filter(|a| a.deletion_vector.is_some())
            .count()
    );
    assert_eq!(detail.indices.len(), 1);
    assert_eq!(detail.indices[0].name, "customer_idx");
    assert_eq!(detail.indices[0].files_covered, detail.files);
    assert_eq!(detail.schema, *table.schema());

    let batch = snapshot.files_batch().unwrap();
    assert_eq!(batch.num_rows(), detail.files);
    let paths: Vec<&str> = batch
        .column_by_name("path")
        .unwrap()
        .as_string::<i32>()
        .iter()
        .map(Option::unwrap)
        .collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    let sum = |name: &str| -> i64 {
        batch
            .column_by_name(name)
            .unwrap()
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.unwrap())
            .sum()
    };
    assert_eq!(sum("size_bytes") as u64, detail.bytes);
    assert_eq!(sum("num_records") - sum("deleted_rows"), 95);
    assert_eq!(sum("deleted_rows"), 5);
    let dvs = batch.column_by_name("deletion_vector").unwrap();
    assert_eq!(
        dvs.len() - dvs.null_count(),
        detail.files_with_deletion_vectors
    );
    let countries = batch
        .column_by_name("partition.country")
        .unwrap()
        .as_string::<i32>();
    for (path, country) in paths.iter().zip(countries.iter()) {
        match country {
            None => assert!(
                path.starts_with("country=__HIVE_DEFAULT_PARTITION__/"),
                "{path}"
            ),
            Some("NL" | "FR" | "DE") => {
                assert!(
                    path.starts_with(&format!("country={}/", country.unwrap())),
                    "{path}"
                )
            }
            Some(other) => assert_eq!(other, "../x y=z%/:#", "the value, not its folder name"),
        }
    }
    assert!(
        batch.column_by_name("stats").unwrap().null_count() == 0,
        "Tarn writes statistics for every file"
    );
}
