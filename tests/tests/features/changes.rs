//! Reading the change data feed of tables whose commits carry no change files (Tarn's
//! appends and partition deletes): added files are inserts, removed ones deletes, each
//! stamped with its version and commit time (the in-commit timestamp when there is one).
//! Change files and deletion-vector commits are checked against Spark's
//! `table_changes` in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;

use tarn::expr::{col, lit};
use tarn::{Error, ManualClock, Table};
use tarn_tests::fixtures::{only_country, sales_batch, sales_schema, sales_table_of};
use tarn_tests::rows::change_rows;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_partition_deletes_read_as_inserts_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_900_000_000_000));
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableChangeDataFeed", "true")
        .with_property("delta.enableInCommitTimestamps", "true")
        .with_clock(clock.clone())
        .execute()
        .await
        .unwrap();
    clock.advance(1000);
    table.append([sales_batch(0, 20)]).await.unwrap();
    clock.advance(1000);
    table
        .delete_partitions(col("country").eq(lit("NL")))
        .await
        .unwrap();
    let seen: Vec<(String, i64, i64)> =
        change_rows(&table.changes(1, None).await.unwrap(), "customer")
            .into_iter()
            .map(|(_, _, kind, version, ms)| (kind, version, ms * 1000))
            .collect();
    let inserts = seen.iter().filter(|s| s.0 == "insert").count();
    let deletes: Vec<_> = seen.iter().filter(|s| s.0 == "delete").collect();
    assert_eq!(inserts, 20);
    assert_eq!(
        deletes.len(),
        only_country(&sales_batch(0, 20), "NL").num_rows()
    );
    assert!(
        deletes
            .iter()
            .all(|d| d.1 == 2 && d.2 == 1_900_000_002_000_000)
    );
    assert!(
        seen.iter()
            .filter(|s| s.0 == "insert")
            .all(|s| s.1 == 1 && s.2 == 1_900_000_001_000_000)
    );

    // The stream gives the same rows, a version at a time.
    let mut stream = table.stream_changes(1, None).await.unwrap();
    let mut streamed = Vec::new();
    while let Some(batch) = stream.next().await {
        streamed.push(batch.unwrap());
    }
    assert_eq!(
        change_rows(&streamed, "customer"),
        change_rows(&table.changes(1, None).await.unwrap(), "customer")
    );

    let err = table.changes(2, Some(5)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    // Version 0 committed the property: it has a feed, with nothing in it.
    assert!(table.changes(0, Some(0)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_without_a_feed_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table_of(dir.path(), 5).await;
    let err = table.changes(1, None).await.unwrap_err();
    assert!(
        matches!(err, Error::ChangeDataFeedNotEnabled { version: 1 }),
        "{err}"
    );
    // Turned on later: the versions after it stream, the first one before it fails.
    let enabled = table
        .set_properties([("delta.enableChangeDataFeed", "true")])
        .await
        .unwrap();
    table.append([sales_batch(5, 8)]).await.unwrap();
    assert_eq!(
        change_rows(
            &table.changes(enabled.version, None).await.unwrap(),
            "customer"
        )
        .len(),
        3
    );
    let mut stream = table.stream_changes(1, None).await.unwrap();
    let first = stream.next().await.unwrap().unwrap_err();
    assert!(
        matches!(first, Error::ChangeDataFeedNotEnabled { version: 1 }),
        "{first}"
    );
}
