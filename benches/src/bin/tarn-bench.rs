//! `tarn-bench`: runs Tarn's benchmark workloads and prints what they measured, as a table
//! and as JSON lines.

use std::io::Write;
use std::path::PathBuf;

use arrow::array::RecordBatch;
use clap::{Parser, Subcommand};
use tarn::Snapshot;
use tarn_bench::{Sample, Summary, golden_root, sample, wrap};
use tarn_store::LatencyProfile;

#[derive(Parser)]
#[command(version, about = "Tarn's benchmark runner")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Latency profile replayed on the store: none, s3-standard or s3-express.
    #[arg(long, global = true, default_value = "none")]
    profile: String,
    /// Runs per measurement.
    #[arg(long, global = true, default_value_t = 5)]
    runs: usize,
    /// Also append each result as a JSON line to this file.
    #[arg(long, global = true)]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Cold open and full scan of the Spark-written golden tables.
    Golden {
        /// Only these tables (default: every table with expected rows).
        tables: Vec<String>,
    },
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let profile = LatencyProfile::by_name(&cli.profile)?;
    let mut json = match &cli.json {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        ),
        None => None,
    };
    match cli.command {
        Command::Golden { tables } => {
            let root = golden_root();
            let mut names: Vec<String> = if tables.is_empty() {
                std::fs::read_dir(&root)?
                    .flatten()
                    .filter(|e| e.path().join("expected").is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            } else {
                tables
            };
            names.sort();
            println!(
                "{:<48} {:>8} {:>9} {:>9} {:>5} {:>5} {:>10} {:>9} {:>9} {:>5} {:>5} {:>11}",
                "table (profile ".to_string() + &profile.name + ")",
                "rows",
                "open p50",
                "open p90",
                "reqs",
                "trips",
                "",
                "scan p50",
                "scan p90",
                "reqs",
                "trips",
                "MB read"
            );
            for name in names {
                let dir = root.join(&name).join("delta");
                let url = dir.to_string_lossy().into_owned();
                let (mut opens, mut scans) = (Vec::<Sample>::new(), Vec::<Sample>::new());
                let mut row_count = 0;
                for run in 0..cli.runs {
                    let measured = wrap(tarn_store::open(&url)?, &profile, run as u64);
                    let (snapshot, open) = sample(
                        &measured.counter,
                        Snapshot::builder(measured.location.clone()).build(),
                    )
                    .await?;
                    let (batches, scan) =
                        sample(&measured.counter, snapshot.scan().collect()).await?;
                    row_count = rows(&batches);
                    opens.push(open);
                    scans.push(scan);
                }
                let (open, scan) = (Summary::of(&opens), Summary::of(&scans));
                let ms = |d: std::time::Duration| format!("{:.2}ms", d.as_secs_f64() * 1e3);
                println!(
                    "{name:<48} {row_count:>8} {:>9} {:>9} {:>5} {:>5} {:>10} {:>9} {:>9} {:>5} {:>5} {:>11.2}",
                    ms(open.p50),
                    ms(open.p90),
                    open.requests,
                    open.round_trips,
                    "",
                    ms(scan.p50),
                    ms(scan.p90),
                    scan.requests,
                    scan.round_trips,
                    scan.bytes_read as f64 / 1e6
                );
                if let Some(file) = json.as_mut() {
                    let extra = serde_json::json!({"table": name, "profile": profile.name, "rows": row_count});
                    writeln!(file, "{}", open.to_json("golden.open", extra.clone()))?;
                    writeln!(file, "{}", scan.to_json("golden.scan", extra))?;
                }
            }
        }
    }
    Ok(())
}
