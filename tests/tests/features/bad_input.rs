//! Bad input gets a typed error naming what is wrong, never a panic, and never changes
//! what is committed: mismatched batches, unknown or mistyped columns, names that would
//! escape the table, corrupt commits, checkpoints, hints and deletion vectors, gaps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit};
use tarn::{Error, Table};
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::golden::{copy_dir, golden_table};
use tarn_tests::rows::{canonical_rows, row_count};

async fn sales_table(dir: &Path, commits: i64, properties: &[(&str, &str)]) -> Table {
    let mut builder = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"]);
    for (k, v) in properties {
        builder = builder.with_property(*k, *v);
    }
    let mut table = builder.execute().await.unwrap();
    for i in 0..commits {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
    }
    table
}

fn commit_path(dir: &Path, version: i64) -> PathBuf {
    dir.join("_delta_log").join(format!("{version:020}.json"))
}

async fn open(dir: &Path) -> tarn::Result<Table> {
    Table::open(dir.to_str().unwrap()).await
}

fn batch(fields: Vec<Field>, columns: Vec<Arc<dyn arrow::array::Array>>) -> RecordBatch {
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

#[tokio::test]
async fn batches_that_do_not_fit_are_refused_naming_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table(dir.path(), 1, &[]).await;
    let before = canonical_rows(&table.scan().collect().await.unwrap());
    let id = || Arc::new(Int64Array::from(vec![1])) as Arc<dyn arrow::array::Array>;
    let country = || Arc::new(StringArray::from(vec!["NL"])) as Arc<dyn arrow::array::Array>;
    let cases: Vec<(RecordBatch, &str)> = vec![
        (
            batch(
                vec![
                    Field::new("id", DataType::Utf8, false),
                    Field::new("country", DataType::Utf8, true),
                ],
                vec![Arc::new(StringArray::from(vec!["1"])), country()],
            ),
            "\"id\"",
        ),
        (
            batch(
                vec![
                    Field::new("id", DataType::Int64, false),
                    Field::new("country", DataType::Utf8, true),
                    Field::new("surprise", DataType::Int64, true),
                ],
                vec![id(), country(), id()],
            ),
            "surprise",
        ),
        (
            batch(
                vec![Field::new("country", DataType::Utf8, true)],
                vec![country()],
            ),
            "non-nullable column \"id\"",
        ),
        (
            batch(
                vec![
                    Field::new("id", DataType::Int64, true),
                    Field::new("country", DataType::Utf8, true),
                ],
                vec![Arc::new(Int64Array::from(vec![None])), country()],
            ),
            "not nullable",
        ),
        (
            batch(vec![Field::new("id", DataType::Int64, false)], vec![id()]),
            "partition column \"country\"",
        ),
    ];
    for (bad, mention) in cases {
        let err = table.append([bad]).await.unwrap_err();
        assert!(
            matches!(&err, Error::SchemaMismatch { reason } if reason.contains(mention)),
            "expected a schema mismatch naming {mention}, got {err}"
        );
    }
    let reopened = open(dir.path()).await.unwrap();
    assert_eq!(reopened.version(), 1);
    assert_eq!(
        canonical_rows(&reopened.scan().collect().await.unwrap()),
        before
    );
}

#[tokio::test]
async fn unknown_columns_and_mistyped_literals_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let table = sales_table(dir.path(), 1, &[]).await;
    let err = table
        .scan()
        .select(["id", "nope"])
        .plan()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownColumn { column, .. } if column == "nope"),
        "{err}"
    );
    let err = table
        .scan()
        .filter(col("ghost").eq(lit(1)))
        .plan()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownColumn { column, .. } if column == "ghost"),
        "{err}"
    );
    let err = table
        .scan()
        .filter(col("id").eq(lit("seven")))
        .plan()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TypeMismatch { column, .. } if column == "id"),
        "{err}"
    );
    let err = table
        .scan()
        .filter(col("day").gt(lit("not a date")))
        .collect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TypeMismatch { column, .. } if column == "day"),
        "{err}"
    );
    let err = table
        .scan()
        .filter(col("amount").is_in([1i64 << 60]))
        .plan()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
}

