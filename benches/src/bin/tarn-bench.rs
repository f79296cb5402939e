//! `tarn-bench`: replays the lakehouse benchmark workloads (LHBench, the Brooklyn Data
//! mutation benchmark) on a local directory, memory or S3, with S3's latencies replayed
//! if asked, and prints what they measured as a table, JSON lines and SVG charts.
//!
//! With no subcommand it runs every workload at the default scale on
//! `target/tarn-bench`: the README's first command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tarn::Snapshot;
use tarn_bench::plot::{Chart, Series};
use tarn_bench::report::{Record, Reporter};
use tarn_bench::{Bench, BenchError, Sample, Summary, golden_root, sample, wrap};
use tarn_store::{LatencyProfile, StoreOptions};

#[derive(Parser)]
#[command(version, about = "Tarn's benchmark runner")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Where the tables go: a directory, memory://name, s3://bucket/prefix (credentials,
    /// region and endpoint from the AWS_* environment; `--x-s3` buckets are S3 Express),
    /// gs://bucket/prefix (GOOGLE_*) or az://container/prefix (AZURE_STORAGE_*).
    #[arg(long, global = true, default_value = "target/tarn-bench")]
    url: String,
    /// Latency profile replayed on measured operations: none, s3-standard, s3-express,
    /// gcs-standard or azure-blob.
    #[arg(long, global = true, default_value = "none")]
    profile: String,
    /// Multiplies row and file counts: 1 is the default replay (1M-row tables, 1K and 10K
    /// files); 10 gives LHBench's 10M rows and 100K files; 0.1 is CI's smoke run.
    #[arg(long, global = true, default_value_t = 1.0)]
    scale: f64,
    /// Runs per measurement (medians and tails are over these).
    #[arg(long, global = true, default_value_t = 3)]
    runs: usize,
    /// Seed of the data generators and the latency replay.
    #[arg(long, global = true, default_value_t = 42)]
    seed: u64,
    /// Append every result as a JSON line to this file.
    #[arg(long, global = true, default_value = "target/tarn-bench/results.jsonl")]
    json: PathBuf,
    /// Write charts (SVG) into this directory.
    #[arg(long, global = true)]
    plot: Option<PathBuf>,
    /// A local cache directory (`CacheStore`): `reads` also measures warm reads through it,
    /// without it, and with no latency at all.
    #[arg(long, global = true)]
    cache: Option<PathBuf>,
}

