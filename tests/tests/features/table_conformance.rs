//! The table conformance suite: create, append, scan with pruning, time travel,
//! overwrite, checkpoints, schema evolution, concurrent appends and incremental refresh,
//! run the same way on memory, local files, MinIO, Azurite and fake GCS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tarn::expr::{col, lit};
use tarn::{Error, SchemaMode, Snapshot, StoreLocation, Table, WriteMode};
use tarn_store::{CountingStore, LatencyProfile, LatencyStore};
use tarn_tests::fixtures::{except_country, only_country, sales_batch, sales_schema, with_column};
use tarn_tests::rows::{canonical_rows, row_count};

/// A place to put a table, and whatever must live as long as it.
struct Target {
    location: StoreLocation,
    _dir: Option<tempfile::TempDir>,
}

fn memory(name: &str) -> Target {
    Target {
        location: tarn_store::open(&format!("memory://suite/{}", tarn_tests::unique(name)))
            .unwrap(),
        _dir: None,
    }
}

fn local(name: &str) -> Target {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    Target {
        location: tarn_store::open(path.to_str().unwrap()).unwrap(),
        _dir: Some(dir),
    }
}

fn minio(name: &str) -> Target {
    Target {
        location: tarn_tests::minio::s3().location(name),
        _dir: None,
    }
}

fn azurite(name: &str) -> Target {
    Target {
        location: tarn_tests::azurite::azure().location(name),
        _dir: None,
    }
}

fn fake_gcs(name: &str) -> Target {
    Target {
        location: tarn_tests::gcs::gcs().location(name),
        _dir: None,
    }
}

