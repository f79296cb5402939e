//! Restore: one commit that brings the table back to the state of an earlier version, as
//! Delta's `RESTORE TABLE ... TO VERSION AS OF` does.
//!
//! The commit adds back every file (with its deletion vector) that the old version had
//! and the current one lacks, and removes every file the current version has and the old
//! one lacked; history stays, so the restore itself can be undone by another. The old
//! schema and properties come back too, but for what must only move forward: identity
//! high-water marks, the highest column id, and the protocol, which keeps every feature
//! it has. Application transactions and metadata domains are left as they are.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::paths;
use crate::protocol::features::ensure_writable;
use crate::protocol::mapping::MAX_COLUMN_ID;
use crate::protocol::{Action, Add, Metadata};
use crate::snapshot::{FileKey, Snapshot};
use crate::table::Table;
use crate::txn::CommitOutcome;

/// How many objects a restore checks for at once.
const HEAD_CONCURRENCY: usize = 16;

/// What a restore did. The counts are those Spark records in the commit's
/// `operationMetrics`.
#[derive(Debug, Clone)]
pub struct RestoreOutcome {
    /// The restore's commit.
    pub commit: CommitOutcome,
    /// The version whose state the table is back in.
    pub restored_version: i64,
    /// Files added back (`numRestoredFiles`).
    pub files_added: usize,
    /// Their bytes (`restoredFilesSize`).
    pub bytes_added: u64,
    /// Files taken out (`numRemovedFiles`).
    pub files_removed: usize,
    /// Their bytes (`removedFilesSize`).
    pub bytes_removed: u64,
    /// Files of the table after the restore (`numOfFilesAfterRestore`).
    pub files_after: usize,
    /// Their bytes (`tableSizeAfterRestore`).
    pub bytes_after: u64,
}

/// Which earlier state a restore goes back to.
#[derive(Debug, Clone, Copy)]
enum Target {
    Version(i64),
    Timestamp(i64),
}

/// A restore being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct RestoreBuilder<'a> {
    table: &'a mut Table,
    target: Option<Target>,
}

impl Table {
    /// Starts a restore of the table to an earlier version; name it with
    /// [`RestoreBuilder::to_version`] or [`RestoreBuilder::to_timestamp`].
    pub fn restore(&mut self) -> RestoreBuilder<'_> {
        RestoreBuilder {
            table: self,
            target: None,
        }
    }
}

impl RestoreBuilder<'_> {
    /// Restores the state of `version`.
    pub fn to_version(mut self, version: i64) -> Self {
        self.target = Some(Target::Version(version));
        self
    }

    /// Restores the state of the newest version committed at or before `timestamp_ms`
    /// (milliseconds since the epoch), as [`Table::load_timestamp`] finds it.
    pub fn to_timestamp(mut self, timestamp_ms: i64) -> Self {
        self.target = Some(Target::Timestamp(timestamp_ms));
        self
    }

    /// Commits the restore and moves the handle to it. The restore reads the whole
    /// table, so a concurrent change conflicts with it as the handle's isolation level
    /// says.
    ///
    /// Fails with [`Error::InvalidArgument`] when no target was named or it is negative or
    /// not older than the handle's version; as [`Table::load_version`] and
    /// [`Table::load_timestamp`] do for a version the log no longer holds
    /// ([`Error::VersionNotFound`], [`Error::TimestampOutOfRange`]); with
    /// [`Error::RestoreFilesMissing`] when files the old version needs are gone (a vacuum
    /// removed them); with [`Error::AppendOnly`] when the table is append-only and the
    /// restore would remove files; and as
    /// [`Transaction::commit`](crate::Transaction::commit) does.
    /// Nothing is committed when it fails.
    pub async fn execute(self) -> Result<RestoreOutcome> {
        let table = self.table;
        let current = table.snapshot().clone();
        ensure_writable(current.protocol(), current.metadata(), current.schema())?;
        let builder = Snapshot::builder(current.location().clone());
        let (old, parameter) = match self.target {
            None => {
                return Err(Error::InvalidArgument {
                    name: "restore",
                    reason: "name the version to restore with to_version or to_timestamp".into(),
                });
            }
            Some(Target::Version(v)) => {
                if v < 0 || v >= current.version() {
                    return Err(not_older(v, current.version()));
                }
                (builder.at_version(v).build().await?, ("version", v))
            }
            Some(Target::Timestamp(ms)) => {
                let old = builder.at_timestamp(ms).build().await?;
                if old.version() >= current.version() {
                    return Err(not_older(old.version(), current.version()));
                }
                (old, ("timestamp", ms))
            }
        };
        let (added, removed) = difference(&old, &current);
        // An append-only table refuses a restore that takes rows out, as Spark does: the
        // check is on the table as read, not on the old metadata the restore brings back.
        if !removed.is_empty() && current.properties().append_only() {
            return Err(Error::AppendOnly {
                table: current.location().url().to_string(),
                operation: "restore".into(),
            });
        }
        check_present(&old, &added).await?;

        let now = table.clock().now_ms();
        let size = |files: &[&Add]| files.iter().map(|a| a.size.max(0) as u64).sum::<u64>();
        let bytes_after = old.files().map(|a| a.size.max(0) as u64).sum::<u64>();
        let (files_added, bytes_added) = (added.len(), size(&added));
        let (files_removed, bytes_removed) = (removed.len(), size(&removed));
        let mut txn = table
            .transaction()
            .with_operation("RESTORE")
            .with_parameter(parameter.0, Value::from(parameter.1))
            .with_metric("numRestoredFiles", files_added)
            .with_metric("restoredFilesSize", bytes_added)
            .with_metric("numRemovedFiles", files_removed)
            .with_metric("removedFilesSize", bytes_removed)
            .with_metric("numOfFilesAfterRestore", old.file_count())
            .with_metric("tableSizeAfterRestore", bytes_after);
        txn.record_read_whole_table();
        let metadata = restored_metadata(&old, &current)?;
        let protocol = current.protocol().merged_with(old.protocol());
        ensure_writable(
            &protocol,
            &metadata,
            &crate::protocol::StructType::from_json(&metadata.schema_string)?,
        )?;
        if &protocol != current.protocol() {
            txn.add_action(Action::Protocol(protocol));
        }
        if &metadata != current.metadata() {
            txn.set_metadata(metadata);
        }
        for add in removed {
            txn.remove_file(add.clone().into_remove(now));
        }
        for add in added {
            let mut add = add.clone();
            add.data_change = true;
            txn.add_file(add);
        }
        let commit = table.commit(txn).await?;
        Ok(RestoreOutcome {
            commit,
            restored_version: old.version(),
            files_added,
            bytes_added,
            files_removed,
            bytes_removed,
            files_after: old.file_count(),
            bytes_after,
        })
    }
}

