//! Row tracking (the `rowTracking` writer feature): every file Tarn adds gets row ids above
//! the table's high-water mark and its commit's version, files it keeps (or a restore
//! adds back) keep theirs,
//! concurrent writers never share an id, and turning the feature on gives every file ids.
//! Spark's side (its `_metadata.row_id` over Tarn's and Spark's writes) is at the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;

use tarn::ChangeStrategy;
use tarn::expr::{col, lit};
use tarn::{Snapshot, Table};
use tarn_tests::fixtures::{sales_batch, sales_schema, sales_table_of, snapshot_at};
use tarn_tests::log::commit_info_at;
use tarn_tests::rows::read_parquet_file;
use tarn_tests::spark::{delta_table, spark};
use tarn_tests::spark_checks::{assert_same_in_spark, assert_tarn_reads_like_spark, spark_sql};

/// Each live file's first row id, row count and commit version, by path.
fn row_ranges(snapshot: &Snapshot) -> BTreeMap<String, (i64, i64, i64)> {
    snapshot
        .files()
        .map(|f| {
            let base = f
                .base_row_id
                .unwrap_or_else(|| panic!("{} has no baseRowId", f.path));
            let version = f
                .default_row_commit_version
                .unwrap_or_else(|| panic!("{} has no defaultRowCommitVersion", f.path));
            let rows = f.stats.as_ref().unwrap().num_records().unwrap() as i64;
            (f.path.clone(), (base, rows, version))
        })
        .collect()
}

/// The table's row-id high-water mark.
fn high_water_mark(snapshot: &Snapshot) -> i64 {
    let config = snapshot
        .domain_metadata("delta.rowTracking")
        .expect("the delta.rowTracking domain");
    let value: serde_json::Value = serde_json::from_str(config).unwrap();
    value["rowIdHighWaterMark"].as_i64().unwrap()
}

/// No two live files share a row id, and none is above the mark.
fn assert_ids_unique_under_mark(snapshot: &Snapshot, what: &str) {
    let mut ranges: Vec<(i64, i64)> = row_ranges(snapshot)
        .values()
        .map(|(base, rows, _)| (*base, *rows))
        .collect();
    ranges.sort();
    for pair in ranges.windows(2) {
        assert!(
            pair[0].0 + pair[0].1 <= pair[1].0,
            "{what}: row ids overlap: {pair:?}"
        );
    }
    let mark = high_water_mark(snapshot);
    for (base, rows) in &ranges {
        assert!(base + rows - 1 <= mark, "{what}: ids above the mark {mark}");
    }
}

/// Each row's materialized row id and commit version in the data file at `file`, by id.
fn materialized_ids(snapshot: &Snapshot, file: &Path) -> BTreeMap<i64, (Option<i64>, Option<i64>)> {
    let config = &snapshot.metadata().configuration;
    let column = |key: &str| config[key].clone().unwrap();
    let id_column = column("delta.rowTracking.materializedRowIdColumnName");
    let version_column = column("delta.rowTracking.materializedRowCommitVersionColumnName");
    let mut out = BTreeMap::new();
    for batch in read_parquet_file(file) {
        let int = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap_or_else(|| panic!("{file:?} has no column {name}"))
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (ids, row_ids, versions) = (int("id"), int(&id_column), int(&version_column));
        for i in 0..batch.num_rows() {
            let value = |a: &arrow::array::Int64Array| (!a.is_null(i)).then(|| a.value(i));
            out.insert(ids.value(i), (value(&row_ids), value(&versions)));
        }
    }
    out
}

async fn tracked_table(dir: &Path) -> Table {
    Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&sales_schema())
        .with_property("delta.enableRowTracking", "true")
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap()
}

/// The `delta.rowTracking.preserved` tag of a commit.
async fn preserved_tag(table: &Table, version: i64) -> Option<String> {
    let info = commit_info_at(table.location(), version).await.unwrap();
    info["tags"]["delta.rowTracking.preserved"]
        .as_str()
        .map(String::from)
}