/// The same location seen through a request counter, over a small replayed latency so
/// that requests issued together overlap as they would on S3 (on a store that answers
/// instantly, each finishes before the next starts and the critical path would count
/// them all).
fn counted(location: &StoreLocation) -> (StoreLocation, tarn_store::RequestCounter) {
    let slow = LatencyStore::new(
        Arc::clone(location.store()),
        LatencyProfile::s3_express().scaled(0.25),
        1,
    );
    let counting = CountingStore::new(Arc::new(slow) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    (location.clone().with_store(Arc::new(counting)), counter)
}

/// A folder inside `location`, on the same store.
fn child_location(location: &StoreLocation, name: &str) -> StoreLocation {
    let url = format!("{}/{name}", location.url().as_str().trim_end_matches('/'));
    StoreLocation::new(
        url::Url::parse(&url).unwrap(),
        Arc::clone(location.store()),
        location.root().clone().join(name),
    )
}

async fn create_sales(location: &StoreLocation, properties: &[(&str, &str)]) -> Table {
    let mut builder = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"]);
    for (k, v) in properties {
        builder = builder.with_property(*k, *v);
    }
    builder.execute().await.unwrap()
}

/// The batches as the table returns them: table column order.
fn expected_rows(batches: &[RecordBatch]) -> Vec<String> {
    canonical_rows(batches)
}

async fn all_rows(table: &Table) -> Vec<String> {
    canonical_rows(&table.scan().collect().await.unwrap())
}

async fn list_all(store: &dyn ObjectStore, prefix: &Path) -> Vec<Path> {
    store
        .list(Some(prefix))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap()
}

async fn create_append_scan_round_trip(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    assert_eq!(table.version(), 0);
    // A create in a folder the caller just named is its one PUT.
    let (counted_location, counter) = counted(&child_location(location, "fresh"));
    let fresh = Table::create_at(counted_location)
        .with_arrow_schema(&sales_schema())
        .with_fresh_location()
        .execute()
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!((fresh.version(), counts.requests()), (0, 1), "{counts}");
    assert_eq!(table.snapshot().protocol().min_reader_version, 1);
    let first = sales_batch(0, 100);
    let second = sales_batch(100, 150);
    let outcome = table.append([first.clone()]).await.unwrap();
    assert_eq!((outcome.commit.version, outcome.rows_written), (1, 100));
    // Five countries, one of them null: five partition folders.
    assert_eq!(outcome.files_added, 5);
    table.append([second.clone()]).await.unwrap();
    assert_eq!(table.version(), 2);
    assert_eq!(all_rows(&table).await, expected_rows(&[first, second]));

    // A fresh handle reads the same, and every data file sits inside the table.
    let reopened = Table::open_at(location.clone()).await.unwrap();
    assert_eq!(reopened.version(), 2);
    assert_eq!(all_rows(&reopened).await, all_rows(&table).await);
    let objects = list_all(location.store().as_ref(), location.root()).await;
    assert!(objects.iter().all(|p| p.prefix_matches(location.root())));
    let folders: Vec<String> = objects
        .iter()
        .filter(|p| p.as_ref().ends_with(".parquet"))
        .filter_map(|p| {
            p.parts()
                .nth(location.root().parts().count())
                .map(|part| part.as_ref().to_string())
        })
        .collect();
    assert!(
        folders.contains(&"country=__HIVE_DEFAULT_PARTITION__".to_string()),
        "{folders:?}"
    );
    assert!(
        folders.contains(&"country=..%2Fx y%3Dz%25%2F%3A%23".to_string()),
        "{folders:?}"
    );

    // Every commit has a commitInfo with a unique txnId.
    let mut ids = Vec::new();
    for version in 0..=2 {
        let path = location
            .root()
            .clone()
            .join("_delta_log")
            .join(format!("{version:020}.json"));
        let body = location
            .store()
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let first_line = body.split(|b| *b == b'\n').next().unwrap();
        let json: serde_json::Value = serde_json::from_slice(first_line).unwrap();
        ids.push(json["commitInfo"]["txnId"].as_str().unwrap().to_string());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
}

async fn partition_and_stats_pruning_skip_files(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    // Ten appends of 100 ids each: every file covers one id range of one country.
    let mut batches = Vec::new();
    for i in 0..10 {
        let batch = sales_batch(i * 100, i * 100 + 100);
        table.append([batch.clone()]).await.unwrap();
        batches.push(batch);
    }
    let nl = table.scan().filter(col("country").eq(lit("NL")));
    let plan = nl.plan().await.unwrap();
    assert_eq!(
        (
            plan.total_files,
            plan.skipped_by_partition,
            plan.files.len()
        ),
        (50, 40, 10)
    );
    let got = nl.collect().await.unwrap();
    let want: Vec<RecordBatch> = batches.iter().map(|b| only_country(b, "NL")).collect();
    assert_eq!(canonical_rows(&got), canonical_rows(&want));

    let few = table
        .scan()
        .filter(col("id").gt_eq(lit(250)).and(col("id").lt(lit(260))));
    let plan = few.plan().await.unwrap();
    assert_eq!(
        plan.skipped_by_stats, 45,
        "one append's five files hold ids 200..300"
    );
    let got = few.collect().await.unwrap();
    let ids: Vec<i64> = got
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    let mut ids = ids;
    ids.sort_unstable();
    assert_eq!(ids, (250..260).collect::<Vec<_>>());

    // Null partitions: IS NULL reads only the null folder.
    let nulls = table.scan().filter(col("country").is_null());
    assert_eq!(nulls.plan().await.unwrap().files.len(), 10);
    assert_eq!(row_count(&nulls.collect().await.unwrap()), 200);
}

async fn selective_scan_reads_one_file_in_one_or_two_requests(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    for i in 0..4 {
        table
            .append([sales_batch(i * 100, i * 100 + 100)])
            .await
            .unwrap();
    }
    let (counted_location, counter) = counted(location);
    let snapshot = Snapshot::builder(counted_location).build().await.unwrap();
    counter.reset();
    let batches = snapshot
        .scan()
        .select(["id", "amount"])
        .filter(col("id").eq(lit(320)).and(col("country").eq(lit("NL"))))
        .collect()
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!(row_count(&batches), 1);
    // One small file of twenty survives pruning: read whole in one GET.
    assert_eq!(
        (counts.gets, counts.heads, counts.lists),
        (1, 0, 0),
        "{counts}"
    );
    assert_eq!(counts.critical_path, 1, "{counts}");

    // A large file: its footer, then the columns asked for.
    table.append([sales_batch(100_000, 400_000)]).await.unwrap();
    let (counted_location, counter) = counted(location);
    let snapshot = Snapshot::builder(counted_location).build().await.unwrap();
    let large = snapshot.files().map(|a| a.size).max().unwrap();
    assert!(large > 512 * 1024, "{large} bytes");
    counter.reset();
    let batches = snapshot
        .scan()
        .select(["id", "amount"])
        .filter(col("id").eq(lit(350_000)).and(col("country").eq(lit("NL"))))
        .collect()
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!(row_count(&batches), 1);
    // Footer first, then only the selected columns: never the whole file.
    assert!(counts.gets >= 2, "{counts}");
    assert!(counts.bytes_read < large as u64, "{counts}");
}

async fn time_travel_by_version_and_timestamp(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    for i in 0..3 {
        table
            .append([sales_batch(i * 10, i * 10 + 10)])
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for (version, rows) in [(0, 0), (1, 10), (2, 20), (3, 30)] {
        let snapshot = Snapshot::builder(location.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        assert_eq!(row_count(&snapshot.scan().collect().await.unwrap()), rows);
    }
    let versions = table.versions().await.unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(
        versions
            .windows(2)
            .all(|w| w[0].timestamp_ms < w[1].timestamp_ms),
        "timestamps increase: {versions:?}"
    );
    let ts2 = versions[2].timestamp_ms;
    table.load_timestamp(ts2).await.unwrap();
    assert_eq!(table.version(), 2);
    // Any time before the next commit's is still version 2. (S3 and Azure stamp objects to
    // the second, so commits within one second are 1 ms apart, made monotonic as Delta does.)
    table
        .load_timestamp(versions[3].timestamp_ms - 1)
        .await
        .unwrap();
    assert_eq!(table.version(), 2);
    let err = Snapshot::builder(location.clone())
        .at_timestamp(versions[0].timestamp_ms - 1)
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimestampOutOfRange { .. }), "{err}");
    let err = Snapshot::builder(location.clone())
        .at_version(9)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::VersionNotFound { version: 9, .. }),
        "{err}"
    );
}

