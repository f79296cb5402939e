//! `GateStore`: holds the PUTs of one path until the test opens the gate, so a test can
//! stop a writer at an exact point of its commit (its PUT of a version in flight) while
//! other writers go on.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use tokio::sync::{Notify, Semaphore};

/// The test's side of a gate.
#[derive(Debug, Clone)]
pub struct Gate {
    arrived: Arc<Notify>,
    open: Arc<Semaphore>,
}

impl Gate {
    /// Waits until a held PUT has reached the gate; panics after `secs` seconds.
    pub async fn arrived(&self, secs: u64) {
        tokio::time::timeout(
            std::time::Duration::from_secs(secs),
            self.arrived.notified(),
        )
        .await
        .expect("no PUT reached the gate");
    }

    /// Lets every held PUT (and every later one) through.
    pub fn open(&self) {
        self.open.add_permits(Semaphore::MAX_PERMITS / 2);
    }
}

/// An [`ObjectStore`] that holds PUTs to paths ending in `suffix` until its [`Gate`]
/// opens; everything else goes straight through.
#[derive(Debug)]
pub struct GateStore {
    inner: Arc<dyn ObjectStore>,
    suffix: String,
    gate: Gate,
}

impl GateStore {
    /// Wraps `inner`, holding PUTs to paths ending in `suffix`.
    pub fn new(inner: Arc<dyn ObjectStore>, suffix: impl Into<String>) -> (Self, Gate) {
        let gate = Gate {
            arrived: Arc::new(Notify::new()),
            open: Arc::new(Semaphore::new(0)),
        };
        let store = Self {
            inner,
            suffix: suffix.into(),
            gate: gate.clone(),
        };
        (store, gate)
    }

    async fn pass(&self, location: &Path) {
        if location.as_ref().ends_with(&self.suffix) {
            self.gate.arrived.notify_one();
            let permit = self
                .gate
                .open
                .acquire()
                .await
                .expect("the gate is never closed");
            permit.forget();
        }
    }
}

impl fmt::Display for GateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GateStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for GateStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.pass(location).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