#[tokio::test]
async fn names_that_would_escape_the_table_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    let url = root.to_str().unwrap();
    let schema = |name: &str| {
        Schema::new(vec![
            Field::new(name, DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ])
    };
    for bad in ["a/b", "..", "tab\tname", ""] {
        let err = Table::create(url)
            .with_arrow_schema(&schema(bad))
            .execute()
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{bad:?}: {err}"
        );
    }
    let err = Table::create(url)
        .with_arrow_schema(&schema("p"))
        .with_partition_columns(["missing"])
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    let err = Table::create("memory://bad/x\u{7}y")
        .with_arrow_schema(&schema("p"))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Location(_)), "{err}");
    let err = Table::create("ftp://host/t")
        .with_arrow_schema(&schema("p"))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Location(_)), "{err}");
    // Nothing was created by any of the refused calls.
    assert!(!root.exists());

    // A log path with `..` is refused when read, not followed.
    let table = sales_table(&root, 1, &[]).await;
    let commit = std::fs::read_to_string(commit_path(&root, 1)).unwrap();
    let first_add = commit.lines().find(|l| l.starts_with("{\"add\"")).unwrap();
    let path = serde_json::from_str::<serde_json::Value>(first_add).unwrap()["add"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(
        commit_path(&root, 1),
        commit.replace(&path, &format!("../../{path}")),
    )
    .unwrap();
    let err = open(&root)
        .await
        .unwrap()
        .scan()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err}");
    drop(table);
}

#[tokio::test]
async fn malformed_commits_are_named_by_version_and_line() {
    let dir = tempfile::tempdir().unwrap();
    sales_table(dir.path(), 2, &[]).await;
    let path = commit_path(dir.path(), 2);
    let good = std::fs::read(&path).unwrap();

    // A truncated last line.
    std::fs::write(&path, &good[..good.len() - 20]).unwrap();
    let err = open(dir.path()).await.unwrap_err();
    let lines = good.iter().filter(|b| **b == b'\n').count();
    assert!(
        matches!(err, Error::InvalidCommit { version: 2, line, .. } if line == lines),
        "{err}"
    );

    // A line that is not JSON.
    std::fs::write(
        &path,
        [b"{\"commitInfo\":{}}\nnot json\n".as_slice()].concat(),
    )
    .unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidCommit {
                version: 2,
                line: 2,
                ..
            }
        ),
        "{err}"
    );

    // An empty commit.
    std::fs::write(&path, b"").unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidCommit { version: 2, .. }),
        "{err}"
    );

    // The versions before it still read.
    std::fs::write(&path, &good).unwrap();
    assert_eq!(open(dir.path()).await.unwrap().version(), 2);
}

#[tokio::test]
async fn a_missing_commit_is_a_version_gap() {
    let dir = tempfile::tempdir().unwrap();
    sales_table(dir.path(), 3, &[]).await;
    std::fs::remove_file(commit_path(dir.path(), 2)).unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::VersionGap { missing: 2, .. }), "{err}");
}

#[tokio::test]
async fn corrupt_hints_and_checkpoints_fall_back_to_the_commits() {
    let dir = tempfile::tempdir().unwrap();
    let table = sales_table(dir.path(), 5, &[("delta.checkpointInterval", "2")]).await;
    let want = canonical_rows(&table.scan().collect().await.unwrap());
    let log = dir.path().join("_delta_log");
    let rows_now = || async {
        canonical_rows(
            &open(dir.path())
                .await
                .unwrap()
                .scan()
                .collect()
                .await
                .unwrap(),
        )
    };

    for hint in [
        &b"{not json"[..],
        b"",
        br#"{"version":999,"size":1}"#,
        br#"{"version":-3}"#,
    ] {
        std::fs::write(log.join("_last_checkpoint"), hint).unwrap();
        assert_eq!(
            rows_now().await,
            want,
            "hint {:?}",
            String::from_utf8_lossy(hint)
        );
    }

    // A 4-byte checkpoint: the older checkpoint and the commits give the same state.
    std::fs::write(log.join("00000000000000000004.checkpoint.parquet"), b"PAR1").unwrap();
    assert_eq!(rows_now().await, want);

    // With the commits below it gone too, there is nothing to fall back on.
    std::fs::write(log.join("00000000000000000002.checkpoint.parquet"), b"PAR1").unwrap();
    for v in 0..=3 {
        std::fs::remove_file(commit_path(dir.path(), v)).unwrap();
    }
    let err = open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidCheckpoint { .. }), "{err}");
}

