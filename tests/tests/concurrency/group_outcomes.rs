//! What a writer is told once its group-commit proposal is out: a store error it meets
//! then (here, reading a concurrent commit's DV file to unite its own with it) leaves the
//! outcome unknown, since another writer may still carry the proposal; and one does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Error, StoreLocation, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::grouped::proposal_published;
use tarn_tests::log::commit_info_at;
use tarn_tests::part_rows::{Rows, batch, rows_of, schema};
use url::Url;

/// A merge-on-read DELETE of one id through `table`.
async fn delete_id(table: &mut Table, id: i64) -> tarn::Result<tarn::CommitOutcome> {
    table
        .delete(col("id").eq(lit(id)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .map(|o| o.commit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_error_with_a_proposal_out_is_an_unknown_outcome_and_the_proposal_may_land() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let url = Url::parse("memory://group-outcomes/t").unwrap();
    let location = StoreLocation::new(url, store, object_store::path::Path::from("t"));
    // Deletion vectors in files, so uniting two of them reads the other's file.
    let mut setup = Table::create_at(location.clone())
        .with_arrow_schema(&schema())
        .with_property("delta.enableDeletionVectors", "true")
        .with_property(tarn::protocol::properties::DV_INLINE_THRESHOLD, "0")
        .execute()
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = (0..10).map(|i| (i, "p0".to_string())).collect();
    let _ = setup.append([batch(&rows)]).await.unwrap();
    let base = setup.version();

    // The writer: its PUT of `base + 2` waits at a gate, and its reads can be made to fail.
    let faulty = FaultStore::new(Arc::clone(location.store()), 7).with_rule(
        FaultRule::new(FaultOp::Put, Fault::Hold)
            .with_glob(format!("*_delta_log/{:020}.json", base + 2)),
    );
    let faults = faulty.control();
    let gate = faults.gate();
    let mut writer = Table::open_at(location.clone().with_store(Arc::new(faulty)))
        .await
        .unwrap();
    // A carrier that will lose one race, so it lists and reads the proposal.
    let mut carrier = Table::open_at(location.clone()).await.unwrap();

    // Another delete of the same file takes `base + 1`: the writer loses its first race,
    // unites its DV with that one, then publishes its proposal beside its PUT of
    // `base + 2`, which the gate holds.
    let _ = delete_id(&mut setup, 1).await.unwrap();
    let held = tokio::spawn(async move { delete_id(&mut writer, 0).await });
    gate.arrived(Duration::from_secs(60))
        .await
        .expect("no PUT reached the gate");
    assert!(
        proposal_published(&location, base + 1).await,
        "the writer published no proposal"
    );
    // A third delete of the file takes `base + 2`; the writer, let through, must read its
    // DV file to unite with it, and that read fails.
    let _ = delete_id(&mut setup, 2).await.unwrap();
    faults.add_rule(
        FaultRule::new(FaultOp::Get, Fault::ServerError).with_glob("*/deletion_vector_*.bin"),
    );
    gate.open();
    let told = held.await.unwrap();
    let txn_id = match told {
        Err(Error::CommitStateUnknown { txn_id, reason, .. }) => {
            assert!(reason.contains("may still be carried"), "{reason}");
            txn_id
        }
        other => panic!("expected an unknown outcome, got {other:?}"),
    };

    // The carrier, on `base + 1`, loses its race for `base + 2`, reads the proposal, and
    // carries it at `base + 3` with the three DVs united.
    let _ = carrier
        .append([batch(&[(100, "p0".to_string())])])
        .await
        .unwrap();
    assert_eq!(carrier.version(), base + 3);
    let info = commit_info_at(&location, base + 3).await.unwrap();
    let group: Vec<&str> = info["tarnGroup"]
        .as_array()
        .map(|ids| ids.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(group, vec![txn_id.as_str()], "{info}");
    let expected: Rows = (3..10)
        .chain([100])
        .map(|i| (i, "p0".to_string()))
        .collect();
    assert_eq!(rows_of(carrier.snapshot()).await.unwrap(), expected);
}
