//! Table indices: creation, listing and drop; inline and deferred maintenance; scans and
//! row-level changes that use them; vacuum of their objects; bad input. On local files
//! and MinIO. The exactness property test is in `index_model.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use object_store::ObjectStore;
use tarn::ChangeStrategy;
use tarn::expr::{Expr, col, lit, source_col, text_match};
use tarn::{Error, IndexKind, IndexMode, StoreLocation, Table};
use tarn_store::{CountingStore, LatencyProfile, LatencyStore};
use tarn_tests::rows::{canonical_rows, row_count};

/// `id`, `customer` (unsorted across files), `segment` (few values), `note` (text).
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, true),
        Field::new("segment", DataType::Utf8, true),
        Field::new("note", DataType::Utf8, true),
    ]))
}

const WORDS: [&str; 8] = [
    "red", "green", "blue", "fox", "dog", "quick", "lazy", "river",
];

/// Rows `start..end`: customers spread so statistics cannot prune them.
fn batch(start: i64, end: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..end).collect();
    let customer: StringArray = ids
        .iter()
        .map(|i| (i % 17 != 0).then(|| format!("c{:04}", (i * 7919) % 997)))
        .collect();
    let segment: StringArray = ids
        .iter()
        .map(|i| (i % 11 != 0).then(|| ["retail", "pro", "gov"][(*i % 3) as usize]))
        .collect();
    let note: StringArray = ids
        .iter()
        .map(|i| {
            (i % 13 != 0).then(|| {
                (0..4)
                    .map(|k| WORDS[((i * 31 + k * 7) % 8) as usize])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        })
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(customer),
            Arc::new(segment),
            Arc::new(note),
        ],
    )
    .unwrap()
}

async fn table_at(location: &StoreLocation, properties: &[(&str, &str)]) -> Table {
    let mut builder = Table::create_at(location.clone()).with_arrow_schema(&schema());
    for (k, v) in properties {
        builder = builder.with_property(*k, *v);
    }
    builder.execute().await.unwrap()
}

/// The rows a predicate selects, with and without indices, must be the same.
async fn assert_exact(table: &Table, predicate: Expr) -> usize {
    let with = table
        .scan()
        .filter(predicate.clone())
        .collect()
        .await
        .unwrap();
    let without = table
        .scan()
        .filter(predicate.clone())
        .with_indices(false)
        .collect()
        .await
        .unwrap();
    assert_eq!(
        canonical_rows(&with),
        canonical_rows(&without),
        "{predicate}"
    );
    row_count(&with)
}

