//! Selective scans: the page index rules out pages whose bounds cannot match, and the
//! predicate runs in the decoder on its own columns first, so the other columns are
//! fetched and decoded only where rows pass. Checked on the local file system through a
//! request-counting store: the rows, the bytes fetched, deletion vectors, null pages,
//! partitions, mapped and added columns, and a predicate that fails; a merge-on-read delete
//! reads only its predicate's columns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStore;
use parquet::file::properties::WriterProperties;
use tarn::expr::{Expr, col, lit, parse_sql};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{ChangeStrategy, Error, StoreLocation, Table};
use tarn_store::{CountingStore, RequestCounts};

const ROWS: i64 = 200_000;

/// `id`, `bucket = id % 100` (unsorted: every page holds every bucket), `flag` (1 on a
/// block of 2,000 rows in the middle, else 0: the row group's statistics span both),
/// `payload`, 100 bytes that do not compress, and `late`, null below id 150,000 and the
/// id from there.
fn rows(ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("bucket", DataType::Int32, false),
        Field::new("flag", DataType::Int32, false),
        Field::new("payload", DataType::Utf8, false),
        Field::new("late", DataType::Int64, true),
    ]));
    let payload = |id: i64| {
        let mut x = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect::<String>()
    };
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(Int32Array::from_iter_values(
                ids.clone().map(|i| (i % 100) as i32),
            )),
            Arc::new(Int32Array::from_iter_values(
                ids.clone()
                    .map(|i| i32::from((100_000..102_000).contains(&i))),
            )),
            Arc::new(StringArray::from_iter_values(ids.clone().map(payload))),
            Arc::new(Int64Array::from_iter(
                ids.map(|i| (i >= 150_000).then_some(i)),
            )),
        ],
    )
    .unwrap()
}

fn ids_of(batches: &[RecordBatch]) -> Vec<i64> {
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            let ids = b.column_by_name("id").unwrap();
            ids.as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    out.sort_unstable();
    out
}

/// A table of one file and one row group of pages of at most 4,096 rows (`id` without a
/// dictionary), with deletion vectors enabled.
async fn one_row_group(location: &StoreLocation) -> Table {
    one_file(location, ROWS as usize).await
}

/// [`one_row_group`] with row groups of `group_rows` rows.
async fn one_file(location: &StoreLocation, group_rows: usize) -> Table {
    let data = rows(0..ROWS);
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&data.schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table
        .write([data])
        .with_writer_properties(
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(group_rows))
                .set_data_page_row_count_limit(4096)
                // Unique ids as plain pages, without a dictionary page every read needs.
                .set_column_dictionary_enabled("id".into(), false)
                .build(),
        )
        .execute()
        .await
        .unwrap();
    table
}

