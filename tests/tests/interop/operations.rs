//! Restore, history and log cleanup against Spark and delta-rs: tables Tarn restored read
//! the same in both at every version (RESTORE commits included, with Spark's metrics);
//! Spark's own RESTORE of the same table to the same version agrees with Tarn's on rows
//! and metrics, and Tarn's history reads it; after Tarn's log cleanup, every version kept
//! reads and time-travels the same in Spark and delta-rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use tarn::expr::{col, lit};
use tarn::protocol::names::parse_log_file_name;
use tarn::{ChangeStrategy, Table};
use tarn_tests::fixtures::{
    every_commit_kind, only_country, sales_batch, sales_schema, snapshot_at,
};
use tarn_tests::golden::copy_dir;
use tarn_tests::python::read_with_deltalake;
use tarn_tests::rows::{align, canonical_rows, row_count};
use tarn_tests::spark::spark;
use tarn_tests::spark_checks::{assert_same_in_spark, assert_same_in_spark_at, spark_sql};

const METRICS: [&str; 6] = [
    "numRestoredFiles",
    "restoredFilesSize",
    "numRemovedFiles",
    "removedFilesSize",
    "numOfFilesAfterRestore",
    "tableSizeAfterRestore",
];

/// delta-rs reads `version` of the table at `dir` with Tarn's rows.
async fn assert_same_through_deltalake_at(dir: &Path, version: i64, what: &str) {
    let snapshot = snapshot_at(dir, version).await;
    let ours = snapshot.scan().collect().await.unwrap();
    let theirs = read_with_deltalake(dir, Some(version));
    let what = format!("{what}, version {version}");
    assert_eq!(theirs.version, version, "{what}");
    assert_eq!(theirs.rows, row_count(&ours), "{what}: row count");
    let theirs = align(&theirs.batches, snapshot.arrow_schema());
    assert_eq!(
        canonical_rows(&ours),
        canonical_rows(&theirs),
        "{what}: rows"
    );
}

