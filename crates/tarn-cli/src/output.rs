//! Writing results: readable tables or JSON on standard output, and rows as a table, CSV,
//! JSON lines or Parquet, streamed batch by batch so memory stays bounded.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::Path;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::args::Format;
use crate::error::{CliError, Result};

/// Where results go and in what form.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    json: bool,
}

impl Output {
    /// JSON for scripts, or readable tables.
    pub(crate) fn new(json: bool) -> Self {
        Self { json }
    }

    /// Whether output is JSON.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// Whether progress may be drawn: readable output to a terminal.
    pub(crate) fn interactive(&self) -> bool {
        !self.json && std::io::stdout().is_terminal()
    }

    /// Prints `value` as JSON, or `pairs` as a readable two-column table.
    pub(crate) fn record(&self, value: &Value, pairs: &[(&str, String)]) -> Result<()> {
        if self.json {
            return print_json(value);
        }
        let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (key, text) in pairs {
            let mut lines = text.lines();
            out.push_str(&format!(
                "{key:<width$}  {}\n",
                lines.next().unwrap_or_default()
            ));
            for more in lines {
                out.push_str(&format!("{:width$}  {more}\n", ""));
            }
        }
        write_stdout(out.as_bytes())
    }

    /// Prints `value` (an array) as JSON, or `rows` under `header` as a readable table.
    pub(crate) fn rows(&self, value: &Value, header: &[&str], rows: &[Vec<String>]) -> Result<()> {
        if self.json {
            return print_json(value);
        }
        let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("{}\n", parts.join("  ").trim_end())
        };
        let mut out = line(header.to_vec());
        out.push_str(&line(
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect(),
        ));
        for row in rows {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        write_stdout(out.as_bytes())
    }

    /// The format rows are written in: the one asked for, else JSON lines with `--json`
    /// and a table without.
    pub(crate) fn row_format(&self, asked: Option<Format>) -> Format {
        asked.unwrap_or(if self.json {
            Format::Json
        } else {
            Format::Table
        })
    }
}

/// Prints `value` as pretty JSON.
pub(crate) fn print_json(value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Output {
        what: "JSON".into(),
        reason: e.to_string(),
    })?;
    write_stdout(format!("{text}\n").as_bytes())
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output {
            what: "standard output".into(),
            reason: e.to_string(),
        })
}

/// Writes a stream of batches in `format` to `path` (standard output without one), one
/// batch at a time; a table collects them first. Returns the rows written.
///
/// Fails with [`CliError::Usage`] for Parquet without a path, with
/// [`CliError::Output`] when writing fails, and with the stream's own error.
pub(crate) async fn write_batches<S, E>(
    schema: SchemaRef,
    mut batches: S,
    format: Format,
    path: Option<&Path>,
) -> Result<u64>
where
    S: Stream<Item = std::result::Result<RecordBatch, E>> + Unpin,
    CliError: From<E>,
{
    let failed = |e: &dyn std::fmt::Display| CliError::Output {
        what: path.map_or("standard output".into(), |p| p.display().to_string()),
        reason: e.to_string(),
    };
    let sink: Box<dyn Write + Send> = match (format, path) {
        (Format::Parquet, None) => {
            return Err(CliError::Usage(
                "Parquet output needs a file: give --output PATH".into(),
            ));
        }
        (_, Some(path)) => Box::new(std::io::BufWriter::new(
            File::create(path).map_err(|e| failed(&e))?,
        )),
        (_, None) => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let mut rows = 0u64;
    match format {
        Format::Table => {
            let mut all = Vec::new();
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                all.push(batch);
            }
            let text = arrow::util::pretty::pretty_format_batches(&all).map_err(|e| failed(&e))?;
            let mut sink = sink;
            writeln!(sink, "{text}")
                .and_then(|()| sink.flush())
                .map_err(|e| failed(&e))?;
        }
        Format::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(sink);
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                writer.write(&batch).map_err(|e| failed(&e))?;
            }
            let mut sink = writer.into_inner();
            sink.flush().map_err(|e| failed(&e))?;
        }
        Format::Json => {
            let mut writer = arrow::json::LineDelimitedWriter::new(sink);
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                writer.write(&batch).map_err(|e| failed(&e))?;
            }
            writer.finish().map_err(|e| failed(&e))?;
            writer.into_inner().flush().map_err(|e| failed(&e))?;
        }
        Format::Parquet => {
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(sink, schema, None).map_err(|e| failed(&e))?;
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                writer.write(&batch).map_err(|e| failed(&e))?;
            }
            writer.close().map_err(|e| failed(&e))?;
        }
    }
    Ok(rows)
}

/// A time in milliseconds since the epoch as RFC 3339 (UTC).
pub(crate) fn time_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}
