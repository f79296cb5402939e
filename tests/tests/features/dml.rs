//! DELETE, UPDATE and MERGE, copy-on-write and merge-on-read, on memory, local files,
//! MinIO, Azurite and
//! fake GCS: the rows after each change equal an in-memory model; merge-on-read writes
//! deletion vectors (inline or in files) and unions them; reads are targeted by partition
//! values and statistics; concurrent DV changes rebase when disjoint and conflict when
//! not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use tarn::expr::{col, lit, source_col, target_col};
use tarn::{ChangeStrategy, ConflictReason, Error, Snapshot, StoreLocation, Table};

/// id -> (country, amount, note)
type Model = BTreeMap<i64, (String, f64, Option<String>)>;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("country", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("note", DataType::Utf8, true),
    ]))
}

const COUNTRIES: [&str; 3] = ["NL", "FR", "DE"];

fn rows(ids: std::ops::Range<i64>) -> (RecordBatch, Model) {
    let ids: Vec<i64> = ids.collect();
    let model: Model = ids
        .iter()
        .map(|i| {
            (
                *i,
                (
                    COUNTRIES[(*i % 3) as usize].to_string(),
                    *i as f64 * 2.5,
                    (i % 4 != 0).then(|| format!("n{i}")),
                ),
            )
        })
        .collect();
    (batch(&model), model)
}

