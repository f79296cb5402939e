//! `stream-load`: the LHBench table loaded from a generator stream through
//! `Table::write_stream`, 100M rows at scale 1, with the process's peak memory beside the
//! time: the rows are made as the writer asks for them, so the peak says what the write
//! holds, not what the input weighs (100M rows are about 4 GB in Arrow).

use std::convert::Infallible;

use arrow::array::RecordBatch;
use tarn::Table;

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
