//! History: what each commit the log still holds says of itself (its `commitInfo`), newest
//! first, as Spark's `DESCRIBE HISTORY` and delta-rs's `history()` list it.

use std::collections::BTreeMap;

use futures::{FutureExt, StreamExt, TryStreamExt};
use serde_json::Value;

use crate::error::Result;
use crate::log::versions::commit_timestamps;
use crate::log::{CommitFile, LOG_READ_CONCURRENCY, list_log, read_commit};
use crate::protocol::{Action, CommitInfo, Txn};
use crate::table::Table;

/// One commit of the table's history, as its `commitInfo` describes it.
///
/// Fields a commit does not record (commits by other engines record less) are `None` or
/// empty.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitRecord {
    /// The version the commit made.
    pub version: i64,
    /// When it was made, in milliseconds since the epoch: its in-commit timestamp where
    /// the table has them, else the commit file's time made monotonic as Delta does (the
    /// time [`Table::load_timestamp`] travels by).
    pub timestamp_ms: i64,
    /// The operation (`WRITE`, `MERGE`, `RESTORE`, ...).
    pub operation: Option<String>,
    /// The operation's parameters, as strings (Delta's `operationParameters`).
    pub parameters: BTreeMap<String, String>,
    /// The operation's metrics, as strings (Delta's `operationMetrics`).
    pub metrics: BTreeMap<String, String>,
    /// The in-commit timestamp, when the commit has one.
    pub in_commit_timestamp: Option<i64>,
    /// The engine that wrote it (`tarn/0.1.0`, `Apache-Spark/... Delta-Lake/...`).
    pub engine_info: Option<String>,
    /// The unique id of the transaction that wrote it.
    pub txn_id: Option<String>,
    /// The version the transaction read.
    pub read_version: Option<i64>,
    /// The isolation level it committed at.
    pub isolation_level: Option<String>,
    /// Whether it only appended data it did not read.
    pub is_blind_append: Option<bool>,
    /// The application's own note (Delta's `userMetadata`).
    pub user_metadata: Option<String>,
    /// The `txnId`s of the group-commit proposals the commit carried for other writers.
    pub group_members: Vec<String>,
    /// The application transactions (`txn` actions) the commit recorded.
    pub app_transactions: Vec<Txn>,
    /// The whole `commitInfo`, for fields other engines add.
    pub commit_info: Option<CommitInfo>,
}

impl Table {
    /// The commits the log holds up to this handle's version, newest first, at most
    /// `limit` of them (all with `None`). Versions whose commits log cleanup removed are
    /// not listed, also when a cleanup removes them while they are read; each commit
    /// listed is read (several at once).
    ///
    /// Fails with [`Error::Store`](crate::Error::Store) when the log cannot be listed or
    /// a commit read, and with [`Error::InvalidCommit`](crate::Error::InvalidCommit) for a
    /// commit that does not parse.
    pub async fn history(&self, limit: Option<usize>) -> Result<Vec<CommitRecord>> {
        let location = self.location();
        let listing = list_log(location.store().as_ref(), location.root(), 0).await?;
        let times = commit_timestamps(&listing);
        let commits: Vec<CommitFile> = listing
            .commits
            .range(..=self.version())
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(version, meta)| CommitFile {
                version: *version,
                meta: meta.clone(),
            })
            .collect();
        let store = location.store().as_ref();
        let bodies: Vec<Option<Vec<Action>>> = futures::stream::iter(commits.iter().cloned())
            .map(|c| {
                async move {
                    match read_commit(store, &c).await {
                        Ok(actions) => Ok(Some(actions)),
                        // A cleanup racing this call removed it (oldest first, so the
                        // newer records stay whole).
                        Err(e) if e.is_missing_object() => Ok(None),
                        Err(e) => Err(e),
                    }
                }
                .boxed()
            })
            .buffered(LOG_READ_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(commits
            .iter()
            .zip(bodies)
            .filter_map(|(commit, actions)| {
                actions.map(|a| record(commit.version, times[&commit.version], a))
            })
            .collect())
    }
}

