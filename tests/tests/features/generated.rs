//! Generated columns: a write that leaves one out gets it computed from the row, one
//! that brings it must bring the computed value, and rows UPDATE and MERGE write get it
//! computed again. Spark's side is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use tarn::ChangeStrategy;
use tarn::expr::{col, lit, source_col};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};
use tarn::{Error, Table};

fn long(name: &str, generated: Option<&str>) -> StructField {
    let mut f = StructField::new(name, DeltaType::Primitive(PrimitiveType::Long), false);
    if let Some(sql) = generated {
        f.metadata
            .insert("delta.generationExpression".into(), sql.into());
    }
    f
}

/// Rows of `id` and, when given, `doubled`.
fn rows(ids: &[i64], doubled: Option<&[i64]>) -> RecordBatch {
    let mut fields = vec![Field::new("id", DataType::Int64, false)];
    let mut columns: Vec<Arc<dyn arrow::array::Array>> =
        vec![Arc::new(Int64Array::from(ids.to_vec()))];
    if let Some(d) = doubled {
        fields.push(Field::new("doubled", DataType::Int64, false));
        columns.push(Arc::new(Int64Array::from(d.to_vec())));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// `(id, doubled, shifted)` of every row, sorted.
async fn triples(table: &Table) -> Vec<(i64, i64, i64)> {
    let mut out = Vec::new();
    for b in table.scan().collect().await.unwrap() {
        let get = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (a, d, s) = (get("id"), get("doubled"), get("shifted"));
        for i in 0..b.num_rows() {
            out.push((a.value(i), d.value(i), s.value(i)));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_columns_follow_their_rows_through_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let schema = StructType::new(vec![
        long("id", None),
        long("doubled", Some("id * 2")),
        long("shifted", Some("(id + 1) * 10 - id * 2")),
    ]);
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_schema(schema)
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    assert!(
        table
            .snapshot()
            .protocol()
            .has_writer_feature("generatedColumns")
    );
    table.append([rows(&[1, 2], None)]).await.unwrap();
    table.append([rows(&[3], Some(&[6]))]).await.unwrap();
    assert_eq!(
        triples(&table).await,
        vec![(1, 2, 18), (2, 4, 26), (3, 6, 34)]
    );
    let version = table.version();
    let err = table.append([rows(&[4], Some(&[7]))]).await.unwrap_err();
    assert!(
        matches!(&err, Error::ConstraintViolated { constraint, rows: 1, .. } if constraint.contains("doubled")),
        "{err}"
    );
    let err = table
        .update()
        .set("doubled", lit(0i64))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert_eq!(table.version(), version);

    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        table
            .update()
            .filter(col("id").eq(lit(1i64)))
            .set("id", col("id") + lit(100i64))
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        table
            .merge([rows(&[2, 5], None)])
            .on(["id"])
            .when_matched_update(None, [("id", source_col("id") + lit(1000i64))])
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
    }
    // Every row's generated values match its id, whatever wrote it.
    for (id, doubled, shifted) in triples(&table).await {
        assert_eq!(doubled, id * 2, "id {id}");
        assert_eq!(shifted, (id + 1) * 10 - doubled, "id {id}");
    }
    let ids: Vec<i64> = triples(&table).await.iter().map(|t| t.0).collect();
    assert_eq!(ids, vec![2, 3, 101, 1002, 1005]);
}
