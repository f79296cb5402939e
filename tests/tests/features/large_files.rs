//! Data files larger than the multipart threshold upload in parts while they encode: on
//! local files and on MinIO the rows come back whole and the upload was multipart; when
//! the store refuses the upload, the write fails with the store's error and commits
//! nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, BinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::{Error, StoreLocation, Table};
use tarn_store::{CountingStore, Fault, FaultOp, FaultRule, FaultStore, SplitMix64};
use tarn_tests::minio::s3;
use tarn_tests::unique;

/// `rows` rows of an id and 1 KiB of incompressible bytes: 40K rows make a ~40 MiB file.
fn batch(rows: usize, seed: u64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("blob", DataType::Binary, false),
    ]));
    let mut rng = SplitMix64(seed);
    let blobs: Vec<Vec<u8>> = (0..rows)
        .map(|_| {
            (0..128)
                .flat_map(|_| rng.next_u64().to_le_bytes())
                .collect()
        })
        .collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..rows as i64)),
            Arc::new(BinaryArray::from_iter_values(blobs.iter())),
        ],
    )
    .unwrap()
}

/// Writes one large file through a request counter and reads it back.
async fn write_and_read_back(location: StoreLocation) {
    let data = batch(40_000, 7);
    let counting = CountingStore::new(Arc::clone(location.store()));
    let counter = counting.counter();
    let counted = location.clone().with_store(Arc::new(counting));
    let mut table = Table::create_at(counted)
        .with_arrow_schema(&data.schema())
        .execute()
        .await
        .unwrap();
    counter.take();
    table
        .write([data.clone()])
        .with_target_file_size(1 << 30)
        .execute()
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!(table.snapshot().file_count(), 1);
    let size = table.snapshot().files().next().unwrap().size;
    assert!(size > 36 << 20, "a {size}-byte file");
    // Create, at least three 16 MiB parts, complete.
    assert!(counts.multipart_requests >= 5, "{counts}");

    let reopened = Table::open_at(location).await.unwrap();
    let rows = reopened.scan().collect().await.unwrap();
    let read: usize = rows.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(read, 40_000);
    let blobs = data
        .column(1)
        .as_any()
        .downcast_ref::<BinaryArray>()
        .unwrap();
    let mut seen = 0;
    for b in &rows {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let got = b.column(1).as_any().downcast_ref::<BinaryArray>().unwrap();
        for i in 0..b.num_rows() {
            assert_eq!(got.value(i), blobs.value(ids.value(i) as usize));
            seen += 1;
        }
    }
    assert_eq!(seen, blobs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_uploads_in_parts_to_local_files() {
    let dir = tempfile::tempdir().unwrap();
    write_and_read_back(tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_uploads_in_parts_to_minio() {
    write_and_read_back(s3().location(&unique("large-file"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_fails_the_write_with_the_store_error_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let data = batch(40_000, 9);
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&data.schema())
        .execute()
        .await
        .unwrap();
    for fault in [Fault::FailBefore, Fault::FailAfter] {
        let faulty = FaultStore::new(Arc::clone(location.store()), 3)
            .with_rule(FaultRule::new(FaultOp::Put, fault).with_glob("*.parquet"));
        let mut through = Table::open_at(location.clone().with_store(Arc::new(faulty)))
            .await
            .unwrap();
        let err = through
            .write([data.clone()])
            .with_target_file_size(1 << 30)
            .execute()
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Store { .. }), "{fault:?}: {err:?}");
        table.refresh().await.unwrap();
        assert_eq!(table.version(), 0, "{fault:?}");
        assert_eq!(table.snapshot().file_count(), 0);
    }
}
