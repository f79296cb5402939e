//! Committing a transaction that wrote nothing: only its reads are checked.

use std::collections::BTreeSet;

use super::super::IsolationLevel;
use super::super::commit_info::commit_timestamp;
use super::super::conflict::{Ours, WinningCommit, check};
use super::{CommitOutcome, Transaction};
use crate::error::Result;
use crate::log::{CommitFile, list_log, read_commits};

impl Transaction {
    /// A read-only transaction: under `StrictSerializable`, its reads must still hold at
    /// the newest version.
    pub(in crate::txn) async fn validate_read_only(self) -> Result<CommitOutcome> {
        let mut snapshot = self.snapshot.clone();
        if self.isolation == IsolationLevel::StrictSerializable && !self.reads.is_empty() {
            let location = snapshot.location();
            let listing = list_log(
                location.store().as_ref(),
                location.root(),
                snapshot.version() + 1,
            )
            .await?;
            let commits: Vec<CommitFile> = listing
                .commits
                .iter()
                .map(|(v, meta)| CommitFile {
                    version: *v,
                    meta: meta.clone(),
                })
                .collect();
            let no_paths = BTreeSet::new();
            let ours = Ours {
                isolation: self.isolation,
                reads: &self.reads,
                actions: &[],
                dv_paths: &no_paths,
            };
            let bodies = read_commits(location.store().as_ref(), &commits).await?;
            for (commit, actions) in commits.iter().zip(bodies) {
                let winner = WinningCommit {
                    version: commit.version,
                    actions,
                };
                check(&ours, &snapshot, &winner)?;
                let ts = commit_timestamp(&winner.actions)
                    .unwrap_or_else(|| commit.meta.last_modified.timestamp_millis());
                snapshot = snapshot.with_commit(commit.version, ts, winner.actions)?;
            }
        }
        Ok(CommitOutcome {
            version: self.snapshot.version(),
            attempts: 0,
            txn_id: String::new(),
            rebased_over: Vec::new(),
            checkpoint: None,
            snapshot,
        })
    }
}
