//! A read-only tantivy `Directory` over a bundle: the index's files packed in one object,
//! served by byte ranges.
//!
//! Reads are answered, in order, from the hot cache (the bytes any search touches:
//! file footers, the term dictionary; recorded at build time and fetched with the
//! bundle's meta), from a small cache of blocks read before, or with a ranged GET of the
//! missing blocks. Searches run on blocking threads, which may wait on the store.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use tantivy::HasLen;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, OwnedBytes, WatchCallback, WatchHandle, WritePtr,
};

/// Bytes fetched per cached block.
pub(crate) const BLOCK: u64 = 64 * 1024;
/// Blocks kept (4 MiB).
pub(crate) const CACHED_BLOCKS: usize = 64;

/// Where a bundle's bytes come from.
#[derive(Debug)]
pub(crate) enum Source {
    /// The whole bundle in memory (while building), with the ranges read recorded.
    Memory {
        bytes: Bytes,
        recorded: Arc<Mutex<Vec<Range<u64>>>>,
    },
    /// An object in a store, with its hot cache and a block cache.
    Store {
        store: Arc<dyn ObjectStore>,
        path: Path,
        size: u64,
        runtime: tokio::runtime::Handle,
        /// Sorted, disjoint `(start, bytes)` slices of the bundle.
        hot: Vec<(u64, Bytes)>,
        blocks: Mutex<Blocks>,
    },
}

/// Recently read blocks, evicted oldest first.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    map: HashMap<u64, Bytes>,
    order: std::collections::VecDeque<u64>,
}

impl Source {
    /// The bundle's bytes in `range`.
    fn read(&self, range: Range<u64>) -> io::Result<Bytes> {
        match self {
            Source::Memory { bytes, recorded } => {
                recorded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(range.clone());
                bytes
                    .get(range.start as usize..range.end as usize)
                    .map(|b| bytes.slice_ref(b))
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::UnexpectedEof, "read past the bundle")
                    })
            }
            Source::Store {
                store,
                path,
                size,
                runtime,
                hot,
                blocks,
            } => {
                if range.end > *size {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("read {range:?} past the end of {path} ({size} bytes)"),
                    ));
                }
                if range.is_empty() {
                    return Ok(Bytes::new());
                }
                // The hot cache: the last slice starting at or before the range.
                let at = hot.partition_point(|(start, _)| *start <= range.start);
                if at > 0 {
                    let (start, bytes) = &hot[at - 1];
                    if range.end <= start + bytes.len() as u64 {
                        let s = (range.start - start) as usize;
                        return Ok(bytes.slice(s..s + (range.end - range.start) as usize));
                    }
                }
                let first = range.start / BLOCK;
                let last = (range.end - 1) / BLOCK;
                let mut have: HashMap<u64, Bytes> = HashMap::new();
                {
                    let cache = blocks.lock().unwrap_or_else(|p| p.into_inner());
                    for b in first..=last {
                        if let Some(bytes) = cache.map.get(&b) {
                            have.insert(b, bytes.clone());
                        }
                    }
                }
                let missing: Vec<Range<u64>> = (first..=last)
                    .filter(|b| !have.contains_key(b))
                    .map(|b| b * BLOCK..((b + 1) * BLOCK).min(*size))
                    .collect();
                if !missing.is_empty() {
                    let fetched = runtime
                        .block_on(store.get_ranges(path, &missing))
                        .map_err(|e| io::Error::other(format!("reading {path}: {e}")))?;
                    let mut cache = blocks.lock().unwrap_or_else(|p| p.into_inner());
                    for (r, bytes) in missing.iter().zip(fetched) {
                        let b = r.start / BLOCK;
                        have.insert(b, bytes.clone());
                        if cache.map.insert(b, bytes).is_none() {
                            cache.order.push_back(b);
                        }
                        while cache.order.len() > CACHED_BLOCKS {
                            if let Some(old) = cache.order.pop_front() {
                                cache.map.remove(&old);
                            }
                        }
                    }
                }
                let mut out = Vec::with_capacity((range.end - range.start) as usize);
                for b in first..=last {
                    let bytes = have.get(&b).ok_or_else(|| {
                        io::Error::other(format!("block {b} of {path} was not returned"))
                    })?;
                    let block_start = b * BLOCK;
                    let s = range.start.max(block_start) - block_start;
                    let e = range.end.min(block_start + bytes.len() as u64) - block_start;
                    if e < s || e as usize > bytes.len() {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("{path} is shorter than its bundle says"),
                        ));
                    }
                    out.extend_from_slice(&bytes[s as usize..e as usize]);
                }
                Ok(Bytes::from(out))
            }
        }
    }
}

/// The read-only directory of one bundle.
#[derive(Debug, Clone)]
pub(crate) struct BundleDirectory {
    source: Arc<Source>,
    /// Each file's byte range in the bundle.
    files: Arc<HashMap<PathBuf, Range<u64>>>,
    /// Small files tantivy reads whole (`meta.json`), served from the bundle's meta.
    inline: Arc<HashMap<PathBuf, Vec<u8>>>,
}

impl BundleDirectory {
    pub(crate) fn new(
        source: Source,
        files: HashMap<PathBuf, Range<u64>>,
        inline: HashMap<PathBuf, Vec<u8>>,
    ) -> Self {
        Self {
            source: Arc::new(source),
            files: Arc::new(files),
            inline: Arc::new(inline),
        }
    }
}

#[derive(Debug)]
struct BundleFile {
    source: Arc<Source>,
    range: Range<u64>,
}

impl HasLen for BundleFile {
    fn len(&self) -> usize {
        (self.range.end - self.range.start) as usize
    }
}

impl FileHandle for BundleFile {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.end > self.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read {range:?} past a file of {} bytes", self.len()),
            ));
        }
        let start = self.range.start + range.start as u64;
        let bytes = self.source.read(start..start + range.len() as u64)?;
        // `OwnedBytes` wants a stable buffer it owns; a `Vec` is one.
        Ok(OwnedBytes::new(bytes.to_vec()))
    }
}

fn read_only(path: &FsPath) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("the index bundle is read-only ({})", path.display()),
    )
}

impl Directory for BundleDirectory {
    fn get_file_handle(&self, path: &FsPath) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let range = self
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| OpenReadError::FileDoesNotExist(path.to_path_buf()))?;
        Ok(Arc::new(BundleFile {
            source: Arc::clone(&self.source),
            range,
        }))
    }

    fn delete(&self, path: &FsPath) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: Arc::new(read_only(path)),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &FsPath) -> Result<bool, OpenReadError> {
        Ok(self.files.contains_key(path) || self.inline.contains_key(path))
    }

    fn open_write(&self, path: &FsPath) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: Arc::new(read_only(path)),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &FsPath) -> Result<Vec<u8>, OpenReadError> {
        if let Some(bytes) = self.inline.get(path) {
            return Ok(bytes.clone());
        }
        let handle = self.get_file_handle(path)?;
        handle
            .read_bytes(0..handle.len())
            .map(|b| b.as_slice().to_vec())
            .map_err(|e| OpenReadError::IoError {
                io_error: Arc::new(e),
                filepath: path.to_path_buf(),
            })
    }

    fn atomic_write(&self, path: &FsPath, _data: &[u8]) -> io::Result<()> {
        Err(read_only(path))
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        // Nothing writes a bundle: readers need no lock file.
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}
