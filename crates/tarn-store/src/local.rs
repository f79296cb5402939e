//! The local file system as an object store ([`LocalStore`]): `object_store`'s
//! `LocalFileSystem`, with small ranged reads of cached data done on the calling thread.
//!
//! `LocalFileSystem` runs every read on tokio's blocking pool. For a scan of many small
//! data files that hand-off (waking a pool thread, switching to it and back) costs more
//! than the read: a read of a few hundred KiB from the page cache takes tens of
//! microseconds. On Linux, reads up to [`INLINE_BYTES`] in total, under a root on a local
//! disk file system, run where they are asked for, and only while the kernel can serve
//! them without waiting (`preadv2` with `RWF_NOWAIT`): a read that would wait on the
//! disk, and every read on a network or FUSE mount, goes to the blocking pool as before.
//! On Linux, requests of more than [`INLINE_BYTES`] in total run on the blocking pool as
//! `LocalFileSystem`'s do, but read into buffers that are not zero-filled first
//! (`local_read`). Everything else goes through `LocalFileSystem` unchanged.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Reads of at most this many bytes in total (over a request's ranges) may run on the
/// calling thread.
pub const INLINE_BYTES: u64 = 512 * 1024;

/// The local file system, as `LocalFileSystem` serves it, except for ranged reads on
/// Linux: those of at most [`INLINE_BYTES`] that the page cache holds run on the calling
/// thread instead of tokio's blocking pool (for a root on a local disk), and larger ones
/// read into buffers that are not zero-filled before the read.
/// [`crate::open`] gives this store for local paths.
#[derive(Debug)]
pub struct LocalStore {
    inner: LocalFileSystem,
    /// Whether small reads may run on the calling thread.
    inline: bool,
}

impl LocalStore {
    /// A store over the whole local file system (paths are absolute), whose tables live
    /// under `root`: small reads run on the calling thread only when `root` (or its
    /// nearest existing parent) is on a local disk file system.
    pub fn new(root: &std::path::Path) -> Self {
        Self {
            inner: LocalFileSystem::new(),
            inline: inline::local_disk(root),
        }
    }
}

impl fmt::Display for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalStore({})", self.inner)
    }
}

#[cfg(target_os = "linux")]
mod inline {
    use std::io::IoSliceMut;
    use std::ops::Range;

    use bytes::Bytes;
    use rustix::io::{Errno, ReadWriteFlags, preadv2};

    /// `statfs` magic numbers of file systems on a local disk or in memory, whose opens
    /// and cached reads never wait on a network.
    const LOCAL: [u64; 8] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0x794C_7630, // overlayfs
        0x2FC1_2FC1, // zfs
        0xF2F5_2010, // f2fs
        0x8584_58F6, // ramfs
    ];

    /// Whether `path`, or its nearest existing parent, is on a local file system.
    pub(super) fn local_disk(path: &std::path::Path) -> bool {
        path.ancestors()
            .find_map(|p| rustix::fs::statfs(p).ok())
            .is_some_and(|stat| LOCAL.contains(&((stat.f_type as u64) & 0xFFFF_FFFF)))
    }

    /// Reads `ranges` of the file at `path` if the page cache holds them all: `None` when
    /// a read would wait (or fails in any way but a missing file), for the caller to
    /// read through the blocking pool instead.
    pub(super) fn read_cached(
        path: &std::path::Path,
        ranges: &[Range<u64>],
    ) -> Option<object_store::Result<Vec<Bytes>>> {
        let file = match crate::local_read::open(path)? {
            Ok(file) => file,
            Err(e) => return Some(Err(e)),
        };
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let len = usize::try_from(range.end.checked_sub(range.start)?).ok()?;
            let mut buf = vec![0u8; len];
            let mut filled = 0;
            while filled < len {
                let offset = range.start + filled as u64;
                let mut slices = [IoSliceMut::new(&mut buf[filled..])];
                match preadv2(&file, &mut slices, offset, ReadWriteFlags::NOWAIT) {
                    Ok(n) if n > 0 => filled += n,
                    Err(Errno::INTR) => {}
                    // Past the end, would wait, unsupported or failed: the blocking
                    // pool's read says which, with `LocalFileSystem`'s error.
                    _ => return None,
                }
            }
            out.push(Bytes::from(buf));
        }
        Some(Ok(out))
    }
}

#[cfg(not(target_os = "linux"))]
mod inline {
    use std::ops::Range;

    use bytes::Bytes;

    pub(super) fn local_disk(_path: &std::path::Path) -> bool {
        false
    }

