//! In-commit timestamps (`delta.enableInCommitTimestamps`): tables created with them get
//! the `inCommitTimestamp` writer feature, and every commit Tarn writes to them carries
//! `commitInfo.inCommitTimestamp` first in the file, strictly above the previous commit's
//! whatever the writer's clock says, also when its snapshot came from a checkpoint; a
//! table that turns them on later records that commit's version and stamp. Time travel
//! by timestamp follows them. Spark's side is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use tarn::expr::{col, lit};
use tarn::{ManualClock, Snapshot, Table};
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::log::in_commit_timestamps;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_carry_rising_in_commit_timestamps_whatever_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let mut table = Table::create(url)
        .with_arrow_schema(&sales_schema())
        .with_property("delta.enableInCommitTimestamps", "true")
        .with_property("delta.checkpointInterval", "3")
        .with_clock(clock.clone())
        .execute()
        .await
        .unwrap();
    let protocol = table.snapshot().protocol().clone();
    assert_eq!(
        (protocol.min_reader_version, protocol.min_writer_version),
        (1, 7)
    );
    assert!(protocol.has_writer_feature("inCommitTimestamp"));

    // The clock goes back an hour between commits: the stamps still rise.
    for i in 0..4 {
        clock.set(1_800_000_000_000 - 3_600_000 * (i + 1));
        let outcome = table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
        if let Some(task) = &outcome.commit.checkpoint {
            task.wait().await.unwrap();
        }
    }
    table
        .delete(col("id").lt(lit(5i64)))
        .execute()
        .await
        .unwrap();
    let stamps_now = in_commit_timestamps(dir.path(), 0, table.version()).await;
    assert_eq!(stamps_now[0], 1_800_000_000_000);
    assert!(
        stamps_now.windows(2).all(|w| w[1] > w[0]),
        "stamps do not rise: {stamps_now:?}"
    );

    // A writer whose snapshot comes from a checkpoint at the latest version (no commit
    // replayed) still stamps above the last commit, though its clock is a day behind.
    let mut checkpointed = table.version();
    while checkpointed % 3 != 0 {
        let outcome = table.append([sales_batch(50, 60)]).await.unwrap();
        if let Some(task) = &outcome.commit.checkpoint {
            task.wait().await.unwrap();
        }
        checkpointed = table.version();
    }
    assert!(
        dir.path()
            .join(format!("_delta_log/{checkpointed:020}.checkpoint.parquet"))
            .exists()
    );
    let behind = Arc::new(ManualClock::new(1_800_000_000_000 - 86_400_000));
    let mut late = Table::open(url).await.unwrap().with_clock(behind);
    late.append([sales_batch(100, 110)]).await.unwrap();
    let all = in_commit_timestamps(dir.path(), checkpointed, late.version()).await;
    assert_eq!(
        late.version(),
        checkpointed + 1,
        "the late writer raced no one"
    );
    assert!(
        all.windows(2).all(|w| w[1] > w[0]),
        "stamps after the checkpoint do not rise: {all:?}"
    );

    // The history lists the stamps, not file times.
    let listed = late.versions().await.unwrap();
    let stamps = in_commit_timestamps(dir.path(), 0, late.version()).await;
    assert_eq!(listed.len(), stamps.len());
    assert!(
        listed
            .iter()
            .zip(&stamps)
            .all(|(v, s)| v.timestamp_ms == *s),
        "{listed:?} against {stamps:?}"
    );

    // Time travel by timestamp goes by the stamps, not by file times.
    let location = tarn_store::open(url).unwrap();
    let at = Snapshot::builder(location)
        .at_timestamp(all[1])
        .build()
        .await
        .unwrap();
    assert_eq!(at.version(), checkpointed + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_them_on_records_the_version_and_stamp_of_that_commit() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let mut table = Table::create(url)
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    // Another writer commits first: the enabling commit lands a version later than its
    // writer read, and must record that version.
    let mut other = Table::open(url).await.unwrap();
    other.append([sales_batch(10, 20)]).await.unwrap();
    let _ = table
        .set_properties([("delta.enableInCommitTimestamps", "true")])
        .await
        .unwrap();
    assert_eq!(table.version(), 3);
    let properties = table.snapshot().metadata().configuration.clone();
    let stamp = in_commit_timestamps(dir.path(), 3, 3).await[0];
    assert_eq!(
        properties["delta.inCommitTimestampEnablementVersion"].as_deref(),
        Some("3")
    );
    assert_eq!(
        properties["delta.inCommitTimestampEnablementTimestamp"].as_deref(),
        Some(stamp.to_string().as_str())
    );
    assert!(
        table
            .snapshot()
            .protocol()
            .has_writer_feature("inCommitTimestamp")
    );
    table.append([sales_batch(20, 30)]).await.unwrap();
    let stamps = in_commit_timestamps(dir.path(), 3, 4).await;
    assert!(stamps[1] > stamps[0]);
    // Commits before the enablement have none.
    let text =
        std::fs::read_to_string(dir.path().join(format!("_delta_log/{:020}.json", 1))).unwrap();
    assert!(!text.contains("inCommitTimestamp"));
}
