//! Opening a store from a table URL.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use url::Url;

use crate::clouds::{Cloud, bucket_of, open_cloud};
use crate::error::{Error, Result};
use crate::local::LocalStore;
use crate::redact::{REDACTED, is_secret_option, redact_url};

/// Options for opening a store, on top of what the environment provides (`AWS_*` for S3,
/// `GOOGLE_*` for GCS, `AZURE_*` for Azure).
///
/// Keys are those `object_store` understands for the URL's cloud, with or without their
/// `aws_`, `google_` or `azure_` prefix:
/// - S3: `endpoint`, `region`, `access_key_id`, `secret_access_key`, `session_token`,
///   `s3_express`, ...;
/// - GCS: `service_account` (a key file's path), `service_account_key` (its JSON),
///   `application_credentials`, `endpoint` (the service's base URL), `skip_signature`;
/// - Azure: `account_name`, `access_key`, `sas_token`, `bearer_token`, `client_id`,
///   `client_secret`, `tenant_id`, `endpoint`, `use_emulator`, ...;
/// - every cloud: `allow_http`, `timeout`, `connect_timeout`, `proxy_url`, ...
///
/// An option given here wins over the environment. Options are ignored for memory and local
/// stores, which have none.
///
/// Its `Debug` prints every key, and the values of secrets (keys, tokens, passwords) as
/// `***`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    values: BTreeMap<String, String>,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = self.values.iter().map(|(key, value)| {
            let value = if is_secret_option(key) {
                REDACTED.to_string()
            } else {
                redact_url(value)
            };
            (key, value)
        });
        f.debug_struct("StoreOptions")
            .field("values", &shown.collect::<BTreeMap<_, _>>())
            .finish()
    }
}

impl StoreOptions {
    /// No options: everything comes from the URL and the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an option by its key.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.values.insert(key.into(), value.into());
        self
    }

    /// Where requests go instead of the cloud's own address: an S3-compatible server such
    /// as MinIO (`http://127.0.0.1:9000`), a GCS base URL, or an Azure account URL.
    #[must_use]
    pub fn with_endpoint(self, endpoint: impl Into<String>) -> Self {
        self.with("endpoint", endpoint)
    }

    /// The S3 region.
    #[must_use]
    pub fn with_region(self, region: impl Into<String>) -> Self {
        self.with("region", region)
    }

    /// Static credentials.
    #[must_use]
    pub fn with_credentials(
        self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Self {
        self.with("access_key_id", access_key_id)
            .with("secret_access_key", secret_access_key)
    }

    /// Roots outside the table that its log may point into (a shallow clone's source), as
    /// URLs in the table's own store (same scheme and bucket, or the local file system).
    /// By default a table reads only files under its own root.
    #[must_use]
    pub fn with_allowed_roots<S: AsRef<str>>(self, roots: impl IntoIterator<Item = S>) -> Self {
        let joined: Vec<String> = roots.into_iter().map(|r| r.as_ref().to_string()).collect();
        self.with(ALLOWED_ROOTS, joined.join(","))
    }

    /// Allows plain-HTTP endpoints (a local MinIO or emulator).
    #[must_use]
    pub fn with_allow_http(self, allow: bool) -> Self {
        self.with("allow_http", allow.to_string())
    }

    /// The options as key/value pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// The option key of [`StoreOptions::with_allowed_roots`]: URLs, comma-separated.
pub const ALLOWED_ROOTS: &str = "allowed_roots";

/// Where a table lives: a store and the path of the table's root inside it.
///
/// The store is rooted at the file system root, the bucket, or the memory store, so paths
/// outside the table root (absolute paths some Delta writers record) resolve in the same
/// store when they share its scheme and authority.
///
/// Its `Debug` names the store by its `Display` (`AmazonS3(bucket)`), never by the store's
/// own `Debug`, which may hold its configuration.
#[derive(Clone)]
pub struct StoreLocation {
    url: Url,
    store: Arc<dyn ObjectStore>,
    root: Path,
    /// Roots outside `root`, in the same store, that the table may read from.
    allowed_roots: Vec<Path>,
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLocation")
            .field("url", &self.url.as_str())
            .field("store", &self.store.to_string())
            .field("root", &self.root)
            .field("allowed_roots", &self.allowed_roots)
            .finish()
    }
}

