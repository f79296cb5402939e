//! `compare`: Tarn and delta-rs side by side on the same input, on a local directory,
//! with DuckDB beside them for reads.
//!
//! The input (the LHBench table, its merge sources, a CDC batch and a bulk append) is
//! generated once and written as Parquet; the last row opens the `files` workload's
//! largest table of small files (100K files from scale 10), which Tarn writes. Every
//! measured step then runs in a fresh process of its own: Tarn's (`tarn-bench step ...`,
//! see `step`), delta-rs's (`benches/scripts/deltars_step.py` in a virtual environment
//! with `deltalake` that the harness creates on first use) and, for reads, DuckDB's
//! (`benches/scripts/duckdb_step.py`, see `reads`), alternating which goes first from
//! run to run. Merges start from fresh copies of each engine's loaded table. Each step
//! reports its time and its process's peak resident memory; the harness checks the
//! engines did the same work (rows written, rows updated and inserted, query answers)
//! and prints the medians and the ratio delta-rs / Tarn per row (above 1: Tarn is
//! faster).

mod python;
mod reads;
mod step;

use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::RecordBatch;
use serde::Deserialize;

use crate::report::{Record, Reporter, progress};
use crate::workloads::MERGE_FRACTIONS;
use crate::{Bench, BenchError, Sample, Summary, r#gen};
pub use python::python;
pub use step::step;
use step::write_parquet;

/// What one measured step printed.
#[derive(Debug, Clone, Deserialize)]
pub struct StepReport {
    /// Milliseconds of the timed part.
    pub ms: f64,
    /// Peak resident memory of the step's process during the timed part, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Resident memory of the step's process when the timed part started, MiB.
    #[serde(default)]
    pub start_rss_mib: Option<f64>,
    /// Rows written (load, append).
    #[serde(default)]
    pub rows: Option<u64>,
    /// Rows updated (merge).
    #[serde(default)]
    pub updated: Option<u64>,
    /// Rows inserted (merge).
    #[serde(default)]
    pub inserted: Option<u64>,
    /// Rows deleted (delete).
    #[serde(default)]
    pub deleted: Option<u64>,
    /// The rows' size in Arrow memory (Tarn's scan; the package's scan into pyarrow or
    /// Polars: what its result holds).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Data files the opened snapshot lists (open).
    #[serde(default)]
    pub files: Option<u64>,
    /// Each query's time and answer (query).
    #[serde(default)]
    pub queries: Vec<QueryReport>,
}

/// One query of a `query` step.
#[derive(Debug, Clone, Deserialize)]
pub struct QueryReport {
    /// The query, as SQL.
    pub query: String,
    /// Milliseconds.
    pub ms: f64,
    /// Its answer.
    pub value: Option<f64>,
}

/// The engines compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// Tarn, where the strategy plays no part (loads, reads).
    Tarn,
    TarnCow,
    TarnMor,
    DeltaRs,
    /// DuckDB's `delta` extension (reads only).
    DuckDb,
    /// DuckDB's `read_parquet` over a table's data files, no log: the machine's speed
    /// for a scan (reads of tables without deletion vectors only).
    Parquet,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Tarn => "tarn",
            Engine::TarnCow => "tarn copy-on-write",
            Engine::TarnMor => "tarn merge-on-read",
            Engine::DeltaRs => "delta-rs",
            Engine::DuckDb => "duckdb",
            Engine::Parquet => "read_parquet",
        }
    }
}

/// Where the harness keeps its input and tables, and how it starts each engine's steps.
struct Harness {
    dir: PathBuf,
    /// An interpreter with `deltalake`, and delta-rs's step script.
    python: PathBuf,
    script: PathBuf,
    /// An interpreter with `duckdb` and its `delta` extension, and DuckDB's step script.
    duckdb: PathBuf,
    duckdb_script: PathBuf,
    tarn: PathBuf,
}

impl Harness {
    fn input(&self, name: &str) -> PathBuf {
        self.dir.join("input").join(name)
    }

    fn table(&self, name: &str) -> PathBuf {
        self.dir.join("tables").join(name)
    }

    /// Runs one step of `engine` in a fresh process.
    async fn run(&self, engine: Engine, args: &[&str]) -> Result<StepReport, BenchError> {
        let command = match engine {
            Engine::DeltaRs => {
                let mut c = tokio::process::Command::new(&self.python);
                c.arg(&self.script);
                c
            }
            Engine::DuckDb | Engine::Parquet => {
                let mut c = tokio::process::Command::new(&self.duckdb);
                c.arg(&self.duckdb_script);
                c
            }
            Engine::Tarn | Engine::TarnCow | Engine::TarnMor => {
                let mut c = tokio::process::Command::new(&self.tarn);
                c.arg("step");
                c
            }
        };
        run_step(engine.name(), command, args).await
    }

