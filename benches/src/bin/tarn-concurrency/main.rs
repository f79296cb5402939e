//! `tarn-concurrency`: how Tarn's tables and catalog hold up under many writer and reader
//! processes.
//!
//! The coordinator re-runs this binary as N worker processes, each with its own table or
//! catalog handle and store connection, reads every worker's JSON lines as they come, and
//! prints per concurrency level the latency quantiles, throughput, retries and conflicts
//! per operation, round trips per operation and errors by kind, as a table and as JSON
//! lines; `chart` draws the JSON lines as SVG.
//!
//! ```text
//! tarn-concurrency seed  --url s3://bucket/t --files 1000 --commits 100
//! tarn-concurrency write --url s3://bucket/t --levels 1,2,5,10,20 --ops 20 --profile s3-express
//! tarn-concurrency cold-read --url ... ; tarn-concurrency warm-read --url ...
//! tarn-concurrency torture --url ... --writers 4 --commits 50 --fault-rate 0.05 --ack-dir DIR
//! tarn-concurrency catalog-seed --url s3://bucket/c --entries 1000 --layout paged
//! tarn-concurrency catalog-write --url s3://bucket/c --op create-table --levels 1,2,5,10
//! tarn-concurrency catalog-cold-read --url ... --op describe-table
//! tarn-concurrency catalog-warm-read --url ... --op list-tables
//! tarn-concurrency catalog-torture --url ... --writers 4 --ops 20 --ack-dir DIR
//! tarn-concurrency chart --json results.jsonl --out catalog.svg
//! ```
//!
//! S3 credentials and endpoint come from the `AWS_*` environment variables, which the
//! workers inherit.

mod catalog;
mod chart;
mod levels;
mod table;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tarn_bench::catalog::CatalogOp;

#[derive(Parser)]
#[command(version, about = "Tarn under concurrent writer and reader processes")]
struct Cli {
    #[command(subcommand)]
    command: Mode,
}

/// What every mode needs: where, under which latency profile, and where the JSON lines go.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// The table or catalog: a local path or a URL (s3://, gs:// or az://bucket/prefix,
    /// credentials from the cloud's environment variables; memory:// is per process).
    #[arg(long)]
    pub(crate) url: String,
    /// Latency profile replayed in every worker: none, s3-standard, s3-express,
    /// gcs-standard or azure-blob.
    #[arg(long, default_value = "none")]
    pub(crate) profile: String,
    /// Do not hedge slow small PUTs over the replayed profile (a cloud URL is hedged by
    /// its store either way).
    #[arg(long)]
    pub(crate) no_hedge: bool,
    /// Turn group commit off in the worker processes this command starts (it sets
    /// `TARN_GROUP_COMMIT=off` for them; set it yourself for a worker run by hand).
    #[arg(long)]
    pub(crate) no_group_commit: bool,
    /// Append every summary as a JSON line to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

/// Concurrency levels and operations per worker.
#[derive(Args, Clone)]
pub(crate) struct Levels {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Concurrency levels: worker processes per run.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10,20")]
    pub(crate) levels: Vec<usize>,
    /// Operations per worker.
    #[arg(long, default_value_t = 10)]
    pub(crate) ops: i64,
}

/// The delete mode: the levels, and where its deletion vectors live.
#[derive(Args, Clone)]
pub(crate) struct DeleteLevels {
    #[command(flatten)]
    pub(crate) levels: Levels,
    /// The table's inline threshold for deletion vectors, in bytes: a larger DV goes to
    /// a DV file (0: every DV in a file, so a committer that unites them writes one).
    #[arg(long, default_value_t = 8192)]
    pub(crate) dv_inline_threshold: usize,
}

/// A catalog mode: the levels, and the operation timed.
#[derive(Args, Clone)]
pub(crate) struct CatalogLevels {
    #[command(flatten)]
    pub(crate) levels: Levels,
    /// The operation.
    #[arg(long, value_enum)]
    pub(crate) op: CatalogOp,
    /// Operations per level, shared by its workers (each does at least 2); overrides
    /// `--ops`, so high levels do not take hours.
    #[arg(long)]
    pub(crate) level_ops: Option<i64>,
}