impl StoreLocation {
    /// A location from parts, for stores built by hand (wrapped, or configured in ways
    /// [`open`] does not cover). `url` is used for messages and to resolve absolute paths,
    /// so it is kept without user information or query (where credentials can hide).
    pub fn new(mut url: Url, store: Arc<dyn ObjectStore>, root: Path) -> Self {
        let _ = url.set_password(None);
        let _ = url.set_username("");
        url.set_query(None);
        Self {
            url,
            store,
            root,
            allowed_roots: Vec::new(),
        }
    }

    /// The same location, allowed to read under `roots` too (paths in its store).
    #[must_use]
    pub fn with_allowed_roots(mut self, roots: impl IntoIterator<Item = Path>) -> Self {
        self.allowed_roots.extend(roots);
        self
    }

    /// The roots outside the table root that the table may read from.
    pub fn allowed_roots(&self) -> &[Path] {
        &self.allowed_roots
    }

    /// Whether `path` lies under the table root or an allowed root (whole segments).
    pub fn contains(&self, path: &Path) -> bool {
        std::iter::once(&self.root)
            .chain(&self.allowed_roots)
            .any(|root| path.prefix_matches(root))
    }

    /// The local directory of `path` when the store is the local file system.
    pub fn local_path(&self, path: &Path) -> Option<PathBuf> {
        (self.url.scheme() == "file").then(|| PathBuf::from(format!("/{path}")))
    }

    /// The normalised URL of the table root.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The table root inside the store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The same location with its store replaced, for example by a wrapper around it.
    #[must_use]
    pub fn with_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = store;
        self
    }

    /// Resolves an absolute URL (as found in some Delta logs) to a path in this store, if the
    /// URL has this location's scheme and authority. Returns `None` otherwise.
    pub fn resolve_absolute(&self, url: &Url) -> Option<Path> {
        let same_store = match (
            Cloud::of_scheme(url.scheme()),
            Cloud::of_scheme(self.url.scheme()),
        ) {
            (Some(a), Some(b)) => a == b && bucket_of(a, url) == bucket_of(b, &self.url),
            (None, None) => {
                url.scheme() == self.url.scheme() && url.host_str() == self.url.host_str()
            }
            _ => false,
        };
        if !same_store {
            return None;
        }
        Path::from_url_path(url.path()).ok()
    }
}

/// Opens the store for a table URL with options from the environment only.
///
/// See [`open_with_options`].
pub fn open(url: &str) -> Result<StoreLocation> {
    open_with_options(url, &StoreOptions::default())
}

/// Opens the store for a table URL.
///
/// Accepted forms:
/// - `memory://name[/prefix]`: a process-wide in-memory store per name, so a table written
///   through one handle is seen by the next;
/// - a local path (relative paths are taken from the current directory) or `file:///abs/path`;
/// - `s3://bucket[/prefix]` (or `s3a://`), with credentials, region and endpoint from `AWS_*`
///   variables and `options`; buckets ending in `--x-s3` are S3 Express directory buckets;
/// - `gs://bucket[/prefix]`, with credentials from `GOOGLE_APPLICATION_CREDENTIALS`,
///   `GOOGLE_SERVICE_ACCOUNT*` or the instance, and `options`;
/// - `az://container[/prefix]` (or `azure://`, `adl://`, `abfs[s]://container/`), with the
///   account and credentials from `AZURE_STORAGE_*` variables and `options`, and
///   `abfs[s]://container@account.dfs.core.windows.net[/prefix]`, which names the account.
///
/// Cloud locations are normalised to `s3://`, `gs://` and `az://container/prefix`.
///
/// Fails with [`Error::InvalidUrl`] when the URL cannot be parsed or has `..`, `.`, empty
/// or control-character segments, [`Error::UnsupportedScheme`] for other schemes,
/// [`Error::UnknownOption`] for option keys the cloud does not know, and [`Error::Build`]
/// when the store cannot be configured (an Azure URL without an account, say).
pub fn open_with_options(url: &str, options: &StoreOptions) -> Result<StoreLocation> {
    if url.chars().any(char::is_control) {
        return Err(invalid(url, "control characters are not allowed"));
    }
    let location = match Url::parse(url) {
        Ok(parsed) if parsed.scheme().len() > 1 => open_url(url, parsed, options)?,
        // No scheme (or a Windows drive letter): a local path.
        _ => open_local(url, PathBuf::from(url))?,
    };
    let roots = allowed_roots(url, &location, options)?;
    Ok(location.with_allowed_roots(roots))
}

