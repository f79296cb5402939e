//! LHBench's refresh for `tarn-bench tpcds`: merges into `store_sales` and
//! `store_returns` (updates, deletes and inserts keyed on item and ticket), made by Tarn
//! through SQL under copy-on-write and under merge-on-read and by delta-rs, each engine
//! on a copy of its own, then the queries that read those two tables again on every
//! copy, DuckDB reading Tarn's merge-on-read copy (deletion vectors and all).
//!
//! The copies share the loaded data files through hard links (no engine rewrites a file
//! in place); each copy's log is its own. Tarn's two copies come from its copy of the
//! tables (with its index), delta-rs's from the tables as loaded.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatchIterator};
use arrow::datatypes::UInt64Type;
use datafusion::prelude::SessionContext;
use tarn::Table;
use tarn_datafusion::TarnTableProvider;
use tarn_store::RequestCounts;

use super::{
    Check, EngineRuns, Query, QueryRun, check_answers, context, execute, load, path, peer,
    peer_runs, report, run_tarn,
};
use crate::report::{Record, Reporter};
use crate::{BenchError, Sample, Summary, memory};

/// One refresh merge: the table, its key (item and ticket) and the column its updates
/// change.
struct Merge {
    table: &'static str,
    item: &'static str,
    ticket: &'static str,
    quantity: &'static str,
}

const MERGES: [Merge; 2] = [
    Merge {
        table: "store_sales",
        item: "ss_item_sk",
        ticket: "ss_ticket_number",
        quantity: "ss_quantity",
    },
    Merge {
        table: "store_returns",
        item: "sr_item_sk",
        ticket: "sr_ticket_number",
        quantity: "sr_return_quantity",
    },
];

/// Whether the refresh merges into `table`.
pub(super) fn merges_into(table: &str) -> bool {
    MERGES.iter().any(|m| m.table == table)
}

/// Tarn's copy refreshed under copy-on-write.
const TARN_COW: &str = "tarn-cow";
/// Tarn's copy refreshed under merge-on-read.
const TARN_MOR: &str = "tarn-mor";
/// delta-rs's copy.
const DELTARS: &str = "deltars";

/// What one engine's merge did to one table.
#[derive(Debug, Clone, serde::Deserialize)]
struct Merged {
    table: String,
    ms: f64,
    /// Target rows updated, deleted and inserted.
    rows: u64,
    peak_rss_mib: f64,
    #[serde(skip)]
    counts: RequestCounts,
}

/// The queries' runs before the refresh, to measure the slowdown against.
pub(super) struct Before<'a> {
    pub tarn: &'a EngineRuns,
    pub deltars: &'a EngineRuns,
}

