//! A MERGE whose source was spilled in key ranges (`spill`): each range is matched on its
//! own against the target files its keys may touch, and its new rows (updated and
//! inserted) are written at once. Each file's deleted and matched positions are united
//! across ranges; target rows no source row matched (NOT MATCHED BY SOURCE clauses) are
//! decided in a last pass over the table, once every range's matches are known. Each
//! touched file is then finished once: one deletion vector (merge-on-read), or one
//! rewrite without its deleted rows (copy-on-write). One commit.
//!
//! Every row of a key is in one range, so a target row and the source rows of its key
//! meet in the same range, and the duplicate-match checks hold range by range.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

use super::super::feed::write_feed;
use super::super::rewrite::{ChunkChange, Decide, FileRewrite, commit_rewrites, rewrite_files};
use super::super::{
    ChangeStrategy, DmlMetrics, Feed, FileChange, mark_deleted, read_candidates, row_ids,
    write_options, write_rows,
};
use super::apply::{
    TargetChanges, brought_identity, commit_identity_marks, draw_identity, insert_rows,
    inserted_feed,
};
use super::plan::MergePlan;
use super::spill::SpilledRanges;
use super::targets::read_targets;
use super::{Clause, Merge};
use crate::error::{Error, Result};
use crate::indexing::InlineSegments;
use crate::protocol::{Add, StructField};
use crate::scan::FileRows;
use crate::snapshot::Snapshot;
use crate::txn::Transaction;
use crate::write::WrittenFiles;

/// What the ranges did to one target file so far.
struct Touched {
    add: Add,
    physical_rows: u64,
    deleted_before: RoaringTreemap,
    /// Positions the merge deletes (updated rows included).
    deleted: RoaringTreemap,
    /// Positions a source row matched.
    matched: RoaringTreemap,
}

/// Touched files by path.
type TouchedFiles = HashMap<String, Touched>;

/// Records a file's deleted and matched positions of one range.
fn touch(
    touched: &mut TouchedFiles,
    add: Add,
    rows: FileRows,
    deleted: RoaringTreemap,
    matched: RoaringTreemap,
) {
    if deleted.is_empty() && matched.is_empty() {
        return;
    }
    let entry = touched.entry(add.path.clone()).or_insert_with(|| Touched {
        add,
        physical_rows: rows.physical_rows,
        deleted_before: rows.deleted_before,
        deleted: RoaringTreemap::new(),
        matched: RoaringTreemap::new(),
    });
    entry.deleted |= deleted;
    entry.matched |= matched;
}