/// A copy of Spark's DV table, with its live DV's file, offset and size.
fn dv_table() -> (tempfile::TempDir, PathBuf, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&golden_table("log-replay-dv-key-cases"), dir.path());
    // The live DV (after three deletes) is `^jP?.<zvDfIGb{C.FPij`, 38 bytes at offset 1.
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("deletion_vector_d12e7d16"))
        .unwrap();
    (dir, file, 1, 38)
}

async fn scan_error(dir: &Path) -> Error {
    open(dir).await.unwrap().scan().collect().await.unwrap_err()
}

#[tokio::test]
async fn corrupt_deletion_vectors_fail_the_scan_naming_the_file() {
    let (dir, file, offset, size) = dv_table();
    let good = std::fs::read(&file).unwrap();
    assert_eq!(
        row_count(
            &open(dir.path())
                .await
                .unwrap()
                .scan()
                .collect()
                .await
                .unwrap()
        ),
        47
    );

    // A flipped bit in the bitmap: the checksum no longer matches.
    let mut bad = good.clone();
    bad[offset + 4 + 10] ^= 0x01;
    std::fs::write(&file, &bad).unwrap();
    let err = scan_error(dir.path()).await;
    assert!(
        matches!(&err, Error::InvalidDeletionVector { location, reason } if location.contains("d12e7d16") && reason.contains("checksum")),
        "{err}"
    );

    // A wrong size prefix.
    let mut bad = good.clone();
    bad[offset + 3] = bad[offset + 3].wrapping_add(1);
    std::fs::write(&file, &bad).unwrap();
    let err = scan_error(dir.path()).await;
    assert!(
        matches!(&err, Error::InvalidDeletionVector { reason, .. } if reason.contains("size")),
        "{err}"
    );

    // A wrong magic number, with a checksum that matches it.
    let mut bad = good.clone();
    bad[offset + 4] ^= 0xff;
    let crc = crc32fast::hash(&bad[offset + 4..offset + 4 + size]);
    bad[offset + 4 + size..offset + 8 + size].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&file, &bad).unwrap();
    let err = scan_error(dir.path()).await;
    assert!(
        matches!(&err, Error::InvalidDeletionVector { reason, .. } if reason.contains("magic")),
        "{err}"
    );

    // A truncated file.
    std::fs::write(&file, &good[..20]).unwrap();
    let err = scan_error(dir.path()).await;
    assert!(matches!(err, Error::InvalidDeletionVector { .. }), "{err}");

    // A missing file.
    std::fs::remove_file(&file).unwrap();
    let err = scan_error(dir.path()).await;
    assert!(matches!(err, Error::InvalidDeletionVector { .. }), "{err}");
}

#[tokio::test]
async fn tables_that_need_unknown_features_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    sales_table(dir.path(), 1, &[]).await;
    let path = commit_path(dir.path(), 0);
    let commit = std::fs::read_to_string(&path).unwrap();
    let upgraded = commit.replace(
        r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}"#,
        r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["futureFeature"],"writerFeatures":["futureFeature"]}}"#,
    );
    assert_ne!(commit, upgraded);
    std::fs::write(&path, upgraded).unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedReaderFeature { feature } if feature == "futureFeature"),
        "{err}"
    );

    // A writer-only feature Tarn cannot maintain: reads work, writes are refused.
    let writer_only = std::fs::read_to_string(&path).unwrap().replace(
        r#""readerFeatures":["futureFeature"],"writerFeatures":["futureFeature"]"#,
        r#""readerFeatures":[],"writerFeatures":["allowColumnDefaults"]"#,
    );
    std::fs::write(&path, writer_only).unwrap();
    let mut table = open(dir.path()).await.unwrap();
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 10);
    let err = table.append([sales_batch(100, 101)]).await.unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedWriterFeature { feature } if feature == "allowColumnDefaults"),
        "{err}"
    );
}

