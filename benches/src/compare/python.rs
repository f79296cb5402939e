//! `python`: the `tarn` Python package beside `deltalake` (delta-rs's) on the same data,
//! and beside Tarn's Rust API doing the same work, which is what the Python layer costs.
//!
//! The input (the LHBench table, 10M rows at scale 1, and a 1% upsert source) is written
//! once as Parquet. Every measured step runs in a fresh process: the Python ones through
//! `benches/scripts/python_step.py` in a virtual environment holding a release build of
//! the package, `deltalake`, pyarrow, Polars and DuckDB (made on first use, see
//! `tarn_test_support::python::bench_package`), the Rust ones through `tarn-bench step`,
//! alternating which goes first from run to run. The work: load the table, scan it into
//! pyarrow and into Polars, an aggregate over every column in DuckDB reading the scan as
//! a stream, the 1% upsert and a 1% delete spread over every file under both of Tarn's
//! strategies (each from a fresh copy of the loaded table). The Rust side loads as the
//! package does, CREATE TABLE AS from a reader. Each row reports the medians of time and
//! peak memory and checks every side did the same work.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{StepReport, copy_dir, median, order, run_step, step::write_parquet};
use crate::report::{Record, Reporter, progress};
use crate::{Bench, BenchError, Sample, Summary, r#gen};

/// Who does a step: Tarn's Rust API, the `tarn` Python package, or `deltalake`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Rust,
    Python,
    DeltaLake,
}

impl Side {
    const ALL: [Side; 3] = [Side::Rust, Side::Python, Side::DeltaLake];

