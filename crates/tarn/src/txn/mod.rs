//! Transactions: optimistic concurrency on one table, with put-if-absent commits.
//!
//! A [`Transaction`] reads a snapshot at version `v`, records what it read, writes its
//! files under fresh names, and commits `_delta_log/<v+1>.json` with put-if-absent. When
//! another writer took that version, the transaction reads the winning commits (one GET
//! each) and runs the conflict checker for its [`IsolationLevel`]: no conflict rebases it
//! and it retries at the next version, with jittered exponential backoff; a conflict is
//! an [`Error::Conflict`](crate::Error::Conflict) that names the winning version, its
//! operation and the reason.
//!
//! Every commit carries a unique `commitInfo.txnId`. When a PUT's outcome is unknown (an
//! error after the object may have landed), the transaction reads the version back: its
//! own id means it committed; another id means it lost the race; when the version cannot
//! be read, it fails with [`Error::CommitStateUnknown`](crate::Error::CommitStateUnknown)
//! and never commits the work twice.
//!
//! One file per mechanism: `policy` (isolation levels, retries), `put` (the put-if-absent
//! protocol), `commit` (the commit loop: put, lost race, catch up, claim), `commit_info`
//! (what a commit says of itself), `conflict` (Delta's conflict checker), `rebase` (uniting
//! concurrent deletion vectors), `group` (group commit across processes; `proposal` is its
//! wire format, `group_dv` unites their DVs, `group_reads` reads what a group carries),
//! `ict` (in-commit timestamps), `row_tracking` (row ids and commit versions), `checkpoint`
//! (background checkpoints), `claim` (one committer per version under a crowd of writers), `fence`
//! (writer and commit fences, and settling an unknown outcome),
//! `outcome` (what a commit did) and `transaction` (the API).

mod checkpoint;
mod claim;
mod commit;
mod commit_info;
mod conflict;
mod fence;
mod group;
mod group_dv;
mod group_reads;
mod ict;
mod kept;
mod log_cleanup;
mod outcome;
mod policy;
mod proposal;
mod put;
mod rebase;
mod row_tracking;
mod transaction;

pub use checkpoint::CheckpointTask;
pub(crate) use checkpoint::checkpoint;
pub use commit_info::ENGINE_INFO;
pub(crate) use commit_info::delta_string;
pub use fence::{Resolution, Settle, Writer};
pub(crate) use fence::{fence_writer, resolve};
pub(crate) use group::GROUP_FIELD;
pub use log_cleanup::LogCleanupOutcome;
pub(crate) use log_cleanup::cleanup_log;
pub use outcome::CommitOutcome;
pub use policy::{IsolationLevel, RetryPolicy};
pub(crate) use put::{Creation, commit_create};
pub(crate) use row_tracking::{materialized_fields, name_materialized_columns};
pub use transaction::Transaction;
