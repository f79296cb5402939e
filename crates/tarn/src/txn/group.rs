//! Group commit across processes: a writer that lost the race for a version publishes its
//! prepared commit as a *proposal*, and whoever wins a later version carries every
//! proposal that passes the conflict checker, so one put-if-absent commits the work of
//! many writers.
//!
//! A proposal `_delta_log/_tarn_proposals/<base>.<stamp>.<txnId>.json` holds a header
//! (the writer's `txnId`, the version `base` it read up to, its isolation level and read
//! set) and its actions. It may join only versions `base + 1 ..= base + WINDOW`, and only
//! when no commit in between names its `txnId` (in `commitInfo.txnId`, or in the
//! `tarnGroup` list of a commit that carried proposals). So a proposal commits at most
//! once, and once version `base + WINDOW` exists its writer knows the outcome for good
//! by reading the commits of the window. Readers see only commits.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde_json::{Map, Value};

use super::conflict::{Ours, WinningCommit};
use super::fence;
use super::group_dv::{GroupFiles, admit, prefetch};
use super::group_reads::{read_proposals, read_versions};
use super::proposal::{MAX_GROUP_BYTES, Proposal};
use crate::cache::Caches;
use crate::log::{LOG_READ_CONCURRENCY, ProposalRef, log_dir};
use crate::protocol::names::commit_file_name;
use crate::protocol::{Action, CommitInfo};
use crate::snapshot::Snapshot;

/// How many versions after its base a proposal of this writer may join (a committer
/// carries any proposal only within the smaller of its own window and this one). Wide, because a
/// writer under contention publishes from the snapshot it has, often a few versions old;
/// a wide window only delays the rare report of exhausted retries.
pub(crate) const WINDOW: i64 = 32;
/// The most proposals one commit carries.
pub(crate) const MAX_GROUP: usize = 128;
/// The `commitInfo` field listing the `txnId`s of the proposals a commit carried.
pub(crate) const GROUP_FIELD: &str = "tarnGroup";

/// Whether a commit of `actions` may carry other writers' proposals: not one with change
/// files, whose readers would ignore the carried actions.
pub(crate) fn may_carry(actions: &[Action]) -> bool {
    !actions.iter().any(|a| matches!(a, Action::Cdc(_)))
}

/// Publishes a proposal with put-if-absent. Its outcome does not matter to the caller:
/// a failed PUT may still have landed, so the writer treats its proposal as published
/// either way.
pub(crate) async fn publish(store: &dyn ObjectStore, path: &Path, body: Bytes) {
    let _ = store
        .put_opts(
            path,
            PutPayload::from_bytes(body),
            PutOptions::from(PutMode::Create),
        )
        .await;
}

/// Deletes proposals in the background: they are decided, and a shorter folder lists
/// faster. Best effort; a proposal left behind is ignored once its window has passed.
pub(crate) fn forget(store: Arc<dyn ObjectStore>, paths: Vec<Path>) {
    if paths.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    tokio::spawn(crate::background::tracked(async move {
        futures::stream::iter(paths)
            .for_each_concurrent(LOG_READ_CONCURRENCY, |p| {
                let store = Arc::clone(&store);
                async move {
                    let _ = store.delete(&p).await;
                }
            })
            .await;
    }));
}

/// Whether a commit's actions name `txn_id`: as its own `commitInfo.txnId`, or among the
/// proposals it carried.
pub(crate) fn names(actions: &[Action], txn_id: &str) -> bool {
    named(actions).any(|id| id == txn_id)
}

/// The `txnId`s a commit's actions name: its own, then those of the proposals it carried.
fn named(actions: &[Action]) -> impl Iterator<Item = &str> {
    actions.iter().flat_map(|a| {
        let (own, carried) = match a {
            Action::CommitInfo(c) => (
                c.txn_id.as_deref(),
                c.other.get(GROUP_FIELD).and_then(Value::as_array),
            ),
            _ => (None, None),
        };
        own.into_iter()
            .chain(carried.into_iter().flatten().filter_map(Value::as_str))
    })
}

/// The `txnId`s a commit decides, which no later commit may carry: those it names and
/// those it fences.
fn decided_by(actions: &[Action]) -> impl Iterator<Item = &str> {
    named(actions).chain(fence::fenced(actions))
}

/// Records in `info` (a `commitInfo`) the proposals the commit carries, and whether the
/// whole commit is still a blind append.
pub(crate) fn mark_group(info: &mut Action, group: &Group) {
    if let Action::CommitInfo(c) = info
        && !group.txn_ids.is_empty()
    {
        let ids = group.txn_ids.iter().cloned().map(Value::from).collect();
        c.other.insert(GROUP_FIELD.into(), Value::Array(ids));
        if !group.blind_append {
            c.other.insert("isBlindAppend".into(), Value::from(false));
        }
    }
}