fn batch(model: &Model) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(model.keys().copied().collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                model.values().map(|r| r.0.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                model.values().map(|r| r.1).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                model.values().map(|r| r.2.clone()).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

async fn read(snapshot: &Snapshot) -> Model {
    let mut out = Model::new();
    for b in snapshot.scan().collect().await.unwrap() {
        let ids = b.column(0).as_primitive::<Int64Type>();
        let countries = b.column(1).as_string::<i32>();
        let amounts = b.column(2).as_primitive::<Float64Type>();
        let notes = b.column(3).as_string::<i32>();
        for i in 0..b.num_rows() {
            let note =
                (!arrow::array::Array::is_null(notes, i)).then(|| notes.value(i).to_string());
            let previous = out.insert(
                ids.value(i),
                (countries.value(i).to_string(), amounts.value(i), note),
            );
            assert!(previous.is_none(), "id {} twice", ids.value(i));
        }
    }
    // COUNT(*) answered from the log (numRecords minus DV cardinalities) agrees with
    // the rows read, and so does a count of one partition.
    let counted = snapshot.scan().count_outcome().await.unwrap();
    assert_eq!(counted.rows, out.len() as u64);
    assert_eq!(counted.files_read, 0, "{counted:?}");
    assert_eq!(counted.files_from_log, snapshot.file_count());
    let country = COUNTRIES[0];
    let in_country = snapshot
        .scan()
        .filter(col("country").eq(lit(country)))
        .count()
        .await
        .unwrap();
    let expected = out.values().filter(|(c, _, _)| c == country).count();
    assert_eq!(in_country, expected as u64);
    // A data predicate: statistics answer the files wholly inside it, the rest are read.
    let above = snapshot
        .scan()
        .filter(col("id").gt_eq(lit(40i64)).and(col("id").is_not_null()))
        .count()
        .await
        .unwrap();
    assert_eq!(above, out.keys().filter(|id| **id >= 40).count() as u64);
    out
}

struct Target {
    location: StoreLocation,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Target {
    Target {
        location: tarn_store::open(&format!("memory://dml/{}", tarn_tests::unique("t"))).unwrap(),
        _dir: None,
    }
}

fn local() -> Target {
    let dir = tempfile::tempdir().unwrap();
    Target {
        location: tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap(),
        _dir: Some(dir),
    }
}

fn minio() -> Target {
    Target {
        location: tarn_tests::minio::s3().location("dml"),
        _dir: None,
    }
}

fn azurite() -> Target {
    Target {
        location: tarn_tests::azurite::azure().location("dml"),
        _dir: None,
    }
}

fn fake_gcs() -> Target {
    Target {
        location: tarn_tests::gcs::gcs().location("dml"),
        _dir: None,
    }
}

/// A table of three appends (30 rows each), with DVs enabled for merge-on-read.
async fn table(target: &Target, strategy: ChangeStrategy) -> (Table, Model) {
    let mut t = Table::create_at(target.location.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["country"])
        .execute()
        .await
        .unwrap();
    if strategy == ChangeStrategy::MergeOnRead {
        let outcome = t
            .set_properties([("delta.enableDeletionVectors", "true")])
            .await
            .unwrap();
        assert!(
            outcome
                .snapshot
                .protocol()
                .has_reader_feature("deletionVectors")
        );
    }
    let mut model = Model::new();
    for i in 0..3 {
        let (b, m) = rows(i * 30..i * 30 + 30);
        t.append([b]).await.unwrap();
        model.extend(m);
    }
    (t, model)
}

fn dv_count(snapshot: &Snapshot) -> usize {
    snapshot
        .files()
        .filter(|a| a.deletion_vector.is_some())
        .count()
}

async fn deletes(target: Target, strategy: ChangeStrategy) {
    let (mut t, mut model) = table(&target, strategy).await;
    let before = t.version();
    let outcome = t
        .delete(col("amount").gt(lit(150.0)))
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    model.retain(|_, r| r.1 <= 150.0);
    assert_eq!(outcome.metrics.rows_deleted, 29);
    assert_eq!(read(t.snapshot()).await, model);
    match strategy {
        ChangeStrategy::MergeOnRead => {
            assert!(outcome.metrics.deletion_vectors_written > 0);
            assert!(dv_count(t.snapshot()) > 0);
        }
        ChangeStrategy::CopyOnWrite => assert_eq!(dv_count(t.snapshot()), 0),
    }
    // A second delete touching the same files unions their deletion vectors.
    t.delete(col("note").is_null())
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    model.retain(|_, r| r.2.is_some());
    assert_eq!(read(t.snapshot()).await, model);
    // A partition delete removes whole files without reading them.
    let outcome = t
        .delete(col("country").eq(lit("FR")))
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    model.retain(|_, r| r.0 != "FR");
    assert_eq!(outcome.metrics.files_scanned, 0);
    assert_eq!(read(t.snapshot()).await, model);
    // Earlier versions still read in full, and a fresh reader sees the same.
    let old = Snapshot::builder(target.location.clone())
        .at_version(before)
        .build()
        .await
        .unwrap();
    assert_eq!(read(&old).await.len(), 90);
    let fresh = Table::open_at(target.location.clone()).await.unwrap();
    assert_eq!(read(fresh.snapshot()).await, model);
}

async fn updates(target: Target, strategy: ChangeStrategy) {
    let (mut t, mut model) = table(&target, strategy).await;
    let outcome = t
        .update()
        .filter(col("id").lt(lit(40)).and(col("note").is_not_null()))
        .set("amount", col("amount") * lit(2.0) + lit(1.0))
        .set("note", lit("updated"))
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    let mut changed = 0;
    for (id, r) in model.iter_mut() {
        if *id < 40 && r.2.is_some() {
            r.1 = r.1 * 2.0 + 1.0;
            r.2 = Some("updated".into());
            changed += 1;
        }
    }
    assert_eq!(outcome.metrics.rows_updated, changed);
    assert_eq!(read(t.snapshot()).await, model);

    // Moving rows between partitions must be asked for.
    let err = t
        .update()
        .filter(col("id").eq(lit(1)))
        .set("country", lit("BE"))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                name: "assignments",
                ..
            }
        ),
        "{err}"
    );
    t.update()
        .filter(col("id").eq(lit(1)))
        .set("country", lit("BE"))
        .with_partition_moves(true)
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    model.get_mut(&1).unwrap().0 = "BE".into();
    assert_eq!(read(t.snapshot()).await, model);
    let version = t.version();
    // A null in a non-nullable column, a mistyped value, an unknown column: refused.
    let err = t
        .update()
        .set("id", lit(tarn::expr::Scalar::Null))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");
    let err = t
        .update()
        .set("amount", lit("lots"))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
    let err = t.update().set("nope", lit(1)).execute().await.unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    assert_eq!(t.version(), version);
}