/// The allowed roots `options` give, as paths in `location`'s store. Fails with
/// [`Error::InvalidUrl`] for one that does not parse or lies in another store.
fn allowed_roots(raw: &str, location: &StoreLocation, options: &StoreOptions) -> Result<Vec<Path>> {
    let Some((_, value)) = options.iter().find(|(k, _)| *k == ALLOWED_ROOTS) else {
        return Ok(Vec::new());
    };
    let mut roots = Vec::new();
    for root in value.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let bad =
            |reason: &str| invalid(raw, &format!("allowed root {}: {reason}", redact_url(root)));
        let url = match Url::parse(root) {
            Ok(url) if url.scheme().len() > 1 => url,
            _ => Url::from_directory_path(normalise_local(std::path::Path::new(root)))
                .map_err(|()| bad("not a URL or an absolute local path"))?,
        };
        let path = location
            .resolve_absolute(&url)
            .ok_or_else(|| bad("not in the table's store"))?;
        roots.push(path);
    }
    Ok(roots)
}

fn open_url(raw: &str, url: Url, options: &StoreOptions) -> Result<StoreLocation> {
    match url.scheme() {
        "memory" => open_memory(raw, &url),
        "file" => {
            let path = url
                .to_file_path()
                .map_err(|()| invalid(raw, "a file URL must hold an absolute path"))?;
            open_local(raw, path)
        }
        scheme => match Cloud::of_scheme(scheme) {
            Some(cloud) => open_cloud(raw, &url, cloud, options),
            None => Err(Error::UnsupportedScheme {
                scheme: scheme.to_string(),
                url: redact_url(raw),
            }),
        },
    }
}

static MEMORY_STORES: LazyLock<Mutex<HashMap<String, Arc<InMemory>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn open_memory(raw: &str, url: &Url) -> Result<StoreLocation> {
    let name = url.host_str().unwrap_or_default().to_string();
    let root = url_root(raw, url)?;
    let store = {
        // A poisoned lock only means another thread panicked while inserting; the map is fine.
        let mut stores = MEMORY_STORES.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            stores
                .entry(name.clone())
                .or_insert_with(|| Arc::new(InMemory::new())),
        )
    };
    let normalised = format!("memory://{name}/{root}");
    let url = Url::parse(&normalised).map_err(|e| invalid(raw, &e.to_string()))?;
    Ok(StoreLocation::new(url, store, root))
}

fn open_local(raw: &str, path: PathBuf) -> Result<StoreLocation> {
    let absolute = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .map_err(|source| Error::Io {
                path: raw.to_string(),
                source,
            })?
            .join(path)
    };
    let normalised = normalise_local(&absolute);
    let root = Path::from_absolute_path(&normalised).map_err(|e| invalid(raw, &e.to_string()))?;
    let url = Url::from_directory_path(&normalised)
        .map_err(|()| invalid(raw, "not an absolute local path"))?;
    Ok(StoreLocation::new(
        url,
        Arc::new(LocalStore::new(&normalised)),
        root,
    ))
}

