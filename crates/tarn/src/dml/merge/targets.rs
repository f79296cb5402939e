//! Reading the target rows a MERGE may change: whole candidate files when rows no source
//! row matched can change, else only the rows whose key a source row has (found by a key
//! index, or by reading the key columns first and probing them on every core).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::super::{read_candidates, read_selected, row_ids};
use super::plan::{MergePlan, take_rows};
use crate::error::Result;
use crate::protocol::Add;
use crate::scan::{FileRows, ScanPlan};
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
    // every column from the source), the keys are all that is read.
    let keys_only = !plan.needs_target_values() && snapshot.partition_columns().is_empty();
    if keys_only {
        unindexed.append(&mut wanted);
    }
    let keyed = read_selected(
        &snapshot.scan().select(names.clone()).with_row_ids(hidden),
        unindexed,
    )
    .await?;
    // Each file's keys are probed on a task of its own: every core probes.
    let cores = crate::tasks::cores();
    let probed: Vec<_> = futures::stream::iter(keyed)
        .map(|(add, rows)| {
            let (plan, names) = (Arc::clone(plan), names.clone());
            crate::tasks::spawn("probing merge keys", async move {
                let hits = plan.key_hits(&rows.batch, &names)?;
                Ok((add, rows, hits))
            })
        })
        .buffered(cores)
        .try_collect()
        .await?;
    let mut targets = Vec::new();
    for (add, rows, hits) in probed {
        if hits.is_empty() {
            continue;
        }
        let positions: Vec<u64> = hits.iter().map(|h| rows.positions[*h as usize]).collect();
        if keys_only {
            let keys = take_rows(&rows.batch, &hits)?;
            let batch = plan.keys_only_target(&keys)?;
            let (physical_rows, deleted_before) = (rows.physical_rows, rows.deleted_before);
            let ids = rows.ids.map(|ids| ids.take(&hits)).transpose()?;
            targets.push((
                add,
                FileRows {
                    batch,
                    positions,
                    physical_rows,
                    deleted_before,
                    ids,
                },
            ));
        } else {
            wanted.push((add, Some(positions.into_iter().collect())));
        }
    }
    if !keys_only {
        targets = read_selected(&row_ids::scan_with_ids(snapshot), wanted).await?;
    }
    Ok(targets)
}
