//! MERGE with a source larger than its memory limit, on the local file system: the source
//! stream is spilled to local disk in key ranges and matched a range at a time. The table,
//! the metrics and the change data feed come out as the same merge of the same source held
//! in memory gives them, for both strategies and every kind of clause (NOT MATCHED BY
//! SOURCE ones included); duplicate matches and failing streams still commit nothing;
//! identity values drawn range by range never repeat; spill files are always removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::error::ArrowError;
use tarn::expr::{lit, source_col, target_col};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField, StructType};
use tarn::{ChangeStrategy, DmlOutcome, Error, MergeBuilder, Table};
use tarn_tests::log::commit_info_at;

/// So small that the test's source is cut into many ranges.
const TINY_LIMIT: usize = 8 * 1024;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("value", DataType::Utf8, true),
    ]))
}

fn batch(ids: Vec<Option<i64>>, prefix: &str) -> RecordBatch {
    let values: StringArray = ids
        .iter()
        .map(|i| Some(format!("{prefix}{}", i.unwrap_or(-1))))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(Int64Array::from(ids)), Arc::new(values)],
    )
    .unwrap()
}

/// A target of ids 0..9000 in three files, with deletion vectors and a change data feed.
async fn target(dir: &std::path::Path) -> Table {
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&schema())
        .with_property("delta.enableDeletionVectors", "true")
        .with_property("delta.enableChangeDataFeed", "true")
        .execute()
        .await
        .unwrap();
    for part in 0..3 {
        let ids = (part * 3000..(part + 1) * 3000).map(Some).collect();
        table.write([batch(ids, "v")]).execute().await.unwrap();
    }
    table
}

/// Every third id of -500..9500, scrambled, and five rows with a null key, in batches of
/// 256 rows.
fn source() -> Vec<RecordBatch> {
    let mut ids: Vec<Option<i64>> = (-500..9500).step_by(3).map(Some).collect();
    // A fixed shuffle: ranges must not depend on the source arriving sorted.
    for i in (1..ids.len()).rev() {
        ids.swap(i, (i * 7919) % (i + 1));
    }
    ids.extend([None; 5]);
    ids.chunks(256).map(|c| batch(c.to_vec(), "s")).collect()
}

/// The merge under test: every kind of clause.
fn clauses(merge: MergeBuilder<'_>, strategy: ChangeStrategy) -> MergeBuilder<'_> {
    merge
        .on(["id"])
        .when_matched_delete(Some(target_col("id").lt(lit(1000))))
        .when_matched_update(None, [("value", source_col("value"))])
        .when_not_matched_insert_all(Some(source_col("id").gt(lit(9000))))
        .when_not_matched_insert(None, [("value", lit("lonely"))])
        .when_not_matched_by_source_update(
            Some(target_col("id").lt(lit(500))),
            [("value", lit("orphan"))],
        )
        .when_not_matched_by_source_delete(Some(target_col("id").gt_eq(lit(8500))))
        .with_strategy(strategy)
}

/// (id, value) of every row, sorted.
async fn rows(table: &Table) -> Vec<(Option<i64>, Option<String>)> {
    let mut out = Vec::new();
    for b in table.scan().collect().await.unwrap() {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let values = b.column_by_name("value").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((
                ids.is_valid(i).then(|| ids.value(i)),
                values.is_valid(i).then(|| values.value(i).to_string()),
            ));
        }
    }
    out.sort();
    out
}

/// (id, value, change type) of the change feed of `version`, sorted.
async fn changes(table: &Table, version: i64) -> Vec<(Option<i64>, Option<String>, String)> {
    let mut out = Vec::new();
    for b in table.changes(version, Some(version)).await.unwrap() {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let values = b.column_by_name("value").unwrap().as_string::<i32>();
        let kinds = b
            .column_by_name(tarn::CHANGE_TYPE)
            .unwrap()
            .as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((
                ids.is_valid(i).then(|| ids.value(i)),
                values.is_valid(i).then(|| values.value(i).to_string()),
                kinds.value(i).to_string(),
            ));
        }
    }
    out.sort();
    out
}

