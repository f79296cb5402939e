//! The conflict checker: does a commit that won the race invalidate this transaction?
//!
//! Delta's rules, in Delta's order: protocol change, metadata change, the same metadata
//! domain, application transactions, files added concurrently that match what this
//! transaction read, files this transaction read that were removed concurrently, and
//! files both removed. The isolation level decides which of the checks on files apply.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{ConflictReason, Error, Result};
use crate::expr::Expr;
use crate::paths;
use crate::protocol::{Action, Add, DeletionVectorDescriptor};
use crate::scan::first_file_matching;
use crate::snapshot::Snapshot;

use super::IsolationLevel;
use super::fence::writer_of_app;

/// What a transaction read: the reads a concurrent commit may invalidate.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadSet {
    /// The whole table was read (a full scan, a schema change).
    pub(crate) whole_table: bool,
    /// Predicates read with, bound to the schema.
    pub(crate) predicates: Vec<Expr>,
    /// Resolved paths of the files read.
    pub(crate) files: BTreeSet<String>,
    /// Application transactions whose version was read.
    pub(crate) app_ids: BTreeSet<String>,
    /// Metadata domains read.
    pub(crate) domains: BTreeSet<String>,
    /// Metadata domains read only to keep derived state (index segments) in step with the
    /// data: their change conflicts, but reading them does not make a write less blind.
    pub(crate) meta_domains: BTreeSet<String>,
    /// The application id holding the epoch of the writer committing: a fence of it
    /// conflicts, but reading it does not make a write less blind.
    pub(crate) writer: Option<String>,
}

impl ReadSet {
    pub(crate) fn is_empty(&self) -> bool {
        !self.whole_table
            && self.predicates.is_empty()
            && self.files.is_empty()
            && self.app_ids.is_empty()
            && self.domains.is_empty()
    }
}

/// A commit another writer made after this transaction's read version.
#[derive(Debug, Clone)]
pub(crate) struct WinningCommit {
    pub(crate) version: i64,
    pub(crate) actions: Vec<Action>,
}

impl WinningCommit {
    pub(crate) fn operation(&self) -> String {
        self.actions
            .iter()
            .find_map(|a| match a {
                Action::CommitInfo(c) => c.operation.clone(),
                _ => None,
            })
            .unwrap_or_else(|| "UNKNOWN".into())
    }

    /// Whether the winner only appended without reading: its `commitInfo.isBlindAppend`,
    /// or, without one, a commit of adds alone.
    fn is_blind_append(&self) -> bool {
        let flag = self.actions.iter().find_map(|a| match a {
            Action::CommitInfo(c) => c.other.get("isBlindAppend").and_then(|v| v.as_bool()),
            _ => None,
        });
        flag.unwrap_or_else(|| {
            self.actions
                .iter()
                .all(|a| matches!(a, Action::Add(_) | Action::CommitInfo(_)))
        })
    }
}

/// The parts of this transaction the checker looks at.
pub(crate) struct Ours<'a> {
    pub(crate) isolation: IsolationLevel,
    pub(crate) reads: &'a ReadSet,
    pub(crate) actions: &'a [Action],
    /// Resolved paths of the files this transaction changes through deletion vectors.
    pub(crate) dv_paths: &'a BTreeSet<String>,
}

/// A file both this transaction and the winner changed through deletion vectors: the
/// commit loop unites the two when their rows are disjoint.
#[derive(Debug, Clone)]
pub(crate) struct DvRebase {
    /// The resolved path.
    pub(crate) path: String,
    /// The winner's `add` of the file, with its new DV.
    pub(crate) winner_add: Add,
    /// The winner's new DV.
    pub(crate) winner_dv: DeletionVectorDescriptor,
}

