//! Writing to tables with column mapping (`delta.columnMapping.mode` `name` or `id`):
//! Tarn gives columns ids and physical names, writes data files, statistics and partition
//! values under the physical names with the ids as Parquet field ids, and every write
//! (append, overwrite, delete, update, merge, both strategies, new columns) reads back
//! exactly as the same writes on an unmapped table. Tables Spark mapped (the golden
//! tables) take Tarn's writes too, and delta-rs reads Tarn's mapped tables. Spark's side
//! is in `spark_features.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field};
use parquet::file::reader::{FileReader, SerializedFileReader};
use tarn::ChangeStrategy;
use tarn::expr::{Expr, col, lit, source_col};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{Error, SchemaMode, Table, WriteMode};
use tarn_tests::fixtures::{
    all_types_batch, all_types_schema, country_sales_table, only_country, sales_batch,
    sales_schema, snapshot_at, with_column,
};
use tarn_tests::golden::{copy_dir, golden_expected, golden_table};
use tarn_tests::python::read_with_deltalake;
use tarn_tests::rows::{align, canonical_rows, read_parquet_dir, row_count};

/// Top-level (name, Parquet field id) of a data file's schema.
fn file_columns(path: &Path) -> Vec<(String, Option<i32>)> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = SerializedFileReader::new(file).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| {
            let info = f.get_basic_info();
            (f.name().to_string(), info.has_id().then(|| info.id()))
        })
        .collect()
}

/// The local file an `add` path (URI-encoded, relative) names.
fn local_path(dir: &Path, path: &str) -> std::path::PathBuf {
    url::Url::from_directory_path(dir)
        .unwrap()
        .join(path)
        .unwrap()
        .to_file_path()
        .unwrap()
}

async fn rows_at(dir: &Path, version: i64) -> Vec<String> {
    let snapshot = snapshot_at(dir, version).await;
    canonical_rows(&snapshot.scan().collect().await.unwrap())
}

/// Every data file of the table is written under the physical names, with the column ids
/// as field ids, and its `add` keys partition values and statistics by physical name.
fn assert_files_physical(table: &Table, dir: &Path, what: &str) {
    let snapshot = table.snapshot();
    let partitions: Vec<String> = snapshot.metadata().partition_columns.clone();
    let data: Vec<&StructField> = snapshot
        .schema()
        .fields
        .iter()
        .filter(|f| !partitions.contains(&f.name))
        .collect();
    let mut checked = 0;
    for add in snapshot.files() {
        let columns = file_columns(&local_path(dir, &add.path));
        let expected: Vec<(String, Option<i32>)> = data
            .iter()
            .map(|f| {
                (
                    f.physical_name().to_string(),
                    f.column_id().map(|id| id as i32),
                )
            })
            .collect();
        // Files written before a column was added lack it.
        assert!(!columns.is_empty() && columns.len() <= expected.len());
        assert_eq!(
            columns,
            expected[..columns.len()],
            "{what}: columns of {}",
            add.path
        );
        for partition in &partitions {
            let physical = snapshot.schema().field(partition).unwrap().physical_name();
            assert!(
                add.partition_values.contains_key(physical) && physical.starts_with("col-"),
                "{what}: partition values of {} are not keyed by {physical}",
                add.path
            );
        }
        let stats: serde_json::Value =
            serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
        let id = snapshot.schema().field("id").unwrap().physical_name();
        assert!(
            stats["minValues"][id].is_number() && stats["nullCount"][id].is_number(),
            "{what}: statistics of {} lack {id}: {stats}",
            add.path
        );
        checked += 1;
    }
    assert!(checked > 0, "{what}: no files");
}

