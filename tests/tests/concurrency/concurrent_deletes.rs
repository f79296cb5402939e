//! `tarn-concurrency delete` on the local file system: worker processes delete their own
//! rows of one file through deletion vectors at once, and every delete lands (in its own
//! commit or carried in another's), with nothing else deleted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tarn::Table;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_merge_on_read_deletes_of_one_file_all_land() {
    let binary = tarn_tests::workspace_binary("tarn-bench", "tarn-concurrency");
    let root = tempfile::tempdir().unwrap();
    let json = root.path().join("levels.jsonl");
    let (workers, ops) = (4usize, 5i64);
    let output = tokio::process::Command::new(&binary)
        .args(["delete", "--url"])
        .arg(root.path().join("t"))
        .args(["--levels", &workers.to_string(), "--ops", &ops.to_string()])
        .args(["--profile", "s3-express", "--json"])
        .arg(&json)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&json).unwrap().trim()).unwrap();
    assert_eq!(summary["mode"], "delete");
    assert_eq!(summary["ops"], workers * ops as usize);
    assert_eq!(summary["errors"], 0, "{summary}");

    // The level's table: each worker seeded 2 * ops rows and deleted every other one.
    let level = std::fs::read_dir(root.path().join("t"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let table = Table::open(level.to_str().unwrap()).await.unwrap();
    assert_eq!(table.snapshot().files().count(), 1);
    let ids = tarn_tests::rows::sorted_ids(&table.scan().select(["id"]).collect().await.unwrap());
    let expected: Vec<i64> = (0..workers as i64)
        .flat_map(|w| (0..ops).map(move |n| w * 1_000_000 + 2 * n + 1))
        .collect();
    assert_eq!(ids, expected);
    // One version per commit; with racing workers some deletes rode in others' commits.
    assert!(table.version() <= 1 + workers as i64 * ops);
}