/// Fails with [`Error::Conflict`] when `winner` invalidates this transaction, judged on
/// `base` (the snapshot just before the winner). Returns the files both changed through
/// deletion vectors, which do not conflict yet: their rows decide.
// Long by design: Delta's conflict rules one after another, in the order its checker
// applies them, so each rule reads beside the others.
pub(crate) fn check(
    ours: &Ours<'_>,
    base: &Snapshot,
    winner: &WinningCommit,
) -> Result<Vec<DvRebase>> {
    let conflict = |reason: ConflictReason| Error::Conflict {
        winning_version: winner.version,
        operation: winner.operation(),
        reason,
    };
    let location = base.location();
    let changes_metadata = ours
        .actions
        .iter()
        .any(|a| matches!(a, Action::Metadata(_) | Action::Protocol(_)));
    let our_domains: BTreeSet<&str> = ours
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DomainMetadata(d) => Some(d.domain.as_str()),
            _ => None,
        })
        .chain(ours.reads.domains.iter().map(String::as_str))
        .chain(ours.reads.meta_domains.iter().map(String::as_str))
        .collect();
    let our_apps: BTreeSet<&str> = ours
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Txn(t) => Some(t.app_id.as_str()),
            _ => None,
        })
        .chain(ours.reads.app_ids.iter().map(String::as_str))
        .chain(ours.reads.writer.as_deref())
        .collect();
    let our_removes: BTreeSet<String> = ours
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some(paths::canonical(location, &r.path)),
            _ => None,
        })
        .collect();

    // 1-4: protocol, metadata, domains, application transactions.
    for action in &winner.actions {
        match action {
            Action::Protocol(_) => return Err(conflict(ConflictReason::ProtocolChanged)),
            Action::Metadata(_) => return Err(conflict(ConflictReason::MetadataChanged)),
            Action::DomainMetadata(d) if our_domains.contains(d.domain.as_str()) => {
                return Err(conflict(ConflictReason::DomainMetadataChanged {
                    domain: d.domain.clone(),
                }));
            }
            Action::Txn(t) if ours.reads.writer.as_deref() == Some(t.app_id.as_str()) => {
                return Err(conflict(ConflictReason::WriterFenced {
                    writer: writer_of_app(&t.app_id).unwrap_or_default().to_string(),
                    epoch: t.version,
                }));
            }
            Action::Txn(t) if our_apps.contains(t.app_id.as_str()) => {
                return Err(conflict(ConflictReason::AppTransactionCommitted {
                    app_id: t.app_id.clone(),
                    version: t.version,
                }));
            }
            _ => {}
        }
    }

    // 5: files added concurrently that this transaction should have read.
    let check_adds = match ours.isolation {
        IsolationLevel::SnapshotIsolation => false,
        // Blind appends commute with a write-serializable transaction, unless it changes
        // the metadata the appended files were written under.
        IsolationLevel::WriteSerializable => changes_metadata || !winner.is_blind_append(),
        IsolationLevel::Serializable | IsolationLevel::StrictSerializable => true,
    };
    // A file the winner removes and adds back is the same file with a new deletion
    // vector: rows left it, none joined it.
    let winner_removed: BTreeSet<String> = winner
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some(paths::canonical(location, &r.path)),
            _ => None,
        })
        .collect();
    let readded: BTreeMap<String, &Add> = winner
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(add) => Some((paths::canonical(location, &add.path), add)),
            _ => None,
        })
        .filter(|(p, _)| winner_removed.contains(p))
        .collect();
    if check_adds {
        let added: Vec<&Add> = winner
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Add(add)
                    if add.data_change
                        && !readded.contains_key(&paths::canonical(location, &add.path)) =>
                {
                    Some(add)
                }
                _ => None,
            })
            .collect();
        if let Some((add, read)) = read_matching(ours.reads, base, &added)? {
            return Err(conflict(ConflictReason::ConcurrentAppend {
                file: add.path.clone(),
                read,
            }));
        }
    }

    // 6-7: files removed concurrently that this transaction read, or removes too. A
    // compaction's removes (dataChange false) conflict with this transaction's own
    // removes and deletion vectors (their rows live on elsewhere, but not with this
    // transaction's changes). A file this transaction only read may be compacted away:
    // its rows are unchanged, in files whose adds (dataChange false too) the check above
    // skips. Reads of the whole table and metadata changes keep Delta's stricter rule.
    let rearranged_reads_stand = !ours.reads.whole_table && !changes_metadata;
    let mut rebases = Vec::new();
    for action in &winner.actions {
        let Action::Remove(remove) = action else {
            continue;
        };
        let path = paths::canonical(location, &remove.path);
        if ours.dv_paths.contains(&path)
            && let Some(add) = readded.get(&path)
            && let Some(dv) = &add.deletion_vector
        {
            rebases.push(DvRebase {
                path,
                winner_add: (*add).clone(),
                winner_dv: dv.clone(),
            });
            continue;
        }
        if our_removes.contains(&path) {
            return Err(conflict(ConflictReason::ConcurrentDeleteDelete {
                file: remove.path.clone(),
            }));
        }
        let read = ours.reads.whole_table || ours.reads.files.contains(&path);
        let rearranged = !remove.data_change && rearranged_reads_stand;
        if read && !rearranged && ours.isolation != IsolationLevel::SnapshotIsolation {
            return Err(conflict(ConflictReason::ConcurrentDeleteRead {
                file: remove.path.clone(),
            }));
        }
    }
    Ok(rebases)
}

/// The first added file that falls under what this transaction read, and what it read.
fn read_matching<'a>(
    reads: &ReadSet,
    base: &Snapshot,
    added: &[&'a Add],
) -> Result<Option<(&'a Add, String)>> {
    if reads.whole_table {
        return Ok(added.first().map(|add| (*add, "the whole table".into())));
    }
    Ok(first_file_matching(base, &reads.predicates, added)?
        .map(|(add, predicate)| (add, format!("the read predicate {predicate}"))))
}
