//! `tarn-bench` on every cloud's URL: the LHBench merge at its smallest scale on Azurite
//! and the fake GCS, credentials from the cloud's environment variables, results in its
//! JSON lines.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_runs_on_azure_and_gcs_urls() {
    let binary = tarn_tests::workspace_binary("tarn-bench", "tarn-bench");
    let azure = tarn_tests::azurite::azure();
    let gcs = tarn_tests::gcs::gcs();
    for (url, env) in [
        (azure.url("bench"), azure.env()),
        (gcs.url("bench"), gcs.env()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("results.jsonl");
        let output = tokio::process::Command::new(&binary)
            .args(["merge", "--scale", "0.001", "--runs", "1", "--url", &url])
            .arg("--json")
            .arg(&json)
            .envs(env)
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let results: Vec<serde_json::Value> = std::fs::read_to_string(&json)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert!(!results.is_empty(), "{url}: no results");
        for result in &results {
            assert!(
                result["requests"].as_u64().unwrap() > 0,
                "{url}: a result with no requests: {result}"
            );
        }
    }
}
