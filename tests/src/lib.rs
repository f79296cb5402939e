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
pub mod golden;
pub mod grouped;
pub mod log;
pub mod matrix;
pub mod part_rows;
pub mod python;
pub mod rows;
pub mod seeded;
pub mod spark_checks;
pub mod torture;

pub use tarn_test_support::{cache_dir, minio, spark, unique, with_install_lock};

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

/// The name the test binary knows the test `name` of the module at `module_path` by (its
/// module path past the crate, then the function), so a child process can run it alone
/// with `--exact`.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}
