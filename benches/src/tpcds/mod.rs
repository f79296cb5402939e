//! `tarn-bench tpcds`: the TPC-DS queries through SQL on Tarn tables, side by side in one
//! run with delta-rs (`deltalake`'s `QueryBuilder`, DataFusion over delta-rs) and DuckDB
//! (its `delta` extension) over the same tables, each answer checked against DuckDB's.
//!
//! The data comes from `tpcdsgen-arrow` at the scale factor asked (`load`), written by
//! Tarn with LHBench's partitioning; the queries are DuckDB's `tpcds_queries()` text,
//! run as written, and one query of the bench's own (`selective`: one customer's sales,
//! which Tarn answers through an index). Tarn runs in this process (tables opened and registered once, before
//! the clock starts); each peer runs in a process of its own
//! (`benches/scripts/tpcds_peer.py`), registering its tables once too. A query an
//! engine cannot plan or run is reported with its error, not counted in the totals.
//! Then `refresh` replays LHBench's refresh and runs the queries again; `chart` draws
//! the cumulative times.

mod chart;
pub mod load;
mod refresh;
mod selective;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::Deserialize;
use tarn::Table;
use tarn_datafusion::TarnTableProvider;
use tarn_store::{CountingStore, RequestCounter, RequestCounts};

use crate::answers;
use crate::report::{Record, Reporter};
use crate::{BenchError, Sample, Summary, memory};

/// What a `tpcds` run does.
#[derive(Debug, Clone)]
pub struct Tpcds {
    /// The local directory the tables and answers go under.
    pub dir: PathBuf,
    /// TPC-DS scale factor (1 is about 1 GB of raw data).
    pub scale_factor: f64,
    /// Runs per query; medians are over them.
    pub runs: usize,
    /// Only these query numbers (all 99 when empty).
    pub queries: Vec<u32>,
    /// Whether to replay LHBench's refresh and run the queries again after it.
    pub refresh: bool,
}

/// One query: a TPC-DS one, or the bench's own selective query (numbered past 99, with
/// a label).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
struct Query {
    nr: u32,
    sql: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

impl Query {
    /// How tables name the query: `q7`, or `q100 (label)`.
    fn name(&self) -> String {
        match &self.label {
            Some(label) => format!("q{} ({label})", self.nr),
            None => format!("q{}", self.nr),
        }
    }
}

/// What one engine did with one query.
#[derive(Debug, Clone, Default, Deserialize)]
struct QueryRun {
    nr: u32,
    ms: Vec<f64>,
    rows: Option<u64>,
    error: Option<String>,
    /// The engine process's peak resident memory over this query's runs, in MiB (its
    /// peak is reset to the resident set before the query, so this is at least what
    /// earlier queries left resident).
    #[serde(default)]
    peak_mib: Option<f64>,
    /// Tarn's object-store requests per run (the peers do not say).
    #[serde(skip)]
    counts: Vec<RequestCounts>,
}

impl QueryRun {
    fn median(&self) -> Option<f64> {
        let mut ms = self.ms.clone();
        ms.sort_by(f64::total_cmp);
        ms.get(ms.len() / 2).copied()
    }