async fn overwrite_whole_table_and_by_partition(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    table.append([sales_batch(0, 50)]).await.unwrap();
    let replacement = sales_batch(1000, 1010);
    let outcome = table.overwrite([replacement.clone()]).await.unwrap();
    assert_eq!(outcome.files_removed, 5);
    assert_eq!(
        all_rows(&table).await,
        expected_rows(std::slice::from_ref(&replacement))
    );
    // The version before the overwrite still reads its rows.
    let before = Snapshot::builder(location.clone())
        .at_version(1)
        .build()
        .await
        .unwrap();
    assert_eq!(row_count(&before.scan().collect().await.unwrap()), 50);

    // Replace only the NL partition: other partitions keep their rows.
    let nl_only = only_country(&sales_batch(2000, 2050), "NL");
    let outcome = table
        .write([nl_only.clone()])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.files_removed, 1);
    let not_nl = vec![except_country(&replacement, "NL")];
    let mut want = not_nl;
    want.push(nl_only);
    assert_eq!(all_rows(&table).await, expected_rows(&want));

    // Rows outside the predicate are refused, and nothing is committed.
    let version = table.version();
    let err = table
        .write([sales_batch(3000, 3010)])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                name: "replace_where",
                ..
            }
        ),
        "{err}"
    );
    let err = table
        .write([only_country(&sales_batch(0, 10), "NL")])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("id").gt(lit(0)))
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                name: "replace_where",
                ..
            }
        ),
        "{err}"
    );
    table.refresh().await.unwrap();
    assert_eq!(table.version(), version);
}

