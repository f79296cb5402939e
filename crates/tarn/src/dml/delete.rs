//! DELETE: remove the rows a predicate matches.

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};

use super::rewrite::{ChunkChange, Decide};
use super::{
    ChangeKind, ChangeStrategy, DmlMetrics, DmlOutcome, Feed, FileChange, apply_changes,
    exact_deletions, finish, now, positions_of, read_planned, records_feed, refuse_if_append_only,
    resolve_strategy, rewrite_in_place, start, true_mask,
};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::expr::{Expr, evaluate_predicate};
use crate::scan::bind_predicate;
use crate::table::Table;

/// A DELETE being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct DeleteBuilder<'a> {
    table: &'a mut Table,
    predicate: Expr,
    strategy: Option<ChangeStrategy>,
}

impl Table {
    /// Starts deleting the rows `predicate` matches.
    pub fn delete(&mut self, predicate: Expr) -> DeleteBuilder<'_> {
        DeleteBuilder {
            table: self,
            predicate,
            strategy: None,
        }
    }
}

impl DeleteBuilder<'_> {
    /// Copy-on-write or merge-on-read, overriding the table's choice.
    pub fn with_strategy(mut self, strategy: ChangeStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Deletes the rows and commits. Only files whose partition values and statistics may
    /// hold matching rows are read; a predicate on partition columns alone removes whole
    /// files without reading them. On a table with a change data feed the deleted rows
    /// go to change files too (a whole-file delete needs none: readers take its removed
    /// files' rows).
    ///
    /// Fails with [`Error::UnknownColumn`] / [`Error::TypeMismatch`] for a predicate that
    /// does not fit the schema, [`Error::FeatureNotEnabled`] for merge-on-read on a table
    /// without deletion vectors, [`Error::AppendOnly`] on an append-only table, and as
    /// [`crate::Transaction::commit`] does. Nothing is committed on failure.
    pub async fn execute(self) -> Result<DmlOutcome> {
        let DeleteBuilder {
            table,
            predicate,
            strategy,
        } = self;
        let (started, mut txn) = start(table, "DELETE");
        let snapshot = txn.snapshot().clone();
        refuse_if_append_only(&snapshot, "delete")?;
        let strategy = resolve_strategy(&snapshot, strategy)?;
        let bound = bind_predicate(&snapshot, &predicate)?;
        let plan = snapshot.scan().filter(predicate.clone()).plan().await?;
        let mut metrics = DmlMetrics {
            files_skipped: plan.total_files - plan.files.len(),
            ..Default::default()
        };
        txn = txn
            .with_parameter("predicate", predicate.to_string())
            .with_parameter("strategy", format!("{strategy:?}"));
        txn.record_read_predicate(&predicate)?;
        txn.record_read_files(&plan.files);
        let now = now(table);

        let partition_only = !snapshot.partition_columns().is_empty()
            && crate::scan::names_partitions_only(&snapshot, &bound);
        if partition_only {
            // Every row of a file shares its partition values: matching files go whole.
            for add in plan.files {
                let live = crate::stats::live_rows(&add).unwrap_or(0);
                metrics.rows_deleted += live;
                metrics.files_removed += 1;
                txn.remove_file(add.into_remove(now));
            }
            return finish(table, txn, started, metrics).await;
        }

        let cdf = records_feed(&snapshot);
        if strategy == ChangeStrategy::CopyOnWrite {
            let decide: Arc<Decide> = Arc::new(move |chunk: &RecordBatch| {
                let mask = true_mask(evaluate_predicate(&bound, chunk)?);
                let mut feed = Feed::new();
                if cdf {
                    let gone = arrow::compute::filter_record_batch(chunk, &mask)
                        .map_err(crate::error::Error::arrow("deleting rows"))?;
                    feed.push((gone, ChangeKind::Delete));
                }
                Ok(ChunkChange {
                    rows_deleted: mask.true_count() as u64,
                    deleted: Some(mask),
                    feed,
                    ..Default::default()
                })
            });
            rewrite_in_place(&mut txn, &snapshot, plan.files, decide, now, &mut metrics).await?;
            return finish(table, txn, started, metrics).await;
        }
        if let Some(changes) = exact_deletions(&snapshot, &plan).await? {
            // The indices found exactly the rows: no data file is read.
            metrics.rows_deleted = changes.iter().map(|c| c.deleted.len()).sum();
            let no_feed = Feed::new();
            apply_changes(
                &mut txn,
                &snapshot,
                changes,
                Vec::new(),
                no_feed,
                now,
                &mut metrics,
            )
            .await?;
            return finish(table, txn, started, metrics).await;
        }
        // Deleted rows are only marked: their ids need not be read, nor (unless the change
        // data feed records them whole) any column but the predicate's.
        let predicate_columns: Vec<String> = bound
            .columns()
            .iter()
            .map(|c| c.root().to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let columns = (!cdf && !predicate_columns.is_empty()).then_some(predicate_columns);
        let files = read_planned(&snapshot, &plan, false, columns).await?;
        metrics.files_scanned = files.len();
        let mut changes = Vec::new();
        let mut feed = Feed::new();
        for (add, rows) in files {
            let mask: BooleanArray = true_mask(evaluate_predicate(&bound, &rows.batch)?);
            let deleted = positions_of(&rows, &mask);
            metrics.rows_deleted += deleted.len();
            if cdf && !deleted.is_empty() {
                let gone = arrow::compute::filter_record_batch(&rows.batch, &mask)
                    .map_err(crate::error::Error::arrow("deleting rows"))?;
                feed.push((gone, ChangeKind::Delete));
            }
            changes.push(FileChange { add, rows, deleted });
        }
        apply_changes(
            &mut txn,
            &snapshot,
            changes,
            Vec::new(),
            feed,
            now,
            &mut metrics,
        )
        .await?;
        finish(table, txn, started, metrics).await
    }
}