/// The kind of work a worker process does.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub(crate) enum WorkerKind {
    Write,
    Delete,
    ColdRead,
    WarmRead,
    ExactlyOnce,
    CatalogWrite,
    CatalogColdRead,
    CatalogWarmRead,
    CatalogExactlyOnce,
}

impl WorkerKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Delete => "delete",
            Self::ColdRead => "cold-read",
            Self::WarmRead => "warm-read",
            Self::ExactlyOnce => "exactly-once",
            Self::CatalogWrite => "catalog-write",
            Self::CatalogColdRead => "catalog-cold-read",
            Self::CatalogWarmRead => "catalog-warm-read",
            Self::CatalogExactlyOnce => "catalog-exactly-once",
        }
    }
}

/// What the coordinator tells one worker process.
#[derive(Args, Clone, Debug)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    pub(crate) kind: WorkerKind,
    #[arg(long)]
    pub(crate) id: usize,
    #[arg(long)]
    pub(crate) ops: i64,
    #[arg(long, default_value_t = 0.0)]
    pub(crate) fault_rate: f64,
    #[arg(long, default_value_t = 0)]
    pub(crate) fault_seed: u64,
    #[arg(long)]
    pub(crate) ack_log: Option<PathBuf>,
    /// The catalog operation.
    #[arg(long, value_enum)]
    pub(crate) op: Option<CatalogOp>,
    /// A tag making this level's names unique.
    #[arg(long, default_value = "")]
    pub(crate) run: String,
    /// Entries the catalog was seeded with.
    #[arg(long, default_value_t = 0)]
    pub(crate) entries: usize,
    /// When to start the timed operations (Unix ms), so every worker of a level is ready
    /// and they run at once; 0 starts at once.
    #[arg(long, default_value_t = 0)]
    pub(crate) start_at_ms: u64,
}

/// How killed-and-faulty runs go.
#[derive(Args, Clone)]
pub(crate) struct TortureArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[arg(long, default_value_t = 4)]
    pub(crate) writers: usize,
    /// Share of PUTs that fail; half of them after the object landed.
    #[arg(long, default_value_t = 0.05)]
    pub(crate) fault_rate: f64,
    /// Where each writer logs the sequence numbers it saw acknowledged.
    #[arg(long)]
    pub(crate) ack_dir: PathBuf,
    #[arg(long, default_value_t = 7)]
    pub(crate) seed: u64,
    /// Time between kills, a random value in this range of milliseconds.
    #[arg(long, default_value_t = 300)]
    pub(crate) kill_min_ms: u64,
    #[arg(long, default_value_t = 1500)]
    pub(crate) kill_max_ms: u64,
    /// Kills in all, at most.
    #[arg(long, default_value_t = 12)]
    pub(crate) max_kills: usize,
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
    /// Each worker deletes `ops` of its own rows, one per commit, merge-on-read, from the
    /// one file of a fresh table per level: every commit changes that file's deletion
    /// vector, so racing deletes unite their DVs.
    Delete(DeleteLevels),
    /// Each worker builds `ops` fresh snapshots of the table.
    ColdRead(Levels),
    /// Each worker keeps one snapshot and refreshes it `ops` times while a writer commits.
    WarmRead(Levels),
    /// Exactly-once writers with injected PUT faults, killed and restarted at random.
    Torture {
        #[command(flatten)]
        torture: TortureArgs,
        #[arg(long, default_value_t = 50)]
        commits: i64,
    },
    /// Create a catalog of about `entries` objects (through the API up to 10,000, else
    /// by one bulk import).
    CatalogSeed {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = 1000)]
        entries: usize,
        #[arg(long, value_enum, default_value = "paged")]
        layout: catalog::LayoutArg,
        /// Rows per manifest file of the paged layout.
        #[arg(long, default_value_t = 4096)]
        rows_per_page: usize,
        /// Whether the manifest has its BTree, Bitmap and full-text indices.
        #[arg(long, value_enum, default_value = "on")]
        indices: catalog::Switch,
    },
    /// Each worker makes `ops` catalog mutations through its own handle.
    CatalogWrite(CatalogLevels),
    /// Each worker opens the catalog afresh for each of its `ops` reads.
    CatalogColdRead(CatalogLevels),
    /// Each worker opens the catalog once and reads `ops` times.
    CatalogWarmRead(CatalogLevels),
    /// Catalog writers with injected PUT faults, killed and restarted at random.
    CatalogTorture {
        #[command(flatten)]
        torture: TortureArgs,
        /// Steps per writer (each a create, a rename and sometimes a drop).
        #[arg(long, default_value_t = 20)]
        ops: i64,
    },
    /// Draws throughput and p50 against concurrency, per variant, from JSON lines.
    Chart {
        /// The JSON lines the catalog modes appended.
        #[arg(long)]
        json: PathBuf,
        /// The SVG to write (two charts: `<out>` throughput, `<out>-p50.svg` latency).
        #[arg(long)]
        out: PathBuf,
        /// Only summaries of this mode (e.g. catalog-write).
        #[arg(long)]
        mode: Option<String>,
    },
    /// One worker process (started by the coordinator).
    #[command(hide = true)]
    Worker {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        worker: WorkerArgs,
    },
}

