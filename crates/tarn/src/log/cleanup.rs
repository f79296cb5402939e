//! Log cleanup, as Delta's protocol describes it ("Metadata Cleanup"): commits,
//! checkpoints and other versioned log files older than the retention go, up to the
//! newest checkpoint that is itself old enough, so that every version within the
//! retention can still be rebuilt.
//!
//! The cut: the newest commit at least `retention` older than the newest commit is the
//! cutoff commit; the newest complete checkpoint at or below it is the cutoff checkpoint.
//! Every file of a version below the cutoff checkpoint is deleted, oldest first; the
//! checkpoint and its commit stay. Ages are measured on the store's clock (the commit
//! files' times, made monotonic as for time travel) against the newest commit, so a
//! writer whose clock runs ahead never deletes what the store saw written recently, and
//! a table nobody writes keeps the history it had.
//!
//! V2 checkpoint sidecars (`_sidecars/`) are left alone: Tarn writes none, and telling
//! which of another engine's are still referenced would mean reading every checkpoint
//! kept.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};

use super::versions::commit_timestamps;
use super::{LogListing, group_listing, log_dir};
use crate::error::{Error, Result};
use crate::protocol::names::{CLAIMS_DIR, LogFileKind, PROPOSALS_DIR, parse_log_file_name};

/// What one cleanup of a log deletes (or would delete), oldest version first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expired {
    /// The cutoff checkpoint: the oldest version the log can still rebuild afterwards.
    pub(crate) cutoff: Option<i64>,
    /// Commit files below it.
    pub(crate) commits: Vec<Path>,
    /// Checkpoint files (every part) below it.
    pub(crate) checkpoints: Vec<Path>,
    /// Other versioned files below it (`.crc`, compacted logs).
    pub(crate) others: Vec<Path>,
}

impl Expired {
    /// Every path, oldest version first: commits before the checkpoints of the same
    /// versions would not matter, as no version below the cutoff stays readable.
    pub(crate) fn paths(&self) -> Vec<Path> {
        let mut all: Vec<Path> = self
            .commits
            .iter()
            .chain(&self.checkpoints)
            .chain(&self.others)
            .cloned()
            .collect();
        all.sort();
        all
    }
}

/// Works out what a cleanup with `retention` deletes, `newest_ms` being the store's time
/// of the newest commit. Lists the log from its start; on a store that lists in key order
/// (`ordered`: S3, GCS, Azure, memory) the listing stops at the first commit younger than
/// the cut, so a cleanup reads about as many objects as it deletes, however long the log
/// it keeps.
///
/// Fails with [`Error::Store`] when the log cannot be listed.
pub(crate) async fn plan(
    store: &dyn ObjectStore,
    root: &Path,
    newest_ms: i64,
    retention: Duration,
    ordered: bool,
) -> Result<Expired> {
    let dir = log_dir(root);
    let retention_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
    let cutoff_ms = newest_ms.saturating_sub(retention_ms);
    let mut stream = store.list(Some(&dir));
    let mut listed: Vec<ObjectMeta> = Vec::new();
    let mut files: Vec<(i64, LogFileKind, Path)> = Vec::new();
    while let Some(meta) = stream.next().await {
        let meta = meta.map_err(Error::store(tarn_store::StoreOp::List, &dir))?;
        if meta.location.parts_count() != dir.parts_count() + 1 {
            continue;
        }
        let Some(name) = meta.location.filename().and_then(parse_log_file_name) else {
            continue;
        };
        let young =
            name.kind == LogFileKind::Commit && meta.last_modified.timestamp_millis() > cutoff_ms;
        files.push((name.version, name.kind, meta.location.clone()));
        listed.push(meta);
        // Everything after a young commit, in order, is younger still.
        if ordered && young {
            break;
        }
    }
    let listing = group_listing(&dir, listed, 0);
    Ok(expired(&listing, &files, cutoff_ms))
}

/// What is below the cutoff checkpoint of `listing` for a cut at `cutoff_ms`.
fn expired(listing: &LogListing, files: &[(i64, LogFileKind, Path)], cutoff_ms: i64) -> Expired {
    let times = commit_timestamps(listing);
    let Some(cutoff_commit) = times
        .iter()
        .take_while(|(_, ts)| **ts <= cutoff_ms)
        .map(|(v, _)| *v)
        .last()
    else {
        return Expired::default();
    };
    let Some(&cutoff) = listing
        .checkpoints
        .range(..=cutoff_commit)
        .next_back()
        .map(|(v, _)| v)
    else {
        return Expired::default();
    };
    let mut out = Expired {
        cutoff: Some(cutoff),
        ..Expired::default()
    };
    for (version, kind, path) in files {
        if *version >= cutoff {
            continue;
        }
        match kind {
            LogFileKind::Commit => out.commits.push(path.clone()),
            LogFileKind::Checkpoint(_) => out.checkpoints.push(path.clone()),
            LogFileKind::Other => out.others.push(path.clone()),
        }
    }
    out.commits.sort();
    out.checkpoints.sort();
    out.others.sort();
    out
}

