//! What a commit did: the version, its attempts and the snapshot after it; and when a
//! failed commit's outcome is unknown.

use object_store::path::Path;

use super::checkpoint::CheckpointTask;
use super::group;
use crate::error::Error;
use crate::snapshot::Snapshot;

/// What a commit did.
#[derive(Debug, Clone)]
#[must_use = "the outcome holds the snapshot after the commit"]
pub struct CommitOutcome {
    /// The version committed (for a read-only transaction, the version it read).
    pub version: i64,
    /// Commit attempts (0 for a read-only transaction, 1 when no writer won a race).
    pub attempts: u32,
    /// The commit's `commitInfo.txnId` (empty for a read-only transaction).
    pub txn_id: String,
    /// The versions other writers committed first, which this commit was rebased over.
    pub rebased_over: Vec<i64>,
    /// The checkpoint being written after the commit, when one was due. It is written in
    /// the background, off the commit's critical path; its failure never fails the
    /// commit.
    pub checkpoint: Option<CheckpointTask>,
    /// The table after the commit.
    pub snapshot: Snapshot,
}

impl CommitOutcome {
    /// The outcome of an operation that had nothing to commit: no attempts, at
    /// `snapshot`'s version.
    pub fn unchanged(snapshot: &Snapshot) -> Self {
        Self {
            version: snapshot.version(),
            attempts: 0,
            txn_id: String::new(),
            rebased_over: Vec::new(),
            checkpoint: None,
            snapshot: snapshot.clone(),
        }
    }
}

/// An error met while this writer's proposal may still be carried (its window has not
/// passed at `base`): the outcome is unknown, never a failure, since a later commit could
/// contradict one. A conflict stands (every committer finds it too, so none carries the
/// proposal past it), and so does any error once the window has passed.
pub(crate) fn unknown_while_out(
    e: Error,
    published: &Option<(i64, Path)>,
    base: &Snapshot,
    txn_id: &str,
) -> Error {
    match published {
        Some((b, _))
            if base.version() < b + group::WINDOW && !matches!(e, Error::Conflict { .. }) =>
        {
            Error::CommitStateUnknown {
                version: base.version() + 1,
                last_version: b + group::WINDOW,
                txn_id: txn_id.to_string(),
                reason: format!(
                    "{e}; its group-commit proposal may still be carried by a commit up to \
                     version {}",
                    b + group::WINDOW
                ),
            }
        }
        _ => e,
    }
}
