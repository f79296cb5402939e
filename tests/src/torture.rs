//! Running a `tarn-concurrency` torture mode (exactly-once table writers, catalog writers)
//! against a test server (MinIO, Azurite): its credentials in the environment, a
//! ten-minute limit, and the JSON report it prints.

/// The seed of a torture run: `TARN_TORTURE_SEED`, else `default`, so a failing run can be
/// replayed.
pub fn seed(default: u64) -> u64 {
    std::env::var("TARN_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `command` (a torture mode with its arguments) with `env` (a server's credentials)
/// and returns its report. Panics naming `mode` when it fails, runs over ten minutes, or
/// prints no JSON.
pub async fn run(
    env: &[(String, String)],
    mut command: tokio::process::Command,
    mode: &str,
) -> serde_json::Value {
    let output = command.envs(env.iter().cloned()).output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(600), output)
        .await
        .expect("the torture run finishes within ten minutes")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tarn-concurrency {mode} failed: {stderr}"
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("tarn-concurrency {mode} printed no JSON report ({e}): {stderr}")
    })
}
