//! Reading the target rows a MERGE may change: whole candidate files when rows no source
//! row matched can change, else only the rows whose key a source row has (found by a key
//! index, or by reading the key columns first and probing them on every core).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use roaring::RoaringTreemap;

use super::super::{read_candidates, read_selected, records_feed, row_ids};
use super::plan::{MergePlan, take_rows};
use crate::error::Result;
use crate::protocol::Add;
use crate::scan::shares_of;
use crate::scan::{FileRows, ScanPlan, read_file_rows_of};
use crate::snapshot::Snapshot;

/// The rows of the planned `files` the merge's clauses may change, per file: all of
/// them when `by_source`, else those whose key a source row has (just their keys when
/// the clauses need nothing else of the target).
///
/// Fails when a file cannot be read or its keys cannot be probed.
pub(super) async fn read_targets(
    plan: &Arc<MergePlan>,
    snapshot: &Snapshot,
    files: &ScanPlan,
    by_source: bool,
) -> Result<Vec<(Add, FileRows)>> {
    if by_source {
        // Every target row may change: read the candidates whole, once.
        return read_candidates(snapshot, &files.files).await;
    }
    let hidden = row_ids::hidden_fields(snapshot);
    // The rows a key index found, or else the keys first and then just the rows a
    // source key hits.
    let names = plan.key_names();
    let mut wanted = Vec::new();
    let mut unindexed = Vec::new();
    for add in &files.files {
        match files.rows_of(snapshot, add) {
            Some(rows) => wanted.push((add.clone(), Some(rows.clone()))),
            None => unindexed.push((add.clone(), None)),
        }
    }
    // When the clauses need nothing of the target but its keys (an upsert setting
    // every column from the source) and no change feed wants its old rows, the keys are
    // all that is read.
    let keys_only = !plan.needs_target_values()
        && snapshot.partition_columns().is_empty()
        && !records_feed(snapshot);
    if keys_only {
        unindexed.append(&mut wanted);
    }
    // Each file's keys are read and probed on a task of its own, every core probing, and
    // only the hits are kept: memory holds the matching rows, not every key read.
    let key_scan = snapshot.scan().select(names.clone()).with_row_ids(hidden);
    let shares = shares_of(unindexed.iter().map(|(add, _)| add), crate::tasks::cores());
    let hits: Vec<Option<(Add, Hits)>> = futures::stream::iter(unindexed.into_iter().zip(shares))
        .map(|((add, _), shares)| {
            let (plan, names, scan) = (Arc::clone(plan), names.clone(), key_scan.clone());
            crate::tasks::spawn("probing merge keys", async move {
                let rows = read_file_rows_of(&scan, &add, None, shares).await?;
                let hits = plan.key_hits(&rows.batch, &names)?;
                if hits.is_empty() {
                    return Ok(None);
                }
                let positions: Vec<u64> =
                    hits.iter().map(|h| rows.positions[*h as usize]).collect();
                if !keys_only {
                    return Ok(Some((
                        add,
                        Hits::Positions(positions.into_iter().collect()),
                    )));
                }
                let keys = take_rows(&rows.batch, &hits)?;
                let batch = plan.keys_only_target(&keys)?;
                let ids = rows.ids.map(|ids| ids.take(&hits)).transpose()?;
                let rows = FileRows {
                    batch,
                    positions,
                    physical_rows: rows.physical_rows,
                    deleted_before: rows.deleted_before,
                    ids,
                };
                Ok(Some((add, Hits::Rows(Box::new(rows)))))
            })
        })
        .buffered(crate::tasks::cores())
        .try_collect()
        .await?;
    let mut targets = Vec::new();
    for (add, hits) in hits.into_iter().flatten() {
        match hits {
            Hits::Rows(rows) => targets.push((add, *rows)),
            Hits::Positions(positions) => wanted.push((add, Some(positions))),
        }
    }
    if !keys_only {
        targets = read_selected(&row_ids::scan_with_ids(snapshot), wanted).await?;
    }
    Ok(targets)
}

/// What probing one file's keys found.
enum Hits {
    /// The matching rows themselves (their keys are all the clauses need).
    Rows(Box<FileRows>),
    /// The positions of the matching rows, to read whole.
    Positions(RoaringTreemap),
}
