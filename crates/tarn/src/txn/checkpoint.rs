//! Checkpoint scheduling: after a commit lands on a multiple of
//! `delta.checkpointInterval`, a classic checkpoint is written in the background, off
//! the commit's critical path. Its failure never fails the commit; readers then replay
//! a few more commits.

use std::fmt;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::log::checkpoint_write::{CheckpointWritten, write_checkpoint};
use crate::protocol::PrimitiveType;
use crate::snapshot::Snapshot;
use crate::stats::parsed::CheckpointLayout;

/// A checkpoint being written in the background after a commit.
#[derive(Clone)]
pub struct CheckpointTask {
    version: i64,
    result: Shared<BoxFuture<'static, std::result::Result<CheckpointWritten, Arc<Error>>>>,
}

impl CheckpointTask {
    /// The version being checkpointed.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Waits for the checkpoint.
    ///
    /// Fails with [`Error::CheckpointFailed`] naming the version and, as its source, why
    /// the checkpoint could not be written (the commit stands regardless; readers replay
    /// the commits instead).
    pub async fn wait(&self) -> Result<CheckpointWritten> {
        self.result
            .clone()
            .await
            .map_err(|source| Error::CheckpointFailed {
                version: self.version,
                source,
            })
    }
}

impl fmt::Debug for CheckpointTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointTask")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Starts writing a checkpoint when one is due: at every multiple of the table's
/// interval, and, when the newest checkpoint known is half an interval overdue, at any
/// version (the process that committed the multiple may have exited before its
/// background checkpoint landed, as short-lived writers do).
pub(crate) fn maybe_checkpoint(
    snapshot: &Snapshot,
    clock: &Arc<dyn Clock>,
) -> Option<CheckpointTask> {
    let interval = (snapshot.properties().checkpoint_interval() as i64).max(1);
    let version = snapshot.version();
    let since = version - snapshot.known_checkpoint().unwrap_or(0);
    let due = version % interval == 0 || since >= interval + (interval + 1) / 2;
    if version == 0 || !due {
        return None;
    }
    let snapshot = snapshot.clone();
    let clock = Arc::clone(clock);
    let task = tokio::spawn(crate::background::tracked(async move {
        checkpoint(&snapshot, clock.now_ms()).await
    }));
    let result = async move {
        match task.await {
            Ok(result) => result.map_err(Arc::new),
            Err(source) => Err(Arc::new(Error::TaskFailed {
                task: "checkpoint",
                source,
            })),
        }
    }
    .boxed()
    .shared();
    Some(CheckpointTask { version, result })
}

/// Writes a classic checkpoint of `snapshot` and points `_last_checkpoint` at it;
/// tombstones older than the retention period at `now_ms` are left out. Then cleans the
/// log of what the retention no longer keeps (`super::log_cleanup`), as Delta does after a
/// checkpoint; that cleanup's failure does not fail the checkpoint.
pub(crate) async fn checkpoint(snapshot: &Snapshot, now_ms: i64) -> Result<CheckpointWritten> {
    let location = snapshot.location();
    let written = write_checkpoint(
        location.store().as_ref(),
        location.root(),
        snapshot.version(),
        snapshot.checkpoint_actions(now_ms),
        layout_of(snapshot),
    )
    .await?;
    super::log_cleanup::after_checkpoint(snapshot).await;
    Ok(written)
}

/// The checkpoint columns `snapshot`'s table asks for: typed statistics and partition
/// values beside the JSON ones unless its properties turn them off.
fn layout_of(snapshot: &Snapshot) -> CheckpointLayout {
    let properties = snapshot.properties();
    let partitions: Vec<(String, String, PrimitiveType)> = snapshot
        .partition_columns()
        .iter()
        .map(|pc| (pc.name.clone(), pc.physical_name.clone(), pc.data_type))
        .collect();
    CheckpointLayout::of(
        snapshot.schema(),
        &partitions,
        properties.num_indexed_cols(),
        properties.checkpoint_stats_as_json(),
        properties.checkpoint_stats_as_struct(),
    )
    .with_v2(snapshot.protocol().has_writer_feature("v2Checkpoint"))
}
