//! Committing: writing `_delta_log/<v>.json` with put-if-absent, rebasing blind appends
//! over commits that won the race, and checkpointing after the commit.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use chrono::Utc;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::log::checkpoint::{CheckpointWritten, write_checkpoint};
use crate::log::{log_dir, parse_commit};
use crate::protocol::names::commit_file_name;
use crate::protocol::{Action, CommitInfo};
use crate::snapshot::Snapshot;

/// The engine name written into `commitInfo.engineInfo`.
pub const ENGINE_INFO: &str = concat!("tarn/", env!("CARGO_PKG_VERSION"));

/// How often and how patiently a commit retries after losing the race for a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Backoff before the third attempt; it doubles after each further loss.
    pub base_backoff: Duration,
    /// The most a backoff grows to.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 30,
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// The jittered wait before `attempt` (1-based): none for the first two attempts (a
    /// rebase is usually enough), then a random share of an exponentially growing cap.
    fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 2 {
            return Duration::ZERO;
        }
        let cap = self
            .base_backoff
            .saturating_mul(1u32 << (attempt - 3).min(20))
            .min(self.max_backoff);
        let random = std::hash::RandomState::new().build_hasher().finish();
        cap.mul_f64((random % 10_000) as f64 / 10_000.0)
    }
}

/// A commit about to be written.
#[derive(Debug, Clone)]
pub(crate) struct PendingCommit {
    /// `commitInfo.operation`.
    pub(crate) operation: &'static str,
    /// `commitInfo.operationParameters`.
    pub(crate) parameters: Map<String, Value>,
    /// `commitInfo.operationMetrics`.
    pub(crate) metrics: Map<String, Value>,
    /// The actions, without `commitInfo`.
    pub(crate) actions: Vec<Action>,
}

impl PendingCommit {
    /// A blind append only adds files: it read nothing it could invalidate.
    fn is_blind_append(&self) -> bool {
        self.actions.iter().all(|a| matches!(a, Action::Add(_)))
    }
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The version committed.
    pub version: i64,
    /// Attempts it took (1 when no other writer won a race).
    pub attempts: u32,
    /// The checkpoint written after the commit, when one was due.
    pub checkpoint: Option<CheckpointWritten>,
    /// Why a due checkpoint could not be written; the commit stands regardless.
    pub checkpoint_error: Option<String>,
}

/// Commits `pending` on top of `snapshot`, retrying at the next version when another
/// writer took this one and nothing it did conflicts. Returns the snapshot after the
/// commit, built without reading the log again.
///
/// Fails with [`Error::Conflict`] naming the winning version when a concurrent commit
/// changed the metadata or protocol, or (for anything but a blind append) changed the
/// files; with [`Error::CommitRetriesExhausted`] after `retry.max_attempts`; and with
/// [`Error::Store`] when the PUT fails for another reason.
pub(crate) async fn commit(
    snapshot: &Snapshot,
    pending: PendingCommit,
    retry: &RetryPolicy,
) -> Result<(Snapshot, CommitOutcome)> {
    let store = snapshot.location().store();
    let dir = log_dir(snapshot.location().root());
    let txn_id = Uuid::new_v4().to_string();
    let blind = pending.is_blind_append();
    let read_version = snapshot.version();
    let mut base = snapshot.clone();
    let mut attempt = 0;
    loop {
        attempt += 1;
        if attempt > retry.max_attempts {
            return Err(Error::CommitRetriesExhausted {
                attempts: retry.max_attempts,
                version: base.version() + 1,
            });
        }
        let wait = retry.backoff(attempt);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let version = base.version() + 1;
        // Commit timestamps never go backwards, whatever this machine's clock says.
        let timestamp = Utc::now().timestamp_millis().max(base.timestamp_ms() + 1);
        let body = encode_commit(&pending, timestamp, read_version, blind, &txn_id)?;
        let path = dir.clone().join(commit_file_name(version));
        let put = store
            .put_opts(
                &path,
                PutPayload::from(body),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match put {
            Ok(_) => {
                let committed = base.with_commit(version, timestamp, pending.actions.clone())?;
                let (checkpoint, checkpoint_error) = maybe_checkpoint(&committed).await;
                return Ok((
                    committed,
                    CommitOutcome {
                        version,
                        attempts: attempt,
                        checkpoint,
                        checkpoint_error,
                    },
                ));
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                // Another writer won this version: read what it did (one GET) and rebase.
                let winner = store.get(&path).await.map_err(Error::store("get", &path))?;
                let winner_ts = winner.meta.last_modified.timestamp_millis();
                let bytes = winner.bytes().await.map_err(Error::store("get", &path))?;
                let actions = parse_commit(version, &bytes)?;
                check_conflict(&pending, blind, version, &actions)?;
                let winner_ts = commit_timestamp(&actions)
                    .unwrap_or(winner_ts)
                    .max(base.timestamp_ms() + 1);
                base = base.with_commit(version, winner_ts, actions)?;
            }
            Err(e) => return Err(Error::store("put", &path)(e)),
        }
    }
}

fn commit_timestamp(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(c) => c.in_commit_timestamp.or(c.timestamp),
        _ => None,
    })
}

