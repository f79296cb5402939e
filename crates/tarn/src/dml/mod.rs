//! Row-level changes: DELETE, UPDATE and MERGE, by copy-on-write or merge-on-read.
//!
//! Every operation finds its candidate files by partition values and statistics first,
//! reads only those, and works out per file which rows it deletes (updated rows count as
//! deleted there) and which rows it writes anew (updated and inserted ones). Then:
//!
//! - **copy-on-write** rewrites each touched file without its deleted rows and with the
//!   rows updated in it, streaming it chunk by chunk, several files at once
//!   (`rewrite`); inserted rows go to new files; readers pay nothing afterwards;
//! - **merge-on-read** writes a deletion vector for each touched file (its earlier DV
//!   included), inline when small, else several to a `deletion_vector_<uuid>.bin` file,
//!   and writes only the new rows; readers skip the deleted rows until `optimize` purges
//!   them.

mod delete;
mod feed;
mod merge;
mod rewrite;
mod row_ids;
mod update;

use std::time::{Duration, Instant};

use arrow::array::{Array, BooleanArray, RecordBatch};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

pub use delete::DeleteBuilder;
pub use merge::{DEFAULT_MERGE_MEMORY_LIMIT, MergeBuilder};
pub use update::UpdateBuilder;

use crate::protocol::properties::ChangeStrategy;

use crate::dv::{DvFileWriter, describe_bitmap};
use crate::error::{Error, Result};
use crate::indexing::InlineSegments;
use crate::protocol::Add;
use crate::protocol::features::ensure_writable;
use crate::scan::{FileRows, Scan, ScanPlan, read_file_rows_of, shares_of};
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::{CommitOutcome, Transaction};
use crate::write::{
    Checks, FileWriteOptions, SchemaMode, StatsColumns, WrittenFiles, prepare_batches,
    without_generated, write_files,
};
pub(crate) use feed::{ChangeKind, Feed, records_feed};
pub(crate) use row_ids::{copied_rows, hidden_fields};

/// Candidate files read at once.
const READ_CONCURRENCY: usize = 8;

/// What a row-level change did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DmlMetrics {
    /// Rows deleted.
    pub rows_deleted: u64,
    /// Rows updated.
    pub rows_updated: u64,
    /// Rows inserted.
    pub rows_inserted: u64,
    /// Files read to find the rows.
    pub files_scanned: usize,
    /// Live files skipped by partition values and statistics.
    pub files_skipped: usize,
    /// Data files added.
    pub files_added: usize,
    /// Data files removed (rewritten, or emptied).
    pub files_removed: usize,
    /// Deletion vectors written.
    pub deletion_vectors_written: usize,
    /// Bytes written: data files and deletion-vector files.
    pub bytes_written: u64,
    /// Wall-clock time of the whole operation.
    pub duration: Duration,
}

/// What a row-level change did, and its commit.
#[derive(Debug, Clone)]
pub struct DmlOutcome {
    /// The commit (no attempts when nothing changed and nothing was committed).
    pub commit: CommitOutcome,
    /// Counts of rows, files and bytes.
    pub metrics: DmlMetrics,
}

/// The rows of one file an operation deletes (updated rows included).
pub(crate) struct FileChange {
    pub(crate) add: Add,
    pub(crate) rows: FileRows,
    pub(crate) deleted: RoaringTreemap,
}

/// The strategy of one operation: the table's, or the one asked for. Merge-on-read
/// needs deletion vectors enabled on the table.
///
/// Fails as [`ensure_writable`] does before anything is read or written.
pub(crate) fn resolve_strategy(
    snapshot: &Snapshot,
    asked: Option<ChangeStrategy>,
) -> Result<ChangeStrategy> {
    ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
    let strategy = asked.unwrap_or_else(|| snapshot.properties().change_strategy());
    if strategy == ChangeStrategy::MergeOnRead
        && !snapshot.protocol().has_writer_feature("deletionVectors")
    {
        return Err(Error::FeatureNotEnabled {
            table: snapshot.location().url().to_string(),
            feature: "deletionVectors",
            operation: "merge-on-read".into(),
            how: "enable deletion vectors first with \
                  set_properties([(\"delta.enableDeletionVectors\", \"true\")])",
        });
    }
    Ok(strategy)
}

/// Fails with [`Error::AppendOnly`] when the table is append-only (`delta.appendOnly`):
/// `operation` would remove or change rows.
pub(crate) fn refuse_if_append_only(snapshot: &Snapshot, operation: &'static str) -> Result<()> {
    if snapshot.properties().append_only() {
        return Err(Error::AppendOnly {
            table: snapshot.location().url().to_string(),
            operation: operation.into(),
        });
    }
    Ok(())
}

