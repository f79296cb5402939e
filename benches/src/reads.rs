//! The `reads` workload: cold reads (a fresh table handle each) against warm reads (a held
//! snapshot) at several table sizes; with `--cache DIR`, also warm reads through a
//! `CacheStore` in DIR against the same reads without it and against the bare store with
//! no latency replayed (local disk, for a directory URL).

use std::path::Path;

use tarn::Table;
use tarn_store::LatencyProfile;

use crate::queries::Query;
use crate::report::{Record, Reporter};
use crate::workloads::{create, settle};
use crate::{Bench, BenchError, Measured, Sample, Summary, r#gen, sample, wrap};

/// `reads`: cold reads (fresh table handle) against warm reads (cached snapshot); with a
/// cache directory, warm reads through the cache too (see the module docs).
///
/// Fails when a table cannot be written or read, or a count disagrees with the rows written.
pub async fn reads(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let sizes: Vec<u64> = [100_000u64, 1_000_000, 10_000_000]
        .into_iter()
        .map(|s| bench.scaled(s, 1_000))
        .collect();
    for rows in sizes {
        let name = format!("reads/{rows}");
        let mut table = create(bench, &name, &r#gen::merge_schema(), 16 * 1024 * 1024).await?;
        let outcome = table.write(r#gen::merge_rows(rows)).execute().await?;
        settle(outcome.commit.checkpoint).await?;
        let files = table.snapshot().files().len();
        let mut cold = Vec::new();
        for run in 0..bench.runs {
            let measured = bench.measured(&name, run)?;
            let (count, s) = sample(&measured.counter, async {
                let table = Table::open_at(measured.location.clone()).await?;
                let count = Query::Count.run(table.snapshot()).await?;
                Query::SumValue.run(table.snapshot()).await?;
                Ok::<_, BenchError>(count)
            })
            .await?;
            if count as u64 != rows {
                return Err(format!("{name}: counted {count}").into());
            }
            cold.push(s);
        }
        let measured = bench.measured(&name, 0)?;
        let warm_table = Table::open_at(measured.location.clone()).await?;
        let mut warm = Vec::new();
        for _ in 0..bench.runs {
            let (_, s) = sample(&measured.counter, async {
                Query::Count.run(warm_table.snapshot()).await?;
                Query::SumValue.run(warm_table.snapshot()).await
            })
            .await?;
            warm.push(s);
        }
        for (label, samples) in [("cold", cold), ("warm", warm)] {
            let summary = Summary::of(&samples);
            reporter.push(
                Record::new("reads", format!("{label}, {rows} rows"), summary)
                    .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
                    .field("rows", rows)
                    .field("files", files)
                    .field("case", label)
                    .note(format!("COUNT(*) + SUM(value), {files} files")),
            )?;
        }
        if let Some(dir) = &bench.cache {
            cached(bench, &name, rows, files, dir, reporter).await?;
        }
        bench.clear(&name).await?;
    }
    Ok(())
}

/// `COUNT(*)` and `SUM(value)` on a held table, after a refresh when `refresh`: a warm
/// full scan, and what a warm read of an unchanged table costs.
async fn read(
    table: &mut Table,
    measured: &Measured,
    rows: u64,
    refresh: bool,
) -> Result<Sample, BenchError> {
    let (count, s) = sample(&measured.counter, async {
        if refresh {
            table.refresh().await?;
        }
        let count = Query::Count.run(table.snapshot()).await?;
        Query::SumValue.run(table.snapshot()).await?;
        Ok::<_, BenchError>(count)
    })
    .await?;
    if count as u64 != rows {
        return Err(format!("counted {count} of {rows} rows").into());
    }
    Ok(s)
}

/// `runs` reads of a held table, refreshed each time when `refresh`.
async fn reads_of(
    bench: &Bench,
    measured: &Measured,
    rows: u64,
    refresh: bool,
) -> Result<Vec<Sample>, BenchError> {
    let mut table = Table::open_at(measured.location.clone()).await?;
    let mut samples = Vec::new();
    for _ in 0..bench.runs {
        samples.push(read(&mut table, measured, rows, refresh).await?);
    }
    Ok(samples)
}

/// The cached cases of `reads`: the first read through an empty cache; a warm full scan
/// (COUNT + SUM on a held snapshot) through the cache against the same scan on the bare
/// store with no latency (local disk, for a directory URL); and a warm read of the
/// unchanged table (refresh, then the scan) with and without the cache.
async fn cached(
    bench: &Bench,
    name: &str,
    rows: u64,
    files: usize,
    dir: &Path,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    let dir = dir.join(name.replace('/', "-"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let (through_cache, cache) = bench.cached(name, 0, &dir)?;
    let mut table = Table::open_at(through_cache.location.clone()).await?;
    let first = read(&mut table, &through_cache, rows, true).await?;
    let after_first = cache.stats();
    let bare = wrap(bench.plain(name)?, &LatencyProfile::none(), 0);
    let uncached = bench.measured(name, 0)?;
    let cases = [
        ("cache: first read", vec![first], "refresh + scan"),
        (
            "no latency, no cache: warm scan",
            reads_of(bench, &bare, rows, false).await?,
            "scan",
        ),
        (
            "cache: warm scan",
            reads_of(bench, &through_cache, rows, false).await?,
            "scan",
        ),
        (
            "cache: warm refresh + scan",
            reads_of(bench, &through_cache, rows, true).await?,
            "refresh + scan",
        ),
        (
            "no cache: warm refresh + scan",
            reads_of(bench, &uncached, rows, true).await?,
            "refresh + scan",
        ),
    ];
    let stats = cache.stats();
    let baseline = Summary::of(&cases[1].1).p50.as_secs_f64();
    for (label, samples, what) in cases {
        let summary = Summary::of(&samples);
        let ratio = summary.p50.as_secs_f64() / baseline;
        reporter.push(
            Record::new("reads", format!("{label}, {rows} rows"), summary)
                .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
                .field("rows", rows)
                .field("files", files)
                .field("case", label)
                .field("vs_local_scan", ratio)
                .note(format!(
                    "{what} (COUNT(*) + SUM(value)), {ratio:.2}x the local warm scan"
                )),
        )?;
    }
    println!(
        "  cache after {rows} rows: first read fetched {} blocks ({:.1} MB); warm reads \
         served {} blocks, fetched {}",
        after_first.block_misses,
        after_first.bytes_fetched as f64 / 1e6,
        stats.block_hits - after_first.block_hits,
        stats.block_misses - after_first.block_misses,
    );
    Ok(())
}