#[tokio::test]
async fn appends_take_consecutive_ids_above_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = tracked_table(dir.path()).await;
    let protocol = table.snapshot().protocol().clone();
    assert!(protocol.has_writer_feature("rowTracking"));
    assert!(protocol.has_writer_feature("domainMetadata"));
    let config = &table.snapshot().metadata().configuration;
    let id_column = config["delta.rowTracking.materializedRowIdColumnName"].clone();
    let version_column = config["delta.rowTracking.materializedRowCommitVersionColumnName"].clone();
    assert!(id_column.unwrap().starts_with("_row-id-col-"));
    assert!(
        version_column
            .unwrap()
            .starts_with("_row-commit-version-col-")
    );

    let first = table.append([sales_batch(0, 30)]).await.unwrap();
    let second = table
        .append([sales_batch(30, 40), sales_batch(40, 45)])
        .await
        .unwrap();
    let ranges = row_ranges(table.snapshot());
    let mut by_base: Vec<(i64, i64, i64)> = ranges.values().copied().collect();
    by_base.sort();
    // Ids start at 0 and follow on, file after file; each file has its commit's version.
    let mut next = 0;
    for (base, rows, version) in &by_base {
        assert_eq!(*base, next, "{by_base:?}");
        next += rows;
        let expected = if *base < 30 {
            first.commit.version
        } else {
            second.commit.version
        };
        assert_eq!(*version, expected, "{by_base:?}");
    }
    assert_eq!(next, 45);
    assert_eq!(high_water_mark(table.snapshot()), 44);
    assert_eq!(
        preserved_tag(&table, second.commit.version)
            .await
            .as_deref(),
        Some("true")
    );
}

