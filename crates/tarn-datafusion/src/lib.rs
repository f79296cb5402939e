//! Tarn tables in DataFusion.
//!
//! [`TarnTableProvider`] makes a Tarn table a DataFusion table: a query's projection,
//! limit and filters go into Tarn's planner (partition values, file statistics, row
//! groups, index lookups, deletion vectors), each filter Tarn can express is reported
//! `Exact` and the rest stay with DataFusion; the scan is read in one part per output
//! partition; `EXPLAIN` shows the files planned and skipped. `INSERT INTO` and `INSERT
//! OVERWRITE`, `DELETE`, `UPDATE` and `TRUNCATE` run as Tarn operations (the table's
//! copy-on-write or merge-on-read strategy and its constraints), one commit per
//! statement; [`register`] installs the check that refuses a DELETE or UPDATE whose
//! subqueries DataFusion would drop. `text_match(column, 'query')` searches a full-text
//! index. `docs/sql.md` says what is pushed down and what is refused.
//!
//! ```no_run
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use tarn_datafusion::TarnTableProvider;
//!
//! # async fn demo() -> datafusion::common::Result<()> {
//! let ctx = SessionContext::new();
//! tarn_datafusion::register(&ctx);
//! let sales = TarnTableProvider::open("/data/sales").await.map_err(tarn_datafusion::to_datafusion)?;
//! ctx.register_table("sales", Arc::new(sales))?;
//! ctx.sql("SELECT country, sum(amount) FROM sales GROUP BY country").await?.show().await?;
//! ctx.sql("DELETE FROM sales WHERE customer = 'c-42'").await?.collect().await?;
//! # Ok(())
//! # }
//! ```

mod catalog;
mod dml;
mod dynamic;
mod expr;
mod factory;
mod guard;
mod merge;
mod provider;
mod scan;
mod search;
mod selectivity;
mod shared;
mod statistics;
mod travel;
mod wait;

use datafusion::common::DataFusionError;
use datafusion::prelude::SessionContext;

pub use catalog::{ROOT_SCHEMA, TarnCatalogProvider, TarnSchemaProvider};
pub use factory::{TARN_FORMAT, TarnTableFactory};
pub use provider::TarnTableProvider;
pub use search::{TEXT_MATCH, text_match_udf};
pub use travel::{TARN_TABLE, TarnTableFunction};

// docs/sql.md's example compiles as a doc test, so it cannot drift from the API.
#[cfg(doctest)]
mod doc_examples {
    #[doc = include_str!("../../../docs/sql.md")]
    struct Sql;
}

/// Sets `ctx` up for Tarn tables: the `text_match` function, the `tarn_table` time-travel
/// table function, `CREATE EXTERNAL TABLE ... STORED AS TARN`, and the check that refuses
/// DELETE and UPDATE statements on Tarn tables whose WHERE or SET reaches other rows
/// (subqueries, `UPDATE ... FROM`), which DataFusion would hand over incompletely. Without
/// it, DELETE and UPDATE on Tarn tables are refused. It also turns off DataFusion's
/// MIN/MAX aggregate dynamic filter, which 55.2 can get wrong; Tarn's scans skip files by
/// run-time filters only in a session where it is off.
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(text_match_udf());
    ctx.register_udtf(TARN_TABLE, std::sync::Arc::new(TarnTableFunction));
    ctx.state_ref().write().table_factories_mut().insert(
        TARN_FORMAT.to_string(),
        std::sync::Arc::new(TarnTableFactory),
    );
    ctx.add_analyzer_rule(std::sync::Arc::new(guard::DmlGuard));
    // DataFusion 55.2's MIN/MAX aggregate filter can drop rows an aggregate needs
    // (apache/datafusion#24816); with it off, Tarn's scans take the filters joins fill.
    ctx.state_ref()
        .write()
        .config_mut()
        .options_mut()
        .optimizer
        .enable_aggregate_dynamic_filter_pushdown = false;
}

/// A Tarn error as DataFusion's, keeping it as the source so callers can downcast it.
pub fn to_datafusion(error: tarn::Error) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

/// The live rows of a data file: its `numRecords` less the rows its deletion vector
/// marks; `None` without statistics.
pub(crate) fn live_rows(add: &tarn::protocol::Add) -> Option<u64> {
    let records = add.stats.as_ref()?.num_records()?;
    let deleted = add.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality);
    records.checked_sub(u64::try_from(deleted).ok()?)
}