/// A partitioned table with deletion vectors: appends, a merge-on-read delete, a
/// partition overwrite, an update. Versions 0-5.
async fn changing_table(dir: &Path, properties: &[(&str, &str)]) -> Table {
    let mut create = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true");
    for (k, v) in properties {
        create = create.with_property(*k, *v);
    }
    let mut table = create.execute().await.unwrap();
    table.append([sales_batch(0, 50)]).await.unwrap();
    table
        .delete(col("id").lt(lit(12i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(50, 80)]).await.unwrap();
    table
        .write([only_country(&sales_batch(100, 120), "NL")])
        .with_mode(tarn::WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await
        .unwrap();
    table
        .update()
        .filter(col("id").lt(lit(30i64)))
        .set("amount", col("amount") + lit(1.0))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_tables_read_the_same_in_spark_and_deltalake() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();

    let dir = root.path().join("every-kind");
    let mut table = every_commit_kind(dir.to_str().unwrap()).await;
    let latest = table.version();
    table.restore().to_version(2).execute().await.unwrap();
    // A state with deletion vectors (after the merge-on-read DELETE and UPDATE).
    table
        .restore()
        .to_version(latest - 3)
        .execute()
        .await
        .unwrap();
    table.restore().to_version(0).execute().await.unwrap();
    table.restore().to_version(latest).execute().await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "restored every-kind table").await;
    let history = spark.history(&dir);
    let restores: Vec<&serde_json::Value> = history
        .iter()
        .filter(|r| r["operation"] == "RESTORE")
        .collect();
    assert_eq!(restores.len(), 4);
    for metric in METRICS {
        assert!(
            restores[0]["operationMetrics"][metric].is_string(),
            "{metric} in {}",
            restores[0]
        );
    }

    let dir = root.path().join("changing");
    let mut table = changing_table(&dir, &[]).await;
    table.restore().to_version(2).execute().await.unwrap();
    table.restore().to_version(4).execute().await.unwrap();
    for version in 0..=table.version() {
        assert_same_through_deltalake_at(&dir, version, "restored table").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_and_tarn_restore_alike() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let ours = root.path().join("tarn");
    let theirs = root.path().join("spark");
    changing_table(&ours, &[]).await;
    copy_dir(&ours, &theirs);

    for target in [2, 0, 4] {
        let mut table = Table::open(ours.to_str().unwrap()).await.unwrap();
        table.restore().to_version(target).execute().await.unwrap();
        spark_sql(
            spark,
            &theirs,
            &[&format!("RESTORE TABLE {{t}} TO VERSION AS OF {target}")],
        );
        let spark_table = Table::open(theirs.to_str().unwrap()).await.unwrap();
        assert_eq!(spark_table.version(), table.version());
        let read = |t: &Table| {
            let t = t.clone();
            async move { canonical_rows(&t.scan().collect().await.unwrap()) }
        };
        assert_eq!(read(&table).await, read(&spark_table).await, "to {target}");
        assert_eq!(
            read(&spark_table).await,
            canonical_rows(
                &snapshot_at(&ours, target)
                    .await
                    .scan()
                    .collect()
                    .await
                    .unwrap()
            ),
        );
        // Tarn's history reads Spark's commit; the metrics agree.
        let tarn_commit = &table.history(Some(1)).await.unwrap()[0];
        let spark_commit = &spark_table.history(Some(1)).await.unwrap()[0];
        assert_eq!(spark_commit.operation.as_deref(), Some("RESTORE"));
        assert!(
            spark_commit
                .engine_info
                .as_deref()
                .unwrap_or_default()
                .contains("Delta"),
            "{spark_commit:?}"
        );
        for metric in METRICS {
            assert_eq!(
                tarn_commit.metrics.get(metric),
                spark_commit.metrics.get(metric),
                "{metric} restoring to {target}: ours {:?}, Spark's {:?}",
                tarn_commit.metrics,
                spark_commit.metrics
            );
        }
        assert_eq!(
            tarn_commit.parameters["version"],
            spark_commit.parameters["version"]
        );
    }
}

/// Sets the time of every versioned log file up to `through` to `age` ago.
fn age_log(dir: &Path, through: i64, age: Duration) {
    for entry in std::fs::read_dir(dir.join("_delta_log")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if parse_log_file_name(&name).is_some_and(|n| n.version <= through) {
            std::fs::File::options()
                .write(true)
                .open(entry.path())
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_log_cleanup_every_version_kept_reads_the_same_in_spark_and_deltalake() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cleaned");
    // Spark refuses to travel past the deleted-file retention (a week by default): the
    // versions kept here are 40 days old.
    let table = changing_table(
        &dir,
        &[
            ("delta.checkpointInterval", "2"),
            ("delta.deletedFileRetentionDuration", "interval 60 days"),
        ],
    )
    .await;
    // The checkpoints of versions 2 and 4 were written in the background.
    assert!(tarn::settle_background_work(Duration::from_secs(60)).await);
    table.checkpoint().await.unwrap();
    // Versions 0-3 are 40 days old: the cut is at the newest checkpoint by then, 2.
    age_log(&dir, 3, Duration::from_secs(40 * 86_400));
    let outcome = table.cleanup_log().execute().await.unwrap();
    assert_eq!(outcome.oldest_version, Some(2));
    assert_eq!(outcome.commits, 2);
    let latest = table.version();
    for version in 2..=latest {
        assert_same_in_spark_at(spark, &dir, version, "after cleanup").await;
        assert_same_through_deltalake_at(&dir, version, "after cleanup").await;
    }
    let listed: Vec<i64> = spark
        .history(&dir)
        .iter()
        .map(|r| r["version"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, (2..=latest).rev().collect::<Vec<_>>());
    // Both refuse the versions that are gone, as Tarn does.
    assert!(
        spark
            .try_sql(&format!(
                "SELECT * FROM {} VERSION AS OF 1",
                tarn_tests::spark::delta_table(&dir)
            ))
            .is_err()
    );
}
