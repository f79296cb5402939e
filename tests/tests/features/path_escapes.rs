//! Paths in a table's log stay inside the table, on the real local file system: `add`
//! paths that are absolute URIs or absolute paths to elsewhere, `..` traversal (plain and
//! percent-encoded), symbolic links inside the table that point out of it (to a file, or
//! through a folder), and an absolute deletion-vector path to elsewhere all fail with a
//! typed error naming the path, though a readable Parquet file sits at every target. A
//! location that allows the other root (a shallow clone's source) reads it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use tarn::protocol::DeletionVectorDescriptor;
use tarn::{Error, StoreOptions, Table};
use tarn_tests::part_rows::{batch, rows_of, schema};

/// A table in `dir/t` with three rows in one file, with deletion vectors on, and a copy
/// of that file outside it at `dir/outside/secret.parquet` (readable, so that following a
/// path to it would succeed).
async fn setup(dir: &Path) -> (Table, String) {
    let root = dir.join("t");
    let mut table = Table::create_at(tarn_store::open(root.to_str().unwrap()).unwrap())
        .with_arrow_schema(&schema())
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = (0..3).map(|i| (i, "p0".to_string())).collect();
    let _ = table.append([batch(&rows)]).await.unwrap();
    let add = table.snapshot().files().next().unwrap().clone();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(root.join(&add.path), outside.join("secret.parquet")).unwrap();
    (table, outside.to_str().unwrap().to_string())
}

/// Replaces the table's file by one at `path` (its `add` otherwise the same), or gives
/// the file a deletion vector `dv`.
async fn point_to(table: &mut Table, path: &str, dv: Option<DeletionVectorDescriptor>) {
    let add = table.snapshot().files().next().unwrap().clone();
    let mut txn = table.transaction();
    txn.remove_file(add.clone().into_remove(0));
    let mut moved = add;
    moved.path = path.to_string();
    moved.deletion_vector = dv;
    txn.add_file(moved);
    let _ = table.commit(txn).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_leave_the_table_are_refused_unless_their_root_is_allowed() {
    let symlinked_file = |dir: &Path, outside: &str| {
        std::os::unix::fs::symlink(
            format!("{outside}/secret.parquet"),
            dir.join("t/link.parquet"),
        )
        .unwrap();
        "link.parquet".to_string()
    };
    let symlinked_folder = |dir: &Path, outside: &str| {
        std::os::unix::fs::symlink(outside, dir.join("t/sub")).unwrap();
        "sub/secret.parquet".to_string()
    };
    type Case = (&'static str, Box<dyn Fn(&Path, &str) -> String>, bool);
    let cases: Vec<Case> = vec![
        (
            "an absolute URI",
            Box::new(|_, o| format!("file://{o}/secret.parquet")),
            true,
        ),
        (
            "an absolute path",
            Box::new(|_, o| format!("{o}/secret.parquet")),
            true,
        ),
        (
            "a traversal",
            Box::new(|_, _| "../outside/secret.parquet".into()),
            false,
        ),
        (
            "an encoded traversal",
            Box::new(|_, _| "%2E%2E/outside/secret.parquet".into()),
            false,
        ),
        (
            "a deeper encoded traversal",
            Box::new(|_, _| "a/%2e%2e/%2E%2E/outside/secret.parquet".into()),
            false,
        ),
        ("a symbolic link to a file", Box::new(symlinked_file), true),
        (
            "a symbolic link to a folder",
            Box::new(symlinked_folder),
            true,
        ),
    ];
    for (what, path_of, allowable) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (mut table, outside) = setup(dir.path()).await;
        let path = path_of(dir.path(), &outside);
        point_to(&mut table, &path, None).await;
        let url = dir.path().join("t").to_str().unwrap().to_string();
        let reopened = Table::open(&url).await.unwrap();
        match rows_of(reopened.snapshot()).await {
            Err(Error::PathOutsideTable { path: named, .. }) if allowable => {
                assert_eq!(named, path, "{what}");
            }
            Err(Error::InvalidPath { path: named, .. }) if !allowable => {
                assert_eq!(named, path, "{what}");
            }
            other => panic!("{what} ({path}): expected the path refused, got {other:?}"),
        }
        // A shallow clone allows its source's root, and reads the file there.
        if allowable {
            let options = StoreOptions::new().with_allowed_roots([outside.as_str()]);
            let clone = Table::open_with_options(&url, &options).await.unwrap();
            assert_eq!(rows_of(clone.snapshot()).await.unwrap().len(), 3, "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_vector_outside_the_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, outside) = setup(dir.path()).await;
    let add = table.snapshot().files().next().unwrap().clone();
    let dv_path = format!("file://{outside}/secret.parquet");
    let dv = DeletionVectorDescriptor {
        storage_type: "p".into(),
        path_or_inline_dv: dv_path.clone(),
        offset: Some(1),
        size_in_bytes: 10,
        cardinality: 1,
    };
    point_to(&mut table, &add.path, Some(dv)).await;
    match rows_of(table.snapshot()).await {
        Err(Error::PathOutsideTable { path, .. }) => assert_eq!(path, dv_path),
        other => panic!("expected the DV path refused, got {other:?}"),
    }
}

#[test]
fn an_allowed_root_in_another_store_is_refused_when_opening() {
    let options = StoreOptions::new().with_allowed_roots(["s3://elsewhere/source"]);
    let err = tarn_store::open_with_options("/tmp/some-table", &options).unwrap_err();
    assert!(
        matches!(err, tarn_store::Error::InvalidUrl { ref reason, .. } if reason.contains("not in the table's store")),
        "{err}"
    );
}
