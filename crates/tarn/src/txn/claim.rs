//! Claims: under contention, one writer per version reads the pending group-commit
//! proposals and commits them, while the others stand aside and watch for the version.
//!
//! When every contender races for every version, each reads every pending proposal (it
//! may win, and a winner carries only what it has read): O(writers) GETs per commit. A
//! writer whose proposal is out instead claims the next version with a put-if-absent of
//! `_delta_log/_tarn_claims/<version>`. The one whose claim lands lists and reads the
//! proposals and puts the commit; the others poll for the version's commit with one GET
//! at a time, and find there whether it carried them.
//!
//! A claim is advice, never a lock: the commit is still a put-if-absent of
//! `<version>.json`, so whoever writes it, the log stays exactly as valid. A claimer that
//! crashed or stalls is waited out: after [`PATIENCE`] round trips without the version, and
//! at least 50 ms per proposal waiting (the claimer's work grows with them), the waiters
//! race for it as writers without claims do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};

use super::group::{self, MAX_GROUP};
use super::put::{Listed, PutOutcome, Wanted, Winner, commits_after, read_back};
use crate::log::ProposalRef;
use crate::log::log_dir;
use crate::protocol::names::{CLAIMS_DIR, claim_file_name, commit_file_name};
use crate::snapshot::Snapshot;

/// Store round trips a waiter gives a claimed version before its claimer counts as gone
/// (24 polls, when each was a pause and a GET of a round trip each).
pub(crate) const PATIENCE: u32 = 48;
/// The shortest and longest wait between two polls.
const POLL_FLOOR: Duration = Duration::from_millis(1);
const POLL_CEILING: Duration = Duration::from_millis(500);
/// Waiters per round trip that a crowd polls, in all: a waiter among `n` stretches its
/// polls towards `n / POLLERS` round trips apart, so the GETs of a crowd waiting on one
/// claimer stay near this many per round trip however many wait.
const POLLERS: usize = 16;
/// Proposals waiting below which every claimant lists the log beside its claim; from
/// this many on, only the claim's holder lists. At 200 writers on MinIO, claimants
/// listing a log folder of some 200 proposals made 130 LISTs per version.
const LIST_BESIDE_CLAIM_BELOW: usize = 32;
/// Versions a claim outlives its commit before writers other than its holder delete it.
/// The holder deletes its claim right after its commit, so a younger claim a listing
/// shows is most likely on its way out; every writer that listed one deleting it too
/// cost some 50 DELETEs of one key per version at 200 writers on MinIO. An older one is
/// a crashed or failed holder's leftover.
const LEFTOVER_CLAIM_AGE: i64 = 4;
/// How long at least a waiter gives the claimer per proposal waiting (up to a group's
/// worth), beyond [`PATIENCE`] round trips: the claimer reads and checks them before it puts,
/// which on a loaded machine takes far longer than a few round trips (0.3-4 s for 128
/// among 200 processes on 2 cores). Waiters that gave up sooner all read and checked the
/// same proposals at once, and such a crowd spent 6-30 s per version.
const PATIENCE_PER_PROPOSAL: Duration = Duration::from_millis(50);

/// Where the claim of `version` lives.
pub(crate) fn claim_path(root: &Path, version: i64) -> Path {
    log_dir(root)
        .join(CLAIMS_DIR)
        .join(claim_file_name(version))
}

/// What claiming a version found.
pub(crate) struct Claim {
    /// Whether this writer holds the claim. A PUT whose outcome is unknown counts as
    /// held: should it not have landed, another writer may claim too, and the two race
    /// for the commit as writers without claims do, which is always safe.
    pub(crate) held: bool,
    /// How long the claim's PUT took: the pace of the store, which the polls follow.
    pub(crate) round_trip: Duration,
}

