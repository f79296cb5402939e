//! Clustered tables (`clustering` writer feature): Tarn does not cluster, but every file
//! it adds carries statistics for the clustering columns, whatever
//! `delta.dataSkippingNumIndexedCols` says, and the clustering domain stays as it was.
//! Spark's side is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tarn::Table;
use tarn::protocol::Action;
use tarn_tests::fixtures::{sales_batch, sales_schema};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_carry_statistics_for_the_clustering_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.dataSkippingNumIndexedCols", "1")
        .execute()
        .await
        .unwrap();
    let domain = r#"{"clusteringColumns":[["amount"]]}"#;
    let mut txn = table.transaction();
    let protocol = table
        .snapshot()
        .protocol()
        .with_writer_feature("domainMetadata")
        .with_writer_feature("clustering");
    txn.add_action(Action::Protocol(protocol));
    txn.set_domain_metadata("delta.clustering", domain);
    let _ = table.commit(txn).await.unwrap();

    table.append([sales_batch(0, 100)]).await.unwrap();
    let add = table.snapshot().files().next().unwrap().clone();
    let stats: serde_json::Value =
        serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
    // `id` is within the budget, `amount` clusters, `customer` is neither.
    for (column, kept) in [("id", true), ("amount", true), ("customer", false)] {
        assert_eq!(
            stats["minValues"].get(column).is_some(),
            kept,
            "{column}: {stats}"
        );
    }
    assert_eq!(
        table.snapshot().domain_metadata("delta.clustering"),
        Some(domain)
    );
}
