//! Vacuum removes what no version within the retention references (orphans of failed
//! commits included), never a file a recent version references or a file younger than
//! the retention, and a reader pinned to an old version inside the retention keeps
//! reading.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tarn::{Error, Snapshot, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::golden::{copy_dir, golden_table};
use tarn_tests::rows::row_count;

const DAY: Duration = Duration::from_secs(86_400);

/// Data files (not the log) under a folder, relative to it, sorted.
fn data_files(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if entry.file_name() != "_delta_log" {
                    walk(&path, root, out);
                }
            } else {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Sets the modification time of every data file under `root` to `age` ago.
fn age_files(root: &Path, age: Duration) {
    for file in data_files(root) {
        let handle = std::fs::File::options()
            .write(true)
            .open(root.join(&file))
            .unwrap();
        handle.set_modified(SystemTime::now() - age).unwrap();
    }
}

async fn scan_rows(snapshot: &Snapshot) -> tarn::Result<usize> {
    Ok(row_count(&snapshot.scan().collect().await?))
}

#[tokio::test]
async fn vacuum_removes_orphans_and_expired_files_but_nothing_recent_versions_need() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let mut table = Table::create(url)
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    let v1_files = data_files(dir.path());
    table.overwrite([sales_batch(10, 30)]).await.unwrap();

    // A write whose commit never lands leaves its data files behind.
    let location = tarn_store::open(url).unwrap();
    let faulty = FaultStore::new(Arc::clone(location.store()), 5).with_rule(
        FaultRule::new(FaultOp::Put, Fault::ServerError).with_glob("*/_delta_log/*.json"),
    );
    let mut failing = Table::open_at(location.with_store(Arc::new(faulty)))
        .await
        .unwrap();
    let err = failing.append([sales_batch(100, 110)]).await.unwrap_err();
    assert!(matches!(err, Error::CommitStateUnknown { .. }), "{err}");
    let before_orphans = data_files(dir.path());
    let orphans: Vec<String> = before_orphans
        .iter()
        .filter(|f| {
            !v1_files.contains(f)
                && table
                    .snapshot()
                    .files()
                    .all(|a| !a.path.ends_with(f.rsplit('/').next().unwrap()))
        })
        .cloned()
        .collect();
    assert_eq!(orphans.len(), 1, "{before_orphans:?}");

    // Everything is a month old, but version 1's file was removed just now; and a
    // writer is halfway through a commit: its file is brand new.
    age_files(dir.path(), 30 * DAY);
    std::fs::write(
        dir.path().join("part-99999-in-flight.parquet"),
        b"not committed yet",
    )
    .unwrap();

    let dry = table.vacuum().with_dry_run(true).execute().await.unwrap();
    assert_eq!(dry.files, orphans);
    assert!(dry.dry_run && dry.bytes > 0);
    assert_eq!(
        data_files(dir.path()).len(),
        before_orphans.len() + 1,
        "a dry run deletes nothing"
    );

    let done = table.vacuum().execute().await.unwrap();
    assert_eq!(done.files, orphans);
    assert!(!dir.path().join(&orphans[0]).exists());
    assert!(dir.path().join("part-99999-in-flight.parquet").exists());
    // A reader pinned to version 1, inside the retention, still reads it.
    let v1 = Snapshot::builder(tarn_store::open(url).unwrap())
        .at_version(1)
        .build()
        .await
        .unwrap();
    assert_eq!(scan_rows(&v1).await.unwrap(), 10);

    let err = table
        .vacuum()
        .with_retention(Duration::ZERO)
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                name: "retention",
                ..
            }
        ),
        "{err}"
    );

    // With no retention at all, the removed file and the in-flight one go too.
    let forced = table
        .vacuum()
        .with_retention(Duration::ZERO)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(forced.files.len(), 2, "{:?}", forced.files);
    assert!(forced.files.iter().any(|f| v1_files.contains(f)));
    let latest = Table::open(url).await.unwrap();
    assert_eq!(scan_rows(latest.snapshot()).await.unwrap(), 20);
    assert!(
        scan_rows(&v1).await.is_err(),
        "version 1 was outside a zero retention"
    );
}

#[tokio::test]
async fn vacuum_keeps_live_deletion_vectors_and_drops_expired_ones() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&golden_table("dv-partitioned-with-checkpoint"), dir.path());
    age_files(dir.path(), 30 * DAY);
    let url = dir.path().to_str().unwrap();
    let table = Table::open(url).await.unwrap();
    let dvs = |root: &Path| {
        data_files(root)
            .into_iter()
            .filter(|f| f.starts_with("deletion_vector_"))
            .count()
    };
    let dv_files_before = dvs(dir.path());
    // Spark removed these files and DVs in 2024: long out of any retention.
    let outcome = table.vacuum().execute().await.unwrap();
    assert!(
        outcome
            .files
            .iter()
            .any(|f| f.starts_with("deletion_vector_")),
        "{:?}",
        outcome.files
    );
    assert!(
        outcome.files.iter().any(|f| f.ends_with(".parquet")),
        "{:?}",
        outcome.files
    );
    let live_dvs = table
        .snapshot()
        .files()
        .filter(|a| a.deletion_vector.is_some())
        .count();
    assert!(dvs(dir.path()) >= live_dvs && dvs(dir.path()) < dv_files_before);
    let reopened = Table::open(url).await.unwrap();
    assert_eq!(scan_rows(reopened.snapshot()).await.unwrap(), 35);
    assert!(
        table.vacuum().execute().await.unwrap().files.is_empty(),
        "a second vacuum finds nothing"
    );
}

#[tokio::test]
async fn vacuum_on_minio_keeps_what_the_table_reads() {
    vacuum_keeps_what_the_table_reads(tarn_tests::minio::s3().location("vacuum")).await;
}

#[tokio::test]
async fn vacuum_on_azurite_keeps_what_the_table_reads() {
    vacuum_keeps_what_the_table_reads(tarn_tests::azurite::azure().location("vacuum")).await;
}

#[tokio::test]
async fn vacuum_on_gcs_keeps_what_the_table_reads() {
    vacuum_keeps_what_the_table_reads(tarn_tests::gcs::gcs().location("vacuum")).await;
}

/// An orphan past retention is deleted from `location`'s store; the table's rows stay.
async fn vacuum_keeps_what_the_table_reads(location: tarn::StoreLocation) {
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    let orphan = location.root().clone().join("part-orphan.parquet");
    object_store::ObjectStoreExt::put(location.store().as_ref(), &orphan, "orphan".into())
        .await
        .unwrap();
    // An hour later on the vacuuming handle's clock: the orphan is past a zero retention.
    let later = tarn::ManualClock::starting_now();
    later.advance(3_600_000);
    let table = table.with_clock(Arc::new(later));
    let outcome = table
        .vacuum()
        .with_retention(Duration::ZERO)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.files, vec!["part-orphan.parquet".to_string()]);
    assert_eq!(scan_rows(table.snapshot()).await.unwrap(), 10);
}
