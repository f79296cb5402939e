//! The `index` workload: what BTree, Bitmap and full-text indices cost and buy.
//!
//! - **build**: `create_index` per kind (reading the column back, building, uploading):
//!   time, rows/s, object size and peak memory; and each builder alone on in-memory
//!   arrays, single-threaded (the rows/s of the build itself).
//! - **lookups** on the wide sales table (`customer_id` spread at random, so statistics
//!   cannot prune it), the LHBench table (`value2`, the key as text) and the keys table
//!   (`id`, a unique key spread at random over every file): a point lookup,
//!   a 100-key `IN`, a narrow range and Bitmap equality, cold (a fresh handle) and warm
//!   (the same handle again), through the index and with `use_indices(false)`.
//! - **full text**: `text_match` on a generated text column (a seeded Zipf vocabulary)
//!   against a scan with a substring filter.
//! - **GDPR delete** of one customer, merge-on-read, with the index and without.
//! - **append** of 1% of the sales table with an inline BTree index and without one.
//!
//! Every lookup checks its rows against the scan without indices.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::kernels::comparison::contains;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn::expr::{Expr, col, lit, text_match};
use tarn::{ChangeStrategy, IndexKind, Table};
use tarn_index::fts::{FullTextBuilder, FullTextOptions};
use tarn_index::{BTreeBuilder, BTreeOptions, BitmapBuilder};
use tarn_store::SplitMix64;

use crate::report::{Record, Reporter, progress};
use crate::workloads::create;
use crate::{Bench, BenchError, Sample, Summary, r#gen, memory, sample};

/// Vocabulary of the generated text column.
const VOCABULARY: usize = 20_000;
/// Words per generated document.
const WORDS_PER_DOC: usize = 12;

/// A word of the vocabulary: `w<rank>`.
fn word(rank: usize) -> String {
    format!("w{rank}")
}

/// Documents `start..end` of the text table: words drawn from a Zipf(1.0) distribution
/// over the vocabulary, seeded per document.
pub fn docs_batch(start: i64, end: i64, seed: u64) -> RecordBatch {
    // Inverse-CDF sampling of Zipf(1) over ranks 1..=VOCABULARY.
    let harmonic: f64 = (1..=VOCABULARY).map(|k| 1.0 / k as f64).sum();
    let ids: Vec<i64> = (start..end).collect();
    let text: StringArray = ids
        .iter()
        .map(|id| {
            let mut rng = SplitMix64(seed ^ (*id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let words: Vec<String> = (0..WORDS_PER_DOC)
                .map(|_| {
                    let target = rng.unit() * harmonic;
                    // ln approximates the harmonic sum well past the first ranks.
                    let rank = ((target - 0.5772).exp()).clamp(1.0, VOCABULARY as f64) as usize;
                    word(rank)
                })
                .collect();
            Some(words.join(" "))
        })
        .collect();
    r#gen::batch(
        docs_schema(),
        vec![Arc::new(Int64Array::from(ids)), Arc::new(text)],
    )
}

/// Rows `start..end` of the keys table: `id` is a unique key in random order (SplitMix64
/// of the row number, a bijection), so every file's statistics span nearly all ids.
pub fn keys_batch(start: i64, end: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..end).map(key_id).collect();
    r#gen::batch(
        keys_schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from_iter_values(
                (start..end).map(|i| format!("payload of row {i}")),
            )),
            Arc::new(Float64Array::from_iter_values(
                (start..end).map(|i| (i % 10_000) as f64 / 100.0),
            )),
        ],
    )
}

/// The `id` of row `row` of the keys table.
pub fn key_id(row: i64) -> i64 {
    SplitMix64(row as u64).next_u64() as i64
}

fn keys_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]))
}

fn docs_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("text", DataType::Utf8, true),
    ]))
}