    fn name(self) -> &'static str {
        match self {
            Side::Rust => "tarn (Rust)",
            Side::Python => "tarn (Python)",
            Side::DeltaLake => "deltalake",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The 1% delete: `part` is `key % 1000`, so the rows are spread over every file.
const DELETE_PREDICATE: &str = "part < 10";
/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// Where the harness keeps its input and tables, and how it starts each side's steps.
struct Harness {
    dir: PathBuf,
    python: PathBuf,
    script: PathBuf,
    tarn: PathBuf,
}

impl Harness {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// Runs one step on `side` in a fresh process; `args` are the step's, without the
    /// engine (`load INPUT TABLE`, `scan TABLE TO`, ...).
    async fn run(&self, side: Side, args: &[&str]) -> Result<StepReport, BenchError> {
        let (mut command, first) = match side {
            Side::Rust => (tokio::process::Command::new(&self.tarn), "step"),
            Side::Python | Side::DeltaLake => {
                let mut c = tokio::process::Command::new(&self.python);
                c.arg(&self.script);
                (
                    c,
                    if side == Side::Python {
                        "tarn"
                    } else {
                        "deltalake"
                    },
                )
            }
        };
        command.arg(first);
        run_step(side.name(), command, args).await
    }

    /// A fresh copy of the table `from` at `to`; returns its path.
    fn copy_table(&self, from: &str, to: &str) -> Result<String, BenchError> {
        let (from, to) = (self.dir.join(from), self.dir.join(to));
        let _ = std::fs::remove_dir_all(&to);
        copy_dir(&from, &to)?;
        Ok(to.to_string_lossy().into_owned())
    }
}

/// One row: the same work on each side that does it.
struct Row {
    work: String,
    ms: [Vec<f64>; 3],
    peak: [Vec<f64>; 3],
    /// The peak's rise over the resident size at the start, MiB.
    rise: [Vec<f64>; 3],
    /// The Arrow memory the result holds (scans into pyarrow or Polars), MiB.
    held: [Vec<f64>; 3],
}

impl Row {
    fn new(work: impl Into<String>) -> Row {
        Row {
            work: work.into(),
            ms: Default::default(),
            peak: Default::default(),
            rise: Default::default(),
            held: Default::default(),
        }
    }

    fn add(&mut self, side: Side, report: &StepReport) {
        self.ms[side.index()].push(report.ms);
        self.peak[side.index()].extend(report.peak_rss_mib);
        if let (Some(peak), Some(start)) = (report.peak_rss_mib, report.start_rss_mib) {
            self.rise[side.index()].push(peak - start);
        }
        if let Some(bytes) = report.bytes {
            self.held[side.index()].push(bytes as f64 / MIB);
        }
    }

    fn p50(&self, side: Side) -> f64 {
        median(&self.ms[side.index()])
    }

    fn peak(&self, side: Side) -> f64 {
        median(&self.peak[side.index()])
    }

    /// deltalake's time over the Python package's (above 1: Tarn is faster).
    fn ratio(&self) -> f64 {
        self.p50(Side::DeltaLake) / self.p50(Side::Python)
    }

    /// What the Python layer adds to the Rust API's time, in percent (NaN where the
    /// Rust API does not do the work).
    fn overhead(&self) -> f64 {
        (self.p50(Side::Python) / self.p50(Side::Rust) - 1.0) * 100.0
    }

    fn record(&self) -> Record {
        let samples: Vec<Sample> = self.ms[Side::Python.index()]
            .iter()
            .map(|ms| Sample {
                elapsed: Duration::from_secs_f64(ms / 1e3),
                counts: Default::default(),
            })
            .collect();
        Record::new("python", self.work.clone(), Summary::of(&samples))
            .field("work", self.work.as_str())
            .field("tarn_python_p50_ms", self.p50(Side::Python))
            .field("deltalake_p50_ms", self.p50(Side::DeltaLake))
            .field("tarn_rust_p50_ms", self.p50(Side::Rust))
            .field("ratio", self.ratio())
            .field("python_overhead_pct", self.overhead())
            .field("tarn_python_peak_mib", self.peak(Side::Python))
            .field("deltalake_peak_mib", self.peak(Side::DeltaLake))
            .field("tarn_rust_peak_mib", self.peak(Side::Rust))
            .field(
                "tarn_python_rise_mib",
                median(&self.rise[Side::Python.index()]),
            )
            .field(
                "tarn_python_result_mib",
                median(&self.held[Side::Python.index()]),
            )
            .note(format!(
                "deltalake {:.0} ms, ratio {:.2}, {}peak {:.0} / {:.0} MiB",
                self.p50(Side::DeltaLake),
                self.ratio(),
                match self.ms[Side::Rust.index()].is_empty() {
                    true => String::new(),
                    false => format!("Rust {:.0} ms, ", self.p50(Side::Rust)),
                },
                self.peak(Side::Python),
                self.peak(Side::DeltaLake),
            ))
    }
}

/// Fails unless every report of one step agrees on `what`.
fn agree(what: &str, reports: &[(Side, Option<u64>)]) -> Result<(), BenchError> {
    for pair in reports.windows(2) {
        if pair[0].1 != pair[1].1 {
            return Err(format!(
                "{what}: {} reported {:?}, {} {:?}",
                pair[0].0.name(),
                pair[0].1,
                pair[1].0.name(),
                pair[1].1
            )
            .into());
        }
    }
    Ok(())
}

/// `python`: load, scans into pyarrow, Polars and DuckDB, the 1% upsert and the 1%
/// delete under both strategies, on Tarn's Rust API, the `tarn` Python package and
/// `deltalake`, `bench.runs` times each; prints the medians as a Markdown table.
/// `python` is the bench environment's interpreter.
///
/// Fails when the root is not a local directory, a step fails, or the sides disagree
/// on what they did.
pub async fn python(
    bench: &Bench,
    python: &Path,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    if bench.root.contains("://") {
        return Err(format!(
            "python runs on a local directory (deltalake gets the same paths); got {}",
            bench.root
        )
        .into());
    }
    let harness = Harness {
        dir: PathBuf::from(&bench.root).join("python"),
        python: python.to_path_buf(),
        script: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/python_step.py"),
        tarn: std::env::current_exe()?,
    };
    let rows = bench.scaled(10_000_000, 10_000);
    let (base, source, updates) = generate(&harness, bench, rows)?;
    let base_name = |side: Side| match side {
        Side::Rust => "rust-base",
        Side::Python => "tarn-base",
        Side::DeltaLake => "deltalake-base",
    };
    let mut out = Vec::new();
    let bar = progress((bench.runs * 10) as u64, "python");

    // Load: each run writes a new table; the last run's are the ones read and changed.
    let mut load = Row::new(format!("load {rows} rows"));
    for run in 0..bench.runs {
        for side in order(run, &Side::ALL) {
            let table = harness.path(base_name(side));
            let _ = std::fs::remove_dir_all(&table);
            // The Rust side does the package's work: CREATE TABLE AS from a reader.
            let op = match side {
                Side::Rust => "load-stream",
                Side::Python | Side::DeltaLake => "load",
            };
            let report = harness.run(side, &[op, &base, &table]).await?;
            agree("rows loaded", &[(side, report.rows), (side, Some(rows))])?;
            load.add(side, &report);
        }
        bar.inc(1);
    }
    out.push(load);

    // Scans: the Rust API and the package read the package's table, deltalake its own.
    let mut arrow_bytes = None;
    for to in ["pyarrow", "polars", "duckdb"] {
        let sides: &[Side] = match to {
            "pyarrow" => &Side::ALL,
            _ => &[Side::Python, Side::DeltaLake],
        };
        let mut row = Row::new(match to {
            "pyarrow" => "full scan into pyarrow (Rust: into record batches)".to_string(),
            "polars" => "full scan into Polars".to_string(),
            _ => "DuckDB aggregate over every column, streamed".to_string(),
        });
        for run in 0..bench.runs {
            let mut seen = Vec::new();
            for side in order(run, sides) {
                let table = match side {
                    Side::DeltaLake => harness.path(base_name(side)),
                    Side::Rust | Side::Python => harness.path(base_name(Side::Python)),
                };
                let args = match side {
                    Side::Rust => vec!["scan", table.as_str()],
                    Side::Python | Side::DeltaLake => vec!["scan", table.as_str(), to],
                };
                let report = harness.run(side, &args).await?;
                if side == Side::Rust {
                    arrow_bytes = arrow_bytes.or(report.bytes);
                }
                seen.push((side, report.rows));
                row.add(side, &report);
            }
            seen.push((Side::Rust, Some(rows)));
            agree("rows scanned", &seen)?;
            bar.inc(1);
        }
        out.push(row);
    }

    // The upsert and the delete, from a fresh copy of each side's table every time.
    for (work, strategy) in [
        ("upsert 1%", "cow"),
        ("upsert 1%", "mor"),
        ("delete 1%", "cow"),
        ("delete 1%", "mor"),
    ] {
        let name = match strategy {
            "cow" => "copy-on-write",
            _ => "merge-on-read",
        };
        let mut row = Row::new(format!("{work}, Tarn {name}"));
        for run in 0..bench.runs {
            let mut seen = Vec::new();
            for side in order(run, &Side::ALL) {
                let from = match side {
                    Side::DeltaLake => base_name(side),
                    Side::Rust | Side::Python => base_name(Side::Python),
                };
                let table = harness.copy_table(from, &format!("changed-{}", side.index()))?;
                let report = match (work, side) {
                    ("upsert 1%", Side::Rust) => {
                        harness
                            .run(side, &["merge", strategy, &table, &source])
                            .await?
                    }
                    ("upsert 1%", _) => {
                        harness
                            .run(side, &["merge", &table, &source, strategy])
                            .await?
                    }
                    (_, Side::Rust) => {
                        harness
                            .run(side, &["delete", strategy, &table, DELETE_PREDICATE])
                            .await?
                    }
                    _ => {
                        harness
                            .run(side, &["delete", &table, DELETE_PREDICATE, strategy])
                            .await?
                    }
                };
                match work {
                    "upsert 1%" => {
                        seen.push((side, report.updated));
                        agree(
                            "rows updated",
                            &[(side, report.updated), (side, Some(updates))],
                        )?;
                    }
                    _ => seen.push((side, report.deleted)),
                }
                row.add(side, &report);
            }
            agree("rows changed", &seen)?;
            bar.inc(1);
        }
        out.push(row);
    }
    bar.finish_and_clear();

    for row in &out {
        reporter.push(row.record())?;
    }
    println!("\n{}", markdown(&out));
    for line in held_lines(&out) {
        println!("{line}");
    }
    if let Some(bytes) = arrow_bytes {
        println!(
            "The {rows} rows take {:.0} MiB as Arrow arrays (Tarn's Rust scan).",
            bytes as f64 / MIB
        );
    }
    Ok(())
}

/// Writes the table's rows and the 1% upsert source as Parquet, once per row count and
/// seed; returns their paths and the number of updates in the source.
fn generate(
    harness: &Harness,
    bench: &Bench,
    rows: u64,
) -> Result<(String, String, u64), BenchError> {
    let dir = harness.dir.join("input");
    let marker = dir.join(".generated");
    let wanted = format!("rows {rows} seed {}", bench.seed);
    let base = dir.join("base.parquet");
    let source = dir.join("source.parquet");
    let (batch, updates) = r#gen::merge_source(rows, 0.01, bench.seed);
    if !std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let batches: Vec<_> = r#gen::merge_rows(rows).collect();
        write_parquet(&base, &batches)?;
        write_parquet(&source, &[batch])?;
        std::fs::write(&marker, &wanted)?;
    }
    let path = |p: &Path| p.to_string_lossy().into_owned();
    Ok((path(&base), path(&source), updates as u64))
}

/// For each scan whose result the package reports the size of: how far its peak rose,
/// against the Arrow memory the result holds. A rise near the result's size, plus what
/// the scan needs in flight, means the rows were handed over, not copied.
fn held_lines(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.held[Side::Python.index()].is_empty())
        .map(|r| {
            let rise = median(&r.rise[Side::Python.index()]);
            let held = median(&r.held[Side::Python.index()]);
            match rise.is_nan() {
                // Without /proc/self/clear_refs the step cannot restart its peak.
                true => format!(
                    "{}: the result holds {held:.0} MiB of Arrow data; the package's peak \
                     rise is unknown here.",
                    r.work
                ),
                false => format!(
                    "{}: the package's peak rose {rise:.0} MiB; the result holds {held:.0} \
                     MiB of Arrow data ({:+.0} MiB beside it).",
                    r.work,
                    rise - held
                ),
            }
        })
        .collect()
}

/// The side-by-side as a Markdown table.
fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| work | tarn (Python) ms | deltalake ms | ratio | tarn (Rust) ms | Python layer | \
         tarn (Python) peak MiB | deltalake peak MiB | tarn (Rust) peak MiB |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let cell = |v: f64, digits: usize| match v.is_nan() {
        true => "-".to_string(),
        false => format!("{v:.digits$}"),
    };
    for r in rows {
        let overhead = r.overhead();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.work,
            cell(r.p50(Side::Python), 1),
            cell(r.p50(Side::DeltaLake), 1),
            cell(r.ratio(), 2),
            cell(r.p50(Side::Rust), 1),
            match overhead.is_nan() {
                true => "-".to_string(),
                false => format!("{overhead:+.1}%"),
            },
            cell(r.peak(Side::Python), 0),
            cell(r.peak(Side::DeltaLake), 0),
            cell(r.peak(Side::Rust), 0),
        ));
    }
    out
}
