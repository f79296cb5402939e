//! `tarn-concurrency`: how Tarn holds up under many writer and reader processes.
//!
//! The coordinator re-runs this binary as N worker processes, each with its own table
//! handle and store connection, reads every worker's JSON lines as they come, and prints
//! per concurrency level the latency quantiles, throughput, retries and conflicts per
//! operation, and round trips per operation, as a table and as JSON lines.
//!
//! ```text
//! tarn-concurrency seed  --url s3://bucket/t --files 1000 --commits 100
//! tarn-concurrency write --url s3://bucket/t --levels 1,2,5,10,20 --ops 20 --profile s3-express
//! tarn-concurrency cold-read --url ... ; tarn-concurrency warm-read --url ...
//! tarn-concurrency torture --url ... --writers 4 --commits 50 --fault-rate 0.05 --ack-dir DIR
//! ```
//!
//! S3 credentials and endpoint come from the `AWS_*` environment variables, which the
//! workers inherit.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use clap::{Args, Parser, Subcommand, ValueEnum};
use object_store::ObjectStore;
use tarn::{Error, Snapshot, StoreLocation, Table};
use tarn_bench::concurrency::{Ack, OpRecord, summarise, table_header, table_row};
use tarn_store::{
    CountingStore, Fault, FaultOp, FaultRule, FaultStore, LatencyProfile, LatencyStore,
    RequestCounter,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(Parser)]
#[command(version, about = "Tarn under concurrent writer and reader processes")]
struct Cli {
    #[command(subcommand)]
    command: Mode,
}

#[derive(Args, Clone)]
struct Common {
    /// The table: a local path or a URL (s3://bucket/prefix, memory:// is per process).
    #[arg(long)]
    url: String,
    /// Latency profile replayed in every worker: none, s3-standard or s3-express.
    #[arg(long, default_value = "none")]
    profile: String,
    /// Append every summary as a JSON line to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Mode {
    /// Create a table holding `files` small files written over `commits` commits.
    Seed {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = 100)]
        files: usize,
        #[arg(long, default_value_t = 10)]
        commits: usize,
    },
    /// Each worker commits `ops` appends to one table (a fresh table per level).
    Write(Levels),
    /// Each worker builds `ops` fresh snapshots of the table.
    ColdRead(Levels),
    /// Each worker keeps one snapshot and refreshes it `ops` times while a writer commits.
    WarmRead(Levels),
    /// Exactly-once writers with injected PUT faults, killed and restarted at random.
    Torture {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = 4)]
        writers: usize,
        #[arg(long, default_value_t = 50)]
        commits: i64,
        /// Share of PUTs that fail; half of them after the object landed.
        #[arg(long, default_value_t = 0.05)]
        fault_rate: f64,
        /// Where each writer logs the sequence numbers it saw acknowledged.
        #[arg(long)]
        ack_dir: PathBuf,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Time between kills, a random value in this range of milliseconds.
        #[arg(long, default_value_t = 300)]
        kill_min_ms: u64,
        #[arg(long, default_value_t = 1500)]
        kill_max_ms: u64,
        /// Kills in all, at most.
        #[arg(long, default_value_t = 12)]
        max_kills: usize,
    },
    /// One worker process (started by the coordinator).
    #[command(hide = true)]
    Worker {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        kind: WorkerKind,
        #[arg(long)]
        id: usize,
        #[arg(long)]
        ops: i64,
        #[arg(long, default_value_t = 0.0)]
        fault_rate: f64,
        #[arg(long, default_value_t = 0)]
        fault_seed: u64,
        #[arg(long)]
        ack_log: Option<PathBuf>,
    },
}

#[derive(Args, Clone)]
struct Levels {
    #[command(flatten)]
    common: Common,
    /// Concurrency levels: worker processes per run.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10,20")]
    levels: Vec<usize>,
    /// Operations per worker.
    #[arg(long, default_value_t = 10)]
    ops: i64,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum WorkerKind {
    Write,
    ColdRead,
    WarmRead,
    ExactlyOnce,
}

impl WorkerKind {
    fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::ColdRead => "cold-read",
            Self::WarmRead => "warm-read",
            Self::ExactlyOnce => "exactly-once",
        }
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("writer", DataType::Int64, false),
        Field::new("bucket", DataType::Int64, false),
    ]))
}

