//! Copy-on-write rewrites that stream: each candidate file is read a chunk of rows at a
//! time, the operation decides per chunk which rows go and what replaces them, and the
//! kept and replacing rows stream into the file's new version while the next chunk
//! decodes. Several files are rewritten at once, each on a task of its own (up to the
//! number of cores), so memory holds a few chunks and one encoding file per task whatever
//! the size of the table. A file no row of which goes is left alone: its rows are held
//! only until the first change shows up, then streamed.

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch, not};
use futures::{StreamExt, TryStreamExt};

use super::DmlMetrics;
use super::feed::{Feed, write_feed};
use super::row_ids::RowIds;
use crate::error::{Error, Result};
use crate::indexing::InlineSegments;
use crate::protocol::Add;
use crate::scan::stream_file;
use crate::snapshot::Snapshot;
use crate::txn::Transaction;
use crate::write::{
    FileWriteOptions, SchemaMode, StreamWriter, WrittenFiles, prepare_batches, without_generated,
};

/// What an operation decided for one chunk of a file's rows.
#[derive(Debug, Default)]
pub(crate) struct ChunkChange {
    /// Per row of the chunk: whether it goes (updated rows included). `None`: none goes.
    pub(crate) deleted: Option<BooleanArray>,
    /// Rows written in the file's new version in place of those that went (updated
    /// rows), in the table's schema.
    pub(crate) replacement: Vec<RecordBatch>,
    /// For each replacement row (across the batches, in order), the chunk row it
    /// replaces, so an updated row keeps its row id.
    pub(crate) replaced: Vec<u32>,
    /// Source rows the chunk matched (MERGE), to find ambiguous and unmatched ones.
    pub(crate) matched_sources: Vec<u32>,
    /// Chunk rows a source row matched (MERGE), beside `matched_sources`.
    pub(crate) matched_targets: Vec<u32>,
    /// Rows deleted outright.
    pub(crate) rows_deleted: u64,
    /// Rows updated.
    pub(crate) rows_updated: u64,
    /// The change data feed of the chunk, when the table records one.
    pub(crate) feed: Feed,
}

/// How a chunk of rows changes: given the chunk (all columns, live rows only).
pub(crate) type Decide = dyn Fn(&RecordBatch) -> Result<ChunkChange> + Send + Sync;

/// What rewriting one file did.
#[derive(Debug)]
pub(crate) struct FileRewrite {
    pub(crate) add: Add,
    /// The file's new version; `None` when no row of it went (nothing written).
    pub(crate) written: Option<WrittenFiles>,
    pub(crate) matched_sources: Vec<u32>,
    pub(crate) rows_deleted: u64,
    pub(crate) rows_updated: u64,
    /// The change data feed of the file's changes.
    pub(crate) feed: Feed,
    /// Whether the rows copied and updated into the new version kept their row ids.
    pub(crate) kept_row_ids: bool,
}

/// Rewrites `files` of `snapshot` by `decide`, several at once, and returns what each
/// rewrite did, in the order of `files`.
///
/// Fails when a file cannot be read or written, or when `decide` fails; files already
/// written are then orphans (nothing is committed) that `vacuum` removes.
pub(crate) async fn rewrite_files(
    snapshot: &Snapshot,
    files: Vec<Add>,
    options: &FileWriteOptions,
    decide: Arc<Decide>,
) -> Result<Vec<FileRewrite>> {
    let concurrency = crate::tasks::cores();
    futures::stream::iter(files)
        .map(|add| {
            let (snapshot, options, decide) =
                (snapshot.clone(), options.clone(), Arc::clone(&decide));
            crate::tasks::spawn("rewriting a data file", async move {
                rewrite_file(&snapshot, add, &options, decide.as_ref()).await
            })
        })
        .buffered(concurrency)
        .try_collect()
        .await
}

