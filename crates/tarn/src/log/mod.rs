//! Reading the transaction log: listing `_delta_log/`, choosing the checkpoint and commits a
//! snapshot needs (a [`LogSegment`]), and parsing commits and checkpoints into actions.

pub(crate) mod checkpoint;
pub(crate) mod checkpoint_write;
pub(crate) mod cleanup;
mod file_actions;
mod projected;
#[cfg(test)]
mod robustness;
pub(crate) mod versions;

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::{Path, PathPart};
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::protocol::Action;
use crate::protocol::actions::ActionLine;
use crate::protocol::names::{
    CLAIMS_DIR, CheckpointKind, DELTA_LOG_DIR, LAST_CHECKPOINT, LogFileKind, PROPOSALS_DIR,
    commit_file_name, parse_claim_file_name, parse_log_file_name, parse_proposal_file_name,
    version_prefix,
};

/// How many log objects are fetched at once.
pub(crate) const LOG_READ_CONCURRENCY: usize = 32;

/// The `_delta_log` folder of a table root.
pub(crate) fn log_dir(root: &Path) -> Path {
    root.clone().join(DELTA_LOG_DIR)
}

/// A commit file of the log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommitFile {
    /// Its version.
    pub(crate) version: i64,
    /// The object, with its modification time.
    pub(crate) meta: ObjectMeta,
}

/// The files of one complete checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckpointFiles {
    /// The version it captures.
    pub(crate) version: i64,
    /// Its kind (for multi-part checkpoints, of the first part).
    pub(crate) kind: CheckpointKind,
    /// The files, parts in order.
    pub(crate) files: Vec<ObjectMeta>,
}

/// Everything the log folder holds, by version, from one listing.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogListing {
    /// Commits by version.
    pub(crate) commits: BTreeMap<i64, ObjectMeta>,
    /// Complete checkpoints by version (one per version).
    pub(crate) checkpoints: BTreeMap<i64, CheckpointFiles>,
    /// Group-commit proposals waiting in `_tarn_proposals/`, whatever their base.
    pub(crate) proposals: Vec<ProposalRef>,
    /// Group-commit claims in `_tarn_claims/`: the version each claims, and the object.
    pub(crate) claims: Vec<(i64, Path)>,
}

/// How many group-commit proposals the last listing of a table's log showed, kept with
/// the handle's caches: with many waiting, a commit claims its version rather than read
/// them all (`txn::claim`).
#[derive(Debug, Default)]
pub(crate) struct ListedProposals(pub(crate) std::sync::atomic::AtomicUsize);

/// A group-commit proposal seen in a listing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProposalRef {
    /// The version its writer read up to: it may join versions `base + 1` to
    /// `base + window`.
    pub(crate) base: i64,
    /// When its writer began to commit, in milliseconds.
    pub(crate) stamp: i64,
    /// Its writer's `txnId`.
    pub(crate) txn_id: String,
    /// The object.
    pub(crate) location: Path,
}

impl LogListing {
    /// The newest version the listing shows, if any.
    pub(crate) fn latest_version(&self) -> Option<i64> {
        let commit = self.commits.keys().next_back().copied();
        let checkpoint = self.checkpoints.keys().next_back().copied();
        commit.max(checkpoint)
    }
}

/// Lists the log folder from `start` (inclusive) in one LIST, keeping direct children only
/// (V2 sidecars live in a subfolder), and groups what it finds by version.
pub(crate) async fn list_log(
    store: &dyn ObjectStore,
    root: &Path,
    start: i64,
) -> Result<LogListing> {
    let dir = log_dir(root);
    let listed: Vec<ObjectMeta> = if start > 0 {
        // The offset is exclusive and every file of `start` sorts after its bare prefix.
        let offset = dir.clone().join(version_prefix(start));
        store
            .list_with_offset(Some(&dir), &offset)
            .try_collect()
            .await
    } else {
        store.list(Some(&dir)).try_collect().await
    }
    .map_err(Error::store(tarn_store::StoreOp::List, &dir))?;
    let mut listing = group_listing(&dir, listed, start);
    fill_gaps(store, &dir, &mut listing, start).await;
    Ok(listing)
}

/// Most missing commits a listing's gaps are looked up for, one HEAD each.
const MAX_GAP_HEADS: usize = 64;