#[tokio::test]
async fn rows_kept_and_rewritten_keep_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = tracked_table(dir.path()).await;
    table.append([sales_batch(0, 50)]).await.unwrap();
    table.append([sales_batch(50, 100)]).await.unwrap();
    let before = row_ranges(table.snapshot());

    // Merge-on-read: the files stay, with a deletion vector and the same ids.
    let deleted = table
        .delete(col("id").lt(lit(5i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    assert_eq!(row_ranges(table.snapshot()), before);
    assert_eq!(high_water_mark(table.snapshot()), 99);
    assert_eq!(
        preserved_tag(&table, deleted.commit.version)
            .await
            .as_deref(),
        Some("true")
    );
    // The remove of the old entry carries the ids too.
    let log = std::fs::read_to_string(
        dir.path()
            .join(format!("_delta_log/{:020}.json", deleted.commit.version)),
    )
    .unwrap();
    let removes: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|a| a.get("remove").is_some())
        .collect();
    assert!(!removes.is_empty());
    for remove in &removes {
        let path = remove["remove"]["path"].as_str().unwrap();
        assert_eq!(
            remove["remove"]["baseRowId"].as_i64(),
            Some(before[path].0),
            "{remove}"
        );
        assert_eq!(
            remove["remove"]["defaultRowCommitVersion"].as_i64(),
            Some(before[path].2)
        );
    }

    // Copy-on-write: the rewritten file takes fresh ids above the mark, and its rows
    // keep their stable ids and versions in the materialized columns (updated rows
    // take the update's version: a null there).
    let updated = table
        .update()
        .filter(col("id").gt_eq(lit(90i64)))
        .set("customer", lit("changed"))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let after = row_ranges(table.snapshot());
    let fresh: Vec<(&String, &(i64, i64, i64))> = after
        .iter()
        .filter(|(path, _)| !before.contains_key(*path))
        .collect();
    assert_eq!(fresh.len(), 1, "{after:?}");
    let (path, range) = fresh[0];
    assert_eq!(range.0, 100);
    assert_eq!(range.2, updated.commit.version);
    assert_eq!(high_water_mark(table.snapshot()), 100 + range.1 - 1);
    assert_eq!(
        preserved_tag(&table, updated.commit.version)
            .await
            .as_deref(),
        Some("true")
    );
    let second_append = before.values().find(|r| r.0 == 50).map(|r| r.2).unwrap();
    let materialized = materialized_ids(table.snapshot(), &dir.path().join(path));
    assert_eq!(materialized.len(), 50);
    for (id, (row_id, version)) in &materialized {
        assert_eq!(*row_id, Some(*id), "row {id}");
        let expected = (*id < 90).then_some(second_append);
        assert_eq!(*version, expected, "row {id}");
    }
    assert_ids_unique_under_mark(table.snapshot(), "after the update");

    // A checkpoint keeps every file's ids.
    let _ = table.checkpoint().await.unwrap();
    let reopened = Table::open(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(row_ranges(reopened.snapshot()), after);
    assert_eq!(
        high_water_mark(reopened.snapshot()),
        high_water_mark(table.snapshot())
    );
}

/// Every live row's stable row id and commit version, by id, from files without
/// deletion vectors: the materialized value, else the file's base id plus the row's
/// position and its default version.
fn stable_ids(snapshot: &Snapshot, dir: &Path) -> BTreeMap<i64, (i64, i64)> {
    let mut out = BTreeMap::new();
    for add in snapshot.files() {
        assert!(
            add.deletion_vector.is_none(),
            "{} has a deletion vector",
            add.path
        );
        let materialized = materialized_ids(snapshot, &dir.join(&add.path));
        let mut position = 0;
        for batch in read_parquet_file(&dir.join(&add.path)) {
            let ids = batch
                .column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone();
            for i in 0..batch.num_rows() {
                let id = ids.value(i);
                let (row_id, version) = materialized[&id];
                let row_id = row_id.unwrap_or(add.base_row_id.unwrap() + position);
                let version = version.unwrap_or(add.default_row_commit_version.unwrap());
                assert!(
                    out.insert(id, (row_id, version)).is_none(),
                    "row {id} twice"
                );
                position += 1;
            }
        }
    }
    out
}

#[tokio::test]
async fn merge_on_read_changes_and_compaction_keep_row_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = tracked_table(dir.path()).await;
    let first = table
        .append([sales_batch(0, 50)])
        .await
        .unwrap()
        .commit
        .version;
    let second = table
        .append([sales_batch(50, 100)])
        .await
        .unwrap()
        .commit
        .version;
    let updated = table
        .update()
        .filter(col("id").gt_eq(lit(10i64)).and(col("id").lt(lit(20i64))))
        .set("customer", lit("updated"))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap()
        .commit
        .version;
    let source = sales_batch(60, 65);
    let merged = table
        .merge([source, sales_batch(200, 203)])
        .on(["id"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap()
        .commit
        .version;
    for version in [updated, merged] {
        assert_eq!(
            preserved_tag(&table, version).await.as_deref(),
            Some("true"),
            "version {version}"
        );
    }
    let compacted = table.optimize().execute().await.unwrap();
    assert!(compacted.files_removed > 2, "{compacted:?}");
    let version = compacted.commit.version;
    assert_eq!(
        preserved_tag(&table, version).await.as_deref(),
        Some("true")
    );
    assert_ids_unique_under_mark(table.snapshot(), "after compaction");

    let ids = stable_ids(table.snapshot(), dir.path());
    assert_eq!(ids.len(), 103);
    for (id, (row_id, row_version)) in &ids {
        let expected = match *id {
            10..20 => updated,
            60..65 | 200.. => merged,
            0..50 => first,
            _ => second,
        };
        assert_eq!(*row_version, expected, "row {id}");
        if *id < 100 {
            assert_eq!(row_id, id, "row {id}");
        } else {
            // Inserted by the merge: fresh ids above the appends', kept by compaction.
            assert!((100..200).contains(row_id), "row {id}: {row_id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_never_share_an_id_and_never_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap().to_string();
    tracked_table(dir.path()).await;
    let writers = 4;
    let rounds = 4;
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut table = Table::open(&url).await.unwrap();
                for r in 0..rounds {
                    let start = (w * rounds + r) * 10;
                    // Row ids are given at commit time: a lost race is no conflict.
                    table
                        .append([sales_batch(start, start + 7)])
                        .await
                        .unwrap_or_else(|e| panic!("writer {w}, round {r}: {e}"));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    let table = Table::open(&url).await.unwrap();
    // Group commit may carry several appends in one commit.
    assert!(table.version() <= writers * rounds);
    assert_ids_unique_under_mark(table.snapshot(), "concurrent appends");
    let ranges = row_ranges(table.snapshot());
    let total: i64 = ranges.values().map(|r| r.1).sum();
    assert_eq!(total, writers * rounds * 7);
    // No id was skipped either: the mark is the last one handed out.
    assert_eq!(high_water_mark(table.snapshot()), total - 1);
}

#[tokio::test]
async fn turning_row_tracking_on_gives_every_file_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = sales_table_of(dir.path(), 20).await;
    table.append([sales_batch(20, 25)]).await.unwrap();
    assert!(table.snapshot().files().all(|f| f.base_row_id.is_none()));
    let rows_before = table.scan().collect().await.unwrap();
    let enabled = table
        .set_properties([("delta.enableRowTracking", "true")])
        .await
        .unwrap();
    let snapshot = table.snapshot();
    assert!(snapshot.protocol().has_writer_feature("rowTracking"));
    assert!(
        snapshot
            .metadata()
            .configuration
            .contains_key("delta.rowTracking.materializedRowIdColumnName")
    );
    let ranges = row_ranges(snapshot);
    assert_eq!(ranges.len(), 2);
    assert!(ranges.values().all(|r| r.2 == enabled.version));
    assert_ids_unique_under_mark(snapshot, "backfill");
    assert_eq!(high_water_mark(snapshot), 24);
    // The recommits change no data.
    let rows_after = table.scan().collect().await.unwrap();
    assert_eq!(
        tarn_tests::rows::canonical_rows(&rows_before),
        tarn_tests::rows::canonical_rows(&rows_after)
    );
    let older = snapshot_at(dir.path(), enabled.version - 1).await;
    assert_eq!(older.file_count(), 2);
}

#[tokio::test]
async fn restored_files_take_back_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = tracked_table(dir.path()).await;
    table.append([sales_batch(0, 30)]).await.unwrap();
    table.append([sales_batch(30, 40)]).await.unwrap();
    let before = row_ranges(table.snapshot());
    let target = table.version();
    table
        .delete(col("id").lt(lit(30i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(40, 50)]).await.unwrap();
    let mark = high_water_mark(table.snapshot());
    assert_eq!(mark, 49);

    // The files added back are the ones with ids 0..30 and 30..40, as Spark's RESTORE
    // re-adds them: same ids, same commit versions, and the mark does not move.
    table.restore().to_version(target).execute().await.unwrap();
    assert_eq!(row_ranges(table.snapshot()), before);
    assert_eq!(high_water_mark(table.snapshot()), mark);
    assert_ids_unique_under_mark(table.snapshot(), "restore");
    // A later append still takes ids above the mark.
    table.append([sales_batch(50, 55)]).await.unwrap();
    assert_ids_unique_under_mark(table.snapshot(), "append after restore");
    assert_eq!(high_water_mark(table.snapshot()), 54);
}

/// Spark's `_metadata.row_id` and `_metadata.row_commit_version` of every row, by id.
fn spark_row_ids(dir: &Path) -> BTreeMap<i64, (i64, i64)> {
    let t = delta_table(dir);
    spark()
        .sql(&format!(
            "SELECT id, _metadata.row_id AS row_id, \
             _metadata.row_commit_version AS row_version FROM {t}"
        ))
        .iter()
        .map(|row| {
            (
                row["id"].as_i64().unwrap(),
                (
                    row["row_id"].as_i64().unwrap(),
                    row["row_version"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Every row's Spark row id is distinct.
fn assert_spark_ids_distinct(ids: &BTreeMap<i64, (i64, i64)>, what: &str) {
    let distinct: std::collections::BTreeSet<i64> = ids.values().map(|v| v.0).collect();
    assert_eq!(distinct.len(), ids.len(), "{what}: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_ids_stay_unique_across_spark_and_tarn() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spark-made");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, customer STRING) USING delta \
             TBLPROPERTIES ('delta.enableRowTracking' = 'true', \
             'delta.enableDeletionVectors' = 'true')",
            "INSERT INTO {t} SELECT id, CONCAT('spark-', id) FROM range(0, 20)",
            "UPDATE {t} SET customer = 'spark-updated' WHERE id < 3",
        ],
    );
    let mut table = assert_tarn_reads_like_spark(spark, &dir, "row tracking").await;
    let spark_ids = spark_row_ids(&dir);
    let mark = high_water_mark(table.snapshot());

    let rows = |start: i64, end: i64| sales_batch(start, end).project(&[0, 1]).unwrap();
    let appended = table.append([rows(100, 110)]).await.unwrap();
    table
        .delete(col("id").eq(lit(5i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table
        .delete(col("id").eq(lit(6i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let merged = table
        .merge([rows(105, 115)])
        .on(["id"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    // A merge-on-read update and a compaction keep every id too.
    let mor = table
        .update()
        .filter(col("id").eq(lit(7i64)))
        .set("customer", lit("tarn-mor"))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    let compacted = table.optimize().execute().await.unwrap();
    assert!(compacted.files_removed > 1, "{compacted:?}");
    spark_sql(
        spark,
        &dir,
        &["INSERT INTO {t} SELECT id, 'spark-late' FROM range(200, 205)"],
    );
    table.refresh().await.unwrap();
    assert_ids_unique_under_mark(table.snapshot(), "spark and tarn");
    assert_same_in_spark(spark, &table, &dir, "row tracking").await;

    let ids = spark_row_ids(&dir);
    assert_spark_ids_distinct(&ids, "spark and tarn");
    assert_eq!(ids.len(), 20 - 2 + 15 + 5);
    // Every row Spark wrote keeps its id and version, whether Tarn left its file alone,
    // gave it a deletion vector, rewrote it (copy-on-write) or compacted it; the row Tarn
    // updated keeps its id and takes the update's version.
    for id in (0..20).filter(|id| ![5, 6].contains(id)) {
        assert_eq!(ids[&id].0, spark_ids[&id].0, "row {id}");
        let version = match id {
            7 => mor.commit.version,
            _ => spark_ids[&id].1,
        };
        assert_eq!(ids[&id].1, version, "row {id}");
    }
    // Rows Tarn appended: ids above Spark's old mark, in order, kept through the merge's
    // rewrite; the version is the append's, or the merge's for the rows it updated.
    for id in 100..110 {
        assert_eq!(ids[&id].0, mark + 1 + (id - 100), "row {id}");
        let version = match id < 105 {
            true => appended.commit.version,
            false => merged.commit.version,
        };
        assert_eq!(ids[&id].1, version, "row {id}");
    }
    // Spark's late rows come after every id Tarn handed out.
    let tarn_max = ids
        .iter()
        .filter(|(id, _)| **id < 200)
        .map(|(_, v)| v.0)
        .max()
        .unwrap();
    assert!(ids[&200].0 > tarn_max, "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_tracks_read_their_ids_in_spark_and_take_spark_writes() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("tarn-made");
    let mut table = tracked_table(&dir).await;
    let first = table.append([sales_batch(0, 30)]).await.unwrap();
    table.append([sales_batch(30, 40)]).await.unwrap();
    let ids = spark_row_ids(&dir);
    for (id, (row_id, version)) in &ids {
        assert_eq!(row_id, id, "Spark's row id of row {id}");
        let expected = if *id < 30 {
            first.commit.version
        } else {
            first.commit.version + 1
        };
        assert_eq!(*version, expected, "row {id}");
    }
    // Tarn rewrites rows: they keep their ids in Spark's eyes.
    let updated = table
        .update()
        .filter(col("id").lt(lit(3i64)))
        .set("customer", lit("tarn"))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let kept = spark_row_ids(&dir);
    for (id, (row_id, version)) in &kept {
        assert_eq!(row_id, id, "Spark's row id of row {id} after Tarn's update");
        let expected = match *id {
            0..3 => updated.commit.version,
            3..30 => first.commit.version,
            _ => first.commit.version + 1,
        };
        assert_eq!(*version, expected, "row {id}");
    }
    // Spark changes rows (with its materialized columns), then Tarn appends again.
    spark_sql(
        spark,
        &dir,
        &[
            "UPDATE {t} SET customer = 'spark' WHERE id % 4 = 0",
            "DELETE FROM {t} WHERE id = 1",
        ],
    );
    table.refresh().await.unwrap();
    table.append([sales_batch(40, 45)]).await.unwrap();
    assert_same_in_spark(spark, &table, &dir, "tarn-made row tracking").await;
    let after = spark_row_ids(&dir);
    assert_spark_ids_distinct(&after, "tarn-made");
    // Spark preserved its updated rows' ids; Tarn's new rows come after all of them.
    for id in [0i64, 4, 8, 2] {
        assert_eq!(after[&id].0, id, "row {id}");
    }
    for id in 40..45 {
        assert!(after[&id].0 >= 40, "row {id}: {:?}", after[&id]);
    }
    assert_ids_unique_under_mark(table.snapshot(), "tarn-made");
}
