//! One Azurite (the Azure Storage emulator) per test process, on 127.0.0.1, for every
//! Azure Blob Storage test.
//!
//! `TARN_TEST_AZURE_ENDPOINT` (an emulator's address such as `http://127.0.0.1:10000`,
//! with `TARN_TEST_AZURE_ACCOUNT`,
//! `TARN_TEST_AZURE_KEY` and `TARN_TEST_AZURE_CONTAINER`) points the tests at a server of
//! your own instead. Otherwise Azurite is installed with `npm install` into the cache
//! folder on first use and started with Node. Azure tests never skip: without Node they
//! fail and say how to provide an endpoint.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tarn_store::{StoreLocation, StoreOptions};

/// The Azurite release the tests install.
pub const AZURITE_VERSION: &str = "3.35.0";

/// The emulator's well-known account.
pub const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The emulator's well-known account key (published in Azurite's README).
pub const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

const HOW_TO: &str = "Azure tests need Azurite. Either install Node.js and npm (the tests then \
     install Azurite with `npm install` into the cache folder), or set TARN_TEST_AZURE_ENDPOINT \
     (and TARN_TEST_AZURE_ACCOUNT, TARN_TEST_AZURE_KEY) to a running Azurite's address.";

/// An Azure Blob Storage account the tests may use.
#[derive(Debug, Clone)]
pub struct AzureServer {
    /// The emulator's address, `http://127.0.0.1:<port>` (the account's URL is this and
    /// `/<account>`).
    pub endpoint: String,
    /// The account name.
    pub account: String,
    /// The account key.
    pub key: String,
    /// The container the tests write under (each test under its own prefix).
    pub container: String,
}

impl AzureServer {
    /// Store options that reach this account.
    pub fn options(&self) -> StoreOptions {
        StoreOptions::new()
            .with_endpoint(&self.endpoint)
            .with("use_emulator", "true")
            .with("account_name", &self.account)
            .with("access_key", &self.key)
    }

    /// The same as environment variables, for the processes a test starts.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AZURE_STORAGE_ENDPOINT".into(), self.endpoint.clone()),
            ("AZURE_STORAGE_USE_EMULATOR".into(), "true".into()),
            ("AZURE_STORAGE_ACCOUNT_NAME".into(), self.account.clone()),
            ("AZURE_STORAGE_ACCOUNT_KEY".into(), self.key.clone()),
        ]
    }

    /// A fresh `az://` URL under the test container.
    pub fn url(&self, name: &str) -> String {
        format!("az://{}/{}", self.container, crate::unique(name))
    }

    /// A fresh table location on this account.
    pub fn location(&self, name: &str) -> StoreLocation {
        tarn_store::open_with_options(&self.url(name), &self.options())
            .expect("open the Azurite location")
    }
}

static SERVER: OnceLock<Result<AzureServer, String>> = OnceLock::new();

/// The process's Azure account, its Azurite started on first use. Panics with
/// instructions when none can be had.
pub fn azure() -> &'static AzureServer {
    match SERVER.get_or_init(start) {
        Ok(server) => server,
        Err(e) => panic!("{e}\n{HOW_TO}"),
    }
}

fn start() -> Result<AzureServer, String> {
    if let Ok(endpoint) = std::env::var("TARN_TEST_AZURE_ENDPOINT") {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
        let server = AzureServer {
            endpoint,
            account: var("TARN_TEST_AZURE_ACCOUNT", EMULATOR_ACCOUNT),
            key: var("TARN_TEST_AZURE_KEY", EMULATOR_KEY),
            container: var("TARN_TEST_AZURE_CONTAINER", "tarn-tests"),
        };
        create_container(&server)?;
        return Ok(server);
    }
    let main = azurite_main()?;
    let node = crate::server::find_on_path("node").ok_or("Node.js (`node`) is not on PATH")?;
    let port = crate::server::free_port()?;
    let data = crate::server::data_dir("tarn-azurite")?;
    let log = data.with_extension("log");
    crate::server::spawn_watched(
        &node,
        [
            main.display().to_string(),
            "--blobHost".into(),
            "127.0.0.1".into(),
            "--blobPort".into(),
            port.to_string(),
            "--location".into(),
            data.display().to_string(),
            "--skipApiVersionCheck".into(),
            "--loose".into(),
            "--disableTelemetry".into(),
            "--silent".into(),
        ],
        &log,
        &[],
    )?;
    let server = AzureServer {
        endpoint: format!("http://127.0.0.1:{port}"),
        account: EMULATOR_ACCOUNT.into(),
        key: EMULATOR_KEY.into(),
        container: "tarn-tests".into(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match create_container(&server) {
            Ok(()) => return Ok(server),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "Azurite did not answer on port {port} within 60 s ({e}). Its log:\n{log}"
                ));
            }
        }
    }
}

/// Azurite's blob service entry point, installed into the cache folder when missing.
fn azurite_main() -> Result<PathBuf, String> {
    let prefix = crate::cache_dir().join(format!("azurite-{AZURITE_VERSION}"));
    let main = prefix.join("node_modules/azurite/dist/src/blob/main.js");
    crate::with_install_lock("azurite", || {
        if main.exists() {
            return Ok(main.clone());
        }
        let npm = crate::server::find_on_path("npm")
            .ok_or("Azurite is not installed and npm is not available to install it.")?;
        eprintln!(
            "installing Azurite {AZURITE_VERSION} with npm into {} (once)",
            prefix.display()
        );
        let status = Command::new(npm)
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(format!("azurite@{AZURITE_VERSION}"))
            .status()
            .map_err(|e| format!("cannot run npm: {e}"))?;
        if !status.success() || !main.exists() {
            return Err(format!(
                "`npm install azurite@{AZURITE_VERSION}` failed ({status})"
            ));
        }
        Ok(main.clone())
    })
}

/// Creates the test container with a Shared Key signed `PUT ?restype=container` (object
/// stores cannot create containers).
fn create_container(server: &AzureServer) -> Result<(), String> {
    let rest = server.endpoint.strip_prefix("http://").ok_or_else(|| {
        format!(
            "the test account must be plain http, not {}",
            server.endpoint
        )
    })?;
    let host = rest.trim_end_matches('/');
    let path = format!("/{}/{}", server.account, server.container);
    let date = chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let version = "2021-08-06";
    let to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{account}{path}\nrestype:container",
        account = server.account
    );
    let key = STANDARD
        .decode(&server.key)
        .map_err(|e| format!("the account key is not base64: {e}"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes keys of any size");
    mac.update(to_sign.as_bytes());
    let signature = STANDARD.encode(mac.finalize().into_bytes());
    let request = format!(
        "PUT {path}?restype=container HTTP/1.1\r\nHost: {host}\r\nx-ms-date: {date}\r\n\
         x-ms-version: {version}\r\nAuthorization: SharedKey {account}:{signature}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n",
        account = server.account
    );
    let response = crate::server::http(host, &request)
        .map_err(|e| format!("cannot reach {}: {e}", server.endpoint))?;
    if response.starts_with("HTTP/1.1 201") || response.contains("ContainerAlreadyExists") {
        Ok(())
    } else {
        Err(format!(
            "creating container {} failed: {response}",
            server.container
        ))
    }
}