async fn merges(target: Target, strategy: ChangeStrategy) {
    let (mut t, mut model) = table(&target, strategy).await;
    // Source: ids 80..100 (20 matches with 80..89, 10 new), amounts negative.
    let source_model: Model = (80..100)
        .map(|i| {
            (
                i,
                (COUNTRIES[(i % 3) as usize].to_string(), -(i as f64), None),
            )
        })
        .collect();
    let outcome = t
        .merge([batch(&source_model)])
        .on(["id"])
        .when_matched_delete(Some(target_col("id").lt(lit(83))))
        .when_matched_update(
            None,
            [("amount", source_col("amount")), ("note", lit("merged"))],
        )
        .when_not_matched_insert_all(Some(source_col("id").lt(lit(95))))
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    for (id, s) in &source_model {
        match model.get_mut(id) {
            Some(_) if *id < 83 => {
                model.remove(id);
            }
            Some(r) => {
                r.1 = s.1;
                r.2 = Some("merged".into());
            }
            None if *id < 95 => {
                model.insert(*id, s.clone());
            }
            None => {}
        }
    }
    assert_eq!(
        (
            outcome.metrics.rows_deleted,
            outcome.metrics.rows_updated,
            outcome.metrics.rows_inserted
        ),
        (3, 7, 5)
    );
    // Only files that may hold ids 80..100 were read: the first two appends' are skipped.
    assert!(outcome.metrics.files_skipped >= 6, "{:?}", outcome.metrics);
    assert_eq!(read(t.snapshot()).await, model);

    // Rows the source no longer has: delete those of NL.
    let keep: Model = model
        .iter()
        .filter(|(id, _)| **id >= 50)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    t.merge([batch(&keep)])
        .on(["id"])
        .when_not_matched_by_source_delete(Some(target_col("country").eq(lit("NL"))))
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap();
    model.retain(|id, r| *id >= 50 || r.0 != "NL");
    assert_eq!(read(t.snapshot()).await, model);

    // Ambiguous matches are refused, and nothing is committed.
    let version = t.version();
    let mut twice = Model::new();
    twice.insert(55, ("NL".into(), 1.0, None));
    let doubled =
        arrow::compute::concat_batches(&schema(), &[batch(&twice), batch(&twice)]).unwrap();
    let err = t
        .merge([doubled])
        .on(["id"])
        .when_matched_update_all(None)
        .with_strategy(strategy)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MergeDuplicateMatch { .. }), "{err}");
    let wrong = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false)])),
        vec![Arc::new(StringArray::from(vec!["1"]))],
    )
    .unwrap();
    let err = t
        .merge([wrong])
        .on(["id"])
        .when_matched_delete(None)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");
    assert_eq!(t.version(), version);
}

