//! Vacuum: deleting the data files no version within the retention period references,
//! orphans of failed commits included.
//!
//! A file is kept when the newest snapshot references it, when a version within the
//! retention period does (it was removed less than the retention period ago), or when it
//! is younger than the retention period: a writer may be about to commit it. The log
//! itself, and hidden files and folders (`.x`, `_x` that are not partition folders), are
//! never touched, but for index objects (`_tarn_index/`): those go when no version
//! within the retention period uses them and they are older than it.

use std::collections::HashSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::index::meta::INDEX_DIR;
use crate::indexing::referenced_objects;
use crate::log::versions::commit_timestamps;
use crate::log::{CommitFile, list_log, read_commits};
use crate::paths;
use crate::protocol::Action;
use crate::protocol::DeletionVectorDescriptor;
use crate::protocol::features::ensure_writable;
use crate::protocol::names::DELTA_LOG_DIR;
use crate::snapshot::Snapshot;
use crate::table::Table;

/// What a vacuum deleted (or, in a dry run, would delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumOutcome {
    /// The files, relative to the table root, sorted.
    pub files: Vec<String>,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Whether this was a dry run (nothing deleted).
    pub dry_run: bool,
    /// The retention period applied.
    pub retention: Duration,
}

/// A vacuum being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct VacuumBuilder<'a> {
    table: &'a Table,
    retention: Option<Duration>,
    dry_run: bool,
    enforce_retention: bool,
}

impl Table {
    /// Starts a vacuum of the table's unreferenced files.
    pub fn vacuum(&self) -> VacuumBuilder<'_> {
        VacuumBuilder {
            table: self,
            retention: None,
            dry_run: false,
            enforce_retention: true,
        }
    }
}

impl VacuumBuilder<'_> {
    /// The retention period (default: `delta.deletedFileRetentionDuration`, one week).
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Only list what would be deleted.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Whether a retention shorter than the table's is refused (default: yes). A shorter
    /// one can delete files that readers of recent versions, or writers about to commit,
    /// still need.
    pub fn with_enforce_retention(mut self, enforce: bool) -> Self {
        self.enforce_retention = enforce;
        self
    }

    /// Lists the table's files and deletes the unreferenced ones older than the retention.
    ///
    /// Fails with [`Error::InvalidArgument`] for a retention below the table's while it is
    /// enforced, with [`Error::UnsupportedWriterFeature`] for tables Tarn cannot write,
    /// and with [`Error::Store`] when listing or deleting fails (files already deleted stay
    /// deleted; none of them was referenced).
    pub async fn execute(self) -> Result<VacuumOutcome> {
        // Vacuum the newest state: files added after this handle's version are live.
        let snapshot = self.table.snapshot().refresh().await?;
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        let table_retention = snapshot.properties().deleted_file_retention();
        let retention = self.retention.unwrap_or(table_retention);
        if self.enforce_retention && retention < table_retention {
            return Err(Error::InvalidArgument {
                name: "retention",
                reason: format!(
                    "{retention:?} is shorter than the table's delta.deletedFileRetentionDuration \
                     ({table_retention:?}); readers of recent versions may still need the files. \
                     Use enforce_retention(false) to vacuum anyway"
                ),
            });
        }
        let now = self.table.clock().now_ms();
        let cutoff = now.saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
        let referenced = referenced_files(&snapshot, cutoff);

        let location = snapshot.location();
        let root = location.root();
        let store = location.store();
        let objects: Vec<object_store::ObjectMeta> = store
            .list(Some(root))
            .try_collect()
            .await
            .map_err(Error::store(tarn_store::StoreOp::List, root))?;
        // Index objects old enough to go, unless a retained version uses them.
        let index_candidates: Vec<&object_store::ObjectMeta> = objects
            .iter()
            .filter(|meta| {
                relative_parts(root, &meta.location)
                    .is_some_and(|r| r.first().is_some_and(|f| f == INDEX_DIR))
                    && meta.last_modified.timestamp_millis() < cutoff
            })
            .collect();
        let index_kept = if index_candidates.is_empty() {
            HashSet::new()
        } else {
            referenced_objects(&snapshot, &commits_since(&snapshot, cutoff).await?)
        };
        let mut victims: Vec<(Path, u64)> = index_candidates
            .into_iter()
            .filter(|meta| !index_kept.contains(meta.location.as_ref()))
            .map(|meta| (meta.location.clone(), meta.size))
            .collect();
        victims.extend(
            objects
                .into_iter()
                .filter(|meta| {
                    let Some(relative) = relative_parts(root, &meta.location) else {
                        return false;
                    };
                    !is_hidden(&relative)
                        && !referenced.contains(meta.location.as_ref())
                        && meta.last_modified.timestamp_millis() < cutoff
                })
                .map(|meta| (meta.location, meta.size)),
        );
        victims.sort();
        let bytes = victims.iter().map(|(_, size)| size).sum();
        if !self.dry_run && !victims.is_empty() {
            let owned: Vec<object_store::Result<Path>> =
                victims.iter().map(|(p, _)| Ok(p.clone())).collect();
            let paths = futures::stream::iter(owned).boxed();
            store
                .delete_stream(paths)
                .try_for_each(|_| async { Ok(()) })
                .await
                .map_err(Error::store(tarn_store::StoreOp::Delete, root))?;
        }
        let prefix = root.as_ref().len() + usize::from(!root.as_ref().is_empty());
        Ok(VacuumOutcome {
            files: victims
                .iter()
                .map(|(p, _)| p.as_ref()[prefix..].to_string())
                .collect(),
            bytes,
            dry_run: self.dry_run,
            retention,
        })
    }
}

