//! The put-if-absent protocol: write `_delta_log/<version>.json` only if no one has, and
//! find out what happened whatever the store answered.
//!
//! A PUT that lands is a commit. A PUT refused because the version exists is a lost race:
//! the winner is read back and the commits after it are listed in the same round trip,
//! so a writer that fell behind catches up at once. A PUT whose outcome is unknown (an
//! error after the object may have landed) is resolved by reading the version back: our
//! own `txnId` there means we committed, another means we lost.

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde_json::{Map, Value};
use tarn_store::StoreLocation;
use uuid::Uuid;

use super::RetryPolicy;
use super::commit_info::{CommitInfoParts, commit_info, txn_id_of};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::log::{
    CommitFile, LOG_READ_CONCURRENCY, ProposalRef, list_log, log_dir, parse_commit, read_commits,
};
use crate::protocol::Action;
use crate::protocol::names::commit_file_name;

/// A commit another writer made, as read back.
pub(crate) struct Winner {
    pub(crate) version: i64,
    pub(crate) actions: Vec<Action>,
    /// The commit file's modification time.
    pub(crate) file_time: i64,
}

/// What putting a commit found.
pub(crate) enum PutOutcome {
    /// Our commit is in place (written now, or by an earlier attempt whose answer was
    /// lost).
    Committed,
    /// Other writers hold the version: their commits from it up to the newest, in order,
    /// and the group-commit proposals the listing showed.
    Taken(Vec<Winner>, Listed),
}

/// The group-commit proposals a listing showed, and the bodies of those the caller
/// wanted, read beside the commits.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    pub(crate) refs: Vec<ProposalRef>,
    pub(crate) bodies: Vec<(ProposalRef, Bytes)>,
    /// The group-commit claims the listing showed: the version each claims, and where.
    pub(crate) claims: Vec<(i64, Path)>,
    /// Whether a LIST found these (a writer waiting on a claim reads one commit and
    /// lists nothing).
    pub(crate) complete: bool,
}

/// Which listed proposals to read, given the version a commit would take next.
pub(crate) type Wanted<'a> = &'a (dyn Fn(&ProposalRef, i64) -> bool + Sync);

/// Why a commit's PUT gave no outcome.
pub(crate) enum PutError {
    /// The store kept failing; whether the commit landed is unknown.
    Unknown(String),
    /// The store refused the request for good (permissions, no conditional PUT).
    Store(object_store::Error),
}

impl PutError {
    /// The typed error for a commit of `version` with `txn_id` at `root`.
    pub(crate) fn into_error(self, root: &Path, version: i64, txn_id: &str) -> Error {
        match self {
            PutError::Unknown(reason) => Error::CommitStateUnknown {
                version,
                last_version: version,
                txn_id: txn_id.to_string(),
                reason,
            },
            PutError::Store(e) => Error::store(
                tarn_store::StoreOp::Put,
                log_dir(root).join(commit_file_name(version)),
            )(e),
        }
    }
}

/// A commit's body: newline-delimited JSON actions, `commitInfo` first.
pub(crate) fn encode_commit(info: &Action, actions: &[Action]) -> Result<Bytes> {
    let mut body = Vec::new();
    for action in std::iter::once(info).chain(actions) {
        serde_json::to_writer(&mut body, action).map_err(|source| Error::Serialize {
            what: "a commit action".into(),
            source,
        })?;
        body.push(b'\n');
    }
    Ok(Bytes::from(body))
}