macro_rules! suite {
    ($backend:ident) => {
        mod $backend {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deletes_copy_on_write() {
                deletes(super::$backend(), ChangeStrategy::CopyOnWrite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deletes_merge_on_read() {
                deletes(super::$backend(), ChangeStrategy::MergeOnRead).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn updates_copy_on_write() {
                updates(super::$backend(), ChangeStrategy::CopyOnWrite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn updates_merge_on_read() {
                updates(super::$backend(), ChangeStrategy::MergeOnRead).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn merges_copy_on_write() {
                merges(super::$backend(), ChangeStrategy::CopyOnWrite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn merges_merge_on_read() {
                merges(super::$backend(), ChangeStrategy::MergeOnRead).await;
            }
        }
    };
}

suite!(memory);
suite!(local);
suite!(minio);
suite!(azurite);
suite!(fake_gcs);

#[tokio::test]
async fn deletion_vectors_go_inline_when_small_and_to_files_otherwise() {
    let target = memory();
    let (mut t, mut model) = table(&target, ChangeStrategy::MergeOnRead).await;
    t.delete(col("id").eq(lit(3))).execute().await.unwrap();
    model.remove(&3);
    let dv = t
        .snapshot()
        .files()
        .find_map(|a| a.deletion_vector.clone())
        .unwrap();
    assert_eq!(dv.storage_type, "i", "one row fits inline");
    let _ = t
        .set_properties([(tarn::protocol::properties::DV_INLINE_THRESHOLD, "0")])
        .await
        .unwrap();
    t.delete(col("id").eq(lit(6))).execute().await.unwrap();
    model.remove(&6);
    let dvs: Vec<_> = t
        .snapshot()
        .files()
        .filter_map(|a| a.deletion_vector.clone())
        .collect();
    assert!(
        dvs.iter()
            .any(|d| d.storage_type == "u" && d.cardinality == 2),
        "{dvs:?}"
    );
    assert_eq!(read(t.snapshot()).await, model);
    let err = Table::create_at(memory().location)
        .with_arrow_schema(&schema())
        .execute()
        .await
        .unwrap()
        .delete(col("id").eq(lit(1)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::FeatureNotEnabled {
                feature: "deletionVectors",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deletion_vector_changes_rebase_when_disjoint_and_conflict_when_not() {
    let target = memory();
    let (t, mut model) = table(&target, ChangeStrategy::MergeOnRead).await;
    let mut a = Table::open_at(target.location.clone()).await.unwrap();
    let mut b = Table::open_at(target.location.clone()).await.unwrap();
    // Ids 0 and 3 sit in one file (NL, first append): different rows of it.
    a.delete(col("id").eq(lit(0))).execute().await.unwrap();
    let outcome = b.delete(col("id").eq(lit(3))).execute().await.unwrap();
    assert_eq!(outcome.commit.attempts, 2, "rebased over the other delete");
    model.remove(&0);
    model.remove(&3);
    let latest = Table::open_at(target.location.clone()).await.unwrap();
    assert_eq!(read(latest.snapshot()).await, model);
    let dv = latest
        .snapshot()
        .files()
        .find_map(|a| a.deletion_vector.clone().filter(|d| d.cardinality == 2));
    assert!(dv.is_some(), "one DV holds both deletes");

    // The same row from both sides: the second conflicts, and nothing of it lands.
    let mut c = Table::open_at(target.location.clone()).await.unwrap();
    let mut d = Table::open_at(target.location.clone()).await.unwrap();
    c.delete(col("id").eq(lit(6))).execute().await.unwrap();
    let err = d
        .update()
        .filter(col("id").eq(lit(6)))
        .set("note", lit("d"))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                reason: ConflictReason::ConcurrentDeletionVectorOverlap { rows: 1, .. },
                ..
            }
        ),
        "{err}"
    );
    // An update writes the row's new version to a new file: a concurrent delete of the
    // row conflicts with that file.
    let mut g = Table::open_at(target.location.clone()).await.unwrap();
    let mut h = Table::open_at(target.location.clone()).await.unwrap();
    g.update()
        .filter(col("id").eq(lit(15)))
        .set("note", lit("g"))
        .execute()
        .await
        .unwrap();
    let err = h.delete(col("id").eq(lit(15))).execute().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                reason: ConflictReason::ConcurrentAppend { .. },
                ..
            }
        ),
        "{err}"
    );
    // A DV change against a concurrent rewrite of the same file conflicts too.
    let mut e = Table::open_at(target.location.clone()).await.unwrap();
    let mut f = Table::open_at(target.location.clone()).await.unwrap();
    e.delete(col("id").eq(lit(9)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let err = f.delete(col("id").eq(lit(12))).execute().await.unwrap_err();
    // The rewritten file holds row 12 anew (Delta's order reports that first); the old
    // one is removed by both.
    assert!(
        matches!(
            err,
            Error::Conflict {
                reason: ConflictReason::ConcurrentAppend { .. }
                    | ConflictReason::ConcurrentDeleteDelete { .. },
                ..
            }
        ),
        "{err}"
    );
    let err = f
        .clone()
        .with_isolation(tarn::IsolationLevel::SnapshotIsolation)
        .delete(col("id").eq(lit(12)))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                reason: ConflictReason::ConcurrentDeleteDelete { .. },
                ..
            }
        ),
        "{err}"
    );
    drop(t);
}

#[tokio::test]
async fn a_gdpr_delete_reads_only_files_whose_statistics_may_hold_the_customer() {
    // A table partitioned by day; each file holds a range of customer ids.
    let schema = Arc::new(Schema::new(vec![
        Field::new("customer", DataType::Int64, false),
        Field::new("day", DataType::Int64, false),
        Field::new("amount", DataType::Float64, true),
    ]));
    let target = memory();
    let mut t = Table::create_at(target.location.clone())
        .with_arrow_schema(&schema)
        .with_partition_columns(["day"])
        .execute()
        .await
        .unwrap();
    for day in 0..10i64 {
        for chunk in 0..4i64 {
            let customers: Vec<i64> = (chunk * 250..chunk * 250 + 250).collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(customers.clone())),
                    Arc::new(Int64Array::from(vec![day; customers.len()])),
                    Arc::new(Float64Array::from(vec![1.0; customers.len()])),
                ],
            )
            .unwrap();
            t.append([batch]).await.unwrap();
        }
    }
    assert_eq!(t.snapshot().file_count(), 40);
    let outcome = t
        .delete(col("customer").eq(lit(777i64)))
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.metrics.rows_deleted, 10);
    assert_eq!(
        (outcome.metrics.files_scanned, outcome.metrics.files_skipped),
        (10, 30)
    );
    let left = t
        .scan()
        .filter(col("customer").eq(lit(777i64)))
        .collect()
        .await
        .unwrap();
    assert_eq!(tarn_tests::rows::row_count(&left), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_packs_small_files_purges_deletion_vectors_and_sorts() {
    let target = memory();
    let (mut t, mut model) = table(&target, ChangeStrategy::MergeOnRead).await;
    for i in 3..8 {
        let (b, m) = rows(i * 30..i * 30 + 30);
        t.append([b]).await.unwrap();
        model.extend(m);
    }
    t.delete(col("amount").lt(lit(40.0)))
        .execute()
        .await
        .unwrap();
    model.retain(|_, r| r.1 >= 40.0);
    assert!(dv_count(t.snapshot()) > 0);
    let files_before = t.snapshot().file_count();
    let outcome = t.optimize().execute().await.unwrap();
    // One file per partition, no deletion vector left, the same rows.
    assert_eq!(
        (outcome.files_removed, outcome.files_added),
        (files_before, 3)
    );
    assert!(outcome.deletion_vectors_purged > 0);
    assert_eq!(dv_count(t.snapshot()), 0);
    assert!(t.snapshot().files().all(|a| !a.data_change));
    assert_eq!(read(t.snapshot()).await, model);
    assert_eq!(
        t.optimize().execute().await.unwrap().commit.attempts,
        0,
        "nothing left to do"
    );

    // Sorting: files sorted by amount do not overlap in their ranges.
    let (b, m) = rows(1_000..10_000);
    t.append([b]).await.unwrap();
    model.extend(m);
    let outcome = t
        .optimize()
        .with_sort_by(["amount"])
        .with_target_file_size(16 * 1024)
        .execute()
        .await
        .unwrap();
    assert!(outcome.files_added > 3);
    for partition in COUNTRIES {
        let mut ranges: Vec<(f64, f64)> = t
            .snapshot()
            .files()
            .filter(|a| a.partition_values.get("country") == Some(&Some(partition.to_string())))
            .map(|a| {
                let s: serde_json::Value =
                    serde_json::from_str(&a.stats.as_ref().unwrap().json()).unwrap();
                (
                    s["minValues"]["amount"].as_f64().unwrap(),
                    s["maxValues"]["amount"].as_f64().unwrap(),
                )
            })
            .collect();
        ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            ranges.windows(2).all(|w| w[0].1 <= w[1].0),
            "{partition}: {ranges:?}"
        );
    }
    assert_eq!(read(t.snapshot()).await, model);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_commutes_with_blind_appends_but_not_with_changes_to_its_files() {
    let target = memory();
    let (_, mut model) = table(&target, ChangeStrategy::MergeOnRead).await;
    let mut optimizer = Table::open_at(target.location.clone()).await.unwrap();
    let mut writer = Table::open_at(target.location.clone()).await.unwrap();
    let (b, m) = rows(500..520);
    writer.append([b]).await.unwrap();
    model.extend(m);
    let outcome = optimizer.optimize().execute().await.unwrap();
    assert_eq!(outcome.commit.attempts, 2, "rebased over the append");
    assert_eq!(read(&outcome.commit.snapshot).await, model);

    // A stale delete of a row the optimize moved conflicts.
    let mut stale = writer;
    let err = stale
        .delete(col("id").eq(lit(4)))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
}

/// Bad input to a row-level change is a typed error, and nothing is committed: unknown
/// columns and mistyped literals in predicates, clause conditions and assignments; a
/// source key matching two target rows; a DV file of Tarn's own that is damaged.
#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target {
        location: tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap(),
        _dir: None,
    };
    let (mut t, model) = table(&target, ChangeStrategy::MergeOnRead).await;
    let version = t.version();

    let err = t
        .delete(col("nope").eq(lit(1)))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownColumn { column, .. } if column == "nope"),
        "{err}"
    );
    let err = t
        .delete(col("amount").eq(lit("a lot")))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
    let err = t
        .update()
        .filter(col("country").gt(lit(3)))
        .set("note", lit("x"))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
    let err = t
        .update()
        .set("amount", col("missing") + lit(1.0))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    let (source, _) = rows(0..5);
    let err = t
        .merge([source.clone()])
        .on(["id"])
        .when_matched_update(None, [("amount", source_col("nope"))])
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    let err = t
        .merge([source.clone()])
        .on(["id"])
        .when_matched_delete(Some(target_col("note").lt(lit(2.5))))
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
    let err = t
        .merge([source.clone()])
        .on(["no_such_key"])
        .when_matched_delete(None)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err}");
    assert_eq!(t.version(), version, "nothing committed");
    assert_eq!(read(t.snapshot()).await, model);

    // A target that holds id 3 twice: one source row matching both is ambiguous.
    let (again, _) = rows(3..4);
    t.append([again]).await.unwrap();
    let version = t.version();
    let err = t
        .merge([source])
        .on(["id"])
        .when_matched_update_all(None)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MergeDuplicateMatch { .. }), "{err}");
    assert_eq!(t.version(), version, "nothing committed");

    // A DV file of Tarn's own, truncated: reads and further changes of the file fail
    // naming it, and nothing is committed.
    let _ = t
        .set_properties([(tarn::protocol::properties::DV_INLINE_THRESHOLD, "0")])
        .await
        .unwrap();
    t.delete(col("id").eq(lit(10))).execute().await.unwrap();
    let version = t.version();
    let dv_file = std::fs::read_dir(dir.path().join("t"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("deletion_vector_")
        })
        .unwrap();
    let good = std::fs::read(&dv_file).unwrap();
    std::fs::write(&dv_file, &good[..good.len() - 3]).unwrap();
    let name = dv_file.file_name().unwrap().to_string_lossy().into_owned();
    let fresh = Table::open_at(target.location.clone()).await.unwrap();
    let err = fresh.scan().collect().await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidDeletionVector { location, .. } if location.contains(&name)),
        "{err}"
    );
    let err = t.delete(col("id").eq(lit(11))).execute().await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidDeletionVector { location, .. } if location.contains(&name)),
        "{err}"
    );
    // A flipped bit: the checksum names the file too.
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    std::fs::write(&dv_file, &flipped).unwrap();
    let err = fresh.scan().collect().await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidDeletionVector { location, .. } if location.contains(&name)),
        "{err}"
    );
    assert_eq!(t.version(), version, "nothing committed");
}