/// The writes both tables take, one commit each.
async fn change(table: &mut Table, step: usize) {
    let strategy = if step.is_multiple_of(2) {
        ChangeStrategy::CopyOnWrite
    } else {
        ChangeStrategy::MergeOnRead
    };
    match step {
        0 => table.append([sales_batch(0, 200)]).await.map(|_| ()),
        1 => table.append([sales_batch(200, 300)]).await.map(|_| ()),
        2 | 3 => table
            .delete(col("customer").eq(lit(format!("customer-{step}"))))
            .with_strategy(strategy)
            .execute()
            .await
            .map(|_| ()),
        4 | 5 => table
            .update()
            .filter(col("id").lt(lit(60i64 * step as i64 - 200)))
            .set("amount", col("amount") * lit(2.0))
            .with_strategy(strategy)
            .execute()
            .await
            .map(|_| ()),
        6 | 7 => table
            .merge([sales_batch(250 + 20 * step as i64, 340 + 20 * step as i64)])
            .on(["id"])
            .when_matched_update(None, [("amount", source_col("amount") + lit(1.0))])
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .map(|_| ()),
        8 => table
            .write([only_country(&sales_batch(1000, 1050), "FR")])
            .with_mode(WriteMode::Overwrite)
            .replace_where(col("country").eq(lit("FR")))
            .execute()
            .await
            .map(|_| ()),
        9 => {
            let batch = sales_batch(2000, 2010);
            let rows = batch.num_rows();
            let extra = with_column(
                &batch,
                Field::new("extra", DataType::Int64, true),
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
            );
            table
                .write([extra])
                .with_schema_mode(SchemaMode::AddColumns)
                .execute()
                .await
                .map(|_| ())
        }
        10 => table
            .add_columns([StructField::new(
                "note",
                DeltaType::Primitive(PrimitiveType::String),
                true,
            )])
            .await
            .map(|_| ()),
        _ => table.optimize().execute().await.map(|_| ()),
    }
    .unwrap_or_else(|e| panic!("step {step}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapped_tables_take_every_write_as_unmapped_ones_do() {
    for mode in ["name", "id"] {
        let root = tempfile::tempdir().unwrap();
        let (plain_dir, mapped_dir) = (root.path().join("plain"), root.path().join("mapped"));
        let create = |dir: &Path| {
            Table::create(dir.to_str().unwrap())
                .with_arrow_schema(&sales_schema())
                .with_partition_columns(["country"])
                .with_property("delta.enableDeletionVectors", "true")
        };
        let mut plain = create(&plain_dir).execute().await.unwrap();
        let mut mapped = create(&mapped_dir)
            .with_property("delta.columnMapping.mode", mode)
            .execute()
            .await
            .unwrap();
        let protocol = mapped.snapshot().protocol();
        assert!(
            protocol.has_reader_feature("columnMapping")
                && protocol.has_writer_feature("columnMapping"),
            "{mode}: {protocol:?}"
        );
        let fields = mapped.schema().fields.len();
        assert_eq!(
            mapped
                .snapshot()
                .metadata()
                .property("delta.columnMapping.maxColumnId"),
            Some(fields.to_string().as_str())
        );
        for step in 0..12 {
            change(&mut plain, step).await;
            change(&mut mapped, step).await;
            assert_eq!(plain.version(), mapped.version());
            assert_eq!(
                canonical_rows(&mapped.scan().collect().await.unwrap()),
                canonical_rows(&plain.scan().collect().await.unwrap()),
                "{mode}: rows after step {step}"
            );
            assert_files_physical(&mapped, &mapped_dir, &format!("{mode}, step {step}"));
            if step == 9 {
                // Statistics under physical names skip files as plain ones do.
                let skipped = |t: &Table| {
                    let scan = t.scan().filter(col("id").gt_eq(lit(2000i64)));
                    async move { scan.plan().await.unwrap().skipped_by_stats }
                };
                let (ours, plain_skipped) = (skipped(&mapped).await, skipped(&plain).await);
                assert!(ours > 0, "{mode}: no file skipped by statistics");
                assert_eq!(ours, plain_skipped, "{mode}: files skipped");
            }
        }
        // The added columns continue the ids.
        let schema = mapped.schema();
        for (name, id) in [("extra", fields + 1), ("note", fields + 2)] {
            let field = schema.field(name).unwrap();
            assert_eq!(field.column_id(), Some(id as i64), "{mode}: {name}");
            assert!(field.physical_name().starts_with("col-"), "{mode}: {name}");
        }
        // Time travel reads every version as the unmapped table's.
        for version in 0..=mapped.version() {
            assert_eq!(
                rows_at(&mapped_dir, version).await,
                rows_at(&plain_dir, version).await,
                "{mode}: version {version}"
            );
        }
        // delta-rs reads the mapped table with Tarn's rows.
        let theirs = read_with_deltalake(&mapped_dir, None);
        assert_eq!(theirs.version, mapped.version(), "{mode}");
        let ours = mapped.scan().collect().await.unwrap();
        assert_eq!(theirs.rows, row_count(&ours), "{mode}: delta-rs row count");
        assert_eq!(
            canonical_rows(&align(&theirs.batches, mapped.snapshot().arrow_schema())),
            canonical_rows(&ours),
            "{mode}: delta-rs rows"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_are_written_under_physical_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = Table::create(dir.path().to_str().unwrap())
        .with_arrow_schema(&all_types_schema())
        .with_property("delta.columnMapping.mode", "id")
        .execute()
        .await
        .unwrap();
    let batch = all_types_batch(0, 50);
    table.append([batch.clone()]).await.unwrap();
    assert_eq!(
        canonical_rows(&table.scan().collect().await.unwrap()),
        canonical_rows(&[batch])
    );
    // The struct's fields carry their own physical names into the file.
    let point = table.schema().field("point").unwrap();
    let DeltaType::Struct(inner) = &point.data_type else {
        panic!("point is not a struct")
    };
    let add = table.snapshot().files().next().unwrap().clone();
    let reader =
        SerializedFileReader::new(std::fs::File::open(local_path(dir.path(), &add.path)).unwrap())
            .unwrap();
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let file_point = schema
        .root_schema()
        .get_fields()
        .iter()
        .find(|f| f.name() == point.physical_name())
        .unwrap()
        .clone();
    let children: Vec<(String, i32)> = file_point
        .get_fields()
        .iter()
        .map(|f| (f.name().to_string(), f.get_basic_info().id()))
        .collect();
    let expected: Vec<(String, i32)> = inner
        .fields
        .iter()
        .map(|f| (f.physical_name().to_string(), f.column_id().unwrap() as i32))
        .collect();
    assert_eq!(children, expected);
    assert!(expected.iter().all(|(name, _)| name.starts_with("col-")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapping_turns_on_by_name_and_no_other_change_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = country_sales_table(dir.path()).await;

    let err = table
        .set_properties([("delta.columnMapping.mode", "id")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { reason, .. } if reason.contains("Id")),
        "{err}"
    );
    let err = table
        .set_properties([("delta.columnMapping.mode", "by-name")])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert_eq!(table.version(), 1, "a refused change committed");

    let _ = table
        .set_properties([("delta.columnMapping.mode", "name")])
        .await
        .unwrap();
    let schema = table.schema().clone();
    for (i, field) in schema.fields.iter().enumerate() {
        assert_eq!(field.physical_name(), field.name, "existing names stay");
        assert_eq!(field.column_id(), Some(i as i64 + 1));
    }
    assert!(
        table
            .snapshot()
            .protocol()
            .has_reader_feature("columnMapping")
    );
    table.append([sales_batch(100, 200)]).await.unwrap();
    let _ = table
        .add_columns([StructField::new(
            "later",
            DeltaType::Primitive(PrimitiveType::Long),
            true,
        )])
        .await
        .unwrap();
    assert!(
        table
            .schema()
            .field("later")
            .unwrap()
            .physical_name()
            .starts_with("col-")
    );
    table
        .delete(col("id").lt(lit(10i64)))
        .with_strategy(ChangeStrategy::CopyOnWrite)
        .execute()
        .await
        .unwrap();
    let rows = table.scan().collect().await.unwrap();
    assert_eq!(row_count(&rows), 190);
    let err = table
        .set_properties([("delta.columnMapping.mode", "none")])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

/// The rows of the table at `dir` that do not meet `predicate`.
async fn rows_without(table: &Table, predicate: Expr) -> Vec<String> {
    canonical_rows(
        &table
            .scan()
            .filter(predicate.not())
            .collect()
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_spark_mapped_take_appends_and_deletes() {
    for (name, strategy, predicate) in [
        (
            "table-with-columnmapping-mode-name",
            ChangeStrategy::CopyOnWrite,
            col("ShortType")
                .lt(lit(3i16))
                .or(col("ShortType").is_null()),
        ),
        (
            "table-with-columnmapping-mode-id",
            ChangeStrategy::CopyOnWrite,
            col("ByteType").is_not_null(),
        ),
        (
            "dv-with-columnmapping",
            ChangeStrategy::MergeOnRead,
            col("col1").gt(lit(30i32)),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&golden_table(name), dir.path());
        let mut table = Table::open(dir.path().to_str().unwrap()).await.unwrap();
        let before = table.scan().collect().await.unwrap();
        if let Some(expected) = golden_expected(name) {
            let expected = align(
                &read_parquet_dir(&expected),
                table.snapshot().arrow_schema(),
            );
            assert_eq!(canonical_rows(&before), canonical_rows(&expected), "{name}");
        }
        // Spark's rows, appended again by Tarn: twice each.
        table.append(before.clone()).await.unwrap();
        let mut doubled = canonical_rows(&before);
        doubled.extend(canonical_rows(&before));
        doubled.sort();
        assert_eq!(
            canonical_rows(&table.scan().collect().await.unwrap()),
            doubled,
            "{name}: after the append"
        );
        // A delete on columns Spark named physically removes exactly their rows.
        let kept = rows_without(&table, predicate.clone()).await;
        table
            .delete(predicate)
            .with_strategy(strategy)
            .execute()
            .await
            .unwrap();
        assert_eq!(
            canonical_rows(&table.scan().collect().await.unwrap()),
            kept,
            "{name}: after the delete"
        );
        assert!(
            !kept.is_empty() && kept.len() < doubled.len(),
            "{name}: the delete matched nothing or everything"
        );
    }
}