/// The group-commit proposals and claims the log folder holds (two small LISTs).
///
/// Fails with [`Error::Store`] when either cannot be listed.
pub(crate) async fn pending(store: &dyn ObjectStore, root: &Path) -> Result<LogListing> {
    let dir = log_dir(root);
    let mut listed: Vec<ObjectMeta> = Vec::new();
    for folder in [PROPOSALS_DIR, CLAIMS_DIR] {
        let prefix = dir.clone().join(folder);
        let found: Vec<ObjectMeta> = store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(Error::store(tarn_store::StoreOp::List, &prefix))?;
        listed.extend(found);
    }
    Ok(group_listing(&dir, listed, 0))
}

/// Deletes `paths` (objects of the log folder `dir`) in the order given, many per
/// request where the store can (S3's multi-object delete). An object already gone counts
/// as deleted.
///
/// Fails with [`Error::Store`] on the first other failure; what was deleted stays
/// deleted.
pub(crate) async fn delete_in_order(
    store: &dyn ObjectStore,
    dir: &Path,
    paths: Vec<Path>,
) -> Result<()> {
    let locations = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
    let mut deleted = store.delete_stream(locations);
    while let Some(result) = deleted.next().await {
        match result {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(Error::store(tarn_store::StoreOp::Delete, dir)(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    const DAY: i64 = 86_400_000;

    /// A listing of commits `0..n` a day apart (version `v` at day `v`) with checkpoints
    /// at `checkpoints`, and the versioned files it holds.
    fn log(n: i64, checkpoints: &[i64]) -> (LogListing, Vec<(i64, LogFileKind, Path)>) {
        let dir = Path::from("t/_delta_log");
        let meta = |name: String, v: i64| ObjectMeta {
            location: dir.clone().join(name),
            last_modified: Utc.timestamp_millis_opt(v * DAY).unwrap(),
            size: 1,
            e_tag: None,
            version: None,
        };
        let mut listed = Vec::new();
        for v in 0..n {
            listed.push(meta(format!("{v:020}.json"), v));
            listed.push(meta(format!("{v:020}.crc"), v));
        }
        for c in checkpoints {
            listed.push(meta(format!("{c:020}.checkpoint.parquet"), *c));
        }
        let files = listed
            .iter()
            .filter_map(|m| {
                let name = parse_log_file_name(m.location.filename()?)?;
                Some((name.version, name.kind, m.location.clone()))
            })
            .collect();
        (group_listing(&dir, listed, 0), files)
    }

    fn versions(paths: &[Path]) -> Vec<i64> {
        paths
            .iter()
            .map(|p| p.filename().unwrap()[..20].parse().unwrap())
            .collect()
    }

    #[test]
    fn cleanup_stops_at_the_newest_checkpoint_old_enough() {
        // Newest commit at day 39: the cutoff commit for 30 days is 9, and the newest
        // checkpoint at or below it is 5.
        let (listing, files) = log(40, &[5, 10, 20]);
        let out = expired(&listing, &files, 39 * DAY - 30 * DAY);
        assert_eq!(out.cutoff, Some(5));
        assert_eq!(versions(&out.commits), [0, 1, 2, 3, 4]);
        assert_eq!(versions(&out.others), [0, 1, 2, 3, 4]);
        assert!(out.checkpoints.is_empty());

        // With 9 days, the cutoff commit is 30: checkpoint 20 is the cut.
        let out = expired(&listing, &files, 39 * DAY - 9 * DAY);
        assert_eq!(out.cutoff, Some(20));
        assert_eq!(versions(&out.commits), (0..20).collect::<Vec<_>>());
        assert_eq!(versions(&out.checkpoints), [5, 10]);
    }

    #[test]
    fn nothing_goes_without_a_checkpoint_old_enough() {
        let (listing, files) = log(40, &[35]);
        let out = expired(&listing, &files, 39 * DAY - 30 * DAY);
        assert_eq!(out.cutoff, None);
        assert!(out.paths().is_empty());
        let (listing, files) = log(10, &[]);
        assert!(expired(&listing, &files, 9 * DAY).paths().is_empty());
    }

    #[test]
    fn no_retention_cuts_at_the_newest_checkpoint() {
        let (listing, files) = log(12, &[4, 8]);
        let out = expired(&listing, &files, 11 * DAY);
        assert_eq!(out.cutoff, Some(8));
        assert_eq!(versions(&out.commits), (0..8).collect::<Vec<_>>());
        assert_eq!(versions(&out.checkpoints), [4]);
    }
}
