//! Log cleanup of a table: the expired commits and checkpoints (`log::cleanup`), and the
//! group-commit proposals and claims of versions already decided. It runs after each
//! checkpoint unless `delta.enableExpiredLogCleanup` is `false`, and on demand
//! ([`Table::cleanup_log`](crate::Table::cleanup_log)).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;

use super::claim::leftover_claims;
use super::group::lapsed;
use crate::error::{Error, Result};
use crate::log::cleanup::{delete_in_order, pending, plan};
use crate::log::log_dir;
use crate::protocol::features::ensure_writable;
use crate::protocol::names::commit_file_name;
use crate::snapshot::Snapshot;

/// What a log cleanup deleted (or, in a dry run, would delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCleanupOutcome {
    /// The oldest version the log can rebuild after the cleanup (its checkpoint and every
    /// commit after it stay); `None` when nothing was old enough to go.
    pub oldest_version: Option<i64>,
    /// Commit files deleted.
    pub commits: usize,
    /// Checkpoint files deleted (each part of a multi-part checkpoint counts).
    pub checkpoints: usize,
    /// Other versioned log files deleted (`.crc`, compacted logs).
    pub other_files: usize,
    /// Group-commit proposals deleted whose window had passed.
    pub proposals: usize,
    /// Group-commit claims deleted of versions long decided.
    pub claims: usize,
    /// The retention applied.
    pub retention: Duration,
    /// Whether this was a dry run (nothing deleted).
    pub dry_run: bool,
}

/// Cleans the log of `snapshot`'s table with `retention`, measured back from the store's
/// time of `snapshot`'s commit: files of versions below the newest checkpoint that old
/// are deleted oldest first, then lapsed proposals and leftover claims.
///
/// Fails with [`Error::Store`] when the log cannot be listed or a file deleted; what was
/// deleted stays deleted, and never anything a version within the retention needs.
pub(crate) async fn cleanup_log(
    snapshot: &Snapshot,
    retention: Duration,
    dry_run: bool,
) -> Result<LogCleanupOutcome> {
    let location = snapshot.location();
    let store = location.store().as_ref();
    let dir = log_dir(location.root());
    let head = dir.clone().join(commit_file_name(snapshot.version()));
    let newest_ms = store
        .head(&head)
        .await
        .map_err(Error::store(tarn_store::StoreOp::Head, &head))?
        .last_modified
        .timestamp_millis();
    // Local folders list in no particular order; object stores (and memory) in key order.
    let ordered = location.url().scheme() != "file";
    let (expired, pending) = futures::try_join!(
        plan(store, location.root(), newest_ms, retention, ordered),
        pending(store, location.root())
    )?;
    let latest = snapshot.version();
    let proposals = lapsed(&pending.proposals, latest);
    let claims = leftover_claims(&pending.claims, latest);
    let outcome = LogCleanupOutcome {
        oldest_version: expired.cutoff,
        commits: expired.commits.len(),
        checkpoints: expired.checkpoints.len(),
        other_files: expired.others.len(),
        proposals: proposals.len(),
        claims: claims.len(),
        retention,
        dry_run,
    };
    if !dry_run {
        delete_in_order(store, &dir, expired.paths()).await?;
        delete_in_order(store, &dir, proposals.into_iter().chain(claims).collect()).await?;
    }
    Ok(outcome)
}

/// When the cleanups after this handle's checkpoints last ran.
#[derive(Default)]
struct LastCleanup(Mutex<Option<Instant>>);

/// The fraction of the retention a handle waits between its cleanups after checkpoints:
/// the log holds at most a tenth more than the retention asks, and a writer that
/// checkpoints every few commits does not list the whole log at each.
const CLEANUP_SPACING: u32 = 10;

/// The cleanup that follows a checkpoint of `snapshot`, when the table allows it and this
/// handle has not cleaned within a tenth of the retention. Its failure is not the
/// checkpoint's: the next one tries again.
pub(crate) async fn after_checkpoint(snapshot: &Snapshot) {
    let properties = snapshot.properties();
    let writable =
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema()).is_ok();
    if !writable || !properties.expired_log_cleanup() {
        return;
    }
    let retention = properties.log_retention();
    let last = snapshot.caches().shared::<LastCleanup>();
    {
        let mut last = last.0.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < retention / CLEANUP_SPACING) {
            return;
        }
        *last = Some(Instant::now());
    }
    if cleanup_log(snapshot, retention, false).await.is_err() {
        // Let the next checkpoint try again.
        *last.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}
