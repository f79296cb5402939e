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

pub use tarn_test_support::{azurite, cache_dir, gcs, minio, spark, unique, with_install_lock};

/// A binary of another package of this workspace, built (in this test run's profile and
/// target folder) if needed. Cargo releases its build lock before running tests, so a
/// test may build.
///
/// It is built as `cargo test --workspace --no-run` builds it (the package has
/// integration tests, so its binaries are part of that build): with the features the
/// whole workspace's tests unify, so after `cargo test --workspace` this costs nothing.
/// `cargo build -p PACKAGE` would resolve features for the package alone and compile the
/// dependency tree a second time. Run from one test binary alone, it builds the
/// workspace's tests once.
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
    let mut args = vec!["test", "--quiet", "--workspace", "--no-run"];
    // `cargo test` builds into target/debug by default (its `test` profile inherits `dev`).
    if profile != "debug" {
        args.extend(["--profile", profile]);
    }
    let mut command = std::process::Command::new(env!("CARGO"));
    // Built in the environment the outer `cargo test` built in, so nothing rebuilds.
    tarn_test_support::clear_cargo_test_env(&mut command);
    let status = command
        .args(&args)
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .status()
        .expect("run cargo test --no-run");
    assert!(status.success(), "building the workspace's tests failed");
    let path = profile_dir.join(binary);
    assert!(
        path.is_file(),
        "{} has no binary {binary} at {} (does it still have integration tests?)",
        package,
        path.display()
    );
    path
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
