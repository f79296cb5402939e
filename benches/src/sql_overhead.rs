//! The `sql-overhead` workload: the LHBench merge queries on one table through Tarn's
//! own scan ([`Query::run`](crate::queries::Query::run)) and through SQL
//! (`tarn-datafusion`'s provider in a DataFusion session), warm, in alternating order,
//! so the ratio is what SQL costs over the API on the same files. Each SQL answer must
//! equal the API's.

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};
use datafusion::prelude::{SessionConfig, SessionContext};
use tarn::Table;
use tarn_datafusion::TarnTableProvider;

use crate::queries::MERGE_QUERIES;
use crate::report::{Record, Reporter};
use crate::workloads::{create, settle};
use crate::{Bench, BenchError, Sample, Summary, r#gen, sample};

/// Rows of the table at scale 1.
const ROWS: u64 = 10_000_000;

/// The single value `sql` returns, as a double.
async fn sql_value(ctx: &SessionContext, sql: &str) -> Result<f64, BenchError> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| format!("{sql}: no rows"))?;
    let doubles = cast(batch.column(0), &DataType::Float64)?;
    let doubles = doubles.as_primitive::<Float64Type>();
    Ok(if doubles.is_null(0) {
        0.0
    } else {
        doubles.value(0)
    })
}

/// Whether two answers are one value (sums of doubles may differ in the last bits with
/// the order they were added in).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// `sql-overhead`: see the module docs.
///
/// Fails when the table cannot be written or read, or SQL and the API disagree.
pub async fn sql_overhead(bench: &Bench, reporter: &mut Reporter) -> Result<(), BenchError> {
    let rows = bench.scaled(ROWS, 1_000);
    let name = format!("sql-overhead/{rows}");
    let mut table = create(bench, &name, &r#gen::merge_schema(), 128 * 1024 * 1024).await?;
    let outcome = table.write(r#gen::merge_rows(rows)).execute().await?;
    settle(outcome.commit.checkpoint).await?;
    let files = table.snapshot().files().len();

    let measured = bench.measured(&name, 0)?;
    let api = Table::open_at(measured.location.clone()).await?;
    let ctx = SessionContext::new_with_config(SessionConfig::new());
    tarn_datafusion::register(&ctx);
    let provider = TarnTableProvider::new(Table::open_at(measured.location.clone()).await?);
    ctx.register_table("t", Arc::new(provider))?;

    for query in MERGE_QUERIES {
        let sql = query.statement();
        // One untimed run each, so both paths start warm (the OS cache holds the files).
        let expected = query.run(api.snapshot()).await?;
        let answered = sql_value(&ctx, sql).await?;
        if !same(expected, answered) {
            return Err(format!("{sql}: SQL answered {answered}, the API {expected}").into());
        }
        let mut through_api: Vec<Sample> = Vec::new();
        let mut through_sql: Vec<Sample> = Vec::new();
        for run in 0..bench.runs {
            // Alternating which goes first, so neither always runs on the other's cache.
            for sql_first in [run % 2 == 1, run % 2 == 0] {
                if sql_first {
                    let (_, s) = sample(&measured.counter, sql_value(&ctx, sql)).await?;
                    through_sql.push(s);
                } else {
                    let (_, s) = sample(&measured.counter, query.run(api.snapshot())).await?;
                    through_api.push(s);
                }
            }
        }
        let api_summary = Summary::of(&through_api);
        let sql_summary = Summary::of(&through_sql);
        let ratio = sql_summary.p50.as_secs_f64() / api_summary.p50.as_secs_f64();
        for (path, summary) in [("API", api_summary), ("SQL", sql_summary)] {
            reporter.push(
                Record::new("sql-overhead", format!("{}, {path}", query.sql()), summary)
                    .throughput(rows as f64 / summary.p50.as_secs_f64(), "rows/s")
                    .field("rows", rows)
                    .field("files", files)
                    .field("path", path)
                    .field("sql_vs_api", ratio)
                    .note(format!("{sql}: SQL takes {ratio:.2}x the API's median")),
            )?;
        }
    }
    bench.clear(&name).await?;
    Ok(())
}
