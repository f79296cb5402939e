//! What catalog operations cost in object-store requests and sequential round trips: a
//! warm mutation waits on two (its page, then the commit), and the first page of a large
//! namespace's listing reads one manifest page after the refresh. The costs are
//! structural, so they are counted here; times are the benchmark's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use object_store::ObjectStore;
use tarn_catalog::{Layout, ObjectId, ObjectMetadata};
use tarn_store::{CountingStore, LatencyProfile, LatencyStore, RequestCounter};
use tarn_tests::catalog::{id, import_row, open, props, schema};

/// A mutation on a warm handle waits on two round trips: its page (and a new table's
/// version 0, written beside it), then the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_mutation_waits_on_two_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let slow = LatencyStore::new(
        Arc::clone(location.store()),
        LatencyProfile::s3_express().scaled(0.25),
        1,
    );
    let counting = CountingStore::new(Arc::new(slow) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    let counted = location.with_store(Arc::new(counting));
    let catalog = open(&counted, Layout::default()).await;
    catalog
        .create_namespace(
            &id("ns"),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
    for i in 0..3 {
        let table = id(&format!("ns$t{i}"));
        settle_background_checkpoint(&counter).await;
        counter.reset();
        let info = catalog
            .create_table(&table, &schema(), vec![], props(&[("tier", "gold")]))
            .await
            .unwrap();
        let counts = counter.take();
        assert_eq!(counts.critical_path, 2, "create_table {i}: {counts}");
        assert_eq!(info.version, Some(0));
        let opened = catalog.load_table(&table).await.unwrap();
        assert_eq!(opened.version(), 0);
        assert_eq!(
            opened.snapshot().metadata().configuration.get("tier"),
            Some(&Some("gold".to_string()))
        );
    }
    let mutations: [(&str, BoxedMutation); 4] = [
        (
            "create_namespace",
            Box::pin(async {
                let meta = ObjectMetadata::default();
                catalog
                    .create_namespace(&id("other"), meta, tarn_catalog::IfExists::Fail)
                    .await
            }),
        ),
        (
            "declare_table",
            Box::pin(async {
                let meta = ObjectMetadata::default();
                catalog.declare_table(&id("ns$d"), meta).await.map(|_| ())
            }),
        ),
        (
            "rename_table",
            Box::pin(async { catalog.rename_table(&id("ns$t0"), &id("ns$r")).await }),
        ),
        (
            "drop_table",
            Box::pin(async {
                catalog
                    .drop_table(&id("ns$t1"), tarn_catalog::DropData::Keep)
                    .await
            }),
        ),
    ];
    for (name, mutation) in mutations {
        settle_background_checkpoint(&counter).await;
        counter.reset();
        mutation.await.unwrap();
        let counts = counter.take();
        // A commit that takes a checkpoint starts writing it in the background, and on a
        // busy machine its first PUT may start before the call returns.
        settle_background_checkpoint(&counter).await;
        let checkpointed = u64::from(checkpoint_at_latest(dir.path()));
        // A drop that empties its page writes no page: the commit alone.
        assert!(counts.critical_path <= 2 + checkpointed, "{name}: {counts}");
        assert!(counts.critical_path >= 1, "{name}: {counts}");
    }
    let listed = catalog.list_tables(&id("ns"), 10, None).await.unwrap().ids;
    assert_eq!(listed, [id("ns$d"), id("ns$r"), id("ns$t2")]);
}

type BoxedMutation<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tarn_catalog::Error>> + 'a>>;

/// Listing the tables of a namespace of thousands, on a handle just opened: the refresh
/// (one LIST) and the one base page whose key range holds the namespace's first keys (its
/// statistics are the BTree's upper level), whatever the number of pages before and after
/// it. The next page of the listing is served from the page already read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_page_of_a_large_namespace_costs_two_requests_after_open() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let layout = Layout::Paged { rows_per_page: 512 };
    let seeding = open(&location, layout).await;
    let now = seeding.now();
    let row = |key: String, kind: &str| import_row(key, kind, now);
    let mut rows = Vec::new();
    // Namespaces on both sides of the big one, so its keys start inside a page.
    for ns in ["aa", "big", "zz"] {
        rows.push(row(ns.into(), "namespace"));
        let tables = if ns == "big" { 5_000 } else { 700 };
        rows.extend((0..tables).map(|t| row(format!("{ns}$t{t:05}"), "table")));
    }
    seeding.import(rows).await.unwrap();
    let pages = std::fs::read_dir(dir.path().join("__manifest"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".parquet")
        })
        .count();
    assert!(pages >= 12, "{pages} manifest pages");

    let counting = CountingStore::new(Arc::clone(location.store()));
    let counter = counting.counter();
    let fresh = open(&location.with_store(Arc::new(counting)), layout).await;
    counter.reset();
    let first = fresh.list_tables(&id("big"), 100, None).await.unwrap();
    let counts = counter.take();
    let expected: Vec<ObjectId> = (0..100).map(|t| id(&format!("big$t{t:05}"))).collect();
    assert_eq!(first.ids, expected);
    assert!(counts.requests() <= 2, "first page: {counts}");
    assert_eq!(counts.lists, 1, "first page: {counts}");

    counter.reset();
    let second = fresh
        .list_tables(&id("big"), 100, first.next.as_deref())
        .await
        .unwrap();
    let counts = counter.take();
    let expected: Vec<ObjectId> = (100..200).map(|t| id(&format!("big$t{t:05}"))).collect();
    assert_eq!(second.ids, expected);
    assert_eq!(
        counts.requests(),
        1,
        "second page, the refresh alone: {counts}"
    );
}

