//! In-commit timestamps (the `inCommitTimestamp` writer feature): when a table enables
//! them, every commit carries its time inside `commitInfo.inCommitTimestamp`, strictly
//! above the previous commit's, and readers use it instead of file times for history and
//! time travel.

use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::log::{log_dir, parse_commit};
use crate::protocol::names::commit_file_name;
use crate::protocol::properties::{
    ICT_ENABLEMENT_TIMESTAMP, ICT_ENABLEMENT_VERSION, TableProperties,
};
use crate::protocol::{Action, Metadata};
use crate::snapshot::Snapshot;

use super::commit_info::commit_timestamp;

/// Whether the metadata among `actions` (the last, when several) enables in-commit
/// timestamps; `None` when the actions change no metadata.
pub(crate) fn enabled_in(actions: &[Action]) -> Option<bool> {
    actions.iter().rev().find_map(|a| match a {
        Action::Metadata(m) => Some(enabled(m)),
        _ => None,
    })
}

/// Whether `metadata` enables in-commit timestamps.
fn enabled(metadata: &Metadata) -> bool {
    TableProperties::new(metadata)
        .in_commit_timestamps_since()
        .is_some()
}

/// Whether a commit on `base` with `actions` must carry an in-commit timestamp: the
/// metadata in effect (the commit's own, else the base's) enables them.
pub(crate) fn required(base: &Snapshot, actions: &[Action]) -> bool {
    enabled_in(actions).unwrap_or_else(|| enabled(base.metadata()))
}

/// Whether a commit of `actions` on `base` carries an in-commit timestamp, and the time
/// it must be stamped after: [`floor`] when it does, else the newest time `base` knows.
///
/// Fails as [`floor`] does.
pub(crate) async fn floor_for(base: &Snapshot, actions: &[Action]) -> Result<(bool, i64)> {
    match required(base, actions) {
        true => Ok((true, floor(base).await?)),
        false => Ok((false, base.latest_commit_timestamp_ms())),
    }
}

/// The time a commit on `base` must be stamped after: the newest timestamp `base` knows
/// of. A snapshot read from a checkpoint has not seen its last commit's `commitInfo`, so
/// that commit is read (when it is still there); without it, the file time stands.
///
/// Fails with [`Error::Store`] when the commit cannot be read for another reason than
/// being gone, and as [`parse_commit`] does for a malformed one.
pub(crate) async fn floor(base: &Snapshot) -> Result<i64> {
    if base.recorded_commit_timestamp().is_some() {
        return Ok(base.latest_commit_timestamp_ms());
    }
    let path = log_dir(base.location().root()).join(commit_file_name(base.version()));
    let bytes = match base.location().store().get(&path).await {
        Ok(found) => found
            .bytes()
            .await
            .map_err(Error::store(tarn_store::StoreOp::Get, &path))?,
        Err(object_store::Error::NotFound { .. }) => {
            return Ok(base.latest_commit_timestamp_ms());
        }
        Err(e) => return Err(Error::store(tarn_store::StoreOp::Get, &path)(e)),
    };
    let recorded = commit_timestamp(&parse_commit(base.version(), &bytes)?);
    Ok(recorded
        .unwrap_or(i64::MIN)
        .max(base.latest_commit_timestamp_ms()))
}

/// When this commit turns in-commit timestamps on for a table that had commits without
/// them, records in the metadata it writes its own version and timestamp
/// (`delta.inCommitTimestampEnablementVersion`, `...Timestamp`), as readers need to tell
/// the commits apart. Called at every attempt: a rebased commit gets its new version.
pub(crate) fn record_enablement(
    base: &Snapshot,
    actions: &mut [Action],
    version: i64,
    timestamp: i64,
) {
    if enabled(base.metadata()) {
        return;
    }
    for action in actions.iter_mut().rev() {
        if let Action::Metadata(m) = action {
            if enabled(m) {
                m.configuration
                    .insert(ICT_ENABLEMENT_VERSION.into(), Some(version.to_string()));
                m.configuration
                    .insert(ICT_ENABLEMENT_TIMESTAMP.into(), Some(timestamp.to_string()));
            }
            return;
        }
    }
}

/// Stamps a `commitInfo` with its in-commit timestamp.
pub(crate) fn stamp(info: &mut Action, timestamp: i64) {
    if let Action::CommitInfo(c) = info {
        c.in_commit_timestamp = Some(timestamp);
    }
}
