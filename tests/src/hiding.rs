//! `HidingStore`: listings that leave out the objects whose paths end in a given suffix,
//! as a LIST that raced a writer does (it may miss a file written before one it shows);
//! every other request, a HEAD or GET of those objects included, goes straight through.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// An [`ObjectStore`] whose listings hide paths ending in `suffix`.
#[derive(Debug)]
pub struct HidingStore {
    inner: Arc<dyn ObjectStore>,
    suffix: String,
}

impl HidingStore {
    /// Wraps `inner`, hiding paths ending in `suffix` from its listings.
    pub fn new(inner: Arc<dyn ObjectStore>, suffix: impl Into<String>) -> Self {
        Self {
            inner,
            suffix: suffix.into(),
        }
    }

    fn hide(
        &self,
        listed: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let suffix = self.suffix.clone();
        listed
            .filter(move |m| {
                let shown = !matches!(m, Ok(m) if m.location.as_ref().ends_with(&suffix));
                futures::future::ready(shown)
            })
            .boxed()
    }
}

impl fmt::Display for HidingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HidingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for HidingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
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
        self.hide(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.hide(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        listed
            .objects
            .retain(|m| !m.location.as_ref().ends_with(&self.suffix));
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