/// A fold of a small page whose keys lie far apart (an import of names in the first and
/// the last namespace) reads the base pages those keys go to, not every base page between
/// them: in a 1M-entry catalog such a page spans hundreds of pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_reads_only_the_base_pages_its_keys_go_to() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let layout = Layout::Paged { rows_per_page: 16 };
    let seeding = open(&location, layout).await;
    let now = seeding.now();
    let row = |key: String, kind: &str| import_row(key, kind, now);
    // 40 namespaces of 15 tables: 40 base pages of 16 rows.
    let mut rows = Vec::new();
    for ns in 0..40 {
        rows.push(row(format!("ns{ns:02}"), "namespace"));
        rows.extend((0..15).map(|t| row(format!("ns{ns:02}$t{t:02}"), "table")));
    }
    seeding.import(rows).await.unwrap();
    // One small page spanning them all.
    let far = vec![row("ns00$r".into(), "table"), row("ns39$r".into(), "table")];
    seeding.import(far).await.unwrap();
    let spanning = |adds: &[tarn::protocol::Add]| {
        adds.iter().any(|add| {
            let stats = add.stats.as_ref().unwrap().json();
            stats.contains(r#""object_id":"ns00$r""#) && stats.contains(r#""object_id":"ns39$r""#)
        })
    };
    let manifest = format!("{}/__manifest", dir.path().to_str().unwrap());
    let pages: Vec<_> = tarn::Table::open(&manifest)
        .await
        .unwrap()
        .snapshot()
        .files()
        .cloned()
        .collect();
    assert!(pages.len() >= 41, "{} pages", pages.len());
    assert!(spanning(&pages), "the import made no spanning page");

    let counting = CountingStore::new(Arc::clone(location.store()));
    let counter = counting.counter();
    let fresh = open(&location.with_store(Arc::new(counting)), layout).await;
    // New names, a commit each, until a fold takes the spanning page's rows (every handle
    // folds by its 16th small page).
    let mut most = 0;
    for n in 0..20 {
        settle_background_checkpoint(&counter).await;
        counter.reset();
        let meta = ObjectMetadata::default();
        fresh
            .create_namespace(
                &id(&format!("zz{n:02}")),
                meta,
                tarn_catalog::IfExists::Fail,
            )
            .await
            .unwrap();
        most = most.max(counter.take().gets);
    }
    let pages: Vec<_> = tarn::Table::open(&manifest)
        .await
        .unwrap()
        .snapshot()
        .files()
        .cloned()
        .collect();
    assert!(!spanning(&pages), "no fold took the spanning page");
    // The fold reads the small pages it has not written itself and the two base pages the
    // far keys go to (and the last, where the new names go); the 37 between are not read.
    assert!(most <= 12, "a create read {most} objects");
    assert!(fresh.namespace_exists(&id("zz19")).await.unwrap());
    let listed = fresh.list_tables(&id("ns39"), 100, None).await.unwrap().ids;
    assert_eq!(listed.len(), 16);
    assert_eq!(listed[0], id("ns39$r"));
}