/// Claims `version` for `txn_id` with put-if-absent.
pub(crate) async fn take(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    txn_id: &str,
) -> Claim {
    let started = Instant::now();
    let put = store
        .put_opts(
            &claim_path(root, version),
            PutPayload::from_bytes(Bytes::from(txn_id.to_string())),
            PutOptions::from(PutMode::Create),
        )
        .await;
    Claim {
        held: !matches!(put, Err(object_store::Error::AlreadyExists { .. })),
        round_trip: started.elapsed(),
    }
}

/// One step of a writer whose proposal is out, at `version` (its base is the version
/// before): claim it, and if the claim is this writer's, catch up with the log and read
/// the proposals it will carry (`wanted`); if not, wait for the version's commit, or,
/// once out of patience, catch up as the claimer would. Returns what was found, and
/// whether this writer is now the one to put `version`. A failed catch-up finds nothing:
/// the PUT that follows finds out. `pending` is how many proposals the last listing
/// showed waiting: a waiter gives the claimer longer to carry more.
pub(crate) async fn claim_or_wait(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    txn_id: &str,
    wanted: Wanted<'_>,
    pending: usize,
) -> (PutOutcome, bool) {
    // Under a light crowd the listing goes beside the claim, so a claimer reads the
    // proposals one round trip after its claim lands, and a writer that lost the claim
    // drops it. Under a heavy one, every claimant listing would cost the store a LIST per
    // writer per version: only the holder lists, a round trip later.
    let beside = pending < LIST_BESIDE_CLAIM_BELOW;
    let (claim, listing) = if beside {
        let (claim, listing) = futures::join!(
            take(store, root, version, txn_id),
            commits_after(store, root, version - 1, &|_, _| false, usize::MAX)
        );
        (claim, Some(listing))
    } else {
        (take(store, root, version, txn_id).await, None)
    };
    // A writer behind the log catches up at once, whoever holds the claim.
    if let Some(Ok((winners, _))) = &listing
        && !winners.is_empty()
    {
        let (winners, listed) = listing.and_then(Result::ok).unwrap_or_default();
        return (PutOutcome::Taken(winners, listed), false);
    }
    if !claim.held
        && let Some(winner) = await_commit(
            store,
            root,
            version,
            claim.round_trip,
            PATIENCE_PER_PROPOSAL.saturating_mul(pending.min(MAX_GROUP) as u32),
            pending,
        )
        .await
    {
        return (PutOutcome::Taken(vec![winner], Listed::default()), false);
    }
    let listing = match listing {
        Some(Ok(found)) if claim.held => Ok(found),
        None if claim.held => {
            commits_after(store, root, version - 1, &|_, _| false, usize::MAX).await
        }
        // Out of patience, the listing beside the claim is old: list again.
        _ => commits_after(store, root, version - 1, wanted, usize::MAX).await,
    };
    let (winners, listed) = listing.unwrap_or_default();
    (PutOutcome::Taken(winners, listed), true)
}

/// Waits for the commit of `version`, reading it as soon as it is there: one GET per
/// poll, the first a store round trip after the claim, the next ones half as far apart
/// again each time, up to `crowd / POLLERS` round trips (the first waiter to see the
/// commit claims the next version, so a crowd learns of it as soon as one of them polls).
/// `None` once [`PATIENCE`] round trips have passed without it, and at least `at_least`
/// (the claimer is gone or stalled). A failed read counts as a poll that found nothing.
pub(crate) async fn await_commit(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    round_trip: Duration,
    at_least: Duration,
    crowd: usize,
) -> Option<Winner> {
    let path = log_dir(root).join(commit_file_name(version));
    let pause = round_trip.clamp(POLL_FLOOR, POLL_CEILING);
    let spread = pause
        .saturating_mul(u32::try_from(crowd / POLLERS).unwrap_or(u32::MAX).max(1))
        .min(POLL_CEILING)
        .max(pause);
    let patience = pause.saturating_mul(PATIENCE).max(at_least);
    let started = Instant::now();
    let mut wait = pause;
    while started.elapsed() < patience {
        tokio::time::sleep(wait).await;
        if let Ok(Some(winner)) = read_back(store, &path, version).await {
            return Some(winner);
        }
        wait = wait.saturating_mul(3).div_f64(2.0).min(spread);
    }
    None
}

