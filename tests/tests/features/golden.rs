//! Tarn reads every Spark-written Delta table in `../shared/delta-golden` as Spark does:
//! where `expected/` exists, the rows (order aside) and their types match; the invalid
//! tables fail with the matching typed error; the rest hold the state their log describes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::TimestampMicrosecondType;
use tarn::{Error, Snapshot, Table};
use tarn_tests::golden::{golden_expected, golden_names, golden_root, golden_table};
use tarn_tests::rows::{
    canonical_rows, column_types, parquet_dir_schema, read_parquet_dir, row_count,
};

/// Tables without `expected/` and what reading them must give.
enum Outcome {
    Error(fn(&Error) -> bool, &'static str),
    /// The latest version and the live file paths (as written in the log).
    Files(i64, &'static [&'static str]),
}

fn outcome_for(name: &str) -> Option<Outcome> {
    use Outcome::{Error as Fails, Files};
    Some(match name {
        "deltalog-invalid-protocol-version" => Fails(
            |e| matches!(e, Error::UnsupportedReaderVersion { version: 99 }),
            "UnsupportedReaderVersion(99)",
        ),
        // The last one has adds but never a metaData action.
        "deltalog-state-reconstruction-without-metadata"
        | "deltalog-state-reconstruction-from-checkpoint-missing-metadata"
        | "data-reader-absolute-paths-escaped-chars" => Fails(
            |e| matches!(e, Error::MissingMetadata { .. }),
            "MissingMetadata",
        ),
        "deltalog-state-reconstruction-without-protocol"
        | "deltalog-state-reconstruction-from-checkpoint-missing-protocol" => Fails(
            |e| matches!(e, Error::MissingProtocol { .. }),
            "MissingProtocol",
        ),
        "no-delta-log-folder" | "hive" => Fails(
            |e| matches!(e, Error::TableNotFound { .. }),
            "TableNotFound",
        ),
        "versions-not-contiguous" => Fails(
            |e| matches!(e, Error::VersionGap { missing: 1, .. }),
            "VersionGap(missing 1)",
        ),
        // Their metaData has no schemaString, so there is no schema to read with.
        "deltalog-commit-info" | "update-deleted-directory" => Fails(
            |e| matches!(e, Error::InvalidSchema { .. }),
            "InvalidSchema",
        ),
        // An add and a remove of one file, written as `/p`, `file:/p` and `file:///p`.
        "canonicalized-paths-normal-a"
        | "canonicalized-paths-normal-b"
        | "canonicalized-paths-special-a"
        | "canonicalized-paths-special-b" => Files(1, &[]),
        "checkpoint" => Files(14, &["15"]),
        "delete-re-add-same-file-different-transactions" => Files(3, &["bar", "foo"]),
        "log-replay-special-characters-b" => Files(0, &["special%20p@%23h"]),
        _ => return None,
    })
}

/// `data-reader-partition-values` expects its timestamp partition value read in
/// America/Los_Angeles (the writer's session zone), while the protocol and the four
/// `kernel-timestamp-*` tables read partition timestamps as UTC. delta-kernel-rs skips the
/// table for this; Tarn reads it, and compares that one column 7 hours earlier.
const PST_SHIFTED: (&str, &str) = ("data-reader-partition-values", "as_timestamp");

async fn read_all(dir: &std::path::Path) -> tarn::Result<(Snapshot, Vec<RecordBatch>)> {
    let table = Table::open(dir.to_str().expect("utf-8 path")).await?;
    let batches = table.scan().collect().await?;
    Ok((table.snapshot().clone(), batches))
}

fn shift_hours(batches: Vec<RecordBatch>, column: &str, hours: i64) -> Vec<RecordBatch> {
    batches
        .into_iter()
        .map(|b| {
            let Ok(i) = b.schema().index_of(column) else {
                return b;
            };
            let array = b.column(i).as_primitive::<TimestampMicrosecondType>();
            let tz = array.timezone().map(Arc::<str>::from);
            let shifted: TimestampMicrosecondArray = array
                .iter()
                .map(|v| v.map(|us| us - hours * 3_600_000_000))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone_opt(tz);
            let mut columns = b.columns().to_vec();
            columns[i] = Arc::new(shifted);
            RecordBatch::try_new(b.schema(), columns).expect("same schema")
        })
        .collect()
}