/// Scans `columns` of the table where `filter` holds, from a fresh handle through a
/// counting store (so no footer or range is held from before), with the requests the
/// scan made.
async fn counted_scan(
    location: &StoreLocation,
    columns: &[&str],
    filter: Option<Expr>,
) -> (Vec<RecordBatch>, RequestCounts) {
    let counting = CountingStore::new(Arc::clone(location.store()) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let table = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    counter.take();
    let mut scan = table.scan().select(columns.iter().copied());
    if let Some(filter) = filter {
        scan = scan.filter(filter);
    }
    let batches = scan.collect().await.unwrap();
    (batches, counter.take())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_keeping_a_block_of_rows_fetches_only_the_pages_that_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    one_row_group(&location).await;

    let (full, full_counts) = counted_scan(&location, &["id", "payload"], None).await;
    let full_bytes = full_counts.bytes_read;
    assert_eq!(ids_of(&full).len(), ROWS as usize);

    let (kept, selective_counts) =
        counted_scan(&location, &["id", "payload"], Some(col("flag").eq(lit(1)))).await;
    let selective_bytes = selective_counts.bytes_read;
    assert_eq!(ids_of(&kept), (100_000..102_000).collect::<Vec<_>>());

    // Statistics show every row passes: no filtering in the decoder, so no second fetch.
    let (every, every_counts) = counted_scan(
        &location,
        &["id", "payload"],
        Some(col("bucket").gt_eq(lit(0))),
    )
    .await;
    assert_eq!(ids_of(&every).len(), ROWS as usize);
    let (most, filtered_counts) = counted_scan(
        &location,
        &["id", "payload"],
        Some(col("bucket").gt_eq(lit(1))),
    )
    .await;
    assert_eq!(ids_of(&most).len(), ROWS as usize / 100 * 99);
    assert!(
        every_counts.gets < filtered_counts.gets,
        "every row: {every_counts}; filtered: {filtered_counts}"
    );
    let payloads = kept[0].column_by_name("payload").unwrap();
    assert_eq!(payloads.len(), kept[0].num_rows());
    // 1% of the rows: the payload pages around them, the id and flag columns whole.
    assert!(
        selective_bytes * 5 < full_bytes,
        "the selective scan read {selective_bytes} B, the full scan {full_bytes} B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_on_an_unsorted_column_keeps_the_same_rows_with_deletion_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let mut table = one_row_group(&location).await;
    table
        .delete(col("id").lt(lit(50_000i64)).and(col("bucket").eq(lit(7))))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert!(
        table
            .snapshot()
            .files()
            .all(|a| a.deletion_vector.is_some())
    );
    let kept = table
        .scan()
        .select(["id", "payload"])
        .filter(col("bucket").is_in([7, 8]))
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (0..ROWS)
        .filter(|i| i % 100 == 8 || (i % 100 == 7 && *i >= 50_000))
        .collect();
    assert_eq!(ids_of(&kept), expected);
    // Only the projection comes back, whatever the filter read.
    let names: Vec<String> = kept[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "payload"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_over_partitions_mapped_and_added_columns_keeps_the_right_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("n", DataType::Int64, true),
    ]));
    let batch = |ids: std::ops::Range<i64>, day: &str| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(ids.clone())),
                Arc::new(StringArray::from_iter_values(ids.clone().map(|_| day))),
                Arc::new(Int64Array::from_iter(
                    ids.map(|i| (i % 3 != 0).then_some(i % 10)),
                )),
            ],
        )
        .unwrap()
    };
    let mut table = Table::create(path.to_str().unwrap())
        .with_arrow_schema(&schema)
        .with_partition_columns(["day"])
        .with_property("delta.columnMapping.mode", "name")
        .execute()
        .await
        .unwrap();
    table
        .write([batch(0..1000, "d1"), batch(1000..2000, "d2")])
        .execute()
        .await
        .unwrap();
    // Under column mapping the files name their columns by physical names.
    let added = table
        .add_columns([StructField::new(
            "extra",
            DeltaType::Primitive(PrimitiveType::Long),
            true,
        )])
        .await
        .unwrap();
    assert_eq!(added.version, 2);

    // `n` is null on every third id; `extra` is null in every file: no row passes it.
    let kept = table
        .scan()
        .select(["id"])
        .filter(col("n").eq(lit(4i64)).and(col("day").eq(lit("d2"))))
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (1000..2000).filter(|i| i % 3 != 0 && i % 10 == 4).collect();
    assert_eq!(ids_of(&kept), expected);
    let none = table
        .scan()
        .select(["id"])
        .filter(col("extra").eq(lit(1i64)))
        .collect()
        .await
        .unwrap();
    assert_eq!(ids_of(&none), Vec::<i64>::new());
    let nulls = table
        .scan()
        .select(["id"])
        .filter(col("extra").is_null().and(col("n").is_null()))
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (0..2000).filter(|i| i % 3 == 0).collect();
    assert_eq!(ids_of(&nulls), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_failing_in_the_decoder_reports_tarns_error() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let table = one_row_group(&location).await;
    let overflowing = parse_sql("id + 9223372036854775000 > 0").unwrap();
    let err = table
        .scan()
        .select(["payload"])
        .filter(overflowing)
        .collect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Arrow { context, .. } if context.contains("computing")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_in_one_row_group_fetches_only_the_pages_its_bounds_allow() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    one_row_group(&location).await;

    // The predicate's column alone: no other column to spare, only pages to skip.
    let (full, full_counts) = counted_scan(&location, &["id"], None).await;
    let full_bytes = full_counts.bytes_read;
    assert_eq!(ids_of(&full).len(), ROWS as usize);

    let range = col("id")
        .gt_eq(lit(120_000i64))
        .and(col("id").lt(lit(122_000i64)));
    let (kept, selective_counts) = counted_scan(&location, &["id"], Some(range)).await;
    let selective_bytes = selective_counts.bytes_read;
    assert_eq!(ids_of(&kept), (120_000..122_000).collect::<Vec<_>>());
    assert!(
        selective_bytes * 5 < full_bytes,
        "the selective scan read {selective_bytes} B, the full scan {full_bytes} B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_ruled_out_meet_deletion_vectors_and_null_pages_without_losing_rows() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let mut table = one_row_group(&location).await;
    table
        .delete(col("bucket").eq(lit(3)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let live = |i: &i64| i % 100 != 3;

    // Pages across a page boundary, minus the deleted rows.
    let kept = table
        .scan()
        .select(["id"])
        .filter(
            col("id")
                .gt_eq(lit(4_000i64))
                .and(col("id").lt(lit(9_000i64))),
        )
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (4_000..9_000).filter(live).collect();
    assert_eq!(ids_of(&kept), expected);

    // Pages of only nulls have no bounds; their null counts decide.
    let non_null = table
        .scan()
        .select(["id", "payload"])
        .filter(
            col("late")
                .is_not_null()
                .and(col("late").lt(lit(151_000i64))),
        )
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (150_000..151_000).filter(live).collect();
    assert_eq!(ids_of(&non_null), expected);
    let nulls = table
        .scan()
        .select(["id"])
        .filter(col("late").is_null().and(col("id").gt_eq(lit(149_000i64))))
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (149_000..150_000).filter(live).collect();
    assert_eq!(ids_of(&nulls), expected);
    // Across columns: an OR keeps the pages either side allows.
    let either = table
        .scan()
        .select(["id"])
        .filter(col("id").lt(lit(10i64)).or(col("late").gt(lit(199_990i64))))
        .collect()
        .await
        .unwrap();
    let expected: Vec<i64> = (0..10).chain(199_991..ROWS).filter(live).collect();
    assert_eq!(ids_of(&either), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_ruled_out_across_row_groups_decoded_in_runs_keep_every_live_match() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    // Ten row groups of 20,000 rows in pages of 4,096: one file, read in several runs.
    let mut table = one_file(&location, 20_000).await;
    table
        .delete(col("bucket").eq(lit(5)).or(col("id").eq(lit(61_000i64))))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let live = |i: &i64| i % 100 != 5 && *i != 61_000;
    // Two ranges, each across a row-group boundary, with pages ruled out around them.
    let ranges = col("id")
        .gt_eq(lit(38_000i64))
        .and(col("id").lt(lit(43_000i64)))
        .or(col("id")
            .gt_eq(lit(59_000i64))
            .and(col("id").lt(lit(61_500i64))));
    for columns in [vec!["id"], vec!["id", "payload"]] {
        let kept = table
            .scan()
            .select(columns.clone())
            .filter(ranges.clone())
            .collect()
            .await
            .unwrap();
        let expected: Vec<i64> = (38_000..43_000)
            .chain(59_000..61_500)
            .filter(live)
            .collect();
        assert_eq!(ids_of(&kept), expected, "{columns:?}");
    }
}

/// A merge-on-read delete only marks rows, so it reads its predicate's column and none
/// of the others (the 100-byte payloads are most of the file); the rows it marks are
/// gone and every other row stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_on_read_delete_reads_only_its_predicates_columns() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap();
    let file_bytes = one_row_group(&location)
        .await
        .snapshot()
        .files()
        .map(|a| a.size as u64)
        .sum::<u64>();
    let counting = CountingStore::new(Arc::clone(location.store()) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let mut table = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    counter.take();
    let outcome = table
        .delete(parse_sql("bucket < 10").unwrap())
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!(outcome.metrics.rows_deleted, ROWS as u64 / 10);
    assert_eq!(outcome.metrics.deletion_vectors_written, 1);
    assert!(
        counts.bytes_read * 5 < file_bytes,
        "the delete read {} B of a {file_bytes} B file",
        counts.bytes_read
    );
    let (left, _) = counted_scan(&location, &["id"], None).await;
    let kept: Vec<i64> = (0..ROWS).filter(|i| i % 100 >= 10).collect();
    assert_eq!(ids_of(&left), kept);
}
