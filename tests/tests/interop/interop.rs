//! Interoperability with delta-rs through its Python package (`deltalake` 1.6.6): tables
//! Tarn writes read back through `QueryBuilder` SQL with the same rows, and tables
//! `deltalake` writes (partitions, a delete, a checkpoint) read back through Tarn with
//! the rows `deltalake` itself returns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit};
use tarn::{SchemaMode, Snapshot, Table, WriteMode};
use tarn_tests::fixtures::{only_country, sales_batch, sales_schema, with_column};
use tarn_tests::grouped::{append_write, commit_grouped, delete_write};
use tarn_tests::python::{read_with_deltalake, run_script};
use tarn_tests::rows::{align, canonical_rows, row_count, sorted_ids};

async fn assert_same_through_deltalake(table: &Table, dir: &Path, what: &str) {
    let ours = table.scan().collect().await.unwrap();
    let theirs = read_with_deltalake(dir, None);
    assert_eq!(theirs.version, table.version(), "{what}: version");
    assert_eq!(theirs.rows, row_count(&ours), "{what}: row count");
    let theirs = align(&theirs.batches, table.snapshot().arrow_schema());
    assert_eq!(
        canonical_rows(&ours),
        canonical_rows(&theirs),
        "{what}: rows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_writes_read_the_same_through_deltalake() {
    let root = tempfile::tempdir().unwrap();

    // Plain: no partitions, one commit.
    let plain = root.path().join("plain");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("label", DataType::Utf8, true),
    ]));
    let mut table = Table::create(plain.to_str().unwrap())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from((0..100).collect::<Vec<_>>())),
            Arc::new(arrow::array::StringArray::from_iter(
                (0..100).map(|i| (i % 3 != 0).then(|| format!("label {i}"))),
            )),
        ],
    )
    .unwrap();
    table.append([batch]).await.unwrap();
    assert_same_through_deltalake(&table, &plain, "plain").await;

    // Partitioned (null and escaped values), several commits, checkpointed every 2.
    let sales = root.path().join("sales");
    let mut table = Table::create(sales.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.checkpointInterval", "2")
        .execute()
        .await
        .unwrap();
    for i in 0..5 {
        let outcome = table
            .append([sales_batch(i * 40, i * 40 + 40)])
            .await
            .unwrap();
        if let Some(task) = outcome.commit.checkpoint {
            task.wait().await.unwrap();
        }
    }
    assert!(
        sales
            .join("_delta_log/00000000000000000004.checkpoint.parquet")
            .exists()
    );
    assert_same_through_deltalake(&table, &sales, "partitioned, checkpointed").await;
    let earlier = read_with_deltalake(&sales, Some(2));
    assert_eq!(
        (earlier.version, earlier.rows),
        (2, 80),
        "time travel through deltalake"
    );

    // Overwrite of one partition (remove actions), then a schema change.
    table
        .write([only_country(&sales_batch(1000, 1050), "NL")])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await
        .unwrap();
    assert_same_through_deltalake(&table, &sales, "overwritten").await;
    let wider = with_column(
        &sales_batch(2000, 2010),
        Field::new("note", DataType::Utf8, true),
        Arc::new(arrow::array::StringArray::from(vec![Some("n"); 10])),
    );
    table
        .write([wider])
        .with_schema_mode(SchemaMode::AddColumns)
        .execute()
        .await
        .unwrap();
    assert_same_through_deltalake(&table, &sales, "evolved schema").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_deltalake_writes_read_the_same_through_tarn() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("from-delta-rs");
    let report = run_script("write_table.py", &[dir.to_str().unwrap()]);
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    let table = Table::open(dir.to_str().unwrap()).await.unwrap();
    assert_eq!(table.version(), report["version"].as_i64().unwrap());
    // The delete left remove actions, and a checkpoint sits below the last commit.
    assert!(table.snapshot().tombstones().count() > 0);
    assert!(dir.join("_delta_log/_last_checkpoint").exists());
    let ours = table.scan().collect().await.unwrap();
    assert_eq!(row_count(&ours) as u64, report["rows"].as_u64().unwrap());
    assert_same_through_deltalake(&table, &dir, "written by deltalake").await;

    // Pruned reads agree with deltalake's full read filtered the same way.
    let filtered = table
        .scan()
        .filter(col("id").lt(lit(20)))
        .collect()
        .await
        .unwrap();
    assert_eq!(
        row_count(&filtered),
        10,
        "ids 10..20 survive the delete of id < 10"
    );
    let partition = table
        .scan()
        .filter(col("part").eq(lit("x y=z")))
        .plan()
        .await
        .unwrap();
    assert!(partition.skipped_by_partition > 0);
}

