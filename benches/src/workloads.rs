//! The workloads of the published lakehouse benchmarks, on any store Tarn opens:
//!
//! - [`load`]: rows/s and MB/s writing `store_sales` and the LHBench table, beside the
//!   Parquet writer's own throughput on the same batches.
//! - [`merge`]: the LHBench merge microbenchmark (CIDR 2023, Figure 3): source fractions
//!   0.0001% to 1%, half updates and half inserts, copy-on-write against merge-on-read;
//!   merge latency, bytes written, write amplification, then the five read queries before
//!   and after and their slowdown.
//! - [`mutations`]: the Brooklyn Data Delta/Iceberg sequence: upsert 1.5% held-back rows,
//!   delete 0.015%, 0.15% and 1.5%, delete one customer (GDPR); file count and reads after
//!   each step.
//! - [`files`]: tables of 1K, 10K and 100K small files: cold open, warm refresh after one
//!   commit, and three selective queries with planning and total time.
//! - [`reads`](crate::reads::reads): cold reads (a fresh table handle each) against warm
//!   reads (a held snapshot) at several table sizes, and through a `CacheStore`.
//!
//! Setup runs on the plain store; only the measured operations go through the latency
//! profile and the request counter. Each workload checks the rows it reads against what it
//! wrote, so a benchmark that silently measures the wrong thing fails instead.

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use futures::TryStreamExt;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Snapshot, Table};