/// Deletes, in the background, a writer's decided proposal (`published`), the listed
/// ones whose window has passed at `latest`, and claims: the writer's own (`claims.0`)
/// and those it listed (`claims.1`) that are [`LEFTOVER_CLAIM_AGE`] versions old.
pub(crate) fn forget_decided(
    snapshot: &Snapshot,
    published: &Option<(i64, Path)>,
    listed: &[ProposalRef],
    claims: (Option<i64>, &[(i64, Path)]),
    latest: i64,
) {
    let mut paths = group::lapsed(listed, latest);
    if let Some((_, path)) = published {
        paths.push(path.clone());
    }
    paths.extend(claims_to_delete(snapshot.location().root(), claims, latest));
    group::forget(Arc::clone(snapshot.location().store()), paths);
}

/// The listed claims of versions at least [`LEFTOVER_CLAIM_AGE`] behind `latest`: their
/// holders crashed or failed before deleting them, as a live holder deletes its own right
/// after its commit.
pub(crate) fn leftover_claims(listed: &[(i64, Path)], latest: i64) -> Vec<Path> {
    listed
        .iter()
        .filter(|(v, _)| *v <= latest - LEFTOVER_CLAIM_AGE)
        .map(|(_, p)| p.clone())
        .collect()
}

/// The claims a writer deletes once decided at `latest`: its own, and the listed ones
/// whose holder has had [`LEFTOVER_CLAIM_AGE`] versions to delete them.
fn claims_to_delete(
    root: &Path,
    (own, listed): (Option<i64>, &[(i64, Path)]),
    latest: i64,
) -> Vec<Path> {
    let mut paths: Vec<Path> = own.map(|v| claim_path(root, v)).into_iter().collect();
    paths.extend(
        listed
            .iter()
            .filter(|(v, _)| *v <= latest - LEFTOVER_CLAIM_AGE && Some(*v) != own)
            .map(|(_, p)| p.clone()),
    );
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    /// Puts a commit of `version` by writer `a` after `after`, as its claimer would.
    async fn commit_later(store: &dyn ObjectStore, root: &Path, version: i64, after: Duration) {
        tokio::time::sleep(after).await;
        let body = Bytes::from_static(
            b"{\"commitInfo\":{\"timestamp\":1,\"operation\":\"WRITE\",\"txnId\":\"a\"}}\n",
        );
        let path = log_dir(root).join(commit_file_name(version));
        store
            .put(&path, PutPayload::from_bytes(body))
            .await
            .unwrap();
    }

    #[test]
    fn a_writer_deletes_its_own_claim_and_only_leftovers_of_others() {
        let root = Path::from("t");
        let listed: Vec<(i64, Path)> = (3..=10).map(|v| (v, claim_path(&root, v))).collect();
        // Decided at 10, holding 9: its own, and the listed claims of 6 and older.
        let paths = claims_to_delete(&root, (Some(9), &listed), 10);
        let versions: Vec<i64> = paths
            .iter()
            .map(|p| crate::protocol::names::parse_claim_file_name(p.filename().unwrap()).unwrap())
            .collect();
        assert_eq!(versions, vec![9, 3, 4, 5, 6]);
        // Holding none: only the leftovers.
        assert_eq!(claims_to_delete(&root, (None, &listed), 7).len(), 1);
    }

    #[test]
    fn claim_names_round_trip_and_refuse_others() {
        let path = claim_path(&Path::from("t"), 42);
        assert_eq!(
            path.as_ref(),
            "t/_delta_log/_tarn_claims/00000000000000000042"
        );
        assert_eq!(
            crate::protocol::names::parse_claim_file_name(path.filename().unwrap()),
            Some(42)
        );
        assert_eq!(crate::protocol::names::parse_claim_file_name("42"), None);
        assert_eq!(
            crate::protocol::names::parse_claim_file_name("0000000000000000004x"),
            None
        );
    }

    #[tokio::test]
    async fn one_writer_holds_a_version_and_the_others_wait_for_its_commit() {
        let store = InMemory::new();
        let root = Path::from("t");
        assert!(take(&store, &root, 3, "a").await.held);
        assert!(!take(&store, &root, 3, "b").await.held);
        assert!(take(&store, &root, 4, "b").await.held);

        let waiting = await_commit(
            &store,
            &root,
            3,
            Duration::from_millis(2),
            Duration::ZERO,
            1,
        );
        let commit = commit_later(&store, &root, 3, Duration::from_millis(10));
        let (found, ()) = futures::join!(waiting, commit);
        assert_eq!(found.expect("the commit, once put").version, 3);
        // No commit of version 9: the waiter gives up after its patience, and not before
        // the time it was given.
        assert!(
            await_commit(
                &store,
                &root,
                9,
                Duration::from_millis(1),
                Duration::ZERO,
                1
            )
            .await
            .is_none()
        );
        let started = Instant::now();
        let at_least = Duration::from_millis(150);
        assert!(
            await_commit(&store, &root, 9, Duration::from_millis(1), at_least, 1)
                .await
                .is_none()
        );
        assert!(started.elapsed() >= at_least);
    }

    #[tokio::test]
    async fn a_waiter_in_a_crowd_polls_less_often() {
        let polls = |crowd: usize| async move {
            let store = tarn_store::CountingStore::new(InMemory::new());
            let counter = store.counter();
            let round_trip = Duration::from_millis(5);
            let at_least = Duration::from_millis(600);
            let root = Path::from("t");
            let found = await_commit(&store, &root, 9, round_trip, at_least, crowd).await;
            assert!(found.is_none());
            counter.counts().gets
        };
        let alone = polls(1).await;
        // 160 waiters: each polls ten round trips apart once its waits have grown.
        let in_crowd = polls(160).await;
        assert!(
            in_crowd * 2 < alone,
            "{in_crowd} polls in a crowd, {alone} alone"
        );
        assert!(in_crowd >= 6, "{in_crowd} polls in a crowd");
    }

    #[tokio::test]
    async fn under_a_heavy_crowd_only_the_claims_holder_lists_the_log() {
        let store = tarn_store::CountingStore::new(InMemory::new());
        let counter = store.counter();
        let root = Path::from("t");
        let proposal = log_dir(&root)
            .join(crate::protocol::names::PROPOSALS_DIR)
            .join(crate::protocol::names::proposal_file_name(2, 1, "p"));
        store
            .put(&proposal, PutPayload::from_static(b"{}\n"))
            .await
            .unwrap();
        let none: Wanted<'_> = &|_, _| false;
        let crowd = LIST_BESIDE_CLAIM_BELOW;
        counter.reset();
        let (found, held) = claim_or_wait(&store, &root, 3, "a", none, crowd).await;
        assert!(held);
        let PutOutcome::Taken(winners, listed) = found else {
            panic!("a claim finds, never commits")
        };
        assert!(winners.is_empty());
        assert_eq!(listed.refs.len(), 1, "the holder lists the proposals");
        assert_eq!(counter.counts().lists, 1);

        // The loser lists nothing: it waits for the holder's commit.
        counter.reset();
        let waiting = claim_or_wait(&store, &root, 3, "b", none, crowd);
        let commit = commit_later(&store, &root, 3, Duration::from_millis(20));
        let ((found, held), ()) = futures::join!(waiting, commit);
        assert!(!held);
        let PutOutcome::Taken(winners, _) = found else {
            panic!("a claim finds, never commits")
        };
        assert_eq!(winners.len(), 1);
        assert_eq!(counter.counts().lists, 0);

        // Under a light crowd every claimant lists beside its claim.
        counter.reset();
        let (_, held) = claim_or_wait(&store, &root, 4, "c", none, crowd - 1).await;
        assert!(held);
        assert_eq!(counter.counts().lists, 1);
    }
}
