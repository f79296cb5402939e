//! Reading what a group commit carries: the commits after the proposals' bases and the
//! proposals themselves, in parallel, leaving out what cannot be read.

use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::proposal::Proposal;
use crate::log::{LOG_READ_CONCURRENCY, ProposalRef, log_dir, parse_commit};
use crate::protocol::Action;
use crate::protocol::names::commit_file_name;

/// Reads commits by version; one that cannot be read is left out.
pub(super) async fn read_versions(
    store: &dyn ObjectStore,
    root: &Path,
    versions: Vec<i64>,
) -> Vec<(i64, Vec<Action>)> {
    let dir = log_dir(root);
    futures::stream::iter(versions)
        .map(|v| {
            let path = dir.clone().join(commit_file_name(v));
            async move {
                let bytes = store.get(&path).await.ok()?.bytes().await.ok()?;
                parse_commit(v, &bytes).ok().map(|a| (v, a))
            }
        })
        .buffer_unordered(LOG_READ_CONCURRENCY)
        .filter_map(|r| async move { r })
        .collect()
        .await
}

/// Reads proposals; one that is gone or malformed reads as `None`. Stragglers are left
/// out (unread, so a later commit may still read them): once half the reads have
/// answered, the rest get as long again, since a commit that waits for the slowest of
/// many GETs pays the tail of the store's latency on every version.
pub(super) async fn read_proposals(
    store: &dyn ObjectStore,
    refs: Vec<ProposalRef>,
) -> Vec<(Path, Option<(Arc<Proposal>, usize)>)> {
    let wanted = refs.len();
    let started = tokio::time::Instant::now();
    let mut reads = futures::stream::iter(refs)
        .map(|r| async move {
            let read = async {
                let bytes = store.get(&r.location).await.ok()?.bytes().await.ok()?;
                let size = bytes.len();
                Proposal::decode(r.base, &bytes)
                    .ok()
                    .map(|p| (Arc::new(p), size))
            };
            (r.location.clone(), read.await)
        })
        .buffer_unordered(LOG_READ_CONCURRENCY);
    let mut read = Vec::with_capacity(wanted);
    let mut deadline = None;
    loop {
        let next = match deadline {
            Some(at) => match tokio::time::timeout_at(at, reads.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => reads.next().await,
        };
        let Some(one) = next else { break };
        read.push(one);
        if deadline.is_none() && read.len() * 2 >= wanted {
            deadline = Some(started + started.elapsed() * 2);
        }
    }
    read
}
