//! Versions and their timestamps: commit times made monotonic as Delta does, the
//! in-commit timestamp of a commit, and the versions a log still holds (for history,
//! time travel and creation checks).

use std::collections::BTreeMap;

use tarn_store::StoreLocation;

use super::{CommitFile, LogListing, list_log, read_commits};
use crate::error::Result;
use crate::protocol::Action;

/// Commit modification times by version, adjusted so that they increase with the version
/// (a commit older than its predecessor counts as 1 ms after it), as Delta does.
pub(crate) fn commit_timestamps(listing: &LogListing) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    let mut previous = i64::MIN;
    for (version, meta) in &listing.commits {
        let ts = meta
            .last_modified
            .timestamp_millis()
            .max(previous.saturating_add(1));
        out.insert(*version, ts);
        previous = ts;
    }
    out
}

/// The in-commit timestamp a commit's `commitInfo` carries, if any.
pub(crate) fn in_commit_timestamp(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(ci) => ci.in_commit_timestamp,
        _ => None,
    })
}

/// Lists every version the log still holds, with commit timestamps; used for history.
pub(crate) async fn list_versions(location: &StoreLocation) -> Result<BTreeMap<i64, i64>> {
    let listing = list_log(location.store().as_ref(), location.root(), 0).await?;
    Ok(commit_timestamps(&listing))
}

/// Lists every version the log still holds with its timestamp: from `ict_since` on (the
/// version in-commit timestamps were turned on), the stamp inside the commit (the
/// commits read several at once), before it the commit time.
///
/// Fails when the log cannot be listed or a commit read.
pub(crate) async fn list_stamped_versions(
    location: &StoreLocation,
    ict_since: Option<i64>,
) -> Result<BTreeMap<i64, i64>> {
    let listing = list_log(location.store().as_ref(), location.root(), 0).await?;
    let mut out = commit_timestamps(&listing);
    if let Some(since) = ict_since {
        let commits: Vec<CommitFile> = listing
            .commits
            .range(since..)
            .map(|(v, meta)| CommitFile {
                version: *v,
                meta: meta.clone(),
            })
            .collect();
        let bodies = read_commits(location.store().as_ref(), &commits).await?;
        for (commit, actions) in commits.iter().zip(bodies) {
            if let Some(stamp) = in_commit_timestamp(&actions) {
                out.insert(commit.version, stamp);
            }
        }
    }
    Ok(out)
}

/// The newest version the log holds, if it holds any.
pub(crate) async fn latest_version(location: &StoreLocation) -> Result<Option<i64>> {
    let listing = list_log(location.store().as_ref(), location.root(), 0).await?;
    Ok(listing.latest_version())
}
