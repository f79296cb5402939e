//! One fake Cloud Storage server per test process, on 127.0.0.1, for every GCS test.
//!
//! The server is fake-gcs-server (github.com/fsouza/fake-gcs-server) run in-process by a
//! small Go program of ours, `tests/support/gcs/main.go`, that adds the XML API requests
//! object_store sends, each turned into the JSON API request fake-gcs-server handles
//! (fake-gcs-server routes XML uploads and listings only in part and not faithfully:
//! no precondition on a PUT, no `start-after`, no XML multipart upload). Objects, generations and
//! every `ifGenerationMatch` precondition stay fake-gcs-server's own. The program is built
//! with `go build` into the cache folder on first use (its dependencies come from the Go
//! module proxy).
//!
//! `TARN_TEST_GCS_ENDPOINT` (with `TARN_TEST_GCS_BUCKET`) points the tests at a server of
//! your own instead. GCS tests never skip: without Go they fail and say how to provide
//! an endpoint.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tarn_store::{StoreLocation, StoreOptions};

const HOW_TO: &str = "GCS tests need a fake Cloud Storage server. Either install Go (the tests \
     then build one with `go build` into the cache folder), or set TARN_TEST_GCS_ENDPOINT (and \
     TARN_TEST_GCS_BUCKET) to a running server that speaks the XML API without auth.";

/// The Go program's sources, built on first use.
const SOURCES: [(&str, &str); 3] = [
    ("main.go", include_str!("../gcs/main.go")),
    ("go.mod", include_str!("../gcs/go.mod")),
    ("go.sum", include_str!("../gcs/go.sum")),
];

/// A Cloud Storage server the tests may use.
#[derive(Debug, Clone)]
pub struct GcsServer {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The bucket the tests write under (each test under its own prefix).
    pub bucket: String,
}

impl GcsServer {
    /// Store options that reach this server: a service-account key that names it and
    /// turns OAuth off, object_store's way to an emulator (`skip_signature` still asks
    /// the instance for a token on some requests).
    pub fn options(&self) -> StoreOptions {
        StoreOptions::new()
            .with("service_account_key", self.service_account_key())
            .with_allow_http(true)
    }

    /// The same as environment variables, for the processes a test starts.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "GOOGLE_SERVICE_ACCOUNT_KEY".into(),
                self.service_account_key(),
            ),
            ("GOOGLE_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    fn service_account_key(&self) -> String {
        format!(
            r#"{{"gcs_base_url":"{}","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}}"#,
            self.endpoint
        )
    }

    /// A fresh `gs://` URL under the test bucket.
    pub fn url(&self, name: &str) -> String {
        format!("gs://{}/{}", self.bucket, crate::unique(name))
    }

    /// A fresh table location on this server.
    pub fn location(&self, name: &str) -> StoreLocation {
        tarn_store::open_with_options(&self.url(name), &self.options())
            .expect("open the fake GCS location")
    }
}

static SERVER: OnceLock<Result<GcsServer, String>> = OnceLock::new();

/// The process's GCS server, started on first use. Panics with instructions when none can
/// be had.
pub fn gcs() -> &'static GcsServer {
    match SERVER.get_or_init(start) {
        Ok(server) => server,
        Err(e) => panic!("{e}\n{HOW_TO}"),
    }
}

fn start() -> Result<GcsServer, String> {
    if let Ok(endpoint) = std::env::var("TARN_TEST_GCS_ENDPOINT") {
        let server = GcsServer {
            endpoint,
            bucket: std::env::var("TARN_TEST_GCS_BUCKET").unwrap_or_else(|_| "tarn-tests".into()),
        };
        create_bucket(&server)?;
        return Ok(server);
    }
    let binary = build()?;
    let port = crate::server::free_port()?;
    let data = crate::server::data_dir("tarn-fake-gcs")?;
    let log = data.with_extension("log");
    crate::server::spawn_watched(&binary, ["-port".to_string(), port.to_string()], &log, &[])?;
    let server = GcsServer {
        endpoint: format!("http://127.0.0.1:{port}"),
        bucket: "tarn-tests".into(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match create_bucket(&server) {
            Ok(()) => return Ok(server),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "the fake GCS server did not answer on port {port} within 60 s ({e}). \
                     Its log:\n{log}"
                ));
            }
        }
    }
}

/// The server's binary in the cache folder, named by a hash of its sources and built when
/// missing.
fn build() -> Result<PathBuf, String> {
    let mut hash = Sha256::new();
    for (name, text) in SOURCES {
        hash.update(name.as_bytes());
        hash.update(text.as_bytes());
    }
    let id: String = hash.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let binary = crate::cache_dir()
        .join("bin")
        .join(format!("tarn-fake-gcs-{id}"));
    crate::with_install_lock("fake-gcs", || {
        if binary.exists() {
            return Ok(binary.clone());
        }
        let src = crate::cache_dir().join(format!("fake-gcs-src-{id}"));
        std::fs::create_dir_all(&src)
            .map_err(|e| format!("cannot create {}: {e}", src.display()))?;
        for (name, text) in SOURCES {
            std::fs::write(src.join(name), text)
                .map_err(|e| format!("cannot write {name}: {e}"))?;
        }
        eprintln!(
            "building the fake GCS server (fake-gcs-server with an XML front) into {} (once)",
            binary.display()
        );
        let status = crate::server::run_go(|go| {
            go.args(["build", "-o"])
                .arg(&binary)
                .arg(".")
                .current_dir(&src);
        })
        .map_err(|e| format!("the fake GCS server is not built and cannot be: {e}"))?;
        if !status.success() || !binary.exists() {
            return Err(format!(
                "`go build` of the fake GCS server failed ({status})"
            ));
        }
        Ok(binary.clone())
    })
}

/// Creates the test bucket through the JSON API (object stores cannot create buckets).
fn create_bucket(server: &GcsServer) -> Result<(), String> {
    let host = server
        .endpoint
        .strip_prefix("http://")
        .ok_or_else(|| {
            format!(
                "the test server must be plain http, not {}",
                server.endpoint
            )
        })?
        .trim_end_matches('/');
    let body = format!("{{\"name\":\"{}\"}}", server.bucket);
    let request = format!(
        "POST /storage/v1/b HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let response = crate::server::http(host, &request)
        .map_err(|e| format!("cannot reach {}: {e}", server.endpoint))?;
    if response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.1 409") {
        Ok(())
    } else {
        Err(format!(
            "creating bucket {} failed: {response}",
            server.bucket
        ))
    }
}