/// Every storage form a row-level change leaves on disk (files rewritten by copy-on-write,
/// deletion vectors inline and in `deletion_vector_<uuid>.bin` files, a second DV on a
/// file unioned, optimize purging DVs, a checkpoint carrying DV descriptors) reads back
/// through deltalake with the rows Tarn reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_changed_read_the_same_through_deltalake() {
    use tarn::ChangeStrategy;
    use tarn::expr::{source_col, target_col};

    let root = tempfile::tempdir().unwrap();

    // Copy-on-write: rewritten files and remove actions.
    let cow = root.path().join("cow");
    let mut table = Table::create(cow.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .execute()
        .await
        .unwrap();
    for i in 0..3 {
        table
            .append([sales_batch(i * 50, i * 50 + 50)])
            .await
            .unwrap();
    }
    let deleted = table
        .delete(col("amount").lt(lit(30.0)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_eq!(deleted.metrics.rows_deleted, 20);
    assert_eq!(deleted.metrics.deletion_vectors_written, 0);
    assert_same_through_deltalake(&table, &cow, "copy-on-write delete").await;
    table
        .update()
        .filter(col("id").gt(lit(120)))
        .set("amount", col("amount") * lit(2.0) + lit(1.0))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    assert_same_through_deltalake(&table, &cow, "copy-on-write update").await;

    // Merge-on-read: deletion vectors, inline first.
    let mor = root.path().join("mor");
    let mut table = Table::create(mor.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.enableDeletionVectors", "true")
        .with_property("delta.checkpointInterval", "100")
        .execute()
        .await
        .unwrap();
    for i in 0..3 {
        table
            .append([sales_batch(i * 100, i * 100 + 100)])
            .await
            .unwrap();
    }
    let outcome = table
        .delete(col("id").eq(lit(7)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.metrics.deletion_vectors_written, 1);
    let inline = table
        .snapshot()
        .files()
        .filter_map(|a| a.deletion_vector.as_ref())
        .filter(|d| d.storage_type == "i")
        .count();
    assert_eq!(inline, 1, "one deleted row goes inline");
    assert_same_through_deltalake(&table, &mor, "inline deletion vector").await;

    // Then in files: every DV of this change goes to one `.bin` file, and the file that
    // already had an inline DV gets the union.
    let _ = table
        .set_properties([(tarn::protocol::properties::DV_INLINE_THRESHOLD, "0")])
        .await
        .unwrap();
    let outcome = table
        .delete(col("id").lt(lit(5)).or(col("id").gt(lit(250))))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.metrics.deletion_vectors_written, 2);
    let dv_files: Vec<_> = std::fs::read_dir(&mor)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.starts_with("deletion_vector_").then_some(name)
        })
        .collect();
    assert_eq!(dv_files.len(), 1, "{dv_files:?}");
    let unioned = table
        .snapshot()
        .files()
        .filter_map(|a| a.deletion_vector.as_ref())
        .find(|d| d.storage_type == "u" && d.cardinality == 6)
        .cloned();
    assert!(unioned.is_some(), "ids 0..5 and 7 in one file's DV");
    assert_same_through_deltalake(&table, &mor, "deletion vectors in a file").await;

    // A merge-on-read update and merge: DVs plus new files for the changed rows.
    table
        .update()
        .filter(col("id").gt(lit(100)).and(col("id").lt(lit(110))))
        .set("customer", lit("updated"))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let source = sales_batch(190, 320);
    table
        .merge([source])
        .on(["id"])
        .when_matched_update(None, [("amount", source_col("amount") * lit(-1.0))])
        .when_not_matched_insert_all(Some(source_col("id").lt(lit(310))))
        .when_not_matched_by_source_delete(Some(target_col("id").lt(lit(20))))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_same_through_deltalake(&table, &mor, "merge-on-read update and merge").await;

    // A checkpoint carrying the DV descriptors, then a commit on top of it.
    table.checkpoint().await.unwrap();
    assert!(mor.join("_delta_log/_last_checkpoint").exists());
    table
        .delete(col("id").eq(lit(150)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let reopened = Table::open(mor.to_str().unwrap()).await.unwrap();
    assert_same_through_deltalake(&reopened, &mor, "checkpointed deletion vectors").await;

    // Optimize purges the DVs: files rewritten without the deleted rows.
    let optimized = table
        .optimize()
        .with_deletion_vector_threshold(0.0)
        .execute()
        .await
        .unwrap();
    assert!(optimized.deletion_vectors_purged > 0);
    assert_eq!(
        table
            .snapshot()
            .files()
            .filter(|a| a.deletion_vector.is_some())
            .count(),
        0
    );
    assert_same_through_deltalake(&table, &mor, "optimized").await;
}

/// Microseconds since the epoch of a UTC date and time.
fn micros(text: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .unwrap()
        .and_utc()
        .timestamp_micros()
}

/// `(id, ts)` of every row, sorted by id.
async fn id_timestamps(table: &Table) -> Vec<(i64, Option<i64>)> {
    use arrow::array::{Array, AsArray};
    let mut out = Vec::new();
    for batch in table.scan().collect().await.unwrap() {
        let ids = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        let ts = batch
            .column(1)
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        for i in 0..batch.num_rows() {
            out.push((ids.value(i), ts.is_valid(i).then(|| ts.value(i))));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int96_timestamps_read_exactly_from_year_1_to_9999_in_scans_and_rewrites() {
    use arrow::datatypes::TimeUnit;
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]));
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&schema)
        .execute()
        .await
        .unwrap();
    // A data file pyarrow writes with INT96 timestamps, as Spark does, joins the table.
    let file = dir.path().join("part-int96.parquet");
    run_script("write_int96.py", &[file.to_str().unwrap()]);
    let mut txn = table.transaction();
    txn.add_file(tarn::protocol::Add {
        path: "part-int96.parquet".into(),
        partition_values: Default::default(),
        size: std::fs::metadata(&file).unwrap().len() as i64,
        modification_time: 0,
        data_change: true,
        stats: None,
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    });
    let _ = table.commit(txn).await.unwrap();
    let expected = vec![
        (1, Some(micros("0001-01-01 00:00:00"))),
        (2, Some(micros("9999-12-31 23:59:59.999999"))),
        (3, Some(1)),
        (4, Some(micros("1677-09-21 00:12:43.145224"))),
        (5, Some(micros("2262-04-11 23:47:16.854776"))),
        (6, None),
    ];
    assert_eq!(id_timestamps(&table).await, expected, "scan");
    // A predicate on the column sees the same values.
    let late = table
        .scan()
        .filter(col("ts").gt(lit(tarn::expr::Scalar::Timestamp(micros(
            "2262-04-12 00:00:00",
        )))))
        .collect()
        .await
        .unwrap();
    assert_eq!(row_count(&late), 1);
    // A copy-on-write rewrite decodes and re-encodes every surviving value exactly, and
    // writes statistics that prune by them.
    table
        .delete(col("id").eq(lit(3i64)))
        .execute()
        .await
        .unwrap();
    let kept: Vec<_> = expected.into_iter().filter(|(id, _)| *id != 3).collect();
    assert_eq!(id_timestamps(&table).await, kept, "after a rewrite");
    let plan = table
        .scan()
        .filter(col("ts").lt(lit(tarn::expr::Scalar::Timestamp(micros(
            "0001-01-02 00:00:00",
        )))))
        .plan()
        .await
        .unwrap();
    assert_eq!(plan.files.len(), 1);
    let stats = plan.files[0].stats.clone().unwrap().json().into_owned();
    assert!(stats.contains("0001-01-01T00:00:00"), "{stats}");
    assert!(stats.contains("9999-12-31T23:59:59.999"), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_tables_read_the_same_through_deltalake() {
    use tarn::IndexKind;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("indexed");
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 100)]).await.unwrap();
    table.create_index("id").execute().await.unwrap();
    table
        .create_index("customer")
        .with_kind(IndexKind::Bitmap)
        .execute()
        .await
        .unwrap();
    table
        .create_index("customer")
        .with_name("customer_text")
        .with_kind(IndexKind::FullText)
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(100, 160)]).await.unwrap();
    table
        .delete(col("customer").eq(lit("customer-2")))
        .execute()
        .await
        .unwrap();
    table.optimize_indices().await.unwrap();
    assert!(
        table
            .snapshot()
            .protocol()
            .has_writer_feature("domainMetadata")
    );
    assert_same_through_deltalake(&table, &dir, "indexed").await;
    let _ = table.drop_index("customer_text").await.unwrap();
    assert_same_through_deltalake(&table, &dir, "indexed, one dropped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_carrying_other_writers_read_the_same_through_deltalake() {
    use tarn::ChangeStrategy;

    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("grouped");
    let mut table = tarn_tests::fixtures::country_sales_table(&dir).await;
    let location = table.snapshot().location().clone();
    // Two writers' appends in one commit, then an append carried by a copy-on-write
    // delete's commit (remove actions and rewritten files beside the carried adds).
    let two_appends = commit_grouped(
        &location,
        append_write(sales_batch(100, 150)),
        append_write(sales_batch(150, 200)),
    )
    .await;
    let delete = delete_write(col("amount").lt(lit(30.0)), ChangeStrategy::CopyOnWrite);
    let with_delete = commit_grouped(&location, delete, append_write(sales_batch(200, 250))).await;
    table.refresh().await.unwrap();
    assert_eq!(table.version(), with_delete);
    let what = format!("grouped: {two_appends} and {with_delete}");
    assert_every_version_same_through_deltalake(&location, &dir, with_delete, &what).await;
    // amount = 1.5 * id: the delete took ids 0..20.
    assert_eq!(row_count(&table.scan().collect().await.unwrap()), 250 - 20);
}