/// The record of the commit of `version`, listed at `file_time`.
fn record(version: i64, file_time: i64, actions: Vec<Action>) -> CommitRecord {
    let mut info = None;
    let mut app_transactions = Vec::new();
    for action in actions {
        match action {
            Action::CommitInfo(c) => info = Some(c),
            Action::Txn(t) => app_transactions.push(t),
            _ => {}
        }
    }
    let field = |name: &str| info.as_ref().and_then(|c| c.other.get(name));
    let text = |name: &str| field(name).and_then(Value::as_str).map(str::to_string);
    let strings = |name: &str| -> BTreeMap<String, String> {
        field(name)
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), crate::txn::delta_string(v)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let in_commit_timestamp = info.as_ref().and_then(|c| c.in_commit_timestamp);
    CommitRecord {
        version,
        timestamp_ms: in_commit_timestamp.unwrap_or(file_time),
        operation: info.as_ref().and_then(|c| c.operation.clone()),
        parameters: strings("operationParameters"),
        metrics: strings("operationMetrics"),
        in_commit_timestamp,
        engine_info: text("engineInfo"),
        txn_id: info.as_ref().and_then(|c| c.txn_id.clone()),
        read_version: field("readVersion").and_then(Value::as_i64),
        isolation_level: text("isolationLevel"),
        is_blind_append: field("isBlindAppend").and_then(Value::as_bool),
        user_metadata: text("userMetadata"),
        group_members: field(crate::txn::GROUP_FIELD)
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        app_transactions,
        commit_info: info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_reads_into_its_record() {
        let line = br#"{"commitInfo":{"timestamp":7,"operation":"MERGE","operationParameters":{"predicate":"a = 1","matchedPredicates":[{"actionType":"update"}]},"operationMetrics":{"numTargetRowsUpdated":"2"},"readVersion":3,"isolationLevel":"Serializable","isBlindAppend":false,"engineInfo":"tarn/x","txnId":"t1","tarnGroup":["p1","p2"],"userMetadata":"note"}}
{"txn":{"appId":"app","version":4}}
"#;
        let actions = crate::log::parse_commit(4, &bytes::Bytes::from_static(line)).unwrap();
        let r = record(4, 99, actions);
        assert_eq!(r.version, 4);
        assert_eq!(r.timestamp_ms, 99);
        assert_eq!(r.operation.as_deref(), Some("MERGE"));
        assert_eq!(r.parameters["predicate"], "a = 1");
        assert_eq!(
            r.parameters["matchedPredicates"],
            r#"[{"actionType":"update"}]"#
        );
        assert_eq!(r.metrics["numTargetRowsUpdated"], "2");
        assert_eq!(r.read_version, Some(3));
        assert_eq!(r.isolation_level.as_deref(), Some("Serializable"));
        assert_eq!(r.is_blind_append, Some(false));
        assert_eq!(r.engine_info.as_deref(), Some("tarn/x"));
        assert_eq!(r.txn_id.as_deref(), Some("t1"));
        assert_eq!(r.group_members, ["p1", "p2"]);
        assert_eq!(r.user_metadata.as_deref(), Some("note"));
        assert_eq!(r.app_transactions.len(), 1);
        assert_eq!(r.app_transactions[0].version, 4);
    }

    #[test]
    fn an_in_commit_timestamp_is_the_commit_time() {
        let line = br#"{"commitInfo":{"inCommitTimestamp":1234,"timestamp":1000}}"#;
        let actions = crate::log::parse_commit(0, &bytes::Bytes::from_static(line)).unwrap();
        let r = record(0, 5, actions);
        assert_eq!((r.timestamp_ms, r.in_commit_timestamp), (1234, Some(1234)));
        assert!(r.parameters.is_empty() && r.group_members.is_empty());
    }
}
