//! `COUNT(*)` from the log: a file's live rows are its `numRecords` statistic minus its
//! deletion vector's cardinality, so a count with no predicate, or one on partition
//! columns only, reads no data object; nor does a file whose statistics show that every
//! row meets the predicate. Other files (and files written without statistics) are read,
//! decoding only the columns the predicate needs.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, Schema};
use futures::{StreamExt, TryStreamExt};

use super::{PlannedFile, Scan, ScanContext, file};
use crate::error::{Error, Result};
use crate::expr::{ColumnName, Expr, Scalar, StatsView, evaluate_predicate, may_match};
use crate::stats::{AnyStats, FileStatsView, live_rows};

/// How a count was answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountOutcome {
    /// Rows that match.
    pub rows: u64,
    /// Files counted from their statistics in the log, with no data read.
    pub files_from_log: usize,
    /// Files whose rows had to be read (no `numRecords`, or a predicate on data columns).
    pub files_read: usize,
}

impl Scan {
    /// Counts the rows the scan would return (`SELECT COUNT(*)`), from the log when it
    /// can: with no predicate, or one on partition columns only, each file counts as its
    /// `numRecords` minus its deletion vector's cardinality and no data object is read;
    /// so does a file whose statistics show every row meets the predicate. Other files
    /// are read with no columns decoded beyond those the predicate needs. The projection
    /// does not matter.
    ///
    /// Fails as [`plan`](Self::plan) and [`execute`](Self::execute) do.
    pub async fn count(self) -> Result<u64> {
        Ok(self.count_outcome().await?.rows)
    }

    /// [`count`](Self::count), saying how many files the log answered for and how many
    /// were read.
    ///
    /// Fails as [`count`](Self::count) does.
    pub async fn count_outcome(self) -> Result<CountOutcome> {
        let scan = self.select(Vec::<String>::new());
        let ctx = Arc::new(scan.context()?);
        // Partition values, statistics and indices prune first, as for a scan.
        let (files, _) = scan.plan_files(&ctx).await?;
        let mut outcome = CountOutcome::default();
        let mut unread = Vec::new();
        for planned in files {
            match count_from_log(&ctx, &planned)? {
                Some(rows) => {
                    outcome.rows += rows;
                    outcome.files_from_log += 1;
                }
                None => unread.push(planned),
            }
        }
        outcome.files_read = unread.len();
        let concurrency = scan.concurrency_for(&unread);
        outcome.rows += futures::stream::iter(unread)
            .map(|planned| {
                let ctx = Arc::clone(&ctx);
                async move {
                    file::read_file(ctx, planned, 1)
                        .await?
                        .try_fold(0u64, |n, b| async move { Ok(n + b.num_rows() as u64) })
                        .await
                }
            })
            .buffer_unordered(concurrency)
            .try_fold(0u64, |n, rows| async move { Ok(n + rows) })
            .await?;
        if let Some(limit) = scan.limit {
            outcome.rows = outcome.rows.min(limit as u64);
        }
        Ok(outcome)
    }
}

/// The rows of a planned file that match, when the log alone tells: with no predicate,
/// one on partition values only (evaluated exactly), or one that statistics show every
/// row meets (no row may fail it and its columns hold no nulls). `None` when the file
/// must be read.
fn count_from_log(ctx: &ScanContext, planned: &PlannedFile) -> Result<Option<u64>> {
    let Some(predicate) = &ctx.predicate else {
        return Ok(live_rows(&planned.add));
    };
    if planned.rows.is_some() {
        // An index narrowed the file: its rows decide.
        return Ok(None);
    }
    let columns = predicate.columns();
    if super::names_partitions_only(&ctx.snapshot, predicate) {
        return Ok(if partitions_match(ctx, predicate, &planned.partitions)? {
            live_rows(&planned.add)
        } else {
            Some(0)
        });
    }
    let stats = AnyStats::of(&planned.add);
    let view = FileStatsView {
        stats: stats.as_ref(),
        columns: &ctx.columns,
        partitions: &planned.partitions,
    };
    let schema = ctx.snapshot.schema();
    // A null makes a predicate null, not true: every column must be free of them, by the
    // schema or by the statistics.
    let required: Vec<&ColumnName> = columns
        .iter()
        .filter(|c| c.path().len() == 1 && schema.field(c.root()).is_some_and(|f| !f.nullable))
        .collect();
    let view = NonNull {
        inner: &view,
        required: &required,
    };
    let no_nulls = columns.iter().all(|c| view.null_count(c) == Some(0));
    if no_nulls && !has_null_literal(predicate) && !may_match(&predicate.clone().not(), &view) {
        return Ok(live_rows(&planned.add));
    }
    Ok(None)
}

/// Statistics with the schema's word on nulls: a required column holds none, whatever
/// the statistics say (loose bounds after a deletion vector leave null counts unknown).
struct NonNull<'a> {
    inner: &'a FileStatsView<'a>,
    required: &'a [&'a ColumnName],
}

impl StatsView for NonNull<'_> {
    fn min(&self, column: &ColumnName) -> Option<Scalar> {
        self.inner.min(column)
    }

    fn max(&self, column: &ColumnName) -> Option<Scalar> {
        self.inner.max(column)
    }

    fn null_count(&self, column: &ColumnName) -> Option<u64> {
        if self.required.contains(&column) {
            return Some(0);
        }
        self.inner.null_count(column)
    }

    fn row_count(&self) -> Option<u64> {
        self.inner.row_count()
    }
}

/// Whether a comparison or list in the predicate names a null literal (which makes it
/// null for every row, so statistics must not claim every row meets it), or holds
/// arithmetic (which statistics do not bound).
pub(super) fn has_null_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(v) => v.is_null(),
        Expr::And(a, b) | Expr::Or(a, b) => has_null_literal(a) || has_null_literal(b),
        Expr::Not(e) | Expr::IsNull(e) | Expr::IsNotNull(e) => has_null_literal(e),
        Expr::Cmp { left, right, .. } => has_null_literal(left) || has_null_literal(right),
        Expr::Arith { .. } | Expr::Call { .. } => true,
        Expr::InList { expr, list, .. } => {
            has_null_literal(expr) || list.iter().any(Scalar::is_null)
        }
        Expr::Column(_) | Expr::TextMatch { .. } => false,
    }
}

/// Whether a predicate on partition columns only holds for a file's partition values
/// (null counts as false), evaluated exactly on a one-row batch of them.
pub(super) fn partitions_match(
    ctx: &ScanContext,
    predicate: &Expr,
    partitions: &HashMap<ColumnName, Scalar>,
) -> Result<bool> {
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for pc in ctx.snapshot.partition_columns().iter() {
        let ty = pc.data_type.to_arrow();
        let value = partitions
            .get(&ColumnName::new([pc.name.clone()]))
            .cloned()
            .unwrap_or(Scalar::Null);
        let array = value
            .to_array(&ty, 1)
            .map_err(|reason| Error::InvalidPartitionValue {
                column: pc.name.clone(),
                value: value.to_string(),
                reason: reason.to_string(),
            })?;
        fields.push(Field::new(pc.name.clone(), ty, true));
        columns.push(array);
    }
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )
    .map_err(Error::arrow("assembling partition values"))?;
    let mask = evaluate_predicate(predicate, &batch)?;
    Ok(mask.is_valid(0) && mask.value(0))
}
