//! Running the scripts of `tests/python/` with the `deltalake` environment the test
//! support installs.

use std::path::Path;
use std::process::Command;

use arrow::array::RecordBatch;

pub use tarn_test_support::python::{DELTALAKE_VERSION, python, venv};

/// Runs one of the scripts in `tests/python/` with the environment's interpreter and
/// returns its standard output. Panics with the script's error output when it fails.
pub fn run_script(script: &str, args: &[&str]) -> String {
    run_script_with(python(), script, args)
}

/// Runs one of the scripts in `tests/python/` with the interpreter `python` and returns
/// its standard output. Panics with the script's error output when it fails.
pub fn run_script_with(python: &Path, script: &str, args: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(script);
    let output = Command::new(python)
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(
        output.status.success(),
        "{script} {args:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What `read_table.py` reports, and the rows it read.
pub struct PythonRead {
    /// The version read.
    pub version: i64,
    /// How many rows it read.
    pub rows: usize,
    /// The rows.
    pub batches: Vec<RecordBatch>,
}

/// Reads the table at `dir` (at `version`, else the latest) through `deltalake`.
pub fn read_with_deltalake(dir: &Path, version: Option<i64>) -> PythonRead {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut args = vec![dir.to_str().unwrap(), out.path().to_str().unwrap()];
    let version_text = version.map(|v| v.to_string());
    if let Some(v) = &version_text {
        args.push(v);
    }
    let report = run_script("read_table.py", &args);
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    PythonRead {
        version: report["version"].as_i64().unwrap(),
        rows: report["rows"].as_u64().unwrap() as usize,
        batches: tarn_test_support::read_parquet_file(out.path()),
    }
}

/// What DuckDB's delta extension read of a table: the row count it reports and the rows.
pub struct DuckDbRead {
    /// How many rows it read.
    pub rows: usize,
    /// The rows.
    pub batches: Vec<RecordBatch>,
}

/// Reads the latest version of the table at `dir` through DuckDB's `delta_scan`.
pub fn read_with_duckdb(dir: &Path) -> DuckDbRead {
    let out = tempfile::Builder::new()
        .suffix(".parquet")
        .tempfile()
        .unwrap();
    let report = run_script_with(
        tarn_test_support::duckdb::python(),
        "duckdb_read.py",
        &[dir.to_str().unwrap(), out.path().to_str().unwrap()],
    );
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    DuckDbRead {
        rows: report["rows"].as_u64().unwrap() as usize,
        batches: tarn_test_support::read_parquet_file(out.path()),
    }
}

/// DuckDB's answer to `sql` over the table at `dir`, which the query names `t` (a view
/// of `delta_scan`): the rows it returned.
pub fn query_with_duckdb(dir: &Path, sql: &str) -> Vec<RecordBatch> {
    query_with_duckdb_after(dir, &[], sql)
}

/// DuckDB's answer to `sql` over the table at `dir` (the view `t`), after running
/// `statements` in the same session (to build tables and change them, say).
pub fn query_with_duckdb_after(dir: &Path, statements: &[&str], sql: &str) -> Vec<RecordBatch> {
    let out = tempfile::Builder::new()
        .suffix(".parquet")
        .tempfile()
        .unwrap();
    let mut args = vec![dir.to_str().unwrap(), sql, out.path().to_str().unwrap()];
    args.extend_from_slice(statements);
    run_script_with(
        tarn_test_support::duckdb::python(),
        "duckdb_query.py",
        &args,
    );
    tarn_test_support::read_parquet_file(out.path())
}
