//! Fences: how a writer makes sure none of its earlier work lands later.
//!
//! A group-commit proposal stays carriable for a window of versions after its writer
//! published it, so a writer that was killed, or that was told
//! [`Error::CommitStateUnknown`], cannot tell by reading the table whether its work will
//! still land. Two fences close that window:
//!
//! - a **writer fence**: a writer with a stable id ([`Writer`]) commits a new *epoch* as
//!   the application transaction `tarn.writer.<id>`. Every commit and proposal of that
//!   writer reads its epoch's entry, so the fence conflicts with all of them: no earlier
//!   proposal is carried past the fence, and an earlier incarnation still running fails
//!   with [`ConflictReason::WriterFenced`]. It is table state, as Delta's `txn` action
//!   is, so it holds in checkpoints too, unless `delta.setTransactionRetentionDuration`
//!   lets a checkpoint expire it.
//! - a **commit fence**: the commit that resolves one unknown outcome names its `txnId`
//!   in `commitInfo.tarnFenced`; no committer carries a proposal a commit between its base
//!   and the new version names, so it is decided there.
//!
//! [`resolve`] turns an unknown outcome into landed or not landed, by waiting until its
//! last version exists or by fencing at once.

use std::time::Duration;

use serde_json::Value;

use super::put::commits_after;
use super::{Transaction, group};
use crate::error::{ConflictReason, Error, Result, UnknownCommit};
use crate::protocol::Action;
use crate::snapshot::Snapshot;

/// The `commitInfo` field listing the `txnId`s a commit fences.
pub(crate) const FENCED_FIELD: &str = "tarnFenced";
/// The `commitInfo` field naming the writer (id and epoch) that made a commit.
pub(crate) const WRITER_FIELD: &str = "tarnWriter";
/// The prefix of the application id that holds a writer's epoch.
const WRITER_APP_PREFIX: &str = "tarn.writer.";

/// A writer with a stable identity, at the epoch its last fence set. Made by
/// `Table::fence_writer`; commits made through it fail with
/// [`ConflictReason::WriterFenced`] once a newer fence of the same id lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    id: String,
    epoch: i64,
}

impl Writer {
    /// The writer's id, as given to the fence.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The epoch its fence committed (1 for the first fence of the id).
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// The application id whose version holds this writer's epoch.
    pub(crate) fn app_id(&self) -> String {
        writer_app_id(&self.id)
    }
}

/// The application id whose version holds writer `id`'s epoch.
pub(crate) fn writer_app_id(id: &str) -> String {
    format!("{WRITER_APP_PREFIX}{id}")
}

/// The writer id an application id holds the epoch of, if it is one.
pub(crate) fn writer_of_app(app_id: &str) -> Option<&str> {
    app_id.strip_prefix(WRITER_APP_PREFIX)
}

/// The conflict of a commit by `writer` made stale by a fence at `epoch`, seen at
/// `version`.
pub(crate) fn fenced_conflict(version: i64, writer: &str, epoch: i64) -> Error {
    Error::Conflict {
        winning_version: version,
        operation: FENCE_WRITER.into(),
        reason: ConflictReason::WriterFenced {
            writer: writer.to_string(),
            epoch,
        },
    }
}

/// The operation of a writer fence's commit.
pub(crate) const FENCE_WRITER: &str = "FENCE WRITER";
/// The operation of a commit fence.
pub(crate) const FENCE_COMMIT: &str = "FENCE COMMIT";

/// Whether a commit's actions fence `txn_id`.
pub(crate) fn fences(actions: &[Action], txn_id: &str) -> bool {
    fenced(actions).any(|id| id == txn_id)
}

/// The `txnId`s a commit's actions fence.
pub(crate) fn fenced(actions: &[Action]) -> impl Iterator<Item = &str> {
    actions.iter().flat_map(|a| {
        let ids = match a {
            Action::CommitInfo(c) => c.other.get(FENCED_FIELD).and_then(Value::as_array),
            _ => None,
        };
        ids.into_iter().flatten().filter_map(Value::as_str)
    })
}

/// Records in `info` (a `commitInfo`) the writer committing and the `txnId`s the commit
/// fences.
pub(crate) fn mark(info: &mut Action, writer: Option<&Writer>, fenced: &[String]) {
    if let Action::CommitInfo(c) = info {
        if let Some(w) = writer {
            let named = serde_json::json!({ "id": w.id, "epoch": w.epoch });
            c.other.insert(WRITER_FIELD.into(), named);
        }
        if !fenced.is_empty() {
            let ids = fenced.iter().cloned().map(Value::from).collect();
            c.other.insert(FENCED_FIELD.into(), Value::Array(ids));
        }
    }
}

/// How many times a fence is committed again after losing to a conflicting commit.
const FENCE_ATTEMPTS: u32 = 16;

/// Whether a fence that failed with `e` should be committed again on the newer table: a
/// concurrent fence of the same writer, or a schema or protocol change.
fn refences(e: &Error) -> bool {
    matches!(
        e,
        Error::Conflict {
            reason: ConflictReason::AppTransactionCommitted { .. }
                | ConflictReason::MetadataChanged
                | ConflictReason::ProtocolChanged,
            ..
        }
    )
}

