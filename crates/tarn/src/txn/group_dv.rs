//! Group commit of deletion-vector changes. A proposal that deletes rows through
//! deletion vectors is carried the way its own writer would rebase it: its rows are united
//! with those the commits after its base deleted from the same file, and with those the
//! members before it in the group deleted, and it conflicts only when both deleted one row.
//! Within one commit a file then appears once: the first member's `add` takes the united
//! DV, and later members drop their `remove` and `add` of it.
//!
//! DVs, inline or in files, are loaded only when a uniting needs their rows; the DV files
//! of files more than one writer changed are read at once before admitting ([`prefetch`]),
//! through the table handle's DV cache. A united DV that does not fit inline goes
//! into one new DV file per commit, written by the committer before it puts the commit
//! ([`GroupFiles::write_dvs`]); if that PUT fails, the commit carries no one. A uniting
//! that would delete every row of a file is left to its own writer (who removes the file
//! alone), as is a proposal whose DVs cannot be read.

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;
use roaring::RoaringTreemap;

use super::conflict::{DvRebase, Ours, WinningCommit, check};
use super::rebase::DvChange;
use crate::dv::{DvFileWriter, deletion_vector_of, describe_bitmap};
use crate::paths;
use crate::protocol::{Action, Add, DeletionVectorDescriptor};
use crate::snapshot::Snapshot;

/// A proposal's actions (`proposal`: its isolation, reads and actions) as the group
/// carries them, checked against the commits after its base and the members before it as
/// if each had committed alone in that order; its deletion-vector changes are united with
/// theirs as its writer would rebase them. `None` when a check fails (it then stays
/// eligible for later versions, where the same check decides again) or its changes cannot
/// be united here.
pub(crate) async fn admit(
    base: &Snapshot,
    proposal: &Ours<'_>,
    between: &[(i64, &Vec<Action>)],
    members: &[WinningCommit],
    files: &mut GroupFiles,
    now_ms: i64,
) -> Option<Vec<Action>> {
    let mut actions = proposal.actions.to_vec();
    let mut changes = Changes::of(base, &actions);
    let dv_paths: BTreeSet<String> = changes.pending.iter().map(|c| c.path.clone()).collect();
    let mut rewritten = BTreeSet::new();
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
            let change = changes.load(base, &rebase.path).await?;
            if !unite_with_commit(base, &rebase, &mut actions, change, now_ms).await {
                return None;
            }
            rewritten.insert(rebase.path);
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
    for path in &joined {
        changes.load(base, path).await?;
    }
    if !joined.is_empty()
        && !files
            .join(base, &joined, &mut actions, &changes.loaded)
            .await
    {
        return None;
    }
    // A file united with a commit that a member before it changed too is joined above,
    // and its `add` dropped; one still here would take that member's DV, not the union.
    if rewritten
        .iter()
        .any(|p| !joined.contains(p) && files.files.contains_key(p))
    {
        return None;
    }
    files.record(base, &actions, &changes.loaded, &rewritten);
    Some(actions)
}

/// Loads at once, into the table handle's DV cache, the deletion vectors stored in files
/// that admitting `candidates` (the proposals' actions) may unite: for each file that a
/// candidate removed and another writer too (another candidate, or one of `settled`: the
/// committer's own actions and the commits the candidates catch up with), the candidates'
/// DVs of it, before and after, and the DVs the settled writers added. Each admission then
/// finds them there instead of waiting on a GET of its own, one after another. A DV that
/// cannot be read is left for the admission to find so.
pub(crate) async fn prefetch(base: &Snapshot, settled: &[&[Action]], candidates: &[&[Action]]) {
    let location = base.location();
    let removed_by = |actions: &[Action]| -> BTreeSet<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Remove(r) => Some(paths::canonical(location, &r.path)),
                _ => None,
            })
            .collect()
    };
    // Per file: writers that removed it, and whether a candidate is among them.
    let mut removers: HashMap<String, (usize, bool)> = HashMap::new();
    for (actions, candidate) in settled
        .iter()
        .map(|a| (a, false))
        .chain(candidates.iter().map(|a| (a, true)))
    {
        for path in removed_by(actions) {
            let entry = removers.entry(path).or_default();
            entry.0 += 1;
            entry.1 |= candidate;
        }
    }
    let shared = |path: &str| {
        removers
            .get(&paths::canonical(location, path))
            .is_some_and(|(n, candidate)| *n > 1 && *candidate)
    };
    let mut wanted: HashMap<String, DeletionVectorDescriptor> = HashMap::new();
    let settled_adds = settled
        .iter()
        .flat_map(|a| a.iter())
        .filter_map(|a| match a {
            Action::Add(add) => Some((&add.path, &add.deletion_vector)),
            _ => None,
        });
    let candidate_dvs = candidates
        .iter()
        .flat_map(|a| a.iter())
        .filter_map(|a| match a {
            Action::Remove(r) => Some((&r.path, &r.deletion_vector)),
            Action::Add(add) => Some((&add.path, &add.deletion_vector)),
            _ => None,
        });
    for (path, dv) in settled_adds.chain(candidate_dvs) {
        if let Some(dv) = dv
            && dv.storage_type != "i"
            && shared(path)
        {
            wanted.insert(dv.unique_id(), dv.clone());
        }
    }
    futures::stream::iter(wanted.into_values())
        .for_each_concurrent(PREFETCH_AT_ONCE, |dv| async move {
            let _ = deletion_vector_of(base.location(), base.caches(), &dv).await;
        })
        .await;
}