/// The proposals a commit carries.
#[derive(Debug, Default)]
pub(crate) struct Group {
    /// Their actions, in order.
    pub(crate) actions: Vec<Action>,
    /// Their `txnId`s, in order.
    pub(crate) txn_ids: Vec<String>,
    /// Whether every one of them is a blind append.
    pub(crate) blind_append: bool,
    /// The files members changed through deletion vectors, whose first `add` takes the
    /// rows later members deleted too.
    pub(crate) files: GroupFiles,
}

/// What the committer itself commits, as a member of its group.
pub(crate) struct Own<'a> {
    pub(crate) txn_id: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) blind_append: bool,
    pub(crate) actions: &'a [Action],
}

/// Whether a commit about to take `next` should read the listed proposal `r` (beside the
/// commits it catches up with): one that may join `next` and that it has not read yet.
pub(crate) fn wants(
    r: &ProposalRef,
    next: i64,
    own_txn: &str,
    memory: &Memory,
    caches: &Caches,
) -> bool {
    r.txn_id != own_txn
        && r.base < next
        && r.base.saturating_add(WINDOW) >= next
        && !memory.proposals.contains_key(&r.location)
        && caches
            .object::<KeptProposal>(&kept_key(&r.location))
            .is_none()
}

/// Decodes proposal bodies read beside a catch-up into the writer's memory and the table
/// handle's cache.
pub(crate) fn remember(bodies: Vec<(ProposalRef, Bytes)>, memory: &mut Memory, caches: &Caches) {
    for (r, bytes) in bodies {
        let read = Proposal::decode(r.base, &bytes)
            .ok()
            .map(|p| (Arc::new(p), bytes.len()));
        if let Some((proposal, size)) = &read {
            let kept = KeptProposal(Arc::clone(proposal), *size);
            caches.keep_object(&kept_key(&r.location), Arc::new(kept));
        }
        memory.proposals.insert(r.location, read);
    }
}

/// What a committer remembers across the attempts of one commit.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// Commits read, by version.
    pub(crate) commits: BTreeMap<i64, Vec<Action>>,
    /// Proposals read, by path, with their size (`None`: unreadable or gone).
    proposals: HashMap<Path, Option<(Arc<Proposal>, usize)>>,
}