    pub(super) fn read_cached(
        _path: &std::path::Path,
        _ranges: &[Range<u64>],
    ) -> Option<object_store::Result<Vec<Bytes>>> {
        None
    }
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
        if let Some(r) = ranges.iter().find(|r| r.start > r.end) {
            return Err(object_store::Error::Generic {
                store: "LocalStore",
                source: format!("range {r:?} of {location} ends before it starts").into(),
            });
        }
        let total = ranges
            .iter()
            .map(|r| r.end - r.start)
            .fold(0u64, u64::saturating_add);
        if self.inline && total <= INLINE_BYTES {
            let path = self.inner.path_to_filesystem(location)?;
            if let Some(read) = inline::read_cached(&path, ranges) {
                return read;
            }
        }
        #[cfg(target_os = "linux")]
        if total > INLINE_BYTES {
            let path = self.inner.path_to_filesystem(location)?;
            let owned = ranges.to_vec();
            let read = move || crate::local_read::read_ranges(&path, &owned);
            // Outside a tokio runtime, read in place, as `LocalFileSystem` does.
            let read = match tokio::runtime::Handle::try_current() {
                Ok(runtime) => runtime.spawn_blocking(read).await.ok().flatten(),
                Err(_) => read(),
            };
            if let Some(read) = read {
                return read;
            }
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::single_range_in_vec_init)]
    use super::*;
    use object_store::ObjectStoreExt;

    fn store_path(dir: &tempfile::TempDir, name: &str) -> Path {
        Path::from_absolute_path(dir.path().join(name)).unwrap()
    }

    #[test]
    fn the_test_directory_is_on_a_local_disk_and_proc_is_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(inline::local_disk(dir.path()));
        assert!(inline::local_disk(&dir.path().join("not/yet/made")));
        assert!(!inline::local_disk(std::path::Path::new("/proc")));
    }

    #[test]
    fn cached_reads_run_inline_and_a_missing_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &data).unwrap();
        // Just written: in the page cache.
        let got = inline::read_cached(&path, &[0..10, 100..4096])
            .unwrap()
            .unwrap();
        assert_eq!(got[0].as_ref(), &data[0..10]);
        assert_eq!(got[1].as_ref(), &data[100..4096]);
        let missing = inline::read_cached(&dir.path().join("missing"), &[0..4]).unwrap();
        assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
        // Past the end: left to the blocking pool's read, which names the error.
        assert!(inline::read_cached(&path, &[9_000..12_000]).is_none());
    }

    #[tokio::test]
    async fn small_and_large_reads_return_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        assert!(store.inline);
        let path = store_path(&dir, "f");
        let data: Vec<u8> = (0..(2 * INLINE_BYTES as usize)).map(|i| i as u8).collect();
        store.put(&path, data.clone().into()).await.unwrap();
        let got = store.get_ranges(&path, &[0..10, 100..4096]).await.unwrap();
        assert_eq!(got[0].as_ref(), &data[0..10]);
        assert_eq!(got[1].as_ref(), &data[100..4096]);
        // Through the blocking pool: more than INLINE_BYTES.
        let whole = 0..data.len() as u64;
        let got = store.get_ranges(&path, &[whole]).await.unwrap();
        assert_eq!(got[0].as_ref(), &data[..]);
    }

    #[test]
    fn large_reads_work_outside_a_tokio_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let path = store_path(&dir, "f");
        let data: Vec<u8> = (0..(2 * INLINE_BYTES as usize)).map(|i| i as u8).collect();
        std::fs::write(dir.path().join("f"), &data).unwrap();
        let whole = 0..data.len() as u64;
        let got = futures::executor::block_on(store.get_ranges(&path, &[whole])).unwrap();
        assert_eq!(got[0].as_ref(), &data[..]);
    }

    #[tokio::test]
    async fn errors_are_local_file_systems() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let missing = store_path(&dir, "missing");
        let err = store.get_ranges(&missing, &[0..4]).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::NotFound { .. }),
            "{err:?}"
        );
        // Missing, large: the same error as `LocalFileSystem`'s, word for word.
        let large = 0..INLINE_BYTES + 1;
        let err = store
            .get_ranges(&missing, std::slice::from_ref(&large))
            .await
            .unwrap_err();
        let expected = LocalFileSystem::new()
            .get_ranges(&missing, std::slice::from_ref(&large))
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::NotFound { .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), expected.to_string());
        let path = store_path(&dir, "f");
        store.put(&path, vec![1u8; 8].into()).await.unwrap();
        let err = store.get_ranges(&path, &[4..16]).await.unwrap_err();
        let expected = LocalFileSystem::new()
            .get_ranges(&path, &[4..16])
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), expected.to_string());
        // Past the end, large: the unfilled read leaves the error to `LocalFileSystem`.
        let large = 0..INLINE_BYTES + 1;
        let err = store
            .get_ranges(&path, std::slice::from_ref(&large))
            .await
            .unwrap_err();
        let expected = LocalFileSystem::new()
            .get_ranges(&path, &[large])
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), expected.to_string());
        let (start, end) = (6, 2);
        let err = store.get_ranges(&path, &[start..end]).await.unwrap_err();
        assert!(err.to_string().contains("ends before it starts"), "{err}");
    }
}