async fn checkpoints_every_interval_and_reopen_starts_there(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[("delta.checkpointInterval", "2")]).await;
    let mut written = Vec::new();
    for i in 0..5 {
        let batch = sales_batch(i * 10, i * 10 + 10);
        let outcome = table.append([batch.clone()]).await.unwrap();
        written.push(batch);
        let due = outcome.commit.version % 2 == 0;
        assert_eq!(
            outcome.commit.checkpoint.is_some(),
            due,
            "version {}",
            outcome.commit.version
        );
        // Written in the background: the commit returned before it.
        if let Some(task) = &outcome.commit.checkpoint {
            assert_eq!(task.wait().await.unwrap().version, outcome.commit.version);
        }
    }
    let log = location.root().clone().join("_delta_log");
    let hint = location
        .store()
        .get(&log.clone().join("_last_checkpoint"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let hint: serde_json::Value = serde_json::from_slice(&hint).unwrap();
    assert_eq!(hint["version"], 4);
    assert_eq!(hint["numOfAddFiles"], 20);

    // Reopening a short log: the hint and a LIST of the whole log at once, then the
    // checkpoint and commit 5 only: never the commits before the checkpoint.
    let (counted_location, counter) = counted(location);
    let reopened = Table::open_at(counted_location.clone()).await.unwrap();
    let counts = counter.take();
    assert_eq!(reopened.version(), 5);
    assert_eq!(counts.lists, 1, "{counts}");
    assert_eq!(counts.gets, 3, "hint, checkpoint, commit 5: {counts}");
    assert_eq!(counts.critical_path, 2, "{counts}");
    assert_eq!(all_rows(&reopened).await, expected_rows(&written));

    // A log past one LIST page (padded here with objects a reader ignores) is listed from
    // the hint instead: one round trip more, the same snapshot.
    let padding: Vec<Path> = (0..1000)
        .map(|i| log.clone().join("_padding").join(format!("{i:04}")))
        .collect();
    futures::stream::iter(padding)
        .map(|path| {
            let store = Arc::clone(location.store());
            async move { store.put(&path, "x".into()).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    counter.take();
    let reopened = Table::open_at(counted_location).await.unwrap();
    let counts = counter.take();
    assert_eq!(reopened.version(), 5);
    assert_eq!(
        counts.lists, 2,
        "the whole log (cut short), then from the hint: {counts}"
    );
    assert_eq!(counts.gets, 3, "hint, checkpoint, commit 5: {counts}");
    assert_eq!(counts.critical_path, 3, "{counts}");
    assert_eq!(all_rows(&reopened).await, expected_rows(&written));
}

async fn schema_evolution_only_on_request(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    table.append([sales_batch(0, 10)]).await.unwrap();
    let wider = with_column(
        &sales_batch(10, 20),
        Field::new("discount", DataType::Int64, true),
        Arc::new(Int64Array::from((0..10).collect::<Vec<i64>>())),
    );
    let err = table.append([wider.clone()]).await.unwrap_err();
    assert!(
        matches!(&err, Error::SchemaMismatch { reason } if reason.contains("discount")),
        "{err}"
    );
    assert_eq!(table.version(), 1);
    table
        .write([wider])
        .with_schema_mode(SchemaMode::AddColumns)
        .execute()
        .await
        .unwrap();
    assert_eq!(table.schema().fields.last().unwrap().name, "discount");
    let reopened = Table::open_at(location.clone()).await.unwrap();
    let batches = reopened
        .scan()
        .select(["id", "discount"])
        .collect()
        .await
        .unwrap();
    let nulls: usize = batches.iter().map(|b| b.column(1).null_count()).sum();
    assert_eq!((row_count(&batches), nulls), (20, 10));
}

async fn concurrent_appends_both_land(target: Target) {
    let location = &target.location;
    create_sales(location, &[]).await;
    let mut a = Table::open_at(location.clone()).await.unwrap();
    let mut b = Table::open_at(location.clone()).await.unwrap();
    let (ra, rb) = tokio::join!(
        a.append([sales_batch(0, 30)]),
        b.append([sales_batch(30, 70)])
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let mut versions = [ra.commit.version, rb.commit.version];
    versions.sort_unstable();
    assert_eq!(versions, [1, 2]);
    assert_eq!(
        ra.commit.attempts + rb.commit.attempts,
        3,
        "the loser rebased once"
    );
    let table = Table::open_at(location.clone()).await.unwrap();
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 70);
    // The loser's handle already sees both commits.
    let loser = if ra.commit.version == 2 { &a } else { &b };
    assert_eq!(row_count(&loser.scan().collect().await.unwrap()), 70);
}

async fn warm_refresh_reads_only_new_commits(target: Target) {
    let location = &target.location;
    let mut writer = create_sales(location, &[]).await;
    writer.append([sales_batch(0, 10)]).await.unwrap();
    let (counted_location, counter) = counted(location);
    let mut reader = Table::open_at(counted_location).await.unwrap();
    writer.append([sales_batch(10, 20)]).await.unwrap();
    writer.append([sales_batch(20, 30)]).await.unwrap();
    counter.reset();
    reader.refresh().await.unwrap();
    let counts = counter.take();
    assert_eq!(reader.version(), 3);
    assert_eq!((counts.lists, counts.gets), (1, 2), "{counts}");
    assert_eq!(
        counts.critical_path, 2,
        "one LIST, then both commits in parallel: {counts}"
    );
    assert_eq!(all_rows(&reader).await, all_rows(&writer).await);
    counter.reset();
    reader.refresh().await.unwrap();
    assert_eq!(
        counter.take().requests(),
        1,
        "an up-to-date refresh is one LIST"
    );
}

async fn failed_writes_change_nothing(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    table.append([sales_batch(0, 10)]).await.unwrap();
    let before = all_rows(&table).await;
    let wrong = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false)])),
        vec![Arc::new(arrow::array::StringArray::from(vec!["x"]))],
    )
    .unwrap();
    let err = table.append([wrong]).await.unwrap_err();
    assert!(matches!(err, Error::SchemaMismatch { .. }), "{err}");
    let err = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::TableAlreadyExists { version: 1, .. }),
        "{err}"
    );
    // Without the listing, put-if-absent on version 0 still refuses.
    let err = Table::create_at(location.clone())
        .with_arrow_schema(&sales_schema())
        .with_fresh_location()
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::TableAlreadyExists { version: 0, .. }),
        "{err}"
    );
    let reopened = Table::open_at(location.clone()).await.unwrap();
    assert_eq!(reopened.version(), 1);
    assert_eq!(all_rows(&reopened).await, before);
}

