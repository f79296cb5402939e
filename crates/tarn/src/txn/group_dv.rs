//! Group commit of deletion-vector changes. A proposal that deletes rows through
//! deletion vectors is carried the way its own writer would rebase it: its rows are united
//! with those the commits after its base deleted from the same file, and with those the
//! members before it in the group deleted, and it conflicts only when both deleted one row.
//! Within one commit a file then appears once: the first member's `add` takes the united
//! DV, and later members drop their `remove` and `add` of it.
//!
//! A committer writes no DV file for another writer, so only inline DVs are united here.
//! A DV that lives in a file is carried as its writer wrote it, as long as nothing needs
//! uniting with it: a commit after the base or a member before it that changed the same
//! file makes the proposal conflict here, and it is left to its own writer (who rebases it
//! alone), as is one whose united DV would not fit inline or would delete every row of a
//! file.

use std::collections::{BTreeSet, HashMap};

use roaring::RoaringTreemap;

use super::conflict::{DvRebase, Ours, WinningCommit, check};
use super::rebase::DvChange;
use crate::dv::{inline_bitmap, inline_descriptor};
use crate::paths;
use crate::protocol::{Action, Add};
use crate::snapshot::Snapshot;

/// A proposal's actions (`proposal`: its isolation, reads and actions) as the group
/// carries them, checked against the commits after its base and the members before it as
/// if each had committed alone in that order; its deletion-vector changes are united with
/// theirs as its writer would rebase them. `None` when a check fails (it then stays
/// eligible for later versions, where the same check decides again) or its changes cannot
/// be united here.
pub(crate) fn admit(
    base: &Snapshot,
    proposal: &Ours<'_>,
    between: &[(i64, &Vec<Action>)],
    members: &[WinningCommit],
    files: &mut GroupFiles,
    now_ms: i64,
) -> Option<Vec<Action>> {
    let mut actions = proposal.actions.to_vec();
    let mut changes = dv_changes_of(base, &actions);
    let dv_paths: BTreeSet<String> = changes.iter().map(|c| c.path.clone()).collect();
    for (v, commit) in between {
        let winner = WinningCommit {
            version: *v,
            actions: (*commit).clone(),
        };
        let ours = Ours {
            isolation: proposal.isolation,
            reads: proposal.reads,
            actions: &actions,
            dv_paths: &dv_paths,
        };
        let rebases = check(&ours, base, &winner).ok()?;
        for rebase in rebases {
            if !unite_with_commit(base, &rebase, &mut actions, &mut changes, now_ms) {
                return None;
            }
        }
    }
    let mut joined = BTreeSet::new();
    for winner in members {
        let ours = Ours {
            isolation: proposal.isolation,
            reads: proposal.reads,
            actions: &actions,
            dv_paths: &dv_paths,
        };
        joined.extend(check(&ours, base, winner).ok()?.into_iter().map(|r| r.path));
    }
    if !joined.is_empty() && !files.join(base, &joined, &mut actions, &changes) {
        return None;
    }
    files.record(base, &actions);
    Some(actions)
}

/// The files a proposal changes through inline deletion vectors (a file it removes and adds
/// back with a DV), as its writer recorded them. A change whose DV, before or after, lives
/// in a file is not one of them: the conflict checker then finds any concurrent change to
/// that file a conflict, since only inline rows can be united.
pub(crate) fn dv_changes_of(base: &Snapshot, actions: &[Action]) -> Vec<DvChange> {
    let location = base.location();
    let removed: HashMap<String, &crate::protocol::Remove> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some((paths::canonical(location, &r.path), r)),
            _ => None,
        })
        .collect();
    let mut changes = Vec::new();
    for action in actions {
        let Action::Add(add) = action else { continue };
        let path = paths::canonical(location, &add.path);
        let (Some(remove), Some(dv)) = (removed.get(&path), &add.deletion_vector) else {
            continue;
        };
        let before = match &remove.deletion_vector {
            Some(dv) => inline_bitmap(dv),
            None => Some(RoaringTreemap::new()),
        };
        let (Some(after), Some(before)) = (inline_bitmap(dv), before) else {
            continue;
        };
        changes.push(DvChange {
            path,
            rows: &after - &before,
            before,
            physical_rows: physical_rows(add),
        });
    }
    changes
}

/// The rows a file holds, deleted ones included (its `numRecords`); unknown reads as
/// unbounded, so such a file is never taken for wholly deleted.
fn physical_rows(add: &Add) -> u64 {
    add.stats
        .as_ref()
        .and_then(|s| s.num_records())
        .unwrap_or(u64::MAX)
}

