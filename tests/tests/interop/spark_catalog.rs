//! The directory catalog against Spark: its `__manifest` (rewritten copy-on-write with
//! inline indices on every mutation, paged or whole) is a Delta table Spark reads at every
//! version with Tarn's rows and history, and the tables the catalog creates read in Spark.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use tarn::Table;
use tarn_catalog::{Catalog, CatalogOptions, Layout, ObjectId, ObjectMetadata};
use tarn_tests::catalog::{id, schema};
use tarn_tests::spark::{delta_table, spark};
use tarn_tests::spark_checks::{assert_same_in_spark, assert_same_in_spark_at};

/// Every kind of mutation: namespaces created, altered and dropped, tables created with
/// data, declared, renamed and dropped, enough of them to fill several pages.
async fn mutate(catalog: &Catalog) {
    let none = ObjectMetadata::default;
    catalog
        .create_namespace(&id("sales"), none(), tarn_catalog::IfExists::Fail)
        .await
        .unwrap();
    catalog
        .create_namespace(&id("sales$eu"), none(), tarn_catalog::IfExists::Fail)
        .await
        .unwrap();
    for n in 0..9 {
        let table = id(&format!("sales$t{n}"));
        catalog
            .create_table(&table, &schema(), vec![], none())
            .await
            .unwrap();
    }
    let mut orders = catalog.load_table(&id("sales$t0")).await.unwrap();
    let rows = RecordBatch::try_new(
        Arc::new(schema()),
        vec![Arc::new(Int64Array::from(vec![1, 2, 3]))],
    )
    .unwrap();
    orders.append([rows]).await.unwrap();
    catalog
        .alter_namespace(&id("sales"), vec![("team".into(), "bi".into())], vec![])
        .await
        .unwrap();
    catalog
        .declare_table(&id("sales$eu$later"), none())
        .await
        .unwrap();
    catalog
        .rename_table(&id("sales$t1"), &id("sales$eu$t1"))
        .await
        .unwrap();
    catalog
        .drop_table(&id("sales$t2"), tarn_catalog::DropData::Purge)
        .await
        .unwrap();
    catalog
        .drop_namespace(&id("sales$eu"), tarn_catalog::DropBehavior::Cascade)
        .await
        .unwrap();
}

async fn manifest_reads_in_spark(root: &Path, layout: Layout) {
    let spark = spark();
    let catalog = Catalog::open(
        root.to_str().unwrap(),
        CatalogOptions {
            layout,
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap();
    mutate(&catalog).await;
    let what = format!("manifest, {layout:?}");
    let dir = root.join("__manifest");
    let manifest = Table::open(dir.to_str().unwrap()).await.unwrap();
    assert!(manifest.version() > 15, "{what}: {}", manifest.version());
    assert_same_in_spark(spark, &manifest, &dir, &what).await;

    // Spark sees the same tables the catalog lists.
    let t = delta_table(&dir);
    let spark_tables: BTreeSet<String> = spark
        .sql(&format!(
            "SELECT object_id FROM {t} WHERE object_type = 'table'"
        ))
        .iter()
        .map(|r| r["object_id"].as_str().unwrap().to_string())
        .collect();
    let listed: BTreeSet<String> = catalog
        .list_by_type(tarn_catalog::ObjectType::Table)
        .await
        .unwrap()
        .iter()
        .map(ObjectId::key)
        .collect();
    assert_eq!(spark_tables, listed, "{what}");
    assert!(listed.contains("sales$t0") && !listed.contains("sales$t2"));

    // A table the catalog created reads in Spark at its location.
    let info = catalog
        .describe_table(&id("sales$t0"), tarn_catalog::Detail::WithVersion)
        .await
        .unwrap();
    let location = root.join(&info.location);
    assert_same_in_spark_at(spark, &location, 1, &what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_manifests_read_in_spark_at_every_version() {
    let root = tempfile::tempdir().unwrap();
    manifest_reads_in_spark(root.path(), Layout::Paged { rows_per_page: 4 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_manifests_read_in_spark_at_every_version() {
    let root = tempfile::tempdir().unwrap();
    manifest_reads_in_spark(root.path(), Layout::FullRewrite).await;
}
