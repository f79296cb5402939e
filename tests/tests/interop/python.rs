//! The `tarn` Python package: its pytest suite (round trips through pyarrow, Polars,
//! pandas and DuckDB, every row-level change, time travel, the catalog and SQL, bad
//! input, several processes, S3 on MinIO, tables shared with `deltalake` and Spark's
//! golden tables),
//! then Spark reading a table the package wrote.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use tarn_tests::spark::spark;
use tarn_tests::spark_checks::assert_same_in_spark;

/// Runs pytest on `python/tests` with the package built from this checkout. A table the
/// suite writes for Spark lands in `spark_dir`.
fn pytest(spark_dir: &Path) {
    let python = tarn_test_support::python::package();
    let s3 = tarn_test_support::minio::s3();
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../python/tests");
    let mut command = Command::new(python);
    // The S3 tests get MinIO through TARN_PY_S3_*; a developer's own AWS_* would leak in.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    let output = command
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .env("TARN_PY_SPARK_DIR", spark_dir)
        .env("TARN_GOLDEN_DIR", tarn_tests::golden::golden_root())
        .env("TARN_PY_S3_ENDPOINT", &s3.endpoint)
        .env("TARN_PY_S3_ACCESS_KEY", &s3.access_key)
        .env("TARN_PY_S3_SECRET_KEY", &s3.secret_key)
        .env("TARN_PY_S3_BUCKET", &s3.bucket)
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "pytest failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_package_passes_its_tests_and_spark_reads_what_it_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spark_dir = dir.path().to_path_buf();
    tokio::task::spawn_blocking({
        let spark_dir = spark_dir.clone();
        move || pytest(&spark_dir)
    })
    .await
    .expect("pytest ran");

    let path = spark_dir.join("written-by-python");
    let table = tarn::Table::open(path.to_str().expect("utf-8 path"))
        .await
        .expect("the table the suite wrote");
    assert!(
        table.version() >= 2,
        "the suite writes, deletes and updates"
    );
    assert_same_in_spark(spark(), &table, &path, "written from Python").await;
}