    /// A fresh copy of `from` at `to`.
    fn copy_table(&self, from: &str, to: &str) -> Result<PathBuf, BenchError> {
        let (from, to) = (self.table(from), self.table(to));
        let _ = std::fs::remove_dir_all(&to);
        copy_dir(&from, &to)?;
        Ok(to)
    }
}

/// Runs one step (`command` with `args`) and reads the report it prints last; `name`
/// says whose step it was in errors.
async fn run_step(
    name: &str,
    mut command: tokio::process::Command,
    args: &[&str],
) -> Result<StepReport, BenchError> {
    let output = command.args(args).output().await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{name} step {args:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| format!("{name} step {args:?} printed {line:?}: {e}").into())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// One row of the comparison: the same work on Tarn (one strategy) and on delta-rs, and
/// for reads on DuckDB and its `read_parquet` too.
struct Row {
    work: String,
    tarn: Engine,
    tarn_ms: Vec<f64>,
    tarn_peak: Vec<f64>,
    peer_ms: Vec<f64>,
    peer_peak: Vec<f64>,
    duck_ms: Vec<f64>,
    duck_peak: Vec<f64>,
    parquet_ms: Vec<f64>,
    note: String,
}

impl Row {
    fn new(work: impl Into<String>, tarn: Engine) -> Row {
        Row {
            work: work.into(),
            tarn,
            tarn_ms: Vec::new(),
            tarn_peak: Vec::new(),
            peer_ms: Vec::new(),
            peer_peak: Vec::new(),
            duck_ms: Vec::new(),
            duck_peak: Vec::new(),
            parquet_ms: Vec::new(),
            note: String::new(),
        }
    }

    fn add(&mut self, engine: Engine, ms: f64, peak: Option<f64>) {
        let (times, peaks) = match engine {
            Engine::DeltaRs => (&mut self.peer_ms, Some(&mut self.peer_peak)),
            Engine::DuckDb => (&mut self.duck_ms, Some(&mut self.duck_peak)),
            Engine::Parquet => (&mut self.parquet_ms, None),
            Engine::Tarn | Engine::TarnCow | Engine::TarnMor => {
                (&mut self.tarn_ms, Some(&mut self.tarn_peak))
            }
        };
        times.push(ms);
        if let Some(peaks) = peaks {
            peaks.extend(peak);
        }
    }

    fn ratio(&self) -> f64 {
        median(&self.peer_ms) / median(&self.tarn_ms).max(1e-6)
    }

    fn record(&self) -> Record {
        let samples: Vec<Sample> = self
            .tarn_ms
            .iter()
            .map(|ms| Sample {
                elapsed: Duration::from_secs_f64(ms / 1e3),
                counts: Default::default(),
            })
            .collect();
        let record = Record::new(
            "compare",
            format!("{} ({})", self.work, self.tarn.name()),
            Summary::of(&samples),
        )
        .field("work", self.work.as_str())
        .field("tarn", self.tarn.name())
        .field("tarn_p50_ms", median(&self.tarn_ms))
        .field("deltars_p50_ms", median(&self.peer_ms))
        .field("ratio", self.ratio())
        .field("tarn_peak_mib", median(&self.tarn_peak))
        .field("deltars_peak_mib", median(&self.peer_peak));
        let record = match self.duck_ms.is_empty() {
            true => record,
            false => record
                .field("duckdb_p50_ms", median(&self.duck_ms))
                .field("duckdb_peak_mib", median(&self.duck_peak)),
        };
        let record = match self.parquet_ms.is_empty() {
            true => record,
            false => record.field("read_parquet_p50_ms", median(&self.parquet_ms)),
        };
        record.note(format!(
            "delta-rs {:.0} ms, ratio {:.2}, peak {:.0} / {:.0} MiB{}",
            median(&self.peer_ms),
            self.ratio(),
            median(&self.tarn_peak),
            median(&self.peer_peak),
            self.note
        ))
    }
}

fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The order of the engines in run `run`: alternating who goes first.
fn order<T: Copy>(run: usize, engines: &[T]) -> Vec<T> {
    let mut out = engines.to_vec();
    if run % 2 == 1 {
        out.reverse();
    }
    out
}

/// The error of asking a reading engine to write.
fn only_reads(engine: Engine) -> BenchError {
    format!("{} is compared on reads only", engine.name()).into()
}

fn same(what: &str, a: Option<u64>, b: Option<u64>) -> Result<(), BenchError> {
    if a != b {
        return Err(format!("{what}: Tarn reported {a:?}, delta-rs {b:?}").into());
    }
    Ok(())
}

/// `compare`: load, queries, the LHBench merge under both of Tarn's strategies, queries
/// after a 1% merge, and the CDC mix (a 1% batch of 90% updates and 10% inserts, then a
/// 10% append), on Tarn and on delta-rs; the queries on DuckDB's `delta` extension and
/// `read_parquet` too, every engine reading each table. `python` is an interpreter with
/// `deltalake`; DuckDB's is the test support's.
///
/// Fails when the root is not a local directory, a step fails, or the engines disagree
/// on what they did.
pub async fn compare(
    bench: &Bench,
    python: &Path,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    if bench.root.contains("://") {
        return Err(format!(
            "compare runs on a local directory (delta-rs gets the same paths); got {}",
            bench.root
        )
        .into());
    }
    let harness = Harness {
        dir: PathBuf::from(&bench.root).join("compare"),
        python: python.to_path_buf(),
        script: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/deltars_step.py"),
        duckdb: tarn_test_support::duckdb::python().to_path_buf(),
        duckdb_script: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/duckdb_step.py"),
        tarn: std::env::current_exe()?,
    };
    let rows = bench.scaled(1_000_000, 10_000);
    let inputs = generate(&harness, bench, rows)?;
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let mut table_rows: Vec<Row> = Vec::new();

    // Load: each run writes a new table; the last run's tables are the merge bases.
    let mut load = Row::new(format!("load {rows} rows"), Engine::Tarn);
    let bar = progress(bench.runs as u64, "compare load");
    for run in 0..bench.runs {
        for engine in order(run, &[Engine::Tarn, Engine::DeltaRs]) {
            let (name, op) = match engine {
                Engine::DeltaRs => ("deltars-base", "load"),
                _ => ("tarn-base", "load"),
            };
            let table = harness.table(name);
            let _ = std::fs::remove_dir_all(&table);
            let report = harness
                .run(engine, &[op, &path(&inputs.base), &path(&table)])
                .await?;
            same("rows loaded", report.rows, Some(rows))?;
            load.add(engine, report.ms, report.peak_rss_mib);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    table_rows.push(load);

    let base = [
        ("tarn-base", ", Tarn's table"),
        ("deltars-base", ", delta-rs's table"),
    ];
    table_rows.extend(reads::queries(&harness, bench, &base).await?);

    // The LHBench merge at every fraction.
    let bar = progress((MERGE_FRACTIONS.len() * bench.runs) as u64, "compare merge");
    for (fraction, source) in MERGE_FRACTIONS.iter().zip(&inputs.sources) {
        let mut cow = Row::new(format!("merge {}%", pct(*fraction)), Engine::TarnCow);
        let mut mor = Row::new(format!("merge {}%", pct(*fraction)), Engine::TarnMor);
        for run in 0..bench.runs {
            let mut counts = Vec::new();
            for engine in order(run, &[Engine::TarnCow, Engine::TarnMor, Engine::DeltaRs]) {
                let (base, copy, args): (&str, String, Vec<&str>) = match engine {
                    Engine::Tarn | Engine::TarnCow => (
                        "tarn-base",
                        format!("tarn-cow-{fraction}"),
                        vec!["merge", "cow"],
                    ),
                    Engine::TarnMor => (
                        "tarn-base",
                        format!("tarn-mor-{fraction}"),
                        vec!["merge", "mor"],
                    ),
                    Engine::DeltaRs => {
                        ("deltars-base", format!("deltars-{fraction}"), vec!["merge"])
                    }
                    Engine::DuckDb | Engine::Parquet => return Err(only_reads(engine)),
                };
                let table = path(&harness.copy_table(base, &copy)?);
                let source = path(source);
                let mut args = args;
                args.extend([table.as_str(), source.as_str()]);
                let report = harness.run(engine, &args).await?;
                counts.push((report.updated, report.inserted));
                match engine {
                    Engine::TarnMor => mor.add(engine, report.ms, report.peak_rss_mib),
                    Engine::Tarn | Engine::TarnCow => {
                        cow.add(engine, report.ms, report.peak_rss_mib)
                    }
                    Engine::DuckDb | Engine::Parquet => return Err(only_reads(engine)),
                    Engine::DeltaRs => {
                        cow.add(engine, report.ms, report.peak_rss_mib);
                        mor.add(engine, report.ms, report.peak_rss_mib);
                    }
                }
            }
            for pair in counts.windows(2) {
                same("rows updated", pair[0].0, pair[1].0)?;
                same("rows inserted", pair[0].1, pair[1].1)?;
            }
            bar.inc(1);
        }
        table_rows.push(cow);
        table_rows.push(mor);
    }
    bar.finish_and_clear();

    // Reads after the largest merge, every engine on each engine's merged table.
    let last = MERGE_FRACTIONS[MERGE_FRACTIONS.len() - 1];
    let (cow, mor, peer) = (
        format!("tarn-cow-{last}"),
        format!("tarn-mor-{last}"),
        format!("deltars-{last}"),
    );
    let (cow_label, mor_label, peer_label) = (
        format!(" after Tarn's {}% copy-on-write merge", pct(last)),
        format!(" after Tarn's {}% merge-on-read merge", pct(last)),
        format!(" after delta-rs's {}% merge", pct(last)),
    );
    let merged = [
        (cow.as_str(), cow_label.as_str()),
        (mor.as_str(), mor_label.as_str()),
        (peer.as_str(), peer_label.as_str()),
    ];
    table_rows.extend(reads::queries(&harness, bench, &merged).await?);

    table_rows.extend(cdc(&harness, bench, &inputs).await?);
    table_rows.push(cold_open(&harness, bench).await?);

    for row in &table_rows {
        reporter.push(row.record())?;
    }
    println!("\n{}", markdown(&table_rows));
    Ok(())
}

/// A cold open of the largest small-file table of the `files` workload (100K files from
/// scale 10), each engine in a fresh process opening the same table, checkpoint and all.
async fn cold_open(harness: &Harness, bench: &Bench) -> Result<Row, BenchError> {
    let count = crate::workloads::file_counts(bench)
        .last()
        .copied()
        .unwrap_or(1_000);
    let name = format!("files/{count}");
    crate::workloads::small_files_table(bench, &name, count).await?;
    let table = Path::new(&bench.root).join(&name);
    let table = table.to_string_lossy();
    let mut row = Row::new(format!("cold open, {count} files"), Engine::Tarn);
    for run in 0..bench.runs {
        for engine in order(run, &[Engine::Tarn, Engine::DeltaRs]) {
            let report = harness.run(engine, &["open", &table]).await?;
            same("files listed", report.files, Some(count))?;
            row.add(engine, report.ms, report.peak_rss_mib);
        }
    }
    Ok(row)
}

fn pct(fraction: f64) -> String {
    format!("{:.6}", fraction * 100.0)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

/// The CDC mix: a 1% batch (90% updates spread over the table, 10% inserts) merged under
/// each strategy, then a bulk append of 10% of the table; write amplification is bytes
/// added to the table over the batch's size as Parquet.
async fn cdc(harness: &Harness, bench: &Bench, inputs: &Inputs) -> Result<Vec<Row>, BenchError> {
    let mut merge_rows = vec![
        Row::new("CDC 1% merge (90% updates)", Engine::TarnCow),
        Row::new("CDC 1% merge (90% updates)", Engine::TarnMor),
    ];
    let mut append_rows = vec![
        Row::new("CDC 10% append after it", Engine::TarnCow),
        Row::new("CDC 10% append after it", Engine::TarnMor),
    ];
    let mut amplification: [Vec<f64>; 3] = Default::default();
    let bar = progress(bench.runs as u64, "compare cdc");
    for run in 0..bench.runs {
        for engine in order(run, &[Engine::TarnCow, Engine::TarnMor, Engine::DeltaRs]) {
            let (base, copy, merge): (&str, &str, Vec<&str>) = match engine {
                Engine::Tarn | Engine::TarnCow => {
                    ("tarn-base", "tarn-cdc-cow", vec!["merge", "cow"])
                }
                Engine::TarnMor => ("tarn-base", "tarn-cdc-mor", vec!["merge", "mor"]),
                Engine::DeltaRs => ("deltars-base", "deltars-cdc", vec!["merge"]),
                Engine::DuckDb | Engine::Parquet => return Err(only_reads(engine)),
            };
            let table = harness.copy_table(base, copy)?;
            let before = dir_bytes(&table);
            let (table_s, cdc_s, append_s) = (
                table.to_string_lossy().into_owned(),
                inputs.cdc.to_string_lossy().into_owned(),
                inputs.append.to_string_lossy().into_owned(),
            );
            let mut args = merge;
            args.extend([table_s.as_str(), cdc_s.as_str()]);
            let merged = harness.run(engine, &args).await?;
            same("CDC rows updated", merged.updated, Some(inputs.cdc_updates))?;
            let written = dir_bytes(&table).saturating_sub(before);
            let index = match engine {
                Engine::Tarn | Engine::TarnCow => 0,
                Engine::TarnMor => 1,
                Engine::DeltaRs => 2,
                Engine::DuckDb | Engine::Parquet => return Err(only_reads(engine)),
            };
            amplification[index].push(written as f64 / inputs.cdc_bytes.max(1) as f64);
            let appended = harness
                .run(engine, &["append", &table_s, &append_s])
                .await?;
            let targets: Vec<usize> = if index == 2 { vec![0, 1] } else { vec![index] };
            for i in targets {
                merge_rows[i].add(engine, merged.ms, merged.peak_rss_mib);
                append_rows[i].add(engine, appended.ms, appended.peak_rss_mib);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let peer = median(&amplification[2]);
    for (i, row) in merge_rows.iter_mut().enumerate() {
        row.note = format!(
            ", write amplification {:.1}x (delta-rs {peer:.1}x)",
            median(&amplification[i])
        );
    }
    Ok(merge_rows.into_iter().chain(append_rows).collect())
}

/// The generated input, as Parquet files.
struct Inputs {
    base: PathBuf,
    sources: Vec<PathBuf>,
    cdc: PathBuf,
    cdc_updates: u64,
    cdc_bytes: u64,
    append: PathBuf,
}

/// Writes the input once per row count and seed (kept for later runs).
fn generate(harness: &Harness, bench: &Bench, rows: u64) -> Result<Inputs, BenchError> {
    let dir = harness.input("");
    let marker = dir.join(".generated");
    let wanted = format!("rows {rows} seed {}", bench.seed);
    let fresh = std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted);
    if !fresh {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
    }
    let base = harness.input("base.parquet");
    let sources: Vec<PathBuf> = MERGE_FRACTIONS
        .iter()
        .map(|f| harness.input(&format!("source-{f}.parquet")))
        .collect();
    let cdc = harness.input("cdc.parquet");
    let append = harness.input("append.parquet");
    let (cdc_batch, cdc_updates) = r#gen::upsert_source(rows, 0.01, 0.9, bench.seed);
    if !fresh {
        let batches: Vec<RecordBatch> = r#gen::merge_rows(rows).collect();
        write_parquet(&base, &batches)?;
        for (fraction, path) in MERGE_FRACTIONS.iter().zip(&sources) {
            let (source, _) = r#gen::merge_source(rows, *fraction, bench.seed);
            write_parquet(path, &[source])?;
        }
        write_parquet(&cdc, std::slice::from_ref(&cdc_batch))?;
        let start = rows + cdc_batch.num_rows() as u64;
        let keys: Vec<i64> = (start as i64..(start + rows / 10) as i64).collect();
        write_parquet(&append, &[r#gen::merge_batch(&keys, 0.0)])?;
        std::fs::write(&marker, &wanted)?;
    }
    Ok(Inputs {
        base,
        sources,
        cdc_bytes: std::fs::metadata(&cdc)?.len(),
        cdc,
        cdc_updates: cdc_updates as u64,
        append,
    })
}

/// The comparison as a Markdown table.
fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| work | Tarn | Tarn ms | delta-rs ms | ratio | DuckDB ms | read_parquet ms | \
         Tarn peak MiB | delta-rs peak MiB | DuckDB peak MiB |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let cell = |values: &[f64], digits: usize| match values.is_empty() {
        true => "-".to_string(),
        false => format!("{:.*}", digits, median(values)),
    };
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {} | {} | {:.0} | {:.0} | {} |\n",
            r.work,
            match r.tarn {
                Engine::Tarn => "",
                e => e.name().trim_start_matches("tarn "),
            },
            median(&r.tarn_ms),
            median(&r.peer_ms),
            r.ratio(),
            cell(&r.duck_ms, 1),
            cell(&r.parquet_ms, 1),
            median(&r.tarn_peak),
            median(&r.peer_peak),
            cell(&r.duck_peak, 0),
        ));
    }
    out
}