/// Copy-on-write streams each candidate file through in chunks: a file whose only
/// change sits in its last chunk is rewritten whole and exact, a candidate no row of
/// which changes is left alone, and an update keeps every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_on_write_streams_files_and_rewrites_only_those_that_change() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("amount", DataType::Float64, true),
    ]));
    let batch = |ids: std::ops::Range<i64>| {
        let ids: Vec<i64> = ids.collect();
        let amounts: Vec<f64> = ids.iter().map(|i| *i as f64).collect();
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(Float64Array::from(amounts)),
            ],
        )
        .unwrap()
    };
    let target = local();
    let mut t = Table::create_at(target.location.clone())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    // Two files of 200K rows (several chunks each); ids 0..200K and 200K..400K, with a
    // gap at 399_000..399_500 in the second so a delete there finds no row.
    t.append([batch(0..200_000)]).await.unwrap();
    t.append([batch(200_000..399_000), batch(399_500..400_500)])
        .await
        .unwrap();
    let before: Vec<String> = t.snapshot().files().map(|a| a.path.clone()).collect();
    assert_eq!(before.len(), 2);

    // Only the last chunk of the first file changes.
    let out = t
        .delete(col("id").eq(lit(199_999i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.metrics.rows_deleted, 1);
    assert_eq!(out.metrics.files_removed, 1);
    // The other file is untouched.
    let untouched = before
        .iter()
        .filter(|p| t.snapshot().files().any(|a| &a.path == *p))
        .count();
    assert_eq!(untouched, 1);

    // Statistics may hold these ids, but no row does: nothing is rewritten or committed.
    let version = t.version();
    let out = t
        .delete(
            col("id")
                .gt_eq(lit(399_000i64))
                .and(col("id").lt(lit(399_500i64))),
        )
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.metrics.files_scanned, 1);
    assert_eq!(
        (out.metrics.rows_deleted, out.metrics.files_removed),
        (0, 0)
    );
    assert_eq!(t.version(), version);

    // An update of rows across both files keeps every row exactly once.
    let out = t
        .update()
        .filter(
            col("id")
                .gt_eq(lit(150_000i64))
                .and(col("id").lt(lit(250_000i64))),
        )
        .set("amount", lit(-1.0))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.metrics.rows_updated, 99_999);
    let batches = t.scan().collect().await.unwrap();
    let mut ids = Vec::new();
    let mut updated = 0;
    for b in &batches {
        let id = b.column(0).as_primitive::<Int64Type>();
        let amount = b.column(1).as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            ids.push(id.value(i));
            let expected = if (150_000..250_000).contains(&id.value(i)) {
                updated += 1;
                -1.0
            } else {
                id.value(i) as f64
            };
            assert_eq!(amount.value(i), expected, "id {}", id.value(i));
        }
    }
    ids.sort_unstable();
    let expected: Vec<i64> = (0..199_999)
        .chain(200_000..399_000)
        .chain(399_500..400_500)
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(updated, 99_999);
}

