//! What Tarn adds to object_store's Azure store ([`AzureStore`]).
//!
//! - Azure serves no suffix ranges (`bytes=-N`), and object_store refuses them for it;
//!   Tarn opens index objects, and Parquet files of unknown size, by their suffix. A
//!   suffix read here is a HEAD, then a GET of that range pinned to the HEAD's ETag.
//! - Azurite, the Azure Storage emulator: object_store finds it at
//!   `http://127.0.0.1:10000` or the address in `AZURITE_BLOB_STORAGE_URL`, and ignores an
//!   `endpoint` option. Tarn takes `use_emulator=true` with an `endpoint` to mean the
//!   emulator there: it addresses the account path-style under that endpoint, as
//!   Azurite expects, and lists from an offset by filtering a whole listing, because
//!   Azurite ignores the `startFrom` parameter (object_store's emulator mode does the
//!   same).

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// The emulator's well-known account, used when none is given.
pub(crate) const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The emulator's well-known account key (published in Azurite's documentation), used when
/// no credential is given.
pub(crate) const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// object_store's Azure store with suffix reads, and for Azurite listings from an offset,
/// done here.
#[derive(Debug)]
pub(crate) struct AzureStore<T> {
    inner: T,
    /// Filter listings from an offset here (Azurite ignores `startFrom`).
    list_offset_here: bool,
}

impl<T: ObjectStore> AzureStore<T> {
    /// Wraps `inner`; `emulator` when it is Azurite.
    pub(crate) fn new(inner: T, emulator: bool) -> Self {
        Self {
            inner,
            list_offset_here: emulator,
        }
    }
}

impl<T: ObjectStore> std::fmt::Display for AzureStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for AzureStore<T> {
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

    async fn get_opts(&self, location: &Path, mut options: GetOptions) -> Result<GetResult> {
        if let Some(GetRange::Suffix(n @ 1..)) = options.range {
            let meta = self.inner.head(location).await?;
            options.range =
                (meta.size > 0).then(|| GetRange::Bounded(meta.size.saturating_sub(n)..meta.size));
            if options.if_match.is_none() {
                options.if_match = meta.e_tag;
            }
        }
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
        if !self.list_offset_here {
            return self.inner.list_with_offset(prefix, offset);
        }
        let offset = offset.clone();
        self.inner
            .list(prefix)
            .try_filter(move |meta| futures::future::ready(meta.location > offset))
            .boxed()
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
