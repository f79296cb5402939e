//! The local file system as an object store ([`LocalStore`]): `object_store`'s
//! `LocalFileSystem`, with small ranged reads done on the calling thread.
//!
//! `LocalFileSystem` runs every read on tokio's blocking pool. For a scan of many small
//! data files that hand-off (waking a pool thread, switching to it and back) costs more
//! than the read: a read of a few hundred KiB from the page cache takes tens of
//! microseconds. Reads up to [`INLINE_BYTES`] in total run where they are asked for;
//! larger ones, and everything else, go through `LocalFileSystem` unchanged.

use std::fmt;
use std::fs::File;
use std::io::ErrorKind;
use std::ops::Range;
#[cfg(unix)]
use std::os::unix::fs::FileExt;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Reads of at most this many bytes in total (over a request's ranges) run on the
/// calling thread.
pub const INLINE_BYTES: u64 = 512 * 1024;

/// The local file system, as `LocalFileSystem` serves it, except that ranged reads of at
/// most [`INLINE_BYTES`] run on the calling thread instead of tokio's blocking pool.
/// [`crate::open`] gives this store for local paths.
#[derive(Debug)]
pub struct LocalStore {
    inner: LocalFileSystem,
}

impl LocalStore {
    /// A store over the whole local file system (paths are absolute).
    pub fn new() -> Self {
        Self {
            inner: LocalFileSystem::new(),
        }
    }
}

impl Default for LocalStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalStore({})", self.inner)
    }
}

#[cfg(unix)]
/// The error `LocalFileSystem` gives for the same failure: a missing file is
/// `NotFound`, which readers tell apart from other failures.
fn read_error(path: &std::path::Path, source: std::io::Error) -> object_store::Error {
    match source.kind() {
        ErrorKind::NotFound => object_store::Error::NotFound {
            path: path.to_string_lossy().to_string(),
            source: Box::new(source),
        },
        _ => object_store::Error::Generic {
            store: "LocalStore",
            source: format!("reading {}: {source}", path.display()).into(),
        },
    }
}

#[cfg(unix)]
fn range_error(path: &std::path::Path, range: &Range<u64>, message: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalStore",
        source: format!("range {range:?} of {}: {message}", path.display()).into(),
    }
}

#[cfg(unix)]
/// Reads `ranges` of the file at `path`, each whole: a range that runs past the end of
/// the file is an error, as in `LocalFileSystem`.
fn read_ranges(path: &std::path::Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
    let file = File::open(path).map_err(|e| read_error(path, e))?;
    ranges
        .iter()
        .map(|range| {
            let len = range
                .end
                .checked_sub(range.start)
                .ok_or_else(|| range_error(path, range, "ends before it starts"))?;
            let mut buf = vec![0u8; len as usize];
            let mut filled = 0;
            while filled < buf.len() {
                match file.read_at(&mut buf[filled..], range.start + filled as u64) {
                    Ok(0) => return Err(range_error(path, range, "past the end of the file")),
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(read_error(path, e)),
                }
            }
            Ok(Bytes::from(buf))
        })
        .collect()
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for LocalStore {
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
        let total = ranges
            .iter()
            .map(|r| r.end.saturating_sub(r.start))
            .fold(0u64, u64::saturating_add);
        #[cfg(unix)]
        if total <= INLINE_BYTES {
            let path = self.inner.path_to_filesystem(location)?;
            return read_ranges(&path, ranges);
        }
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

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::single_range_in_vec_init)]
    use super::*;
    use object_store::ObjectStoreExt;

    fn store_path(dir: &tempfile::TempDir, name: &str) -> Path {
        Path::from_absolute_path(dir.path().join(name)).unwrap()
    }

    #[tokio::test]
    async fn small_and_large_reads_return_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let path = store_path(&dir, "f");
        let data: Vec<u8> = (0..(2 * INLINE_BYTES as usize)).map(|i| i as u8).collect();
        store.put(&path, data.clone().into()).await.unwrap();
        // Inline: two small ranges.
        let got = store.get_ranges(&path, &[0..10, 100..4096]).await.unwrap();
        assert_eq!(got[0].as_ref(), &data[0..10]);
        assert_eq!(got[1].as_ref(), &data[100..4096]);
        // Through the blocking pool: more than INLINE_BYTES.
        let whole = 0..data.len() as u64;
        let got = store.get_ranges(&path, &[whole]).await.unwrap();
        assert_eq!(got[0].as_ref(), &data[..]);
    }

    #[tokio::test]
    async fn a_missing_file_is_not_found_and_a_short_range_fails() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let missing = store_path(&dir, "missing");
        let err = store.get_ranges(&missing, &[0..4]).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::NotFound { .. }),
            "{err:?}"
        );
        let path = store_path(&dir, "f");
        store.put(&path, vec![1u8; 8].into()).await.unwrap();
        let err = store.get_ranges(&path, &[4..16]).await.unwrap_err();
        assert!(err.to_string().contains("past the end"), "{err}");
        let (start, end) = (6, 2);
        let err = store.get_ranges(&path, &[start..end]).await.unwrap_err();
        assert!(err.to_string().contains("ends before it starts"), "{err}");
    }
}
