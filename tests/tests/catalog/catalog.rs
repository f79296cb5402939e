//! The directory catalog: namespaces and tables through their whole life, both layouts,
//! pages split and merged, concurrent handles (as separate processes would be), search
//! through the manifest's indices, bad input; on local files and MinIO. The manifest is a
//! plain Delta table delta-rs reads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use tarn::StoreLocation;
use tarn_catalog::{Catalog, CatalogOptions, Layout, ObjectId, ObjectMetadata};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::catalog::{id, open, props, schema};

async fn lifecycle(location: StoreLocation, layout: Layout) {
    let catalog = open(&location, layout).await;
    let sales = id("sales");
    catalog
        .create_namespace(
            &sales,
            props(&[("owner", "ana")]),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    // exist_ok, and without it.
    catalog
        .create_namespace(
            &sales,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Ignore,
        )
        .await
        .unwrap();
    let err = catalog
        .create_namespace(
            &sales,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::AlreadyExists { .. }),
        "{err}"
    );
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
        .create_namespace(
            &id("nowhere$x"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::NotFound { .. }), "{err}");
    catalog
        .create_namespace(
            &id("sales$eu"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
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
    let described = catalog
        .describe_table(&orders, tarn_catalog::Detail::WithVersion)
        .await
        .unwrap();
    assert_eq!(described.version, Some(1));
    assert_eq!(described.metadata.properties["tier"], "gold");
    let declared = catalog
        .declare_table(&id("sales$later"), ObjectMetadata::default())
        .await
        .unwrap();
    assert!(declared.metadata.declared);
    assert!(catalog.table_exists(&id("sales$later")).await.unwrap());
    let err = catalog.load_table(&id("sales$later")).await.unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::NotFound { .. }), "{err}");
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
            .describe_table(&id("sales$imported"), tarn_catalog::Detail::WithVersion)
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
        matches!(err, tarn_catalog::Error::InvalidPageToken { .. }),
        "{err}"
    );

    // Rename: atomic, refused onto an existing name.
    catalog
        .rename_table(&orders, &id("sales$eu$orders"))
        .await
        .unwrap();
    assert!(!catalog.table_exists(&orders).await.unwrap());
    let moved = catalog
        .describe_table(&id("sales$eu$orders"), tarn_catalog::Detail::WithVersion)
        .await
        .unwrap();
    assert_eq!(moved.version, Some(1));
    assert_eq!(moved.location, created.location);
    let err = catalog
        .rename_table(&id("sales$t00"), &id("sales$t01"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::AlreadyExists { .. }),
        "{err}"
    );

    // Drops: a non-empty namespace only with cascade; a missing table is fine.
    let err = catalog
        .drop_namespace(&sales, tarn_catalog::DropBehavior::Restrict)
        .await
        .unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::NotEmpty { .. }), "{err}");
    catalog
        .drop_table(&id("sales$eu$orders"), tarn_catalog::DropData::Purge)
        .await
        .unwrap();
    catalog
        .drop_table(&id("sales$eu$orders"), tarn_catalog::DropData::Purge)
        .await
        .unwrap();
    assert!(
        tarn::Table::open_at(tarn_catalog_child(&location, &moved.location))
            .await
            .is_err(),
        "the purged table's data is gone"
    );
    catalog
        .drop_namespace(&sales, tarn_catalog::DropBehavior::Cascade)
        .await
        .unwrap();
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
    catalog
        .drop_namespace(&sales, tarn_catalog::DropBehavior::Restrict)
        .await
        .unwrap();
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

fn manifest_url(dir: &std::path::Path) -> String {
    format!("{}/__manifest", dir.to_str().unwrap())
}

/// Rows per manifest file, in key order, with each file's key range.
async fn page_shapes(dir: &std::path::Path) -> Vec<(String, String, i64)> {
    shapes(dir, false).await
}

