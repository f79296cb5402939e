//! Deletion-vector rebase: two transactions that delete rows of one file through
//! deletion vectors do not conflict when their rows are disjoint. The later one unites
//! its rows with the winner's into a new DV on the winner's version of the file.

use roaring::RoaringTreemap;

use super::conflict::{DvRebase, WinningCommit};
use crate::dv::{DvFileWriter, describe_bitmap, load_deletion_vector};
use crate::error::{ConflictReason, Error, Result};
use crate::paths;
use crate::protocol::{Action, Add};
use crate::snapshot::Snapshot;

/// A file a transaction changes through a deletion vector: the rows its DV held before,
/// and the rows the transaction deletes.
#[derive(Debug, Clone)]
pub(crate) struct DvChange {
    /// The resolved path.
    pub(crate) path: String,
    pub(crate) before: RoaringTreemap,
    pub(crate) rows: RoaringTreemap,
    pub(crate) physical_rows: u64,
}

impl DvChange {
    /// The change that deletes `rows` of `add`, whose DV held `before`.
    pub(crate) fn new(
        snapshot: &Snapshot,
        add: &Add,
        before: RoaringTreemap,
        rows: RoaringTreemap,
        physical_rows: u64,
    ) -> Self {
        let path = paths::canonical(snapshot.location(), &add.path);
        Self::at(path, before, rows, physical_rows)
    }

    /// The change that deletes `rows` of the file at the resolved `path`, whose DV held
    /// `before`.
    pub(crate) fn at(
        path: String,
        before: RoaringTreemap,
        rows: RoaringTreemap,
        physical_rows: u64,
    ) -> Self {
        Self {
            path,
            rows: &rows - &before,
            before,
            physical_rows,
        }
    }
}

/// Unites a concurrent deletion-vector change to a file with ours: conflicts when both
/// deleted one row, otherwise rewrites our actions to replace the winner's version of the
/// file with one whose DV holds both sets of rows (written to a new DV file when it does
/// not fit inline).
pub(crate) async fn merge_deletion_vectors(
    base: &Snapshot,
    winner: &WinningCommit,
    rebase: DvRebase,
    actions: &mut Vec<Action>,
    dv_changes: &mut [DvChange],
    now_ms: i64,
) -> Result<()> {
    let location = base.location();
    let Some(change) = dv_changes.iter_mut().find(|c| c.path == rebase.path) else {
        return Ok(());
    };
    let theirs = load_deletion_vector(location, &rebase.winner_dv).await?;
    let overlap = &(&theirs - &change.before) & &change.rows;
    if !overlap.is_empty() {
        return Err(Error::Conflict {
            winning_version: winner.version,
            operation: winner.operation(),
            reason: ConflictReason::ConcurrentDeletionVectorOverlap {
                file: rebase.winner_add.path.clone(),
                rows: overlap.len(),
            },
        });
    }
    let united = &theirs | &change.rows;
    // Our remove now takes out the winner's version of the file.
    let same = |p: &str| paths::canonical(location, p) == rebase.path;
    actions.retain(|a| !matches!(a, Action::Remove(r) if same(&r.path)));
    actions.push(Action::Remove(
        rebase.winner_add.clone().into_remove(now_ms),
    ));
    let had_add = actions
        .iter()
        .any(|a| matches!(a, Action::Add(add) if same(&add.path)));
    actions.retain(|a| !matches!(a, Action::Add(add) if same(&add.path)));
    if had_add && united.len() < change.physical_rows {
        let threshold = base.properties().inline_dv_threshold();
        let mut file = DvFileWriter::new();
        let descriptor = describe_bitmap(&united, threshold, &mut file);
        file.upload(location).await?;
        actions.push(Action::Add(
            rebase.winner_add.clone().with_deletion_vector(descriptor),
        ));
    }
    change.before = theirs;
    Ok(())
}
