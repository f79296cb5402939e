//! How Tarn encodes the columns of the files it writes, read back from their footers: a
//! write arriving in small batches (as a stream or a Parquet reader yields them) still
//! judges each file's columns by enough rows, so sorted keys are delta-encoded and
//! repetitive columns keep their dictionary in every file, and the rows read back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use parquet::basic::Encoding;
use parquet::file::reader::{FileReader, SerializedFileReader};
use tarn::Table;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorted_keys_written_in_small_batches_are_delta_encoded_in_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("channel", DataType::Utf8, false),
    ]));
    // 600,000 rows in batches of 300: enough for a write split between encoders, and
    // each batch too small to judge a column by.
    let batches: Vec<RecordBatch> = (0..2_000i64)
        .map(|b| {
            let ids = b * 300..(b + 1) * 300;
            let channels = ids
                .clone()
                .map(|i| ["web", "store", "phone"][i as usize % 3]);
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from_iter_values(ids)),
                    Arc::new(StringArray::from_iter_values(channels)),
                ],
            )
            .unwrap()
        })
        .collect();
    let mut table = Table::create(root.to_str().unwrap())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    table.write(batches).execute().await.unwrap();

    let paths: Vec<String> = table.snapshot().files().map(|a| a.path.clone()).collect();
    assert!(!paths.is_empty());
    for path in &paths {
        let file = std::fs::File::open(root.join(path)).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        for group in reader.metadata().row_groups() {
            let encodings = |name: &str| {
                let column = group
                    .columns()
                    .iter()
                    .find(|c| c.column_path().string() == name)
                    .unwrap();
                column.encodings().collect::<Vec<Encoding>>()
            };
            let id = encodings("id");
            assert!(
                id.contains(&Encoding::DELTA_BINARY_PACKED),
                "{path}: {id:?}"
            );
            assert!(!id.contains(&Encoding::RLE_DICTIONARY), "{path}: {id:?}");
            let channel = encodings("channel");
            assert!(
                channel.contains(&Encoding::RLE_DICTIONARY),
                "{path}: {channel:?}"
            );
        }
    }

    let read = table.scan().select(["id"]).collect().await.unwrap();
    let mut ids: Vec<i64> = read
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..600_000).collect::<Vec<i64>>());
}