#[derive(Subcommand, Clone)]
enum Command {
    /// Every workload below, in order (the default).
    All,
    /// Rows/s and MB/s writing store_sales and the LHBench table.
    Load,
    /// The LHBench merge microbenchmark, copy-on-write against merge-on-read.
    Merge,
    /// The production write mix: a 1% CDC batch (90% updates, 10% inserts) merged under
    /// each strategy, then a 10% append; latency, bytes written, write amplification.
    Cdc,
    /// The Brooklyn Data mutation sequence: upsert, three deletes, a GDPR delete.
    Mutations,
    /// Open, refresh and selective queries on tables of 1K, 10K (and 100K) files.
    Files,
    /// Cold against warm reads at several table sizes.
    Reads,
    /// BTree, Bitmap and full-text indices: builds, lookups with and without them, the
    /// GDPR delete, appends with inline maintenance.
    Index,
    /// The LHBench table loaded from a generator stream (100M rows at scale 1), with the
    /// process's peak memory: not part of `all`.
    StreamLoad,
    /// A 20M-row source stream merged into the 100M-row LHBench table (at scale 1) with
    /// a 256 MiB memory limit, under both strategies, with the process's peak memory:
    /// not part of `all`.
    StreamMerge,
    /// The LHBench merge queries on a 10M-row table (at scale 1) through Tarn's own scan
    /// and through SQL (`tarn-datafusion`), warm, alternating: what SQL costs over the
    /// API. Needs the `sql` feature (on by default), with which `all` runs it last.
    SqlOverhead,
    /// Tarn and delta-rs side by side on the same generated input (local directory
    /// only): load, reads, the LHBench merge under both strategies, reads after it, and
    /// the CDC mix; medians, the ratio delta-rs / Tarn and peak memory per row. Installs
    /// `deltalake` in a virtual environment on first use.
    Compare,
    /// The `tarn` Python package side by side with `deltalake` on the same data (local
    /// directory only, 10M rows at scale 1): load, scans into pyarrow, Polars and DuckDB,
    /// the 1% upsert and a 1% delete under both strategies; and the same work through
    /// the Rust API, which is what the Python layer costs. Builds the package (release)
    /// into a virtual environment with the peers on first use; not part of `all`.
    Python {
        /// An interpreter that has `tarn`, `deltalake`, pyarrow, Polars and DuckDB
        /// installed, instead of the environment the bench makes (the tests pass the
        /// one with their development build).
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// TPC-DS through SQL: the data generated at `--scale-factor` and loaded into Tarn
    /// tables (local directory only, kept between runs), DuckDB's 99 query texts run on
    /// Tarn (DataFusion), delta-rs (`QueryBuilder`) and DuckDB (delta extension) side by
    /// side, each Tarn answer checked against DuckDB's; then LHBench's refresh and the
    /// queries again. Installs the Python peers on first use; not part of `all`. Needs
    /// the `sql` feature (on by default).
    Tpcds {
        /// TPC-DS scale factor (1 is about 1 GB of raw data).
        #[arg(long, default_value_t = 1.0)]
        scale_factor: f64,
        /// Only these query numbers (comma-separated; all 99 by default).
        #[arg(long, value_delimiter = ',')]
        queries: Vec<u32>,
        /// Skip LHBench's refresh (merges into store_sales and store_returns under
        /// copy-on-write and merge-on-read) and the queries run again after it.
        #[arg(long)]
        no_refresh: bool,
    },
    /// A catalog taking many mutations, one commit each, with log cleanup on and off:
    /// the objects under the manifest's log and a cold open at every tenth of the way.
    /// Not part of `all`.
    CatalogLog {
        /// Mutations per catalog (default 100,000 times `--scale`).
        #[arg(long)]
        mutations: Option<usize>,
        /// Namespaces the first mutations create; the rest change their properties in
        /// turn, so the catalog keeps this size.
        #[arg(long, default_value_t = 1000)]
        namespaces: usize,
        /// The manifest's `delta.logRetentionDuration` (and tombstone retention) for the
        /// run, in seconds.
        #[arg(long, default_value_t = 60)]
        retention_secs: u64,
        /// Which catalogs: `both`, `on` (log cleanup after checkpoints) or `off`.
        #[arg(long, default_value = "both", value_parser = ["both", "on", "off"])]
        cleanup: String,
    },
    /// One measured step of `compare` on Tarn, in this process (what `compare` runs).
    #[command(hide = true)]
    Step {
        /// `load INPUT TABLE`, `append TABLE INPUT`, `merge cow|mor TABLE SOURCE`,
        /// `delete cow|mor TABLE PREDICATE`, `scan TABLE`, `query TABLE` or `open TABLE`.
        args: Vec<String>,
    },
    /// Cold open and full scan of the Spark-written golden tables.
    Golden {
        /// Only these tables (default: every table with expected rows).
        tables: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> Result<(), BenchError> {
    let cli = Cli::parse();
    if let Some(Command::Step { args }) = &cli.command {
        // Only the report on standard output: `compare` reads its last line.
        println!("{}", tarn_bench::compare::step(args).await?);
        return Ok(());
    }
    let profile = LatencyProfile::by_name(&cli.profile)?;
    let bench = Bench {
        root: cli.url.clone(),
        options: StoreOptions::default(),
        profile: profile.clone(),
        scale: cli.scale,
        runs: cli.runs.max(1),
        seed: cli.seed,
        cache: cli.cache.clone(),
    };
    let mut reporter = Reporter::new(&profile.name, Some(&cli.json), false)?;
    println!(
        "tarn-bench on {} (profile {}, scale {}, {} runs per measurement)\n",
        tarn_store::redact_url(&cli.url),
        profile.name,
        cli.scale,
        bench.runs
    );
    let names: Vec<&str> = match cli.command.clone().unwrap_or(Command::All) {
        Command::All => tarn_bench::registry::ALL.to_vec(),
        Command::Load => vec!["load"],
        Command::Merge => vec!["merge"],
        Command::Cdc => vec!["cdc"],
        Command::Mutations => vec!["mutations"],
        Command::Files => vec!["files"],
        Command::Reads => vec!["reads"],
        Command::Index => vec!["index"],
        Command::StreamLoad => vec!["stream-load"],
        Command::StreamMerge => vec!["stream-merge"],
        Command::SqlOverhead => vec!["sql-overhead"],
        Command::Compare => {
            let python = tarn_test_support::python::python();
            tarn_bench::compare::compare(&bench, python, &mut reporter).await?;
            vec![]
        }
        Command::Python { python } => {
            let python = match python {
                Some(python) => python,
                None => tarn_test_support::python::bench_package()?,
            };
            tarn_bench::compare::python(&bench, &python, &mut reporter).await?;
            vec![]
        }
        Command::Tpcds {
            scale_factor,
            queries,
            no_refresh,
        } => {
            let refresh = !no_refresh;
            tpcds(
                &cli.url,
                scale_factor,
                bench.runs,
                queries,
                refresh,
                &mut reporter,
            )
            .await?;
            vec![]
        }
        Command::CatalogLog {
            mutations,
            namespaces,
            retention_secs,
            cleanup,
        } => {
            let mutations = mutations.unwrap_or(bench.scaled(100_000, 10) as usize);
            tarn_bench::catalog_log::catalog_log(
                &bench,
                mutations,
                namespaces,
                std::time::Duration::from_secs(retention_secs),
                match cleanup.as_str() {
                    "on" => &[true],
                    "off" => &[false],
                    _ => &[true, false],
                },
                &mut reporter,
            )
            .await?;
            vec![]
        }
        Command::Step { .. } => vec![],
        Command::Golden { tables } => {
            golden(&bench, &tables, &mut reporter).await?;
            vec![]
        }
    };
    for name in names {
        tarn_bench::registry::run(name, &bench, &mut reporter).await?;
    }
    if let Some(dir) = &cli.plot {
        plot(dir, reporter.records(), &profile.name)?;
    }
    println!("\nJSON lines appended to {}", cli.json.display());
    Ok(())
}

/// Cold open and full scan of the golden tables.
async fn golden(
    bench: &Bench,
    tables: &[String],
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    let root = golden_root();
    let mut names: Vec<String> = if tables.is_empty() {
        std::fs::read_dir(&root)?
            .flatten()
            .filter(|e| e.path().join("expected").is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    } else {
        tables.to_vec()
    };
    names.sort();
    for name in names {
        let url = root
            .join(&name)
            .join("delta")
            .to_string_lossy()
            .into_owned();
        let (mut opens, mut scans) = (Vec::<Sample>::new(), Vec::<Sample>::new());
        let mut rows = 0;
        for run in 0..bench.runs {
            let measured = wrap(tarn_store::open(&url)?, &bench.profile, run as u64);
            let (snapshot, open) = sample(
                &measured.counter,
                Snapshot::builder(measured.location.clone()).build(),
            )
            .await?;
            let (batches, scan) = sample(&measured.counter, snapshot.scan().collect()).await?;
            rows = batches.iter().map(|b| b.num_rows()).sum::<usize>();
            opens.push(open);
            scans.push(scan);
        }
        let (open, scan) = (Summary::of(&opens), Summary::of(&scans));
        reporter.push(
            Record::new("golden", format!("open {name}"), open)
                .field("table", name.as_str())
                .field("rows", rows),
        )?;
        reporter.push(
            Record::new("golden", format!("scan {name}"), scan)
                .throughput(rows as f64 / scan.p50.as_secs_f64(), "rows/s")
                .field("table", name.as_str())
                .field("rows", rows),
        )?;
    }
    Ok(())
}

/// Series of `y` against `x` from the records of `workload`, one per value of `by`.
fn series(
    records: &[Record],
    workload: &str,
    case_prefix: &str,
    by: &str,
    x: &str,
    y: impl Fn(&Record) -> Option<f64>,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in records
        .iter()
        .filter(|r| r.workload == workload && r.case.starts_with(case_prefix))
    {
        let (Some(group), Some(xv), Some(yv)) = (r.text(by), r.number(x), y(r)) else {
            continue;
        };
        match out.iter_mut().find(|s| s.name == group) {
            Some(s) => s.points.push((xv, yv)),
            None => out.push(Series {
                name: group.to_string(),
                points: vec![(xv, yv)],
            }),
        }
    }
    out
}

/// Writes the charts the records allow: LHBench Figure 3's merge latency and post-merge
/// query slowdown against source fraction, and open time against file count.
fn plot(dir: &std::path::Path, records: &[Record], profile: &str) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir)?;
    let ms = |r: &Record| Some(r.summary.p50.as_secs_f64() * 1e3);
    let charts = [
        (
            "merge-latency.svg",
            Chart {
                title: format!("Merge latency (LHBench merge, profile {profile})"),
                x_label: "source rows, % of the table".into(),
                y_label: "merge time, median ms".into(),
                log_x: true,
                log_y: true,
                series: series(
                    records,
                    "merge",
                    "copy-on-write",
                    "strategy",
                    "fraction_pct",
                    ms,
                )
                .into_iter()
                .chain(series(
                    records,
                    "merge",
                    "merge-on-read",
                    "strategy",
                    "fraction_pct",
                    ms,
                ))
                .collect(),
            },
        ),
        (
            "merge-slowdown.svg",
            Chart {
                title: format!("Read slowdown after the merge (profile {profile})"),
                x_label: "source rows, % of the table".into(),
                y_label: "query time after / before (mean of 5 queries)".into(),
                log_x: true,
                log_y: false,
                series: series(
                    records,
                    "merge",
                    "queries after",
                    "strategy",
                    "fraction_pct",
                    |r| r.number("mean_slowdown"),
                ),
            },
        ),
        (
            "open-time.svg",
            Chart {
                title: format!("Snapshot open and refresh against file count (profile {profile})"),
                x_label: "data files in the table".into(),
                y_label: "median ms".into(),
                log_x: true,
                log_y: true,
                series: series(records, "files", "", "case", "files", ms)
                    .into_iter()
                    .filter(|s| s.name == "cold open" || s.name == "warm refresh")
                    .collect(),
            },
        ),
    ];
    for (file, chart) in charts {
        if chart.series.iter().any(|s| !s.points.is_empty()) {
            let path = dir.join(file);
            std::fs::write(&path, chart.to_svg())?;
            println!("chart: {}", path.display());
        }
    }
    Ok(())
}

/// `tarn-bench tpcds`, in a build with the `sql` feature.
#[cfg(feature = "sql")]
async fn tpcds(
    url: &str,
    scale_factor: f64,
    runs: usize,
    queries: Vec<u32>,
    refresh: bool,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    let options = tarn_bench::tpcds::Tpcds {
        dir: PathBuf::from(url),
        scale_factor,
        runs,
        queries,
        refresh,
    };
    tarn_bench::tpcds::tpcds(&options, reporter).await
}

/// `tarn-bench tpcds` in a build without DataFusion: says how to get one.
#[cfg(not(feature = "sql"))]
async fn tpcds(
    _url: &str,
    _scale_factor: f64,
    _runs: usize,
    _queries: Vec<u32>,
    _refresh: bool,
    _reporter: &mut Reporter,
) -> Result<(), BenchError> {
    Err(tarn_bench::registry::WITHOUT_SQL.into())
}