/// DV files a committer reads at once.
const PREFETCH_AT_ONCE: usize = 32;

/// A file a proposal changes through a deletion vector (it removes the file and adds it
/// back with a DV), as its writer recorded it: the descriptors, before and after.
#[derive(Debug, Clone)]
struct PendingChange {
    path: String,
    before: Option<DeletionVectorDescriptor>,
    after: DeletionVectorDescriptor,
    physical_rows: u64,
}

/// A proposal's deletion-vector changes: all of them by descriptor, and those a uniting
/// needed with their rows loaded.
struct Changes {
    pending: Vec<PendingChange>,
    loaded: Vec<DvChange>,
}

impl Changes {
    /// The files `actions` change through deletion vectors.
    fn of(base: &Snapshot, actions: &[Action]) -> Self {
        let location = base.location();
        let removed: HashMap<String, &crate::protocol::Remove> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Remove(r) => Some((paths::canonical(location, &r.path), r)),
                _ => None,
            })
            .collect();
        let mut pending = Vec::new();
        for action in actions {
            let Action::Add(add) = action else { continue };
            let path = paths::canonical(location, &add.path);
            let (Some(remove), Some(after)) = (removed.get(&path), &add.deletion_vector) else {
                continue;
            };
            pending.push(PendingChange {
                path,
                before: remove.deletion_vector.clone(),
                after: after.clone(),
                physical_rows: physical_rows(add),
            });
        }
        Self {
            pending,
            loaded: Vec::new(),
        }
    }

    /// The change to `path` with its rows, loading its DVs the first time; `None` when
    /// the proposal changes no such file or a DV cannot be read.
    async fn load(&mut self, base: &Snapshot, path: &str) -> Option<&mut DvChange> {
        if let Some(i) = self.loaded.iter().position(|c| c.path == path) {
            return self.loaded.get_mut(i);
        }
        let pending = self.pending.iter().find(|c| c.path == path)?;
        let before = match &pending.before {
            Some(dv) => deletion_vector_of(base.location(), base.caches(), dv)
                .await
                .ok()?,
            None => RoaringTreemap::new(),
        };
        let after = deletion_vector_of(base.location(), base.caches(), &pending.after)
            .await
            .ok()?;
        self.loaded.push(DvChange::at(
            pending.path.clone(),
            before,
            after,
            pending.physical_rows,
        ));
        self.loaded.last_mut()
    }
}

/// The rows a file holds, deleted ones included (its `numRecords`); unknown reads as
/// unbounded, so such a file is never taken for wholly deleted.
fn physical_rows(add: &Add) -> u64 {
    add.stats
        .as_ref()
        .and_then(|s| s.num_records())
        .unwrap_or(u64::MAX)
}