#[tokio::test]
async fn corrupt_data_files_fail_the_scan_with_a_parquet_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = sales_table(dir.path(), 1, &[]).await;
    // A file whose log path needs no decoding.
    let file = table
        .snapshot()
        .files()
        .find(|a| !a.path.contains('%'))
        .unwrap()
        .clone();
    let path = dir.path().join(&file.path);
    let good = std::fs::read(&path).unwrap();
    // Garbage of the same size, a truncated file, and a footer with flipped bytes.
    let mut flipped = good.clone();
    let n = flipped.len();
    for byte in &mut flipped[n - 60..n - 8] {
        *byte ^= 0x5a;
    }
    for bad in [
        vec![7u8; good.len()],
        good[..good.len() / 2].to_vec(),
        flipped,
    ] {
        std::fs::write(&path, &bad).unwrap();
        let err = table.scan().collect().await.unwrap_err();
        assert!(
            matches!(err, Error::Parquet { .. } | Error::Store { .. }),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_missing_data_file_is_a_typed_not_found_naming_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table(dir.path(), 2, &[("delta.enableDeletionVectors", "true")]).await;
    let file = table
        .snapshot()
        .files()
        .find(|a| {
            a.partition_values
                .values()
                .any(|v| v.as_deref() == Some("DE"))
        })
        .unwrap()
        .clone();
    std::fs::remove_file(dir.path().join(&file.path)).unwrap();
    let full = format!(
        "file://{}",
        dir.path()
            .canonicalize()
            .unwrap()
            .join(&file.path)
            .display()
    );
    let check = |err: Error, what: &str| match err {
        Error::DataFileNotFound { file: f, url } => {
            assert_eq!(f, file.path, "{what}");
            assert_eq!(url, full, "{what}");
        }
        other => panic!("{what}: {other}"),
    };
    check(table.scan().collect().await.unwrap_err(), "scan");
    let version = table.version();
    for strategy in [
        tarn::ChangeStrategy::CopyOnWrite,
        tarn::ChangeStrategy::MergeOnRead,
    ] {
        let err = table
            .delete(col("country").eq(lit("DE")).and(col("id").gt(lit(0i64))))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        check(err, "delete");
        let err = table
            .update()
            .filter(col("country").eq(lit("DE")))
            .set("amount", lit(1.0))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        check(err, "update");
    }
    assert_eq!(table.version(), version, "nothing committed");
}

#[tokio::test]
async fn a_failed_read_of_an_intact_dv_file_is_the_stores_error_not_a_bad_dv() {
    use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
    let (dir, _file, _, _) = dv_table();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    // The DV file's first read fails as a 5xx after retries would; the file is whole.
    let faulty = FaultStore::new(Arc::clone(location.store()), 7).with_rule(
        FaultRule::new(FaultOp::Get, Fault::FailBefore)
            .with_glob("*deletion_vector_d12e7d16*")
            .with_limit(1),
    );
    let table = Table::open_at(location.with_store(Arc::new(faulty)))
        .await
        .unwrap();
    let err = table.scan().collect().await.unwrap_err();
    assert!(
        matches!(&err, Error::Store { operation: tarn_store::StoreOp::Get, path, .. } if path.contains("deletion_vector_d12e7d16")),
        "{err}"
    );
    // The fault has passed: the same handle reads every live row.
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 47);
}

#[tokio::test]
async fn a_stray_far_future_commit_is_a_version_gap() {
    let dir = tempfile::tempdir().unwrap();
    sales_table(dir.path(), 2, &[]).await;
    std::fs::copy(commit_path(dir.path(), 2), commit_path(dir.path(), 9_999)).unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::VersionGap { missing: 3, .. }), "{err}");
    // The versions before it still read by version.
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let v2 = tarn::Snapshot::builder(location)
        .at_version(2)
        .build()
        .await
        .unwrap();
    assert_eq!(row_count(&v2.scan().collect().await.unwrap()), 20);
}