/// Reads the candidate files concurrently, in order.
pub(crate) async fn read_candidates(
    snapshot: &Snapshot,
    files: &[Add],
) -> Result<Vec<(Add, FileRows)>> {
    let shares = shares_of(files, crate::tasks::cores());
    futures::stream::iter(files.iter().cloned().zip(shares))
        .map(|(add, shares)| {
            let scan = row_ids::scan_with_ids(snapshot);
            crate::tasks::spawn("reading a data file", async move {
                let rows = read_file_rows_of(&scan, &add, None, shares).await?;
                Ok((add, rows))
            })
        })
        .buffered(READ_CONCURRENCY)
        .try_collect()
        .await
}

/// Reads `files` through `scan` (its projection), each restricted to the positions beside
/// it when given.
pub(crate) async fn read_selected(
    scan: &Scan,
    files: Vec<(Add, Option<RoaringTreemap>)>,
) -> Result<Vec<(Add, FileRows)>> {
    let shares = shares_of(files.iter().map(|(add, _)| add), crate::tasks::cores());
    futures::stream::iter(files.into_iter().zip(shares))
        .map(|((add, only), shares)| {
            let scan = scan.clone();
            crate::tasks::spawn("reading a data file", async move {
                let rows = read_file_rows_of(&scan, &add, only.as_ref(), shares).await?;
                Ok((add, rows))
            })
        })
        .buffered(READ_CONCURRENCY)
        .try_collect()
        .await
}

/// Reads the planned files a merge-on-read change marks: only the rows an index allows
/// when one covers the file (through the offset index, so only their pages), else whole;
/// with the rows' stable ids when `with_ids` (a change that writes rows anew); only
/// `columns` when given (a delete that needs no more than its predicate's).
pub(crate) async fn read_planned(
    snapshot: &Snapshot,
    plan: &ScanPlan,
    with_ids: bool,
    columns: Option<Vec<String>>,
) -> Result<Vec<(Add, FileRows)>> {
    let files = plan
        .files
        .iter()
        .map(|a| (a.clone(), plan.rows_of(snapshot, a).cloned()))
        .collect();
    let scan = match with_ids {
        true => row_ids::scan_with_ids(snapshot),
        false => snapshot.scan(),
    };
    let scan = match columns {
        Some(columns) => scan.select(columns),
        None => scan,
    };
    read_selected(&scan, files).await
}

/// Rewrites, by copy-on-write, the planned files whose rows `decide` changes (nothing
/// is put into a transaction yet: see [`rewrite::commit_rewrites`]), counting rows and
/// files in `metrics`.
///
/// Fails as [`rewrite::rewrite_files`] does.
pub(crate) async fn copy_on_write(
    snapshot: &Snapshot,
    files: Vec<Add>,
    decide: std::sync::Arc<rewrite::Decide>,
    now_ms: i64,
    metrics: &mut DmlMetrics,
) -> Result<Vec<rewrite::FileRewrite>> {
    metrics.files_scanned = files.len();
    let options = write_options(snapshot, now_ms)?;
    let rewrites = rewrite::rewrite_files(snapshot, files, &options, decide).await?;
    for r in &rewrites {
        metrics.rows_deleted += r.rows_deleted;
        metrics.rows_updated += r.rows_updated;
    }
    Ok(rewrites)
}

/// [`copy_on_write`], then the rewrites into `txn`: for DELETE and UPDATE, which insert
/// nothing.
///
/// Fails as [`copy_on_write`] and [`rewrite::commit_rewrites`] do.
pub(crate) async fn rewrite_in_place(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    files: Vec<Add>,
    decide: std::sync::Arc<rewrite::Decide>,
    now_ms: i64,
    metrics: &mut DmlMetrics,
) -> Result<()> {
    let rewrites = copy_on_write(snapshot, files, decide, now_ms, metrics).await?;
    rewrite::commit_rewrites(
        txn,
        snapshot,
        rewrites,
        WrittenFiles::default(),
        Feed::new(),
        now_ms,
        metrics,
    )
    .await
}

