//! Support for Tarn's integration tests: a real S3-compatible server (MinIO) per test
//! process, the Spark-written Delta golden tables, the `deltalake` Python package in a
//! virtual environment of its own, a long-lived Spark session with Delta, and
//! order-insensitive row comparison.
//!
//! Everything a test needs is installed here on first use, into a cache folder
//! (`$TARN_CACHE_DIR`, else `$XDG_CACHE_HOME/tarn`, else `~/.cache/tarn`), so a fresh
//! machine needs only Rust, Go, Python 3 and Java 17.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod catalog;
pub mod fixtures;
pub mod gate;
pub mod golden;
pub mod grouped;
pub mod hiding;
pub mod log;
pub mod matrix;
pub mod minio;
pub mod part_rows;
pub mod python;
pub mod rows;
pub mod seeded;
pub mod spark;
pub mod spark_checks;
pub mod torture;

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

/// A binary of another package of this workspace, built (in this test run's profile and
/// target folder) if needed. Cargo releases its build lock before running tests, so a
/// test may build.
pub fn workspace_binary(package: &str, binary: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> -> target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a target folder");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug");
    let target_dir = profile_dir.parent().expect("a target folder");
    let cargo_profile = if profile == "debug" { "dev" } else { profile };
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            package,
            "--bin",
            binary,
            "--profile",
            cargo_profile,
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building {binary} failed");
    profile_dir.join(binary)
}
