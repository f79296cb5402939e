//! The catalog torture test: four catalog writer processes on MinIO, each creating,
//! renaming and sometimes dropping tables through its own handle with `tarn-concurrency
//! catalog-torture`, while 5% of their PUTs fail (half after the object landed) and the
//! coordinator kills writers with SIGKILL and restarts them at random. The `s3-standard`
//! profile's long tail makes the writers hedge some PUTs (commits included), so second
//! copies race faults and kills too. Afterwards: every
//! acknowledged step is in the catalog, no object id is there twice, no rename is half
//! done, every table entry opens, and no commit of the manifest was applied twice.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::AsArray;
use object_store::ObjectStoreExt;
use tarn::Table;
use tarn_catalog::{Catalog, CatalogOptions, ObjectId};
use tarn_tests::catalog::id;

const WRITERS: usize = 4;
const STEPS: i64 = 12;

#[derive(serde::Deserialize)]
struct Ack {
    writer: usize,
    n: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulty_catalog_writers_lose_nothing_and_half_do_nothing() {
    let binary = tarn_tests::workspace_binary("tarn-bench", "tarn-concurrency");
    let server = tarn_tests::minio::s3();
    let url = server.url(&tarn_tests::unique("catalog-torture"));
    let acks = tempfile::tempdir().unwrap();
    let seed = tarn_tests::torture::seed(5);
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["catalog-torture", "--url", &url])
        .args([
            "--writers",
            &WRITERS.to_string(),
            "--ops",
            &STEPS.to_string(),
        ])
        .args(["--fault-rate", "0.05", "--seed", &seed.to_string()])
        .args(["--profile", "s3-standard"])
        .args([
            "--max-kills",
            "12",
            "--kill-min-ms",
            "100",
            "--kill-max-ms",
            "700",
        ])
        .arg("--ack-dir")
        .arg(acks.path());
    let report = tarn_tests::torture::run(&server.env(), command, "catalog-torture").await;
    assert!(
        report["kills"].as_u64().unwrap() >= 6,
        "too few kills to mean much: {report}"
    );

    // Every writer acknowledged every step.
    let mut acked: BTreeSet<(usize, i64)> = BTreeSet::new();
    for writer in 0..WRITERS {
        let log =
            std::fs::read_to_string(acks.path().join(format!("writer-{writer}.jsonl"))).unwrap();
        for line in log.lines() {
            let ack: Ack = serde_json::from_str(line).unwrap();
            acked.insert((ack.writer, ack.n));
        }
    }
    assert_eq!(acked.len(), WRITERS * STEPS as usize, "acknowledged steps");

    // The catalog holds exactly what the acknowledged steps leave: each step's table
    // under its new name (unless the step dropped it), never under its old one.
    let catalog = Catalog::open(
        &url,
        CatalogOptions {
            store: server.options(),
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap();
    // On failure: every manifest commit (version, operation, txnId, writer and epoch,
    // the txnIds it carried or fenced), and the locations of the listed tables.
    let history = manifest_history(&url, &server.options()).await;
    let mut expected_rows = WRITERS;
    for writer in 0..WRITERS {
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = catalog
                .list_tables(&id(&format!("w{writer}")), 5, token.as_deref())
                .await
                .unwrap();
            listed.extend(page.ids.iter().map(ObjectId::key));
            match page.next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let mut expected: Vec<String> = (0..STEPS)
            .filter(|n| n % 4 != 3)
            .map(|n| format!("w{writer}$r{n}"))
            .collect();
        expected.sort();
        let mut locations = Vec::new();
        for key in &listed {
            let info = catalog
                .describe_table(&id(key), tarn_catalog::Detail::Entry)
                .await
                .unwrap();
            locations.push(format!("{key} at {}", info.location));
        }
        assert_eq!(
            listed, expected,
            "writer {writer}'s tables: {locations:#?}\nmanifest log:\n{history}"
        );
        expected_rows += expected.len();
        for n in 0..STEPS {
            assert!(
                !catalog
                    .table_exists(&id(&format!("w{writer}$t{n}")))
                    .await
                    .unwrap(),
                "writer {writer}'s step {n} left its old name behind\nmanifest log:\n{history}"
            );
        }
        // Every entry points to a table that opens.
        for key in &listed {
            let table = catalog.load_table(&id(key)).await.unwrap();
            assert_eq!(table.version(), 0, "{key}");
        }
    }

    // The manifest: each object once, and each commit once (txnIds unique).
    let manifest = Table::open_with_options(&format!("{url}/__manifest"), &server.options())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for batch in manifest
        .scan()
        .select(["object_id"])
        .collect()
        .await
        .unwrap()
    {
        let column = batch.column(0).as_string::<i32>();
        ids.extend((0..batch.num_rows()).map(|i| column.value(i).to_string()));
    }
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "an object id twice: {ids:?}\nmanifest log:\n{history}"
    );
    assert_eq!(ids.len(), expected_rows);
    let location = manifest.location().clone();
    let mut txn_ids: BTreeMap<String, i64> = BTreeMap::new();
    for version in 1..=manifest.version() {
        let path = location
            .root()
            .clone()
            .join("_delta_log")
            .join(format!("{version:020}.json"));
        let body = location
            .store()
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let action: serde_json::Value = serde_json::from_slice(line).unwrap();
            if let Some(txn) = action["commitInfo"]["txnId"].as_str()
                && let Some(earlier) = txn_ids.insert(txn.to_string(), version)
            {
                panic!(
                    "txnId {txn} committed twice: versions {earlier} and {version}\n\
                     manifest log:\n{history}"
                );
            }
        }
    }
    eprintln!(
        "catalog torture: {report}; manifest at version {}",
        manifest.version()
    );
}

/// One line per commit of the manifest at `url`: its version, operation, `txnId`, the
/// writer and epoch that made it, and the `txnId`s it carried and fenced.
async fn manifest_history(url: &str, options: &tarn::StoreOptions) -> String {
    let manifest = Table::open_with_options(&format!("{url}/__manifest"), options)
        .await
        .unwrap();
    let mut lines = Vec::new();
    for version in 0..=manifest.version() {
        let Some(info) = tarn_tests::log::commit_info_at(manifest.location(), version).await else {
            lines.push(format!("{version}: unreadable"));
            continue;
        };
        lines.push(format!(
            "{version}: {} txnId {} writer {} carried {} fenced {}",
            info["operation"],
            info["txnId"],
            info["tarnWriter"],
            info["tarnGroup"],
            info["tarnFenced"]
        ));
    }
    lines.join("\n")
}
