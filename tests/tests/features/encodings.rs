//! How Tarn encodes the columns of the files it writes, read back from their footers: a
//! write arriving in small batches (as a stream or a Parquet reader yields them) still
//! judges each file's columns by enough rows, so sorted keys are delta-encoded and
//! repetitive columns keep their dictionary in every file, and the rows read back; and
//! each file takes the table's codec (`tarn.parquet.compression`, LZ4_RAW by default).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use parquet::basic::{Compression, Encoding};
use parquet::file::reader::{FileReader, SerializedFileReader};
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Error, Table};

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

/// The codec of every column chunk of a data file of `root`, checked to be one.
fn codec_of(root: &std::path::Path, path: &str) -> Compression {
    let file = std::fs::File::open(root.join(path)).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let codecs: Vec<Compression> = reader
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|g| g.columns().iter().map(|c| c.compression()))
        .collect();
    assert!(!codecs.is_empty(), "{path}");
    assert!(codecs.iter().all(|c| *c == codecs[0]), "{path}: {codecs:?}");
    codecs[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_files_take_the_tables_codec_and_are_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let batch = |from: i64| {
        let ids = from..from + 5_000;
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(ids.clone())),
                Arc::new(StringArray::from_iter_values(ids.map(|i| format!("n{i}")))),
            ],
        )
        .unwrap()
    };
    let mut table = Table::create(root.to_str().unwrap())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    let new_files = |table: &Table, before: &[String]| -> Vec<String> {
        table
            .snapshot()
            .files()
            .map(|a| a.path.clone())
            .filter(|p| !before.contains(p))
            .collect()
    };

    // By default: LZ4_RAW, named as Spark names such files.
    table.append([batch(0)]).await.unwrap();
    let first = new_files(&table, &[]);
    assert_eq!(first.len(), 1);
    assert!(first[0].ends_with("-c000.lz4raw.parquet"), "{first:?}");
    assert_eq!(codec_of(&root, &first[0]), Compression::LZ4_RAW);

    // Snappy for appends, when the table asks for it.
    let _ = table
        .set_properties([("tarn.parquet.compression", "snappy")])
        .await
        .unwrap();
    table.append([batch(5_000)]).await.unwrap();
    let second = new_files(&table, &first);
    assert_eq!(second.len(), 1);
    assert!(second[0].ends_with("-c000.snappy.parquet"), "{second:?}");
    assert_eq!(codec_of(&root, &second[0]), Compression::SNAPPY);

    // Zstd for the files a copy-on-write delete rewrites.
    let _ = table
        .set_properties([("tarn.parquet.compression", "ZSTD")])
        .await
        .unwrap();
    let before: Vec<String> = table.snapshot().files().map(|a| a.path.clone()).collect();
    table
        .delete(col("id").eq(lit(7i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let rewritten = new_files(&table, &before);
    assert_eq!(rewritten.len(), 1);
    assert!(
        rewritten[0].ends_with("-c000.zstd.parquet"),
        "{rewritten:?}"
    );
    assert!(matches!(
        codec_of(&root, &rewritten[0]),
        Compression::ZSTD(_)
    ));

    // A codec Tarn does not write is refused when set, naming the property, and commits
    // nothing; a table is not created with one either.
    let version = table.version();
    let err = table
        .set_properties([("tarn.parquet.compression", "lzo")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { name, .. } if name == "tarn.parquet.compression"),
        "{err}"
    );
    table.refresh().await.unwrap();
    assert_eq!(table.version(), version);
    let err = Table::create(dir.path().join("u").to_str().unwrap())
        .with_arrow_schema(&schema)
        .with_property("tarn.parquet.compression", "gzip-9")
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { name, .. } if name == "tarn.parquet.compression"),
        "{err}"
    );
    assert!(!dir.path().join("u").join("_delta_log").exists());

    // Every codec reads back: all rows but the deleted one.
    let read = table.scan().select(["id"]).collect().await.unwrap();
    let mut ids: Vec<i64> = read
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    let expected: Vec<i64> = (0..10_000).filter(|i| *i != 7).collect();
    assert_eq!(ids, expected);
}
