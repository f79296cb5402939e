//! Log cleanup on local disk: commits and checkpoints older than
//! `delta.logRetentionDuration` go after a checkpoint (and on demand), up to the newest
//! checkpoint old enough, so every version within the retention reads as before and an
//! older one fails with a typed error that says why; proposals and claims of decided
//! versions are swept; readers racing a cleanup with no retention at all never fail, and
//! history leaves out the commits a cleanup removes while it reads. Checkpoints keep only
//! the tombstones within `delta.deletedFileRetentionDuration`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use tarn::protocol::names::{claim_file_name, parse_log_file_name, proposal_file_name};
use tarn::{Error, Table};
use tarn_tests::fixtures::{sales_batch, sales_schema, snapshot_at};
use tarn_tests::rows::canonical_rows;

const DAY: Duration = Duration::from_secs(86_400);

/// A table at `dir` with a checkpoint every 5 commits and `commits` appends after its
/// creation.
async fn table_with_commits(dir: &Path, commits: i64, properties: &[(&str, &str)]) -> Table {
    let mut create = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.checkpointInterval", "5");
    for (key, value) in properties {
        create = create.with_property(*key, *value);
    }
    let mut table = create.execute().await.unwrap();
    for i in 0..commits {
        append_waiting(&mut table, i).await;
    }
    table
}

/// Appends rows `i * 10..i * 10 + 10` and waits for the checkpoint it starts (and the
/// log cleanup after it), if any.
async fn append_waiting(table: &mut Table, i: i64) {
    let outcome = table
        .append([sales_batch(i * 10, i * 10 + 10)])
        .await
        .unwrap();
    if let Some(task) = outcome.commit.checkpoint {
        task.wait().await.unwrap();
    }
}

/// The versioned files of the log, as (version, file name), sorted.
fn log_files(dir: &Path) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some((parse_log_file_name(&name)?.version, name))
        })
        .collect();
    out.sort();
    out
}

/// Sets the time of every versioned log file up to `through` to `age` ago.
fn age_log(dir: &Path, through: i64, age: Duration) {
    for (version, name) in log_files(dir) {
        if version <= through {
            std::fs::File::options()
                .write(true)
                .open(dir.join("_delta_log").join(name))
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
        }
    }
}

fn commits(dir: &Path) -> Vec<i64> {
    log_files(dir)
        .into_iter()
        .filter(|(_, n)| n.ends_with(".json"))
        .map(|(v, _)| v)
        .collect()
}