/// The proposals `refs` that may join `version`, checked in order (oldest first) against
/// the commits after their base and against the members before them (the committer's own
/// work first), as if each had committed alone in that order. Proposals that fail a check
/// are left out: they stay eligible for later versions, where the same check decides
/// again. Never fails: a proposal that cannot be read or checked is left out.
// Long by design: admission is one ordered pass (read, check against commits, check
// against earlier members, unite DVs), and splitting it would scatter its invariants.
pub(crate) async fn gather(
    base: &Snapshot,
    version: i64,
    own: &Own<'_>,
    refs: &[ProposalRef],
    memory: &mut Memory,
    now_ms: i64,
) -> Group {
    let mut candidates: Vec<&ProposalRef> = refs
        .iter()
        .filter(|r| {
            r.txn_id != own.txn_id && r.base < version && r.base.saturating_add(WINDOW) >= version
        })
        .collect();
    candidates.sort_by(|a, b| (a.stamp, &a.txn_id).cmp(&(b.stamp, &b.txn_id)));
    let mut group = Group {
        blind_append: true,
        ..Group::default()
    };
    if candidates.is_empty() {
        return group;
    }
    let store = Arc::clone(base.location().store());
    let root = base.location().root().clone();
    let oldest = candidates.iter().map(|r| r.base).min().unwrap_or(version);
    let key = |v: i64| commit_key(&root, v);
    for v in oldest + 1..version {
        if !memory.commits.contains_key(&v)
            && let Some(kept) = base.caches().object::<Vec<Action>>(&key(v))
        {
            memory.commits.insert(v, kept.as_ref().clone());
        }
    }
    // A carried proposal stays listed until its writer learns of it and deletes it (or
    // its window passes, and a writer that exits first never does): those the commits
    // name are decided, and go before the oldest `MAX_GROUP` are chosen, or a backlog of
    // them would fill every group. With more candidates than that, the commits this
    // handle has not read yet (a fresh one knows none) are read first.
    if candidates.len() > MAX_GROUP {
        let missing: Vec<i64> = (oldest + 1..version)
            .filter(|v| !memory.commits.contains_key(v))
            .collect();
        let commits = read_versions(store.as_ref(), &root, missing).await;
        keep_commits(base, memory, commits);
    }
    let decided: HashSet<&str> = memory
        .commits
        .range(oldest + 1..version)
        .flat_map(|(_, actions)| decided_by(actions))
        .collect();
    candidates.retain(|r| !decided.contains(r.txn_id.as_str()));
    candidates.truncate(MAX_GROUP);
    let oldest = candidates.iter().map(|r| r.base).min().unwrap_or(version);
    let missing: Vec<i64> = (oldest + 1..version)
        .filter(|v| !memory.commits.contains_key(v))
        .collect();
    // Proposals never change once written: the table handle keeps the ones it read, so
    // a writer reads each proposal once, not once per commit.
    let caches = base.caches();
    for r in &candidates {
        if let Some(kept) = caches.object::<KeptProposal>(&kept_key(&r.location)) {
            memory
                .proposals
                .insert(r.location.clone(), Some((Arc::clone(&kept.0), kept.1)));
        }
    }
    let unread: Vec<ProposalRef> = candidates
        .iter()
        .filter(|r| !memory.proposals.contains_key(&r.location))
        .map(|r| (*r).clone())
        .collect();
    let (commits, proposals) = futures::join!(
        read_versions(store.as_ref(), &root, missing),
        read_proposals(store.as_ref(), unread)
    );
    keep_commits(base, memory, commits);
    for (path, read) in proposals {
        if let Some((proposal, size)) = &read {
            let kept = KeptProposal(Arc::clone(proposal), *size);
            caches.keep_object(&kept_key(&path), Arc::new(kept));
        }
        memory.proposals.insert(path, read);
    }

    // DVs in files that admissions may unite are read at once, not one by one.
    {
        let mut settled: Vec<&[Action]> = vec![own.actions];
        if oldest + 1 < version {
            settled.extend(
                memory
                    .commits
                    .range(oldest + 1..version)
                    .map(|(_, a)| a.as_slice()),
            );
        }
        let proposed: Vec<&[Action]> = candidates
            .iter()
            .filter_map(|r| memory.proposals.get(&r.location))
            .filter_map(|read| read.as_ref().map(|(p, _)| p.actions.as_slice()))
            .collect();
        prefetch(base, &settled, &proposed).await;
    }
    let mut members: Vec<WinningCommit> = vec![member(
        version,
        own.operation,
        own.blind_append,
        own.actions,
    )];
    group.files.record(base, own.actions, &[], &BTreeSet::new());
    let mut bytes = 0;
    for r in candidates {
        let Some(Some((proposal, size))) = memory.proposals.get(&r.location) else {
            continue;
        };
        // Every version between its base and ours must be known, and none may name it.
        let between: Option<Vec<(i64, &Vec<Action>)>> = (proposal.base + 1..version)
            .map(|v| memory.commits.get(&v).map(|a| (v, a)))
            .collect();
        let Some(between) = between else { continue };
        if proposal.txn_id != r.txn_id
            || proposal.base != r.base
            || proposal.base + proposal.window.clamp(1, WINDOW) < version
            || between
                .iter()
                .any(|(_, a)| decided_by(a).any(|id| id == proposal.txn_id))
            || group.txn_ids.contains(&proposal.txn_id)
            || bytes + *size > MAX_GROUP_BYTES
        {
            continue;
        }
        let no_paths = BTreeSet::new();
        let work = Ours {
            isolation: proposal.isolation,
            reads: &proposal.reads,
            actions: &proposal.actions,
            dv_paths: &no_paths,
        };
        let Some(actions) = admit(base, &work, &between, &members, &mut group.files, now_ms).await
        else {
            continue;
        };
        bytes += size;
        members.push(member(
            version,
            &proposal.operation,
            proposal.blind_append,
            &actions,
        ));
        group.actions.extend(actions);
        group.txn_ids.push(proposal.txn_id.clone());
        group.blind_append &= proposal.blind_append;
    }
    // United DVs that do not fit inline go into one DV file before the commit; without
    // it, the commit carries no one (each proposal stays eligible for a later version).
    if !group.files.write_dvs(base).await {
        return Group {
            blind_append: true,
            ..Group::default()
        };
    }
    group
}

/// Keeps commits just read in the writer's memory and the table handle's cache.
fn keep_commits(base: &Snapshot, memory: &mut Memory, commits: Vec<(i64, Vec<Action>)>) {
    let root = base.location().root();
    for (v, actions) in commits {
        base.caches()
            .keep_object(&commit_key(root, v), Arc::new(actions.clone()));
        memory.commits.insert(v, actions);
    }
}

/// The cache key of the commit of `version`.
pub(crate) fn commit_key(root: &Path, version: i64) -> String {
    format!("commit:{}", log_dir(root).join(commit_file_name(version)))
}

/// A proposal read, with its size, as the table handle's cache keeps it.
struct KeptProposal(Arc<Proposal>, usize);

/// The cache key of the proposal at `path`.
fn kept_key(path: &Path) -> String {
    format!("proposal:{path}")
}

