//! The manifest under a crowd of writers. Folding small pages only moves rows: the commit says so
//! (`dataChange: false`), and a writer whose mutation raced the fold keeps what it read
//! instead of re-running (under hundreds of writers, every fold used to send every
//! writer with a proposal out back to the start).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use tarn_catalog::{Catalog, CatalogOptions, Layout, ObjectId, ObjectMetadata};
use tarn_tests::catalog::{id, import_row};

async fn open(dir: &std::path::Path, rows_per_page: usize) -> Catalog {
    let catalog = Catalog::open(
        dir.to_str().unwrap(),
        CatalogOptions {
            layout: Layout::Paged { rows_per_page },
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap();
    catalog.snapshot().await.unwrap();
    catalog
}

/// Creates the namespaces `keys` through `catalog` in one commit, one page (an import:
/// concurrent creates may land in more than one batch when the machine is busy).
async fn seed(catalog: &Catalog, keys: impl IntoIterator<Item = String>) {
    let now = catalog.now();
    let rows: Vec<_> = keys
        .into_iter()
        .map(|key| import_row(key, "namespace", now))
        .collect();
    let count = rows.len();
    assert_eq!(catalog.import(rows).await.unwrap(), count);
}

/// The actions of manifest commit `version`.
fn commit(dir: &std::path::Path, version: i64) -> Vec<Value> {
    let path = dir.join(format!("__manifest/_delta_log/{version:020}.json"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(path, dataChange)` of a commit's actions of `kind` (`add` or `remove`).
fn files(actions: &[Value], kind: &str) -> Vec<(String, bool)> {
    actions
        .iter()
        .filter_map(|a| a.get(kind))
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["dataChange"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_moves_rows_and_a_create_racing_it_keeps_its_read() {
    fold_race(64).await;
}

/// With pages of 4,096 rows, a catalog of a few dozen keys has no base page: the fold
/// moves the rows into the largest small page, and the operation's own new key goes to
/// a page of its own, so the fold is still a move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_into_the_largest_small_page_moves_rows_too() {
    fold_race(4096).await;
}

async fn fold_race(rows_per_page: usize) {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), rows_per_page).await;
    // One page over [a00, zzz]: thirty keys submitted at once commit as one page.
    seed(
        &a,
        ["zzz".to_string()]
            .into_iter()
            .chain((0..30).map(|n| format!("a{n:02}"))),
    )
    .await;
    // A second handle (another process) reads the manifest now and holds that view.
    let b = open(dir.path(), rows_per_page).await;
    assert!(!b.namespace_exists(&id("m-racer")).await.unwrap());

    // New keys, one commit each, go to small pages until a commit folds them into the
    // base page.
    let manifest = format!("{}/__manifest", dir.path().to_str().unwrap());
    let mut fold = None;
    for n in 0..40 {
        a.create_namespace(
            &id(&format!("late{n:02}")),
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
        let version = tarn::Table::open(&manifest).await.unwrap().version();
        let actions = commit(dir.path(), version);
        if files(&actions, "remove").len() >= 2 {
            fold = Some((n, actions));
            break;
        }
    }
    let (n, actions) = fold.expect("no commit folded the small pages");
    // The fold's removes and the base page it writes are moves; the page holding the
    // operation's own new key is a change.
    let removes = files(&actions, "remove");
    assert!(removes.iter().all(|(_, change)| !change), "{removes:?}");
    let adds = files(&actions, "add");
    let changed: Vec<_> = adds.iter().filter(|(_, change)| *change).collect();
    let moved: Vec<_> = adds.iter().filter(|(_, change)| !change).collect();
    assert_eq!(changed.len(), 1, "{adds:?}");
    assert!(!moved.is_empty(), "{adds:?}");

    // `b` creates a key in the folded base page's range on its old view: its commit
    // races every commit `a` made, the fold among them, and rebases without re-running.
    let reruns = b.stats().reruns;
    b.create_namespace(
        &id("m-racer"),
        ObjectMetadata::default(),
        tarn_catalog::IfExists::Fail,
    )
    .await
    .unwrap();
    assert_eq!(b.stats().reruns, reruns, "the create re-ran after the fold");
    // Both handles see every key.
    for catalog in [&a, &b] {
        let listed = catalog
            .list_namespaces(&ObjectId::root(), 1000, None)
            .await
            .unwrap();
        assert_eq!(listed.ids.len(), 31 + n + 1 + 1);
        assert!(catalog.namespace_exists(&id("m-racer")).await.unwrap());
        assert!(catalog.namespace_exists(&id("late00")).await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_beside_an_edit_of_a_moved_row_is_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), 64).await;
    seed(&a, (0..30).map(|n| format!("a{n:02}"))).await;
    // Each key is created, then altered: the create that brings the small pages over the
    // handle's threshold is followed by an alter, which folds them and edits a row that
    // moves; the pages it writes differ from the ones it replaces.
    let manifest = format!("{}/__manifest", dir.path().to_str().unwrap());
    let mut folds = 0;
    for n in 0..40 {
        let key = id(&format!("b{n:02}"));
        a.create_namespace(
            &key,
            ObjectMetadata::default(),
            tarn_catalog::IfExists::Fail,
        )
        .await
        .unwrap();
        a.alter_namespace(&key, vec![("owner".into(), "b".into())], vec![])
            .await
            .unwrap();
        let version = tarn::Table::open(&manifest).await.unwrap().version();
        let actions = commit(dir.path(), version);
        let removes = files(&actions, "remove");
        if removes.len() >= 2 {
            folds += 1;
            assert!(removes.iter().all(|(_, change)| *change), "{removes:?}");
            let adds = files(&actions, "add");
            assert!(adds.iter().all(|(_, change)| *change), "{adds:?}");
        }
    }
    assert!(folds > 0, "no alter folded");
    let listed = a
        .list_namespaces(&ObjectId::root(), 1000, None)
        .await
        .unwrap();
    assert_eq!(listed.ids.len(), 70);
    let altered = a.describe_namespace(&id("b00")).await.unwrap();
    assert_eq!(
        altered.metadata.properties.get("owner").map(String::as_str),
        Some("b")
    );
}

/// A writer that saw others commit during its last batch marks the rows it drops in the
/// page's deletion vector even past half the page: rewriting the page would fail every
/// writer dropping other rows of it meanwhile. Alone, it rewrites the page instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_crowd_drops_keep_taking_deletion_vectors_past_half_a_page() {
    for crowded in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), 64).await;
        let b = open(dir.path(), 64).await;
        seed(&a, (0..4).map(|n| format!("p{n}"))).await;
        let manifest = format!("{}/__manifest", dir.path().to_str().unwrap());
        for n in 0..3 {
            if crowded {
                // Another process commits while `a`'s view is stale.
                b.create_namespace(
                    &id(&format!("x{n}")),
                    ObjectMetadata::default(),
                    tarn_catalog::IfExists::Fail,
                )
                .await
                .unwrap();
            }
            a.drop_namespace(&id(&format!("p{n}")), tarn_catalog::DropBehavior::Restrict)
                .await
                .unwrap();
        }
        // The third drop takes three of the page's four rows.
        let version = tarn::Table::open(&manifest).await.unwrap().version();
        let actions = commit(dir.path(), version);
        let removed: Vec<String> = files(&actions, "remove").into_iter().map(|f| f.0).collect();
        let added: Vec<&Value> = actions.iter().filter_map(|a| a.get("add")).collect();
        assert_eq!(removed.len(), 1, "{actions:?}");
        assert_eq!(added.len(), 1, "{actions:?}");
        let same_file = added[0]["path"].as_str() == Some(removed[0].as_str());
        let with_dv = added[0].get("deletionVector").is_some_and(|d| !d.is_null());
        assert_eq!(same_file, crowded, "{actions:?}");
        assert_eq!(with_dv, crowded, "{actions:?}");
        let listed = a
            .list_namespaces(&ObjectId::root(), 100, None)
            .await
            .unwrap();
        let keys: Vec<String> = listed.ids.iter().map(ObjectId::key).collect();
        let mut expected = vec!["p3".to_string()];
        if crowded {
            expected.extend(["x0", "x1", "x2"].map(String::from));
        }
        assert_eq!(keys, expected);
    }
}
