//! CHECK constraints and column invariants, enforced on every row a write adds: a row
//! that breaks one (false or null) fails the write with an error naming the constraint,
//! and nothing is committed. `add_constraint` checks the rows already there. Spark's
//! side is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Float64Array, RecordBatch};
use tarn::ChangeStrategy;
use tarn::expr::{col, lit, source_col};
use tarn::protocol::{StructField, StructType};
use tarn::{Error, Table};
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::rows::row_count;

/// The sales batch with `amount` replaced.
fn with_amounts(batch: &RecordBatch, amounts: Vec<Option<f64>>) -> RecordBatch {
    let mut columns = batch.columns().to_vec();
    let i = batch.schema().index_of("amount").unwrap();
    columns[i] = Arc::new(Float64Array::from(amounts));
    RecordBatch::try_new(batch.schema(), columns).unwrap()
}

fn violated(err: &Error, constraint: &str) -> bool {
    matches!(err, Error::ConstraintViolated { constraint: c, .. } if c.contains(constraint))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_that_break_a_check_constraint_are_never_committed() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.constraints.non_negative", "amount >= 0")
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    assert!(
        table
            .snapshot()
            .protocol()
            .has_writer_feature("checkConstraints")
    );
    table.append([sales_batch(0, 50)]).await.unwrap();
    let version = table.version();

    let bad = with_amounts(&sales_batch(50, 53), vec![Some(1.0), Some(-0.5), None]);
    let err = table.append([bad]).await.unwrap_err();
    assert!(violated(&err, "delta.constraints.non_negative"), "{err}");
    assert!(
        matches!(err, Error::ConstraintViolated { rows: 2, .. }),
        "a negative and a null amount break it"
    );
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        let err = table
            .update()
            .filter(col("id").lt(lit(5i64)))
            .set("amount", lit(-1.0f64))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        assert!(violated(&err, "non_negative"), "{strategy:?}: {err}");
        let source = with_amounts(&sales_batch(45, 55), vec![Some(-2.0); 10]);
        let err = table
            .merge([source])
            .on(["id"])
            .when_matched_update(None, [("amount", source_col("amount"))])
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap_err();
        assert!(violated(&err, "non_negative"), "{strategy:?}: {err}");
    }
    assert_eq!(table.version(), version, "a broken row was committed");
    // Rows that meet it go in; deletes are never checked.
    table
        .update()
        .set("amount", col("amount") + lit(1.0))
        .execute()
        .await
        .unwrap();
    table
        .delete(col("id").lt(lit(10i64)))
        .execute()
        .await
        .unwrap();
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 40);

    // Constraints are added once the rows meet them, and only through add_constraint.
    let err = table
        .add_constraint("big", "amount > 30.5")
        .await
        .unwrap_err();
    assert!(violated(&err, "delta.constraints.big"), "{err}");
    let err = table
        .set_properties([("delta.constraints.big", "amount > 0")])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    let err = table
        .add_constraint("named", "levenshtein(customer, 'x') > 2")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidExpression { .. }), "{err}");
    // Functions Tarn knows: nulls count as violations unless the expression handles them.
    let err = table
        .add_constraint("named", "length(customer) > 2")
        .await
        .unwrap_err();
    assert!(violated(&err, "delta.constraints.named"), "{err}");
    let _ = table
        .add_constraint("named", "coalesce(length(customer), 3) > 2")
        .await
        .unwrap();
    let _ = table
        .add_constraint(
            "ids",
            "id BETWEEN 10 AND 10000 AND country IS NOT NULL OR country IS NULL",
        )
        .await
        .unwrap();
    let err = table
        .append([sales_batch(20_000, 20_001)])
        .await
        .unwrap_err();
    assert!(violated(&err, "delta.constraints.ids"), "{err}");
    let _ = table.drop_constraint("ids").await.unwrap();
    table.append([sales_batch(20_000, 20_001)]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_invariants_hold_like_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let mut schema = StructType::try_from_arrow(&sales_schema()).unwrap();
    let amount: &mut StructField = schema
        .fields
        .iter_mut()
        .find(|f| f.name == "amount")
        .unwrap();
    amount.metadata.insert(
        "delta.invariants".into(),
        r#"{"expression":{"expression":"amount < 1000"}}"#.into(),
    );
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_schema(schema)
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    let err = table.append([sales_batch(990, 1000)]).await.unwrap_err();
    assert!(violated(&err, "the invariant of amount"), "{err}");
    assert_eq!(table.version(), 1);
}
