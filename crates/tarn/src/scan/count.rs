//! `COUNT(*)` from the log: a file's live rows are its `numRecords` statistic minus its
//! deletion vector's cardinality, so a count with no predicate, or one on partition
//! columns only, reads no data object. Files written without statistics, and predicates on
//! data columns, fall back to reading rows (no columns decoded, only row counts).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, Schema};
use futures::{StreamExt, TryStreamExt};

use super::{PlannedFile, Scan, ScanContext, file};
use crate::error::{Error, Result};
use crate::expr::{ColumnName, Expr, Scalar, evaluate_predicate};
use crate::stats::FileStats;

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
    /// `numRecords` minus its deletion vector's cardinality and no data object is read.
    /// Otherwise the matching files are read with no columns decoded beyond those the
    /// predicate needs. The projection does not matter.
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
        let partition_names: Vec<&str> = ctx
            .snapshot
            .partition_columns()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let from_log = ctx.predicate.as_ref().is_none_or(|p| {
            p.columns()
                .iter()
                .all(|c| partition_names.contains(&c.root()))
        });
        if !from_log {
            let files_read = scan.plan().await?.files.len();
            let rows = scan
                .execute()
                .await?
                .try_fold(0u64, |n, b| async move { Ok(n + b.num_rows() as u64) })
                .await?;
            return Ok(CountOutcome {
                rows,
                files_from_log: 0,
                files_read,
            });
        }
        let (files, _, _) = ctx.prune_files()?;
        let mut outcome = CountOutcome::default();
        let mut unread = Vec::new();
        for planned in files {
            if let Some(p) = &ctx.predicate
                && !partitions_match(&ctx, p, &planned.partitions)?
            {
                continue;
            }
            match live_rows(&planned) {
                Some(rows) => {
                    outcome.rows += rows;
                    outcome.files_from_log += 1;
                }
                None => unread.push(planned),
            }
        }
        outcome.files_read = unread.len();
        let concurrency = scan.concurrency;
        outcome.rows += futures::stream::iter(unread)
            .map(|planned| {
                let ctx = Arc::clone(&ctx);
                async move {
                    file::read_file(ctx, planned)
                        .await?
                        .try_fold(0u64, |n, b| async move { Ok(n + b.num_rows() as u64) })
                        .await
                }
            })
            .buffer_unordered(concurrency)
            .try_fold(0u64, |n, rows| async move { Ok(n + rows) })
            .await?;
        Ok(outcome)
    }
}

/// A file's live rows from the log, when its statistics carry `numRecords`.
fn live_rows(planned: &PlannedFile) -> Option<u64> {
    let records = planned
        .add
        .stats
        .as_deref()
        .and_then(FileStats::parse)?
        .num_records?;
    let deleted = planned
        .add
        .deletion_vector
        .as_ref()
        .map_or(0, |dv| dv.cardinality.max(0) as u64);
    Some(records.saturating_sub(deleted))
}

/// Whether a predicate on partition columns only holds for a file's partition values
/// (null counts as false), evaluated exactly on a one-row batch of them.
fn partitions_match(
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
