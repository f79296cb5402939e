//! Group commit with a backlog: proposals another commit already carried stay listed
//! until their writers delete them (a writer that exits first never does), and they must
//! not crowd out the proposals still waiting to be carried.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tarn::protocol::names::proposal_file_name;
use tarn::{RetryPolicy, Table};
use tarn_tests::fixtures::sales_schema;
use tarn_tests::log::commit_info_at;

/// More decided proposals than one commit carries (128).
const DECIDED: usize = 130;

/// A proposal's body by hand, as a writer that lost the race from `base` publishes it:
/// its header, then one application-transaction action.
fn proposal(txn_id: &str, base: i64, app_id: &str) -> String {
    let header = serde_json::json!({"tarnProposal": {
        "txnId": txn_id, "base": base, "window": 32, "isolation": "WriteSerializable",
        "operation": "WRITE", "blindAppend": false,
        "reads": {"wholeTable": false, "predicates": [], "files": [], "appIds": [],
                  "domains": [], "metaDomains": []},
    }});
    let action = serde_json::json!({"txn": {"appId": app_id, "version": 1}});
    format!("{header}\n{action}\n")
}

/// A table whose version 1 carried [`DECIDED`] proposals from base 0 that are still
/// listed, with one more proposal from base 0 still waiting; and a writer's handle on
/// version 0 (opened before version 1 landed).
async fn backlog(dir: &std::path::Path) -> (tarn::StoreLocation, Table) {
    let location = tarn_store::open(dir.to_str().unwrap()).unwrap();
    let table = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    assert_eq!(table.version(), 0);
    let stale = Table::open_at(location.clone()).await.unwrap();
    let log = dir.join("_delta_log");
    let proposals = log.join("_tarn_proposals");
    std::fs::create_dir_all(&proposals).unwrap();
    let decided: Vec<String> = (0..DECIDED).map(|i| format!("decided-{i:03}")).collect();
    for (i, id) in decided.iter().enumerate() {
        let name = proposal_file_name(0, STAMP + i as i64, id);
        std::fs::write(proposals.join(name), proposal(id, 0, &format!("app-{i}"))).unwrap();
    }
    let name = proposal_file_name(0, STAMP + 10_000, LATE);
    std::fs::write(proposals.join(name), proposal(LATE, 0, "app-late")).unwrap();
    let carried: Vec<serde_json::Value> = (0..DECIDED)
        .map(|i| serde_json::json!({"txn": {"appId": format!("app-{i}"), "version": 1}}))
        .collect();
    commit_by_hand(dir, 1, "winner", &decided, &carried);
    (location, stale)
}

/// The proposal still waiting, and when the proposals were published.
const LATE: &str = "waiting-000";
const STAMP: i64 = 1_790_000_000_000;

/// Writes version `version` as another process would: a `commitInfo` naming `txn_id` and
/// the proposals `group` it carried, then `actions`.
fn commit_by_hand(
    dir: &std::path::Path,
    version: i64,
    txn_id: &str,
    group: &[String],
    actions: &[serde_json::Value],
) {
    let info = serde_json::json!({"commitInfo": {
        "timestamp": STAMP + 5_000 + version, "operation": "WRITE", "txnId": txn_id,
        "isBlindAppend": false, "tarnGroup": group,
    }});
    let body: String = std::iter::once(&info)
        .chain(actions)
        .map(|a| format!("{a}\n"))
        .collect();
    std::fs::write(dir.join(format!("_delta_log/{version:020}.json")), body).unwrap();
}

/// `writer` commits its own application transaction; returns the version it took, after
/// checking that this version carried the waiting proposal and nothing else.
async fn commit_and_check(location: &tarn::StoreLocation, writer: &Table) -> i64 {
    let mut txn = writer.transaction().with_retry_policy(RetryPolicy {
        group_commit: true,
        ..RetryPolicy::default()
    });
    txn.set_app_transaction("mine", 1);
    let outcome = txn.commit().await.unwrap();
    let info = commit_info_at(location, outcome.version).await.unwrap();
    let group: Vec<&str> = info["tarnGroup"]
        .as_array()
        .map(|ids| ids.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(group, vec![LATE], "{info}");

    let now = Table::open_at(location.clone()).await.unwrap();
    let snapshot = now.snapshot();
    assert_eq!(snapshot.version(), outcome.version);
    assert_eq!(snapshot.app_transaction_version("mine"), Some(1));
    assert_eq!(snapshot.app_transaction_version("app-late"), Some(1));
    // Every decided proposal committed once, at version 1.
    assert_eq!(snapshot.app_transaction_version("app-129"), Some(1));
    outcome.version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_proposals_left_listed_do_not_crowd_out_waiting_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (location, stale) = backlog(dir.path()).await;
    // The writer loses version 1, reads it and lists the proposals, and takes version 2.
    assert_eq!(commit_and_check(&location, &stale).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_handle_reads_the_commits_that_decided_the_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let (location, _) = backlog(dir.path()).await;
    // A handle opened on version 1 (it has not read that commit's actions as a commit),
    // which then loses version 2 to another writer carrying nothing.
    let fresh = Table::open_at(location.clone()).await.unwrap();
    assert_eq!(fresh.version(), 1);
    let other = serde_json::json!({"txn": {"appId": "other", "version": 1}});
    commit_by_hand(dir.path(), 2, "other", &[], &[other]);
    assert_eq!(commit_and_check(&location, &fresh).await, 3);
}

/// A process that waits for its background work before its runtime shuts down (as it
/// exits) leaves no decided proposal listed: the carried writer's delete of its own
/// proposal, slowed to a second here, lands before the runtime drops it.
#[test]
fn writers_that_settle_before_exiting_leave_no_decided_proposal_listed() {
    use std::sync::Arc;
    use std::time::Duration;
    use tarn_store::{LatencyProfile, LatencyStore, OpLatency};
    use tarn_tests::fixtures::sales_batch;
    use tarn_tests::grouped::{append_write, commit_grouped};

    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("settled");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let settled = runtime.block_on(async {
        let table = tarn_tests::fixtures::sales_table_of(&dir, 10).await;
        let location = table.snapshot().location().clone();
        // Deletes (and copies, renames) take a second; every other request none.
        let slow_deletes = LatencyProfile {
            other: OpLatency::ms(1_000, 1_000),
            ..LatencyProfile::none()
        };
        let store = LatencyStore::new(Arc::clone(location.store()), slow_deletes, 5);
        let slow = location.with_store(Arc::new(store));
        let first = append_write(sales_batch(10, 20));
        let carried = append_write(sales_batch(20, 30));
        // It panics unless the commit names both writers.
        commit_grouped(&slow, first, carried).await;
        tarn::settle_background_work(Duration::from_secs(30)).await
    });
    drop(runtime);
    assert!(settled, "background work still running after 30 s");
    let proposals = dir.join("_delta_log").join("_tarn_proposals");
    let left: Vec<_> = std::fs::read_dir(&proposals)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "proposals left listed: {left:?}");
}
