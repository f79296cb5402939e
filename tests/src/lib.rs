//! Support for Tarn's integration tests: a real S3-compatible server (MinIO) per test
//! process, the Spark-written Delta golden tables, the `deltalake` Python package in a
//! virtual environment of its own, and order-insensitive row comparison.
//!
//! Everything a test needs is installed here on first use, into a cache folder
//! (`$TARN_CACHE_DIR`, else `$XDG_CACHE_HOME/tarn`, else `~/.cache/tarn`), so a fresh
//! machine needs only Rust, Go and Python 3.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod fixtures;
pub mod golden;
pub mod minio;
pub mod python;
pub mod rows;

use std::path::PathBuf;

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