/// Fills the gaps a LIST that raced commits can leave. A LIST is no snapshot: a local
/// directory is read in hash order and S3 page by page, so under a crowd of writers a
/// listing can show a version and miss one before it that was written earlier. Each
/// commit missing between `floor` (the listing's start, or just past its newest
/// checkpoint, below which commits may be cleaned up) and the newest listed one is looked
/// up with a HEAD, which does not race; one truly missing stays a gap, for the reader to
/// report as [`Error::VersionGap`].
async fn fill_gaps(store: &dyn ObjectStore, dir: &Path, listing: &mut LogListing, start: i64) {
    let Some(&top) = listing.commits.keys().next_back() else {
        return;
    };
    let floor = listing
        .checkpoints
        .keys()
        .next_back()
        .map_or(start, |c| start.max(c.saturating_add(1)));
    let missing: Vec<i64> = (floor..top)
        .filter(|v| !listing.commits.contains_key(v))
        .take(MAX_GAP_HEADS + 1)
        .collect();
    if missing.is_empty() || missing.len() > MAX_GAP_HEADS {
        return;
    }
    let heads = futures::future::join_all(missing.iter().map(|v| {
        let path = dir.clone().join(commit_file_name(*v));
        async move { store.head(&path).await }
    }))
    .await;
    for (v, head) in missing.into_iter().zip(heads) {
        if let Ok(meta) = head {
            listing.commits.insert(v, meta);
        }
    }
}

/// How many objects one LIST response holds at most on S3 (and MinIO, GCS, Azure: at
/// least as many).
pub(crate) const LIST_PAGE: usize = 1000;

/// Lists the whole log folder when it fits in one LIST response: `None` when it holds
/// [`LIST_PAGE`] objects or more (the rest would cost more round trips, one after another)
/// or when the LIST fails (the caller's hinted listing reports errors).
///
/// Run beside the `_last_checkpoint` GET, it saves the LIST that would follow the hint: a
/// cold open of a table whose log is short takes two round trips instead of three.
pub(crate) async fn list_whole_log_if_short(
    store: &dyn ObjectStore,
    root: &Path,
) -> Option<LogListing> {
    let dir = log_dir(root);
    let listed: Vec<ObjectMeta> = store
        .list(Some(&dir))
        .take(LIST_PAGE)
        .try_collect()
        .await
        .ok()?;
    if listed.len() >= LIST_PAGE {
        return None;
    }
    let mut listing = group_listing(&dir, listed, 0);
    fill_gaps(store, &dir, &mut listing, 0).await;
    Some(listing)
}

/// Groups the objects of a log listing by version, from `start` on.
fn group_listing(dir: &Path, listed: Vec<ObjectMeta>, start: i64) -> LogListing {
    let mut listing = LogListing::default();
    let mut parts: BTreeMap<(i64, u32), BTreeMap<u32, ObjectMeta>> = BTreeMap::new();
    let depth = dir.parts_count() + 1;
    for meta in listed {
        if meta.location.parts_count() == depth + 1
            && let Some(proposal) = proposal_ref(dir, &meta.location)
        {
            listing.proposals.push(proposal);
            continue;
        }
        if meta.location.parts_count() == depth + 1
            && let Some(version) = claim_version(dir, &meta.location)
        {
            listing.claims.push((version, meta.location));
            continue;
        }
        if meta.location.parts_count() != depth {
            continue;
        }
        let Some(name) = meta.location.filename().and_then(parse_log_file_name) else {
            continue;
        };
        if name.version < start {
            continue;
        }
        match name.kind {
            LogFileKind::Commit => {
                listing.commits.insert(name.version, meta);
            }
            LogFileKind::Checkpoint(CheckpointKind::MultiPart { part, parts: n }) => {
                parts
                    .entry((name.version, n))
                    .or_default()
                    .insert(part, meta);
            }
            LogFileKind::Checkpoint(kind) => {
                // Prefer a classic checkpoint over a V2 one of the same version only for
                // determinism; both hold the same state.
                let entry = CheckpointFiles {
                    version: name.version,
                    kind,
                    files: vec![meta],
                };
                match listing.checkpoints.get(&name.version) {
                    Some(existing) if existing.kind <= entry.kind => {}
                    _ => {
                        listing.checkpoints.insert(name.version, entry);
                    }
                }
            }
            LogFileKind::Other => {}
        }
    }
    for ((version, n), found) in parts {
        // A multi-part checkpoint counts only when every part is there.
        if found.len() == n as usize && !listing.checkpoints.contains_key(&version) {
            listing.checkpoints.insert(
                version,
                CheckpointFiles {
                    version,
                    kind: CheckpointKind::MultiPart { part: 1, parts: n },
                    files: found.into_values().collect(),
                },
            );
        }
    }
    listing
}