/// The actions of the commits made at or after `cutoff_ms`: what versions within the
/// retention period changed (index segments they removed, in particular).
async fn commits_since(snapshot: &Snapshot, cutoff_ms: i64) -> Result<Vec<Vec<Action>>> {
    let location = snapshot.location();
    let store = location.store().as_ref();
    let listing = list_log(store, location.root(), 0).await?;
    let recent: Vec<CommitFile> = commit_timestamps(&listing)
        .into_iter()
        .filter(|(_, ts)| *ts >= cutoff_ms)
        .filter_map(|(version, _)| {
            listing.commits.get(&version).map(|meta| CommitFile {
                version,
                meta: meta.clone(),
            })
        })
        .collect();
    read_commits(store, &recent).await
}

/// Resolved paths of every file a version within the retention references: live files,
/// files removed after the cutoff, and the deletion vectors of both.
fn referenced_files(snapshot: &Snapshot, cutoff_ms: i64) -> HashSet<String> {
    let location = snapshot.location();
    let mut referenced = HashSet::new();
    let dv = |descriptor: &Option<DeletionVectorDescriptor>, out: &mut HashSet<String>| {
        if let Some(d) = descriptor {
            if let Some(relative) = d.relative_path() {
                out.insert(paths::canonical(location, &relative));
            } else if d.storage_type == "p" {
                out.insert(paths::canonical(location, &d.path_or_inline_dv));
            }
        }
    };
    for add in snapshot.files() {
        referenced.insert(paths::canonical(location, &add.path));
        dv(&add.deletion_vector, &mut referenced);
    }
    for remove in snapshot.tombstones() {
        // A tombstone without a time is kept: its age is unknown.
        if remove.deletion_timestamp.is_none_or(|t| t >= cutoff_ms) {
            referenced.insert(paths::canonical(location, &remove.path));
            dv(&remove.deletion_vector, &mut referenced);
        }
    }
    referenced
}

fn relative_parts(root: &Path, path: &Path) -> Option<Vec<String>> {
    let parts = path.prefix_match(root)?;
    Some(parts.map(|p| p.as_ref().to_string()).collect())
}

/// The log, and files or folders Delta treats as hidden: a name starting with `.`, or
/// with `_` unless it is a partition folder (`_col=value`).
fn is_hidden(relative: &[String]) -> bool {
    if relative.first().is_some_and(|first| first == DELTA_LOG_DIR) {
        return true;
    }
    relative.iter().enumerate().any(|(i, part)| {
        let is_folder = i + 1 < relative.len();
        part.starts_with('.') || (part.starts_with('_') && !(is_folder && part.contains('=')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_and_hidden_names_are_never_vacuumed() {
        let parts = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        assert!(is_hidden(&parts("_delta_log/00000000000000000000.json")));
        assert!(is_hidden(&parts(".hidden/part-0.parquet")));
        assert!(is_hidden(&parts("_staging/part-0.parquet")));
        assert!(is_hidden(&parts("p=1/_SUCCESS")));
        assert!(!is_hidden(&parts("_2=bar/part-0.parquet")));
        assert!(!is_hidden(&parts("part-0.parquet")));
        assert!(!is_hidden(&parts(
            "deletion_vector_0d6e4a4b-0000-0000-0000-000000000000.bin"
        )));
    }
}
