//! `cdc`: the production benchmark's write mix on the LHBench table, at the default
//! target file size. A CDC batch of 1% of the table (90% updates of existing keys spread
//! over the whole table, 10% inserts) is merged under each strategy, then 10% of the
//! table is appended; each step's latency, bytes written and write amplification
//! (physical bytes written / Parquet bytes of the batch), then the five read queries on
//! the result against the table before.

use tarn::{ChangeStrategy, Table};

use crate::report::{Record, Reporter, progress};
use crate::workloads::{create, merge_queries, ms, parquet_bytes, settle, strategy_name, upsert};
use crate::{Bench, BenchError, Summary, r#gen, sample};

/// The CDC batch's share of the table.
const CDC_FRACTION: f64 = 0.01;
/// The share of the batch that updates existing keys.
const UPDATE_SHARE: f64 = 0.9;
/// The bulk append's share of the table.
const APPEND_FRACTION: f64 = 0.1;

/// `cdc`: the CDC merge and the bulk append, under copy-on-write and merge-on-read.
///
/// Fails when a step fails or changes other rows than the batch says.
pub async fn cdc(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(1_000_000, 10_000);
    let base = "cdc/base";
    let mut table = create(
        bench,
        base,
        &r#gen::merge_schema(),
        tarn::protocol::properties::DEFAULT_TARGET_FILE_SIZE,
    )
    .await?;
    let outcome = table.write(r#gen::merge_rows(rows)).execute().await?;
    settle(outcome.commit.checkpoint).await?;
    let (before, before_summary) = merge_queries(bench, base, bench.runs).await?;

    let (batch, updates) = r#gen::upsert_source(rows, CDC_FRACTION, UPDATE_SHARE, bench.seed);
    let inserts = batch.num_rows() - updates;
    let batch_bytes = parquet_bytes(std::slice::from_ref(&batch))?;
    let start = rows as i64 + inserts as i64;
    let appended_keys: Vec<i64> = (start..start + (rows as f64 * APPEND_FRACTION) as i64).collect();
    let append = r#gen::merge_batch(&appended_keys, 0.0);
    let append_bytes = parquet_bytes(std::slice::from_ref(&append))?;

    let bar = progress(2 * bench.runs as u64, "cdc");
    let mut merge_p50 = Vec::new();
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        let name = format!("cdc/{}", strategy_name(strategy));
        let (mut merges, mut appends) = (Vec::new(), Vec::new());
        let (mut written, mut append_written) = (Vec::new(), Vec::new());
        for run in 0..bench.runs {
            bench.copy_table(base, &name).await?;
            let measured = bench.measured(&name, run)?;
            let mut target = Table::open_at(measured.location.clone()).await?;
            let (outcome, merged) = sample(
                &measured.counter,
                upsert(&mut target, vec![batch.clone()], strategy),
            )
            .await?;
            let m = &outcome.metrics;
            if (m.rows_updated as usize, m.rows_inserted as usize) != (updates, inserts) {
                return Err(format!(
                    "{name}: {} updated and {} inserted, expected {updates} and {inserts}",
                    m.rows_updated, m.rows_inserted
                )
                .into());
            }
            settle(outcome.commit.checkpoint).await?;
            let (outcome, appended) =
                sample(&measured.counter, target.write([append.clone()]).execute()).await?;
            if outcome.rows_written != append.num_rows() as u64 {
                return Err(format!("{name}: appended {} rows", outcome.rows_written).into());
            }
            settle(outcome.commit.checkpoint).await?;
            written.push(merged.counts.bytes_written);
            append_written.push(appended.counts.bytes_written);
            merges.push(merged);
            appends.push(appended);
            bar.inc(1);
        }
        written.sort_unstable();
        append_written.sort_unstable();
        let bytes = written[written.len() / 2];
        let appended_bytes = append_written[append_written.len() / 2];
        let amplification = bytes as f64 / batch_bytes.max(1) as f64;
        let merge = Summary::of(&merges);
        merge_p50.push(merge.p50);
        reporter.push(
            Record::new(
                "cdc",
                format!(
                    "{} merge of {} rows (90% updates)",
                    strategy_name(strategy),
                    batch.num_rows()
                ),
                merge,
            )
            .throughput(batch.num_rows() as f64 / merge.p50.as_secs_f64(), "rows/s")
            .bytes_written(bytes)
            .field("strategy", strategy_name(strategy))
            .field("changed_bytes", batch_bytes)
            .field("write_amplification", amplification)
            .note(format!("WA {amplification:.1}x")),
        )?;
        let append_summary = Summary::of(&appends);
        reporter.push(
            Record::new(
                "cdc",
                format!(
                    "{} then append {} rows",
                    strategy_name(strategy),
                    append.num_rows()
                ),
                append_summary,
            )
            .throughput(
                append.num_rows() as f64 / append_summary.p50.as_secs_f64(),
                "rows/s",
            )
            .bytes_written(appended_bytes)
            .field("strategy", strategy_name(strategy))
            .field("changed_bytes", append_bytes)
            .field(
                "write_amplification",
                appended_bytes as f64 / append_bytes.max(1) as f64,
            ),
        )?;
        let (after, after_summary) = merge_queries(bench, &name, bench.runs).await?;
        let expected = (rows as usize + inserts + append.num_rows()) as f64;
        if after[0].1 != expected {
            return Err(format!("COUNT(*) after {name} is {}, not {expected}", after[0].1).into());
        }
        let slowdown = after_summary.p50.as_secs_f64() / before_summary.p50.as_secs_f64().max(1e-9);
        let mut record = Record::new(
            "cdc",
            format!("queries after, {}", strategy_name(strategy)),
            after_summary,
        )
        .field("strategy", strategy_name(strategy))
        .field("slowdown", slowdown)
        .note(format!("{slowdown:.2}x the queries before"));
        for (q, ((a, _), (b, _))) in crate::queries::MERGE_QUERIES
            .iter()
            .zip(after.iter().zip(&before))
        {
            record = record
                .field(&format!("{} ms", q.sql()), ms(*a))
                .field(&format!("{} ms before", q.sql()), ms(*b));
        }
        reporter.push(record)?;
        bench.clear(&name).await?;
    }
    bar.finish_and_clear();
    if let [cow, mor] = merge_p50[..] {
        println!(
            "cdc: merge-on-read merges {:.1}x faster than copy-on-write",
            cow.as_secs_f64() / mor.as_secs_f64().max(1e-9)
        );
    }
    Ok(())
}