    fn summary(&self) -> Option<Summary> {
        let samples: Vec<Sample> = self
            .ms
            .iter()
            .enumerate()
            .map(|(i, ms)| Sample {
                elapsed: Duration::from_secs_f64(ms / 1e3),
                counts: self.counts.get(i).copied().unwrap_or_default(),
            })
            .collect();
        (!samples.is_empty()).then(|| Summary::of(&samples))
    }
}

/// One engine's runs and its process's peak memory while querying (the highest of its
/// queries' peaks).
struct EngineRuns {
    name: &'static str,
    runs: BTreeMap<u32, QueryRun>,
    peak_mib: f64,
}

/// Loads the data, runs the queries on the three engines, checks Tarn's answers against
/// DuckDB's and reports per query and in total.
///
/// Fails when loading, the query list or a peer's process fails (a query failing is a
/// result, not an error).
pub async fn tpcds(options: &Tpcds, reporter: &mut Reporter) -> Result<(), BenchError> {
    let root = options
        .dir
        .join(format!("tpcds-sf{}", options.scale_factor));
    let tables = root.join("tables");
    let out = root.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    println!(
        "TPC-DS at scale factor {} under {}",
        options.scale_factor,
        root.display()
    );
    let duckdb = tarn_test_support::duckdb::python();
    let script = script();
    peer(duckdb, &script, &["queries", path(&out)?]).await?;
    let queries_file = out.join("queries.json");
    let mut queries: Vec<Query> = serde_json::from_slice(&std::fs::read(&queries_file)?)?;
    queries.push(selective::query());
    if !options.queries.is_empty() {
        queries.retain(|q| options.queries.contains(&q.nr));
    }
    std::fs::write(&queries_file, serde_json::to_vec(&queries)?)?;
    let runs = options.runs.max(1).to_string();

    // The tables the queries read, and those the refresh merges into.
    let wanted: Vec<&str> = load::TABLES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            queries.iter().any(|q| load::reads(&q.sql, name))
                || (options.refresh && refresh::merges_into(name))
        })
        .collect();
    let loaded = load::load(&tables, options.scale_factor, &wanted).await?;
    for (table, rows, seconds) in &loaded.written {
        reporter.push(
            Record::new(
                "tpcds",
                format!("load {table}"),
                Summary::of(&[Sample {
                    elapsed: Duration::from_secs_f64(*seconds),
                    counts: RequestCounts::default(),
                }]),
            )
            .throughput(*rows as f64 / seconds.max(1e-9), "rows/s")
            .field("rows", *rows),
        )?;
    }

    // Tarn's copy of the tables, which carries its index.
    let tarn_tables = root.join("tarn");
    let _ = std::fs::remove_dir_all(&tarn_tables);
    load::link(&tables, &tarn_tables)?;
    if queries.iter().any(|q| q.nr == selective::NR) {
        let seconds = selective::create_index(&tarn_tables).await?;
        println!("  index on store_sales.ss_customer_sk in {seconds:.1} s");
        reporter.push(Record::new(
            "tpcds",
            "index store_sales.ss_customer_sk",
            Summary::of(&[Sample {
                elapsed: Duration::from_secs_f64(seconds),
                counts: RequestCounts::default(),
            }]),
        ))?;
    }

    println!(
        "Tarn (DataFusion over Tarn tables): {} queries",
        queries.len()
    );
    let (tarn, answers) = run_tarn("Tarn", &tarn_tables, &queries, options.runs.max(1)).await?;
    println!("DuckDB (delta extension)");
    let args = [path(&tables)?, path(&out)?, &runs];
    let duck = peer_runs("DuckDB", duckdb, &script, "duckdb", &args, &queries).await?;
    println!("delta-rs (QueryBuilder)");
    let python = tarn_test_support::python::python();
    let deltars = peer_runs("delta-rs", python, &script, "deltars", &args, &queries).await?;

    let checks = check_answers(&queries, &answers, &out.join("duckdb"));
    report(
        &queries,
        &[(&tarn, Some(&checks)), (&deltars, None), (&duck, None)],
        "",
        reporter,
    )?;
    let table = markdown(&queries, [&tarn, &deltars, &duck], &checks);
    println!("\n{table}");
    std::fs::write(out.join("tpcds.md"), &table)?;
    println!("written to {}", out.join("tpcds.md").display());
    chart::cumulative(
        &out.join("tpcds.svg"),
        &format!(
            "TPC-DS at scale factor {}: cumulative query time",
            options.scale_factor
        ),
        &queries,
        &[("Tarn", &tarn), ("delta-rs", &deltars), ("DuckDB", &duck)],
    )?;
    if options.refresh {
        let before = refresh::Before {
            tarn: &tarn,
            deltars: &deltars,
        };
        refresh::refresh(
            &root,
            &tables,
            &tarn_tables,
            &queries,
            options.runs.max(1),
            before,
            reporter,
        )
        .await?;
    }
    Ok(())
}