async fn check(name: &str) -> Result<(), String> {
    let dir = golden_table(name);
    if let Some(expected_dir) = golden_expected(name) {
        let (snapshot, batches) = read_all(&dir)
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        let expected_schema =
            parquet_dir_schema(&expected_dir).ok_or("expected/ has no parquet file")?;
        let ours = column_types(snapshot.arrow_schema());
        let theirs = column_types(&expected_schema);
        if ours != theirs {
            return Err(format!(
                "schema differs:\n  tarn     {ours:?}\n  expected {theirs:?}"
            ));
        }
        let mut expected = read_parquet_dir(&expected_dir);
        if name == PST_SHIFTED.0 {
            expected = shift_hours(expected, PST_SHIFTED.1, 7);
        }
        let (ours, theirs) = (canonical_rows(&batches), canonical_rows(&expected));
        if ours != theirs {
            let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
            return Err(format!(
                "rows differ: tarn has {}, expected {}; first difference at {first:?}:\n  tarn     {:?}\n  expected {:?}",
                ours.len(),
                theirs.len(),
                first.and_then(|i| ours.get(i)),
                first.and_then(|i| theirs.get(i)),
            ));
        }
        // COUNT(*) from the log (numRecords minus DV cardinalities, or a row read where
        // Spark wrote no statistics) agrees with the rows Spark expects.
        let counted = snapshot
            .scan()
            .count()
            .await
            .map_err(|e| format!("count failed: {e}"))?;
        if counted != theirs.len() as u64 {
            return Err(format!(
                "COUNT(*) is {counted}, expected {} rows",
                theirs.len()
            ));
        }
        return Ok(());
    }
    let path = dir.to_str().expect("utf-8");
    match outcome_for(name) {
        Some(Outcome::Error(matches, what)) => match Table::open(path).await {
            Ok(t) => Err(format!(
                "opened at version {}, expected {what}",
                t.version()
            )),
            Err(e) if matches(&e) => Ok(()),
            Err(e) => Err(format!("failed with {e:?}, expected {what}")),
        },
        Some(Outcome::Files(version, paths)) => {
            let table = Table::open(path)
                .await
                .map_err(|e| format!("open failed: {e}"))?;
            let mut live: Vec<&str> = table.snapshot().files().map(|a| a.path.as_str()).collect();
            live.sort_unstable();
            if table.version() != version || live != paths {
                return Err(format!(
                    "version {} with files {live:?}, expected {version} with {paths:?}",
                    table.version()
                ));
            }
            Ok(())
        }
        None => Err("no expected/ and no expected outcome listed in this test".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_golden_table_reads_as_spark_expects() {
    let names = golden_names();
    assert!(
        names.len() >= 89,
        "only {} golden tables found in {}",
        names.len(),
        golden_root().display()
    );
    // TARN_GOLDEN_ONLY=<name> narrows the run to one table while debugging.
    let only = std::env::var("TARN_GOLDEN_ONLY").ok();
    let mut failures = Vec::new();
    for name in names
        .iter()
        .filter(|n| only.as_ref().is_none_or(|o| o == *n))
    {
        if let Err(e) = check(name).await {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden tables failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn hive_sub_tables_each_read() {
    let dir = golden_root().join("hive").join("delta");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).expect("hive folder").flatten() {
        let (snapshot, batches) = read_all(&entry.path())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        assert!(
            row_count(&batches) > 0 || snapshot.file_count() == 0,
            "{} read no rows from {} files",
            entry.path().display(),
            snapshot.file_count()
        );
        read += 1;
    }
    assert_eq!(read, 11);
}

#[tokio::test]
async fn deletion_vectors_hide_exactly_their_rows() {
    // log-replay-dv-key-cases: one file of 50 rows whose last DV deletes rows 0, 7 and 14.
    let (snapshot, batches) = read_all(&golden_table("log-replay-dv-key-cases"))
        .await
        .unwrap();
    assert_eq!(snapshot.file_count(), 1);
    let dv = snapshot
        .files()
        .next()
        .unwrap()
        .deletion_vector
        .clone()
        .unwrap();
    assert_eq!(dv.cardinality, 3);
    assert_eq!(row_count(&batches), 47);
}

#[tokio::test]
async fn time_travel_reads_each_version_of_a_spark_table() {
    // time-travel-start-start20-start40: versions 0, 1 and 2 append 10 rows each.
    let dir = golden_table("time-travel-start-start20-start40");
    let location = tarn_store::open(dir.to_str().unwrap()).unwrap();
    for (version, rows) in [(0, 10), (1, 20), (2, 30)] {
        let snapshot = Snapshot::builder(location.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        let batches = snapshot.scan().collect().await.unwrap();
        assert_eq!(row_count(&batches), rows, "version {version}");
    }
    let err = Snapshot::builder(location)
        .at_version(3)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::VersionNotFound { version: 3, .. }),
        "{err}"
    );
}