async fn indices_answer_scans_exactly(location: StoreLocation) {
    let mut table = table_at(&location, &[]).await;
    for i in 0..4 {
        table.append([batch(i * 500, i * 500 + 500)]).await.unwrap();
    }
    let btree = table.create_index("customer").execute().await.unwrap();
    assert_eq!(btree.name, "customer_idx");
    assert_eq!((btree.files_covered, btree.files_total), (4, 4));
    table
        .create_index("segment")
        .with_kind(IndexKind::Bitmap)
        .execute()
        .await
        .unwrap();
    table
        .create_index("note")
        .with_kind(IndexKind::FullText)
        .execute()
        .await
        .unwrap();
    // Appends after creation are covered in the same commit.
    table.append([batch(2000, 2600)]).await.unwrap();
    for info in table.indices().unwrap() {
        assert_eq!(info.files_covered, 5, "{}", info.name);
        assert_eq!(info.segments, 2, "{}", info.name);
    }

    let plan = table
        .scan()
        .filter(col("customer").eq(lit("c0042")))
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.indices.len(), 1);
    assert_eq!(plan.indices[0].index, "customer_idx");
    assert_eq!(plan.indices[0].files_covered, 5);
    assert_eq!(plan.skipped_by_index + plan.files.len(), 5);
    assert!(assert_exact(&table, col("customer").eq(lit("c0042"))).await > 0);
    assert_exact(&table, col("customer").eq(lit("nobody"))).await;
    assert_exact(
        &table,
        col("customer").is_in(["c0001", "c0500", "c0996", "x"]),
    )
    .await;
    assert_exact(&table, col("customer").gt_eq(lit("c0990"))).await;
    assert_exact(
        &table,
        col("customer")
            .lt(lit("c0005"))
            .and(col("id").gt(lit(100i64))),
    )
    .await;
    assert_exact(&table, col("customer").is_null()).await;
    assert_exact(&table, col("segment").eq(lit("gov"))).await;
    assert_exact(&table, col("segment").is_null()).await;
    assert_exact(&table, col("segment").is_in(["pro", "retail"])).await;
    assert_exact(&table, text_match("note", "quick fox")).await;
    assert_exact(&table, text_match("note", "\"lazy dog\" OR river")).await;
    assert_exact(
        &table,
        text_match("note", "red -blue").and(col("segment").eq(lit("pro"))),
    )
    .await;
    let plan = table
        .scan()
        .filter(text_match("note", "quick").and(col("customer").eq(lit("c0100"))))
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.indices.len(), 2, "{:?}", plan.indices);

    // Deletes through the index: merge-on-read finds its rows without reading data.
    let before = assert_exact(&table, col("customer").eq(lit("c0042"))).await;
    let _ = table
        .set_properties([("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    let outcome = table
        .delete(col("customer").eq(lit("c0042")))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.metrics.rows_deleted, before as u64);
    assert_eq!(outcome.metrics.files_scanned, 0, "no data file read");
    assert_eq!(
        assert_exact(&table, col("customer").eq(lit("c0042"))).await,
        0
    );
    // Copy-on-write rewrites hit files; their replacements are indexed inline.
    table
        .update()
        .filter(col("customer").eq(lit("c0100")))
        .set("segment", lit("vip"))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert!(assert_exact(&table, col("segment").eq(lit("vip"))).await > 0);
    for info in table.indices().unwrap() {
        assert_eq!(info.files_covered, info.files_total, "{}", info.name);
    }
    // A merge-on-read merge finds its target rows through the key index.
    table
        .merge([batch(100, 140)])
        .on(["id"])
        .when_matched_update(None, [("note", source_col("customer"))])
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_exact(&table, col("customer").eq(lit("c0100"))).await;
    assert_exact(&table, text_match("note", "c0001")).await;

    // Optimize rewrites files and indexes them, retiring the segments of the files it
    // removed; appends add a segment each and optimize_indices merges them.
    table.optimize().execute().await.unwrap();
    for info in table.indices().unwrap() {
        assert_eq!(info.segments, 1, "{}", info.name);
    }
    table.append([batch(5000, 5100)]).await.unwrap();
    table.append([batch(5100, 5200)]).await.unwrap();
    for info in table.indices().unwrap() {
        assert_eq!(info.segments, 3, "{}", info.name);
    }
    let merged = table.optimize_indices().await.unwrap();
    assert!(merged.segments_removed > 0, "{merged:?}");
    for info in table.indices().unwrap() {
        assert_eq!(info.files_covered, info.files_total, "{}", info.name);
        assert_eq!(info.segments, 1, "{}", info.name);
    }
    assert_exact(&table, col("customer").is_in(["c0001", "c0500"])).await;
    assert_exact(&table, text_match("note", "green")).await;

    // Drop: scans fall back; text_match needs the index.
    let _ = table.drop_index("customer_idx").await.unwrap();
    let plan = table
        .scan()
        .filter(col("customer").eq(lit("c0001")))
        .plan()
        .await
        .unwrap();
    assert!(plan.indices.is_empty());
    let _ = table.drop_index("note_idx").await.unwrap();
    let err = table
        .scan()
        .filter(text_match("note", "fox"))
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TextMatchWithoutIndex { .. }), "{err}");
    let err = table.drop_index("note_idx").await.unwrap_err();
    assert!(matches!(err, Error::IndexNotFound { .. }), "{err}");

    // A fresh handle reads the same.
    let reopened = Table::open_at(location).await.unwrap();
    assert_exact(&reopened, col("segment").eq(lit("gov"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indices_answer_scans_exactly_on_local_files() {
    let dir = tempfile::tempdir().unwrap();
    indices_answer_scans_exactly(tarn_store::open(dir.path().to_str().unwrap()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indices_answer_scans_exactly_on_minio() {
    indices_answer_scans_exactly(tarn_tests::minio::s3().location("indices")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_indices_cover_new_files_after_optimize_indices() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[]).await;
    table.append([batch(0, 300)]).await.unwrap();
    let info = table
        .create_index("customer")
        .with_mode(IndexMode::Deferred)
        .execute()
        .await
        .unwrap();
    assert_eq!((info.segments, info.files_covered), (0, 0));
    table.append([batch(300, 600)]).await.unwrap();
    assert_exact(&table, col("customer").eq(lit("c0007"))).await;
    let outcome = table.optimize_indices().await.unwrap();
    assert_eq!(outcome.files_indexed, 2);
    let info = &table.indices().unwrap()[0];
    assert_eq!((info.files_covered, info.files_total), (2, 2));
    let plan = table
        .scan()
        .filter(col("customer").eq(lit("c0007")))
        .plan()
        .await
        .unwrap();
    assert_eq!(
        plan.indices[0].files_covered,
        plan.files.len() + plan.skipped_by_index
    );
    assert!(assert_exact(&table, col("customer").eq(lit("c0712"))).await > 0);
    // Nothing left to do.
    let again = table.optimize_indices().await.unwrap();
    assert!(again.commit.is_none(), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_point_lookup_on_a_thousand_files_waits_on_two_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[]).await;
    // 1,000 files of 20 rows, 40 commits; `customer` is a unique key permuted over the
    // table, so every file's statistics span nearly all keys and cannot prune.
    for commit in 0..40i64 {
        let batches: Vec<RecordBatch> = (0..25)
            .map(|f| {
                let start = (commit * 25 + f) * 20;
                let mut b = batch(start, start + 20);
                let keys: StringArray = (start..start + 20)
                    .map(|i| Some(format!("k{:05}", (i * 7919) % 20_000)))
                    .collect();
                let mut columns = b.columns().to_vec();
                columns[1] = Arc::new(keys);
                b = RecordBatch::try_new(schema(), columns).unwrap();
                b
            })
            .collect();
        table
            .write(batches)
            .with_target_file_size(1)
            .execute()
            .await
            .unwrap();
    }
    assert_eq!(table.snapshot().file_count(), 1000);
    table.create_index("customer").execute().await.unwrap();
    let slow = LatencyStore::new(
        Arc::clone(location.store()),
        LatencyProfile::s3_express().scaled(0.1),
        7,
    );
    let counting = CountingStore::new(Arc::new(slow) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let counted = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    let open_counts = counter.take();
    assert_eq!(open_counts.critical_path, 2, "{open_counts}");
    let lookup = |key: &str| {
        counted
            .scan()
            .filter(col("customer").eq(lit(key.to_string())))
            .collect()
    };
    // Cold: the index's lookup, its page, the data file's footer and its rows.
    // A key mid-range: nearly every file's statistics span it.
    let key = "k10000".to_string();
    let cold = lookup(&key).await.unwrap();
    let cold_counts = counter.take();
    let expected = table
        .scan()
        .filter(col("customer").eq(lit(key.clone())))
        .with_indices(false)
        .collect()
        .await
        .unwrap();
    assert_eq!(row_count(&expected), 1);
    assert_eq!(canonical_rows(&cold), canonical_rows(&expected));
    let plan = table
        .scan()
        .filter(col("customer").eq(lit(key.clone())))
        .plan()
        .await
        .unwrap();
    assert!(
        plan.skipped_by_stats < 10,
        "statistics can hardly prune the key"
    );
    let files = plan.files.len();
    assert_eq!(files, 1);
    // Warm: the index page and the data file's footer are held; the lookup reads the
    // row's pages.
    let warm = lookup(&key).await.unwrap();
    let warm_counts = counter.take();
    assert_eq!(canonical_rows(&warm), canonical_rows(&expected));
    assert!(warm_counts.critical_path <= 2, "{warm_counts}");
    assert!(warm_counts.gets <= 2, "{warm_counts}");
    // Cold, after the snapshot: the index's footer and lookup (one suffix GET, which
    // holds this small index's page too), the data file's footer, its pages.
    assert!(cold_counts.critical_path <= 4, "{cold_counts}");
    // Another key, warm index: its page, then the file's footer and pages.
    let other = "k09999".to_string();
    assert_eq!(row_count(&lookup(&other).await.unwrap()), 1);
    let other_counts = counter.take();
    assert!(other_counts.critical_path <= 3, "{other_counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_index_input_is_refused_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[]).await;
    table.append([batch(0, 100)]).await.unwrap();
    let version = table.version();
    let err = table.create_index("nope").execute().await.unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    let err = table
        .create_index("id")
        .with_kind(IndexKind::FullText)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedIndexType { .. }), "{err}");
    let err = table
        .create_index("id")
        .with_name("bad name/..")
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert_eq!(table.version(), version);
    table.create_index("customer").execute().await.unwrap();
    let err = table
        .create_index("segment")
        .with_name("customer_idx")
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IndexAlreadyExists { .. }), "{err}");
    let err = table
        .scan()
        .filter(text_match("note", "fox"))
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TextMatchWithoutIndex { .. }), "{err}");
    let err = table
        .scan()
        .filter(text_match("id", "fox"))
        .plan()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");

    // A damaged index object: a typed error naming it; without indices the table reads.
    let object = std::fs::read_dir(dir.path().join("_tarn_index/customer_idx"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let good = std::fs::read(&object).unwrap();
    std::fs::write(&object, &good[..good.len() / 2]).unwrap();
    let fresh = Table::open_at(location.clone()).await.unwrap();
    let err = fresh
        .scan()
        .filter(col("customer").eq(lit("c0940")))
        .collect()
        .await
        .unwrap_err();
    let name = object.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        matches!(&err, Error::Index { index, .. } if index == "customer_idx"),
        "{err}"
    );
    assert!(err.to_string().contains(&name), "{err}");
    std::fs::remove_file(&object).unwrap();
    let err = fresh
        .scan()
        .filter(col("customer").eq(lit("c0940")))
        .collect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Index { source, .. } if matches!(**source, tarn_index::Error::NotFound { .. })),
        "{err}"
    );
    let rows = fresh
        .scan()
        .filter(col("customer").eq(lit("c0940")))
        .with_indices(false)
        .collect()
        .await
        .unwrap();
    assert!(row_count(&rows) > 0);

    // An index recorded by a newer format: refused by scans that would use it.
    let newer = table
        .snapshot()
        .domain_metadata("tarn.indices")
        .unwrap()
        .replace("\"format\":1", "\"format\":7");
    let mut txn = table.transaction();
    txn.set_domain_metadata("tarn.indices", newer);
    let _ = table.commit(txn).await.unwrap();
    let err = table
        .scan()
        .filter(col("customer").eq(lit("c0001")))
        .plan()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedIndexFormat { version: 7, .. }),
        "{err}"
    );
    // Writes leave it alone, and reads without indices still work.
    table.append([batch(100, 150)]).await.unwrap();
    let all = table.scan().with_indices(false).collect().await.unwrap();
    assert_eq!(row_count(&all), 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_deletes_index_objects_no_retained_version_uses() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[]).await;
    table.append([batch(0, 200)]).await.unwrap();
    table.create_index("customer").execute().await.unwrap();
    table.append([batch(200, 400)]).await.unwrap();
    let objects = |name: &str| -> usize {
        std::fs::read_dir(dir.path().join("_tarn_index").join(name))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(objects("customer_idx"), 2);
    // Merged: the two old segments leave the table but a version within the retention
    // still uses them.
    table.optimize_indices().await.unwrap();
    assert_eq!(objects("customer_idx"), 3);
    let outcome = table.vacuum().with_dry_run(true).execute().await.unwrap();
    assert!(
        !outcome.files.iter().any(|f| f.starts_with("_tarn_index")),
        "{:?}",
        outcome.files
    );
    // A day later, with no retention: only the live segment stays.
    let later = tarn::ManualClock::starting_now();
    later.advance(86_400_000);
    let outcome = table
        .clone()
        .with_clock(Arc::new(later.clone()))
        .vacuum()
        .with_retention(Duration::ZERO)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        outcome
            .files
            .iter()
            .filter(|f| f.starts_with("_tarn_index"))
            .count(),
        2,
        "{:?}",
        outcome.files
    );
    assert_eq!(objects("customer_idx"), 1);
    assert_exact(&table, col("customer").eq(lit("c0013"))).await;
    let _ = table.drop_index("customer_idx").await.unwrap();
    table
        .clone()
        .with_clock(Arc::new(later))
        .vacuum()
        .with_retention(Duration::ZERO)
        .with_enforce_retention(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(objects("customer_idx"), 0);
    // The store holds nothing else of the index.
    let listed: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(
        location
            .store()
            .list(Some(&location.root().clone().join("_tarn_index"))),
    )
    .await
    .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_segments_upload_beside_the_data_not_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[]).await;
    table.append([batch(0, 1000)]).await.unwrap();
    table.create_index("customer").execute().await.unwrap();
    table
        .create_index("segment")
        .with_kind(IndexKind::Bitmap)
        .execute()
        .await
        .unwrap();
    let slow = LatencyStore::new(
        Arc::clone(location.store()),
        // Latency well above the segments' build time, as on S3.
        LatencyProfile::s3_standard(),
        3,
    );
    let counting = CountingStore::new(Arc::new(slow) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let mut counted = Table::open_at(location.clone().with_store(Arc::new(counting)))
        .await
        .unwrap();
    counter.take();
    let outcome = counted.append([batch(1000, 3000)]).await.unwrap();
    let counts = counter.take();
    // One data file and two segments, uploaded at once; then the commit.
    assert_eq!(counts.puts, 4, "{counts}");
    assert_eq!(counts.critical_path, 2, "{counts}");
    // The segments cover the new file, in the same commit.
    let indices = counted.indices().unwrap();
    assert!(
        indices.iter().all(|i| i.files_covered == i.files_total),
        "{indices:?}"
    );
    assert_eq!(outcome.rows_written, 2000);
    assert_exact(&counted, col("customer").eq(lit("c0042".to_string()))).await;
    assert_exact(&counted, col("segment").eq(lit("pro".to_string()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_under_the_inline_minimum_are_left_to_statistics_until_optimize() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[("tarn.index.inlineMinRows", "100")]).await;
    table.append([batch(0, 500)]).await.unwrap();
    table.create_index("customer").execute().await.unwrap();
    table
        .create_index("note")
        .with_kind(IndexKind::FullText)
        .execute()
        .await
        .unwrap();
    // 40 rows: under the minimum, no segment; 300 rows: a segment.
    table.append([batch(500, 540)]).await.unwrap();
    let covered = |table: &Table| -> Vec<(usize, usize)> {
        table
            .indices()
            .unwrap()
            .iter()
            .map(|i| (i.files_covered, i.files_total))
            .collect()
    };
    assert_eq!(covered(&table), vec![(1, 2), (1, 2)]);
    table.append([batch(540, 840)]).await.unwrap();
    assert_eq!(covered(&table), vec![(2, 3), (2, 3)]);
    // Queries stay exact: the small file is read with statistics, text_match scanned.
    // `c0356` is a customer of row 501, in the small file.
    assert!(assert_exact(&table, col("customer").eq(lit("c0356".to_string()))).await > 0);
    for key in ["c0042", "c0518", "c0777"] {
        assert_exact(&table, col("customer").eq(lit(key.to_string()))).await;
    }
    assert_exact(&table, text_match("note", "fox")).await;
    let optimized = table.optimize_indices().await.unwrap();
    assert!(optimized.files_indexed >= 1, "{optimized:?}");
    assert_eq!(covered(&table), vec![(3, 3), (3, 3)]);
    assert_exact(&table, text_match("note", "fox")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_write_indexes_its_files_a_run_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let mut table = table_at(&location, &[("tarn.index.streamSegmentRows", "1500")]).await;
    table.append([batch(0, 100)]).await.unwrap();
    table.create_index("customer").execute().await.unwrap();
    table
        .create_index("note")
        .with_kind(IndexKind::FullText)
        .execute()
        .await
        .unwrap();
    let stream = futures::stream::iter(
        (0..10).map(|i| Ok::<_, arrow::error::ArrowError>(batch(100 + i * 1000, 1100 + i * 1000))),
    );
    let outcome = table
        .write_stream(stream)
        .with_target_file_size(16 * 1024)
        .execute()
        .await
        .unwrap();
    assert!(outcome.files_added >= 3, "{} files", outcome.files_added);
    // Every new file is covered; each file holds more than 1,500 rows, so each is a run
    // of its own, with a segment per index.
    for index in table.indices().unwrap() {
        assert_eq!(index.files_covered, index.files_total, "{index:?}");
    }
    let segments = tarn_tests::log::actions_at(table.location(), outcome.commit.version)
        .await
        .into_iter()
        .filter(|a| {
            a["domainMetadata"]["domain"]
                .as_str()
                .is_some_and(|d| d.starts_with("tarn.index.customer_idx."))
        })
        .count();
    assert_eq!(segments, outcome.files_added, "customer segments");
    for key in ["c0042", "c0518", "c0777"] {
        assert!(assert_exact(&table, col("customer").eq(lit(key.to_string()))).await > 0);
    }
    assert_exact(&table, text_match("note", "fox")).await;
}