/// When indices answered a predicate exactly (every part, every planned file), the rows
/// a merge-on-read change deletes, per file, without reading any data: the index's rows
/// minus those already deleted. `None` when a file lacks what this needs (its row count
/// in the statistics), so the caller reads the files instead.
pub(crate) async fn exact_deletions(
    snapshot: &Snapshot,
    plan: &ScanPlan,
) -> Result<Option<Vec<FileChange>>> {
    // A change data feed needs the deleted rows themselves.
    if !plan.exact || feed::records_feed(snapshot) {
        return Ok(None);
    }
    let mut changes = Vec::with_capacity(plan.files.len());
    for add in &plan.files {
        let (Some(rows), Some(physical)) = (
            plan.rows_of(snapshot, add),
            add.stats
                .as_ref()
                .and_then(crate::protocol::Stats::num_records),
        ) else {
            return Ok(None);
        };
        let before = match &add.deletion_vector {
            Some(dv) => {
                crate::dv::deletion_vector_of(snapshot.location(), snapshot.caches(), dv).await?
            }
            None => RoaringTreemap::new(),
        };
        changes.push(FileChange {
            add: add.clone(),
            deleted: rows - &before,
            rows: FileRows {
                batch: RecordBatch::new_empty(std::sync::Arc::clone(snapshot.arrow_schema())),
                positions: Vec::new(),
                physical_rows: physical,
                deleted_before: before,
                ids: None,
            },
        });
    }
    Ok(Some(changes))
}

/// Positions (in the file) of the rows selected by a mask over a file's live rows.
pub(crate) fn positions_of(rows: &FileRows, mask: &BooleanArray) -> RoaringTreemap {
    rows.positions
        .iter()
        .enumerate()
        .filter(|(i, _)| mask.is_valid(*i) && mask.value(*i))
        .map(|(_, p)| *p)
        .collect()
}

/// A predicate's mask with nulls as false.
pub(crate) fn true_mask(mask: BooleanArray) -> BooleanArray {
    if mask.null_count() > 0 {
        arrow::compute::prep_null_mask_filter(&mask)
    } else {
        mask
    }
}

/// The settings of the data files an operation writes: the table's target size and
/// statistics columns, and the columns its inline indices capture.
///
/// Fails when the table's index metadata cannot be read.
pub(crate) fn write_options(snapshot: &Snapshot, now_ms: i64) -> Result<FileWriteOptions> {
    Ok(FileWriteOptions {
        target_file_size: snapshot
            .properties()
            .target_file_size()
            .unwrap_or(crate::protocol::properties::DEFAULT_TARGET_FILE_SIZE),
        stats_columns: StatsColumns::of(snapshot)?,
        writer_properties: None,
        compression: snapshot.properties().data_compression()?,
        modification_time: now_ms,
        capture: InlineSegments::of(snapshot)?.columns(),
        file_per_batch: false,
        change_data: false,
        hidden: Vec::new(),
        checks: Checks::of(snapshot.metadata(), snapshot.schema())?,
    })
}

/// Writes new rows (updated and inserted ones, in the table's schema) as data files,
/// without adding them to a transaction.
///
/// Fails when the rows do not fit the table or a file cannot be written.
pub(crate) async fn write_rows(
    snapshot: &Snapshot,
    rows: Vec<RecordBatch>,
    now_ms: i64,
) -> Result<WrittenFiles> {
    // Updated rows may bring their row ids: set aside while the rows are checked (one
    // batch out per non-empty batch in).
    let hidden = row_ids::hidden_fields(snapshot);
    let (rows, ids): (Vec<RecordBatch>, Vec<_>) = rows
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| row_ids::set_aside(b, &hidden))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    // Generated columns of updated and inserted rows follow their values.
    let (batches, _) = prepare_batches(
        snapshot.schema(),
        snapshot.partition_columns(),
        &without_generated(snapshot.schema(), &rows),
        SchemaMode::Strict,
    )?;
    let batches = batches
        .iter()
        .zip(ids)
        .map(|(b, ids)| row_ids::put_back(b, &hidden, ids))
        .collect::<Result<Vec<_>>>()?;
    let options = FileWriteOptions {
        hidden,
        ..write_options(snapshot, now_ms)?
    };
    write_files(
        snapshot.location(),
        snapshot.schema(),
        snapshot.partition_columns(),
        batches,
        &options,
        None,
    )
    .await
}

/// Writes merge-on-read changes into `txn`: each touched file gets a new deletion vector
/// (its earlier one included; a file whose every row goes is removed instead),
/// `new_rows` (updated and inserted rows, in the table's schema) are written as new files,
/// and `feed` as change files when the table records a change data feed.
pub(crate) async fn apply_changes(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    changes: Vec<FileChange>,
    new_rows: Vec<RecordBatch>,
    feed: Feed,
    now_ms: i64,
    metrics: &mut DmlMetrics,
) -> Result<()> {
    mark_deleted(txn, snapshot, changes, now_ms, metrics).await?;
    let written = write_rows(snapshot, new_rows, now_ms).await?;
    rewrite::commit_rewrites(txn, snapshot, Vec::new(), written, feed, now_ms, metrics).await
}