async fn files_roll_at_the_target_size(target: Target) {
    let location = &target.location;
    let mut table = create_sales(location, &[]).await;
    let batch = sales_batch(0, 200_000);
    let target_size = 256 * 1024;
    let outcome = table
        .write([batch.clone()])
        .with_target_file_size(target_size)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.rows_written, 200_000);
    // Five partitions of 40,000 rows, each well over the target: several files each, none
    // more than one write slice past the target.
    let sizes: Vec<i64> = table.snapshot().files().map(|a| a.size).collect();
    assert!(
        outcome.files_added > 10,
        "{} files: {sizes:?}",
        outcome.files_added
    );
    for add in table.snapshot().files() {
        assert!(
            add.size as u64 <= 4 * target_size,
            "{} is {} bytes",
            add.path,
            add.size
        );
        let stats: serde_json::Value =
            serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
        assert!(stats["numRecords"].as_u64().unwrap() > 0);
        assert!(
            stats["minValues"]["id"].is_number() && stats["maxValues"]["ts"].is_string(),
            "{stats}"
        );
        assert_eq!(stats["nullCount"]["id"], 0);
    }
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 200_000);
}

async fn row_groups_are_pruned_inside_a_file(target: Target) {
    let location = &target.location;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, true),
    ]));
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    let ids: Vec<i64> = (0..20_000).collect();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(arrow::array::StringArray::from_iter_values(
                ids.iter()
                    .map(|i| format!("payload-{i:08}-{}", "x".repeat(40))),
            )),
        ],
    )
    .unwrap();
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(1_000))
        .build();
    table
        .write([batch])
        .with_writer_properties(properties)
        .execute()
        .await
        .unwrap();
    assert_eq!(table.snapshot().file_count(), 1);
    let (counted_location, counter) = counted(location);
    let snapshot = Snapshot::builder(counted_location).build().await.unwrap();
    counter.reset();
    let all = snapshot.scan().collect().await.unwrap();
    let full = counter.take();
    let one = snapshot
        .scan()
        .filter(col("id").eq(lit(12_345)))
        .collect()
        .await
        .unwrap();
    let pruned = counter.take();
    assert_eq!((row_count(&all), row_count(&one)), (20_000, 1));
    // One row group of twenty is fetched: far fewer bytes than the whole file.
    assert!(
        pruned.bytes_read * 5 < full.bytes_read,
        "pruned {pruned}, full {full}"
    );
    // The footer was decoded by the first scan and kept: only the row group is fetched.
    assert_eq!(pruned.gets, 1, "{pruned}");
}

macro_rules! suite {
    ($backend:ident) => {
        mod $backend {
            macro_rules! case {
                ($name:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        super::$name(super::$backend(stringify!($name))).await;
                    }
                };
            }

            case!(create_append_scan_round_trip);
            case!(partition_and_stats_pruning_skip_files);
            case!(selective_scan_reads_one_file_in_one_or_two_requests);
            case!(time_travel_by_version_and_timestamp);
            case!(overwrite_whole_table_and_by_partition);
            case!(checkpoints_every_interval_and_reopen_starts_there);
            case!(schema_evolution_only_on_request);
            case!(concurrent_appends_both_land);
            case!(warm_refresh_reads_only_new_commits);
            case!(failed_writes_change_nothing);
            case!(files_roll_at_the_target_size);
            case!(row_groups_are_pruned_inside_a_file);
        }
    };
}

suite!(memory);
suite!(local);
suite!(minio);
suite!(azurite);
suite!(fake_gcs);