/// The most threads a worker process keeps for blocking work. A local directory's store
/// runs every request on one, so a worker reading a crowd's proposals at once would start
/// a thread per request: 200 workers with 270 threads each exhausted the machine's process
/// ids, and tantivy then failed to start an index writer.
const WORKER_BLOCKING_THREADS: usize = 16;

/// How long a worker waits, once done, for the work its commits left running.
const WORKER_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if matches!(cli.command, Mode::Worker { .. }) {
        runtime.max_blocking_threads(WORKER_BLOCKING_THREADS);
    }
    runtime.build()?.block_on(run(cli))
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Mode::Seed {
            common,
            files,
            commits,
        } => table::seed(common, files, commits).await,
        Mode::Write(l) => table::levels(l, WorkerKind::Write, None).await,
        Mode::Delete(d) => {
            table::levels(d.levels, WorkerKind::Delete, Some(d.dv_inline_threshold)).await
        }
        Mode::ColdRead(l) => table::levels(l, WorkerKind::ColdRead, None).await,
        Mode::WarmRead(l) => table::levels(l, WorkerKind::WarmRead, None).await,
        Mode::Torture { torture, commits } => table::torture(torture, commits).await,
        Mode::CatalogSeed {
            common,
            entries,
            layout,
            rows_per_page,
            indices,
        } => catalog::seed(common, entries, layout.layout(rows_per_page), indices).await,
        Mode::CatalogWrite(l) => catalog::levels(l, WorkerKind::CatalogWrite).await,
        Mode::CatalogColdRead(l) => catalog::levels(l, WorkerKind::CatalogColdRead).await,
        Mode::CatalogWarmRead(l) => catalog::levels(l, WorkerKind::CatalogWarmRead).await,
        Mode::CatalogTorture { torture, ops } => catalog::torture(torture, ops).await,
        Mode::Chart { json, out, mode } => chart::draw(&json, &out, mode.as_deref()),
        Mode::Worker { common, worker } => {
            let result = match worker.kind {
                WorkerKind::Write
                | WorkerKind::Delete
                | WorkerKind::ColdRead
                | WorkerKind::WarmRead
                | WorkerKind::ExactlyOnce => table::run_worker(common, worker).await,
                WorkerKind::CatalogWrite
                | WorkerKind::CatalogColdRead
                | WorkerKind::CatalogWarmRead
                | WorkerKind::CatalogExactlyOnce => catalog::run_worker(common, worker).await,
            };
            // Its decided proposals deleted and its checkpoints written before it exits:
            // left listed, every writer of the crowd that lists them reads them.
            tarn::settle_background_work(WORKER_SETTLE).await;
            result
        }
    }
}