/// The proposal at `location`, when it is one: `<dir>/_tarn_proposals/<name>`.
fn proposal_ref(dir: &Path, location: &Path) -> Option<ProposalRef> {
    let name = name_in(dir, location, PROPOSALS_DIR)?;
    let (base, stamp, txn_id) = parse_proposal_file_name(name.as_ref())?;
    Some(ProposalRef {
        base,
        stamp,
        txn_id,
        location: location.clone(),
    })
}

/// The version the claim at `location` claims, when it is one: `<dir>/_tarn_claims/<v>`.
fn claim_version(dir: &Path, location: &Path) -> Option<i64> {
    parse_claim_file_name(name_in(dir, location, CLAIMS_DIR)?.as_ref())
}

/// The name of `location` when it is `<dir>/<folder>/<name>`.
fn name_in<'a>(dir: &Path, location: &'a Path, folder: &str) -> Option<PathPart<'a>> {
    let mut parts = location.parts().skip(dir.parts_count());
    if parts.next()?.as_ref() != folder {
        return None;
    }
    parts.next()
}

/// `_last_checkpoint`: the hint of the newest checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct LastCheckpointHint {
    /// The checkpoint's version.
    pub(crate) version: i64,
    /// Number of parts, for multi-part checkpoints.
    #[serde(default)]
    pub(crate) parts: Option<u32>,
}

/// Reads `_last_checkpoint`. A missing, empty or malformed hint gives `None`: the hint is
/// an optimisation, and a reader falls back to listing the whole log.
pub(crate) async fn read_last_checkpoint(
    store: &dyn ObjectStore,
    root: &Path,
) -> Result<Option<LastCheckpointHint>> {
    let path = log_dir(root).join(LAST_CHECKPOINT);
    let bytes = match store.get(&path).await {
        Ok(result) => result
            .bytes()
            .await
            .map_err(Error::store(tarn_store::StoreOp::Get, &path))?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(Error::store(tarn_store::StoreOp::Get, &path)(e)),
    };
    Ok(serde_json::from_slice::<LastCheckpointHint>(&bytes)
        .ok()
        .filter(|h| h.version >= 0))
}

/// The log files a snapshot at `version` is built from.
///
/// Invariant: `commits` are exactly the versions `checkpoint.version + 1 ..= version` (or
/// `0 ..= version` without a checkpoint), in ascending order.
#[derive(Debug, Clone)]
pub(crate) struct LogSegment {
    /// The snapshot's version.
    pub(crate) version: i64,
    /// The checkpoint to start from.
    pub(crate) checkpoint: Option<CheckpointFiles>,
    /// The commits after it.
    pub(crate) commits: Vec<CommitFile>,
}

impl LogSegment {
    /// Chooses the newest complete checkpoint at or below `version` (skipping any in
    /// `exclude`, for checkpoints found corrupt) and the commits after it, checking that
    /// they are contiguous.
    pub(crate) fn from_listing(
        listing: &LogListing,
        version: i64,
        exclude: &[i64],
    ) -> Result<Self> {
        let checkpoint = listing
            .checkpoints
            .range(..=version)
            .rev()
            .find(|(v, _)| !exclude.contains(v))
            .map(|(_, c)| c.clone());
        let first = checkpoint.as_ref().map_or(0, |c| c.version + 1);
        let mut commits = Vec::new();
        for v in first..=version {
            match listing.commits.get(&v) {
                Some(meta) => commits.push(CommitFile {
                    version: v,
                    meta: meta.clone(),
                }),
                None => {
                    let found: Vec<i64> = listing
                        .commits
                        .range(v.saturating_sub(2)..=v.saturating_add(2))
                        .map(|(k, _)| *k)
                        .collect();
                    if checkpoint.is_none() && v == 0 && !listing.commits.is_empty() {
                        let oldest = listing.checkpoints.keys().next().copied();
                        return Err(Error::VersionNotFound {
                            version,
                            reason: format!(
                                "it is older than the log keeps: commits before it were \
                                 cleaned up (delta.logRetentionDuration) and no checkpoint at \
                                 or below it is left; the oldest version readable is {}",
                                oldest.map_or("unknown".to_string(), |c| c.to_string())
                            ),
                        });
                    }
                    return Err(Error::VersionGap { missing: v, found });
                }
            }
        }
        Ok(Self {
            version,
            checkpoint,
            commits,
        })
    }
}

