//! A deletion vector is loaded once per table handle: after one read, reads of the same
//! file and a merge-on-read MERGE whose clauses read target values (keys first, then the
//! matched rows, then the deletion vector extended) all succeed with every GET of a
//! deletion-vector file failing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit, target_col};
use tarn::{ChangeStrategy, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(Int64Array::from_iter_values(ids.map(|i| i * 10))),
        ],
    )
    .unwrap()
}

fn sum(batches: &[RecordBatch], column: &str) -> i64 {
    batches
        .iter()
        .map(|b| {
            let values = b.column_by_name(column).unwrap();
            let values = values.as_any().downcast_ref::<Int64Array>().unwrap();
            values.iter().flatten().sum::<i64>()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_are_read_once_per_table_handle() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&batch(0..1).schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([batch(0..1000)]).await.unwrap();
    table
        .delete(col("id").lt(lit(100i64)))
        .strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();

    let faulty = FaultStore::new(Arc::clone(location.store()), 1)
        .with_rule(FaultRule::new(FaultOp::Get, Fault::FailBefore).matching("*deletion_vector_*"));
    let control = faulty.control();
    control.set_enabled(false);
    let mut through = Table::open_location(location.clone().with_store(Arc::new(faulty)))
        .await
        .unwrap();
    let first = through.scan().collect().await.unwrap();
    assert_eq!(sum(&first, "id"), (100..1000).sum::<i64>());

    control.set_enabled(true);
    let again = through.scan().collect().await.unwrap();
    assert_eq!(sum(&again, "id"), (100..1000).sum::<i64>());
    // Updating from the target's own values: keys, then the matched rows, then the DV.
    through
        .merge([batch(500..510)])
        .on(["id"])
        .when_matched_update(None, [("value", target_col("value") + lit(1i64))])
        .strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        control.injected(),
        0,
        "no deletion vector was fetched again"
    );
    control.set_enabled(false);
    let after = Table::open_location(location).await.unwrap();
    let rows = after.scan().collect().await.unwrap();
    assert_eq!(
        sum(&rows, "value"),
        (100..1000).map(|i| i * 10).sum::<i64>() + 10
    );
}
