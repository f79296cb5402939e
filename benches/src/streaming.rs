//! Streamed inputs, with the process's peak memory beside the time: the rows are made as
//! Tarn asks for them, so the peak says what Tarn holds, not what the input weighs.
//!
//! - `stream-load`: the LHBench table loaded from a generator stream through
//!   `Table::write_stream`, 100M rows at scale 1 (about 4 GB in Arrow).
//! - `stream-merge`: an upsert of a 20M-row source stream (about 0.8 GB in Arrow; half
//!   updates spread over the whole table, half inserts) into that 100M-row table through
//!   `Table::merge_stream` with a 256 MiB memory limit, so the source is spilled and
//!   matched in key ranges; merge-on-read, then copy-on-write.

use std::convert::Infallible;

use arrow::array::RecordBatch;
use tarn::{ChangeStrategy, Table};

use crate::report::{Record, Reporter};
use crate::{Bench, BenchError, Summary, r#gen, memory, sample};

/// Runs `stream-load` (by name only: at scale 1 it writes 100M rows).
pub async fn stream_load(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(100_000_000, 100_000);
    let schema = r#gen::merge_schema();
    let mut samples = Vec::new();
    let (mut peak, mut files) = (0, 0);
    for run in 0..bench.runs {
        let name = "stream-load/lhbench";
        bench.clear(name).await?;
        let measured = bench.measured(name, run)?;
        let mut table = Table::create_at(measured.location.clone())
            .with_arrow_schema(&schema)
            .execute()
            .await?;
        let input =
            futures::stream::iter(r#gen::merge_rows(rows).map(Ok::<RecordBatch, Infallible>));
        memory::reset_peak();
        let (outcome, s) = sample(&measured.counter, table.write_stream(input).execute()).await?;
        peak = peak.max(memory::peak_rss());
        if outcome.rows_written != rows {
            return Err(format!(
                "stream-load wrote {} rows, not {rows}",
                outcome.rows_written
            )
            .into());
        }
        files = outcome.files_added;
        samples.push(s);
    }
    let summary = Summary::of(&samples);
    let written = samples
        .iter()
        .map(|s| s.counts.bytes_written)
        .max()
        .unwrap_or(0);
    let mb_s = written as f64 / 1e6 / summary.p50.as_secs_f64();
    reporter.push(
        Record::new(
            "stream-load",
            format!("lhbench {rows} rows from a stream"),
            summary,
        )
        .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
        .bytes_written(written)
        .field("rows", rows)
        .field("files", files)
        .field("peak_rss", peak)
        .note(format!(
            "{mb_s:.1} MB/s, {files} files, peak RSS {:.0} MB",
            peak as f64 / 1e6
        )),
    )?;
    Ok(())
}

/// The memory limit `stream-merge` gives the merge: below its source's size, so the
/// source is spilled and cut into ranges.
const STREAM_MERGE_LIMIT: usize = 256 << 20;

/// Runs `stream-merge` (by name only: at scale 1 it writes a 100M-row table, then merges
/// 20M rows into copies of it).
pub async fn stream_merge(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(100_000_000, 100_000);
    let source_rows = rows / 5;
    let base = "stream-merge/base";
    bench.clear(base).await?;
    let location = bench.measured(base, 0)?.location;
    let mut table = Table::create_at(location)
        .with_arrow_schema(&r#gen::merge_schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await?;
    let input = futures::stream::iter(r#gen::merge_rows(rows).map(Ok::<RecordBatch, Infallible>));
    let loaded = table.write_stream(input).execute().await?;
    if let Some(task) = loaded.commit.checkpoint {
        task.wait().await?;
    }
    let (updates, inserts) = (source_rows.div_ceil(2), source_rows / 2);
    for strategy in [ChangeStrategy::MergeOnRead, ChangeStrategy::CopyOnWrite] {
        let label = match strategy {
            ChangeStrategy::MergeOnRead => "mor",
            ChangeStrategy::CopyOnWrite => "cow",
        };
        let name = format!("stream-merge/{label}");
        let (mut samples, mut peak, mut ranges) = (Vec::new(), 0, 0);
        for run in 0..bench.runs {
            bench.copy_table(base, &name).await?;
            let measured = bench.measured(&name, run)?;
            let mut target = Table::open_at(measured.location.clone()).await?;
            let source = futures::stream::iter(
                r#gen::upsert_stream(rows, source_rows).map(Ok::<RecordBatch, Infallible>),
            );
            memory::reset_peak();
            let merge = target
                .merge_stream(source)
                .on(["key"])
                .when_matched_update_all(None)
                .when_not_matched_insert_all(None)
                .with_strategy(strategy)
                .with_memory_limit(STREAM_MERGE_LIMIT)
                .execute();
            let (outcome, s) = sample(&measured.counter, merge).await?;
            peak = peak.max(memory::peak_rss());
            let m = &outcome.metrics;
            if (m.rows_updated, m.rows_inserted) != (updates, inserts) {
                return Err(format!(
                    "stream-merge {label}: {} updated and {} inserted, expected {updates} and \
                     {inserts}",
                    m.rows_updated, m.rows_inserted
                )
                .into());
            }
            ranges = source_ranges(&measured.location, outcome.commit.version).await?;
            samples.push(s);
        }
        let summary = Summary::of(&samples);
        reporter.push(
            Record::new(
                "stream-merge",
                format!("{label}: {source_rows}-row source stream into {rows} rows"),
                summary,
            )
            .throughput(source_rows as f64 / summary.p50.as_secs_f64(), "rows/s")
            .bytes_written(
                samples
                    .iter()
                    .map(|s| s.counts.bytes_written)
                    .max()
                    .unwrap_or(0),
            )
            .field("rows", rows)
            .field("source_rows", source_rows)
            .field("source_ranges", ranges)
            .field("peak_rss", peak)
            .note(format!(
                "{ranges} source ranges, peak RSS {:.0} MB",
                peak as f64 / 1e6
            )),
        )?;
    }
    Ok(())
}

/// The `sourceRanges` parameter the merge commit at `version` records (0 when the source
/// was not spilled).
///
/// Fails when the commit cannot be read.
async fn source_ranges(location: &tarn::StoreLocation, version: i64) -> Result<u64, BenchError> {
    use object_store::ObjectStoreExt;
    let path = location
        .root()
        .clone()
        .join("_delta_log")
        .join(format!("{version:020}.json"));
    let body = location.store().get(&path).await?.bytes().await?;
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let action: serde_json::Value = serde_json::from_slice(line)?;
        if let Some(ranges) = action["commitInfo"]["operationParameters"]["sourceRanges"].as_str() {
            return Ok(ranges.parse().unwrap_or(0));
        }
    }
    Ok(0)
}