/// A merge-on-read upsert that sets every column from the source reads only the target's
/// keys; one that keeps a target column, or whose condition reads one, reads the rows.
/// Both give the same rows as the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_upserts_read_only_keys_when_the_source_sets_every_column() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("amount", DataType::Float64, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    let batch = |ids: &[i64], amount: f64, note: &str| {
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(Float64Array::from(vec![amount; ids.len()])),
                Arc::new(StringArray::from(vec![note; ids.len()])),
            ],
        )
        .unwrap()
    };
    let target = local();
    let mut t = Table::create_at(target.location.clone())
        .with_arrow_schema(&schema)
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    let ids: Vec<i64> = (0..1000).collect();
    t.append([batch(&ids, 1.0, "old")]).await.unwrap();

    // Every column from the source: keys only.
    let out = t
        .merge([batch(&[5, 500, 2000], 2.0, "new")])
        .on(["id"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        (out.metrics.rows_updated, out.metrics.rows_inserted),
        (2, 1)
    );
    // The note stays the target's, and the condition reads a target column.
    let amounts_only = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("amount", DataType::Float64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![6, 500, 7])),
            Arc::new(Float64Array::from(vec![3.0; 3])),
        ],
    )
    .unwrap();
    let out = t
        .merge([amounts_only])
        .on(["id"])
        .when_matched_update(
            Some(target_col("amount").lt(lit(2.0))),
            [("amount", source_col("amount"))],
        )
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.metrics.rows_updated, 2);

    let mut rows = BTreeMap::new();
    for b in t.scan().collect().await.unwrap() {
        let id = b.column(0).as_primitive::<Int64Type>();
        let amount = b.column(1).as_primitive::<Float64Type>();
        let note = b.column(2).as_string::<i32>();
        for i in 0..b.num_rows() {
            let previous = rows.insert(id.value(i), (amount.value(i), note.value(i).to_string()));
            assert!(previous.is_none(), "id {} twice", id.value(i));
        }
    }
    assert_eq!(rows.len(), 1001);
    assert_eq!(rows[&5], (2.0, "new".to_string()));
    assert_eq!(rows[&500], (2.0, "new".to_string()));
    assert_eq!(rows[&2000], (2.0, "new".to_string()));
    assert_eq!(rows[&6], (3.0, "old".to_string()));
    assert_eq!(rows[&7], (3.0, "old".to_string()));
    assert_eq!(rows[&4], (1.0, "old".to_string()));
}