use crate::queries::{MERGE_QUERIES, Query};
use crate::report::{Record, Reporter, progress};
use crate::{Bench, BenchError, Sample, Summary, r#gen, sample};

pub(crate) fn strategy_name(strategy: ChangeStrategy) -> &'static str {
    match strategy {
        ChangeStrategy::CopyOnWrite => "copy-on-write",
        ChangeStrategy::MergeOnRead => "merge-on-read",
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The LHBench upsert: MERGE `source` on `key`, every column of a matched row from the
/// source, unmatched source rows inserted.
///
/// Fails as the merge does.
pub async fn upsert(
    target: &mut Table,
    source: Vec<RecordBatch>,
    strategy: ChangeStrategy,
) -> tarn::Result<tarn::DmlOutcome> {
    target
        .merge(source)
        .on(["key"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .with_strategy(strategy)
        .execute()
        .await
}

/// Bytes of `batches` as one Parquet file with Tarn's default writer settings: what an
/// ideal writer of exactly these rows would write.
pub(crate) fn parquet_bytes(batches: &[RecordBatch]) -> Result<u64, BenchError> {
    let Some(first) = batches.first() else {
        return Ok(0);
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), first.schema(), Some(props))?;
    for b in batches {
        writer.write(b)?;
    }
    Ok(writer.into_inner()?.len() as u64)
}

/// Creates the table `name` afresh (deleting what was there) with deletion vectors
/// enabled, so both strategies can run, and `delta.targetFileSize` at `file_size`.
///
/// Fails when the old table cannot be deleted or the new one cannot be created.
pub async fn create(
    bench: &Bench,
    name: &str,
    schema: &Schema,
    file_size: u64,
) -> Result<Table, BenchError> {
    bench.clear(name).await?;
    Ok(Table::create_at(bench.plain(name)?)
        .with_arrow_schema(schema)
        .with_property("delta.enableDeletionVectors", "true")
        .with_property("delta.targetFileSize", file_size.to_string())
        .execute()
        .await?)
}

/// Waits for the background checkpoint a commit may have started, so setup leaves a
/// table whose cold open is what a long-lived writer would leave.
pub(crate) async fn settle(checkpoint: Option<tarn::CheckpointTask>) -> Result<(), BenchError> {
    if let Some(task) = checkpoint {
        task.wait().await?;
    }
    Ok(())
}

/// `load`: writing `store_sales` (23 columns) and the LHBench table at the default target
/// file size, against the Parquet writer encoding the same batches into memory.
pub async fn load(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(1_000_000, 10_000);
    let tables: [(&str, Vec<RecordBatch>); 2] = [
        (
            "store_sales",
            r#gen::store_sales(rows, bench.seed).collect(),
        ),
        ("lhbench", r#gen::merge_rows(rows).collect()),
    ];
    for (name, batches) in tables {
        let schema = batches[0].schema();
        let memory_bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
        // The Parquet writer alone, single file, in memory.
        let mut baseline = Vec::new();
        let mut encoded = 0;
        for _ in 0..bench.runs {
            let started = Instant::now();
            encoded = parquet_bytes(&batches)?;
            baseline.push(Sample {
                elapsed: started.elapsed(),
                counts: Default::default(),
            });
        }
        let summary = Summary::of(&baseline);
        reporter.push(
            Record::new("load", format!("{name} parquet writer only"), summary)
                .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
                .bytes_written(encoded)
                .field("rows", rows)
                .field("mb_per_s", encoded as f64 / 1e6 / summary.p50.as_secs_f64())
                .note(format!(
                    "{:.1} MB/s, {:.0} MB in memory",
                    encoded as f64 / 1e6 / summary.p50.as_secs_f64(),
                    memory_bytes as f64 / 1e6
                )),
        )?;
        let mut samples = Vec::new();
        let mut files = 0;
        let bar = progress(bench.runs as u64, &format!("load {name}"));
        for run in 0..bench.runs {
            let table_name = format!("load/{name}");
            bench.clear(&table_name).await?;
            let measured = bench.measured(&table_name, run)?;
            let (outcome, s) = sample(&measured.counter, async {
                let mut table = Table::create_at(measured.location.clone())
                    .with_arrow_schema(&schema)
                    .execute()
                    .await?;
                table.write(batches.iter().cloned()).execute().await
            })
            .await?;
            if outcome.rows_written != rows {
                return Err(format!("load wrote {} rows, not {rows}", outcome.rows_written).into());
            }
            files = outcome.files_added;
            samples.push(s);
            bar.inc(1);
        }
        bar.finish_and_clear();
        let summary = Summary::of(&samples);
        let written = median(samples.iter().map(|s| s.counts.bytes_written));
        let mb_s = written as f64 / 1e6 / summary.p50.as_secs_f64();
        reporter.push(
            Record::new("load", format!("{name} {rows} rows"), summary)
                .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
                .bytes_written(written)
                .field("rows", rows)
                .field("mb_per_s", mb_s)
                .field("files", files)
                .note(format!("{mb_s:.1} MB/s, {files} files")),
        )?;
    }
    Ok(())
}

fn median(values: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Runs the five LHBench queries on `snapshot` `runs` times; returns each query's median
/// time and value, and the summary of all five run together.
pub(crate) async fn merge_queries(
    bench: &Bench,
    table: &str,
    runs: usize,
) -> Result<(Vec<(Duration, f64)>, Summary), BenchError> {
    let mut per_query: Vec<Vec<Duration>> = vec![Vec::new(); MERGE_QUERIES.len()];
    let mut values = vec![0.0; MERGE_QUERIES.len()];
    let mut totals = Vec::new();
    for run in 0..runs {
        let measured = bench.measured(table, run)?;
        let snapshot = Snapshot::builder(measured.location.clone()).build().await?;
        let (_, total) = sample(&measured.counter, async {
            for (i, q) in MERGE_QUERIES.iter().enumerate() {
                let started = Instant::now();
                values[i] = q.run(&snapshot).await?;
                per_query[i].push(started.elapsed());
            }
            Ok::<_, BenchError>(())
        })
        .await?;
        totals.push(total);
    }
    let medians = per_query
        .into_iter()
        .zip(values)
        .map(|(mut times, value)| {
            times.sort_unstable();
            (times[times.len() / 2], value)
        })
        .collect();
    Ok((medians, Summary::of(&totals)))
}

/// Source fractions of the LHBench merge microbenchmark.
pub const MERGE_FRACTIONS: [f64; 5] = [0.000_001, 0.000_01, 0.000_1, 0.001, 0.01];

/// `merge`: the LHBench merge microbenchmark.
pub async fn merge(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(1_000_000, 10_000);
    let file_size = 4 * 1024 * 1024;
    let base = "merge/base";
    let mut table = create(bench, base, &r#gen::merge_schema(), file_size).await?;
    let outcome = table.write(r#gen::merge_rows(rows)).execute().await?;
    settle(outcome.commit.checkpoint).await?;
    let base_files = table.snapshot().files().len();
    let (before, before_summary) = merge_queries(bench, base, bench.runs).await?;
    if before[0].1 as u64 != rows {
        return Err(format!("COUNT(*) before the merge is {}, not {rows}", before[0].1).into());
    }
    let mut fields = serde_json::Map::new();
    for (q, (t, _)) in MERGE_QUERIES.iter().zip(&before) {
        fields.insert(format!("{} ms", q.sql()), ms(*t).into());
    }
    let mut record = Record::new("merge", "queries before (all five)", before_summary)
        .field("rows", rows)
        .field("files", base_files)
        .note(format!("{rows} rows in {base_files} files"));
    record.fields.extend(fields);
    reporter.push(record)?;

    let bar = progress((MERGE_FRACTIONS.len() * 2 * bench.runs) as u64, "merge");
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        for fraction in MERGE_FRACTIONS {
            let (source, updates) = r#gen::merge_source(rows, fraction, bench.seed);
            let inserts = source.num_rows() - updates;
            let changed_bytes = parquet_bytes(std::slice::from_ref(&source))?;
            let name = format!("merge/{}-{}", strategy_name(strategy), fraction);
            let mut samples = Vec::new();
            let mut metrics = Vec::new();
            for run in 0..bench.runs {
                bench.copy_table(base, &name).await?;
                let measured = bench.measured(&name, run)?;
                let mut target = Table::open_at(measured.location.clone()).await?;
                let (outcome, s) = sample(
                    &measured.counter,
                    upsert(&mut target, vec![source.clone()], strategy),
                )
                .await?;
                let m = &outcome.metrics;
                if (m.rows_updated as usize, m.rows_inserted as usize) != (updates, inserts) {
                    return Err(format!(
                        "merge {name}: {} updated and {} inserted, expected {updates} and {inserts}",
                        m.rows_updated, m.rows_inserted
                    )
                    .into());
                }
                settle(outcome.commit.checkpoint.clone()).await?;
                metrics.push(outcome.metrics);
                samples.push(s);
                bar.inc(1);
            }
            let summary = Summary::of(&samples);
            let m = &metrics[metrics.len() / 2];
            let amplification = m.bytes_written as f64 / changed_bytes.max(1) as f64;
            let pct = fraction * 100.0;
            let pct_text = format!("{pct:.6}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string();
            reporter.push(
                Record::new(
                    "merge",
                    format!(
                        "{} {pct_text}% ({} rows)",
                        strategy_name(strategy),
                        source.num_rows()
                    ),
                    summary,
                )
                .throughput(
                    source.num_rows() as f64 / summary.p50.as_secs_f64(),
                    "rows/s",
                )
                .bytes_written(m.bytes_written)
                .field("strategy", strategy_name(strategy))
                .field("fraction_pct", pct)
                .field("source_rows", source.num_rows())
                .field("files_scanned", m.files_scanned)
                .field("files_skipped", m.files_skipped)
                .field("files_added", m.files_added)
                .field("files_removed", m.files_removed)
                .field("deletion_vectors", m.deletion_vectors_written)
                .field("changed_bytes", changed_bytes)
                .field("write_amplification", amplification)
                .note(format!(
                    "WA {amplification:.1}x, read {}/{} files, +{} -{} files, {} DVs",
                    m.files_scanned,
                    m.files_scanned + m.files_skipped,
                    m.files_added,
                    m.files_removed,
                    m.deletion_vectors_written
                )),
            )?;
            let (after, after_summary) = merge_queries(bench, &name, bench.runs).await?;
            let expected = (rows + inserts as u64) as f64;
            if after[0].1 != expected {
                return Err(
                    format!("COUNT(*) after {name} is {}, not {expected}", after[0].1).into(),
                );
            }
            let slowdowns: Vec<f64> = after
                .iter()
                .zip(&before)
                .map(|((a, _), (b, _))| a.as_secs_f64() / b.as_secs_f64().max(1e-9))
                .collect();
            let mean = slowdowns.iter().sum::<f64>() / slowdowns.len() as f64;
            let mut record = Record::new(
                "merge",
                format!("queries after {} {pct_text}%", strategy_name(strategy)),
                after_summary,
            )
            .field("strategy", strategy_name(strategy))
            .field("fraction_pct", pct)
            .field("mean_slowdown", mean)
            .note(format!(
                "slowdown {:.2}x total (COUNT {:.2}x, SUM(value) {:.2}x)",
                after_summary.p50.as_secs_f64() / before_summary.p50.as_secs_f64().max(1e-9),
                slowdowns[0],
                slowdowns[3]
            ));
            for (q, s) in MERGE_QUERIES.iter().zip(&slowdowns) {
                record = record.field(&format!("slowdown {}", q.sql()), *s);
            }
            reporter.push(record)?;
            bench.clear(&name).await?;
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Reads after a mutation step: COUNT(*) and SUM(net_paid), `runs` times on a fresh
/// snapshot each.
async fn sales_reads(bench: &Bench, name: &str) -> Result<(Summary, f64), BenchError> {
    let mut samples = Vec::new();
    let mut count = 0.0;
    for run in 0..bench.runs {
        let measured = bench.measured(name, run)?;
        let snapshot = Snapshot::builder(measured.location.clone()).build().await?;
        let (c, s) = sample(&measured.counter, async {
            let c = Query::CountSales.run(&snapshot).await?;
            Query::SumNetPaid.run(&snapshot).await?;
            Ok::<_, BenchError>(c)
        })
        .await?;
        count = c;
        samples.push(s);
    }
    Ok((Summary::of(&samples), count))
}

/// `sale_id % 100000` in `lo..hi`: a spread-out slice of the table to delete.
fn id_slice(lo: i64, hi: i64) -> tarn::expr::Expr {
    let rest = col("sale_id") - (col("sale_id") / lit(100_000i64)) * lit(100_000i64);
    rest.clone().gt_eq(lit(lo)).and(rest.lt(lit(hi)))
}

/// `mutations`: the Brooklyn Data mutation sequence, under each strategy.
pub async fn mutations(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(1_000_000, 20_000);
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        let name = format!("mutations/{}", strategy_name(strategy));
        let mut table = create(bench, &name, &r#gen::sales_schema(), 4 * 1024 * 1024).await?;
        let loaded = table
            .write(r#gen::sales_initial(rows, bench.seed))
            .execute()
            .await?;
        settle(loaded.commit.checkpoint).await?;
        let (reads, count) = sales_reads(bench, &name).await?;
        let baseline = reads.p50;
        reporter.push(
            Record::new(
                "mutations",
                format!("{} load, then reads", strategy_name(strategy)),
                reads,
            )
            .field("strategy", strategy_name(strategy))
            .field("rows", count)
            .field("files", table.snapshot().files().len())
            .note(format!(
                "{count} rows in {} files",
                table.snapshot().files().len()
            )),
        )?;
        let held = r#gen::sales_held_back(rows, bench.seed);
        let customer = 4_242i64;
        let steps = [
            "upsert 1.5%",
            "delete 0.015%",
            "delete 0.15%",
            "delete 1.5%",
            "GDPR delete",
        ];
        let bar = progress(
            steps.len() as u64,
            &format!("mutations {}", strategy_name(strategy)),
        );
        for step in steps {
            let measured = bench.measured(&name, 0)?;
            let mut target = Table::open_at(measured.location.clone()).await?;
            let (outcome, s) = sample(&measured.counter, async {
                match step {
                    "upsert 1.5%" => {
                        target
                            .merge([held.clone()])
                            .on(["sale_id"])
                            .when_matched_update_all(None)
                            .when_not_matched_insert_all(None)
                            .with_strategy(strategy)
                            .execute()
                            .await
                    }
                    "delete 0.015%" => {
                        target
                            .delete(id_slice(0, 15))
                            .with_strategy(strategy)
                            .execute()
                            .await
                    }
                    "delete 0.15%" => {
                        target
                            .delete(id_slice(15, 165))
                            .with_strategy(strategy)
                            .execute()
                            .await
                    }
                    "delete 1.5%" => {
                        target
                            .delete(id_slice(165, 1_665))
                            .with_strategy(strategy)
                            .execute()
                            .await
                    }
                    _ => {
                        target
                            .delete(col("customer_id").eq(lit(customer)))
                            .with_strategy(strategy)
                            .execute()
                            .await
                    }
                }
            })
            .await?;
            settle(outcome.commit.checkpoint.clone()).await?;
            let m = &outcome.metrics;
            let files = target.snapshot().files().len();
            let (reads, after) = sales_reads(bench, &name).await?;
            let slowdown = reads.p50.as_secs_f64() / baseline.as_secs_f64().max(1e-9);
            reporter.push(
                Record::new(
                    "mutations",
                    format!("{} {step}", strategy_name(strategy)),
                    Summary::of(&[s]),
                )
                .bytes_written(m.bytes_written)
                .field("strategy", strategy_name(strategy))
                .field("step", step)
                .field("rows_deleted", m.rows_deleted)
                .field("rows_inserted", m.rows_inserted)
                .field("rows_updated", m.rows_updated)
                .field("files", files)
                .field("read_p50_ms", ms(reads.p50))
                .field("read_slowdown", slowdown)
                .field("rows_after", after)
                .note(format!(
                    "-{} +{} rows, {files} files, {} DVs, reads {:.1}ms ({slowdown:.2}x)",
                    m.rows_deleted,
                    m.rows_inserted + m.rows_updated,
                    m.deletion_vectors_written,
                    ms(reads.p50)
                )),
            )?;
            bar.inc(1);
        }
        bar.finish_and_clear();
        bench.clear(&name).await?;
    }
    Ok(())
}

/// Rows per small file in the file-count tables.
const ROWS_PER_FILE: u64 = 10;

/// The first sale date of the `store_sales` generator.
const FIRST_DAY: i32 = 2_450_816;

/// Small file `i`: ten `store_sales` rows, all of one day.
fn small_file(i: u64, seed: u64) -> RecordBatch {
    r#gen::store_sales_batch(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE, seed)
}

/// Builds (or reuses) a `store_sales` table of `count` small files (ten rows each),
/// partitioned by `ss_sold_date_sk` (200 files a day), written 1,000 files per commit with a
/// checkpoint every 10 commits.
///
/// Fails when writing fails or the table ends with another file count.
pub async fn small_files_table(bench: &Bench, name: &str, count: u64) -> Result<(), BenchError> {
    if let Ok(table) = Table::open_at(bench.plain(name)?).await
        && table.snapshot().files().len() as u64 == count
    {
        return Ok(());
    }
    bench.clear(name).await?;
    let mut table = Table::create_at(bench.plain(name)?)
        .with_arrow_schema(&r#gen::store_sales_schema())
        .with_partition_columns(["ss_sold_date_sk"])
        .execute()
        .await?;
    let per_commit = 1_000u64;
    let bar = progress(count, &format!("build {count} files"));
    let mut next = 0u64;
    while next < count {
        let end = (next + per_commit).min(count);
        let batches: Vec<RecordBatch> = (next..end).map(|i| small_file(i, bench.seed)).collect();
        let outcome = table
            .write(batches)
            .with_target_file_size(1)
            .execute()
            .await?;
        settle(outcome.commit.checkpoint).await?;
        bar.inc(end - next);
        next = end;
    }
    bar.finish_and_clear();
    let files = table.snapshot().files().len() as u64;
    if files != count {
        return Err(format!("{name}: built {files} files, wanted {count}").into());
    }
    Ok(())
}

/// File counts of the `files` workload at this scale: 1K and 10K at the default scale,
/// 100K from scale 10.
pub fn file_counts(bench: &Bench) -> Vec<u64> {
    [1_000u64, 10_000, 100_000]
        .into_iter()
        .filter(|c| (*c as f64) <= 10_000.0 * bench.scale.max(0.1))
        .collect()
}

/// `files`: snapshot open, refresh and selective queries against tables of many small
/// files.
pub async fn files(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    for count in file_counts(bench) {
        let name = format!("files/{count}");
        small_files_table(bench, &name, count).await?;

        let mut opens = Vec::new();
        for run in 0..bench.runs {
            let measured = bench.measured(&name, run)?;
            let (snapshot, s) = sample(
                &measured.counter,
                Snapshot::builder(measured.location.clone()).build(),
            )
            .await?;
            if snapshot.files().len() as u64 != count {
                return Err(format!("{name}: opened {} files", snapshot.files().len()).into());
            }
            opens.push(s);
        }
        let open = Summary::of(&opens);
        reporter.push(
            Record::new("files", format!("cold open, {count} files"), open)
                .field("files", count)
                .field("case", "cold open")
                .note(format!("{} GETs, {} LISTs", open.gets, open.lists)),
        )?;

        let mut refreshes = Vec::new();
        let mut writer = Table::open_at(bench.plain(&name)?).await?;
        for run in 0..bench.runs {
            let measured = bench.measured(&name, run)?;
            let mut reader = Table::open_at(measured.location.clone()).await?;
            let outcome = writer
                .write([small_file(count + run as u64, bench.seed)])
                .execute()
                .await?;
            settle(outcome.commit.checkpoint).await?;
            let ((), s) = sample(&measured.counter, reader.refresh()).await?;
            if reader.version() != writer.version() {
                return Err(format!("{name}: refresh saw {}", reader.version()).into());
            }
            refreshes.push(s);
        }
        reporter.push(
            Record::new(
                "files",
                format!("warm refresh, {count} files"),
                Summary::of(&refreshes),
            )
            .field("files", count)
            .field("case", "warm refresh"),
        )?;

        // A ticket is eight consecutive rows: one in the middle of the table.
        let ticket = (count * ROWS_PER_FILE / 2 / 8) as i64;
        let queries: [(&str, Option<tarn::expr::Expr>, Option<u64>); 3] = [
            ("LIMIT 1", None, None),
            (
                "one day (partition)",
                Some(col("ss_sold_date_sk").eq(lit(FIRST_DAY + 2))),
                Some(2_000),
            ),
            (
                "one ticket (value)",
                Some(col("ss_ticket_number").eq(lit(ticket))),
                Some(8),
            ),
        ];
        for (label, filter, expected) in queries {
            let mut totals = Vec::new();
            let mut plans = Vec::new();
            let mut read_files = 0;
            for run in 0..bench.runs {
                let measured = bench.measured(&name, run)?;
                let table = Table::open_at(measured.location.clone()).await?;
                let mut scan = table.scan();
                if let Some(f) = &filter {
                    scan = scan.filter(f.clone());
                }
                if label == "LIMIT 1" {
                    scan = scan.with_limit(1);
                }
                // Planning alone, then the whole query (which plans again) as the total.
                let started = Instant::now();
                let plan = scan.plan().await?;
                plans.push(started.elapsed());
                read_files = plan.files.len();
                let (rows, s) = sample(&measured.counter, async {
                    let mut stream = scan.execute().await?;
                    let mut rows = 0u64;
                    while let Some(batch) = stream.try_next().await? {
                        rows += batch.num_rows() as u64;
                        if label == "LIMIT 1" && rows > 0 {
                            break;
                        }
                    }
                    Ok::<_, BenchError>(rows)
                })
                .await?;
                if let Some(expected) = expected
                    && rows != expected
                {
                    return Err(format!("{name} {label}: {rows} rows").into());
                }
                totals.push(s);
            }
            plans.sort_unstable();
            let plan = plans[plans.len() / 2];
            reporter.push(
                Record::new(
                    "files",
                    format!("{label}, {count} files"),
                    Summary::of(&totals),
                )
                .field("files", count)
                .field("case", label)
                .field("plan_ms", ms(plan))
                .field("files_planned", read_files)
                .note(format!(
                    "plan {:.2}ms, {read_files} files planned",
                    ms(plan)
                )),
            )?;
        }
    }
    Ok(())
}