/// Puts a deletion vector for each changed file into `txn` (its earlier one included; a
/// file whose every row goes is removed instead), uploading those too large to inline.
///
/// Fails when a deletion-vector file cannot be uploaded.
pub(crate) async fn mark_deleted(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    changes: Vec<FileChange>,
    now_ms: i64,
    metrics: &mut DmlMetrics,
) -> Result<()> {
    let location = snapshot.location();
    let threshold = snapshot.properties().inline_dv_threshold();
    let mut dv_file = DvFileWriter::new();
    for change in changes.into_iter().filter(|c| !c.deleted.is_empty()) {
        let FileChange { add, rows, deleted } = change;
        // The deletion vector as read with the rows: loaded once per operation.
        let before = rows.deleted_before;
        let all = &before | &deleted;
        txn.record_dv_change(&add, before, deleted.clone(), rows.physical_rows);
        if all.len() >= rows.physical_rows {
            // Every row is gone: drop the file instead of marking all of it.
            txn.remove_file(add.into_remove(now_ms));
            metrics.files_removed += 1;
            continue;
        }
        let descriptor = describe_bitmap(&all, threshold, &mut dv_file);
        metrics.deletion_vectors_written += 1;
        txn.remove_file(add.clone().into_remove(now_ms));
        txn.add_file(add.with_deletion_vector(descriptor));
    }
    metrics.bytes_written += dv_file.upload(location).await?;
    Ok(())
}

/// The `operationMetrics` names Spark's Delta records for an operation, so history reads
/// alike whichever engine wrote a commit; a count the operation cannot have is left out.
struct MetricNames {
    rows_deleted: Option<&'static str>,
    rows_updated: Option<&'static str>,
    rows_inserted: Option<&'static str>,
    files_added: &'static str,
    files_removed: &'static str,
    deletion_vectors_added: &'static str,
}

impl MetricNames {
    fn of(operation: &str) -> MetricNames {
        match operation {
            "MERGE" => MetricNames {
                rows_deleted: Some("numTargetRowsDeleted"),
                rows_updated: Some("numTargetRowsUpdated"),
                rows_inserted: Some("numTargetRowsInserted"),
                files_added: "numTargetFilesAdded",
                files_removed: "numTargetFilesRemoved",
                deletion_vectors_added: "numTargetDeletionVectorsAdded",
            },
            "DELETE" => MetricNames {
                rows_deleted: Some("numDeletedRows"),
                rows_updated: None,
                rows_inserted: None,
                ..MetricNames::common()
            },
            "UPDATE" => MetricNames {
                rows_deleted: None,
                rows_updated: Some("numUpdatedRows"),
                rows_inserted: None,
                ..MetricNames::common()
            },
            _ => MetricNames {
                rows_deleted: Some("numDeletedRows"),
                rows_updated: Some("numUpdatedRows"),
                rows_inserted: Some("numInsertedRows"),
                ..MetricNames::common()
            },
        }
    }

    fn common() -> MetricNames {
        MetricNames {
            rows_deleted: None,
            rows_updated: None,
            rows_inserted: None,
            files_added: "numAddedFiles",
            files_removed: "numRemovedFiles",
            deletion_vectors_added: "numDeletionVectorsAdded",
        }
    }
}

/// Starts the clock and the transaction of an operation.
pub(crate) fn start(table: &Table, operation: &str) -> (Instant, Transaction) {
    (
        Instant::now(),
        table.transaction().with_operation(operation),
    )
}

/// Commits an operation's transaction (or not, when it changed nothing) and fills in the
/// metrics.
pub(crate) async fn finish(
    table: &mut Table,
    txn: Transaction,
    started: Instant,
    mut metrics: DmlMetrics,
) -> Result<DmlOutcome> {
    let names = MetricNames::of(txn.operation());
    let mut txn = txn;
    for (name, value) in [
        (names.rows_deleted, metrics.rows_deleted),
        (names.rows_updated, metrics.rows_updated),
        (names.rows_inserted, metrics.rows_inserted),
        (Some(names.files_added), metrics.files_added as u64),
        (Some(names.files_removed), metrics.files_removed as u64),
        (
            Some(names.deletion_vectors_added),
            metrics.deletion_vectors_written as u64,
        ),
    ] {
        if let Some(name) = name {
            txn = txn.with_metric(name, value.to_string());
        }
    }
    let commit = if txn.actions().is_empty() {
        CommitOutcome::unchanged(table.snapshot())
    } else {
        table.commit(txn).await?
    };
    metrics.duration = started.elapsed();
    Ok(DmlOutcome { commit, metrics })
}

/// Shared for the builders: the time now on the table's clock.
pub(crate) fn now(table: &Table) -> i64 {
    table.clock().now_ms()
}