/// The DV bitmap a uniting may produce, if it fits inline and leaves a row of the file.
fn fits(united: &RoaringTreemap, physical_rows: u64, threshold: usize) -> bool {
    united.len() < physical_rows && 4 + united.serialized_size() <= threshold
}

/// Unites a proposal's change to a file with a commit's (`rebase`, found by the checker):
/// its `remove` then takes out the commit's version of the file, and its `add` carries
/// both sets of rows. `false` when the two deleted one row (a conflict, final as it is for
/// the writer), or when the result cannot be written inline.
pub(crate) fn unite_with_commit(
    base: &Snapshot,
    rebase: &DvRebase,
    actions: &mut Vec<Action>,
    changes: &mut [DvChange],
    now_ms: i64,
) -> bool {
    let location = base.location();
    let Some(change) = changes.iter_mut().find(|c| c.path == rebase.path) else {
        return false;
    };
    let Some(theirs) = inline_bitmap(&rebase.winner_dv) else {
        return false;
    };
    if !(&(&theirs - &change.before) & &change.rows).is_empty() {
        return false;
    }
    let united = &theirs | &change.rows;
    if !fits(
        &united,
        change.physical_rows,
        base.properties().inline_dv_threshold(),
    ) {
        return false;
    }
    let same = |p: &str| paths::canonical(location, p) == rebase.path;
    actions.retain(|a| match a {
        Action::Remove(r) => !same(&r.path),
        Action::Add(add) => !same(&add.path),
        _ => true,
    });
    actions.push(Action::Remove(
        rebase.winner_add.clone().into_remove(now_ms),
    ));
    actions.push(Action::Add(
        rebase
            .winner_add
            .clone()
            .with_deletion_vector(inline_descriptor(&united)),
    ));
    change.before = theirs;
    true
}

/// The files the members of a group changed through inline DVs: each one's first `add` in
/// the group and the rows its DV holds now.
#[derive(Debug, Default)]
pub(crate) struct GroupFiles {
    files: HashMap<String, (Add, RoaringTreemap)>,
    /// Files whose first `add` must take the DV in `files` when the commit is written.
    joined: BTreeSet<String>,
}

impl GroupFiles {
    /// Records the files a member (accepted as it is) changed through inline DVs.
    pub(crate) fn record(&mut self, base: &Snapshot, actions: &[Action]) {
        let location = base.location();
        for action in actions {
            if let Action::Add(add) = action
                && let Some(dv) = &add.deletion_vector
                && let Some(rows) = inline_bitmap(dv)
            {
                let path = paths::canonical(location, &add.path);
                self.files.entry(path).or_insert((add.clone(), rows));
            }
        }
    }

    /// Joins a proposal's changes to the files `paths` (which members before it changed
    /// too) into the group: their rows go into the first member's DV, and the proposal's
    /// own `remove` and `add` of those files go. Changes nothing and returns `false` when
    /// a file is not one the group can unite (its DV not inline), two members deleted one
    /// row, or the result cannot be written inline.
    pub(crate) fn join(
        &mut self,
        base: &Snapshot,
        paths: &BTreeSet<String>,
        actions: &mut Vec<Action>,
        changes: &[DvChange],
    ) -> bool {
        let threshold = base.properties().inline_dv_threshold();
        let mut united = Vec::new();
        for path in paths {
            let (Some((_, now)), Some(change)) = (
                self.files.get(path),
                changes.iter().find(|c| &c.path == path),
            ) else {
                return false;
            };
            if !(&(now - &change.before) & &change.rows).is_empty() {
                return false;
            }
            let rows = now | &change.rows;
            if !fits(&rows, change.physical_rows, threshold) {
                return false;
            }
            united.push((path.clone(), rows));
        }
        let location = base.location();
        actions.retain(|a| match a {
            Action::Remove(r) => !paths.contains(&paths::canonical(location, &r.path)),
            Action::Add(add) => !paths.contains(&paths::canonical(location, &add.path)),
            _ => true,
        });
        for (path, rows) in united {
            if let Some(entry) = self.files.get_mut(&path) {
                entry.1 = rows;
            }
            self.joined.insert(path);
        }
        true
    }

    /// Gives the first `add` of each joined file the united DV.
    pub(crate) fn apply(&self, base: &Snapshot, actions: &mut [Action]) {
        if self.joined.is_empty() {
            return;
        }
        let location = base.location();
        for action in actions {
            if let Action::Add(add) = action {
                let path = paths::canonical(location, &add.path);
                if self.joined.contains(&path)
                    && let Some((_, rows)) = self.files.get(&path)
                {
                    add.deletion_vector = Some(inline_descriptor(rows));
                }
            }
        }
    }
}
