//! Optimize: rewrite small files into files of the target size, purge deletion vectors
//! that cover much of their file, and optionally sort rows by given columns.
//!
//! The rewrite changes no data (`dataChange: false`): readers of the new version see the
//! same rows, and concurrent blind appends do not conflict with it, as it reads nothing
//! but the files it replaces. A concurrent change to one of those files does conflict:
//! deleted rows never come back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, concat_batches, lexsort_to_indices, take_record_batch};

use crate::dml::{copied_rows, hidden_fields, read_candidates};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::indexing::InlineSegments;
use crate::protocol::properties::DEFAULT_TARGET_FILE_SIZE;
use crate::protocol::{Add, PartitionValues};
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::CommitOutcome;
use crate::write::{Checks, FileWriteOptions, StatsColumns, write_files};

/// What an optimize did.
#[derive(Debug, Clone)]
pub struct OptimizeOutcome {
    /// The commit (no attempts when there was nothing to rewrite).
    pub commit: CommitOutcome,
    /// Files rewritten (removed).
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Partitions that were rewritten.
    pub partitions_optimized: usize,
    /// Deletion vectors purged by rewriting their files.
    pub deletion_vectors_purged: usize,
    /// Rows written.
    pub rows: u64,
    /// Bytes of the files removed.
    pub bytes_removed: u64,
    /// Bytes of the files written.
    pub bytes_added: u64,
    /// Wall-clock time.
    pub duration: Duration,
}

/// An optimize being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct OptimizeBuilder<'a> {
    table: &'a mut Table,
    target_size: Option<u64>,
    dv_threshold: f64,
    sort_by: Vec<String>,
    filter: Option<Expr>,
}

impl Table {
    /// Starts an optimize of the table.
    pub fn optimize(&mut self) -> OptimizeBuilder<'_> {
        OptimizeBuilder {
            table: self,
            target_size: None,
            dv_threshold: 0.1,
            sort_by: Vec::new(),
            filter: None,
        }
    }
}

impl OptimizeBuilder<'_> {
    /// The size files are packed up to (default: `delta.targetFileSize`, else 128 MiB).
    /// Files smaller than it are compaction candidates.
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.target_size = Some(bytes);
        self
    }

    /// Files whose deletion vector marks more than this share of their rows are rewritten
    /// without the deleted rows (default 0.1).
    pub fn with_deletion_vector_threshold(mut self, share: f64) -> Self {
        self.dv_threshold = share.clamp(0.0, 1.0);
        self
    }

    /// Rewrites every file of each partition sorted by these columns.
    pub fn with_sort_by(mut self, columns: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sort_by = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Only the partitions this predicate (on partition columns) names.
    pub fn filter(mut self, predicate: Expr) -> Self {
        self.filter = Some(predicate);
        self
    }

    /// Rewrites and commits.
    ///
    /// Fails with [`Error::UnknownColumn`] for unknown sort columns, with
    /// [`Error::InvalidArgument`] for a filter on non-partition columns or a zero target
    /// size, and as [`crate::Transaction::commit`] does: with [`Error::Conflict`] when a
    /// concurrent commit changed a file being rewritten.
    pub async fn execute(self) -> Result<OptimizeOutcome> {
        let started = Instant::now();
        let OptimizeBuilder {
            table,
            target_size,
            dv_threshold,
            sort_by,
            filter,
        } = self;
        let snapshot = table.snapshot().clone();
        let target = target_size
            .or_else(|| snapshot.properties().target_file_size())
            .unwrap_or(DEFAULT_TARGET_FILE_SIZE);
        if target == 0 {
            return Err(Error::InvalidArgument {
                name: "target_file_size",
                reason: "must be positive".into(),
            });
        }
        for column in &sort_by {
            if snapshot.schema().field(column).is_none() {
                return Err(Error::UnknownColumn {
                    column: column.clone(),
                    available: snapshot.schema().field_names(),
                });
            }
        }
        let files = files_to_optimize(&snapshot, filter.as_ref()).await?;

        // Candidates per partition.
        let mut partitions: BTreeMap<PartitionValues, Vec<Add>> = BTreeMap::new();
        for add in files {
            partitions
                .entry(add.partition_values.clone())
                .or_default()
                .push(add);
        }
        let mut outcome = OptimizeOutcome {
            commit: CommitOutcome::unchanged(&snapshot),
            files_removed: 0,
            files_added: 0,
            partitions_optimized: 0,
            deletion_vectors_purged: 0,
            rows: 0,
            bytes_removed: 0,
            bytes_added: 0,
            duration: Duration::ZERO,
        };
        let mut txn = table
            .transaction()
            .with_operation("OPTIMIZE")
            .with_parameter("targetSize", target.to_string())
            .with_parameter(
                "zOrderBy",
                serde_json::to_string(&sort_by).unwrap_or_default(),
            );
        let now = table.clock().now_ms();
        let inline = InlineSegments::of(&snapshot)?;
        let capture = inline.columns();
        let hidden = hidden_fields(&snapshot);
        let (mut added, mut captured) = (Vec::new(), Vec::new());
        for (_, files) in partitions {
            let Some(candidates) = candidates(files, target, dv_threshold, !sort_by.is_empty())
            else {
                continue;
            };
            let read = read_candidates(&snapshot, &candidates).await?;
            // Compacted rows keep their row ids when the table keeps them.
            let mut batches: Vec<RecordBatch> = Vec::with_capacity(read.len());
            for (_, rows) in read.iter().filter(|(_, r)| r.batch.num_rows() > 0) {
                let (batch, kept) = copied_rows(rows, &hidden)?;
                if !hidden.is_empty() {
                    txn.note_row_ids_kept(kept);
                }
                batches.push(batch);
            }
            let batch = sorted_rows(&snapshot, &batches, &sort_by)?;
            let written = write_files(
                snapshot.location(),
                snapshot.schema(),
                snapshot.partition_columns(),
                vec![batch],
                &FileWriteOptions {
                    target_file_size: target,
                    stats_columns: StatsColumns::of(&snapshot)?,
                    writer_properties: None,
                    compression: snapshot.properties().data_compression()?,
                    modification_time: now,
                    capture: capture.clone(),
                    file_per_batch: false,
                    change_data: false,
                    hidden: hidden.clone(),
                    // Compaction moves rows that met the constraints when written.
                    checks: Checks::default(),
                },
                None,
            )
            .await?;
            txn.record_read_files(&candidates);
            for add in candidates {
                outcome.bytes_removed += add.size as u64;
                outcome.deletion_vectors_purged += usize::from(add.deletion_vector.is_some());
                let mut remove = add.into_remove(now);
                remove.data_change = false;
                txn.remove_file(remove);
                outcome.files_removed += 1;
            }
            for (mut add, columns) in written.adds.into_iter().zip(written.captured) {
                add.data_change = false;
                outcome.bytes_added += add.size as u64;
                txn.add_file(add.clone());
                added.push(add);
                captured.push(columns);
                outcome.files_added += 1;
            }
            outcome.rows += written.rows;
            outcome.partitions_optimized += 1;
        }
        // The rewritten files get segments of the inline indices in the same commit.
        inline
            .add_to(&mut txn, &snapshot, &added, &capture, &captured)
            .await?;
        if !txn.actions().is_empty() {
            let txn = txn
                .with_metric("numRemovedFiles", outcome.files_removed.to_string())
                .with_metric("numAddedFiles", outcome.files_added.to_string())
                .with_metric(
                    "numDeletionVectorsRemoved",
                    outcome.deletion_vectors_purged.to_string(),
                );
            outcome.commit = table.commit(txn).await?;
        }
        outcome.duration = started.elapsed();
        Ok(outcome)
    }
}