/// The peers' script.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/tpcds_peer.py")
}

fn path(p: &Path) -> Result<&str, BenchError> {
    p.to_str().ok_or_else(|| "a path that is not UTF-8".into())
}

/// Runs the TPC-DS script in `python` and returns its standard output.
async fn peer(python: &Path, script: &Path, args: &[&str]) -> Result<String, BenchError> {
    let (stdout, failure) = peer_output(python, script, args).await?;
    match failure {
        None => Ok(stdout),
        Some(failure) => Err(format!("tpcds_peer.py {args:?} failed ({failure})").into()),
    }
}

/// The script's standard output, and how it failed if it did.
async fn peer_output(
    python: &Path,
    script: &Path,
    args: &[&str],
) -> Result<(String, Option<String>), BenchError> {
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let failure = (!output.status.success()).then(|| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(300)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{}: {}", output.status, tail.trim())
    });
    Ok((stdout, failure))
}

/// Runs a peer `engine` over every query; when its process dies (killed for memory, say)
/// the query it was on is reported as failed with how it died, and a fresh process goes
/// on after it.
async fn peer_runs(
    name: &'static str,
    python: &Path,
    script: &Path,
    mode: &str,
    args: &[&str; 3],
    queries: &[Query],
) -> Result<EngineRuns, BenchError> {
    let mut all = EngineRuns {
        name,
        runs: BTreeMap::new(),
        peak_mib: 0.0,
    };
    let mut after = 0u32;
    loop {
        let after_text = after.to_string();
        let mut call = vec![mode];
        call.extend_from_slice(args);
        call.push(&after_text);
        let (stdout, failure) = peer_output(python, script, &call).await?;
        let part = engine_runs(name, &stdout)?;
        all.peak_mib = all.peak_mib.max(part.peak_mib);
        all.runs.extend(part.runs);
        let Some(failure) = failure else {
            return Ok(all);
        };
        let done = all.runs.keys().max().copied().unwrap_or(0).max(after);
        let Some(killer) = queries.iter().map(|q| q.nr).find(|nr| *nr > done) else {
            return Ok(all);
        };
        println!("  q{killer}: {name} died ({failure}); going on after it");
        all.runs.insert(
            killer,
            QueryRun {
                nr: killer,
                error: Some(format!("the process died: {failure}")),
                ..QueryRun::default()
            },
        );
        after = killer;
    }
}

/// A peer's JSON lines as its runs.
fn engine_runs(name: &'static str, stdout: &str) -> Result<EngineRuns, BenchError> {
    let mut runs = BTreeMap::new();
    let mut peak_mib = 0.0;
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let value: serde_json::Value = serde_json::from_str(line)?;
        if let Some(peak) = value["peak_rss_mib"].as_f64() {
            peak_mib = f64::max(peak_mib, peak);
            continue;
        }
        let run: QueryRun = serde_json::from_value(value)?;
        peak_mib = f64::max(peak_mib, run.peak_mib.unwrap_or(0.0));
        runs.insert(run.nr, run);
    }
    Ok(EngineRuns {
        name,
        runs,
        peak_mib,
    })
}

/// A session with every TPC-DS table under `tables` registered as a Tarn table, all
/// reading through one request counter.
async fn context(tables: &Path) -> Result<(SessionContext, RequestCounter), BenchError> {
    let ctx = SessionContext::new_with_config(SessionConfig::new());
    tarn_datafusion::register(&ctx);
    let mut counting: Option<Arc<CountingStore>> = None;
    for name in load::present(tables) {
        let location = tarn_store::open(path(&tables.join(name))?)?;
        // One counting store for all tables: a local store is rooted at `/`.
        let store = counting
            .get_or_insert_with(|| Arc::new(CountingStore::new(Arc::clone(location.store()))));
        let table = Table::open_at(location.with_store(Arc::clone(store) as _)).await?;
        ctx.register_table(name, Arc::new(TarnTableProvider::new(table)))?;
    }
    Ok((ctx, counting.ok_or("no TPC-DS tables")?.counter()))
}

