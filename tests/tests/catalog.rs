//! The directory catalog: namespaces and tables through their whole life, both layouts,
//! pages split and merged, concurrent handles (as separate processes would be), search
//! through the manifest's indices, bad input; on local files and MinIO. The manifest is a
//! plain Delta table delta-rs reads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::StoreLocation;
use tarn_catalog::{Catalog, CatalogError, CatalogOptions, Layout, ObjectId, ObjectMetadata};

fn id(text: &str) -> ObjectId {
    ObjectId::parse(text).unwrap()
}

fn props(pairs: &[(&str, &str)]) -> ObjectMetadata {
    ObjectMetadata {
        properties: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        description: None,
        declared: false,
    }
}

fn schema() -> Schema {
    Schema::new(vec![Field::new("id", DataType::Int64, false)])
}

async fn open(location: &StoreLocation, layout: Layout) -> Catalog {
    Catalog::open_at(
        location.clone(),
        CatalogOptions {
            layout,
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn lifecycle(location: StoreLocation, layout: Layout) {
    let catalog = open(&location, layout).await;
    let sales = id("sales");
    catalog
        .create_namespace(&sales, props(&[("owner", "ana")]), false)
        .await
        .unwrap();
    // exist_ok, and without it.
    catalog
        .create_namespace(&sales, ObjectMetadata::default(), true)
        .await
        .unwrap();
    let err = catalog
        .create_namespace(&sales, ObjectMetadata::default(), false)
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::AlreadyExists { .. }), "{err}");
    let info = catalog.describe_namespace(&sales).await.unwrap();
    assert_eq!(info.metadata.properties["owner"], "ana");
    catalog
        .alter_namespace(
            &sales,
            vec![("team".into(), "bi".into())],
            vec!["owner".into()],
        )
        .await
        .unwrap();
    let info = catalog.describe_namespace(&sales).await.unwrap();
    assert_eq!(info.metadata.properties.len(), 1);
    assert_eq!(info.metadata.properties["team"], "bi");

    // Nested namespaces need their parent.
    let err = catalog
        .create_namespace(&id("nowhere$x"), ObjectMetadata::default(), false)
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { .. }), "{err}");
    catalog
        .create_namespace(&id("sales$eu"), ObjectMetadata::default(), false)
        .await
        .unwrap();

    // Tables: create (with data), declare, register; describe and load.
    let orders = id("sales$orders");
    let created = catalog
        .create_table(&orders, &schema(), vec![], props(&[("tier", "gold")]))
        .await
        .unwrap();
    assert_eq!(created.version, Some(0));
    assert!(
        created.location.ends_with("-orders"),
        "{}",
        created.location
    );
    let mut table = catalog.load_table(&orders).await.unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(schema()),
        vec![Arc::new(Int64Array::from(vec![1, 2, 3]))],
    )
    .unwrap();
    table.append([batch]).await.unwrap();
    let described = catalog.describe_table(&orders, true).await.unwrap();
    assert_eq!(described.version, Some(1));
    assert_eq!(described.metadata.properties["tier"], "gold");
    let declared = catalog
        .declare_table(&id("sales$later"), ObjectMetadata::default())
        .await
        .unwrap();
    assert!(declared.metadata.declared);
    assert!(catalog.table_exists(&id("sales$later")).await.unwrap());
    let err = catalog.load_table(&id("sales$later")).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { .. }), "{err}");
    // An existing Delta table under the root, registered.
    let outside = tarn::Table::create_at(tarn_catalog_child(&location, "imported/t1"))
        .with_arrow_schema(&schema())
        .execute()
        .await
        .unwrap();
    assert_eq!(outside.version(), 0);
    catalog
        .register_table(
            &id("sales$imported"),
            "imported/t1",
            ObjectMetadata::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        catalog
            .describe_table(&id("sales$imported"), true)
            .await
            .unwrap()
            .version,
        Some(0)
    );

    // Listing, a page at a time.
    for n in 0..7 {
        catalog
            .declare_table(&id(&format!("sales$t{n:02}")), ObjectMetadata::default())
            .await
            .unwrap();
    }
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = catalog
            .list_tables(&sales, 3, token.as_deref())
            .await
            .unwrap();
        assert!(page.ids.len() <= 3);
        all.extend(page.ids.iter().map(|i| i.key()));
        match page.next {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<String> = vec![
        "sales$imported".into(),
        "sales$later".into(),
        "sales$orders".into(),
    ];
    expected.extend((0..7).map(|n| format!("sales$t{n:02}")));
    expected.sort();
    assert_eq!(all, expected);
    let namespaces = catalog.list_namespaces(&sales, 10, None).await.unwrap();
    assert_eq!(
        namespaces.ids.iter().map(|i| i.key()).collect::<Vec<_>>(),
        vec!["sales$eu"]
    );
    let top = catalog
        .list_namespaces(&ObjectId::root(), 10, None)
        .await
        .unwrap();
    assert_eq!(top.ids, vec![sales.clone()]);
    let err = catalog
        .list_namespaces(&sales, 3, page_token_of(&catalog, &sales).await.as_deref())
        .await
        .unwrap_err();
    assert!(
        matches!(err, CatalogError::InvalidPageToken { .. }),
        "{err}"
    );

    // Rename: atomic, refused onto an existing name.
    catalog
        .rename_table(&orders, &id("sales$eu$orders"))
        .await
        .unwrap();
    assert!(!catalog.table_exists(&orders).await.unwrap());
    let moved = catalog
        .describe_table(&id("sales$eu$orders"), true)
        .await
        .unwrap();
    assert_eq!(moved.version, Some(1));
    assert_eq!(moved.location, created.location);
    let err = catalog
        .rename_table(&id("sales$t00"), &id("sales$t01"))
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::AlreadyExists { .. }), "{err}");

    // Drops: a non-empty namespace only with cascade; a missing table is fine.
    let err = catalog.drop_namespace(&sales, false).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotEmpty { .. }), "{err}");
    catalog
        .drop_table(&id("sales$eu$orders"), true)
        .await
        .unwrap();
    catalog
        .drop_table(&id("sales$eu$orders"), true)
        .await
        .unwrap();
    assert!(
        tarn::Table::open_location(tarn_catalog_child(&location, &moved.location))
            .await
            .is_err(),
        "the purged table's data is gone"
    );
    catalog.drop_namespace(&sales, true).await.unwrap();
    assert!(!catalog.namespace_exists(&sales).await.unwrap());
    assert!(!catalog.table_exists(&id("sales$t03")).await.unwrap());
    assert!(
        catalog
            .list_namespaces(&ObjectId::root(), 10, None)
            .await
            .unwrap()
            .ids
            .is_empty()
    );
    catalog.drop_namespace(&sales, false).await.unwrap();
}

/// A token issued by a listing of tables, to hand to a listing of namespaces.
async fn page_token_of(catalog: &Catalog, ns: &ObjectId) -> Option<String> {
    catalog.list_tables(ns, 1, None).await.unwrap().next
}

fn tarn_catalog_child(root: &StoreLocation, relative: &str) -> StoreLocation {
    let url = url::Url::parse(&format!(
        "{}/{}",
        root.url().as_str().trim_end_matches('/'),
        relative
    ))
    .unwrap();
    let mut path = root.root().clone();
    for part in relative.split('/') {
        path = path.join(part);
    }
    StoreLocation::new(url, Arc::clone(root.store()), path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_tables_live_and_die_on_local_files() {
    for layout in [
        Layout::default(),
        Layout::FullRewrite,
        Layout::Paged { rows_per_page: 4 },
    ] {
        let dir = tempfile::tempdir().unwrap();
        lifecycle(
            tarn_store::open(dir.path().to_str().unwrap()).unwrap(),
            layout,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_tables_live_and_die_on_minio() {
    let server = tarn_tests::minio::s3();
    lifecycle(
        server.location("catalog"),
        Layout::Paged { rows_per_page: 4 },
    )
    .await;
}
