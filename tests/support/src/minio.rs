//! One MinIO server per test process, on 127.0.0.1, for every S3 test.
//!
//! `TARN_TEST_S3_ENDPOINT` (with `TARN_TEST_S3_ACCESS_KEY`, `TARN_TEST_S3_SECRET_KEY`,
//! `TARN_TEST_S3_BUCKET`) points the tests at a server of your own instead. Otherwise
//! the `minio` binary is taken from `TARN_MINIO_BIN`, the `PATH` or the cache folder, and
//! built there with `go install` when missing (a few minutes, once). S3 tests never skip:
//! without MinIO or Go they fail and say how to provide an endpoint.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tarn_store::{StoreLocation, StoreOptions};

/// The MinIO release the tests install.
pub const MINIO_MODULE: &str = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c";

const HOW_TO: &str = "S3 tests need an S3-compatible server. Either install Go (the tests then build MinIO \
     with `go install` into the cache folder), put a `minio` binary on PATH or in TARN_MINIO_BIN, \
     or set TARN_TEST_S3_ENDPOINT (and TARN_TEST_S3_ACCESS_KEY, TARN_TEST_S3_SECRET_KEY) to a \
     running server.";

/// An S3-compatible server the tests may use.
#[derive(Debug, Clone)]
pub struct S3Server {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// Access key.
    pub access_key: String,
    /// Secret key.
    pub secret_key: String,
    /// The bucket the tests write under (each test under its own prefix).
    pub bucket: String,
}

impl S3Server {
    /// Store options that reach this server.
    pub fn options(&self) -> StoreOptions {
        StoreOptions::new()
            .with_endpoint(&self.endpoint)
            .with_region("us-east-1")
            .with_credentials(&self.access_key, &self.secret_key)
            .with_allow_http(true)
    }

    /// The same as environment variables, for the processes a test starts.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT".into(), self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID".into(), self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret_key.clone()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    /// A fresh `s3://` URL under the test bucket.
    pub fn url(&self, name: &str) -> String {
        format!("s3://{}/{}", self.bucket, crate::unique(name))
    }

    /// A fresh table location on this server.
    pub fn location(&self, name: &str) -> StoreLocation {
        tarn_store::open_with_options(&self.url(name), &self.options())
            .expect("open the MinIO location")
    }
}

static SERVER: OnceLock<Result<S3Server, String>> = OnceLock::new();

/// The process's S3 server, started on first use. Panics with instructions when none can
/// be had.
pub fn s3() -> &'static S3Server {
    match SERVER.get_or_init(start) {
        Ok(server) => server,
        Err(e) => panic!("{e}\n{HOW_TO}"),
    }
}

fn start() -> Result<S3Server, String> {
    if let Ok(endpoint) = std::env::var("TARN_TEST_S3_ENDPOINT") {
        let server = S3Server {
            endpoint,
            access_key: std::env::var("TARN_TEST_S3_ACCESS_KEY")
                .unwrap_or_else(|_| "minioadmin".into()),
            secret_key: std::env::var("TARN_TEST_S3_SECRET_KEY")
                .unwrap_or_else(|_| "minioadmin".into()),
            bucket: std::env::var("TARN_TEST_S3_BUCKET").unwrap_or_else(|_| "tarn-tests".into()),
        };
        create_bucket(&server)?;
        return Ok(server);
    }
    let binary = minio_binary()?;
    let port = crate::server::free_port()?;
    let console = crate::server::free_port()?;
    let data = crate::server::data_dir("tarn-minio")?;
    let access_key = "tarn-tests".to_string();
    let secret_key = format!("secret-{}", uuid::Uuid::new_v4().simple());
    crate::server::spawn_watched(
        &binary,
        [
            "server".to_string(),
            "--quiet".to_string(),
            "--address".to_string(),
            format!("127.0.0.1:{port}"),
            "--console-address".to_string(),
            format!("127.0.0.1:{console}"),
            data.display().to_string(),
        ],
        &data.with_extension("log"),
        &[
            ("MINIO_ROOT_USER", access_key.as_str()),
            ("MINIO_ROOT_PASSWORD", secret_key.as_str()),
            ("MINIO_BROWSER", "off"),
        ],
    )?;
    let server = S3Server {
        endpoint: format!("http://127.0.0.1:{port}"),
        access_key,
        secret_key,
        bucket: "tarn-tests".into(),
    };
    wait_until_live(port, &data)?;
    // A live server may still answer 503 while it initialises its drive.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match create_bucket(&server) {
            Ok(()) => return Ok(server),
            Err(e) if Instant::now() < deadline && e.contains(" 503 ") => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
}

fn minio_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("TARN_MINIO_BIN") {
        return Ok(PathBuf::from(bin));
    }
    if let Some(found) = crate::server::find_on_path("minio") {
        return Ok(found);
    }
    let bin_dir = crate::cache_dir().join("bin");
    let cached = bin_dir.join("minio");
    crate::with_install_lock("minio", || {
        if cached.exists() {
            return Ok(cached.clone());
        }
        eprintln!(
            "installing MinIO with `go install {MINIO_MODULE}` into {} (a few minutes, once)",
            bin_dir.display()
        );
        let status = crate::server::run_go(|go| {
            go.args(["install", MINIO_MODULE]).env("GOBIN", &bin_dir);
        })
        .map_err(|e| format!("MinIO is not installed and cannot be built: {e}"))?;
        if !status.success() || !cached.exists() {
            return Err(format!("`go install {MINIO_MODULE}` failed ({status})"));
        }
        Ok(cached.clone())
    })
}

fn wait_until_live(port: u16, data: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let probe = crate::server::http(
            &format!("127.0.0.1:{port}"),
            "GET /minio/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        );
        if probe.is_ok_and(|response| response.starts_with("HTTP/1.1 200")) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(data.with_extension("log")).unwrap_or_default();
    Err(format!(
        "MinIO did not become live on port {port} within 60 s. Its log:\n{log}"
    ))
}

/// Creates the test bucket with a SigV4-signed `PUT /<bucket>` (object stores cannot
/// create buckets).
fn create_bucket(server: &S3Server) -> Result<(), String> {
    let url = server.endpoint.trim_end_matches('/');
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("the test server must be plain http, not {url}"))?;
    let now = chrono::Utc::now();
    let date = now.format("%Y%m%dT%H%M%SZ").to_string();
    let day = now.format("%Y%m%d").to_string();
    let region = "us-east-1";
    let payload_hash = hex(&Sha256::digest(b""));
    let canonical = format!(
        "PUT\n/{bucket}\n\nhost:{host}\nx-amz-content-sha256:{payload_hash}\nx-amz-date:{date}\n\nhost;x-amz-content-sha256;x-amz-date\n{payload_hash}",
        bucket = server.bucket
    );
    let scope = format!("{day}/{region}/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", server.secret_key).as_bytes(),
        day.as_bytes(),
    );
    for part in [region, "s3", "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nx-amz-date: {date}\r\nx-amz-content-sha256: {payload_hash}\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential={access}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n",
        bucket = server.bucket,
        access = server.access_key,
    );
    let response =
        crate::server::http(host, &request).map_err(|e| format!("cannot reach {url}: {e}"))?;
    if response.starts_with("HTTP/1.1 200") || response.contains("BucketAlreadyOwnedByYou") {
        Ok(())
    } else {
        Err(format!(
            "creating bucket {} failed: {response}",
            server.bucket
        ))
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any size");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