impl Merge<'_> {
    /// Matches the spilled source range by range and puts the changes into `txn`.
    ///
    /// Fails as the in-memory merge does, and with [`Error::Spill`] when a range cannot be
    /// read back.
    pub(super) async fn ranged(
        &self,
        txn: &mut Transaction,
        ranges: SpilledRanges,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let result = self.match_ranges(txn, &ranges, metrics).await;
        ranges.remove().await;
        result
    }

    async fn match_ranges(
        &self,
        txn: &mut Transaction,
        ranges: &SpilledRanges,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let snapshot = self.snapshot;
        let (by_source, per_range): (Vec<Clause>, Vec<Clause>) =
            self.clauses.iter().cloned().partition(|c| {
                matches!(c, Clause::BySourceUpdate(..) | Clause::BySourceDelete(..))
            });
        if !by_source.is_empty() {
            txn.record_read_whole_table();
        }
        let hidden = row_ids::hidden_fields(snapshot);
        let mut touched = TouchedFiles::new();
        let mut scanned = HashSet::new();
        let inline = InlineSegments::of(snapshot)?;
        let mut schema = snapshot.schema().clone();
        let mut marks_moved = false;
        for index in 0..ranges.len() {
            let source = ranges.read(index).await?;
            if source.iter().all(|b| b.num_rows() == 0) {
                continue;
            }
            let plan = MergePlan::new(snapshot, source, self.keys, self.condition, &per_range)?;
            let brought = brought_identity(snapshot.schema(), &per_range, &plan.source.schema())?;
            let plan = Arc::new(plan);
            let scan = match &plan.key_filter {
                Some(filter) => snapshot.scan().filter(filter.clone()),
                None => snapshot.scan(),
            };
            let files = scan.plan().await?;
            match &plan.key_filter {
                Some(filter) => txn.record_read_predicate(filter)?,
                None => txn.record_read_whole_table(),
            }
            txn.record_read_files(&files.files);
            scanned.extend(files.files.iter().map(|a| a.path.clone()));
            let targets = read_targets(&plan, snapshot, &files, false).await?;
            let mut changed =
                TargetChanges::new(&plan, snapshot, &hidden, self.allow_partition_moves);
            for (add, rows) in targets {
                let (deleted, matched) = changed.file(txn, &rows, metrics)?;
                touch(&mut touched, add, rows, deleted, matched);
            }
            let TargetChanges {
                source_matches,
                mut new_rows,
                mut feed,
                ..
            } = changed;
            let inserts = insert_rows(&plan, snapshot, &source_matches, metrics)?;
            let (inserts, moved) = draw_identity(&mut schema, inserts, &brought)?;
            marks_moved |= moved;
            feed.extend(inserted_feed(snapshot, &inserts));
            new_rows.extend(inserts);
            metrics.bytes_written += write_feed(txn, snapshot, feed, self.now).await?;
            let written = write_rows(snapshot, new_rows, self.now).await?;
            add_written(txn, snapshot, &inline, written, metrics).await?;
        }
        if !by_source.is_empty() {
            let source_schema = ranges.schema();
            let all = self
                .unmatched_pass(
                    txn,
                    &by_source,
                    source_schema,
                    &inline,
                    &mut touched,
                    metrics,
                )
                .await?;
            scanned.extend(all);
        }
        metrics.files_scanned = scanned.len();
        metrics.files_skipped = snapshot.files().len().saturating_sub(scanned.len());
        let touched: Vec<Touched> = touched
            .into_values()
            .filter(|t| !t.deleted.is_empty())
            .collect();
        match self.strategy {
            ChangeStrategy::MergeOnRead => {
                let changes = touched
                    .into_iter()
                    .map(|t| FileChange {
                        add: t.add,
                        rows: FileRows {
                            batch: RecordBatch::new_empty(Arc::clone(snapshot.arrow_schema())),
                            positions: Vec::new(),
                            physical_rows: t.physical_rows,
                            deleted_before: t.deleted_before,
                            ids: None,
                        },
                        deleted: t.deleted,
                    })
                    .collect();
                mark_deleted(txn, snapshot, changes, self.now, metrics).await?;
                // Segments all of whose files the merge emptied go with them.
                InlineSegments::apply(txn, snapshot, Default::default())?;
            }
            ChangeStrategy::CopyOnWrite => {
                let rewrites = rewrite_without(snapshot, touched, self.now).await?;
                let none = WrittenFiles::default();
                commit_rewrites(
                    txn,
                    snapshot,
                    rewrites,
                    none,
                    Feed::new(),
                    self.now,
                    metrics,
                )
                .await?;
            }
        }
        if marks_moved {
            commit_identity_marks(txn, snapshot, &schema);
        }
        Ok(())
    }

    /// The last pass: every file's rows no range matched go through the NOT MATCHED BY
    /// SOURCE clauses, a few files at a time; new rows are written whenever they pass
    /// the memory limit.
    ///
    /// Fails when a file cannot be read or written, or a clause fails.
    async fn unmatched_pass(
        &self,
        txn: &mut Transaction,
        by_source: &[Clause],
        source_schema: arrow::datatypes::SchemaRef,
        inline: &InlineSegments,
        touched: &mut TouchedFiles,
        metrics: &mut DmlMetrics,
    ) -> Result<Vec<String>> {
        let snapshot = self.snapshot;
        let empty = RecordBatch::new_empty(source_schema);
        let plan = MergePlan::new(snapshot, vec![empty], self.keys, None, by_source)?;
        let files = snapshot.scan().plan().await?;
        txn.record_read_files(&files.files);
        let paths = files.files.iter().map(|a| a.path.clone()).collect();
        let hidden: Vec<StructField> = row_ids::hidden_fields(snapshot);
        let mut reads = futures::stream::iter(files.files)
            .map(|add| {
                let snapshot = snapshot.clone();
                async move { read_candidates(&snapshot, &[add]).await }
            })
            // One file at a time, its row groups decoded on every core: memory holds one
            // file's rows.
            .buffered(1);
        let mut changed = TargetChanges::new(&plan, snapshot, &hidden, self.allow_partition_moves);
        while let Some(read) = reads.try_next().await? {
            for (add, rows) in read {
                let rows = match touched.get(&add.path) {
                    Some(t) => without_positions(rows, &t.matched)?,
                    None => rows,
                };
                let (deleted, _) = changed.file(txn, &rows, metrics)?;
                touch(touched, add, rows, deleted, RoaringTreemap::new());
            }
            let held: usize = changed
                .new_rows
                .iter()
                .chain(changed.feed.iter().map(|(b, _)| b))
                .map(RecordBatch::get_array_memory_size)
                .sum();
            if held > self.memory_limit {
                self.flush(txn, &mut changed, inline, metrics).await?;
            }
        }
        if !changed.new_rows.is_empty() || !changed.feed.is_empty() {
            self.flush(txn, &mut changed, inline, metrics).await?;
        }
        Ok(paths)
    }

    /// Writes the new rows and the change feed gathered so far.
    async fn flush(
        &self,
        txn: &mut Transaction,
        changed: &mut TargetChanges<'_>,
        inline: &InlineSegments,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let feed = std::mem::take(&mut changed.feed);
        metrics.bytes_written += write_feed(txn, self.snapshot, feed, self.now).await?;
        let rows = std::mem::take(&mut changed.new_rows);
        let written = write_rows(self.snapshot, rows, self.now).await?;
        add_written(txn, self.snapshot, inline, written, metrics).await
    }
}

