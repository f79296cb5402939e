//! Building the commit a transaction puts: its own actions, then those it carries for
//! other writers, under one `commitInfo`.

use bytes::Bytes;

use super::super::commit_info::{CommitInfoParts, commit_info};
use super::super::put::encode_commit;
use super::super::{fence, group, ict, row_tracking};
use super::Transaction;
use crate::error::Result;
use crate::protocol::Action;
use crate::snapshot::Snapshot;

/// A commit ready to put: its `commitInfo`, its other actions, its timestamp and body.
pub(in crate::txn) struct Prepared {
    pub(in crate::txn) info: Action,
    pub(in crate::txn) actions: Vec<Action>,
    pub(in crate::txn) timestamp: i64,
    pub(in crate::txn) body: Bytes,
}

impl Transaction {
    /// The commit to put at `version` on `base`: `own` actions, then the `carried` ones,
    /// under one `commitInfo`. Fails when the last commit's timestamp cannot be read, or
    /// the row ids cannot be assigned or the actions encoded.
    pub(in crate::txn) async fn prepare(
        &self,
        base: &Snapshot,
        version: i64,
        own: &group::Own<'_>,
        carried: &group::Group,
    ) -> Result<Prepared> {
        // Commit timestamps never go backwards, whatever this machine's clock says;
        // in-commit timestamps must rise strictly above the last commit's.
        let (in_commit, floor) = ict::floor_for(base, own.actions).await?;
        let timestamp = self.clock.now_ms().max(floor + 1);
        let mut info = commit_info(CommitInfoParts {
            timestamp,
            operation: &self.operation,
            parameters: &self.parameters,
            metrics: &self.metrics,
            read_version: Some(self.snapshot.version()),
            isolation: Some(self.isolation),
            blind_append: own.blind_append,
            txn_id: own.txn_id,
        });
        group::mark_group(&mut info, carried);
        fence::mark(&mut info, self.writer.as_ref(), &self.fenced);
        let mut actions = own.actions.to_vec();
        if in_commit {
            ict::stamp(&mut info, timestamp);
            ict::record_enablement(base, &mut actions, version, timestamp);
        }
        actions.extend(carried.actions.iter().cloned());
        carried.files.apply(base, &mut actions);
        if let Some(kept) = row_tracking::assign(base, &mut actions, version, self.row_ids_kept)? {
            row_tracking::tag(&mut info, kept);
        }
        let body = encode_commit(&info, &actions)?;
        Ok(Prepared {
            info,
            actions,
            timestamp,
            body,
        })
    }
}
