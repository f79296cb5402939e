//! The torture test: four exactly-once writer processes commit fifty appends each to one
//! table on MinIO (and on Azurite and fake GCS) through `tarn-concurrency`, while 5% of their PUTs fail (half after the
//! object landed) and the coordinator kills writers with SIGKILL and restarts them at
//! random. Afterwards: no acknowledged commit lost, no txnId twice, no version gap, and
//! the rows are exactly those of the acknowledged appends. It runs twice: as writers
//! race, and with every writer whose proposal is out claiming its version
//! (`TARN_CLAIM_AT=0`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use object_store::ObjectStoreExt;
use tarn::Table;

const WRITERS: usize = 4;
const COMMITS: i64 = 50;
const ROWS_PER_COMMIT: i64 = 5;

#[derive(serde::Deserialize)]
struct Ack {
    writer: usize,
    n: i64,
    txn_id: String,
    skipped: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulty_writers_lose_nothing_and_double_nothing() {
    torture(&Server::minio(), "torture", None).await;
}

/// The same on Azurite: Azure's `If-None-Match: *` decides the races.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulty_writers_on_azure_lose_nothing_and_double_nothing() {
    torture(&Server::azurite(), "torture-azure", None).await;
}

/// The same on fake GCS: Cloud Storage's `ifGenerationMatch=0` decides the races.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulty_writers_on_gcs_lose_nothing_and_double_nothing() {
    torture(&Server::fake_gcs(), "torture-gcs", None).await;
}

/// Where the torture runs: a URL maker, options for this process, and the environment
/// for the writer processes.
struct Server {
    url: Box<dyn Fn(&str) -> String>,
    options: tarn::StoreOptions,
    env: Vec<(String, String)>,
}

impl Server {
    fn minio() -> Self {
        let server = tarn_tests::minio::s3();
        Self {
            url: Box::new(|name| server.url(name)),
            options: server.options(),
            env: server.env(),
        }
    }

    fn fake_gcs() -> Self {
        let server = tarn_tests::gcs::gcs();
        Self {
            url: Box::new(|name| server.url(name)),
            options: server.options(),
            env: server.env(),
        }
    }

    fn azurite() -> Self {
        let server = tarn_tests::azurite::azure();
        Self {
            url: Box::new(|name| server.url(name)),
            options: server.options(),
            env: server.env(),
        }
    }
}

/// The same with every writer whose proposal is out claiming its version (as under a
/// crowd): killed claimers are waited out, and nothing is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_faulty_claiming_writers_lose_nothing_and_double_nothing() {
    torture(&Server::minio(), "torture-claims", Some("0")).await;
}

/// Runs the torture under `name` on `server`, with `TARN_CLAIM_AT` set for the writers
/// when given.
async fn torture(server: &Server, name: &str, claim_at: Option<&str>) {
    let binary = tarn_tests::workspace_binary("tarn-bench", "tarn-concurrency");
    let url = (server.url)(name);
    let acks = tempfile::tempdir().unwrap();
    let seed = tarn_tests::torture::seed(11);
    let mut command = tokio::process::Command::new(&binary);
    command
        .args([
            "torture",
            "--url",
            &url,
            "--writers",
            &WRITERS.to_string(),
            "--commits",
            &COMMITS.to_string(),
        ])
        .args([
            "--fault-rate",
            "0.05",
            "--seed",
            &seed.to_string(),
            "--profile",
            "s3-express",
        ])
        .args([
            "--max-kills",
            "20",
            "--kill-min-ms",
            "50",
            "--kill-max-ms",
            "400",
        ])
        .arg("--ack-dir")
        .arg(acks.path());
    if let Some(claim_at) = claim_at {
        command.env("TARN_CLAIM_AT", claim_at);
    }
    let report = tarn_tests::torture::run(&server.env, command, name).await;
    assert!(
        report["kills"].as_u64().unwrap() >= 10,
        "too few kills to mean much: {report}"
    );

    // Every writer acknowledged every sequence number.
    let mut acked: BTreeMap<(usize, i64), Ack> = BTreeMap::new();
    for writer in 0..WRITERS {
        let log =
            std::fs::read_to_string(acks.path().join(format!("writer-{writer}.jsonl"))).unwrap();
        for line in log.lines() {
            let ack: Ack = serde_json::from_str(line).unwrap();
            acked.insert((ack.writer, ack.n), ack);
        }
    }
    assert_eq!(
        acked.len(),
        WRITERS * COMMITS as usize,
        "acknowledged sequence numbers"
    );

    // The log: contiguous versions (the snapshot builds), each txnId and each
    // application version once.
    let table = Table::open_with_options(&url, &server.options)
        .await
        .unwrap();
    let location = table.location().clone();
    let mut txn_ids = BTreeSet::new();
    let mut app_versions: BTreeMap<(String, i64), BTreeSet<String>> = BTreeMap::new();
    let mut carried = 0;
    for version in 1..=table.version() {
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
        // A commit names its own txnId and those of the proposals it carried (group
        // commit); its application versions belong to one of them.
        let mut named = BTreeSet::new();
        let mut apps = Vec::new();
        for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let action: serde_json::Value = serde_json::from_slice(line).unwrap();
            if let Some(id) = action["commitInfo"]["txnId"].as_str() {
                named.insert(id.to_string());
            }
            for id in action["commitInfo"]["tarnGroup"]
                .as_array()
                .into_iter()
                .flatten()
            {
                named.insert(id.as_str().unwrap().to_string());
                carried += 1;
            }
            if let Some(app) = action["txn"]["appId"].as_str() {
                apps.push((app.to_string(), action["txn"]["version"].as_i64().unwrap()));
            }
        }
        for txn_id in &named {
            assert!(
                txn_ids.insert(txn_id.clone()),
                "txnId {txn_id} twice (version {version})"
            );
        }
        assert!(
            apps.len() <= named.len(),
            "version {version}: more appends than writers"
        );
        for app in apps {
            assert!(
                app_versions.insert(app.clone(), named.clone()).is_none(),
                "{app:?} committed twice"
            );
        }
    }
    assert!(
        table.version() <= WRITERS as i64 * COMMITS,
        "at most one commit per acknowledged append"
    );
    assert_eq!(
        app_versions.len(),
        WRITERS * COMMITS as usize,
        "every append in the log once"
    );

    // No acknowledged commit lost: each is in the log, in a commit naming the txnId the
    // writer saw.
    for ((writer, n), ack) in &acked {
        let committed = app_versions
            .get(&(format!("writer-{writer}"), *n))
            .unwrap_or_else(|| {
                panic!("writer {writer}'s acknowledged commit {n} is not in the log")
            });
        if !ack.skipped {
            assert!(
                committed.contains(&ack.txn_id),
                "writer {writer}, commit {n}: {} not in {committed:?}",
                ack.txn_id
            );
        }
    }

    // The rows are exactly the acknowledged appends.
    let mut ids = Vec::new();
    for batch in table.scan().select(["id"]).collect().await.unwrap() {
        ids.extend(
            batch
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    ids.sort_unstable();
    let mut expected: Vec<i64> = acked
        .keys()
        .flat_map(|(w, n)| (0..ROWS_PER_COMMIT).map(move |k| *w as i64 * 1_000_000 + n * 10 + k))
        .collect();
    expected.sort_unstable();
    assert_eq!(ids, expected);
    eprintln!(
        "{name}: {report}; {} acknowledgements recovered after a kill or a lost reply; \
         {carried} appends carried in another writer's commit, {} versions",
        acked.values().filter(|a| a.skipped).count(),
        table.version()
    );
}