/// Copies Tarn's tables (`tarn_tables`, with its index) twice and the loaded `tables`
/// once, refreshes each copy with its engine and runs the
/// `queries` that read `store_sales` or `store_returns` again on every copy, `runs`
/// times each; reports the merges and the queries beside `before`.
///
/// Fails when a copy, a merge or a peer's process fails, or when the engines' merges
/// changed different numbers of rows.
pub(super) async fn refresh(
    root: &Path,
    tables: &Path,
    tarn_tables: &Path,
    queries: &[Query],
    runs: usize,
    before: Before<'_>,
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    let dir = root.join("refresh");
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("removing the last refresh at {}: {e}", dir.display()).into());
        }
        _ => {}
    }
    let out = dir.join("out");
    let sources = out.join("sources");
    std::fs::create_dir_all(&sources)?;
    for copy in [TARN_COW, TARN_MOR] {
        load::link(tarn_tables, &dir.join(copy))?;
    }
    load::link(tables, &dir.join(DELTARS))?;
    println!("refresh: sources from the loaded tables");
    write_sources(tables, &sources).await?;
    set_strategy(&dir.join(TARN_COW), "copy-on-write").await?;
    set_strategy(&dir.join(TARN_MOR), "merge-on-read").await?;

    println!("refresh: merges");
    let mut merges = Vec::new();
    for (name, copy) in [
        ("Tarn copy-on-write", TARN_COW),
        ("Tarn merge-on-read", TARN_MOR),
    ] {
        merges.push((name, merge_tarn(&dir.join(copy), &sources).await?));
    }
    let python = tarn_test_support::python::python();
    let script = super::script();
    let stdout = peer(
        python,
        &script,
        &["refresh", path(&dir.join(DELTARS))?, path(&sources)?],
    )
    .await?;
    let deltars = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|line| {
            serde_json::from_str(line)
                .map_err(|e| format!("delta-rs refresh printed {line:?}: {e}"))
        })
        .collect::<Result<Vec<Merged>, _>>()?;
    merges.push(("delta-rs", deltars));
    same_rows(&merges)?;
    same_tables(&dir).await?;
    for (engine, merged) in &merges {
        for m in merged {
            println!("  {engine}: {} {} rows in {:.0} ms", m.table, m.rows, m.ms);
        }
    }

    let touched: Vec<Query> = queries
        .iter()
        .filter(|q| MERGES.iter().any(|m| load::reads(&q.sql, m.table)))
        .cloned()
        .collect();
    std::fs::write(out.join("queries.json"), serde_json::to_vec(&touched)?)?;
    println!(
        "refresh: the {} queries reading store_sales or store_returns again",
        touched.len()
    );
    let (mor, mor_answers) =
        run_tarn("Tarn merge-on-read", &dir.join(TARN_MOR), &touched, runs).await?;
    let (cow, cow_answers) =
        run_tarn("Tarn copy-on-write", &dir.join(TARN_COW), &touched, runs).await?;
    let runs_text = runs.to_string();
    let duckdb = tarn_test_support::duckdb::python();
    let (mor_dir, deltars_dir) = (dir.join(TARN_MOR), dir.join(DELTARS));
    let args = [path(&mor_dir)?, path(&out)?, &runs_text];
    let duck = peer_runs("DuckDB", duckdb, &script, "duckdb", &args, &touched).await?;
    let args = [path(&deltars_dir)?, path(&out)?, &runs_text];
    let deltars = peer_runs("delta-rs", python, &script, "deltars", &args, &touched).await?;

    let mor_checks = check_answers(&touched, &mor_answers, &out.join("duckdb"));
    let cow_checks = check_answers(&touched, &cow_answers, &out.join("duckdb"));
    report_merges(&merges, reporter)?;
    report(
        &touched,
        &[
            (&mor, Some(&mor_checks)),
            (&cow, Some(&cow_checks)),
            (&deltars, None),
            (&duck, None),
        ],
        " after refresh",
        reporter,
    )?;
    let after = After {
        mor: &mor,
        cow: &cow,
        deltars: &deltars,
        duck: &duck,
        mor_checks: &mor_checks,
        cow_checks: &cow_checks,
    };
    let table = format!(
        "{}\n{}",
        merges_markdown(&merges),
        after_markdown(&touched, &before, &after)
    );
    println!("\n{table}");
    std::fs::write(out.join("refresh.md"), &table)?;
    super::chart::cumulative(
        &out.join("refresh.svg"),
        "After LHBench's refresh: cumulative query time",
        &touched,
        &[
            ("Tarn before", before.tarn),
            ("Tarn after, merge-on-read", &mor),
            ("Tarn after, copy-on-write", &cow),
            ("delta-rs before", before.deltars),
            ("delta-rs after", &deltars),
            ("DuckDB after (MoR copy)", &duck),
        ],
    )?;
    println!("written to {}", out.join("refresh.md").display());
    Ok(())
}