async fn rewrite_file(
    snapshot: &Snapshot,
    add: Add,
    options: &FileWriteOptions,
    decide: &Decide,
) -> Result<FileRewrite> {
    // Tables that materialize row ids read and write them beside the rows.
    let mut row_ids = RowIds::of(snapshot, &add).await?;
    let hidden = row_ids
        .as_ref()
        .map(|r| r.fields().to_vec())
        .unwrap_or_default();
    let mut chunks = stream_file(snapshot, &add, &hidden).await?;
    let options = &FileWriteOptions {
        hidden: hidden.clone(),
        ..options.clone()
    };
    let mut out = FileRewrite {
        add,
        written: None,
        matched_sources: Vec::new(),
        rows_deleted: 0,
        rows_updated: 0,
        feed: Feed::new(),
        kept_row_ids: row_ids.is_some(),
    };
    // Rows kept before the first change: unwritten until the file turns out to change.
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut writer: Option<StreamWriter> = None;
    while let Some(chunk) = chunks.try_next().await? {
        let (chunk, ids) = match row_ids.as_mut() {
            Some(r) => {
                let (chunk, ids) = r.split(chunk)?;
                (chunk, Some(ids))
            }
            None => (chunk, None),
        };
        let change = decide(&chunk)?;
        out.rows_deleted += change.rows_deleted;
        out.rows_updated += change.rows_updated;
        out.matched_sources.extend(change.matched_sources);
        out.feed.extend(change.feed);
        let keep = match &change.deleted {
            Some(mask) if mask.true_count() > 0 => {
                if writer.is_none() {
                    let mut w = StreamWriter::start(
                        snapshot.location(),
                        snapshot.schema(),
                        snapshot.partition_columns(),
                        options,
                        false,
                    );
                    for batch in pending.drain(..) {
                        w.send(batch).await?;
                    }
                    writer = Some(w);
                }
                Some(not(mask).map_err(Error::arrow("rewriting a file"))?)
            }
            _ => None,
        };
        let kept = match &keep {
            Some(keep) => {
                filter_record_batch(&chunk, keep).map_err(Error::arrow("rewriting a file"))?
            }
            None => chunk,
        };
        // Generated columns of rewritten rows follow their new values.
        let (mut replacement, _) = prepare_batches(
            snapshot.schema(),
            snapshot.partition_columns(),
            &without_generated(snapshot.schema(), &change.replacement),
            SchemaMode::Strict,
        )?;
        let kept = match &ids {
            Some(ids) => {
                let fields = &hidden;
                let updated = match replacement.is_empty() {
                    true => Vec::new(),
                    false => {
                        let rows = concat_batches(&replacement[0].schema(), &replacement)
                            .map_err(Error::arrow("rewriting a file"))?;
                        out.kept_row_ids &= change.replaced.len() == rows.num_rows();
                        vec![ids.updated(&rows, &change.replaced, fields)?]
                    }
                };
                replacement = updated;
                ids.copied(&kept, keep.as_ref(), fields)?
            }
            None => kept,
        };
        let batches = std::iter::once(kept)
            .chain(replacement)
            .filter(|b| b.num_rows() > 0);
        match writer.as_mut() {
            Some(w) => {
                for batch in batches {
                    w.send(batch).await?;
                }
            }
            None => pending.extend(batches),
        }
    }
    if let Some(w) = writer {
        out.written = Some(w.finish().await?);
    }
    Ok(out)
}

/// Puts the rewrites into `txn`: each changed file is removed and its new version added
/// (with inline index segments for it), the change data feed (the rewrites' and `feed`)
/// is written when the table records one, and the metrics count them.
///
/// Fails when an inline index segment or a change file cannot be written.
pub(crate) async fn commit_rewrites(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    rewrites: Vec<FileRewrite>,
    inserted: WrittenFiles,
    mut feed: Feed,
    now_ms: i64,
    metrics: &mut DmlMetrics,
) -> Result<()> {
    let mut all = inserted;
    let mut rewrites = rewrites;
    for rewrite in &mut rewrites {
        feed.append(&mut rewrite.feed);
    }
    metrics.bytes_written += write_feed(txn, snapshot, feed, now_ms).await?;
    for rewrite in rewrites {
        let Some(written) = rewrite.written else {
            continue;
        };
        txn.note_row_ids_kept(rewrite.kept_row_ids);
        txn.remove_file(rewrite.add.into_remove(now_ms));
        metrics.files_removed += 1;
        all.rows += written.rows;
        all.bytes += written.bytes;
        all.adds.extend(written.adds);
        all.captured.extend(written.captured);
    }
    let inline = InlineSegments::of(snapshot)?;
    inline
        .add_to(txn, snapshot, &all.adds, &inline.columns(), &all.captured)
        .await?;
    metrics.files_added += all.adds.len();
    metrics.bytes_written += all.bytes;
    for add in all.adds {
        txn.add_file(add);
    }
    Ok(())
}
