//! Deleting rows of a data file by position through a deletion vector, for callers that
//! find the rows themselves (the catalog drops a manifest row this way).

use roaring::RoaringTreemap;

use super::Transaction;
use crate::dv::{DvFileWriter, describe_bitmap, load_deletion_vector};
use crate::error::{Error, Result};
use crate::protocol::{Action, Add};

impl Transaction {
    /// Deletes the rows at `positions` (0-based, in file order) of the data file `add`
    /// through a deletion vector: the file is removed and added back with a DV holding
    /// these rows beside those its DV held (a file whose every row goes is removed
    /// instead). A commit that deletes other rows of the same file concurrently is united
    /// with this one when it retries, or when a group commit carries it; one that deleted
    /// one of these rows conflicts ([`ConflictReason::ConcurrentDeletionVectorOverlap`](crate::ConflictReason::ConcurrentDeletionVectorOverlap)).
    ///
    /// Fails with [`Error::InvalidArgument`] when the table does not support deletion
    /// vectors, `add` is not a live file of the transaction's snapshot (with the DV it
    /// holds there), its statistics give no row count, or a position is past its rows;
    /// and as a DV read or write does when its DV cannot be loaded or a DV file written.
    pub async fn delete_rows(&mut self, add: &Add, positions: &[u64]) -> Result<()> {
        let invalid = |reason: String| Error::InvalidArgument {
            name: "delete_rows",
            reason,
        };
        if !self
            .snapshot
            .protocol()
            .has_writer_feature("deletionVectors")
        {
            return Err(invalid(
                "deleting rows through deletion vectors needs them enabled: \
                 set_properties([(\"delta.enableDeletionVectors\", \"true\")])"
                    .into(),
            ));
        }
        let live = self.snapshot.live_file(&add.path);
        if live.is_none_or(|l| l.deletion_vector != add.deletion_vector) {
            return Err(invalid(format!(
                "{} is not a live file of version {} (or holds another deletion vector)",
                add.path,
                self.snapshot.version()
            )));
        }
        let Some(physical) = add.stats.as_ref().and_then(|s| s.num_records()) else {
            return Err(invalid(format!(
                "{} has no row count in its statistics",
                add.path
            )));
        };
        if let Some(p) = positions.iter().find(|p| **p >= physical) {
            return Err(invalid(format!(
                "row {p} of {} is past its {physical} rows",
                add.path
            )));
        }
        let location = self.snapshot.location().clone();
        let before = match &add.deletion_vector {
            Some(dv) => load_deletion_vector(&location, dv).await?,
            None => RoaringTreemap::new(),
        };
        let rows: RoaringTreemap = positions.iter().copied().collect();
        let all = &before | &rows;
        let now_ms = self.clock.now_ms();
        self.record_dv_change(add, before, rows, physical);
        self.actions
            .push(Action::Remove(add.clone().into_remove(now_ms)));
        if all.len() < physical {
            let threshold = self.snapshot.properties().inline_dv_threshold();
            let mut file = DvFileWriter::new();
            let descriptor = describe_bitmap(&all, threshold, &mut file);
            file.upload(&location).await?;
            self.actions
                .push(Action::Add(add.clone().with_deletion_vector(descriptor)));
        }
        Ok(())
    }
}
