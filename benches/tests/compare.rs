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
