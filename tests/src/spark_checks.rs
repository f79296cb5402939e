//! Checks of Tarn against Spark shared by the Spark test files: every version of a table
//! reads the same in both, `DESCRIBE HISTORY` lists what Tarn recorded, and Spark SQL
//! runs against a table folder.

use std::path::Path;

use tarn::Table;

use crate::fixtures::snapshot_at;

use crate::rows::{align, canonical_rows, row_count};
use crate::spark::{Spark, delta_table};

/// The operation each version's `commitInfo` names, from the log.
pub fn operations(dir: &Path, latest: i64) -> Vec<String> {
    (0..=latest)
        .map(|v| {
            let text =
                std::fs::read_to_string(dir.join(format!("_delta_log/{v:020}.json"))).unwrap();
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find_map(|a| a["commitInfo"]["operation"].as_str().map(String::from))
                .unwrap_or_default()
        })
        .collect()
}

/// Spark reads `version` of the table at `dir` with the rows Tarn reads there.
pub async fn assert_same_in_spark_at(spark: &Spark, dir: &Path, version: i64, what: &str) {
    let snapshot = snapshot_at(dir, version).await;
    let ours = snapshot.scan().collect().await.unwrap();
    let theirs = spark.read(dir, Some(version));
    assert_eq!(
        row_count(&theirs),
        row_count(&ours),
        "{what}, version {version}: row count"
    );
    let theirs = align(&theirs, snapshot.arrow_schema());
    assert_eq!(
        canonical_rows(&theirs),
        canonical_rows(&ours),
        "{what}, version {version}: rows"
    );
}

/// Every version of the table reads in Spark with Tarn's rows, and `DESCRIBE HISTORY`
/// lists every version with the operation Tarn recorded.
pub async fn assert_same_in_spark(spark: &Spark, table: &Table, dir: &Path, what: &str) {
    for version in 0..=table.version() {
        assert_same_in_spark_at(spark, dir, version, what).await;
    }
    assert_history(spark, dir, table.version(), what);
}

/// `DESCRIBE HISTORY` lists versions 0 to `latest` with the operations the log records.
pub fn assert_history(spark: &Spark, dir: &Path, latest: i64, what: &str) {
    let history = spark.history(dir);
    let mut listed: Vec<(i64, String)> = history
        .iter()
        .map(|row| {
            assert!(
                row["operationParameters"].is_object() || row["operationParameters"].is_null(),
                "{what}: {row}"
            );
            (
                row["version"].as_i64().unwrap(),
                row["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    listed.sort();
    let expected: Vec<(i64, String)> = operations(dir, latest)
        .into_iter()
        .enumerate()
        .map(|(v, op)| (v as i64, op))
        .collect();
    assert_eq!(listed, expected, "{what}: DESCRIBE HISTORY");
}

/// Runs Spark statements against the table at `dir` (`{t}` stands for it).
pub fn spark_sql(spark: &Spark, dir: &Path, statements: &[&str]) {
    let t = delta_table(dir);
    for statement in statements {
        spark.sql(&statement.replace("{t}", &t));
    }
}

/// Tarn reads every version of a Spark-written table as Spark does.
pub async fn assert_tarn_reads_like_spark(spark: &Spark, dir: &Path, what: &str) -> Table {
    let table = Table::open(dir.to_str().unwrap()).await.unwrap();
    for version in 0..=table.version() {
        assert_same_in_spark_at(spark, dir, version, what).await;
    }
    table
}