fn counts(outcome: &DmlOutcome) -> (u64, u64, u64) {
    let m = &outcome.metrics;
    (m.rows_deleted, m.rows_updated, m.rows_inserted)
}

fn entries(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

async fn spilled_merge_matches_the_in_memory_one(strategy: ChangeStrategy, reader: bool) {
    let (a, b, spill) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut spilled = target(a.path()).await;
    let mut held = target(b.path()).await;

    let merge = match reader {
        true => spilled.merge_reader(RecordBatchIterator::new(
            source().into_iter().map(Ok),
            schema(),
        )),
        false => spilled.merge_stream(futures::stream::iter(
            source().into_iter().map(Ok::<_, ArrowError>),
        )),
    };
    let ranged = clauses(merge, strategy)
        .with_memory_limit(TINY_LIMIT)
        .with_spill_dir(spill.path())
        .execute()
        .await
        .unwrap();
    let whole = clauses(held.merge(source()), strategy)
        .execute()
        .await
        .unwrap();

    assert_eq!(rows(&spilled).await, rows(&held).await);
    assert_eq!(counts(&ranged), counts(&whole));
    // Deleted: 333 matched ids below 1000 and 333 unmatched ones from 8500. Updated: the
    // 2,667 other matches and 333 unmatched ids below 500. Inserted: 167 ids over 9000,
    // 167 negative ones and 5 null keys.
    assert_eq!(counts(&ranged), (666, 3000, 339), "{:?}", ranged.metrics);
    assert_eq!(
        changes(&spilled, ranged.commit.version).await,
        changes(&held, whole.commit.version).await
    );

    let info = commit_info_at(spilled.location(), ranged.commit.version)
        .await
        .unwrap();
    let ranges = info["operationParameters"]["sourceRanges"]
        .as_str()
        .map(|s| s.parse::<u64>().unwrap())
        .or_else(|| info["operationParameters"]["sourceRanges"].as_u64())
        .unwrap();
    assert!(ranges > 4, "{info}");
    let info = commit_info_at(held.location(), whole.commit.version)
        .await
        .unwrap();
    assert!(
        info["operationParameters"]["sourceRanges"].is_null(),
        "{info}"
    );
    assert_eq!(entries(spill.path()), 0, "spill files are removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_source_merges_on_read_as_one_held_in_memory() {
    spilled_merge_matches_the_in_memory_one(ChangeStrategy::MergeOnRead, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_source_merges_by_copy_as_one_held_in_memory() {
    spilled_merge_matches_the_in_memory_one(ChangeStrategy::CopyOnWrite, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_within_the_limit_is_not_spilled() {
    let (dir, spill) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut table = target(dir.path()).await;
    let outcome = clauses(
        table.merge_stream(futures::stream::iter(
            source().into_iter().map(Ok::<_, ArrowError>),
        )),
        ChangeStrategy::MergeOnRead,
    )
    .with_spill_dir(spill.path())
    .execute()
    .await
    .unwrap();
    assert_eq!(counts(&outcome), (666, 3000, 339));
    let info = commit_info_at(table.location(), outcome.commit.version)
        .await
        .unwrap();
    assert!(
        info["operationParameters"]["sourceRanges"].is_null(),
        "{info}"
    );
    assert_eq!(entries(spill.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_match_in_a_spilled_source_commits_nothing() {
    let (dir, spill) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut table = target(dir.path()).await;
    let version = table.version();
    let mut source = source();
    source.push(batch(vec![Some(42), Some(42)], "twice"));
    let err = clauses(
        table.merge_stream(futures::stream::iter(
            source.into_iter().map(Ok::<_, ArrowError>),
        )),
        ChangeStrategy::MergeOnRead,
    )
    .with_memory_limit(TINY_LIMIT)
    .with_spill_dir(spill.path())
    .execute()
    .await
    .unwrap_err();
    match &err {
        Error::MergeDuplicateMatch { key, .. } => assert!(key.contains("42"), "{err}"),
        other => panic!("expected a duplicate match, got {other}"),
    }
    table.refresh().await.unwrap();
    assert_eq!(table.version(), version);
    assert_eq!(entries(spill.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_stream_commits_nothing_and_leaves_no_spill() {
    let (dir, spill) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut table = target(dir.path()).await;
    let version = table.version();
    let items = source()
        .into_iter()
        .map(Ok)
        .chain([Err(ArrowError::ComputeError(
            "the upstream engine fell over".into(),
        ))]);
    let err = clauses(
        table.merge_stream(futures::stream::iter(items)),
        ChangeStrategy::CopyOnWrite,
    )
    .with_memory_limit(TINY_LIMIT)
    .with_spill_dir(spill.path())
    .execute()
    .await
    .unwrap_err();
    assert!(matches!(err, Error::InputStream { .. }), "{err}");
    assert!(err.to_string().contains("fell over"), "{err}");
    table.refresh().await.unwrap();
    assert_eq!(table.version(), version);
    assert_eq!(entries(spill.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_batch_of_another_schema_is_a_schema_mismatch() {
    let (dir, spill) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut table = target(dir.path()).await;
    let other = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![1, 2]))],
    )
    .unwrap();
    let mut source = source();
    source.push(other);
    let err = table
        .merge_stream(futures::stream::iter(
            source.into_iter().map(Ok::<_, ArrowError>),
        ))
        .on(["id"])
        .when_matched_update_all(None)
        .with_memory_limit(TINY_LIMIT)
        .with_spill_dir(spill.path())
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");
    assert_eq!(entries(spill.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_values_drawn_range_by_range_never_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let mut key = StructField::new("key", DeltaType::Primitive(PrimitiveType::Long), false);
    key.metadata.insert("delta.identity.start".into(), 1.into());
    key.metadata.insert("delta.identity.step".into(), 1.into());
    key.metadata
        .insert("delta.identity.allowExplicitInsert".into(), false.into());
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_schema(StructType::new(vec![
            key,
            StructField::new("id", DeltaType::Primitive(PrimitiveType::Long), true),
            StructField::new("value", DeltaType::Primitive(PrimitiveType::String), true),
        ]))
        .execute()
        .await
        .unwrap();
    let outcome = table
        .merge_stream(futures::stream::iter(
            source().into_iter().map(Ok::<_, ArrowError>),
        ))
        .on(["id"])
        .when_not_matched_insert_all(None)
        .with_memory_limit(TINY_LIMIT)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.metrics.rows_inserted, 3339);
    table
        .write([batch(vec![Some(100_000)], "later")])
        .execute()
        .await
        .unwrap();
    let mut keys: Vec<i64> = table
        .scan()
        .collect()
        .await
        .unwrap()
        .iter()
        .flat_map(|b| {
            b.column_by_name("key")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, (1..=3340).collect::<Vec<i64>>());
}

/// An upsert setting every column from the source (so only the target's keys are read
/// when no change feed is recorded).
fn upsert(merge: MergeBuilder<'_>) -> MergeBuilder<'_> {
    merge
        .on(["id"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .with_strategy(ChangeStrategy::MergeOnRead)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_records_the_old_rows_in_the_change_feed() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut spilled = target(a.path()).await;
    let mut held = target(b.path()).await;
    let stream = futures::stream::iter(source().into_iter().map(Ok::<_, ArrowError>));
    let ranged = upsert(spilled.merge_stream(stream))
        .with_memory_limit(TINY_LIMIT)
        .execute()
        .await
        .unwrap();
    let whole = upsert(held.merge(source())).execute().await.unwrap();
    for (table, version) in [
        (&spilled, ranged.commit.version),
        (&held, whole.commit.version),
    ] {
        let feed = changes(table, version).await;
        let old: Vec<_> = feed.iter().filter(|c| c.2 == "update_preimage").collect();
        assert_eq!(old.len(), 3000);
        // The old rows as they were, not keys beside nulls.
        for (id, value, _) in old {
            assert_eq!(value.as_deref(), Some(format!("v{}", id.unwrap()).as_str()));
        }
    }
    assert_eq!(rows(&spilled).await, rows(&held).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_source_with_a_new_dictionary_in_every_batch_merges() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = target(dir.path()).await;
    let dictionary = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new(
            "value",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
    ]));
    let batches: Vec<RecordBatch> = (0..20)
        .map(|i| {
            let ids: Vec<i64> = (i * 500..(i + 1) * 500).collect();
            let names: Vec<String> = ids.iter().map(|id| format!("d{}-{}", i, id % 3)).collect();
            let values: arrow::array::DictionaryArray<arrow::datatypes::Int32Type> =
                names.iter().map(|n| Some(n.as_str())).collect();
            RecordBatch::try_new(
                Arc::clone(&dictionary),
                vec![Arc::new(Int64Array::from(ids)), Arc::new(values)],
            )
            .unwrap()
        })
        .collect();
    let outcome = upsert(table.merge_stream(futures::stream::iter(
        batches.into_iter().map(Ok::<_, ArrowError>),
    )))
    .with_memory_limit(TINY_LIMIT)
    .execute()
    .await
    .unwrap();
    assert_eq!(
        (outcome.metrics.rows_updated, outcome.metrics.rows_inserted),
        (9000, 1000)
    );
    let all = rows(&table).await;
    assert_eq!(all.len(), 10_000);
    assert_eq!(all[4321], (Some(4321), Some("d8-1".to_string())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_stream_that_brings_no_batch_changes_only_unmatched_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = target(dir.path()).await;
    let version = table.version();
    let none = || futures::stream::iter(Vec::<Result<RecordBatch, ArrowError>>::new());
    // Nothing can match or be inserted: no commit.
    let outcome = upsert(table.merge_stream(none())).execute().await.unwrap();
    assert_eq!(counts(&outcome), (0, 0, 0));
    assert_eq!(table.version(), version);
    // Every target row is unmatched.
    let outcome = table
        .merge_stream(none())
        .on(["id"])
        .when_matched_delete(None)
        .when_not_matched_by_source_delete(Some(target_col("id").lt(lit(100))))
        .execute()
        .await
        .unwrap();
    assert_eq!(counts(&outcome), (100, 0, 0));
    assert_eq!(rows(&table).await.len(), 8900);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_source_stream_whose_batches_differ_is_a_schema_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = target(dir.path()).await;
    let narrower = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![1, 2]))],
    )
    .unwrap();
    let stream = futures::stream::iter(vec![
        Ok::<_, ArrowError>(batch(vec![Some(5)], "s")),
        Ok(narrower),
    ]);
    let err = upsert(table.merge_stream(stream))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_far_below_the_source_caps_the_ranges_and_still_merges() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut spilled = target(a.path()).await;
    let mut held = target(b.path()).await;
    let stream = futures::stream::iter(source().into_iter().map(Ok::<_, ArrowError>));
    let ranged = clauses(spilled.merge_stream(stream), ChangeStrategy::CopyOnWrite)
        .with_memory_limit(1)
        .execute()
        .await
        .unwrap();
    let whole = clauses(held.merge(source()), ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_eq!(counts(&ranged), counts(&whole));
    assert_eq!(rows(&spilled).await, rows(&held).await);
    let info = commit_info_at(spilled.location(), ranged.commit.version)
        .await
        .unwrap();
    let ranges: u64 = info["operationParameters"]["sourceRanges"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((100..=512).contains(&ranges), "{ranges} ranges");
}