#[tokio::test]
async fn nested_columns_are_assigned_whole_or_refused_by_type() {
    use tarn_tests::fixtures::{all_types_batch, all_types_schema};
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&all_types_schema())
        .execute()
        .await
        .unwrap();
    table.append([all_types_batch(0, 10)]).await.unwrap();
    let points = |batches: &[RecordBatch]| -> BTreeMap<i64, bool> {
        let mut out = BTreeMap::new();
        for b in batches {
            let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
            let point = b.column_by_name("point").unwrap();
            for i in 0..b.num_rows() {
                out.insert(ids.value(i), arrow::array::Array::is_valid(point, i));
            }
        }
        out
    };
    let before = points(&table.scan().collect().await.unwrap());
    // A struct set to null, then back from a merge source's struct column, whole.
    table
        .update()
        .filter(col("id").lt(lit(3i64)))
        .set("point", lit(tarn::expr::Scalar::Null))
        .execute()
        .await
        .unwrap();
    let nulled = points(&table.scan().collect().await.unwrap());
    assert!((0..3).all(|id| !nulled[&id]), "{nulled:?}");
    assert_eq!(nulled[&5], before[&5]);
    table
        .merge([all_types_batch(0, 3)])
        .on(["id"])
        .when_matched_update(None, [("point", source_col("point"))])
        .execute()
        .await
        .unwrap();
    assert_eq!(points(&table.scan().collect().await.unwrap()), before);
    // A struct takes no string, and a failed change commits nothing.
    let version = table.version();
    let err = table
        .update()
        .set("point", col("text"))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TypeMismatch { column, .. } if column == "point"),
        "{err}"
    );
    assert_eq!(table.version(), version);
}
