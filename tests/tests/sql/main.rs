//! SQL over Tarn tables through DataFusion (`tarn-datafusion`): queries answered as
//! DuckDB answers them over the same table, filters pushed into Tarn's planner, and
//! INSERT, DELETE, UPDATE, TRUNCATE and MERGE as Tarn commits that DuckDB then reads.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod catalog;
mod merge;
mod queries;
mod statistics;
mod writes;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::UInt64Type;
use datafusion::prelude::SessionContext;
use tarn::Table;
use tarn::expr::{col, lit};
use tarn_datafusion::TarnTableProvider;
use tarn_tests::fixtures::{sales_batch, sales_schema};

/// A sales table at `dir`, partitioned by country, with deletion vectors: ids 0..400 in
/// four appends, then ids that are multiples of 7 deleted (merge-on-read), so scans
/// apply deletion vectors.
async fn sales(dir: &Path) -> Table {
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    for i in 0..4 {
        table
            .append([sales_batch(i * 100, i * 100 + 100)])
            .await
            .unwrap();
    }
    let sevens: Vec<i64> = (0..400).step_by(7).collect();
    table
        .delete(col("id").is_in(sevens))
        .execute()
        .await
        .unwrap();
    let _ = lit(0);
    table
}

/// A session with `table` registered as `t` and Tarn's functions.
fn session(table: Table) -> (SessionContext, TarnTableProvider) {
    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);
    let provider = TarnTableProvider::new(table);
    ctx.register_table("t", Arc::new(provider.clone())).unwrap();
    (ctx, provider)
}

/// The rows of `sql` run in `ctx`.
async fn run(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The `count` a DML statement returns: the rows it inserted, changed or deleted.
fn count(batches: &[RecordBatch]) -> u64 {
    batches[0]
        .column_by_name("count")
        .unwrap()
        .as_primitive::<UInt64Type>()
        .value(0)
}