/// Adds the files a range wrote to `txn` at once, with their inline index segments, so
/// their indexed columns are not held until the last range.
///
/// Fails when a segment cannot be built or uploaded.
async fn add_written(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    inline: &InlineSegments,
    written: WrittenFiles,
    metrics: &mut DmlMetrics,
) -> Result<()> {
    if written.adds.is_empty() {
        return Ok(());
    }
    inline
        .add_to(
            txn,
            snapshot,
            &written.adds,
            &inline.columns(),
            &written.captured,
        )
        .await?;
    metrics.files_added += written.adds.len();
    metrics.bytes_written += written.bytes;
    for add in written.adds {
        txn.add_file(add);
    }
    Ok(())
}

/// A file's rows without those at `positions`.
///
/// Fails when the rows cannot be filtered.
fn without_positions(rows: FileRows, positions: &RoaringTreemap) -> Result<FileRows> {
    if positions.is_empty() {
        return Ok(rows);
    }
    let keep: Vec<u32> = (0..rows.positions.len() as u32)
        .filter(|i| !positions.contains(rows.positions[*i as usize]))
        .collect();
    let mask = BooleanArray::from(
        rows.positions
            .iter()
            .map(|p| !positions.contains(*p))
            .collect::<Vec<_>>(),
    );
    let batch = filter_record_batch(&rows.batch, &mask).map_err(Error::arrow("merge"))?;
    let ids = rows.ids.map(|ids| ids.take(&keep)).transpose()?;
    Ok(FileRows {
        batch,
        positions: keep.iter().map(|i| rows.positions[*i as usize]).collect(),
        physical_rows: rows.physical_rows,
        deleted_before: rows.deleted_before,
        ids,
    })
}

/// Rewrites each touched file once without its deleted rows (the new rows were written
/// range by range), several at once.
///
/// Fails when a file cannot be read or written.
async fn rewrite_without(
    snapshot: &Snapshot,
    touched: Vec<Touched>,
    now_ms: i64,
) -> Result<Vec<FileRewrite>> {
    let options = write_options(snapshot, now_ms)?;
    let rewrites: Vec<Vec<FileRewrite>> = futures::stream::iter(touched)
        .map(|t| {
            let decide = drop_rows(&t);
            let (snapshot, options) = (snapshot.clone(), options.clone());
            async move { rewrite_files(&snapshot, vec![t.add], &options, decide).await }
        })
        .buffered(crate::tasks::cores())
        .try_collect()
        .await?;
    Ok(rewrites.into_iter().flatten().collect())
}

/// Decides a file's chunks, in order, by the positions the ranges deleted: a rewrite
/// streams the file's live rows, so each position becomes its ordinal among them.
fn drop_rows(touched: &Touched) -> Arc<Decide> {
    let before = &touched.deleted_before;
    let ordinals: RoaringTreemap = touched.deleted.iter().map(|p| p - before.rank(p)).collect();
    let next = AtomicU64::new(0);
    Arc::new(move |chunk: &RecordBatch| {
        let rows = chunk.num_rows() as u64;
        let start = next.fetch_add(rows, Ordering::Relaxed);
        let mask: BooleanArray = (start..start + rows)
            .map(|o| Some(ordinals.contains(o)))
            .collect();
        Ok(ChunkChange {
            deleted: Some(mask),
            ..ChunkChange::default()
        })
    })
}
