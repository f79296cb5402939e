//! Log replay: the reconciled state of a log prefix (protocol, metadata, live files,
//! tombstones, application transactions, domains), built from a checkpoint and the
//! commits after it, and the identity of a file in it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tarn_store::StoreLocation;

use crate::log::checkpoint::Batches;
use crate::paths;
use crate::protocol::{Action, Add, DomainMetadata, Metadata, Protocol, Remove, Txn};

/// The identity of a data file in log replay: its resolved path and its deletion vector.
/// The same file with another DV is another entry (the old one is removed with the DV it
/// had).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileKey {
    /// The resolved object path (or the raw path when it does not resolve).
    pub path: String,
    /// The DV's unique id, if the file has one.
    pub dv: Option<String>,
}

impl FileKey {
    fn of(
        location: &StoreLocation,
        path: &str,
        dv: Option<&crate::protocol::DeletionVectorDescriptor>,
    ) -> Self {
        Self {
            path: paths::canonical(location, path),
            dv: dv.map(|d| d.unique_id()),
        }
    }
}

/// The reconciled actions of a log prefix.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableState {
    pub(crate) protocol: Option<Protocol>,
    pub(crate) metadata: Option<Metadata>,
    /// Persistent maps: a refresh or a commit on top of a snapshot shares its nodes and
    /// copies O(log n) of them, instead of copying every file of the table.
    /// Values behind `Arc`: the tree moves entries as it grows, and an `add` is some
    /// 300 bytes.
    pub(crate) files: imbl::OrdMap<FileKey, Arc<Add>>,
    pub(crate) tombstones: imbl::OrdMap<FileKey, Remove>,
    pub(crate) txns: HashMap<String, Txn>,
    pub(crate) domains: BTreeMap<String, DomainMetadata>,
    /// The `commitInfo` timestamp of the newest commit applied, when it had one.
    pub(crate) last_commit_timestamp: Option<i64>,
}

impl TableState {
    /// Applies a checkpoint, batch by batch as it was decoded: its adds and tombstones are
    /// independent entries (a tombstone may share a path with a live file that has another
    /// DV), so tombstones go in first and adds win over them.
    pub(crate) fn apply_checkpoint(&mut self, location: &StoreLocation, batches: Batches) {
        // The few other actions are cloned so the many adds are moved only once.
        let rest: Vec<Action> = batches
            .iter()
            .flatten()
            .filter(|a| !matches!(a, Action::Add(_)))
            .cloned()
            .collect();
        self.apply_commit(location, rest);
        // Resolving paths and boxing each add are most of the per-file work: on every
        // core, batch by batch, while this thread inserts the batches done so far.
        let key_batch = |batch: Vec<Action>| -> Vec<(FileKey, Arc<Add>)> {
            batch
                .into_iter()
                .filter_map(|action| match action {
                    Action::Add(add) => Some((
                        FileKey::of(location, &add.path, add.deletion_vector.as_ref()),
                        Arc::new(add),
                    )),
                    _ => None,
                })
                .collect()
        };
        crate::tasks::on_cores_in_order(batches, key_batch, |files| {
            for (key, add) in files {
                self.tombstones.remove(&key);
                self.files.insert(key, add);
            }
        });
    }

    /// Applies one commit's actions, in order, on top of the state of the version before.
    /// Replaying commits in version order this way gives the same state as Delta's
    /// newest-first replay with de-duplication on (path, DV), and the same code serves a
    /// cold build and a warm refresh.
    pub(crate) fn apply_commit(&mut self, location: &StoreLocation, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Add(add) => {
                    let key = FileKey::of(location, &add.path, add.deletion_vector.as_ref());
                    self.tombstones.remove(&key);
                    self.files.insert(key, Arc::new(add));
                }
                Action::Remove(remove) => {
                    let key = FileKey::of(location, &remove.path, remove.deletion_vector.as_ref());
                    self.files.remove(&key);
                    self.tombstones.insert(key, remove);
                }
                Action::Protocol(p) => self.protocol = Some(p),
                Action::Metadata(m) => self.metadata = Some(m),
                Action::Txn(t) => {
                    self.txns.insert(t.app_id.clone(), t);
                }
                Action::DomainMetadata(d) => {
                    if d.removed {
                        self.domains.remove(&d.domain);
                    } else {
                        self.domains.insert(d.domain.clone(), d);
                    }
                }
                Action::CommitInfo(info) => {
                    if let Some(ts) = info.in_commit_timestamp.or(info.timestamp) {
                        self.last_commit_timestamp = Some(ts);
                    }
                }
                Action::Cdc(_) | Action::CheckpointMetadata(_) | Action::Sidecar(_) => {}
            }
        }
    }
}
