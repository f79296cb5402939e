//! Fences, on the local file system: a writer killed with its group-commit proposal out
//! cannot have that proposal carried after its restart fenced it; an earlier incarnation
//! still running is refused; and an unknown outcome settles into landed or not landed,
//! by waiting out its window or by fencing at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use tarn::{ConflictReason, Error, Resolution, Settle, StoreLocation, Table, UnknownCommit};
use tarn_store::{Fault, FaultControl, FaultOp, FaultRule, FaultStore};
use tarn_tests::grouped::proposal_published;
use tarn_tests::log::commit_info_at;
use tarn_tests::part_rows::{batch, schema};
use tarn_tests::rows::sorted_ids;

/// A table on the local disk with ten rows, and its location.
async fn table(dir: &std::path::Path) -> (Table, StoreLocation) {
    let location = tarn_store::open(dir.to_str().unwrap()).unwrap();
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&schema())
        .execute()
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = (0..10).map(|i| (i, "p0".to_string())).collect();
    let _ = table.append([batch(&rows)]).await.unwrap();
    (table, location)
}

async fn append_id(table: &mut Table, id: i64) -> tarn::Result<tarn::CommitOutcome> {
    table
        .append([batch(&[(id, "p0".to_string())])])
        .await
        .map(|o| o.commit)
}

/// How many rows of the table hold `id`.
async fn count_id(location: &StoreLocation, id: i64) -> usize {
    let table = Table::open_at(location.clone()).await.unwrap();
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    ids.iter().filter(|v| **v == id).count()
}

/// A handle on `location` whose requests go through a fault store seeded with `seed`,
/// and the store's control.
async fn faulty_writer(location: &StoreLocation, seed: u64) -> (Table, FaultControl) {
    let faulty = FaultStore::new(Arc::clone(location.store()), seed);
    let faults = faulty.control();
    let writer = Table::open_at(location.clone().with_store(Arc::new(faulty)))
        .await
        .unwrap();
    (writer, faults)
}

/// A writer (fenced first as `writer_id`, when given) whose append of `id` loses the race
/// for the next version, publishes its proposal beside its PUT of the one after, and is
/// killed while that PUT is held. Returns the version the proposal is based on.
async fn killed_with_proposal_out(
    location: &StoreLocation,
    setup: &mut Table,
    writer_id: Option<&str>,
    id: i64,
) -> i64 {
    let (mut writer, faults) = faulty_writer(location, 11).await;
    if let Some(w) = writer_id {
        let _ = writer.fence_writer(w).await.unwrap();
    }
    setup.refresh().await.unwrap();
    let base = writer.version();
    faults.add_rule(
        FaultRule::new(FaultOp::Put, Fault::Hold)
            .with_glob(format!("*_delta_log/{:020}.json", base + 2)),
    );
    let gate = faults.gate();
    let _ = append_id(setup, 1000 + base).await.unwrap();
    let held = tokio::spawn(async move { append_id(&mut writer, id).await });
    gate.arrived(Duration::from_secs(60))
        .await
        .expect("no PUT reached the gate");
    assert!(
        proposal_published(location, base + 1).await,
        "the writer published no proposal"
    );
    // The kill: the process is gone, its proposal stays.
    held.abort();
    let _ = held.await;
    base + 1
}