/// Writes each merge's source as the Tarn table `sources/<table>`, and `sources/merges.json`
/// saying how to apply it (the delta-rs peer reads both). A source holds, by ticket
/// number: updates (ticket % 100 = 1, quantity + 1), deletes (ticket % 1000 = 2) and
/// inserts (the rows of ticket % 100 = 3 under their ticket plus the largest ticket, so
/// no row has it), marked by an `op` column of `U`, `D` or `I`.
async fn write_sources(tables: &Path, sources: &Path) -> Result<(), BenchError> {
    let (ctx, _) = context(tables).await?;
    let mut specs = Vec::new();
    for m in &MERGES {
        let columns = columns(&ctx, m.table).await?;
        let select = |column: &str, expr: String| {
            columns
                .iter()
                .map(|c| match c == column {
                    true => format!("{expr} AS {c}"),
                    false => c.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (t, ticket, quantity) = (m.table, m.ticket, m.quantity);
        let sql = format!(
            "SELECT {}, 'U' AS op FROM {t} WHERE {ticket} % 100 = 1 \
             UNION ALL SELECT {}, 'D' AS op FROM {t} WHERE {ticket} % 1000 = 2 \
             UNION ALL SELECT {}, 'I' AS op FROM {t} WHERE {ticket} % 100 = 3",
            select(quantity, format!("CAST({quantity} + 1 AS INT)")),
            columns.join(", "),
            select(
                ticket,
                format!("{ticket} + (SELECT MAX({ticket}) FROM {t})")
            ),
        );
        let frame = ctx.sql(&sql).await?;
        let schema = Arc::new(frame.schema().as_arrow().clone());
        let batches = frame.collect().await?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), Arc::clone(&schema));
        Table::create(path(&sources.join(t))?)
            .with_arrow_schema(&schema)
            .execute_reader(reader)
            .await?;
        specs.push(serde_json::json!({
            "table": t,
            "keys": [m.item, m.ticket],
            "set": quantity,
            "columns": columns,
        }));
    }
    std::fs::write(sources.join("merges.json"), serde_json::to_vec(&specs)?)?;
    Ok(())
}

/// The column names of the table registered as `table`.
async fn columns(ctx: &SessionContext, table: &str) -> Result<Vec<String>, BenchError> {
    let frame = ctx.table(table).await?;
    Ok(frame
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect())
}

/// Sets the refreshed tables of the copy at `copy` to `strategy` (merge-on-read turns
/// deletion vectors on).
async fn set_strategy(copy: &Path, strategy: &str) -> Result<(), BenchError> {
    for m in &MERGES {
        let mut table = Table::open(path(&copy.join(m.table))?).await?;
        let mut properties = vec![(tarn::protocol::properties::DML_STRATEGY, strategy)];
        if strategy == "merge-on-read" {
            properties.push(("delta.enableDeletionVectors", "true"));
        }
        let _outcome = table.set_properties(properties).await?;
    }
    Ok(())
}

/// The refresh MERGE of `m` from the source registered as `src`.
fn merge_sql(m: &Merge, columns: &[String]) -> String {
    let (item, ticket, quantity) = (m.item, m.ticket, m.quantity);
    let values: Vec<String> = columns.iter().map(|c| format!("s.{c}")).collect();
    format!(
        "MERGE INTO {} AS t USING src AS s \
         ON t.{item} = s.{item} AND t.{ticket} = s.{ticket} \
         WHEN MATCHED AND s.op = 'D' THEN DELETE \
         WHEN MATCHED THEN UPDATE SET {quantity} = s.{quantity} \
         WHEN NOT MATCHED THEN INSERT ({}) VALUES ({})",
        m.table,
        columns.join(", "),
        values.join(", ")
    )
}

/// Tarn's merges through SQL on the copy at `copy`, one statement (one commit) per
/// table, timed from planning to the commit.
async fn merge_tarn(copy: &Path, sources: &Path) -> Result<Vec<Merged>, BenchError> {
    let mut merged = Vec::new();
    for m in &MERGES {
        let (ctx, counter) = context(copy).await?;
        let source = Table::open(path(&sources.join(m.table))?).await?;
        ctx.register_table("src", Arc::new(TarnTableProvider::new(source)))?;
        let columns = columns(&ctx, m.table).await?;
        let sql = merge_sql(m, &columns);
        memory::reset_peak();
        counter.reset();
        let started = Instant::now();
        let batches = execute(&ctx, &sql).await?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let rows = batches
            .first()
            .filter(|b| b.num_rows() == 1 && b.num_columns() == 1)
            .and_then(|b| b.column(0).as_primitive_opt::<UInt64Type>())
            .map(|c| c.value(0))
            .ok_or_else(|| format!("MERGE INTO {} gave no count", m.table))?;
        merged.push(Merged {
            table: m.table.to_string(),
            ms,
            rows,
            peak_rss_mib: memory::peak_rss() as f64 / (1 << 20) as f64,
            counts: counter.take(),
        });
    }
    Ok(merged)
}

/// Fails unless every engine's merge changed as many rows of each table.
fn same_rows(merges: &[(&str, Vec<Merged>)]) -> Result<(), BenchError> {
    let rows = |merged: &[Merged]| -> BTreeMap<String, u64> {
        merged.iter().map(|m| (m.table.clone(), m.rows)).collect()
    };
    let first = rows(&merges[0].1);
    for (engine, merged) in &merges[1..] {
        if rows(merged) != first {
            return Err(format!(
                "the refresh merges differ: {} changed {first:?} rows, {engine} {:?}",
                merges[0].0,
                rows(merged)
            )
            .into());
        }
    }
    Ok(())
}

/// Fails unless the three refreshed copies hold the same rows by a fingerprint of each
/// refreshed table (rows, and the sums of the updated column, the tickets and the
/// items), read by Tarn: a merge that updated the rows it should delete would change as
/// many rows as one that deleted them, but not leave the same sums.
async fn same_tables(dir: &Path) -> Result<(), BenchError> {
    for m in &MERGES {
        let (t, quantity, ticket, item) = (m.table, m.quantity, m.ticket, m.item);
        let sql = format!("SELECT COUNT(*), SUM({quantity}), SUM({ticket}), SUM({item}) FROM {t}");
        let mut seen: Vec<(&str, String)> = Vec::new();
        for copy in [TARN_COW, TARN_MOR, DELTARS] {
            let table = Table::open(path(&dir.join(copy).join(t))?).await?;
            let ctx = SessionContext::new();
            ctx.register_table(t, Arc::new(TarnTableProvider::new(table)))?;
            let batches = execute(&ctx, &sql).await?;
            let text = arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
            seen.push((copy, text));
        }
        if seen.iter().any(|(_, text)| *text != seen[0].1) {
            return Err(format!("the refreshed copies of {t} differ: {seen:?}").into());
        }
    }
    Ok(())
}

/// One JSON record per engine and merge.
fn report_merges(
    merges: &[(&str, Vec<Merged>)],
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    for (engine, merged) in merges {
        for m in merged {
            let sample = Sample {
                elapsed: Duration::from_secs_f64(m.ms / 1e3),
                counts: m.counts,
            };
            reporter.push(
                Record::new(
                    "tpcds",
                    format!("refresh {} {engine}", m.table),
                    Summary::of(&[sample]),
                )
                .throughput(m.rows as f64 / (m.ms / 1e3).max(1e-9), "rows/s")
                .field("engine", *engine)
                .field("rows", m.rows)
                .field("peak_rss_mib", m.peak_rss_mib),
            )?;
        }
    }
    Ok(())
}

/// The merges' table: time, rows changed and peak memory per engine and table.
fn merges_markdown(merges: &[(&str, Vec<Merged>)]) -> String {
    let mut out = String::from(
        "| merge | engine | rows changed | ms | peak MiB |\n| --- | --- | ---: | ---: | ---: |\n",
    );
    for m in &MERGES {
        for (engine, merged) in merges {
            if let Some(done) = merged.iter().find(|d| d.table == m.table) {
                out.push_str(&format!(
                    "| {} | {engine} | {} | {:.0} | {:.0} |\n",
                    m.table, done.rows, done.ms, done.peak_rss_mib
                ));
            }
        }
    }
    out
}

/// The queries' runs after the refresh.
struct After<'a> {
    mor: &'a EngineRuns,
    cow: &'a EngineRuns,
    deltars: &'a EngineRuns,
    duck: &'a EngineRuns,
    mor_checks: &'a BTreeMap<u32, Check>,
    cow_checks: &'a BTreeMap<u32, Check>,
}

