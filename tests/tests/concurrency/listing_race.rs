//! A LIST is no snapshot: under a crowd of writers it can show a commit and miss an
//! earlier one written before it (a local directory is read in hash order, S3 page by
//! page). Opening and refreshing a table look such a commit up with a HEAD instead of
//! failing; a commit that is truly missing is still reported as a gap. On the local file
//! system, with listings that hide one commit as a raced LIST does.

use std::sync::Arc;

use tarn::{Error, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::fixtures::{sales_batch, sales_table_of};
use tarn_tests::rows::sorted_ids;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_missed_an_earlier_commit_still_opens_and_refreshes_to_the_latest() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("raced");
    let mut table = sales_table_of(&dir, 10).await;
    let first = table.version();
    let location = table.snapshot().location().clone();
    let hidden = format!("_delta_log/{:020}.json", first + 1);
    let hiding = FaultStore::new(Arc::clone(location.store()), 0).with_rule(
        FaultRule::new(FaultOp::List, Fault::HideFromList).with_glob(format!("*{hidden}")),
    );
    let raced = location.clone().with_store(Arc::new(hiding));
    let mut stale = Table::open_at(raced.clone()).await.unwrap();
    assert_eq!(stale.version(), first);
    for i in 1..=3 {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
    }
    let latest = first + 3;
    let all: Vec<i64> = (0..40).collect();

    // A handle that falls behind reads the commits after its version.
    stale.refresh().await.unwrap();
    assert_eq!(stale.version(), latest);
    let ids = sorted_ids(&stale.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, all);

    // A fresh handle (a short log: one LIST beside the checkpoint hint).
    let fresh = Table::open_at(raced).await.unwrap();
    assert_eq!(fresh.version(), latest);
    let ids = sorted_ids(&fresh.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_truly_missing_is_still_a_version_gap() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("gap");
    let mut table = sales_table_of(&dir, 10).await;
    let first = table.version();
    for i in 1..=2 {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
    }
    let missing = first + 1;
    std::fs::remove_file(dir.join(format!("_delta_log/{missing:020}.json"))).unwrap();
    let err = Table::open(dir.to_str().unwrap()).await.unwrap_err();
    assert!(
        matches!(&err, Error::VersionGap { missing: m, .. } if *m == missing),
        "{err}"
    );
}
