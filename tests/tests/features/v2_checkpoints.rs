//! V2 checkpoints written when the table asks for them (`delta.checkpointPolicy` `v2`,
//! the `v2Checkpoint` feature): the classic file name, a `checkpointMetadata` row first,
//! every action inline; the table reads from it with the commits before it gone. Spark's
//! side is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use arrow::array::{Array, AsArray, StructArray};
use arrow::datatypes::Int64Type;
use tarn::Table;
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::rows::{read_parquet_file, row_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_that_ask_for_v2_checkpoints_get_them() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let mut table = Table::create(url)
        .with_arrow_schema(&sales_schema())
        .with_property("delta.checkpointPolicy", "v2")
        .with_property("delta.checkpointInterval", "2")
        .execute()
        .await
        .unwrap();
    assert!(
        table
            .snapshot()
            .protocol()
            .has_reader_feature("v2Checkpoint")
    );
    for i in 0..4 {
        let outcome = table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
        if let Some(task) = &outcome.commit.checkpoint {
            task.wait().await.unwrap();
        }
    }
    let file = dir
        .path()
        .join("_delta_log/00000000000000000004.checkpoint.parquet");
    let batches = read_parquet_file(&file);
    let mut versions = Vec::new();
    for batch in &batches {
        let metadata: &StructArray = batch
            .column_by_name("checkpointMetadata")
            .expect("a V2 checkpoint has checkpointMetadata")
            .as_struct();
        let version = metadata
            .column_by_name("version")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..metadata.len() {
            if metadata.is_valid(i) {
                versions.push(version.value(i));
            }
        }
    }
    assert_eq!(
        versions,
        vec![4],
        "one checkpointMetadata row, naming its version"
    );
    for v in 0..4 {
        std::fs::remove_file(dir.path().join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    let reopened = Table::open(url).await.unwrap();
    assert_eq!(reopened.version(), 4);
    assert_eq!(row_count(&reopened.scan().collect().await.unwrap()), 40);
}
