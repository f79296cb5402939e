//! CREATE TABLE AS SELECT from a stream, on the local file system: version 0 holds the
//! protocol, the metadata and the data files in one commit; the schema comes from the
//! first batch when none is given; identity values and row ids are drawn in it; a failing
//! stream, an existing table or an empty stream without a schema leave no table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};
use tarn::{Error, Table};
use tarn_tests::log::{actions_at, commit_info_at};
use tarn_tests::part_rows::{batch, schema};
use tarn_tests::rows::{row_count, sorted_ids};

fn rows(from: i64, n: i64, part: &str) -> RecordBatch {
    let rows: Vec<(i64, String)> = (from..from + n).map(|i| (i, part.to_string())).collect();
    batch(&rows)
}

fn data_files(dir: &std::path::Path) -> usize {
    let mut files = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                files += 1;
            }
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_from_a_stream_holds_its_rows_in_version_0() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let stream = futures::stream::iter(
        (0..6).map(|i| Ok::<_, ArrowError>(rows(i * 100, 100, ["p0", "p1"][i as usize % 2]))),
    );
    let table = Table::create(url)
        .with_partition_columns(["part"])
        .execute_stream(stream)
        .await
        .unwrap();
    assert_eq!(table.version(), 0);
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, (0..600).collect::<Vec<i64>>());

    let actions = actions_at(table.location(), 0).await;
    let kinds: Vec<&str> = actions
        .iter()
        .filter_map(|a| a.as_object()?.keys().next().map(String::as_str))
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "add").count(),
        2,
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"protocol") && kinds.contains(&"metaData"),
        "{kinds:?}"
    );
    let info = commit_info_at(table.location(), 0).await.unwrap();
    assert_eq!(info["operation"], "CREATE TABLE AS SELECT");
    assert_eq!(info["operationMetrics"]["numOutputRows"], "600");
    assert_eq!(info["operationParameters"]["partitionBy"], "[\"part\"]");

    // The schema is the first batch's, and the table reopens as written.
    let reopened = Table::open(url).await.unwrap();
    assert_eq!(reopened.version(), 0);
    assert_eq!(
        reopened.snapshot().schema().field_names(),
        vec!["id".to_string(), "part".to_string()]
    );
    assert_eq!(row_count(&reopened.scan().collect().await.unwrap()), 600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_values_and_row_ids_are_drawn_in_version_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut id = StructField::new("id", DeltaType::Primitive(PrimitiveType::Long), false);
    id.metadata.insert("delta.identity.start".into(), 1.into());
    id.metadata.insert("delta.identity.step".into(), 1.into());
    id.metadata
        .insert("delta.identity.allowExplicitInsert".into(), false.into());
    let values = |n: usize| {
        let v: StringArray = (0..n).map(|i| Some(format!("v{i}"))).collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)])),
            vec![Arc::new(v)],
        )
        .unwrap()
    };
    let reader = RecordBatchIterator::new(
        (0..4).map(move |_| Ok(values(5))),
        Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)])),
    );
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_schema(StructType::new(vec![
            id,
            StructField::new("v", DeltaType::Primitive(PrimitiveType::String), true),
        ]))
        .with_property("delta.enableRowTracking", "true")
        .execute_reader(reader)
        .await
        .unwrap();
    let _ = table.append([values(2)]).await.unwrap();
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, (1..=22).collect::<Vec<i64>>());

    let actions = actions_at(table.location(), 0).await;
    let add = actions.iter().find(|a| a.get("add").is_some()).unwrap();
    assert_eq!(add["add"]["baseRowId"], 0, "{add}");
    assert_eq!(add["add"]["defaultRowCommitVersion"], 0, "{add}");
    let mark = actions
        .iter()
        .find(|a| a["domainMetadata"]["domain"] == "delta.rowTracking")
        .unwrap();
    assert!(
        mark["domainMetadata"]["configuration"]
            .as_str()
            .unwrap()
            .contains("\"rowIdHighWaterMark\":19"),
        "{mark}"
    );
    // The next append's ids start above version 0's.
    let next = actions_at(table.location(), 1).await;
    let add = next.iter().find(|a| a.get("add").is_some()).unwrap();
    assert_eq!(add["add"]["baseRowId"], 20, "{add}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_from_a_stream_leaves_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let failing = futures::stream::iter(vec![
        Ok(rows(0, 10, "p0")),
        Err(ArrowError::ComputeError("the query was cancelled".into())),
    ]);
    let err = Table::create(url)
        .execute_stream(failing)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InputStream { .. }), "{err}");
    let err = Table::open(url).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound { .. }), "{err}");

    // An empty stream gives no schema to take.
    let empty = futures::stream::iter(Vec::<Result<RecordBatch, ArrowError>>::new());
    let err = Table::create(url).execute_stream(empty).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { name: "schema", .. }),
        "{err}"
    );
    // With a schema it makes an empty table.
    let empty = futures::stream::iter(Vec::<Result<RecordBatch, ArrowError>>::new());
    let table = Table::create(url)
        .with_arrow_schema(&schema())
        .execute_stream(empty)
        .await
        .unwrap();
    assert_eq!(table.version(), 0);
    assert_eq!(table.snapshot().files().len(), 0);

    // A table already there is refused before any file is written.
    let files = data_files(dir.path());
    let stream = futures::stream::iter(vec![Ok::<_, ArrowError>(rows(0, 10, "p0"))]);
    let err = Table::create(url).execute_stream(stream).await.unwrap_err();
    assert!(matches!(err, Error::TableAlreadyExists { .. }), "{err}");
    assert_eq!(data_files(dir.path()), files);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_spread_over_many_partitions_writes_each_partition_once_and_whole() {
    // 400 small partitions and one of 200K rows, interleaved row by row, streamed as
    // 500-row slices of one batch (as pyarrow hands a table's slices over): small
    // partitions wait for their files, the large one opens its file mid-stream.
    let rows: Vec<(i64, String)> = (0..400_000i64)
        .map(|i| {
            let part = if i % 2 == 0 {
                "big".to_string()
            } else {
                format!("p{:03}", (i / 2) % 400)
            };
            (i, part)
        })
        .collect();
    let whole = batch(&rows);
    let slices: Vec<RecordBatch> = (0..whole.num_rows())
        .step_by(500)
        .map(|at| whole.slice(at, 500.min(whole.num_rows() - at)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let table = Table::create(url)
        .with_partition_columns(["part"])
        .execute_stream(futures::stream::iter(
            slices.into_iter().map(Ok::<_, ArrowError>),
        ))
        .await
        .unwrap();

    // One file per partition: the input is well under one encoder's run.
    assert_eq!(table.snapshot().files().count(), 401);
    assert_eq!(data_files(dir.path()), 401);
    let ids_in = |part: &'static str| {
        let scan = table
            .scan()
            .select(["id"])
            .filter(col("part").eq(lit(part)));
        async move { sorted_ids(&scan.collect().await.unwrap()) }
    };
    assert_eq!(
        ids_in("big").await,
        (0..400_000).step_by(2).collect::<Vec<i64>>()
    );
    let expected: Vec<i64> = (0..400_000i64)
        .filter(|i| i % 2 == 1 && (i / 2) % 400 == 7)
        .collect();
    assert_eq!(ids_in("p007").await, expected);
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 400_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_larger_than_an_encoders_run_still_writes_each_partition_once() {
    // 80 MiB of rows over 200 partitions, row by row, in 1,000-row batches: more than the
    // 64 MiB run a stream hands one encoder, so runs of consecutive rows would give each
    // partition a file per run.
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
        Field::new("payload", DataType::Utf8, false),
    ]));
    let rows = 80 * 1024;
    let batches: Vec<RecordBatch> = (0..rows / 1000 + 1)
        .map(|b| {
            let ids: Vec<i64> = (b * 1000..((b + 1) * 1000).min(rows)).collect();
            let parts: StringArray = ids
                .iter()
                .map(|i| Some(format!("p{:03}", i % 200)))
                .collect();
            let payload: StringArray = ids.iter().map(|i| Some(format!("{i:>1024}"))).collect();
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(arrow::array::Int64Array::from(ids)),
                    Arc::new(parts),
                    Arc::new(payload),
                ],
            )
            .unwrap()
        })
        .filter(|b| b.num_rows() > 0)
        .collect();
    let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    assert!(bytes > 80 << 20, "{bytes} bytes");
    let dir = tempfile::tempdir().unwrap();
    let table = Table::create(dir.path().to_str().unwrap())
        .with_partition_columns(["part"])
        .execute_stream(futures::stream::iter(
            batches.into_iter().map(Ok::<_, ArrowError>),
        ))
        .await
        .unwrap();

    assert_eq!(table.snapshot().files().count(), 200);
    assert_eq!(data_files(dir.path()), 200);
    let ids = table
        .scan()
        .select(["id"])
        .filter(col("part").eq(lit("p007")));
    let expected: Vec<i64> = (0..rows).filter(|i| i % 200 == 7).collect();
    assert_eq!(sorted_ids(&ids.collect().await.unwrap()), expected);
    assert_eq!(
        row_count(&table.scan().collect().await.unwrap()),
        rows as usize
    );
}