/// The live files `filter` (on partition columns only) names, or every live file.
///
/// Fails with [`Error::InvalidArgument`] for a filter on other columns.
async fn files_to_optimize(snapshot: &Snapshot, filter: Option<&Expr>) -> Result<Vec<Add>> {
    Ok(match filter {
        Some(predicate) => {
            let partitions: Vec<&str> = snapshot
                .partition_columns()
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            let bound = predicate.bind(snapshot.schema())?;
            if let Some(other) = bound
                .columns()
                .into_iter()
                .find(|c| !partitions.contains(&c.root()))
            {
                return Err(Error::InvalidArgument {
                    name: "filter",
                    reason: format!(
                        "{other} is not a partition column; optimize works on whole partitions"
                    ),
                });
            }
            snapshot
                .scan()
                .filter(predicate.clone())
                .plan()
                .await?
                .files
        }
        None => snapshot.files().cloned().collect(),
    })
}

/// The files of one partition to rewrite: with a sort, all of them; without, those
/// smaller than `target` or whose deletion vectors hide more than `dv_threshold` of their
/// rows, when there are two or more, or one worth purging. `None` when nothing is worth
/// rewriting.
fn candidates(files: Vec<Add>, target: u64, dv_threshold: f64, sorting: bool) -> Option<Vec<Add>> {
    let heavy = |a: &Add| {
        let Some(dv) = &a.deletion_vector else {
            return false;
        };
        let rows = a.stats.as_ref().and_then(|s| s.num_records());
        rows.is_some_and(|r| r > 0 && dv.cardinality as f64 / r as f64 > dv_threshold)
    };
    let candidates: Vec<Add> = if sorting {
        files
    } else {
        let chosen: Vec<Add> = files
            .iter()
            .filter(|a| (a.size as u64) < target || heavy(a))
            .cloned()
            .collect();
        let worth = chosen.len() >= 2 || chosen.iter().any(heavy);
        if !worth {
            return None;
        }
        chosen
    };
    (!candidates.is_empty()).then_some(candidates)
}

/// The rows read, gathered into one batch and sorted by `sort_by` when it names columns.
fn sorted_rows(
    snapshot: &Snapshot,
    batches: &[RecordBatch],
    sort_by: &[String],
) -> Result<RecordBatch> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| Arc::clone(snapshot.arrow_schema()));
    let mut batch =
        concat_batches(&schema, batches).map_err(Error::arrow("gathering rows to optimize"))?;
    if !sort_by.is_empty() && batch.num_rows() > 0 {
        let columns: Vec<SortColumn> = sort_by
            .iter()
            .filter_map(|c| batch.column_by_name(c).cloned())
            .map(|values| SortColumn {
                values,
                options: None,
            })
            .collect();
        let order = lexsort_to_indices(&columns, None).map_err(Error::arrow("sorting rows"))?;
        batch = take_record_batch(&batch, &order).map_err(Error::arrow("sorting rows"))?;
    }
    Ok(batch)
}