/// A member of a group as the checker sees a commit: its actions behind a `commitInfo`
/// that says whether it is a blind append.
fn member(version: i64, operation: &str, blind_append: bool, actions: &[Action]) -> WinningCommit {
    let mut other = Map::new();
    other.insert("isBlindAppend".into(), Value::from(blind_append));
    let info = Action::CommitInfo(CommitInfo {
        timestamp: None,
        in_commit_timestamp: None,
        operation: Some(operation.to_string()),
        txn_id: None,
        other,
    });
    WinningCommit {
        version,
        actions: std::iter::once(info)
            .chain(actions.iter().cloned())
            .collect(),
    }
}

/// Proposals whose window has passed at `latest` (the newest version known): this writer
/// will not include them any more. Deleting a proposal is always safe (its writer learns
/// its outcome from the commits, never from the proposal); a carried one is left to its
/// own writer, as every writer deleting every decided one would grow with the square of
/// the writers.
pub(crate) fn lapsed(refs: &[ProposalRef], latest: i64) -> Vec<Path> {
    refs.iter()
        .filter(|r| r.base.saturating_add(WINDOW) <= latest)
        .map(|r| r.location.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{Expr, col, lit};
    use crate::protocol::Txn;
    use crate::txn::IsolationLevel;
    use crate::txn::conflict::ReadSet;

    fn proposal(actions: Vec<Action>, predicate: Expr) -> Proposal {
        let mut reads = ReadSet::default();
        reads.predicates.push(predicate);
        reads.files.insert("part=A/f.parquet".into());
        reads.app_ids.insert("app".into());
        Proposal {
            txn_id: "t-1".into(),
            base: 41,
            window: WINDOW,
            isolation: IsolationLevel::WriteSerializable,
            operation: "DELETE".into(),
            blind_append: false,
            reads,
            actions,
        }
    }

    fn txn(version: i64) -> Action {
        Action::Txn(Txn {
            app_id: "app".into(),
            version,
            last_updated: None,
        })
    }

    #[test]
    fn a_proposal_reads_back_as_written() {
        let p = proposal(
            vec![txn(3)],
            col("id").gt_eq(lit(7i64)).and(col("s").eq(lit("x"))),
        );
        let body = p.carriable().expect("carriable");
        let back = Proposal::decode(41, &body).unwrap();
        assert_eq!(back.txn_id, "t-1");
        assert_eq!(back.base, 41);
        assert_eq!(back.isolation, IsolationLevel::WriteSerializable);
        assert_eq!(back.operation, "DELETE");
        assert_eq!(back.reads.predicates, p.reads.predicates);
        assert_eq!(back.reads.files, p.reads.files);
        assert_eq!(back.reads.app_ids, p.reads.app_ids);
        assert_eq!(back.actions, p.actions);
    }

    #[test]
    fn change_files_are_neither_carried_nor_carry() {
        let cdc = Action::Cdc(crate::protocol::Cdc {
            path: "_change_data/cdc-00000-x.c000.snappy.parquet".into(),
            partition_values: Default::default(),
            size: 10,
            data_change: false,
        });
        let with_feed = vec![txn(1), cdc];
        assert!(
            proposal(with_feed.clone(), col("id").eq(lit(1i64)))
                .carriable()
                .is_none()
        );
        assert!(!may_carry(&with_feed));
        assert!(may_carry(&[txn(1)]));
    }

    #[test]
    fn work_only_its_writer_can_finish_is_not_carriable() {
        let plain = || proposal(vec![txn(1)], col("id").eq(lit(1i64)));
        assert!(plain().carriable().is_some());
        // A commitInfo is the committer's to write.
        let info = member(0, "WRITE", true, &[]).actions.remove(0);
        assert!(
            proposal(vec![info], col("id").eq(lit(1i64)))
                .carriable()
                .is_none()
        );
        // A predicate that JSON cannot hold (NaN) would read back as another one.
        assert!(
            proposal(vec![txn(1)], col("x").lt(lit(f64::NAN)))
                .carriable()
                .is_none()
        );
        assert!(
            proposal(Vec::new(), col("id").eq(lit(1i64)))
                .carriable()
                .is_none()
        );
    }

    #[test]
    fn a_commit_names_its_own_txn_id_and_those_it_carried() {
        let mut info = member(5, "WRITE", true, &[]).actions.remove(0);
        if let Action::CommitInfo(c) = &mut info {
            c.txn_id = Some("own".into());
        }
        let group = Group {
            actions: Vec::new(),
            txn_ids: vec!["a".into(), "b".into()],
            blind_append: false,
            files: GroupFiles::default(),
        };
        mark_group(&mut info, &group);
        let actions = vec![info];
        for id in ["own", "a", "b"] {
            assert!(names(&actions, id), "{id}");
        }
        assert!(!names(&actions, "c"));
        let Action::CommitInfo(c) = &actions[0] else {
            unreachable!()
        };
        assert_eq!(c.other["isBlindAppend"], Value::from(false));
    }
}
