//! `tarn-bench compare` end to end at a tiny scale: every step of every engine runs in
//! its own process, the engines agree on what they did (the harness checks rows and
//! query answers and fails otherwise), and the ratio table and its JSON records come
//! out. Uses the `deltalake` and DuckDB virtual environments the interoperability tests
//! install.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn compare_runs_every_engine_on_the_same_tables_and_reports_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.jsonl");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tarn-bench"))
        .args(["compare", "--scale", "0.01", "--runs", "2", "--url"])
        .arg(dir.path().join("compare"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for row in [
        "| load 10000 rows |  |",
        "| COUNT(*), Tarn's table |  |",
        "| SUM(CAST(value2 AS DOUBLE)), delta-rs's table |  |",
        "| merge 0.0001% | copy-on-write |",
        "| merge 1% | merge-on-read |",
        "| SUM(value) after Tarn's 1% copy-on-write merge |  |",
        "| SUM(value) after Tarn's 1% merge-on-read merge |  |",
        "| SUM(value) WHERE part < 10, Tarn's table |  |",
        "| SUM(value) WHERE part >= 0 after delta-rs's 1% merge |  |",
        "| SUM(key) after delta-rs's 1% merge |  |",
        "| CDC 1% merge (90% updates) | copy-on-write |",
        "| CDC 10% append after it | merge-on-read |",
        "| cold open, 1000 files |  |",
    ] {
        assert!(stdout.contains(row), "no row {row:?} in\n{stdout}");
    }
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["workload"] == "compare")
        .collect();
    // Load, 7 queries on each engine's table, 5 fractions x 2 strategies, 7 queries on
    // each of the three merged tables, the CDC merge and append per strategy, and the
    // cold open of many files.
    assert_eq!(records.len(), 1 + 14 + 10 + 21 + 4 + 1);
    for r in &records {
        for field in ["tarn_p50_ms", "deltars_p50_ms", "ratio"] {
            let value = r[field].as_f64().unwrap_or(-1.0);
            assert!(value > 0.0, "{field} of {}: {value}", r["name"]);
        }
    }
    // Every read has DuckDB beside it; read_parquet only where no deletion vector is.
    let reads: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["work"].as_str().unwrap().starts_with(['C', 'S']))
        .filter(|r| !r["work"].as_str().unwrap().starts_with("CDC"))
        .collect();
    assert_eq!(reads.len(), 35);
    for r in reads {
        assert!(
            r["duckdb_p50_ms"].as_f64().unwrap_or(-1.0) > 0.0,
            "{}",
            r["name"]
        );
        let deletion_vectors = r["work"].as_str().unwrap().contains("merge-on-read");
        assert_eq!(
            r.get("read_parquet_p50_ms").is_none(),
            deletion_vectors,
            "{}",
            r["name"]
        );
    }
}

/// `tarn-bench python` end to end at a tiny scale, with the development build of the
/// package the pytest suite uses: every side runs every step in its own process, they
/// agree on the rows (the harness fails otherwise), and every row reports the Python
/// package, `deltalake` and, where the Rust API does the same work, the Rust time.
#[test]
fn python_runs_the_package_deltalake_and_rust_on_the_same_data() {
    let python = tarn_test_support::python::package();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.jsonl");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tarn-bench"))
        .args(["python", "--python"])
        .arg(python)
        .args(["--scale", "0.001", "--runs", "1", "--url"])
        .arg(dir.path().join("bench"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["workload"] == "python")
        .collect();
    let works: Vec<&str> = records
        .iter()
        .map(|r| r["work"].as_str().unwrap())
        .collect();
    assert_eq!(
        works,
        [
            "load 10000 rows",
            "full scan into pyarrow (Rust: into record batches)",
            "full scan into Polars",
            "DuckDB aggregate over every column, streamed",
            "upsert 1%, Tarn copy-on-write",
            "upsert 1%, Tarn merge-on-read",
            "delete 1%, Tarn copy-on-write",
            "delete 1%, Tarn merge-on-read",
        ]
    );
    for r in &records {
        let work = r["work"].as_str().unwrap();
        let mut fields = vec!["tarn_python_p50_ms", "deltalake_p50_ms", "ratio"];
        if !work.contains("Polars") && !work.contains("DuckDB") {
            fields.extend(["tarn_rust_p50_ms", "tarn_rust_peak_mib"]);
        }
        for field in fields {
            let value = r[field].as_f64().unwrap_or(-1.0);
            assert!(value > 0.0, "{field} of {work}: {value}");
        }
        assert!(stdout.contains(&format!("| {work} |")), "{stdout}");
        // A scan into pyarrow or Polars reports what its result holds and the peak's rise.
        if work.contains("pyarrow") || work.contains("Polars") {
            let held = r["tarn_python_result_mib"].as_f64().unwrap_or(-1.0);
            assert!(held > 0.0, "{work}: {held} held");
            // The rise needs a peak the step can restart (Linux's /proc/self/clear_refs).
            if std::path::Path::new("/proc/self/clear_refs").exists() {
                let rise = r["tarn_python_rise_mib"].as_f64().unwrap_or(-1.0);
                assert!(rise >= 0.0, "{work}: {rise} rise");
                let line = format!("{work}: the package's peak rose");
                assert!(stdout.contains(&line), "{stdout}");
            }
        }
    }
    assert!(stdout.contains("The 10000 rows take"), "{stdout}");
}
