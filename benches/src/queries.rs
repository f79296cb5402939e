//! The read queries the workloads time, run through Tarn's scan with the narrowest
//! projection each needs (as an engine on top of Tarn would push it down): the LHBench
//! merge queries and the mutation benchmark's reads.

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::kernels::aggregate::sum;
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use futures::TryStreamExt;
use tarn::Snapshot;
use tarn::expr::{Expr, col, lit};

/// A string that is not a number is an error, as in SQL's `CAST`, not a null.
const STRICT: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: arrow::util::display::FormatOptions::new(),
};

/// A query: its name, the columns it reads, an optional filter, and how it folds rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// `SELECT COUNT(*)`.
    Count,
    /// `SELECT COUNT(*) WHERE key IS NOT NULL`.
    CountKeyNotNull,
    /// `SELECT SUM(key)`.
    SumKey,
    /// `SELECT SUM(value)`.
    SumValue,
    /// `SELECT SUM(value) WHERE part < 10`: 1% of the LHBench rows, by a column whose
    /// values cycle through every page (a selective scan).
    SumValueFewParts,
    /// `SELECT SUM(value) WHERE part >= 0`: every row, reading the same columns as
    /// [`Query::SumValueFewParts`] (the full scan it is measured against).
    SumValueAllParts,
    /// `SELECT SUM(CAST(value2 AS DOUBLE))`.
    SumValue2,
    /// `SELECT COUNT(*)` of the sales table.
    CountSales,
    /// `SELECT SUM(net_paid)` of the sales table.
    SumNetPaid,
}

/// The five LHBench merge queries.
pub const MERGE_QUERIES: [Query; 5] = [
    Query::Count,
    Query::CountKeyNotNull,
    Query::SumKey,
    Query::SumValue,
    Query::SumValue2,
];

/// The queries `compare` runs on every table: the merge queries and a selective scan
/// beside the full scan of the same columns.
pub const COMPARE_QUERIES: [Query; 7] = [
    Query::Count,
    Query::CountKeyNotNull,
    Query::SumKey,
    Query::SumValue,
    Query::SumValue2,
    Query::SumValueFewParts,
    Query::SumValueAllParts,
];

impl Query {
    /// The query as SQL, for tables and charts.
    pub fn sql(self) -> &'static str {
        match self {
            Query::Count => "COUNT(*)",
            Query::CountKeyNotNull => "COUNT(*) WHERE key IS NOT NULL",
            Query::SumKey => "SUM(key)",
            Query::SumValue => "SUM(value)",
            Query::SumValueFewParts => "SUM(value) WHERE part < 10",
            Query::SumValueAllParts => "SUM(value) WHERE part >= 0",
            Query::SumValue2 => "SUM(CAST(value2 AS DOUBLE))",
            Query::CountSales => "COUNT(*)",
            Query::SumNetPaid => "SUM(net_paid)",
        }
    }

    /// The query as a statement over a table named `t`, as the SQL engines run it.
    pub fn statement(self) -> &'static str {
        match self {
            Query::Count | Query::CountSales => "SELECT COUNT(*) FROM t",
            Query::CountKeyNotNull => "SELECT COUNT(*) FROM t WHERE key IS NOT NULL",
            Query::SumKey => "SELECT SUM(key) FROM t",
            Query::SumValue => "SELECT SUM(value) FROM t",
            Query::SumValueFewParts => "SELECT SUM(value) FROM t WHERE part < 10",
            Query::SumValueAllParts => "SELECT SUM(value) FROM t WHERE part >= 0",
            Query::SumValue2 => "SELECT SUM(CAST(value2 AS DOUBLE)) FROM t",
            Query::SumNetPaid => "SELECT SUM(net_paid) FROM t",
        }
    }

    fn column(self) -> &'static str {
        match self {
            Query::Count | Query::CountKeyNotNull | Query::SumKey => "key",
            Query::SumValue | Query::SumValueFewParts | Query::SumValueAllParts => "value",
            Query::SumValue2 => "value2",
            Query::CountSales => "sale_id",
            Query::SumNetPaid => "net_paid",
        }
    }

    fn filter(self) -> Option<Expr> {
        match self {
            Query::CountKeyNotNull => Some(col("key").is_not_null()),
            Query::SumValueFewParts => Some(col("part").lt(lit(10))),
            Query::SumValueAllParts => Some(col("part").gt_eq(lit(0))),
            _ => None,
        }
    }

    fn fold(self, batch: &RecordBatch) -> Result<f64, crate::BenchError> {
        let column = batch.column(0);
        Ok(match self {
            Query::Count | Query::CountSales | Query::CountKeyNotNull => {
                return Err(format!("{} is counted by Scan::count, not folded", self.sql()).into());
            }
            Query::SumKey => sum(column.as_primitive::<Int64Type>()).unwrap_or(0) as f64,
            Query::SumValue
            | Query::SumValueFewParts
            | Query::SumValueAllParts
            | Query::SumNetPaid => sum(column.as_primitive::<Float64Type>()).unwrap_or(0.0),
            Query::SumValue2 => {
                let doubles = cast_with_options(column, &DataType::Float64, &STRICT)
                    .map_err(|e| format!("CAST(value2 AS DOUBLE): {e}"))?;
                sum(doubles.as_primitive::<Float64Type>()).unwrap_or(0.0)
            }
        })
    }

    /// Runs the query on `snapshot`, returning its single value. Counts go through
    /// [`tarn::Scan::count`], which answers from the log where it can.
    ///
    /// Fails when the scan fails.
    pub async fn run(self, snapshot: &Snapshot) -> Result<f64, crate::BenchError> {
        if matches!(
            self,
            Query::Count | Query::CountSales | Query::CountKeyNotNull
        ) {
            let mut scan = snapshot.scan();
            if let Some(filter) = self.filter() {
                scan = scan.filter(filter);
            }
            return Ok(scan.count().await? as f64);
        }
        // Strings come back as views, as DataFusion reads them.
        let mut scan = snapshot
            .scan()
            .select([self.column()])
            .with_string_views(true)
            .with_batch_size(64 * 1024);
        if let Some(filter) = self.filter() {
            scan = scan.filter(filter);
        }
        // As an engine runs a scan: planned once, read in a part per core, each part's
        // batches folded on the task that decodes them, so a batch is cast while it is
        // still in that core's cache.
        let plan = std::sync::Arc::new(scan.plan().await?);
        let scan = std::sync::Arc::new(scan);
        let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
        let tasks = (0..parts).map(|part| {
            let (scan, plan) = (std::sync::Arc::clone(&scan), std::sync::Arc::clone(&plan));
            tokio::spawn(async move {
                scan.execute_part(&plan, part, parts)
                    .await?
                    .map_err(crate::BenchError::from)
                    .try_fold(
                        0.0,
                        |total, batch| async move { Ok(total + self.fold(&batch)?) },
                    )
                    .await
            })
        });
        let mut total = 0.0;
        for task in futures::future::join_all(tasks).await {
            total += task??;
        }
        Ok(total)
    }
}
