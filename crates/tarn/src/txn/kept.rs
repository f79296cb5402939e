//! A commit's base must still be in the log. Log cleanup deletes every version below a
//! checkpoint at least `delta.logRetentionDuration` old; a writer whose snapshot is that
//! old could then put-if-absent the version after its base into an empty slot, under a
//! checkpoint readers start from: a commit that "lands" and is never read. Before the
//! first attempt, a snapshot older than half the retention (room for clock skew) lists
//! the log after its version; when the next commit is gone but later ones are there, the
//! commit conflicts and the writer reads the table again.

use crate::error::{ConflictReason, Error, Result};
use crate::log::list_log;
use crate::snapshot::Snapshot;

/// Fails with [`Error::Conflict`] ([`ConflictReason::LogCleanedUp`]) when a log cleanup
/// removed the commits after `snapshot`'s version; at `now_ms`, a snapshot younger than
/// half the table's log retention is not checked (no cleanup can have reached it).
///
/// Fails with [`Error::Store`] when the log cannot be listed.
pub(crate) async fn ensure_base_kept(snapshot: &Snapshot, now_ms: i64) -> Result<()> {
    let retention = snapshot.properties().log_retention();
    let half = i64::try_from(retention.as_millis() / 2).unwrap_or(i64::MAX);
    if now_ms.saturating_sub(snapshot.timestamp_ms()) < half {
        return Ok(());
    }
    let base = snapshot.version();
    let location = snapshot.location();
    let listing = list_log(location.store().as_ref(), location.root(), base + 1).await?;
    let next_kept = listing.commits.contains_key(&(base + 1));
    match listing.latest_version() {
        Some(later) if later > base && !next_kept => Err(Error::Conflict {
            winning_version: listing
                .commits
                .keys()
                .chain(listing.checkpoints.keys())
                .min()
                .copied()
                .unwrap_or(later),
            operation: "log cleanup".into(),
            reason: ConflictReason::LogCleanedUp { read_version: base },
        }),
        _ => Ok(()),
    }
}