/// Rows per manifest file, or with `live` its rows less its deletion vector's (a drop may
/// leave its row under a DV), in key order, with each file's key range.
async fn shapes(dir: &std::path::Path, live: bool) -> Vec<(String, String, i64)> {
    let mut shapes: Vec<(String, String, i64)> = pages_with_stats(dir)
        .await
        .into_iter()
        .map(|(stats, add)| {
            let deleted = match (live, &add.deletion_vector) {
                (true, Some(dv)) => dv.cardinality,
                _ => 0,
            };
            (
                stats["minValues"]["object_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                stats["maxValues"]["object_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                stats["numRecords"].as_i64().unwrap() - deleted,
            )
        })
        .collect();
    shapes.sort();
    shapes
}

/// Each manifest page's statistics, with its `add`.
async fn pages_with_stats(dir: &std::path::Path) -> Vec<(serde_json::Value, tarn::protocol::Add)> {
    let table = tarn::Table::open(&manifest_url(dir)).await.unwrap();
    table
        .snapshot()
        .files()
        .map(|add| {
            let stats = serde_json::from_str(&add.stats.as_ref().unwrap().json()).unwrap();
            (stats, add.clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_split_as_the_catalog_grows_and_merge_as_it_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::Paged { rows_per_page: 8 }).await;
    let created = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    // Sixty creates at once from one handle: grouped into fewer commits.
    let creates = (0..60).map(|n| {
        let catalog = catalog.clone();
        async move {
            catalog
                .create_namespace(
                    &id(&format!("ns{n:03}")),
                    ObjectMetadata::default(),
                    tarn_catalog::IfExists::Fail,
                )
                .await
        }
    });
    for result in futures::future::join_all(creates).await {
        result.unwrap();
    }
    let commits = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version()
        - created;
    assert!(commits < 60, "{commits} commits for 60 creates");
    assert_eq!(catalog.stats().commits, commits as u64);
    // The layout is the catalog's: another handle asking for another one gets it too.
    let other = open(&location, Layout::FullRewrite).await;
    assert_eq!(
        other.layout().await.unwrap(),
        Layout::Paged { rows_per_page: 8 }
    );
    assert_page_shapes(dir.path(), 60).await;

    // Dropping most of them shrinks pages into small ones.
    for n in (0..60).filter(|n| n % 10 != 0) {
        catalog
            .drop_namespace(
                &id(&format!("ns{n:03}")),
                tarn_catalog::DropBehavior::Restrict,
            )
            .await
            .unwrap();
    }
    assert_page_shapes(dir.path(), 6).await;

    // New keys, one commit each, go to small pages a compaction folds into base pages.
    for n in 0..40 {
        catalog
            .create_namespace(
                &id(&format!("late{n:02}")),
                ObjectMetadata::default(),
                tarn_catalog::IfExists::Fail,
            )
            .await
            .unwrap();
        if n % 10 == 9 {
            assert_page_shapes(dir.path(), 7 + n).await;
        }
    }
    let shapes = page_shapes(dir.path()).await;
    assert!(shapes.len() < 46, "no compaction: {shapes:?}");
    // The listing is in key order across base and small pages, a page at a time.
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = catalog
            .list_namespaces(&ObjectId::root(), 7, token.as_deref())
            .await
            .unwrap();
        all.extend(page.ids.iter().map(ObjectId::key));
        match page.next {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<String> = (0..60)
        .step_by(10)
        .map(|n| format!("ns{n:03}"))
        .chain((0..40).map(|n| format!("late{n:02}")))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
    for key in &expected {
        assert!(catalog.namespace_exists(&id(key)).await.unwrap(), "{key}");
    }
}

/// The manifest's pages hold `rows` live rows, none more than the page size (8); base
/// pages (two live rows or more) do not overlap; small pages stay under twice the
/// compaction threshold.
async fn assert_page_shapes(dir: &std::path::Path, rows: i64) {
    let shapes = shapes(dir, true).await;
    assert_eq!(shapes.iter().map(|s| s.2).sum::<i64>(), rows, "{shapes:?}");
    assert!(shapes.iter().all(|s| s.2 <= 8), "{shapes:?}");
    let base: Vec<_> = shapes.iter().filter(|s| s.2 >= 2).collect();
    for pair in base.windows(2) {
        assert!(pair[0].1 < pair[1].0, "base pages overlap: {shapes:?}");
    }
    let small = shapes.len() - base.len();
    assert!(small <= 16, "{small} small pages: {shapes:?}");
}

/// Several handles on one root, as separate processes would hold: they race, and each
/// sees what another acknowledged.
async fn handles_agree(location: StoreLocation) {
    let handles: Vec<Catalog> = futures::future::join_all(
        (0..4).map(|_| open(&location, Layout::Paged { rows_per_page: 16 })),
    )
    .await;

    // One name, four creators: exactly one wins.
    let shared = id("shared");
    let results = futures::future::join_all(handles.iter().map(|c| {
        c.create_namespace(
            &shared,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
    }))
    .await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    for err in results.into_iter().filter_map(Result::err) {
        assert!(
            matches!(err, tarn_catalog::Error::AlreadyExists { .. }),
            "{err}"
        );
    }

    // Different names from every handle at once: all land.
    let creates = handles.iter().enumerate().flat_map(|(h, c)| {
        (0..10).map(move |n| {
            let c = c.clone();
            async move {
                c.declare_table(&id(&format!("shared$h{h}t{n}")), ObjectMetadata::default())
                    .await
            }
        })
    });
    for result in futures::future::join_all(creates).await {
        result.unwrap();
    }
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = handles[3]
            .list_tables(&shared, 7, token.as_deref())
            .await
            .unwrap();
        all.extend(page.ids.iter().map(ObjectId::key));
        match page.next {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(all.len(), 40, "{all:?}");

    // Read your writes across handles: created in one, seen at once by another.
    handles[1]
        .create_namespace(
            &id("shared$fresh"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    handles[2]
        .declare_table(&id("shared$fresh$t"), ObjectMetadata::default())
        .await
        .unwrap();
    assert!(
        handles[0]
            .table_exists(&id("shared$fresh$t"))
            .await
            .unwrap()
    );

    // Two renames of one table race: one wins, the other finds it gone; never both
    // names, never neither.
    let (a, b) = (id("shared$renamed_a"), id("shared$renamed_b"));
    let from = id("shared$h0t0");
    let (ra, rb) = futures::join!(
        handles[0].rename_table(&from, &a),
        handles[1].rename_table(&from, &b)
    );
    assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
    let loser = if ra.is_ok() { rb } else { ra };
    assert!(
        matches!(loser, Err(tarn_catalog::Error::NotFound { .. })),
        "{loser:?}"
    );
    let exists_a = handles[2].table_exists(&a).await.unwrap();
    let exists_b = handles[2].table_exists(&b).await.unwrap();
    assert!(exists_a != exists_b);
    assert!(!handles[2].table_exists(&from).await.unwrap());

    // Two drops of one table: both succeed.
    let winner = if exists_a { a } else { b };
    let (da, db) = futures::join!(
        handles[2].drop_table(&winner, tarn_catalog::DropData::Keep),
        handles[3].drop_table(&winner, tarn_catalog::DropData::Keep)
    );
    da.unwrap();
    db.unwrap();
    assert!(!handles[0].table_exists(&winner).await.unwrap());

    // Alter: last writer wins.
    handles[0]
        .alter_namespace(&shared, vec![("k".into(), "one".into())], vec![])
        .await
        .unwrap();
    handles[1]
        .alter_namespace(&shared, vec![("k".into(), "two".into())], vec![])
        .await
        .unwrap();
    let info = handles[2].describe_namespace(&shared).await.unwrap();
    assert_eq!(info.metadata.properties["k"], "two");

    // A namespace a concurrent handle filled cannot be dropped without cascade.
    handles[3]
        .create_namespace(
            &id("busy"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    let (busy, busy_t) = (id("busy"), id("busy$t"));
    let (filled, dropped) = futures::join!(
        handles[0].declare_table(&busy_t, ObjectMetadata::default()),
        handles[1].drop_namespace(&busy, tarn_catalog::DropBehavior::Restrict)
    );
    // Either order is serial: the table landed first (the drop is refused) or the drop
    // did (the table's namespace is gone).
    match (&filled, &dropped) {
        (Ok(_), Err(tarn_catalog::Error::NotEmpty { .. })) => {
            assert!(handles[2].table_exists(&id("busy$t")).await.unwrap())
        }
        (Err(tarn_catalog::Error::NotFound { .. }), Ok(())) => {
            assert!(!handles[2].namespace_exists(&id("busy")).await.unwrap())
        }
        other => panic!("not a serial outcome: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_on_one_root_agree_on_local_files() {
    let dir = tempfile::tempdir().unwrap();
    handles_agree(tarn_store::open(dir.path().to_str().unwrap()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_on_one_root_agree_on_minio() {
    let server = tarn_tests::minio::s3();
    handles_agree(server.location(&tarn_tests::unique("catalog-race"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_list_by_type_use_the_manifest_indices() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::Paged { rows_per_page: 4 }).await;
    catalog
        .create_namespace(
            &id("crm"),
            ObjectMetadata {
                description: Some("Customers of the gold tier".into()),
                ..ObjectMetadata::default()
            },
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    for (name, tier) in [
        ("a", "gold"),
        ("b", "silver"),
        ("c", "gold"),
        ("d", "bronze"),
    ] {
        catalog
            .declare_table(&id(&format!("crm${name}")), props(&[("tier", tier)]))
            .await
            .unwrap();
    }
    // Pages this small get no segments inline (`tarn.index.inlineMinRows`): the reads
    // scan them. Then `optimize_indices` covers every page and the same reads go
    // through the indices.
    for indexed in [false, true] {
        let manifest = tarn::Table::open(&manifest_url(dir.path())).await.unwrap();
        let covered: Vec<bool> = manifest
            .indices()
            .unwrap()
            .iter()
            .map(|i| i.files_covered == i.files_total)
            .collect();
        assert_eq!(covered, vec![indexed; 3]);
        let found = catalog.search("gold", 10).await.unwrap();
        assert_eq!(
            found
                .iter()
                .map(|(i, kind)| format!("{}:{kind}", i.key()))
                .collect::<Vec<_>>(),
            vec!["crm:namespace", "crm$a:table", "crm$c:table"]
        );
        assert_eq!(catalog.search("gold", 1).await.unwrap().len(), 1);
        assert!(catalog.search("platinum", 10).await.unwrap().is_empty());
        assert_eq!(
            catalog
                .list_by_type(tarn_catalog::ObjectType::Table)
                .await
                .unwrap(),
            ["crm$a", "crm$b", "crm$c", "crm$d"].map(id).to_vec()
        );
        assert_eq!(
            catalog
                .list_by_type(tarn_catalog::ObjectType::Namespace)
                .await
                .unwrap(),
            vec![id("crm")]
        );
        if !indexed {
            let mut manifest = manifest;
            manifest.optimize_indices().await.unwrap();
        }
    }
    let manifest = tarn::Table::open(&manifest_url(dir.path())).await.unwrap();
    let names: Vec<String> = manifest
        .indices()
        .unwrap()
        .into_iter()
        .map(|i| format!("{}:{:?}", i.definition.column, i.definition.kind))
        .collect();
    assert_eq!(
        names,
        vec!["metadata:FullText", "object_id:BTree", "object_type:Bitmap"]
    );

    // Without indices: listing by type still works, and search scans with the index's
    // analyzer, so it finds what the indexed catalog finds.
    let bare_dir = tempfile::tempdir().unwrap();
    let bare = Catalog::open(
        bare_dir.path().to_str().unwrap(),
        CatalogOptions {
            indices: false,
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap();
    bare.create_namespace(
        &id("x"),
        ObjectMetadata::default(),
        tarn_catalog::IfExists::Fail,
    )
    .await
    .unwrap();
    assert_eq!(
        bare.list_by_type(tarn_catalog::ObjectType::Namespace)
            .await
            .unwrap(),
        vec![id("x")]
    );
    bare.create_namespace(
        &id("crm"),
        ObjectMetadata {
            description: Some("Customers of the gold tier".into()),
            ..ObjectMetadata::default()
        },
        tarn_catalog::IfExists::Fail,
    )
    .await
    .unwrap();
    for (name, tier) in [("a", "GOLD"), ("b", "silver")] {
        bare.declare_table(&id(&format!("crm${name}")), props(&[("tier", tier)]))
            .await
            .unwrap();
    }
    let found: Vec<String> = bare
        .search("gold", 10)
        .await
        .unwrap()
        .iter()
        .map(|(i, kind)| format!("{}:{kind}", i.key()))
        .collect();
    assert_eq!(found, vec!["crm:namespace", "crm$a:table"]);
    assert_eq!(
        bare.search("\"customers gold\"", 10).await.unwrap().len(),
        0
    );
    assert_eq!(
        bare.search("\"gold tier\"", 10).await.unwrap(),
        vec![(id("crm"), "namespace".to_string())]
    );
    assert!(bare.search("platinum", 10).await.unwrap().is_empty());
    let err = bare.search("\"unclosed", 10).await.unwrap_err();
    assert!(
        matches!(
            err,
            tarn_catalog::Error::Table(tarn::Error::InvalidArgument { .. })
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_typed_errors_and_changes_nothing() {
    for bad in ["a$$b", "a/b", "..", ".", "a\u{1}b", &"x".repeat(257)] {
        let err = ObjectId::parse(bad).unwrap_err();
        assert!(
            matches!(err, tarn_catalog::Error::InvalidName { .. }),
            "{bad:?}: {err}"
        );
    }
    let err = ObjectId::new(["a$b"]).unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::InvalidName { .. }),
        "{err}"
    );
    assert!(ObjectId::parse(&"x".repeat(256)).is_ok());

    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::Paged { rows_per_page: 4 }).await;
    catalog
        .create_namespace(
            &id("ns"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    let before = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    for location in [
        "../outside".to_string(),
        "/etc".to_string(),
        "s3://elsewhere/t".to_string(),
        format!("file://{}", outside.path().display()),
        "__manifest".to_string(),
        "empty".to_string(),
        "missing/table".to_string(),
    ] {
        let err = catalog
            .register_table(&id("ns$t"), &location, ObjectMetadata::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, tarn_catalog::Error::InvalidLocation { .. }),
            "{location}: {err}"
        );
    }
    let err = catalog
        .list_tables(&id("ns"), 10, Some("zz"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::InvalidPageToken { .. }),
        "{err}"
    );
    let err = catalog.list_tables(&id("ns"), 0, None).await.unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::InvalidArgument { .. }),
        "{err}"
    );
    let err = catalog
        .create_table(
            &id("nowhere$t"),
            &schema(),
            vec![],
            ObjectMetadata::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::NotFound { .. }), "{err}");
    let err = catalog
        .create_table(
            &id("ns$t"),
            &schema(),
            vec!["nope".into()],
            ObjectMetadata::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::Table(_)), "{err}");
    // A create refused for its partition column wrote nothing: no table folder.
    let mut folders: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    folders.sort();
    assert_eq!(folders, ["__manifest", "empty"]);
    let err = catalog
        .import(vec![tarn_catalog::manifest::Row {
            object_id: "ns$x".into(),
            object_type: "view".into(),
            location: None,
            metadata: ObjectMetadata::default(),
            created_at: 0,
            updated_at: 0,
        }])
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::InvalidManifest { .. }),
        "{err}"
    );
    assert_eq!(
        tarn::Table::open(&manifest_url(dir.path()))
            .await
            .unwrap()
            .version(),
        before,
        "bad input committed something"
    );
    assert!(
        catalog
            .list_tables(&id("ns"), 10, None)
            .await
            .unwrap()
            .ids
            .is_empty()
    );
}

/// The first file under `folder` whose name ends with `suffix` and that is not already
/// corrupted, if any.
fn uncorrupted(folder: &std::path::Path, suffix: &str) -> Option<std::path::PathBuf> {
    // The log's own Parquet files (checkpoints) are not pages.
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("_delta_log") {
                    stack.push(path);
                }
            } else if path.to_str().unwrap().ends_with(suffix)
                && std::fs::read(&path).unwrap() != b"not what it should be"
            {
                return Some(path);
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_manifest_file_or_index_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    {
        let catalog = open(&location, Layout::FullRewrite).await;
        // Enough entries for the page to get index segments of its own.
        let bulk: Vec<tarn_catalog::manifest::Row> = (0..80)
            .map(|i| tarn_catalog::manifest::Row {
                object_id: format!("zbulk{i:03}"),
                object_type: tarn_catalog::manifest::NAMESPACE.into(),
                location: None,
                metadata: ObjectMetadata::default(),
                created_at: 0,
                updated_at: 0,
            })
            .collect();
        catalog.import(bulk).await.unwrap();
        catalog
            .create_namespace(
                &id("ns"),
                props(&[("team", "bi")]),
                tarn_catalog::IfExists::Fail,
            )
            .await
            .unwrap();
    }

    // A corrupt full-text segment: search names it; reads that need no index work.
    // (Every one: the import's segment is still there beside the live one.)
    let mut segments = Vec::new();
    while let Some(segment) = uncorrupted(&dir.path().join("__manifest/_tarn_index"), ".fulltext") {
        std::fs::write(&segment, b"not what it should be").unwrap();
        segments.push(segment);
    }
    assert!(!segments.is_empty());
    let catalog = open(&location, Layout::FullRewrite).await;
    let err = catalog.search("bi", 10).await.unwrap_err();
    assert!(
        segments.iter().any(|s| err
            .to_string()
            .contains(s.file_name().unwrap().to_str().unwrap())),
        "{err}"
    );
    assert_eq!(
        catalog
            .describe_namespace(&id("ns"))
            .await
            .unwrap()
            .metadata
            .properties["team"],
        "bi"
    );
    assert_eq!(
        catalog
            .list_namespaces(&ObjectId::root(), 10, None)
            .await
            .unwrap()
            .ids,
        std::iter::once("ns".to_string())
            .chain((0..9).map(|i| format!("zbulk{i:03}")))
            .map(|n| id(&n))
            .collect::<Vec<_>>()
    );

    // A corrupt page: reads and mutations fail naming it, and nothing is committed.
    // (Every one, the import's included.)
    let mut pages = Vec::new();
    while let Some(page) = uncorrupted(&dir.path().join("__manifest"), ".parquet") {
        std::fs::write(&page, b"not what it should be").unwrap();
        pages.push(page);
    }
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    let names_one = |err: &tarn_catalog::Error| names.iter().any(|n| err.to_string().contains(n));
    let catalog = open(&location, Layout::FullRewrite).await;
    let before = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    let err = catalog.describe_namespace(&id("ns")).await.unwrap_err();
    assert!(names_one(&err), "{err}");
    let err = catalog
        .create_namespace(
            &id("other"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap_err();
    assert!(names_one(&err), "{err}");
    assert_eq!(
        tarn::Table::open(&manifest_url(dir.path()))
            .await
            .unwrap()
            .version(),
        before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_adds_many_objects_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::Paged { rows_per_page: 64 }).await;
    let row = |key: String, kind: &str| tarn_catalog::manifest::Row {
        object_id: key,
        object_type: kind.into(),
        location: None,
        metadata: ObjectMetadata::default(),
        created_at: 1,
        updated_at: 1,
    };
    let mut rows = Vec::new();
    for n in 0..10 {
        rows.push(row(format!("ns{n}"), "namespace"));
        for t in 0..100 {
            rows.push(row(format!("ns{n}$t{t:03}"), "table"));
        }
    }
    let before = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    assert_eq!(catalog.import(rows).await.unwrap(), 1010);
    assert_eq!(
        tarn::Table::open(&manifest_url(dir.path()))
            .await
            .unwrap()
            .version(),
        before + 1
    );
    let shapes = page_shapes(dir.path()).await;
    assert!(shapes.iter().all(|s| s.2 <= 64) && shapes.len() >= 1010 / 64);
    let info = catalog
        .describe_table(&id("ns7$t042"), tarn_catalog::Detail::Entry)
        .await
        .unwrap();
    assert!(info.location.ends_with("-t042"), "{}", info.location);
    let page = catalog.list_tables(&id("ns3"), 5, None).await.unwrap();
    assert_eq!(page.ids[0], id("ns3$t000"));
    // Again: every key is taken now; nothing changes.
    let err = catalog
        .import(vec![row("ns1$t001".into(), "table")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, tarn_catalog::Error::AlreadyExists { .. }),
        "{err}"
    );
    let err = catalog
        .import(vec![row("ghost$t".into(), "table")])
        .await
        .unwrap_err();
    assert!(matches!(err, tarn_catalog::Error::NotFound { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltalake_reads_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::Paged { rows_per_page: 4 }).await;
    for n in 0..9 {
        catalog
            .create_namespace(
                &id(&format!("n{n}")),
                props(&[("n", &n.to_string())]),
                tarn_catalog::IfExists::Fail,
            )
            .await
            .unwrap();
    }
    catalog
        .drop_namespace(&id("n4"), tarn_catalog::DropBehavior::Restrict)
        .await
        .unwrap();
    let out = tempfile::NamedTempFile::new().unwrap();
    let report = tarn_tests::python::run_script(
        "read_table.py",
        &[&manifest_url(dir.path()), out.path().to_str().unwrap()],
    );
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    let manifest = tarn::Table::open(&manifest_url(dir.path())).await.unwrap();
    assert_eq!(report["version"].as_i64().unwrap(), manifest.version());
    let theirs = tarn_tests::rows::read_parquet_file(out.path());
    let ours = manifest.scan().collect().await.unwrap();
    let mut theirs = tarn_tests::rows::canonical_rows(&theirs);
    let mut ours = tarn_tests::rows::canonical_rows(&ours);
    theirs.sort();
    ours.sort();
    assert_eq!(theirs.len(), 8);
    assert_eq!(theirs, ours);
}

/// A small page of a namespace and ten declared tables, imported at once.
async fn one_small_page(catalog: &Catalog) {
    let mut rows = vec![tarn_catalog::manifest::Row {
        object_id: "ns".into(),
        object_type: tarn_catalog::manifest::NAMESPACE.into(),
        location: None,
        metadata: ObjectMetadata::default(),
        created_at: 0,
        updated_at: 0,
    }];
    rows.extend((0..10).map(|i| tarn_catalog::manifest::Row {
        object_id: format!("ns$t{i}"),
        object_type: tarn_catalog::manifest::TABLE.into(),
        location: None,
        metadata: ObjectMetadata::default(),
        created_at: 0,
        updated_at: 0,
    }));
    catalog.import(rows).await.unwrap();
}

/// The deletion vector of each page, by the page's lower bound: its cardinality.
async fn page_dvs(dir: &std::path::Path) -> Vec<(String, i64)> {
    let mut dvs: Vec<(String, i64)> = pages_with_stats(dir)
        .await
        .into_iter()
        .map(|(stats, add)| {
            let min = stats["minValues"]["object_id"]
                .as_str()
                .unwrap()
                .to_string();
            (
                min,
                add.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality),
            )
        })
        .collect();
    dvs.sort();
    dvs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_marks_the_old_name_deleted_and_writes_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::default()).await;
    one_small_page(&catalog).await;
    let before = page_shapes(dir.path()).await;
    assert_eq!(before, vec![("ns".into(), "ns$t9".into(), 11)]);

    catalog
        .rename_table(&id("ns$t3"), &id("ns$z"))
        .await
        .unwrap();
    // The old page is not rewritten: its deletion vector takes the old name, and the new
    // name goes into a small page of its own.
    assert_eq!(
        page_shapes(dir.path()).await,
        vec![
            ("ns".into(), "ns$t9".into(), 11),
            ("ns$z".into(), "ns$z".into(), 1)
        ]
    );
    assert_eq!(
        page_dvs(dir.path()).await,
        vec![("ns".into(), 1), ("ns$z".into(), 0)]
    );
    assert!(catalog.table_exists(&id("ns$z")).await.unwrap());
    assert!(!catalog.table_exists(&id("ns$t3")).await.unwrap());
    let listed = catalog.list_tables(&id("ns"), 20, None).await.unwrap().ids;
    assert_eq!(listed.len(), 10);
    assert!(listed.contains(&id("ns$z")));
    // A fresh handle reads the same.
    let fresh = open(&location, Layout::default()).await;
    assert!(!fresh.table_exists(&id("ns$t3")).await.unwrap());
    assert_eq!(
        fresh.list_tables(&id("ns"), 20, None).await.unwrap().ids,
        listed
    );
}

/// Drops from separate handles of tables in one page commit without re-running: each
/// marks its row in the page's deletion vector, and a lost race unites the DVs (in Tarn's
/// retry, or in a group commit) instead of conflicting. A page that would lose half its
/// rows is rewritten instead by a writer alone; one that saw others commit keeps the DV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_drops_of_one_page_unite_their_deletion_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::default()).await;
    one_small_page(&catalog).await;
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(open(&location, Layout::default()).await);
    }
    let drops = handles.iter().enumerate().map(|(i, c)| async move {
        c.drop_table(&id(&format!("ns$t{i}")), tarn_catalog::DropData::Keep)
            .await
    });
    for result in futures::future::join_all(drops).await {
        result.unwrap();
    }
    let reruns: u64 = handles.iter().map(|c| c.stats().reruns).sum();
    assert_eq!(reruns, 0, "a drop re-ran");
    // One page, never rewritten, whose DV holds the four rows.
    assert_eq!(
        page_shapes(dir.path()).await,
        vec![("ns".into(), "ns$t9".into(), 11)]
    );
    assert_eq!(page_dvs(dir.path()).await, vec![("ns".into(), 4)]);
    for c in &handles {
        let listed = c.list_tables(&id("ns"), 20, None).await.unwrap().ids;
        assert_eq!(
            listed,
            (4..10).map(|i| id(&format!("ns$t{i}"))).collect::<Vec<_>>()
        );
    }
    // `catalog` saw the four drops land while its view was stale: in that crowd its drops
    // keep taking the DV past half the page (six rows of eleven)...
    catalog
        .drop_table(&id("ns$t4"), tarn_catalog::DropData::Keep)
        .await
        .unwrap();
    catalog
        .drop_table(&id("ns$t5"), tarn_catalog::DropData::Keep)
        .await
        .unwrap();
    assert_eq!(
        page_shapes(dir.path()).await,
        vec![("ns".into(), "ns$t9".into(), 11)]
    );
    assert_eq!(page_dvs(dir.path()).await, vec![("ns".into(), 6)]);
    // ...and once its last batch ran alone, the page losing a seventh row is rewritten
    // without its dropped rows.
    catalog
        .drop_table(&id("ns$t6"), tarn_catalog::DropData::Keep)
        .await
        .unwrap();
    assert_eq!(
        page_shapes(dir.path()).await,
        vec![("ns".into(), "ns$t9".into(), 4)]
    );
    assert_eq!(page_dvs(dir.path()).await, vec![("ns".into(), 0)]);
}

/// A table whose version 0 cannot be written gets no entry (the commit waits for it),
/// leaves nothing behind, and does not hold up another mutation submitted beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_cannot_be_created_gets_no_entry() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let faulty = FaultStore::new(Arc::clone(location.store()), 3).with_rule(
        FaultRule::new(FaultOp::Put, Fault::FailBefore).with_glob("*-orders/_delta_log/*"),
    );
    let catalog = open(
        &location.clone().with_store(Arc::new(faulty)),
        Layout::default(),
    )
    .await;
    catalog
        .create_namespace(
            &id("ns"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    let before = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    let (orders_id, other_id, columns) = (id("ns$orders"), id("other"), schema());
    let (orders, other) = tokio::join!(
        catalog.create_table(&orders_id, &columns, vec![], ObjectMetadata::default()),
        catalog.create_namespace(
            &other_id,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail
        ),
    );
    // The injected failure is an error like any other: the PUT of version 0 is read
    // back, and its outcome reported unknown.
    let err = orders.unwrap_err();
    assert!(
        matches!(
            &err,
            tarn_catalog::Error::Table(tarn::Error::CommitStateUnknown { version: 0, .. })
        ),
        "{err}"
    );
    other.unwrap();
    assert!(!catalog.table_exists(&id("ns$orders")).await.unwrap());
    assert!(catalog.namespace_exists(&id("other")).await.unwrap());
    let fresh = open(&location, Layout::default()).await;
    assert!(!fresh.table_exists(&id("ns$orders")).await.unwrap());
    assert_eq!(
        fresh.list_tables(&id("ns"), 10, None).await.unwrap().ids,
        []
    );
    // One commit: the namespace's (the table's entry never committed).
    let after = tarn::Table::open(&manifest_url(dir.path()))
        .await
        .unwrap()
        .version();
    assert_eq!(after - before, 1);
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with("-orders"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_manifest_keeps_an_hour_of_log_and_of_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let catalog = open(&location, Layout::default()).await;
    catalog
        .create_namespace(
            &id("a"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    let manifest = tarn::Table::open(&manifest_url(dir.path())).await.unwrap();
    let properties = manifest.snapshot().properties();
    let hour = std::time::Duration::from_secs(3600);
    assert_eq!(properties.log_retention(), hour);
    assert_eq!(properties.deleted_file_retention(), hour);
    assert!(properties.expired_log_cleanup());
}