/// A writer that loses one race and so lists (and may carry) the proposals waiting.
async fn carrier_commits(location: &StoreLocation, id: i64) -> i64 {
    let mut carrier = Table::open_at(location.clone()).await.unwrap();
    let mut other = Table::open_at(location.clone()).await.unwrap();
    let _ = append_id(&mut other, id + 1).await.unwrap();
    append_id(&mut carrier, id).await.unwrap().version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_proposal_lands_after_its_restart_unless_the_restart_fences() {
    for fenced in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut setup, location) = table(dir.path()).await;
        let writer_id = fenced.then_some("ingest-7");
        let _ = killed_with_proposal_out(&location, &mut setup, writer_id, 2000).await;

        // The restart finds the work missing and redoes it.
        let mut restarted = Table::open_at(location.clone()).await.unwrap();
        if let Some(w) = writer_id {
            let writer = restarted.fence_writer(w).await.unwrap();
            assert_eq!(writer.epoch(), 2);
        }
        assert_eq!(count_id(&location, 2000).await, 0);
        let _ = append_id(&mut restarted, 2000).await.unwrap();

        // A later commit that lists the proposals carries the dead one unless fenced.
        let version = carrier_commits(&location, 3000).await;
        let info = commit_info_at(&location, version).await.unwrap();
        let landed_twice = count_id(&location, 2000).await == 2;
        assert_eq!(
            landed_twice, !fenced,
            "fenced: {fenced}; the carrier's commitInfo: {info}"
        );
        assert_eq!(count_id(&location, 2000).await, if fenced { 1 } else { 2 });
        assert_eq!(count_id(&location, 3000).await, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_incarnation_still_running_commits_nothing_after_the_fence() {
    let dir = tempfile::tempdir().unwrap();
    let (_, location) = table(dir.path()).await;
    let mut old = Table::open_at(location.clone()).await.unwrap();
    let first = old.fence_writer("loader").await.unwrap();
    assert_eq!((first.id(), first.epoch()), ("loader", 1));
    let mut new = Table::open_at(location.clone()).await.unwrap();
    let second = new.fence_writer("loader").await.unwrap();
    assert_eq!(second.epoch(), 2);

    // Rebasing over the fence, and starting from a snapshot that has it, both refuse.
    for refreshed in [false, true] {
        if refreshed {
            old.refresh().await.unwrap();
        }
        match append_id(&mut old, 4000).await {
            Err(Error::Conflict {
                reason: ConflictReason::WriterFenced { writer, epoch },
                ..
            }) => assert_eq!((writer.as_str(), epoch), ("loader", 2)),
            other => panic!("expected the writer to be fenced, got {other:?}"),
        }
    }
    assert_eq!(count_id(&location, 4000).await, 0);

    // The new incarnation commits, and its commits name it.
    let outcome = append_id(&mut new, 4001).await.unwrap();
    let info = commit_info_at(&location, outcome.version).await.unwrap();
    assert_eq!(
        info["tarnWriter"],
        serde_json::json!({"id": "loader", "epoch": 2})
    );
    // An empty id is refused.
    assert!(matches!(
        new.fence_writer("").await,
        Err(Error::InvalidArgument { .. })
    ));
}

/// A writer whose append of `id` meets an unknown outcome with its proposal out: its
/// PUT of the version after the one it lost fails, and so does reading that version back.
async fn unknown_with_proposal_out(
    location: &StoreLocation,
    setup: &mut Table,
    id: i64,
) -> UnknownCommit {
    let (mut writer, faults) = faulty_writer(location, 13).await;
    let base = writer.version();
    let commit = format!("*_delta_log/{:020}.json", base + 2);
    faults.add_rule(FaultRule::new(FaultOp::Put, Fault::ServerError).with_glob(commit.clone()));
    faults.add_rule(FaultRule::new(FaultOp::Get, Fault::ServerError).with_glob(commit));
    let _ = append_id(setup, 1000 + base).await.unwrap();
    let err = append_id(&mut writer, id).await.unwrap_err();
    let unknown = err.unknown_commit().unwrap_or_else(|| panic!("{err}"));
    assert_eq!(unknown.version, base + 2, "{err}");
    assert_eq!(unknown.last_version, base + 1 + 32, "{err}");
    assert!(proposal_published(location, base + 1).await);
    unknown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_fenced_at_once_never_lands() {
    let dir = tempfile::tempdir().unwrap();
    let (mut setup, location) = table(dir.path()).await;
    let unknown = unknown_with_proposal_out(&location, &mut setup, 5000).await;
    let mut resolver = Table::open_at(location.clone()).await.unwrap();
    let resolution = resolver
        .resolve_commit(&unknown, Settle::Fence)
        .await
        .unwrap();
    let Resolution::NotLanded { decided_at } = resolution else {
        panic!("expected not landed, got {resolution:?}");
    };
    let info = commit_info_at(&location, decided_at).await.unwrap();
    assert_eq!(info["tarnFenced"], serde_json::json!([unknown.txn_id]));
    assert_eq!(resolver.version(), decided_at);
    let _ = carrier_commits(&location, 6000).await;
    assert_eq!(count_id(&location, 5000).await, 0);
    assert_eq!(count_id(&location, 6000).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_waited_on_lands_when_carried_or_not_once_its_window_passed() {
    // Carried by a later commit: landed there.
    let dir = tempfile::tempdir().unwrap();
    let (mut setup, location) = table(dir.path()).await;
    let unknown = unknown_with_proposal_out(&location, &mut setup, 7000).await;
    let carried_at = carrier_commits(&location, 8000).await;
    let mut resolver = Table::open_at(location.clone()).await.unwrap();
    let poll = Settle::Wait {
        poll: Duration::from_millis(10),
    };
    let resolution = resolver.resolve_commit(&unknown, poll).await.unwrap();
    assert_eq!(
        resolution,
        Resolution::Landed {
            version: carried_at
        }
    );
    assert_eq!(count_id(&location, 7000).await, 1);

    // Never carried: not landed once its last version exists, and not before.
    let dir = tempfile::tempdir().unwrap();
    let (mut setup, location) = table(dir.path()).await;
    let unknown = unknown_with_proposal_out(&location, &mut setup, 7000).await;
    let waiting = tokio::spawn({
        let location = location.clone();
        let unknown = unknown.clone();
        async move {
            let mut resolver = Table::open_at(location).await.unwrap();
            resolver.resolve_commit(&unknown, poll).await.unwrap()
        }
    });
    // A lone writer never loses a race, so it lists no proposal and carries none.
    while setup.version() < unknown.last_version {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(!waiting.is_finished(), "resolved before the window passed");
        let _ = append_id(&mut setup, 9000).await.unwrap();
    }
    assert_eq!(
        waiting.await.unwrap(),
        Resolution::NotLanded {
            decided_at: unknown.last_version
        }
    );
    assert_eq!(count_id(&location, 7000).await, 0);
}
