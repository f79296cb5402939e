//! Group commit with a backlog: proposals another commit already carried stay listed
//! until their writers delete them (a writer that exits first never does), and they must
//! not crowd out the proposals still waiting to be carried.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_proposals_left_listed_do_not_crowd_out_waiting_ones() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let table = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    assert_eq!(table.version(), 0);
    // A writer that read version 0, and will lose the race for version 1.
    let stale = Table::open_location(location.clone()).await.unwrap();

    // Another process committed version 1, carrying DECIDED proposals from base 0 whose
    // writers have not deleted them; one more proposal, published later, still waits.
    let log = dir.path().join("_delta_log");
    let proposals = log.join("_tarn_proposals");
    std::fs::create_dir_all(&proposals).unwrap();
    let stamp = 1_790_000_000_000_i64;
    let decided: Vec<String> = (0..DECIDED).map(|i| format!("decided-{i:03}")).collect();
    for (i, id) in decided.iter().enumerate() {
        let name = tarn::protocol::names::proposal_file_name(0, stamp + i as i64, id);
        std::fs::write(proposals.join(name), proposal(id, 0, &format!("app-{i}"))).unwrap();
    }
    let late = "waiting-000";
    let name = tarn::protocol::names::proposal_file_name(0, stamp + 10_000, late);
    std::fs::write(proposals.join(name), proposal(late, 0, "app-late")).unwrap();
    let info = serde_json::json!({"commitInfo": {
        "timestamp": stamp + 5_000, "operation": "WRITE", "txnId": "winner",
        "isBlindAppend": false, "tarnGroup": decided,
    }});
    let carried: String = (0..DECIDED)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"txn": {"appId": format!("app-{i}"), "version": 1}})
            )
        })
        .collect();
    std::fs::write(
        log.join(format!("{:020}.json", 1)),
        format!("{info}\n{carried}"),
    )
    .unwrap();

    // The stale writer loses version 1, lists the proposals, and takes version 2: it
    // carries the waiting proposal, not (only) the decided ones.
    let mut txn = stale.transaction().with_retry_policy(RetryPolicy {
        group_commit: true,
        ..RetryPolicy::default()
    });
    txn.set_app_transaction("mine", 1);
    let outcome = txn.commit().await.unwrap();
    assert_eq!(outcome.version, 2);
    let info = commit_info_at(&location, 2).await.unwrap();
    let group: Vec<&str> = info["tarnGroup"]
        .as_array()
        .map(|ids| ids.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(group, vec![late], "{info}");

    let now = Table::open_location(location.clone()).await.unwrap();
    let snapshot = now.snapshot();
    assert_eq!(snapshot.version(), 2);
    assert_eq!(snapshot.app_transaction_version("mine"), Some(1));
    assert_eq!(snapshot.app_transaction_version("app-late"), Some(1));
    // Every decided proposal committed once, at version 1.
    assert_eq!(snapshot.app_transaction_version("app-129"), Some(1));
}