/// Reads one commit back; `Ok(None)` when it is not there.
pub(crate) async fn read_back(
    store: &dyn ObjectStore,
    path: &Path,
    version: i64,
) -> std::result::Result<Option<Winner>, String> {
    match store.get(path).await {
        Ok(found) => {
            let file_time = found.meta.last_modified.timestamp_millis();
            let bytes = found.bytes().await.map_err(|e| e.to_string())?;
            // A short or garbled read fails like any failed read, and is retried.
            let actions = parse_commit(version, &bytes).map_err(|e| e.to_string())?;
            Ok(Some(Winner {
                version,
                actions,
                file_time,
            }))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The commits after `version`, read in parallel after one LIST, so a writer that fell
/// behind catches up in one round trip rather than one lost race per version; and the
/// group-commit proposals the same LIST showed, the `wanted` ones read beside the commits
/// unless there are `most` or more (`RetryPolicy::read_at_most`): that many is a crowd,
/// where the writer stands aside and claims, and only the claim's holder reads them.
pub(crate) async fn commits_after(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    wanted: Wanted<'_>,
    most: usize,
) -> Result<(Vec<Winner>, Listed)> {
    let listing = list_log(store, root, version + 1).await?;
    let files: Vec<CommitFile> = (version + 1..)
        .map_while(|v| {
            listing.commits.get(&v).map(|meta| CommitFile {
                version: v,
                meta: meta.clone(),
            })
        })
        .collect();
    let next = files.last().map_or(version, |f| f.version) + 1;
    let mut to_read: Vec<ProposalRef> = listing
        .proposals
        .iter()
        .filter(|r| wanted(r, next))
        .cloned()
        .collect();
    if to_read.len() >= most {
        to_read.clear();
    }
    let (bodies, proposals) = futures::join!(
        read_commits(store, &files),
        read_proposal_bodies(store, to_read)
    );
    let bodies = bodies?;
    let winners = files
        .into_iter()
        .zip(bodies)
        .map(|(f, actions)| Winner {
            version: f.version,
            file_time: f.meta.last_modified.timestamp_millis(),
            actions,
        })
        .collect();
    let listed = Listed {
        refs: listing.proposals,
        bodies: proposals,
        claims: listing.claims,
        complete: true,
    };
    Ok((winners, listed))
}

/// Reads proposals' bodies; one that is gone or unreadable is left out.
async fn read_proposal_bodies(
    store: &dyn ObjectStore,
    refs: Vec<ProposalRef>,
) -> Vec<(ProposalRef, Bytes)> {
    futures::stream::iter(refs)
        .map(|r| async move {
            let bytes = store.get(&r.location).await.ok()?.bytes().await.ok()?;
            Some((r, bytes))
        })
        .buffer_unordered(LOG_READ_CONCURRENCY)
        .filter_map(|r| async move { r })
        .collect()
        .await
}

/// Writes a commit with put-if-absent and finds out what happened, whatever the PUT
/// answered. A lost race reads the winning commit and, in parallel, lists the ones after
/// it; an unknown outcome is resolved by reading the version back, up to
/// `retry.max_outcome_reads` times.
pub(crate) async fn put_commit(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    body: Bytes,
    txn_id: &str,
    retry: &RetryPolicy,
    wanted: Wanted<'_>,
) -> std::result::Result<PutOutcome, PutError> {
    let path = log_dir(root).join(commit_file_name(version));
    let mut last_error = String::new();
    let mut unknown_before = false;
    for round in 0..retry.max_outcome_reads.max(1) {
        if round > 0 {
            tokio::time::sleep(retry.outcome_backoff(round)).await;
        }
        let put = store
            .put_opts(
                &path,
                PutPayload::from_bytes(body.clone()),
                PutOptions::from(PutMode::Create),
            )
            .await;
        let taken = match put {
            Ok(_) => return Ok(PutOutcome::Committed),
            Err(object_store::Error::AlreadyExists { .. }) => true,
            Err(
                e @ (object_store::Error::NotImplemented { .. }
                | object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }),
            ) => return Err(PutError::Store(e)),
            Err(e) => {
                last_error = e.to_string();
                unknown_before = true;
                false
            }
        };
        // Read what holds the version: after a plain lost race it cannot be ours, so the
        // commits after it are listed at the same time.
        let plain_loss = taken && !unknown_before;
        let (found, later) = if plain_loss {
            let (found, later) = futures::join!(
                read_back(store, &path, version),
                commits_after(store, root, version, wanted, retry.read_at_most())
            );
            (found, Some(later))
        } else {
            (read_back(store, &path, version).await, None)
        };
        let winner = match found {
            Ok(Some(w)) => w,
            // Not there: the PUT did not land; the next round puts again.
            Ok(None) => continue,
            Err(e) => {
                last_error = e;
                unknown_before = true;
                continue;
            }
        };
        if txn_id_of(&winner.actions) == Some(txn_id) {
            return Ok(PutOutcome::Committed);
        }
        let later = match later {
            Some(later) => later,
            None => commits_after(store, root, version, wanted, retry.read_at_most()).await,
        };
        let mut winners = vec![winner];
        let mut proposals = Listed::default();
        // The first winner is enough to rebase on; should the listing fail, the next
        // attempt finds the rest.
        if let Ok((later, listed)) = later {
            winners.extend(later);
            proposals = listed;
        }
        return Ok(PutOutcome::Taken(winners, proposals));
    }
    Err(PutError::Unknown(last_error))
}

/// What version 0 of a new table says about itself in its `commitInfo`.
pub(crate) struct Creation {
    /// `CREATE TABLE`, or `CREATE TABLE AS SELECT` when it adds files.
    pub(crate) operation: &'static str,
    pub(crate) parameters: Map<String, Value>,
    pub(crate) metrics: Map<String, Value>,
}

/// Writes version 0 of a new table (its protocol, metadata and any files it starts
/// with, which get their row ids when the table tracks rows) and returns its timestamp
/// and actions (commitInfo included). Fails with [`Error::TableAlreadyExists`] when
/// another writer created it first.
pub(crate) async fn commit_create(
    location: &StoreLocation,
    mut actions: Vec<Action>,
    creation: Creation,
    clock: &dyn Clock,
) -> Result<(i64, Vec<Action>)> {
    let txn_id = Uuid::new_v4().to_string();
    let timestamp = clock.now_ms();
    let mut info = commit_info(CommitInfoParts {
        timestamp,
        operation: creation.operation,
        parameters: &creation.parameters,
        metrics: &creation.metrics,
        read_version: None,
        isolation: None,
        blind_append: false,
        txn_id: &txn_id,
    });
    if super::ict::enabled_in(&actions) == Some(true) {
        super::ict::stamp(&mut info, timestamp);
    }
    if actions.iter().any(|a| matches!(a, Action::Add(_))) {
        // Row ids start above an empty table's mark.
        let definition = actions
            .iter()
            .filter(|a| matches!(a, Action::Protocol(_) | Action::Metadata(_)))
            .cloned()
            .collect();
        let empty = crate::snapshot::Snapshot::new_table(location.clone(), timestamp, definition)?;
        if let Some(preserved) = super::row_tracking::assign(&empty, &mut actions, 0, None)? {
            super::row_tracking::tag(&mut info, preserved);
        }
    }
    let actions = &actions;
    let body = encode_commit(&info, actions)?;
    let root = location.root();
    match put_commit(
        location.store().as_ref(),
        root,
        0,
        body,
        &txn_id,
        &RetryPolicy::default(),
        &|_, _| false,
    )
    .await
    {
        Ok(PutOutcome::Committed) => {
            let mut all = vec![info];
            all.extend_from_slice(actions);
            Ok((timestamp, all))
        }
        Ok(PutOutcome::Taken(..)) => Err(Error::TableAlreadyExists {
            url: location.url().to_string(),
            version: 0,
        }),
        Err(e) => Err(e.into_error(root, 0, &txn_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::log_dir;
    use crate::protocol::names::{PROPOSALS_DIR, proposal_file_name};
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn a_catch_up_reads_the_wanted_proposals_unless_a_crowd_of_them_waits() {
        let store = InMemory::new();
        let root = Path::from("t");
        let commit =
            b"{\"commitInfo\":{\"timestamp\":1,\"operation\":\"WRITE\",\"txnId\":\"w\"}}\n";
        store
            .put(
                &log_dir(&root).join(commit_file_name(1)),
                PutPayload::from_static(commit),
            )
            .await
            .unwrap();
        for i in 0..3 {
            let name = proposal_file_name(0, 1_790_000_000_000 + i, &format!("p{i}"));
            let path = log_dir(&root).join(PROPOSALS_DIR).join(name);
            store
                .put(&path, PutPayload::from_static(b"{}\n"))
                .await
                .unwrap();
        }
        let all: Wanted<'_> = &|_, _| true;
        let (winners, listed) = commits_after(&store, &root, 0, all, 4).await.unwrap();
        assert_eq!(winners.len(), 1);
        assert_eq!((listed.refs.len(), listed.bodies.len()), (3, 3));
        // Three waiting, and a crowd from three on: listed, none read.
        let (winners, listed) = commits_after(&store, &root, 0, all, 3).await.unwrap();
        assert_eq!(winners.len(), 1);
        assert_eq!((listed.refs.len(), listed.bodies.len()), (3, 0));
    }
}