/// Commits a new epoch for writer `id` with `txn` (a transaction on the table, which
/// commits nothing else), retrying when another fence of the same id wins the race.
///
/// Fails with [`Error::InvalidArgument`] for an empty id, and as
/// [`Transaction::commit`] does.
pub(crate) async fn fence_writer(
    txn: Transaction,
    id: &str,
) -> Result<(Writer, super::CommitOutcome)> {
    if id.is_empty() {
        return Err(Error::InvalidArgument {
            name: "writer id",
            reason: "a writer id cannot be empty".into(),
        });
    }
    let app_id = writer_app_id(id);
    let mut snapshot = txn.snapshot.clone();
    let mut attempt = 1;
    loop {
        let mut fence = fresh(&txn, snapshot.clone())
            .with_operation(FENCE_WRITER)
            .with_parameter("writer", id);
        // A fence must be known to have landed: it is never left for others to carry.
        fence.retry.group_commit = false;
        let epoch = fence.read_app_transaction(&app_id).unwrap_or(0) + 1;
        fence.set_app_transaction(app_id.clone(), epoch);
        match fence.commit().await {
            Ok(outcome) => {
                let writer = Writer {
                    id: id.to_string(),
                    epoch,
                };
                return Ok((writer, outcome));
            }
            // Another fence of the same writer won, or a schema or protocol change landed
            // (which conflicts with every commit): fence again above it.
            Err(e) if refences(&e) && attempt < FENCE_ATTEMPTS => {
                attempt += 1;
                snapshot = snapshot.refresh().await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A transaction on `snapshot` with `template`'s isolation, retry policy and clock, and
/// no writer: a fence is never itself fenced.
fn fresh(template: &Transaction, snapshot: Snapshot) -> Transaction {
    Transaction::new(snapshot)
        .with_isolation(template.isolation)
        .with_retry_policy(template.retry)
        .with_clock(std::sync::Arc::clone(&template.clock))
}

/// How `Table::resolve_commit` settles an unknown outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Read the log every `poll` until a commit names the work or its last version
    /// exists. Commits nothing, and may wait as long as the table is idle.
    Wait {
        /// How long to sleep between reads of the log.
        poll: Duration,
    },
    /// Commit a fence naming the work at once: it then landed before the fence, or never
    /// will.
    Fence,
}

/// What became of a commit whose outcome was unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It landed at this version (on its own, or carried by another writer's commit).
    Landed {
        /// The version.
        version: i64,
    },
    /// It did not land, and never will: the log at `decided_at` (its last version, or the
    /// fence) says so.
    NotLanded {
        /// The version that decided it.
        decided_at: i64,
    },
}

/// Settles `unknown` on `template`'s table (its snapshot, retry policy and clock are used
/// for the fence), returning the resolution and the newest snapshot read.
///
/// Fails with [`Error::Store`] when the log cannot be read, and as
/// [`Transaction::commit`] does for the fence.
pub(crate) async fn resolve(
    template: Transaction,
    unknown: &UnknownCommit,
    settle: Settle,
) -> Result<(Resolution, Snapshot)> {
    let location = template.snapshot.location().clone();
    let (store, root) = (location.store().as_ref(), location.root());
    let mut snapshot = template.snapshot.clone();
    // Every version before `version` was read by the writer and did not name the work.
    let mut read_up_to = unknown.version - 1;
    let mut fenced_at = None;
    let mut attempts = 1;
    loop {
        let (commits, _) = commits_after(store, root, read_up_to, &|_, _| false, 0).await?;
        for commit in &commits {
            if group::names(&commit.actions, &unknown.txn_id) {
                return Ok((
                    Resolution::Landed {
                        version: commit.version,
                    },
                    snapshot.refresh().await?,
                ));
            }
            if fences(&commit.actions, &unknown.txn_id) || commit.version >= unknown.last_version {
                let decided_at = commit.version;
                return Ok((
                    Resolution::NotLanded { decided_at },
                    snapshot.refresh().await?,
                ));
            }
            read_up_to = commit.version;
        }
        if let Some(version) = fenced_at {
            // The fence's own commit is in the log and was read above; a fence that
            // lost no race but did not show up means the listing lagged: read again.
            if read_up_to >= version {
                return Ok((
                    Resolution::NotLanded {
                        decided_at: version,
                    },
                    snapshot.refresh().await?,
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        match settle {
            Settle::Wait { poll } => tokio::time::sleep(poll).await,
            Settle::Fence => {
                snapshot = snapshot.refresh().await?;
                let mut fence = fresh(&template, snapshot.clone())
                    .with_operation(FENCE_COMMIT)
                    .with_parameter("txnId", unknown.txn_id.clone());
                fence.retry.group_commit = false;
                fence.fenced.push(unknown.txn_id.clone());
                match fence.commit().await {
                    Ok(outcome) => {
                        fenced_at = Some(outcome.version);
                        snapshot = outcome.snapshot;
                    }
                    // Lost to a schema or protocol change: read on, and fence again.
                    Err(e) if refences(&e) && attempts < FENCE_ATTEMPTS => attempts += 1,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}