/// Per query: each engine's median before and after, the slowdowns, and whether Tarn's
/// answers after are DuckDB's; then totals over the queries every engine ran.
fn after_markdown(queries: &[Query], before: &Before<'_>, after: &After<'_>) -> String {
    let ms = |engine: &EngineRuns, nr: u32| engine.runs.get(&nr).and_then(QueryRun::median);
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    };
    let check = |checks: &BTreeMap<u32, Check>, nr: u32| match checks.get(&nr) {
        Some(Check::Same) => "same",
        Some(Check::Differs) => "differs",
        _ => "-",
    };
    let mut out = String::from(
        "| query | Tarn before | Tarn MoR after | MoR / before | Tarn CoW after | \
         CoW / before | delta-rs before | delta-rs after | delta-rs after / before | \
         DuckDB after (MoR copy) | answers MoR, CoW |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    // Tarn before, MoR, CoW, delta-rs before, delta-rs after, DuckDB.
    let mut totals = [0.0f64; 6];
    let mut counted = 0;
    for q in queries {
        let row = [
            ms(before.tarn, q.nr),
            ms(after.mor, q.nr),
            ms(after.cow, q.nr),
            ms(before.deltars, q.nr),
            ms(after.deltars, q.nr),
            ms(after.duck, q.nr),
        ];
        if row.iter().all(Option::is_some) {
            counted += 1;
            for (total, v) in totals.iter_mut().zip(row) {
                *total += v.unwrap_or(0.0);
            }
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}, {} |\n",
            q.name(),
            cell(row[0]),
            cell(row[1]),
            ratio(row[1], row[0]),
            cell(row[2]),
            ratio(row[2], row[0]),
            cell(row[3]),
            cell(row[4]),
            ratio(row[4], row[3]),
            cell(row[5]),
            check(after.mor_checks, q.nr),
            check(after.cow_checks, q.nr),
        ));
    }
    let [tarn, mor, cow, d_before, d_after, duck] = totals;
    out.push_str(&format!(
        "\nTotal over the {counted} queries every engine ran before and after: Tarn {tarn:.0} ms \
         before, {mor:.0} ms after the merge-on-read refresh ({:.2}x), {cow:.0} ms after the \
         copy-on-write one ({:.2}x); delta-rs {d_before:.0} ms before, {d_after:.0} ms after \
         ({:.2}x); DuckDB {duck:.0} ms on the merge-on-read copy. Peak memory while \
         querying after: Tarn {:.0} MiB (MoR), delta-rs {:.0} MiB, DuckDB {:.0} MiB.\n",
        mor / tarn.max(1e-9),
        cow / tarn.max(1e-9),
        d_after / d_before.max(1e-9),
        after.mor.peak_mib,
        after.deltars.peak_mib,
        after.duck.peak_mib,
    ));
    let same =
        |checks: &BTreeMap<u32, Check>| checks.values().filter(|c| **c == Check::Same).count();
    out.push_str(&format!(
        "Answers the same as DuckDB's on the merge-on-read copy: Tarn MoR {} of {n}, \
         Tarn CoW {} of {n}.\n",
        same(after.mor_checks),
        same(after.cow_checks),
        n = queries.len(),
    ));
    out
}