fn rows(
    writer: i64,
    ids: std::ops::Range<i64>,
    buckets: i64,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let ids: Vec<i64> = ids.collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(vec![writer; ids.len()])),
            Arc::new(Int64Array::from(
                ids.iter().map(|i| i % buckets.max(1)).collect::<Vec<_>>(),
            )),
        ],
    )
}

/// The table's location as a worker sees it: faults, then latency, then counting.
fn worker_location(
    common: &Common,
    fault_rate: f64,
    fault_seed: u64,
    seed: u64,
) -> Result<(StoreLocation, RequestCounter), Box<dyn std::error::Error>> {
    let location = tarn_store::open(&common.url)?;
    let mut store: Arc<dyn ObjectStore> = Arc::clone(location.store());
    if fault_rate > 0.0 {
        // Half the faults lose the acknowledgement of a PUT that landed.
        let half = fault_rate / 2.0;
        let faulty = FaultStore::new(store, fault_seed)
            .with_rule(FaultRule::new(FaultOp::Put, Fault::FailAfter).probability(half))
            .with_rule(
                FaultRule::new(FaultOp::Put, Fault::FailBefore).probability(half / (1.0 - half)),
            );
        store = Arc::new(faulty);
    }
    let profile = LatencyProfile::by_name(&common.profile)?;
    if profile.name != "none" {
        store = Arc::new(LatencyStore::new(store, profile, seed));
    }
    let counting = CountingStore::new(store);
    let counter = counting.counter();
    Ok((location.with_store(Arc::new(counting)), counter))
}

fn print_record(record: &OpRecord) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(record).unwrap_or_default());
    let _ = out.flush();
}

async fn create_table(url: &str, partitioned: bool) -> Result<Table, Box<dyn std::error::Error>> {
    let mut create = Table::create(url).with_arrow_schema(&schema());
    if partitioned {
        create = create.with_partition_columns(["bucket"]);
    }
    Ok(create.execute().await?)
}