/// A drop of a name that lives in a small page the handle holds reads no other page: the
/// base page whose key range spans the name cannot hold it too. In a 1M-entry catalog,
/// where the names a drop acts on sit in a small page spanning many base pages, reading
/// them cost a round trip on most drops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_in_a_held_small_page_reads_no_base_page() {
    let dir = tempfile::tempdir().unwrap();
    let location = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
    let layout = Layout::Paged { rows_per_page: 16 };
    let seeding = open(&location, layout).await;
    let now = seeding.now();
    let row = |key: &str, kind: &str| import_row(key.to_string(), kind, now);
    let mut rows = Vec::new();
    for ns in 0..4 {
        rows.push(row(&format!("ns{ns}"), "namespace"));
        rows.extend((0..15).map(|t| row(&format!("ns{ns}$t{t:02}"), "table")));
    }
    seeding.import(rows).await.unwrap();
    // A small page of three names, in the key ranges of two base pages.
    let names = ["ns1$d0", "ns1$d1", "ns2$d0"];
    seeding
        .import(names.iter().map(|k| row(k, "table")).collect())
        .await
        .unwrap();

    let counting = CountingStore::new(Arc::clone(location.store()));
    let counter = counting.counter();
    let fresh = open(&location.with_store(Arc::new(counting)), layout).await;
    // The first drop reads the small page (and the base page beside it).
    fresh
        .drop_table(&id("ns1$d0"), tarn_catalog::DropData::Keep)
        .await
        .unwrap();
    settle_background_checkpoint(&counter).await;
    counter.reset();
    fresh
        .drop_table(&id("ns2$d0"), tarn_catalog::DropData::Keep)
        .await
        .unwrap();
    let counts = counter.take();
    assert_eq!(counts.gets, 0, "the second drop read a page: {counts}");
    assert!(!fresh.table_exists(&id("ns2$d0")).await.unwrap());
    assert!(fresh.table_exists(&id("ns1$d1")).await.unwrap());
    let listed = fresh.list_tables(&id("ns2"), 100, None).await.unwrap().ids;
    assert_eq!(listed.len(), 15, "{listed:?}");
}

/// Whether the manifest's latest commit took a checkpoint (checked once its background
/// requests have settled).
fn checkpoint_at_latest(dir: &std::path::Path) -> bool {
    let log = dir.join("__manifest/_delta_log");
    let names: Vec<String> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let latest = names
        .iter()
        .filter_map(|n| n.strip_suffix(".json")?.parse::<u64>().ok())
        .max()
        .unwrap();
    names
        .iter()
        .any(|n| n.starts_with(&format!("{latest:020}.checkpoint")))
}

/// Every 4th manifest commit starts a background checkpoint; its PUTs (checkpoint, then
/// hint) would lengthen the next mutation's chain, so a measurement waits them out: until
/// the store has seen no request for 200 ms (a fixed sleep was too short on a loaded
/// machine). The replayed latency here is a few milliseconds per request.
async fn settle_background_checkpoint(counter: &RequestCounter) {
    for _ in 0..100 {
        counter.reset();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if counter.take().requests() == 0 {
            return;
        }
    }
    panic!("the catalog's background requests did not stop within 20 s");
}