fn not_older(target: i64, current: i64) -> Error {
    Error::InvalidArgument {
        name: "restore",
        reason: format!(
            "version {target} is not one before the table's version {current}: only an \
             earlier version can be restored (refresh the handle to see newer commits)"
        ),
    }
}

/// The files `old` has and `current` lacks, and the other way round, each keyed by path
/// and deletion vector (a file whose DV changed is removed and added back with the old
/// one).
fn difference<'a>(old: &'a Snapshot, current: &'a Snapshot) -> (Vec<&'a Add>, Vec<&'a Add>) {
    let keys = |s: &'a Snapshot| -> HashMap<&'a FileKey, &'a Add> { s.file_entries().collect() };
    let (then, now) = (keys(old), keys(current));
    let mut added: Vec<&Add> = then
        .iter()
        .filter(|(k, _)| !now.contains_key(*k))
        .map(|(_, a)| *a)
        .collect();
    let mut removed: Vec<&Add> = now
        .iter()
        .filter(|(k, _)| !then.contains_key(*k))
        .map(|(_, a)| *a)
        .collect();
    // A stable order makes the commit the same for the same two versions.
    added.sort_by(|a, b| a.path.cmp(&b.path));
    removed.sort_by(|a, b| a.path.cmp(&b.path));
    (added, removed)
}

/// The old version's metadata, with what must only move forward taken from the current
/// one: identity high-water marks and the highest column id.
fn restored_metadata(old: &Snapshot, current: &Snapshot) -> Result<Metadata> {
    let mut metadata = old.metadata().clone();
    if metadata == *current.metadata() {
        return Ok(metadata);
    }
    let mut schema = old.schema().clone();
    crate::write::keep_high_water_marks(&mut schema, current.schema());
    metadata.schema_string = schema.to_json();
    let column_id = |m: &Metadata| {
        m.property(MAX_COLUMN_ID)
            .and_then(|v| v.parse::<i64>().ok())
    };
    if let (Some(then), Some(now)) = (column_id(&metadata), column_id(current.metadata()))
        && now > then
    {
        metadata
            .configuration
            .insert(MAX_COLUMN_ID.to_string(), Some(now.to_string()));
    }
    Ok(metadata)
}

/// Fails with [`Error::RestoreFilesMissing`] unless every data file and deletion-vector
/// file of `added` is in the store: a vacuum may have removed what the old version needs,
/// and a commit naming missing files would make the table unreadable.
async fn check_present(old: &Snapshot, added: &[&Add]) -> Result<()> {
    let location = old.location();
    let mut objects: Vec<(String, Path)> = Vec::new();
    for add in added {
        objects.push((add.path.clone(), paths::resolve(location, &add.path)?));
        if let Some(dv) = &add.deletion_vector {
            match dv.location()? {
                crate::protocol::dv::DvLocation::Relative { path, .. } => {
                    let object = paths::join_relative(location.root(), &path)?;
                    objects.push((path, object));
                }
                crate::protocol::dv::DvLocation::Absolute { url, .. } => {
                    objects.push((url.clone(), paths::resolve(location, &url)?));
                }
                crate::protocol::dv::DvLocation::Inline(_) => {}
            }
        }
    }
    objects.sort();
    objects.dedup();
    let store = location.store();
    let missing: Vec<String> = futures::stream::iter(objects)
        .map(|(name, object)| {
            let store = store.clone();
            async move {
                match store.head(&object).await {
                    Ok(_) => Ok(None),
                    Err(object_store::Error::NotFound { .. }) => Ok(Some(name)),
                    Err(e) => Err(Error::store(tarn_store::StoreOp::Head, &object)(e)),
                }
            }
        })
        .buffer_unordered(HEAD_CONCURRENCY)
        .try_filter_map(|m| async move { Ok(m) })
        .try_collect()
        .await?;
    if missing.is_empty() {
        return Ok(());
    }
    let mut missing = missing;
    missing.sort();
    Err(Error::RestoreFilesMissing {
        version: old.version(),
        missing,
    })
}