/// Runs every query on the Tarn tables under `tables` through DataFusion, `runs` times,
/// counting the object-store requests; returns the runs (as engine `name`) and the first
/// run's answers.
async fn run_tarn(
    name: &'static str,
    tables: &Path,
    queries: &[Query],
    runs: usize,
) -> Result<(EngineRuns, BTreeMap<u32, Vec<RecordBatch>>), BenchError> {
    let (ctx, counter) = context(tables).await?;
    let mut results = BTreeMap::new();
    let mut answers = BTreeMap::new();
    let mut peak_mib = 0.0f64;
    for query in queries {
        let mut run = QueryRun {
            nr: query.nr,
            ..QueryRun::default()
        };
        memory::reset_peak();
        for i in 0..runs {
            counter.reset();
            let started = Instant::now();
            match execute(&ctx, &query.sql).await {
                Ok(batches) => {
                    run.ms.push(started.elapsed().as_secs_f64() * 1e3);
                    run.counts.push(counter.take());
                    run.rows = Some(batches.iter().map(|b| b.num_rows() as u64).sum());
                    if i == 0 {
                        answers.insert(query.nr, batches);
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    run.error = Some(text.chars().take(300).collect());
                    run.ms.clear();
                    break;
                }
            }
        }
        let peak = memory::peak_rss() as f64 / (1 << 20) as f64;
        run.peak_mib = Some(peak);
        peak_mib = peak_mib.max(peak);
        match (&run.error, run.median()) {
            (Some(e), _) => println!("  q{}: error: {e}", query.nr),
            (None, Some(ms)) => println!("  q{}: {ms:.1} ms, {:?} rows", query.nr, run.rows),
            _ => {}
        }
        results.insert(query.nr, run);
    }
    Ok((
        EngineRuns {
            name,
            runs: results,
            peak_mib,
        },
        answers,
    ))
}

/// Runs `sql` (statements separated by `;`) and returns the last one's rows.
async fn execute(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
    let mut last = Vec::new();
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        last = ctx.sql(statement).await?.collect().await?;
    }
    Ok(last)
}

/// How Tarn's answer to a query compares with DuckDB's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Same,
    Differs,
    /// One of the engines has no answer.
    Missing,
}

fn check_answers(
    queries: &[Query],
    answers: &BTreeMap<u32, Vec<RecordBatch>>,
    duckdb: &Path,
) -> BTreeMap<u32, Check> {
    queries
        .iter()
        .map(|q| {
            let theirs = read_parquet(&duckdb.join(format!("q{}.parquet", q.nr)));
            let check = match (answers.get(&q.nr), theirs) {
                (Some(ours), Ok(theirs)) => {
                    match answers::canonical(ours) == answers::canonical(&theirs) {
                        true => Check::Same,
                        false => Check::Differs,
                    }
                }
                _ => Check::Missing,
            };
            (q.nr, check)
        })
        .collect()
}

fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, BenchError> {
    let file = std::fs::File::open(path)?;
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?.build()?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// One JSON record per engine and query; `phase` names when the queries ran (empty for
/// the first run, " after refresh" after it), and an engine given checks records whether
/// each answer was the same as DuckDB's.
fn report(
    queries: &[Query],
    engines: &[(&EngineRuns, Option<&BTreeMap<u32, Check>>)],
    phase: &str,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    for query in queries {
        for (engine, checks) in engines {
            let Some(run) = engine.runs.get(&query.nr) else {
                continue;
            };
            let Some(summary) = run.summary() else {
                continue;
            };
            let mut record = Record::new(
                "tpcds",
                format!("q{} {}{phase}", query.nr, engine.name),
                summary,
            )
            .field("engine", engine.name)
            .field("query", query.nr)
            .field("peak_rss_mib", run.peak_mib.unwrap_or(engine.peak_mib));
            if let Some(rows) = run.rows {
                record = record.field("rows", rows);
            }
            if let Some(checks) = checks {
                let check = checks.get(&query.nr).copied().unwrap_or(Check::Missing);
                record = record.field("answer", format!("{check:?}").to_lowercase());
            }
            reporter.push(record)?;
        }
    }
    Ok(())
}

/// The side-by-side table: per query medians, the ratio delta-rs / Tarn, the answer
/// check; totals over the queries every engine ran; the queries an engine could not run.
fn markdown(queries: &[Query], engines: [&EngineRuns; 3], checks: &BTreeMap<u32, Check>) -> String {
    let [tarn, deltars, duck] = engines;
    let ms = |engine: &EngineRuns, nr: u32| engine.runs.get(&nr).and_then(QueryRun::median);
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let peak = |engine: &EngineRuns, nr: u32| {
        let mib = engine.runs.get(&nr).and_then(|run| run.peak_mib);
        mib.map_or("-".to_string(), |v| format!("{v:.0}"))
    };
    let mut out = String::from(
        "| query | Tarn ms | delta-rs ms | DuckDB ms | delta-rs / Tarn | answer vs DuckDB \
         | peak MiB: Tarn / delta-rs / DuckDB |\n\
         | --- | ---: | ---: | ---: | ---: | --- | ---: |\n",
    );
    let mut totals = [0.0f64; 3];
    let mut counted = 0;
    let mut slower = Vec::new();
    for query in queries {
        let (t, d, k) = (
            ms(tarn, query.nr),
            ms(deltars, query.nr),
            ms(duck, query.nr),
        );
        let ratio = match (t, d) {
            (Some(t), Some(d)) if t > 0.0 => format!("{:.2}", d / t),
            _ => "-".to_string(),
        };
        if let (Some(t), Some(d)) = (t, d)
            && d < t
        {
            slower.push(query.nr);
        }
        if let (Some(t), Some(d), Some(k)) = (t, d, k) {
            totals[0] += t;
            totals[1] += d;
            totals[2] += k;
            counted += 1;
        }
        let check = match checks.get(&query.nr) {
            Some(Check::Same) => "same",
            Some(Check::Differs) => "differs",
            _ => "-",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {ratio} | {check} | {} / {} / {} |\n",
            query.name(),
            cell(t),
            cell(d),
            cell(k),
            peak(tarn, query.nr),
            peak(deltars, query.nr),
            peak(duck, query.nr)
        ));
    }
    out.push_str(&format!(
        "\nTotal over the {counted} queries all three ran: Tarn {:.0} ms, delta-rs {:.0} ms \
         ({:.2}x Tarn's), DuckDB {:.0} ms. Peak memory while querying: Tarn {:.0} MiB, \
         delta-rs {:.0} MiB, DuckDB {:.0} MiB.\n",
        totals[0],
        totals[1],
        totals[1] / totals[0].max(1e-9),
        totals[2],
        tarn.peak_mib,
        deltars.peak_mib,
        duck.peak_mib
    ));
    let same = checks.values().filter(|c| **c == Check::Same).count();
    out.push_str(&format!(
        "Answers the same as DuckDB's: {same} of {}. Queries where delta-rs was faster: {}.\n",
        queries.len(),
        list(&slower)
    ));
    for engine in engines {
        let failed: Vec<String> = engine
            .runs
            .values()
            .filter_map(|r| Some(format!("q{} ({})", r.nr, r.error.as_ref()?)))
            .collect();
        if !failed.is_empty() {
            out.push_str(&format!(
                "\n{} could not run {} queries: {}\n",
                engine.name,
                failed.len(),
                failed.join("; ")
            ));
        }
    }
    out
}

fn list(nrs: &[u32]) -> String {
    match nrs.is_empty() {
        true => "none".into(),
        false => nrs
            .iter()
            .map(|n| format!("q{n}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}