/// Reads and parses the commit of `version`.
pub(crate) async fn read_commit(
    store: &dyn ObjectStore,
    commit: &CommitFile,
) -> Result<Vec<Action>> {
    let bytes = store
        .get(&commit.meta.location)
        .await
        .map_err(Error::store(
            tarn_store::StoreOp::Get,
            &commit.meta.location,
        ))?
        .bytes()
        .await
        .map_err(Error::store(
            tarn_store::StoreOp::Get,
            &commit.meta.location,
        ))?;
    parse_commit(commit.version, &bytes)
}

/// Reads several commits concurrently, keeping their order.
pub(crate) async fn read_commits(
    store: &dyn ObjectStore,
    commits: &[CommitFile],
) -> Result<Vec<Vec<Action>>> {
    futures::stream::iter(commits.iter().cloned())
        // Owned items and boxed futures: a future borrowing from the closure's argument is
        // not provably `Send` for every lifetime, and callers could not spawn theirs.
        .map(|c| async move { read_commit(store, &c).await }.boxed())
        .buffered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await
}

/// Parses a commit: newline-delimited JSON, one action per line.
///
/// Fails with [`Error::InvalidCommit`] naming the line for malformed JSON (a truncated
/// last line included) and for an empty commit.
pub(crate) fn parse_commit(version: i64, bytes: &Bytes) -> Result<Vec<Action>> {
    let mut actions = Vec::new();
    let mut lines = 0;
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        lines += 1;
        let parsed: ActionLine =
            serde_json::from_slice(line).map_err(|e| Error::InvalidCommit {
                version,
                line: i + 1,
                reason: e.to_string(),
            })?;
        actions.extend(parsed.into_actions());
    }
    if lines == 0 {
        return Err(Error::InvalidCommit {
            version,
            line: 1,
            reason: "the commit is empty".into(),
        });
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_parse_line_by_line_and_name_bad_lines() {
        let ok = Bytes::from_static(
            b"{\"commitInfo\":{\"timestamp\":1}}\n{\"txn\":{\"appId\":\"a\",\"version\":3}}\n",
        );
        assert_eq!(parse_commit(0, &ok).unwrap().len(), 2);
        let truncated =
            Bytes::from_static(b"{\"commitInfo\":{\"timestamp\":1}}\n{\"add\":{\"path\":\"x\",");
        let err = parse_commit(4, &truncated).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidCommit {
                    version: 4,
                    line: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(matches!(
            parse_commit(1, &Bytes::new()),
            Err(Error::InvalidCommit { .. })
        ));
        assert!(matches!(
            parse_commit(1, &Bytes::from_static(b"[1]")),
            Err(Error::InvalidCommit { .. })
        ));
    }

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(format!("t/_delta_log/{name}")),
            last_modified: chrono::Utc::now(),
            size: 1,
            e_tag: None,
            version: None,
        }
    }

    fn listing(names: &[&str]) -> LogListing {
        let mut l = LogListing::default();
        for n in names {
            let parsed = parse_log_file_name(n).unwrap();
            match parsed.kind {
                LogFileKind::Commit => {
                    l.commits.insert(parsed.version, meta(n));
                }
                LogFileKind::Checkpoint(kind) => {
                    l.checkpoints.insert(
                        parsed.version,
                        CheckpointFiles {
                            version: parsed.version,
                            kind,
                            files: vec![meta(n)],
                        },
                    );
                }
                LogFileKind::Other => {}
            }
        }
        l
    }

    #[test]
    fn segments_start_at_the_newest_usable_checkpoint_and_need_contiguous_commits() {
        let l = listing(&[
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000002.json",
            "00000000000000000002.checkpoint.parquet",
            "00000000000000000003.json",
        ]);
        let s = LogSegment::from_listing(&l, 3, &[]).unwrap();
        assert_eq!(s.checkpoint.as_ref().map(|c| c.version), Some(2));
        assert_eq!(
            s.commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            vec![3]
        );
        let s = LogSegment::from_listing(&l, 1, &[]).unwrap();
        assert!(s.checkpoint.is_none());
        let s = LogSegment::from_listing(&l, 3, &[2]).unwrap();
        assert_eq!(s.commits.len(), 4);

        let gap = listing(&["00000000000000000000.json", "00000000000000000002.json"]);
        let err = LogSegment::from_listing(&gap, 2, &[]).unwrap_err();
        assert!(matches!(err, Error::VersionGap { missing: 1, .. }), "{err}");
    }
}
