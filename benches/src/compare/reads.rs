//! `compare`'s reads: the LHBench queries on one table by every engine (Tarn, delta-rs,
//! DuckDB's `delta` extension and, for a table without deletion vectors, DuckDB's
//! `read_parquet` over its data files), each in a fresh process that opens and registers
//! the table before its clock starts, alternating which engine goes first; the answers
//! must agree.

use std::path::{Path, PathBuf};

use super::{Engine, Harness, Row, order};
use crate::queries::COMPARE_QUERIES;
use crate::{Bench, BenchError};

/// Runs the queries on each `(table, label)` (a table of the harness and the text that
/// names it in the rows) and returns one row per table and query.
///
/// Fails when a step fails or the engines' answers differ.
pub(super) async fn queries(
    harness: &Harness,
    bench: &Bench,
    tables: &[(&str, &str)],
) -> Result<Vec<Row>, BenchError> {
    let listed = text(&queries_file(harness)?);
    let mut rows = Vec::new();
    for (name, label) in tables {
        let table = harness.table(name);
        let table_text = text(&table);
        let files = match data_files(&table).await? {
            Some(files) => {
                let file = harness.input(&format!("files-{name}.json"));
                std::fs::write(&file, serde_json::to_vec(&files)?)?;
                Some(text(&file))
            }
            None => None,
        };
        let mut engines = vec![Engine::Tarn, Engine::DeltaRs, Engine::DuckDb];
        if files.is_some() {
            engines.push(Engine::Parquet);
        }
        let mut table_rows: Vec<Row> = COMPARE_QUERIES
            .iter()
            .map(|q| Row::new(format!("{}{label}", q.sql()), Engine::Tarn))
            .collect();
        for run in 0..bench.runs {
            let mut answers: Vec<(Engine, Vec<Option<f64>>)> = Vec::new();
            for engine in order(run, &engines) {
                let args: Vec<&str> = match (engine, &files) {
                    (Engine::Parquet, Some(files)) => vec!["parquet", files, &listed],
                    (Engine::DeltaRs | Engine::DuckDb, _) => vec!["query", &table_text, &listed],
                    _ => vec!["query", &table_text],
                };
                let report = harness.run(engine, &args).await?;
                if report.queries.len() != table_rows.len() {
                    return Err(format!(
                        "{} answered {} queries on {name}",
                        engine.name(),
                        report.queries.len()
                    )
                    .into());
                }
                for (row, q) in table_rows.iter_mut().zip(&report.queries) {
                    row.add(engine, q.ms, report.peak_rss_mib);
                }
                answers.push((engine, report.queries.iter().map(|q| q.value).collect()));
            }
            agree(&table_rows, &answers)?;
        }
        rows.extend(table_rows);
    }
    Ok(rows)
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Fails unless every engine gave each query the first engine's answer (sums of doubles
/// to a relative 1e-9: the engines add in different orders).
fn agree(rows: &[Row], answers: &[(Engine, Vec<Option<f64>>)]) -> Result<(), BenchError> {
    let Some((first, theirs)) = answers.first() else {
        return Ok(());
    };
    for (engine, ours) in &answers[1..] {
        for (i, row) in rows.iter().enumerate() {
            let (a, b) = (theirs[i], ours[i]);
            let same = match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                _ => a == b,
            };
            if !same {
                return Err(format!(
                    "{}: {} answered {a:?}, {} {b:?}",
                    row.work,
                    first.name(),
                    engine.name()
                )
                .into());
            }
        }
    }
    Ok(())
}

/// The queries as the peers' steps take them (`query`: the name, `statement`: SQL over
/// a table `t`), written to the input folder.
fn queries_file(harness: &Harness) -> Result<PathBuf, BenchError> {
    let file = harness.input("queries.json");
    let listed: Vec<serde_json::Value> = COMPARE_QUERIES
        .iter()
        .map(|q| serde_json::json!({ "query": q.sql(), "statement": q.statement() }))
        .collect();
    std::fs::write(&file, serde_json::to_vec(&listed)?)?;
    Ok(file)
}

/// The data files of the table at `table`, as paths, or none when a file has a deletion
/// vector (`read_parquet` would count its deleted rows).
///
/// Fails when the table does not open or a data file is not where its path says.
async fn data_files(table: &Path) -> Result<Option<Vec<String>>, BenchError> {
    let opened = tarn::Table::open(&text(table)).await?;
    let snapshot = opened.snapshot();
    if snapshot.files().any(|a| a.deletion_vector.is_some()) {
        return Ok(None);
    }
    let mut files = Vec::new();
    for add in snapshot.files() {
        let file = table.join(&add.path);
        if !file.is_file() {
            return Err(format!("data file {} of {} not found", add.path, table.display()).into());
        }
        files.push(text(&file));
    }
    Ok(Some(files))
}
