//! Tarn's half of `compare`'s steps: each runs in a process of its own (`tarn-bench
//! step ...`), as `deltars_step.py` and `duckdb_step.py` do for the peers.

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use parquet::arrow::ArrowWriter;
use tarn::{ChangeStrategy, Table};

use crate::queries::COMPARE_QUERIES;
use crate::{BenchError, memory};

/// Runs one of Tarn's steps in this process and returns its report: the other half of
/// `deltars_step.py`. `args` are `load INPUT TABLE`, `append TABLE INPUT`,
/// `merge cow|mor TABLE SOURCE`, `delete cow|mor TABLE PREDICATE`, `scan TABLE` (every row
/// into memory; `bytes` is their Arrow size), `query TABLE` or `open TABLE` (a cold open
/// and the list of its files).
///
/// Fails on unknown arguments, unreadable input, or when Tarn fails.
pub async fn step(args: &[String]) -> Result<serde_json::Value, BenchError> {
    let arg = |i: usize| -> Result<&str, BenchError> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("step {args:?}: missing argument {i}").into())
    };
    let timed_start = || {
        memory::reset_peak();
        std::time::Instant::now()
    };
    let peak = || memory::peak_rss() as f64 / (1024.0 * 1024.0);
    match arg(0)? {
        "load" => {
            let batches = read_parquet(Path::new(arg(1)?))?;
            let schema = batches.first().ok_or("empty input")?.schema();
            let started = timed_start();
            let mut table = Table::create_at(tarn_store::open(arg(2)?)?)
                .with_arrow_schema(&schema)
                .with_property("delta.enableDeletionVectors", "true")
                .execute()
                .await?;
            let outcome = table.write(batches).execute().await?;
            if let Some(checkpoint) = outcome.commit.checkpoint {
                checkpoint.wait().await?;
            }
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "rows": outcome.rows_written,
            }))
        }
        "load-stream" => {
            // What the Python package's load does: CREATE TABLE AS from a reader.
            let batches = read_parquet(Path::new(arg(1)?))?;
            let schema = batches.first().ok_or("empty input")?.schema();
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            let reader = arrow::array::RecordBatchIterator::new(
                batches.into_iter().map(Ok),
                Arc::clone(&schema),
            );
            let started = timed_start();
            Table::create_at(tarn_store::open(arg(2)?)?)
                .with_arrow_schema(&schema)
                .with_property("delta.enableDeletionVectors", "true")
                .execute_reader(reader)
                .await?;
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "rows": rows,
            }))
        }
        "append" => {
            let mut table = Table::open(arg(1)?).await?;
            let batches = read_parquet(Path::new(arg(2)?))?;
            let started = timed_start();
            let outcome = table.write(batches).execute().await?;
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "rows": outcome.rows_written,
            }))
        }
        "merge" => {
            let strategy = strategy(arg(1)?)?;
            let mut table = Table::open(arg(2)?).await?;
            let source = read_parquet(Path::new(arg(3)?))?;
            let started = timed_start();
            let outcome = crate::workloads::upsert(&mut table, source, strategy).await?;
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "updated": outcome.metrics.rows_updated,
                "inserted": outcome.metrics.rows_inserted,
            }))
        }
        "delete" => {
            let strategy = strategy(arg(1)?)?;
            let mut table = Table::open(arg(2)?).await?;
            let predicate = tarn::expr::parse_sql(arg(3)?)?;
            let started = timed_start();
            let outcome = table
                .delete(predicate)
                .with_strategy(strategy)
                .execute()
                .await?;
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "deleted": outcome.metrics.rows_deleted,
            }))
        }
        "scan" => {
            let table = Table::open(arg(1)?).await?;
            let started = timed_start();
            let batches: Vec<RecordBatch> = table.scan().execute().await?.try_collect().await?;
            let ms = started.elapsed().as_secs_f64() * 1e3;
            Ok(serde_json::json!({
                "ms": ms,
                "peak_rss_mib": peak(),
                "rows": batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
                "bytes": batches.iter().map(|b| b.get_array_memory_size() as u64).sum::<u64>(),
            }))
        }
        "query" => {
            let table = Table::open(arg(1)?).await?;
            let snapshot = table.snapshot();
            let started = timed_start();
            let mut queries = Vec::new();
            for q in COMPARE_QUERIES {
                let t0 = std::time::Instant::now();
                let value = q.run(snapshot).await?;
                queries.push(serde_json::json!({
                    "query": q.sql(),
                    "ms": t0.elapsed().as_secs_f64() * 1e3,
                    "value": value,
                }));
            }
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "queries": queries,
            }))
        }
        "open" => {
            // Cold: a fresh process, nothing read before the clock starts.
            let location = tarn_store::open(arg(1)?)?;
            let started = timed_start();
            let snapshot = tarn::Snapshot::builder(location).build().await?;
            let files = snapshot.files().len();
            Ok(serde_json::json!({
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "peak_rss_mib": peak(),
                "files": files,
            }))
        }
        other => Err(format!(
            "unknown step {other:?}: load, load-stream, append, merge, delete, scan, query or open"
        )
        .into()),
    }
}

/// Rows per input batch, as pyarrow reads Parquet.
const INPUT_BATCH_ROWS: usize = 128 * 1024;

fn strategy(name: &str) -> Result<ChangeStrategy, BenchError> {
    match name {
        "cow" => Ok(ChangeStrategy::CopyOnWrite),
        "mor" => Ok(ChangeStrategy::MergeOnRead),
        other => Err(format!("strategy {other:?}: cow or mor").into()),
    }
}

pub(super) fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, BenchError> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // In the batches `pyarrow.parquet.read_table` hands the Python steps (128 Ki rows),
    // so every engine writes the same input; parquet's default is 1,024 rows.
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
        .with_batch_size(INPUT_BATCH_ROWS)
        .build()?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

pub(super) fn write_parquet(path: &Path, batches: &[RecordBatch]) -> Result<u64, BenchError> {
    let first = batches.first().ok_or("nothing to write")?;
    let file = std::fs::File::create(path)?;
    let mut writer = ArrowWriter::try_new(file, first.schema(), None)?;
    for b in batches {
        writer.write(b)?;
    }
    writer.close()?;
    Ok(std::fs::metadata(path)?.len())
}