fn checkpoints(dir: &Path) -> Vec<i64> {
    log_files(dir)
        .into_iter()
        .filter(|(_, n)| n.contains(".checkpoint."))
        .map(|(v, _)| v)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_after_a_checkpoint_keeps_every_version_within_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let table = table_with_commits(dir.path(), 22, &[]).await;
    let mut rows = Vec::new();
    for v in 0..=22 {
        rows.push(canonical_rows(
            &snapshot_at(dir.path(), v)
                .await
                .scan()
                .collect()
                .await
                .unwrap(),
        ));
    }
    assert_eq!(checkpoints(dir.path()), [5, 10, 15, 20]);
    assert_eq!(commits(dir.path()), (0..=22).collect::<Vec<_>>());

    // Versions 0-14 are 40 days old: the newest commit that old is 14, and the newest
    // checkpoint at or below it is 10.
    age_log(dir.path(), 14, 40 * DAY);
    let dry = table
        .cleanup_log()
        .with_dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(dry.oldest_version, Some(10));
    assert_eq!((dry.commits, dry.checkpoints), (10, 1));
    assert!(dry.dry_run);
    assert_eq!(commits(dir.path()).len(), 23, "a dry run deletes nothing");

    // The next checkpoint (version 25) cleans up on its own, by a handle that has not
    // cleaned up in the last tenth of the retention (this one did at version 20).
    let mut table = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    for i in 22..25 {
        append_waiting(&mut table, i).await;
    }
    assert_eq!(commits(dir.path()), (10..=25).collect::<Vec<_>>());
    assert_eq!(checkpoints(dir.path()), [10, 15, 20, 25]);

    for v in 10..=22 {
        let snapshot = snapshot_at(dir.path(), v).await;
        let read = canonical_rows(&snapshot.scan().collect().await.unwrap());
        assert_eq!(read, rows[v as usize], "version {v} after the cleanup");
    }
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let err = tarn::Snapshot::builder(location)
        .at_version(9)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::VersionNotFound { version: 9, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("older than the log keeps"),
        "{err}"
    );
    assert!(
        err.to_string().contains("oldest version readable is 10"),
        "{err}"
    );

    // A cold open, a stale handle and the history all start from what is kept.
    let mut stale = table.clone();
    stale.load_version(12).await.unwrap();
    stale.refresh().await.unwrap();
    assert_eq!(stale.version(), 25);
    let fresh = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(fresh.version(), 25);
    let listed: Vec<i64> = fresh
        .history(None)
        .await
        .unwrap()
        .iter()
        .map(|c| c.version)
        .collect();
    assert_eq!(listed, (10..=25).rev().collect::<Vec<_>>());

    // Nothing more is old enough: a second cleanup deletes nothing.
    let again = table.cleanup_log().execute().await.unwrap();
    assert_eq!((again.commits, again.checkpoints), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_cleans_up_after_checkpoints_at_most_every_tenth_of_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    // Its checkpoint at version 5 cleaned up (nothing was old enough).
    let mut table = table_with_commits(dir.path(), 5, &[]).await;
    age_log(dir.path(), 5, 40 * DAY);
    for i in 5..10 {
        append_waiting(&mut table, i).await;
    }
    assert_eq!(checkpoints(dir.path()), [5, 10]);
    assert_eq!(
        commits(dir.path()),
        (0..=10).collect::<Vec<_>>(),
        "the same handle waits three days (a tenth of 30) before it lists the log again"
    );
    // Another handle (another process, a restart) cleans at its first checkpoint.
    let mut other = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    for i in 10..15 {
        append_waiting(&mut other, i).await;
    }
    assert_eq!(commits(dir.path()), (5..=15).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_and_the_switch_are_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    // Cleanup after checkpoints turned off: nothing goes however old.
    let mut table =
        table_with_commits(dir.path(), 9, &[("delta.enableExpiredLogCleanup", "false")]).await;
    age_log(dir.path(), 9, 400 * DAY);
    let outcome = table.append([sales_batch(900, 910)]).await.unwrap();
    outcome.commit.checkpoint.unwrap().wait().await.unwrap();
    assert_eq!(commits(dir.path()), (0..=10).collect::<Vec<_>>());

    // On demand, with the table's retention (a year here): 400 days is past it.
    let _ = table
        .set_properties([("delta.logRetentionDuration", "interval 365 days")])
        .await
        .unwrap();
    let outcome = table.cleanup_log().execute().await.unwrap();
    assert_eq!(outcome.retention, 365 * DAY);
    assert_eq!(outcome.oldest_version, Some(5));
    assert_eq!(commits(dir.path()), (5..=11).collect::<Vec<_>>());

    // A retention given to the call wins over the table's, once allowed to be shorter.
    age_log(dir.path(), 9, 3 * DAY);
    let err = table
        .cleanup_log()
        .with_retention(DAY)
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
    let outcome = table
        .cleanup_log()
        .with_retention(DAY)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        outcome.oldest_version,
        Some(5),
        "10 is the newest checkpoint, but too young"
    );
    age_log(dir.path(), 10, 3 * DAY);
    let outcome = table
        .cleanup_log()
        .with_retention(DAY)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.oldest_version, Some(10));
    assert_eq!(commits(dir.path()), (10..=11).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_and_claims_of_decided_versions_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let table = table_with_commits(dir.path(), 40, &[]).await;
    let log = dir.path().join("_delta_log");
    let proposals = log.join("_tarn_proposals");
    let claims = log.join("_tarn_claims");
    std::fs::create_dir_all(&proposals).unwrap();
    std::fs::create_dir_all(&claims).unwrap();
    // A crashed writer's proposal of base 2 (window long passed) and one of base 39.
    let old_proposal = proposal_file_name(2, 1, "crashed");
    let live_proposal = proposal_file_name(39, 1, "waiting");
    std::fs::write(proposals.join(&old_proposal), b"{}").unwrap();
    std::fs::write(proposals.join(&live_proposal), b"{}").unwrap();
    // A claim of version 3 left behind, and one of the next version.
    std::fs::write(claims.join(claim_file_name(3)), b"").unwrap();
    std::fs::write(claims.join(claim_file_name(41)), b"").unwrap();

    let outcome = table.cleanup_log().execute().await.unwrap();
    assert_eq!((outcome.proposals, outcome.claims), (1, 1));
    assert!(!proposals.join(&old_proposal).exists());
    assert!(proposals.join(&live_proposal).exists());
    assert!(!claims.join(claim_file_name(3)).exists());
    assert!(claims.join(claim_file_name(41)).exists());
    assert_eq!(commits(dir.path()).len(), 41, "no commit was old enough");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_racing_a_cleanup_with_no_retention_never_fail() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap().to_string();
    let mut table = Table::create(&url)
        .with_arrow_schema(&sales_schema())
        .with_property("delta.checkpointInterval", "2")
        .with_property("delta.logRetentionDuration", "interval 0 seconds")
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..3 {
        let (url, done) = (url.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut handle = Table::open(&url).await.unwrap();
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if r == 0 {
                    handle.refresh().await.unwrap();
                } else {
                    handle = Table::open(&url).await.unwrap();
                }
                let rows: usize = handle
                    .scan()
                    .collect()
                    .await
                    .unwrap()
                    .iter()
                    .map(|b| b.num_rows())
                    .sum();
                assert_eq!(rows as i64, (handle.version()) * 10);
                reads += 1;
            }
            reads
        }));
    }
    for i in 1..60 {
        append_waiting(&mut table, i).await;
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.await.unwrap() > 0);
    }
    // Only the newest checkpoints and what follows them are left (commits made in the
    // same millisecond count as a millisecond apart, which can keep one more).
    let kept = checkpoints(dir.path());
    assert!(kept.len() <= 2 && kept.last() == Some(&60), "{kept:?}");
    assert!(
        commits(dir.path())[0] >= kept[0],
        "{:?}",
        commits(dir.path())
    );
    let fresh = Table::open(&url).await.unwrap();
    assert_eq!(fresh.version(), 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_snapshot_the_cleanup_passed_conflicts_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let mut table = Table::create(url)
        .with_arrow_schema(&sales_schema())
        .with_property("delta.checkpointInterval", "2")
        .with_property("delta.logRetentionDuration", "interval 1 seconds")
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    let mut stale = Table::open(url).await.unwrap();
    assert_eq!(stale.version(), 1);
    for i in 1..6 {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for i in 6..8 {
        append_waiting(&mut table, i).await;
    }
    // Version 8's checkpoint cleaned up below checkpoint 6: version 2 is gone.
    assert!(
        !commits(dir.path()).contains(&2),
        "{:?}",
        commits(dir.path())
    );

    // Putting version 2 would succeed and never be read: the writer conflicts instead.
    let err = stale.append([sales_batch(900, 910)]).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Conflict {
                reason: tarn::ConflictReason::LogCleanedUp { read_version: 1 },
                ..
            }
        ),
        "{err}"
    );
    assert!(
        !commits(dir.path()).contains(&2),
        "nothing was put at version 2"
    );
    // Read again, the same write lands and is read.
    stale.refresh().await.unwrap();
    stale.append([sales_batch(900, 910)]).await.unwrap();
    let fresh = Table::open(url).await.unwrap();
    let rows: usize = fresh
        .scan()
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 90);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_skips_commits_a_cleanup_removes_while_it_reads() {
    use std::sync::Arc;
    use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};

    let dir = tempfile::tempdir().unwrap();
    let _ = table_with_commits(dir.path(), 4, &[]).await;
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let faulty = FaultStore::new(Arc::clone(location.store()), 7);
    let faults = faulty.control();
    let table = Table::open_at(location.with_store(Arc::new(faulty)))
        .await
        .unwrap();
    // History lists versions 0..=4, then its GET of version 0 waits while a cleanup
    // removes that version (the oldest goes first).
    faults.add_rule(
        FaultRule::new(FaultOp::Get, Fault::Hold).with_glob(format!("*_delta_log/{:020}.json", 0)),
    );
    let gate = faults.gate();
    let reading = tokio::spawn(async move { table.history(None).await });
    gate.arrived(Duration::from_secs(60))
        .await
        .expect("history never read version 0");
    std::fs::remove_file(dir.path().join(format!("_delta_log/{:020}.json", 0))).unwrap();
    gate.open();
    let history = reading.await.unwrap().unwrap();
    let versions: Vec<i64> = history.iter().map(|r| r.version).collect();
    assert_eq!(versions, vec![4, 3, 2, 1]);
}

