//! Test support for Tarn's integration tests and benchmarks: it installs and starts the
//! peers they run against, each on first use, into a cache folder (`$TARN_CACHE_DIR`,
//! else `$XDG_CACHE_HOME/tarn`, else `~/.cache/tarn`): MinIO (built with `go install`),
//! Azurite (installed with npm), a fake Cloud Storage server (built with `go build`),
//! Python virtual environments (`deltalake`, DuckDB with its delta extension, PySpark
//! with `delta-spark`), and one Spark session with Delta per process. A fresh machine
//! needs only Rust, Go, Node.js, Python 3 and Java 17.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod azurite;
pub mod duckdb;
pub mod gcs;
pub mod minio;
pub mod python;
pub mod server;
pub mod spark;

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Takes out of `command`'s environment the variables Cargo sets for a test run (the
/// package's name, manifest folder, ...), so a Cargo build the test starts sees the
/// environment the outer `cargo test` built in. Build scripts ask to rerun when some of
/// them change (ring's does): left in, they would rebuild the dependency tree the outer
/// `cargo test` built, and the next `cargo test` would rebuild it back.
pub fn clear_cargo_test_env(command: &mut std::process::Command) -> &mut std::process::Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref());
        if set_by_cargo {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The folder test dependencies are installed into.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TARN_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("tarn");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("tarn")
}

/// Runs `f` holding an exclusive lock on `name` in the cache folder, so test processes
/// running at once install a dependency once.
pub fn with_install_lock<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).expect("create the cache folder");
    let lock = std::fs::File::create(dir.join(format!("{name}.lock"))).expect("create a lock file");
    lock.lock().expect("lock the install");
    let out = f();
    let _ = lock.unlock();
    out
}

/// A fresh, unique name for a test's table or prefix.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// The batches of one Parquet file (as the Python peers write their answers).
pub fn read_parquet_file(file: &Path) -> Vec<RecordBatch> {
    let handle =
        std::fs::File::open(file).unwrap_or_else(|e| panic!("cannot open {}: {e}", file.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(handle)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()))
        .build()
        .expect("build the reader");
    reader.map(|b| b.expect("read a batch")).collect()
}
