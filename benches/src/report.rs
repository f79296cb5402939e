//! What a workload measured, kept as records: printed as a table on stdout, appended as
//! JSON lines to a file, and kept for the charts.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Summary;

/// One measured case of a workload.
#[derive(Debug, Clone)]
pub struct Record {
    /// The workload (`load`, `merge`, ...).
    pub workload: &'static str,
    /// The case, e.g. `merge-on-read 0.1%`.
    pub case: String,
    /// Time and requests, summarised over the runs.
    pub summary: Summary,
    /// Throughput and its unit, when the case has one.
    pub throughput: Option<(f64, &'static str)>,
    /// Bytes written by the case (median run).
    pub bytes_written: u64,
    /// Named numbers for the JSON line and the charts (fraction, strategy, slowdown, ...).
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// A short note for the table.
    pub note: String,
}

impl Record {
    /// A record with no throughput, fields or note.
    pub fn new(workload: &'static str, case: impl Into<String>, summary: Summary) -> Record {
        Record {
            workload,
            case: case.into(),
            summary,
            throughput: None,
            bytes_written: 0,
            fields: serde_json::Map::new(),
            note: String::new(),
        }
    }

    /// Sets the throughput.
    pub fn throughput(mut self, value: f64, unit: &'static str) -> Record {
        self.throughput = Some((value, unit));
        self
    }

    /// Sets the bytes written.
    pub fn bytes_written(mut self, bytes: u64) -> Record {
        self.bytes_written = bytes;
        self
    }

    /// Adds a named field.
    pub fn field(mut self, name: &str, value: impl Into<serde_json::Value>) -> Record {
        self.fields.insert(name.to_string(), value.into());
        self
    }

    /// Sets the note.
    pub fn note(mut self, note: impl Into<String>) -> Record {
        self.note = note.into();
        self
    }

    /// A field as a number.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.fields.get(name).and_then(serde_json::Value::as_f64)
    }

    /// A field as text.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.fields.get(name).and_then(serde_json::Value::as_str)
    }

    /// The record as one JSON object.
    pub fn to_json(&self, profile: &str) -> serde_json::Value {
        let mut extra = self.fields.clone();
        extra.insert("workload".into(), self.workload.into());
        extra.insert("profile".into(), profile.into());
        extra.insert("bytes_written".into(), self.bytes_written.into());
        if let Some((value, unit)) = self.throughput {
            extra.insert("throughput".into(), value.into());
            extra.insert("throughput_unit".into(), unit.into());
        }
        self.summary
            .to_json(&self.case, serde_json::Value::Object(extra))
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{ms:.2}ms")
    }
}

fn mb(bytes: u64) -> String {
    if bytes == 0 {
        "-".into()
    } else {
        format!("{:.2}", bytes as f64 / 1e6)
    }
}

/// The header of the results table.
pub fn header() -> String {
    format!(
        "{:<9} {:<40} {:>9} {:>9} {:>16} {:>6} {:>5} {:>9} {:>9}  {}",
        "workload",
        "case",
        "p50",
        "p90",
        "throughput",
        "reqs",
        "trips",
        "MB read",
        "MB wrote",
        "note"
    )
}

/// One row of the results table.
pub fn row(r: &Record) -> String {
    let throughput = match r.throughput {
        Some((v, unit)) if v >= 100.0 => format!("{v:.0} {unit}"),
        Some((v, unit)) => format!("{v:.2} {unit}"),
        None => "-".into(),
    };
    format!(
        "{:<9} {:<40} {:>9} {:>9} {:>16} {:>6} {:>5} {:>9} {:>9}  {}",
        r.workload,
        r.case,
        ms(r.summary.p50),
        ms(r.summary.p90),
        throughput,
        r.summary.requests,
        r.summary.round_trips,
        mb(r.summary.bytes_read),
        mb(r.bytes_written),
        r.note
    )
}

/// Collects records, printing each as it comes and appending it to the JSON file.
pub struct Reporter {
    profile: String,
    json: Option<std::fs::File>,
    records: Vec<Record>,
    quiet: bool,
}

impl Reporter {
    /// A reporter for runs under `profile`, appending JSON lines to `json` if given.
    ///
    /// Fails when the JSON file cannot be opened.
    pub fn new(profile: &str, json: Option<&Path>, quiet: bool) -> std::io::Result<Reporter> {
        let json = match json {
            Some(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)?,
                )
            }
            None => None,
        };
        Ok(Reporter {
            profile: profile.to_string(),
            json,
            records: Vec::new(),
            quiet,
        })
    }

    /// Records one result.
    ///
    /// Fails when the JSON line cannot be written.
    pub fn push(&mut self, record: Record) -> std::io::Result<()> {
        if let Some(file) = self.json.as_mut() {
            writeln!(file, "{}", record.to_json(&self.profile))?;
        }
        if !self.quiet {
            if self.records.is_empty() {
                println!("{}", header());
            }
            println!("{}", row(&record));
        }
        self.records.push(record);
        Ok(())
    }

    /// Everything recorded so far.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The latency profile the records were measured under.
    pub fn profile(&self) -> &str {
        &self.profile
    }
}

/// A progress bar on stderr for a long phase of `len` steps (hidden when stderr is not
/// a terminal, so logs stay clean).
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}