/// The `remove` entries (tombstones) in the checkpoint of `version`.
fn checkpoint_tombstones(dir: &Path, version: i64) -> usize {
    let path = dir.join(format!("_delta_log/{version:020}.checkpoint.parquet"));
    tarn_tests::rows::read_parquet_file(&path)
        .iter()
        .map(|batch| {
            let removes = batch.column_by_name("remove").unwrap();
            removes.len() - removes.null_count()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_keep_only_the_tombstones_within_the_retention() {
    for (retention, expected) in [("interval 1 hours", 3), ("interval 0 seconds", 0)] {
        let dir = tempfile::tempdir().unwrap();
        let mut table = Table::create(dir.path().to_str().unwrap())
            .with_arrow_schema(&sales_schema())
            .with_property("delta.checkpointInterval", "100")
            .with_property("delta.deletedFileRetentionDuration", retention)
            .execute()
            .await
            .unwrap();
        for i in 0..3 {
            append_waiting(&mut table, i).await;
        }
        // Every row goes, and with it the three files.
        table
            .delete(tarn::expr::col("id").gt_eq(tarn::expr::lit(0i64)))
            .execute()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _ = table.checkpoint().await.unwrap();
        assert_eq!(
            checkpoint_tombstones(dir.path(), table.version()),
            expected,
            "{retention}"
        );
    }
}
