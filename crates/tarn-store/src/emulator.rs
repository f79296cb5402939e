//! An Azure store reached through Azurite, the Azure Storage emulator, at any address.
//!
//! `object_store` finds the emulator at `http://127.0.0.1:10000` or the address in
//! `AZURITE_BLOB_STORAGE_URL`, and ignores an `endpoint` option. Tarn takes
//! `use_emulator=true` with an `endpoint` to mean the emulator there: it addresses the
//! account path-style under that endpoint, as Azurite expects, and wraps the store in
//! [`ListsFromOffsetHere`], because Azurite ignores the `startFrom` parameter a listing
//! from an offset sends (object_store's emulator mode filters the same way).

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// The emulator's well-known account, used when none is given.
pub(crate) const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The emulator's well-known account key (published in Azurite's documentation), used when
/// no credential is given.
pub(crate) const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A store whose listings from an offset list everything under the prefix and drop what
/// is not past the offset (the trait's own way), for a server that ignores the offset.
#[derive(Debug)]
pub(crate) struct ListsFromOffsetHere<T>(pub(crate) T);

impl<T: ObjectStore> std::fmt::Display for ListsFromOffsetHere<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (emulator)", self.0)
    }
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for ListsFromOffsetHere<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.0.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.0.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.0.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.0.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.0.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.0.rename_opts(from, to, options).await
    }
}