/// A merge-on-read delete carried in another's commit: both delete rows of the one data
/// file, so the commit holds that file once, its DV uniting both writers' rows (inline),
/// and delta-rs reads every version with Tarn's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_united_in_one_grouped_commit_read_the_same_through_deltalake() {
    assert_united_grouped_deletes(
        "grouped_dvs",
        &[],
        col("id").eq(lit(50i64)),
        |id| id < 3 || id == 50,
        "i",
    )
    .await;
}

/// The same with deletion vectors in files: the committer unites both writers' rows into
/// a DV file of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_in_files_united_in_one_grouped_commit_read_the_same_through_deltalake() {
    assert_united_grouped_deletes(
        "grouped_united_dv_files",
        &[(tarn::protocol::properties::DV_INLINE_THRESHOLD, "0")],
        col("id").gt_eq(lit(50i64)).and(col("id").lt(lit(60i64))),
        |id| id < 3 || (50..60).contains(&id),
        "u",
    )
    .await;
}

/// Deletes `id < 3` and `second` from a 100-row one-file table (DVs on, and `properties`),
/// the second carried in the first's commit: the commit holds the file once, with a DV of
/// `storage` type holding the rows `gone` picks; Tarn reads the rest, and delta-rs reads
/// every version with Tarn's rows.
async fn assert_united_grouped_deletes(
    name: &str,
    properties: &[(&str, &str)],
    second: tarn::expr::Expr,
    gone: impl Fn(i64) -> bool,
    storage: &str,
) {
    use tarn::ChangeStrategy;

    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(name);
    let mut table = tarn_tests::fixtures::sales_table_of(&dir, 100).await;
    let mut props = vec![("delta.enableDeletionVectors", "true")];
    props.extend_from_slice(properties);
    let _ = table.set_properties(props).await.unwrap();
    let location = table.snapshot().location().clone();
    let delete = |predicate| delete_write(predicate, ChangeStrategy::MergeOnRead);
    let version = commit_grouped(&location, delete(col("id").lt(lit(3i64))), delete(second)).await;
    let actions = tarn_tests::log::actions_at(&location, version).await;
    let adds: Vec<&serde_json::Value> = actions.iter().filter_map(|a| a.get("add")).collect();
    let removes: Vec<&serde_json::Value> = actions.iter().filter_map(|a| a.get("remove")).collect();
    assert_eq!((adds.len(), removes.len()), (1, 1), "{actions:?}");
    assert_eq!(adds[0]["path"], removes[0]["path"]);
    let deleted = (0..100).filter(|id| gone(*id)).count();
    assert_eq!(adds[0]["deletionVector"]["cardinality"], deleted);
    assert_eq!(adds[0]["deletionVector"]["storageType"], storage);
    table.refresh().await.unwrap();
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    let expected: Vec<i64> = (0..100).filter(|id| !gone(*id)).collect();
    assert_eq!(ids, expected);
    assert_every_version_same_through_deltalake(&location, &dir, version, name).await;
}