/// Unites a proposal's change to a file with a commit's (`rebase`, found by the checker):
/// its `remove` then takes out the commit's version of the file, and its `add` carries
/// both sets of rows (its DV is written when the commit is, [`GroupFiles::write_dvs`]).
/// `false` when the two deleted one row (a conflict, final as it is for the writer), the
/// commit's DV cannot be read, or the result would delete every row of the file.
async fn unite_with_commit(
    base: &Snapshot,
    rebase: &DvRebase,
    actions: &mut Vec<Action>,
    change: &mut DvChange,
    now_ms: i64,
) -> bool {
    let location = base.location();
    let Ok(theirs) = deletion_vector_of(base.location(), base.caches(), &rebase.winner_dv).await
    else {
        return false;
    };
    if !(&(&theirs - &change.before) & &change.rows).is_empty() {
        return false;
    }
    let united = &theirs | &change.rows;
    if united.len() >= change.physical_rows {
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
    // The descriptor is a placeholder until the commit is written.
    actions.push(Action::Add(
        rebase
            .winner_add
            .clone()
            .with_deletion_vector(rebase.winner_dv.clone()),
    ));
    change.before = theirs;
    true
}

/// The files the members of a group changed through deletion vectors: each one's first
/// `add` in the group and the rows its DV holds now (loaded when a uniting needs them).
#[derive(Debug, Default)]
pub(crate) struct GroupFiles {
    files: HashMap<String, (Add, Option<RoaringTreemap>)>,
    /// Files whose first `add` takes a new DV when the commit is written.
    rewrite: BTreeSet<String>,
    /// The new DVs of those files, once written.
    written: HashMap<String, DeletionVectorDescriptor>,
}

impl GroupFiles {
    /// Records the files a member (accepted) changed through deletion vectors; `changes`
    /// are the ones whose rows are loaded, and `rewritten` those it united with commits
    /// after its base, whose DVs are written with the commit.
    pub(crate) fn record(
        &mut self,
        base: &Snapshot,
        actions: &[Action],
        changes: &[DvChange],
        rewritten: &BTreeSet<String>,
    ) {
        let location = base.location();
        for action in actions {
            let Action::Add(add) = action else { continue };
            if add.deletion_vector.is_none() {
                continue;
            }
            let path = paths::canonical(location, &add.path);
            let rows = changes
                .iter()
                .find(|c| c.path == path)
                .map(|c| &c.before | &c.rows);
            if rewritten.contains(&path) {
                self.rewrite.insert(path.clone());
            }
            self.files.entry(path).or_insert((add.clone(), rows));
        }
    }

    /// Joins a proposal's changes to the files `paths` (which members before it changed
    /// too) into the group: their rows go into the first member's DV, and the proposal's
    /// own `remove` and `add` of those files go. Changes nothing and returns `false` when
    /// a member's DV cannot be read, two members deleted one row, or the result would
    /// delete every row of a file.
    pub(crate) async fn join(
        &mut self,
        base: &Snapshot,
        paths: &BTreeSet<String>,
        actions: &mut Vec<Action>,
        changes: &[DvChange],
    ) -> bool {
        let mut united = Vec::new();
        for path in paths {
            let (Some((add, rows)), Some(change)) = (
                self.files.get_mut(path),
                changes.iter().find(|c| &c.path == path),
            ) else {
                return false;
            };
            if rows.is_none() {
                let Some(dv) = &add.deletion_vector else {
                    return false;
                };
                let Ok(loaded) = deletion_vector_of(base.location(), base.caches(), dv).await
                else {
                    return false;
                };
                *rows = Some(loaded);
            }
            let Some(now) = rows.as_ref() else {
                return false;
            };
            if !(&(now - &change.before) & &change.rows).is_empty() {
                return false;
            }
            let rows = now | &change.rows;
            if rows.len() >= change.physical_rows {
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
                entry.1 = Some(rows);
            }
            self.rewrite.insert(path);
        }
        true
    }

    /// Writes the new DVs of the files the group united: inline where they fit under the
    /// table's threshold, else into one new DV file. `false` when that file's PUT fails
    /// (the commit must then carry no one).
    pub(crate) async fn write_dvs(&mut self, base: &Snapshot) -> bool {
        let threshold = base.properties().inline_dv_threshold();
        let mut file = DvFileWriter::new();
        for path in &self.rewrite {
            let Some((_, Some(rows))) = self.files.get(path) else {
                return false;
            };
            self.written
                .insert(path.clone(), describe_bitmap(rows, threshold, &mut file));
        }
        file.upload(base.location()).await.is_ok()
    }

    /// Gives the first `add` of each united file its new DV ([`Self::write_dvs`]).
    pub(crate) fn apply(&self, base: &Snapshot, actions: &mut [Action]) {
        if self.written.is_empty() {
            return;
        }
        let location = base.location();
        for action in actions {
            if let Action::Add(add) = action
                && let Some(dv) = self.written.get(&paths::canonical(location, &add.path))
            {
                add.deletion_vector = Some(dv.clone());
            }
        }
    }
}