/// Whether a concurrent commit invalidates this one.
fn check_conflict(
    pending: &PendingCommit,
    blind: bool,
    version: i64,
    winner: &[Action],
) -> Result<()> {
    let operation = winner
        .iter()
        .find_map(|a| match a {
            Action::CommitInfo(c) => c.operation.clone(),
            _ => None,
        })
        .unwrap_or_else(|| "UNKNOWN".into());
    let conflict = |reason: String| Error::Conflict {
        winning_version: version,
        operation: operation.clone(),
        reason,
    };
    for action in winner {
        match action {
            Action::Protocol(_) => {
                return Err(conflict("the protocol changed concurrently".into()));
            }
            Action::Metadata(_) => {
                return Err(conflict(
                    "the table metadata (schema, partitioning or properties) changed concurrently"
                        .into(),
                ));
            }
            Action::Txn(t)
                if pending
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::Txn(o) if o.app_id == t.app_id)) =>
            {
                return Err(conflict(format!(
                    "application {:?} committed concurrently",
                    t.app_id
                )));
            }
            Action::Add(add) if !blind && add.data_change => {
                return Err(conflict(format!(
                    "file {} was added concurrently",
                    add.path
                )));
            }
            Action::Remove(remove) if remove.data_change && !blind => {
                return Err(conflict(format!(
                    "file {} was removed concurrently",
                    remove.path
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

fn encode_commit(
    pending: &PendingCommit,
    timestamp: i64,
    read_version: i64,
    blind: bool,
    txn_id: &str,
) -> Result<Vec<u8>> {
    let mut other = Map::new();
    other.insert(
        "operationParameters".into(),
        Value::Object(pending.parameters.clone()),
    );
    other.insert(
        "operationMetrics".into(),
        Value::Object(pending.metrics.clone()),
    );
    if read_version >= 0 {
        other.insert("readVersion".into(), Value::from(read_version));
    }
    other.insert("isolationLevel".into(), Value::from("WriteSerializable"));
    other.insert("isBlindAppend".into(), Value::from(blind));
    other.insert("engineInfo".into(), Value::from(ENGINE_INFO));
    let info = Action::CommitInfo(CommitInfo {
        timestamp: Some(timestamp),
        in_commit_timestamp: None,
        operation: Some(pending.operation.to_string()),
        txn_id: Some(txn_id.to_string()),
        other,
    });
    let mut body = Vec::new();
    for action in std::iter::once(&info).chain(&pending.actions) {
        serde_json::to_writer(&mut body, action).map_err(|e| Error::Task(e.to_string()))?;
        body.push(b'\n');
    }
    Ok(body)
}

/// Writes a checkpoint when the table's interval says one is due. Its failure never fails
/// the commit, which already stands.
async fn maybe_checkpoint(snapshot: &Snapshot) -> (Option<CheckpointWritten>, Option<String>) {
    let interval = snapshot.properties().checkpoint_interval() as i64;
    let version = snapshot.version();
    // V2 checkpoints are read but not written yet; such tables stay readable from commits.
    if version == 0
        || version % interval != 0
        || snapshot.protocol().has_writer_feature("v2Checkpoint")
    {
        return (None, None);
    }
    match checkpoint(snapshot).await {
        Ok(written) => (Some(written), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Writes a classic checkpoint of `snapshot` and points `_last_checkpoint` at it.
pub(crate) async fn checkpoint(snapshot: &Snapshot) -> Result<CheckpointWritten> {
    let location = snapshot.location();
    write_checkpoint(
        location.store().as_ref(),
        location.root(),
        snapshot.version(),
        snapshot.checkpoint_actions(),
    )
    .await
}

/// Writes version 0 of a new table. Fails with [`Error::TableAlreadyExists`] when another
/// writer created it first.
pub(crate) async fn commit_create(
    snapshot_location: &tarn_store::StoreLocation,
    actions: &[Action],
    parameters: Map<String, Value>,
) -> Result<i64> {
    let pending = PendingCommit {
        operation: "CREATE TABLE",
        parameters,
        metrics: Map::new(),
        actions: actions.to_vec(),
    };
    let timestamp = Utc::now().timestamp_millis();
    let body = encode_commit(&pending, timestamp, -1, false, &Uuid::new_v4().to_string())?;
    let path = log_dir(snapshot_location.root()).join(commit_file_name(0));
    match snapshot_location
        .store()
        .put_opts(
            &path,
            PutPayload::from(body),
            PutOptions::from(PutMode::Create),
        )
        .await
    {
        Ok(_) => Ok(timestamp),
        Err(object_store::Error::AlreadyExists { .. }) => Err(Error::TableAlreadyExists {
            url: snapshot_location.url().to_string(),
            version: 0,
        }),
        Err(e) => Err(Error::store("put", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_under_its_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1), Duration::ZERO);
        assert_eq!(policy.backoff(2), Duration::ZERO);
        for attempt in 3..40 {
            assert!(policy.backoff(attempt) <= policy.max_backoff);
        }
    }
}
