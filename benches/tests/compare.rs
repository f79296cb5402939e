//! `tarn-bench compare` end to end at a tiny scale: every step of both engines runs in
//! its own process, the engines agree on what they did (the harness checks rows and
//! query answers and fails otherwise), and the ratio table and its JSON records come
//! out. Uses the `deltalake` virtual environment the interoperability tests install.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn compare_runs_both_engines_on_the_same_input_and_reports_every_row() {
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
        "| COUNT(*) |  |",
        "| SUM(CAST(value2 AS DOUBLE)) |  |",
        "| merge 0.0001% | copy-on-write |",
        "| merge 1% | merge-on-read |",
        "| SUM(value) after a 1% merge | merge-on-read |",
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
    // Load, 5 queries, 5 fractions x 2 strategies, 5 queries after each strategy's
    // merge, the CDC merge and append per strategy, and the cold open of many files.
    assert_eq!(records.len(), 1 + 5 + 10 + 10 + 4 + 1);
    for r in &records {
        for field in ["tarn_p50_ms", "deltars_p50_ms", "ratio"] {
            let value = r[field].as_f64().unwrap_or(-1.0);
            assert!(value > 0.0, "{field} of {}: {value}", r["name"]);
        }
    }
}
