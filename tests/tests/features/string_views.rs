//! Scans that return string and binary columns as views (`Scan::with_string_views`), as
//! DataFusion reads them: the same rows as a plain scan, with `Utf8View` and `BinaryView`
//! for every top-level string and binary column, whether it is decoded from a file, a
//! partition value, a column added after a file was written, or one the predicate reads;
//! on a column-mapped table with deletion vectors, and on every Spark-written golden
//! table, on the local file system.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::{cast, concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{ChangeStrategy, Table};
use tarn_tests::golden::{golden_expected, golden_names, golden_table};
use tarn_tests::rows::canonical_rows;

fn batch(schema: &Arc<Schema>, ids: std::ops::Range<i64>) -> RecordBatch {
    let names = ids
        .clone()
        .map(|i| (i % 7 != 0).then(|| format!("name-{i}")));
    let payloads: Vec<Option<Vec<u8>>> = ids
        .clone()
        .map(|i| (i % 5 != 0).then(|| i.to_le_bytes().to_vec()))
        .collect();
    let days = ids.clone().map(|i| format!("2026-11-{:02}", 1 + i % 3));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(ids)),
        Arc::new(StringArray::from_iter(names)),
        Arc::new(BinaryArray::from_iter(payloads)),
        Arc::new(StringArray::from_iter_values(days)),
    ];
    RecordBatch::try_new(Arc::clone(schema), columns).unwrap()
}

/// The batches as one, sorted by `id`, with views cast back to plain strings and binaries.
fn plain_sorted(batches: &[RecordBatch]) -> RecordBatch {
    let one = concat_batches(&batches[0].schema(), batches).unwrap();
    let columns: Vec<ArrayRef> = one
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => cast(c, &DataType::Utf8).unwrap(),
            DataType::BinaryView => cast(c, &DataType::Binary).unwrap(),
            _ => Arc::clone(c),
        })
        .collect();
    let fields: Vec<Field> = one
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    let plain = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let id = plain.schema().index_of("id").unwrap();
    let order = sort_to_indices(plain.column(id), None, None).unwrap();
    take_record_batch(&plain, &order).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_and_binary_columns_come_back_as_views_with_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("payload", DataType::Binary, true),
        Field::new("day", DataType::Utf8, false),
    ]));
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&schema)
        .with_partition_columns(["day"])
        .with_property("delta.enableDeletionVectors", "true")
        .with_property("delta.columnMapping.mode", "name")
        .execute()
        .await
        .unwrap();
    table.append([batch(&schema, 0..3_000)]).await.unwrap();
    // A column added later: null in the files written before it.
    let _ = table
        .add_columns([StructField::new(
            "note",
            DeltaType::Primitive(PrimitiveType::String),
            true,
        )])
        .await
        .unwrap();
    table
        .delete(col("id").lt(lit(100i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();

    let columns = ["id", "name", "payload", "day", "note"];
    let filters = [
        None,
        Some(col("id").gt_eq(lit(2_500i64))),
        // A string column the predicate reads, and a partition column.
        Some(col("name").gt(lit("name-2"))),
        Some(col("day").eq(lit("2026-11-02"))),
    ];
    for filter in filters {
        let scan = |views: bool| {
            let mut scan = table
                .scan()
                .select(columns)
                .with_batch_size(700)
                .with_string_views(views);
            if let Some(f) = &filter {
                scan = scan.filter(f.clone());
            }
            scan
        };
        let viewed = scan(true).collect().await.unwrap();
        let plain = scan(false).collect().await.unwrap();
        assert!(!plain.is_empty(), "{filter:?}");
        for b in &viewed {
            let types: Vec<DataType> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            assert_eq!(
                types,
                [
                    DataType::Int64,
                    DataType::Utf8View,
                    DataType::BinaryView,
                    DataType::Utf8View,
                    DataType::Utf8View
                ],
                "{filter:?}"
            );
        }
        let (viewed, plain) = (plain_sorted(&viewed), plain_sorted(&plain));
        assert_eq!(viewed.num_rows(), plain.num_rows(), "{filter:?}");
        for (i, name) in columns.iter().enumerate() {
            assert_eq!(
                viewed.column(i).to_data(),
                plain.column(i).to_data(),
                "{name} under {filter:?}"
            );
        }
        let notes = plain.column(4);
        assert_eq!(notes.null_count(), notes.len());
    }
    // The plan says what the scan returns.
    let plan = table
        .scan()
        .select(["name", "id"])
        .with_string_views(true)
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.schema.field(0).data_type(), &DataType::Utf8View);
    assert_eq!(plan.schema.field(1).data_type(), &DataType::Int64);
}

/// Every Spark-written golden table with expected rows reads the same with views as
/// without (dictionary-encoded and plain strings, partitions, nested columns, column
/// mapping, deletion vectors), and no top-level string or binary column is left plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_written_tables_read_the_same_with_views() {
    let mut read = 0;
    for name in golden_names() {
        if golden_expected(&name).is_none() {
            continue;
        }
        let table = Table::open(golden_table(&name).to_str().unwrap())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let viewed = table
            .scan()
            .with_string_views(true)
            .collect()
            .await
            .unwrap();
        let plain = table.scan().collect().await.unwrap();
        for b in &viewed {
            for f in b.schema().fields() {
                assert!(
                    !matches!(
                        f.data_type(),
                        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary
                    ),
                    "{name}: {f:?}"
                );
            }
        }
        assert_eq!(canonical_rows(&viewed), canonical_rows(&plain), "{name}");
        read += 1;
    }
    assert!(read >= 20, "only {read} golden tables with expected rows");
}