/// Resolves `.` and `..` lexically, so a root never names a parent through `..`.
fn normalise_local(path: &std::path::Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path part of a URL as a store path, refusing segments that would escape it.
pub(crate) fn url_root(raw: &str, url: &Url) -> Result<Path> {
    let trimmed = url.path().trim_matches('/');
    if trimmed.is_empty() {
        return Ok(Path::ROOT);
    }
    for segment in trimmed.split('/') {
        let decoded = percent_decode(segment);
        if segment.is_empty() || decoded == "." || decoded == ".." {
            return Err(invalid(
                raw,
                "empty, '.' or '..' path segments are not allowed",
            ));
        }
        if decoded.chars().any(char::is_control) {
            return Err(invalid(raw, "control characters are not allowed"));
        }
    }
    Path::from_url_path(trimmed).map_err(|e| invalid(raw, &e.to_string()))
}

fn percent_decode(segment: &str) -> String {
    Path::from_url_path(segment)
        .map(|p| p.to_string())
        .unwrap_or_else(|_| segment.to_string())
}

/// An `InvalidUrl` error naming `url` without its secrets.
pub(crate) fn invalid(url: &str, reason: &str) -> Error {
    Error::InvalidUrl {
        url: redact_url(url),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_urls_share_one_store_per_name() {
        let a = open("memory://shared-name/t1").unwrap();
        let b = open("memory://shared-name/t2").unwrap();
        assert!(Arc::ptr_eq(a.store(), b.store()));
        assert_eq!(a.root().as_ref(), "t1");
        assert_eq!(b.url().as_str(), "memory://shared-name/t2");
    }

    #[test]
    fn local_paths_are_absolute_and_lexically_normalised() {
        let loc = open("/tmp/a/../b/./c").unwrap();
        assert_eq!(loc.root().as_ref(), "tmp/b/c");
        assert_eq!(loc.url().as_str(), "file:///tmp/b/c/");
        let file = open("file:///tmp/x%20y").unwrap();
        assert_eq!(file.root().as_ref(), "tmp/x y");
    }

    #[test]
    fn escaping_or_control_segments_are_refused() {
        // URL parsing resolves dot segments and clamps them at the root, so none escapes.
        assert_eq!(open("s3://bucket/a/../b").unwrap().root().as_ref(), "b");
        assert_eq!(
            open("memory://m/../../%2E%2E/x").unwrap().root().as_ref(),
            "x"
        );
        assert!(matches!(
            open("memory://m/a\u{1}b"),
            Err(Error::InvalidUrl { .. })
        ));
        assert!(matches!(
            open("ftp://bucket/x"),
            Err(Error::UnsupportedScheme { .. })
        ));
    }

    #[test]
    fn s3_urls_keep_bucket_and_prefix() {
        let loc = open_with_options(
            "s3://bucket/some/prefix",
            &StoreOptions::new()
                .with_endpoint("http://127.0.0.1:9")
                .with_region("us-east-1")
                .with_credentials("k", "s")
                .with_allow_http(true),
        )
        .unwrap();
        assert_eq!(loc.root().as_ref(), "some/prefix");
        assert_eq!(loc.url().as_str(), "s3://bucket/some/prefix");
        let err = open_with_options("s3://bucket/p", &StoreOptions::new().with("nonsense", "1"));
        assert!(matches!(err, Err(Error::UnknownOption { .. })));
    }

    #[test]
    fn gcs_and_azure_urls_keep_bucket_container_and_prefix() {
        let gcs = open_with_options(
            "gs://bucket/some/prefix",
            &StoreOptions::new()
                .with_endpoint("http://127.0.0.1:9")
                .with("skip_signature", "true"),
        )
        .unwrap();
        assert_eq!(gcs.root().as_ref(), "some/prefix");
        assert_eq!(gcs.url().as_str(), "gs://bucket/some/prefix");
        let azure = StoreOptions::new()
            .with("account_name", "acct")
            .with("access_key", "a2V5");
        for url in [
            "az://container/p",
            "azure://container/p",
            "adl://container/p",
            "abfss://container/p",
            "abfss://container@acct.dfs.core.windows.net/p",
        ] {
            let loc = open_with_options(url, &azure).unwrap();
            assert_eq!(loc.url().as_str(), "az://container/p", "{url}");
            assert_eq!(loc.root().as_ref(), "p", "{url}");
        }
        // The account may come from the URL alone.
        let named = StoreOptions::new().with("access_key", "a2V5");
        assert!(open_with_options("abfss://c@acct.dfs.core.windows.net/p", &named).is_ok());
        assert!(matches!(
            open_with_options("az://c/p", &azure.clone().with("region", "x")),
            Err(Error::UnknownOption { .. })
        ));
        assert!(matches!(
            open_with_options("gs:///p", &StoreOptions::new()),
            Err(Error::InvalidUrl { .. })
        ));
    }

    #[test]
    fn absolute_urls_resolve_only_in_the_same_store() {
        let loc = open("s3://bucket/table").unwrap();
        let same = Url::parse("s3a://bucket/elsewhere/f.parquet").unwrap();
        assert_eq!(
            loc.resolve_absolute(&same).unwrap().as_ref(),
            "elsewhere/f.parquet"
        );
        let other = Url::parse("s3://other/f.parquet").unwrap();
        assert!(loc.resolve_absolute(&other).is_none());
        let azure = open_with_options(
            "az://container/table",
            &StoreOptions::new()
                .with("account_name", "acct")
                .with("access_key", "a2V5"),
        )
        .unwrap();
        let spark = Url::parse("abfss://container@acct.dfs.core.windows.net/t/f.parquet").unwrap();
        assert_eq!(
            azure.resolve_absolute(&spark).unwrap().as_ref(),
            "t/f.parquet"
        );
        let elsewhere = Url::parse("abfss://other@acct.dfs.core.windows.net/f.parquet").unwrap();
        assert!(azure.resolve_absolute(&elsewhere).is_none());
        assert!(azure.resolve_absolute(&same).is_none());
    }
}