async fn run_worker(
    common: Common,
    kind: WorkerKind,
    id: usize,
    ops: i64,
    fault_rate: f64,
    fault_seed: u64,
    ack_log: Option<PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (location, counter) =
        worker_location(&common, fault_rate, fault_seed, id as u64 + fault_seed)?;
    let base_id = id as i64 * 1_000_000;
    match kind {
        WorkerKind::Write => {
            let mut table = Table::open_location(location).await?;
            for n in 0..ops {
                counter.reset();
                let started = Instant::now();
                let result = table
                    .append([rows(id as i64, base_id + n * 10..base_id + n * 10 + 10, 1)?])
                    .await;
                let counts = counter.take();
                print_record(&OpRecord {
                    worker: id,
                    op: kind.name().into(),
                    ok: result.is_ok(),
                    latency_ms: started.elapsed().as_secs_f64() * 1e3,
                    attempts: result.as_ref().map_or(0, |o| o.commit.attempts),
                    conflict: matches!(result, Err(Error::Conflict { .. })),
                    requests: counts.requests(),
                    round_trips: counts.critical_path,
                    version: result.as_ref().map_or(-1, |o| o.commit.version),
                    error: result.as_ref().err().map(ToString::to_string),
                });
                if result.is_err() {
                    table.refresh().await?;
                }
            }
        }
        WorkerKind::ColdRead | WorkerKind::WarmRead => {
            let mut snapshot = Snapshot::builder(location.clone()).build().await?;
            for _ in 0..ops {
                counter.reset();
                let started = Instant::now();
                let result = if kind == WorkerKind::ColdRead {
                    Snapshot::builder(location.clone()).build().await
                } else {
                    snapshot.refresh().await
                };
                let counts = counter.take();
                print_record(&OpRecord {
                    worker: id,
                    op: kind.name().into(),
                    ok: result.is_ok(),
                    latency_ms: started.elapsed().as_secs_f64() * 1e3,
                    attempts: 0,
                    conflict: false,
                    requests: counts.requests(),
                    round_trips: counts.critical_path,
                    version: result.as_ref().map_or(-1, Snapshot::version),
                    error: result.as_ref().err().map(ToString::to_string),
                });
                if let Ok(s) = result {
                    snapshot = s;
                }
            }
        }
        WorkerKind::ExactlyOnce => {
            let log_path = ack_log.ok_or("an exactly-once writer needs --ack-log")?;
            let done: BTreeSet<i64> = std::fs::read_to_string(&log_path)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Ack>(l).ok())
                .map(|a| a.n)
                .collect();
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)?;
            let app_id = format!("writer-{id}");
            let mut table = loop {
                match Table::open_location(location.clone()).await {
                    Ok(t) => break t,
                    Err(e) => {
                        eprintln!("worker {id}: open failed, retrying: {e}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            };
            for n in (0..ops).filter(|n| !done.contains(n)) {
                loop {
                    let batch = rows(id as i64, base_id + n * 10..base_id + n * 10 + 5, 1)?;
                    match table
                        .write([batch])
                        .app_transaction(&app_id, n)
                        .execute()
                        .await
                    {
                        Ok(outcome) => {
                            let ack = Ack {
                                writer: id,
                                n,
                                txn_id: outcome.commit.txn_id.clone(),
                                version: outcome.commit.version,
                                skipped: outcome.skipped,
                            };
                            writeln!(log, "{}", serde_json::to_string(&ack)?)?;
                            log.sync_all()?;
                            break;
                        }
                        Err(e) => {
                            eprintln!("worker {id}: write {n} failed, retrying: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            let _ = table.refresh().await;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn worker_command(
    common: &Common,
    kind: WorkerKind,
    id: usize,
    ops: i64,
) -> Result<Command, Box<dyn std::error::Error>> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("worker")
        .args(["--url", &common.url, "--profile", &common.profile])
        .args(["--kind", kind.name()])
        .args(["--id", &id.to_string(), "--ops", &ops.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    Ok(command)
}

/// Runs `workers` worker processes at once and collects their records.
async fn run_level(
    common: &Common,
    kind: WorkerKind,
    workers: usize,
    ops: i64,
) -> Result<(Vec<OpRecord>, Duration), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let mut children: Vec<Child> = Vec::new();
    for id in 0..workers {
        children.push(worker_command(common, kind, id, ops)?.spawn()?);
    }
    let readers = children.iter_mut().map(|child| {
        let stdout = child.stdout.take();
        async move {
            let mut records = Vec::new();
            if let Some(stdout) = stdout {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(record) = serde_json::from_str::<OpRecord>(&line) {
                        records.push(record);
                    }
                }
            }
            records
        }
    });
    let records: Vec<OpRecord> = futures::future::join_all(readers)
        .await
        .into_iter()
        .flatten()
        .collect();
    for child in &mut children {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a {} worker exited with {status}", kind.name()).into());
        }
    }
    Ok((records, started.elapsed()))
}

async fn levels(levels: Levels, kind: WorkerKind) -> Result<(), Box<dyn std::error::Error>> {
    let mut json = match &levels.common.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => None,
    };
    println!(
        "{} (profile {}, {} ops per worker, {})",
        kind.name(),
        levels.common.profile,
        levels.ops,
        levels.common.url
    );
    println!("{}", table_header());
    for &workers in &levels.levels {
        let mut common = levels.common.clone();
        if kind == WorkerKind::Write {
            // A fresh table per level, so every level starts from the same log.
            common.url = format!(
                "{}/level-{workers}-{}",
                common.url.trim_end_matches('/'),
                uuid::Uuid::new_v4().simple()
            );
            create_table(&common.url, false).await?;
        } else if Table::open(&common.url).await.is_err() {
            return Err(format!(
                "no table at {}: run `tarn-concurrency seed` first",
                common.url
            )
            .into());
        }
        // Warm readers refresh while one writer commits, so refreshes have work to do.
        let writer = if kind == WorkerKind::WarmRead {
            Some(
                worker_command(&common, WorkerKind::Write, 999, levels.ops)?
                    .stdout(Stdio::null())
                    .spawn()?,
            )
        } else {
            None
        };
        let (records, wall) = run_level(&common, kind, workers, levels.ops).await?;
        if let Some(mut w) = writer {
            w.wait().await?;
        }
        let summary = summarise(kind.name(), workers, &records, wall);
        println!("{}", table_row(&summary));
        if let Some(file) = json.as_mut() {
            let mut value = serde_json::to_value(&summary)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("profile".into(), levels.common.profile.clone().into());
            }
            writeln!(file, "{value}")?;
        }
    }
    Ok(())
}

async fn seed(
    common: Common,
    files: usize,
    commits: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let per_commit = files.div_ceil(commits.max(1)) as i64;
    let mut table = create_table(&common.url, true).await?;
    let mut next = 0i64;
    for _ in 0..commits {
        // One file per bucket: `per_commit` buckets of one row each.
        let outcome = table
            .append([rows(0, next..next + per_commit, per_commit)?])
            .await?;
        next += per_commit;
        // A short-lived process waits for its checkpoints, or exits before they land.
        if let Some(task) = outcome.commit.checkpoint {
            task.wait().await?;
        }
    }
    println!(
        "seeded {} with {} files in {} commits in {:.1} s",
        common.url,
        table.snapshot().file_count(),
        table.version(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A small random generator for kill times; SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[allow(clippy::too_many_arguments)]
async fn torture(
    common: Common,
    writers: usize,
    commits: i64,
    fault_rate: f64,
    ack_dir: &Path,
    seed: u64,
    kill_ms: (u64, u64),
    max_kills: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(ack_dir)?;
    if Table::open(&common.url).await.is_err() {
        create_table(&common.url, false).await?;
    }
    let started = Instant::now();
    let mut rng = Rng(seed);
    let spawn = |id: usize, restart: u64| -> Result<Child, Box<dyn std::error::Error>> {
        let mut command = worker_command(&common, WorkerKind::ExactlyOnce, id, commits)?;
        command
            .args(["--fault-rate", &fault_rate.to_string()])
            .args([
                "--fault-seed",
                &(seed * 1000 + id as u64 * 100 + restart).to_string(),
            ])
            .arg("--ack-log")
            .arg(ack_dir.join(format!("writer-{id}.jsonl")))
            .stdout(Stdio::null());
        Ok(command.spawn()?)
    };
    let mut children: Vec<Option<Child>> = (0..writers)
        .map(|id| spawn(id, 0).map(Some))
        .collect::<Result<_, _>>()?;
    let mut restarts = vec![0u64; writers];
    let mut kills = 0usize;
    loop {
        // Reap finished writers.
        for slot in children.iter_mut() {
            if let Some(child) = slot
                && let Some(status) = child.try_wait()?
            {
                if !status.success() {
                    return Err(format!("a writer exited with {status}").into());
                }
                *slot = None;
            }
        }
        let running: Vec<usize> = (0..writers).filter(|i| children[*i].is_some()).collect();
        if running.is_empty() {
            break;
        }
        let wait = kill_ms.0 + rng.next() % (kill_ms.1.saturating_sub(kill_ms.0) + 1);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if kills < max_kills {
            let victim = running[(rng.next() % running.len() as u64) as usize];
            if let Some(child) = children[victim].as_mut()
                && child.try_wait()?.is_none()
            {
                child.kill().await?; // SIGKILL: no chance to finish anything
                kills += 1;
                restarts[victim] += 1;
                children[victim] = Some(spawn(victim, restarts[victim])?);
            }
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "writers": writers,
            "commits_per_writer": commits,
            "fault_rate": fault_rate,
            "kills": kills,
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Mode::Seed {
            common,
            files,
            commits,
        } => seed(common, files, commits).await,
        Mode::Write(l) => levels(l, WorkerKind::Write).await,
        Mode::ColdRead(l) => levels(l, WorkerKind::ColdRead).await,
        Mode::WarmRead(l) => levels(l, WorkerKind::WarmRead).await,
        Mode::Torture {
            common,
            writers,
            commits,
            fault_rate,
            ack_dir,
            seed,
            kill_min_ms,
            kill_max_ms,
            max_kills,
        } => {
            torture(
                common,
                writers,
                commits,
                fault_rate,
                &ack_dir,
                seed,
                (kill_min_ms, kill_max_ms),
                max_kills,
            )
            .await
        }
        Mode::Worker {
            common,
            kind,
            id,
            ops,
            fault_rate,
            fault_seed,
            ack_log,
        } => run_worker(common, kind, id, ops, fault_rate, fault_seed, ack_log).await,
    }
}
