//! Log cleanup on demand: [`Table::cleanup_log`] deletes the commits and checkpoints the
//! table's `delta.logRetentionDuration` no longer keeps, and the group-commit proposals and
//! claims of decided versions. The same cleanup runs after checkpoints (at most once per
//! tenth of the retention per table handle) unless `delta.enableExpiredLogCleanup` is
//! `false`.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::protocol::features::ensure_writable;
use crate::table::Table;
use crate::txn::{LogCleanupOutcome, cleanup_log};

/// A log cleanup being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct LogCleanupBuilder<'a> {
    table: &'a Table,
    retention: Option<Duration>,
    dry_run: bool,
    enforce_retention: bool,
}

impl Table {
    /// Starts a cleanup of the table's log.
    pub fn cleanup_log(&self) -> LogCleanupBuilder<'_> {
        LogCleanupBuilder {
            table: self,
            retention: None,
            dry_run: false,
            enforce_retention: true,
        }
    }
}

impl LogCleanupBuilder<'_> {
    /// How far back time travel must keep working (default: the table's
    /// `delta.logRetentionDuration`, 30 days unless set). Versions committed within it
    /// stay readable.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Whether a retention shorter than the table's is refused (default: yes). A writer
    /// checks that the log still holds the commits after its snapshot only once the
    /// snapshot is half the table's retention old; a shorter cleanup can reach younger
    /// snapshots, whose next commit could then land where no reader looks.
    pub fn with_enforce_retention(mut self, enforce: bool) -> Self {
        self.enforce_retention = enforce;
        self
    }

    /// Only count what would be deleted.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Cleans the log of the table's newest version. The retention is measured on the
    /// store's clock back from the newest commit; every version committed within it
    /// stays readable (its checkpoint and the commits after it are kept), and the newest
    /// checkpoint is never passed. Readers of the newest version are unaffected.
    ///
    /// Fails with [`Error::InvalidArgument`] for a retention shorter than the table's
    /// unless told otherwise, with [`Error::Store`] when the log cannot be listed or a
    /// file deleted (what was deleted stays deleted: only files no kept version needs),
    /// and with the writer-feature errors when Tarn cannot write the table.
    pub async fn execute(self) -> Result<LogCleanupOutcome> {
        let snapshot = self.table.snapshot().refresh().await?;
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        let table_retention = snapshot.properties().log_retention();
        let retention = self.retention.unwrap_or(table_retention);
        if self.enforce_retention && retention < table_retention {
            return Err(Error::InvalidArgument {
                name: "retention",
                reason: format!(
                    "{retention:?} is shorter than the table's delta.logRetentionDuration \
                     ({table_retention:?}); writers holding older snapshots could commit where \
                     no reader looks. Use with_enforce_retention(false) to clean up anyway"
                ),
            });
        }
        cleanup_log(&snapshot, retention, self.dry_run).await
    }
}