/// Runs a filtered scan `runs` times, on a fresh handle each time (cold) or on one handle
/// that already ran it once (warm: index lookups, pages and footers held).
async fn lookups(
    bench: &Bench,
    name: &str,
    predicate: &Expr,
    indices: bool,
    warm: bool,
) -> Result<(Summary, usize), BenchError> {
    let mut samples = Vec::new();
    let mut rows = 0;
    let first = bench.measured(name, 0)?;
    let handle = Table::open_at(first.location.clone()).await?;
    let scan = |table: &Table| {
        table
            .scan()
            .filter(predicate.clone())
            .with_indices(indices)
            .collect()
    };
    if warm {
        scan(&handle).await?;
    }
    for run in 0..bench.runs {
        let (batches, s) = if warm {
            sample(&first.counter, scan(&handle)).await?
        } else {
            let measured = bench.measured(name, run)?;
            sample(&measured.counter, async {
                let table = Table::open_at(measured.location.clone()).await?;
                scan(&table).await
            })
            .await?
        };
        rows = batches.iter().map(RecordBatch::num_rows).sum();
        samples.push(s);
    }
    Ok((Summary::of(&samples), rows))
}

/// The `index` workload.
///
/// Fails when a table cannot be written or read, or when an indexed read returns other
/// rows than the same read without indices.
// Long by design: the workload's measurements in the order its results table prints
// them, each checked against the same read without indices.
pub async fn index(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(1_000_000, 20_000);
    let bar = progress(6, "index");

    // The wide sales table, customer keys spread over every file.
    let sales = "index/sales";
    let mut table = create(bench, sales, &r#gen::sales_schema(), 4 * 1024 * 1024).await?;
    table
        .write(r#gen::sales_initial(rows, bench.seed))
        .execute()
        .await?;
    let lhbench = "index/lhbench";
    let mut lh = create(bench, lhbench, &r#gen::merge_schema(), 4 * 1024 * 1024).await?;
    lh.write(r#gen::merge_rows(rows).collect::<Vec<_>>())
        .execute()
        .await?;
    let keyed_name = "index/keys";
    let mut keyed = create(bench, keyed_name, &keys_schema(), 4 * 1024 * 1024).await?;
    let batches: Vec<RecordBatch> = (0..rows as i64)
        .step_by(65_536)
        .map(|s| keys_batch(s, (s + 65_536).min(rows as i64)))
        .collect();
    keyed.write(batches).execute().await?;
    let docs_rows = bench.scaled(200_000, 5_000) as i64;
    let docs = "index/docs";
    let mut text = create(bench, docs, &docs_schema(), 4 * 1024 * 1024).await?;
    let batches: Vec<RecordBatch> = (0..docs_rows)
        .step_by(65_536)
        .map(|s| docs_batch(s, (s + 65_536).min(docs_rows), bench.seed))
        .collect();
    text.write(batches).execute().await?;
    bar.inc(1);

    // Build: create_index end to end.
    let builds = [
        (sales, "customer_id", IndexKind::BTree, rows),
        (lhbench, "value2", IndexKind::BTree, rows),
        (keyed_name, "id", IndexKind::BTree, rows),
        (lhbench, "part", IndexKind::Bitmap, rows),
        (sales, "store_id", IndexKind::Bitmap, rows),
        (docs, "text", IndexKind::FullText, docs_rows as u64),
    ];
    for (name, column, kind, count) in builds {
        let t = match name {
            n if n == sales => &mut table,
            n if n == lhbench => &mut lh,
            n if n == keyed_name => &mut keyed,
            _ => &mut text,
        };
        memory::reset_peak();
        let before = memory::peak_rss();
        let started = Instant::now();
        let info = t.create_index(column).with_kind(kind).execute().await?;
        let elapsed = started.elapsed();
        let peak = memory::peak_rss().saturating_sub(before);
        let summary = Summary::of(&[Sample {
            elapsed,
            counts: Default::default(),
        }]);
        let table_name = name.trim_start_matches("index/");
        reporter.push(
            Record::new(
                "index",
                format!("create {kind} on {table_name}.{column}"),
                summary,
            )
            .throughput(count as f64 / elapsed.as_secs_f64(), "rows/s")
            .bytes_written(info.bytes)
            .field("kind", kind.name())
            .field("rows", count)
            .field("index_bytes", info.bytes)
            .field("peak_rss_delta", peak)
            .note(format!(
                "{count} rows, {} files, index {:.1} MB, peak +{:.0} MB",
                info.files_covered,
                info.bytes as f64 / 1e6,
                peak as f64 / 1e6
            )),
        )?;
    }
    builders_alone(bench, reporter, rows).await?;
    bar.inc(1);

    // Lookups, cold and warm, with and without the index; keys are customers of
    // existing sales.
    let key = |sale: i64| -> i64 {
        let sale = sale % rows as i64;
        let b = r#gen::sales_batch(&[sale], bench.seed);
        b.column(1)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0)
    };
    let keys: Vec<i64> = (0..100).map(|i| key(i * 9_973 + 5)).collect();
    let cases: Vec<(&str, &str, Expr)> = vec![
        (
            sales,
            "point customer_id",
            col("customer_id").eq(lit(key(1))),
        ),
        (
            sales,
            "100-key IN customer_id",
            col("customer_id").is_in(keys),
        ),
        (
            sales,
            "range customer_id (0.1%)",
            col("customer_id")
                .gt_eq(lit(1_000i64))
                .and(col("customer_id").lt(lit(1_050i64))),
        ),
        (sales, "bitmap store_id = 7", col("store_id").eq(lit(7i32))),
        (
            lhbench,
            "point value2",
            col("value2").eq(lit((rows as i64 / 3 * 91).to_string())),
        ),
        (lhbench, "bitmap part = 42", col("part").eq(lit(42i32))),
        (
            keyed_name,
            "point id",
            col("id").eq(lit(key_id(rows as i64 / 3))),
        ),
    ];
    for (name, label, predicate) in &cases {
        for warm in [false, true] {
            let (with, rows_with) = lookups(bench, name, predicate, true, warm).await?;
            let (without, rows_without) = lookups(bench, name, predicate, false, warm).await?;
            if rows_with != rows_without {
                return Err(format!(
                    "{label}: {rows_with} rows with the index, {rows_without} without"
                )
                .into());
            }
            let temp = if warm { "warm" } else { "cold" };
            let speedup = without.p50.as_secs_f64() / with.p50.as_secs_f64();
            reporter.push(
                Record::new("index", format!("{label}, {temp}, index"), with)
                    .field("case", *label)
                    .field("warm", warm)
                    .field("rows", rows_with)
                    .field("speedup", speedup)
                    .note(format!(
                        "{rows_with} rows; {speedup:.1}x the scan without it, {:.2}% of its bytes",
                        100.0 * with.bytes_read as f64 / without.bytes_read.max(1) as f64
                    )),
            )?;
            reporter.push(
                Record::new("index", format!("{label}, {temp}, no index"), without)
                    .field("case", *label)
                    .field("warm", warm)
                    .field("rows", rows_without),
            )?;
        }
    }
    bar.inc(1);

    // Full text against a substring scan.
    for (label, query, needle) in [
        ("rare word", "w15000", " w15000 "),
        ("common word", "w3", " w3 "),
        ("phrase", "\"w1 w2\"", " w1 w2 "),
    ] {
        let measured = bench.measured(docs, 0)?;
        let handle = Table::open_at(measured.location.clone()).await?;
        let mut fts = Vec::new();
        let mut scans = Vec::new();
        let mut found = (0, 0);
        for _ in 0..bench.runs.max(1) {
            let (batches, s) = sample(
                &measured.counter,
                handle.scan().filter(text_match("text", query)).collect(),
            )
            .await?;
            found.0 = batches.iter().map(RecordBatch::num_rows).sum::<usize>();
            fts.push(s);
            let (hits, s) = sample(&measured.counter, async {
                let batches = handle.scan().select(["id", "text"]).collect().await?;
                let mut hits = 0;
                for b in &batches {
                    // Pad with spaces so whole words match, as the analyzer splits them.
                    let padded: StringArray = b
                        .column(1)
                        .as_string::<i32>()
                        .iter()
                        .map(|t| t.map(|t| format!(" {t} ")))
                        .collect();
                    let needle = StringArray::new_scalar(needle);
                    hits += contains(&padded, &needle)?.true_count();
                }
                Ok::<_, BenchError>(hits)
            })
            .await?;
            found.1 = hits;
            scans.push(s);
        }
        if found.0 != found.1 {
            return Err(format!(
                "text_match {query:?} found {} rows, the substring scan {}",
                found.0, found.1
            )
            .into());
        }
        let (fts, scan) = (Summary::of(&fts), Summary::of(&scans));
        reporter.push(
            Record::new("index", format!("text_match {label}, warm"), fts)
                .field("rows", found.0)
                .field("speedup", scan.p50.as_secs_f64() / fts.p50.as_secs_f64())
                .note(format!(
                    "{} rows; {:.1}x the substring scan",
                    found.0,
                    scan.p50.as_secs_f64() / fts.p50.as_secs_f64()
                )),
        )?;
        reporter.push(Record::new(
            "index",
            format!("substring scan {label}, warm"),
            scan,
        ))?;
    }
    bar.inc(1);

    // GDPR delete of one customer, merge-on-read, with and without the index.
    let customer = key(4_242);
    for indexed in [true, false] {
        let mut samples = Vec::new();
        let mut deleted = 0;
        for run in 0..bench.runs {
            let name = format!("index/gdpr-{indexed}-{run}");
            let mut copy = create(bench, &name, &r#gen::sales_schema(), 4 * 1024 * 1024).await?;
            copy.write(r#gen::sales_initial(rows, bench.seed))
                .execute()
                .await?;
            if indexed {
                copy.create_index("customer_id").execute().await?;
            }
            let measured = bench.measured(&name, run)?;
            let mut target = Table::open_at(measured.location.clone()).await?;
            let (outcome, s) = sample(
                &measured.counter,
                target
                    .delete(col("customer_id").eq(lit(customer)))
                    .with_strategy(ChangeStrategy::MergeOnRead)
                    .execute(),
            )
            .await?;
            deleted = outcome.metrics.rows_deleted;
            samples.push(s);
            bench.clear(&name).await?;
        }
        let label = if indexed { "index" } else { "no index" };
        reporter.push(
            Record::new(
                "index",
                format!("GDPR delete, merge-on-read, {label}"),
                Summary::of(&samples),
            )
            .field("indexed", indexed)
            .field("rows_deleted", deleted)
            .note(format!("{deleted} rows deleted")),
        )?;
    }
    bar.inc(1);

    // Appends of 1% with inline maintenance and without an index.
    let append_rows = (rows / 100).max(1_000) as i64;
    for indexed in [true, false] {
        let name = format!("index/append-{indexed}");
        let mut copy = create(bench, &name, &r#gen::sales_schema(), 4 * 1024 * 1024).await?;
        copy.write(r#gen::sales_initial(rows / 10, bench.seed))
            .execute()
            .await?;
        if indexed {
            copy.create_index("customer_id").execute().await?;
        }
        let mut samples = Vec::new();
        for run in 0..bench.runs {
            let start = rows as i64 + run as i64 * append_rows;
            let ids: Vec<i64> = (start..start + append_rows).collect();
            let batch = r#gen::sales_batch(&ids, bench.seed);
            let measured = bench.measured(&name, run)?;
            let mut target = Table::open_at(measured.location.clone()).await?;
            let (_, s) = sample(&measured.counter, target.append([batch])).await?;
            samples.push(s);
        }
        let label = if indexed { "inline BTree" } else { "no index" };
        reporter.push(
            Record::new(
                "index",
                format!("append 1%, {label}"),
                Summary::of(&samples),
            )
            .field("indexed", indexed)
            .throughput(
                append_rows as f64 / Summary::of(&samples).p50.as_secs_f64(),
                "rows/s",
            ),
        )?;
        bench.clear(&name).await?;
    }
    bar.finish_and_clear();
    Ok(())
}

/// Each builder alone, on columns already in memory: one blocking thread (the BTree's
/// sort spreads over every core; the Bitmap stays on one).
async fn builders_alone(
    bench: &Bench,
    reporter: &mut Reporter,
    rows: u64,
) -> Result<(), BenchError> {
    let batches: Vec<RecordBatch> = r#gen::sales_initial(rows, bench.seed).collect();
    let column = |name: &str| -> Vec<ArrayRef> {
        batches
            .iter()
            .filter_map(|b| b.column_by_name(name).cloned())
            .collect()
    };
    let addresses = |arrays: &[ArrayRef]| -> Vec<Vec<u64>> {
        let mut next = 0u64;
        arrays
            .iter()
            .map(|a| {
                let out: Vec<u64> = (next..next + a.len() as u64).collect();
                next += a.len() as u64;
                out
            })
            .collect()
    };
    let count: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    for (label, name) in [("btree", "customer_id"), ("bitmap", "store_id")] {
        let arrays = column(name);
        let addrs = addresses(&arrays);
        let data_type = arrays[0].data_type().clone();
        let label_owned = label.to_string();
        let (elapsed, size) = tokio::task::spawn_blocking(move || -> Result<_, BenchError> {
            let started = Instant::now();
            let bytes = if label_owned == "btree" {
                let mut b = BTreeBuilder::new(&data_type, BTreeOptions::default())?;
                for (a, ad) in arrays.iter().zip(&addrs) {
                    b.push(Arc::clone(a), ad)?;
                }
                b.finish()?.0
            } else {
                let mut b = BitmapBuilder::new(&data_type)?;
                for (a, ad) in arrays.iter().zip(&addrs) {
                    b.push(Arc::clone(a), ad)?;
                }
                b.finish()?.0
            };
            Ok((started.elapsed(), bytes.len()))
        })
        .await??;
        reporter.push(
            Record::new(
                "index",
                match label {
                    "btree" => "btree builder alone (sort on every core)".to_string(),
                    _ => format!("{label} builder alone, one core"),
                },
                Summary::of(&[Sample {
                    elapsed,
                    counts: Default::default(),
                }]),
            )
            .throughput(count as f64 / elapsed.as_secs_f64(), "rows/s")
            .field("rows", count)
            .field("index_bytes", size as u64),
        )?;
    }
    let docs_rows = bench.scaled(200_000, 5_000) as i64;
    let docs: Vec<RecordBatch> = (0..docs_rows)
        .step_by(65_536)
        .map(|s| docs_batch(s, (s + 65_536).min(docs_rows), bench.seed))
        .collect();
    let (elapsed, size) = tokio::task::spawn_blocking(move || -> Result<_, BenchError> {
        let started = Instant::now();
        let mut b = FullTextBuilder::new(FullTextOptions::default())?;
        let mut next = 0u64;
        for d in &docs {
            let a = Arc::clone(d.column(1));
            let ad: Vec<u64> = (next..next + a.len() as u64).collect();
            next += a.len() as u64;
            b.push(&a, &ad)?;
        }
        let bytes = b.finish()?.0;
        Ok((started.elapsed(), bytes.len()))
    })
    .await??;
    reporter.push(
        Record::new(
            "index",
            "fulltext builder alone, one writer thread",
            Summary::of(&[Sample {
                elapsed,
                counts: Default::default(),
            }]),
        )
        .throughput(docs_rows as f64 / elapsed.as_secs_f64(), "docs/s")
        .field("rows", docs_rows)
        .field("index_bytes", size as u64),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_follow_a_seeded_zipf_vocabulary() {
        let a = docs_batch(0, 2_000, 7);
        assert_eq!(a, docs_batch(0, 2_000, 7));
        let text = a.column(1).as_string::<i32>();
        let words: Vec<&str> = text.iter().flatten().flat_map(|t| t.split(' ')).collect();
        assert_eq!(words.len(), 2_000 * WORDS_PER_DOC);
        let count = |w: &str| words.iter().filter(|x| **x == w).count();
        // Zipf: the first rank is far more common than the hundredth.
        assert!(
            count("w1") > 20 * count("w100").max(1),
            "{} {}",
            count("w1"),
            count("w100")
        );
    }
}