/// A merge-on-read delete whose deletion vector lives in a file, carried in another
/// writer's commit: the two delete rows of different files, so nothing is united and the
/// carried `add` keeps the DV file its writer wrote; delta-rs reads every version with
/// Tarn's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_in_files_carried_in_a_grouped_commit_read_the_same_through_deltalake() {
    use tarn::ChangeStrategy;

    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("grouped_dv_files");
    // Partitioned by country (id % 5): ids 0 and 1 live in different files, and each
    // predicate names its partition so neither reads the file the other rewrites.
    let mut table = tarn_tests::fixtures::country_sales_table(&dir).await;
    let _ = table
        .set_properties([
            ("delta.enableDeletionVectors", "true"),
            (tarn::protocol::properties::DV_INLINE_THRESHOLD, "0"),
        ])
        .await
        .unwrap();
    let location = table.snapshot().location().clone();
    let delete = |predicate| delete_write(predicate, ChangeStrategy::MergeOnRead);
    let version = commit_grouped(
        &location,
        delete(col("country").eq(lit("NL")).and(col("id").eq(lit(0i64)))),
        delete(col("country").eq(lit("FR")).and(col("id").eq(lit(1i64)))),
    )
    .await;
    let actions = tarn_tests::log::actions_at(&location, version).await;
    let adds: Vec<&serde_json::Value> = actions.iter().filter_map(|a| a.get("add")).collect();
    assert_eq!(adds.len(), 2, "{actions:?}");
    assert_ne!(adds[0]["path"], adds[1]["path"]);
    for add in &adds {
        assert_eq!(add["deletionVector"]["storageType"], "u", "{add}");
        assert_eq!(add["deletionVector"]["cardinality"], 1, "{add}");
    }
    table.refresh().await.unwrap();
    let ids = sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    assert_eq!(ids, (2..100).collect::<Vec<i64>>());
    assert_every_version_same_through_deltalake(&location, &dir, version, "carried DV files").await;
}

/// delta-rs reads every version `0..=last` of the table at `dir` with Tarn's rows.
async fn assert_every_version_same_through_deltalake(
    location: &tarn::StoreLocation,
    dir: &Path,
    last: i64,
    what: &str,
) {
    for version in 0..=last {
        let snapshot = Snapshot::builder(location.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        let ours = snapshot.scan().collect().await.unwrap();
        let theirs = read_with_deltalake(dir, Some(version));
        let what = format!("version {version} ({what})");
        assert_eq!(theirs.version, version, "{what}");
        assert_eq!(theirs.rows, row_count(&ours), "{what}: row count");
        let theirs = align(&theirs.batches, snapshot.arrow_schema());
        assert_eq!(
            canonical_rows(&ours),
            canonical_rows(&theirs),
            "{what}: rows"
        );
    }
}
