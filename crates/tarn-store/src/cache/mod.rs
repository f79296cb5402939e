//! `CacheStore`: a local-disk cache of byte ranges of immutable objects.
//!
//! Data files, deletion vectors, checkpoints and index objects never change once written, so
//! a byte read once from S3 can be served from local disk ever after. The cache splits each
//! object into fixed blocks (1 MiB by default); a read is answered from the blocks on disk,
//! and only the missing ones are fetched, one ranged GET per run of adjacent missing blocks,
//! all runs at once. Blocks are evicted least recently used first to stay within a size
//! bound.
//!
//! What may be cached is decided per path by a classifier ([`delta_objects`] by default):
//! commits, `_last_checkpoint`, listings, HEADs and conditional reads always go to the inner
//! store. Checkpoints named by version only (a table deleted and re-created at the same
//! place reuses the name) are checked with one HEAD per path the first time this store
//! reads them; everything else cacheable has a unique name and is trusted. Writes, deletes,
//! copies and renames through this store drop what is cached for the paths they touch.
//!
//! Several stores, in one process or many, may share a cache directory: files are written
//! under temporary names and renamed into place, every block carries a CRC-32 checked on
//! read, and a block that another process evicted is simply a miss. Each process enforces the
//! size bound over the blocks it knows of and rescans the directory after writing an eighth
//! of the bound, so blocks other processes wrote count too.

mod disk;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, RenameOptions, Result, UploadPart,
};

use crate::error::Error;
use disk::DiskCache;

/// Objects larger than this read whole (or from an offset) before their size is known are
/// passed through uncached rather than held in memory at once.
const FIRST_READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Whether, and how, objects at a path may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cacheability {
    /// Always read from the inner store: the object can change (commits, hints, anything
    /// unknown).
    Never,
    /// Never changes at its path (a unique name): cached and trusted.
    Immutable,
    /// Never changes while it exists, but its name can come back with other contents (a
    /// table re-created at the same place): cached, and checked once per store with a HEAD.
    Revalidate,
}

/// The classifier for Delta tables (and Tarn's indices): data files (`*.parquet` outside
/// `_delta_log`), deletion vectors (`deletion_vector_*.bin`) and index objects (under
/// `_tarn_index/`) are immutable; checkpoints and sidecars (`*.parquet` in `_delta_log`) are
/// revalidated; everything else (commits, `_last_checkpoint`, CRC files) is never cached.
pub fn delta_objects(path: &Path) -> Cacheability {
    let name = path.filename().unwrap_or_default();
    let mut in_log = false;
    let mut in_index = false;
    for part in path.parts() {
        match part.as_ref() {
            "_delta_log" => in_log = true,
            "_tarn_index" => in_index = true,
            _ => {}
        }
    }
    if in_log {
        if name.ends_with(".parquet") {
            Cacheability::Revalidate
        } else {
            Cacheability::Never
        }
    } else if in_index
        || name.ends_with(".parquet")
        || (name.starts_with("deletion_vector_") && name.ends_with(".bin"))
    {
        Cacheability::Immutable
    } else {
        Cacheability::Never
    }
}

/// The classifier a cache uses: [`delta_objects`] unless replaced.
pub type Classifier = Arc<dyn Fn(&Path) -> Cacheability + Send + Sync>;

/// Where a [`CacheStore`] keeps its blocks, how much it may keep, and in what block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// The cache directory (created if missing); stores may share it.
    pub dir: PathBuf,
    /// The size bound, in bytes of blocks on disk (default 8 GiB).
    pub capacity: u64,
    /// Block size in bytes (default 1 MiB; at least 4 KiB).
    pub block_size: u64,
}

impl CacheOptions {
    /// A cache in `dir` with the default bound (8 GiB) and block size (1 MiB).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            capacity: 8 << 30,
            block_size: 1 << 20,
        }
    }

    /// Sets the size bound in bytes.
    #[must_use]
    pub fn with_capacity(mut self, bytes: u64) -> Self {
        self.capacity = bytes;
        self
    }

    /// Sets the block size in bytes (raised to 4 KiB if smaller).
    #[must_use]
    pub fn with_block_size(mut self, bytes: u64) -> Self {
        self.block_size = bytes.max(4096);
        self
    }
}

/// What a cache has done since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks served from local disk.
    pub block_hits: u64,
    /// Blocks fetched from the inner store.
    pub block_misses: u64,
    /// Bytes of blocks served from local disk.
    pub bytes_from_cache: u64,
    /// Bytes fetched from the inner store into blocks.
    pub bytes_fetched: u64,
    /// HEADs sent to check a revalidated object.
    pub revalidations: u64,
    /// Blocks evicted to stay within the bound.
    pub evictions: u64,
    /// Bytes on disk this store counts against the bound.
    pub bytes_cached: u64,
}

#[derive(Debug, Default)]
struct Counters {
    block_hits: AtomicU64,
    block_misses: AtomicU64,
    bytes_from_cache: AtomicU64,
    bytes_fetched: AtomicU64,
    revalidations: AtomicU64,
}

/// An [`ObjectStore`] that serves reads of immutable objects from a local-disk block cache,
/// fetching only missing blocks from the store it wraps (see the module docs).
pub struct CacheStore<T = Arc<dyn ObjectStore>> {
    inner: T,
    disk: Arc<DiskCache>,
    block_size: u64,
    classify: Classifier,
    validated: Mutex<HashSet<Path>>,
    counters: Counters,
    dir: PathBuf,
}

impl<T: ObjectStore> CacheStore<T> {
    /// Wraps `inner` with a cache in `options.dir`, which is created if missing and scanned
    /// for blocks already there (blocking briefly on the file system).
    ///
    /// Fails with [`Error::Io`] when the directory cannot be created or read.
    pub fn new(inner: T, options: CacheOptions) -> Result<Self, Error> {
        let io = |source| Error::Io {
            path: options.dir.display().to_string(),
            source,
        };
        let disk = DiskCache::open(&options.dir, options.capacity).map_err(io)?;
        Ok(Self {
            inner,
            disk: Arc::new(disk),
            block_size: options.block_size.max(4096),
            classify: Arc::new(delta_objects),
            validated: Mutex::new(HashSet::new()),
            counters: Counters::default(),
            dir: options.dir,
        })
    }

    /// Replaces the classifier deciding what may be cached.
    #[must_use]
    pub fn with_classifier(mut self, classify: Classifier) -> Self {
        self.classify = classify;
        self
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            block_hits: c.block_hits.load(Ordering::Relaxed),
            block_misses: c.block_misses.load(Ordering::Relaxed),
            bytes_from_cache: c.bytes_from_cache.load(Ordering::Relaxed),
            bytes_fetched: c.bytes_fetched.load(Ordering::Relaxed),
            revalidations: c.revalidations.load(Ordering::Relaxed),
            evictions: self.disk.evictions.load(Ordering::Relaxed),
            bytes_cached: self.disk.bytes_cached(),
        }
    }

    fn cacheable(&self, path: &Path) -> Cacheability {
        (self.classify)(path)
    }

    /// Runs blocking file work off the async threads; `None` if it panicked (a miss).
    async fn blocking<R: Send + 'static>(
        &self,
        work: impl FnOnce(&DiskCache) -> R + Send + 'static,
    ) -> Option<R> {
        let disk = Arc::clone(&self.disk);
        tokio::task::spawn_blocking(move || work(&disk)).await.ok()
    }

    /// Drops what is cached of `path` if it may be cached at all.
    async fn forget(&self, path: &Path) {
        if self.cacheable(path) != Cacheability::Never {
            let owned = path.clone();
            self.blocking(move |disk| disk.remove_object(&owned)).await;
            self.validated
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(path);
        }
    }

    /// Checks a revalidated object once per store: a HEAD compared with the cached metadata;
    /// a different object drops the cache of the path.
    async fn revalidate(&self, path: &Path) -> Result<()> {
        if self.cacheable(path) != Cacheability::Revalidate
            || self
                .validated
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(path)
        {
            return Ok(());
        }
        self.counters.revalidations.fetch_add(1, Ordering::Relaxed);
        let current = self.inner.head(path).await?;
        let owned = current.clone();
        self.blocking(move |disk| {
            if disk
                .read_meta(&owned.location)
                .is_some_and(|cached| !same_object(&cached, &owned))
            {
                disk.remove_object(&owned.location);
            }
            let _ = disk.write_meta(&owned);
        })
        .await;
        self.validated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(current.location);
        Ok(())
    }

    /// Blocks `needed` (sorted, unique) of `path`: from disk where present and whole, the
    /// rest fetched in one ranged GET per run of adjacent missing blocks, all at once.
    /// Returns `None` when the object turned out to differ from the cached metadata (the
    /// cache of the path has then been dropped).
    async fn blocks(
        &self,
        path: &Path,
        known: Option<ObjectMeta>,
        needed: Vec<u64>,
    ) -> Result<Option<(ObjectMeta, BTreeMap<u64, Bytes>)>> {
        let b = self.block_size;
        let mut have: BTreeMap<u64, Bytes> = BTreeMap::new();
        if let Some(meta) = &known {
            let (owned, wanted) = (meta.clone(), needed.clone());
            let found = self
                .blocking(move |disk| {
                    wanted
                        .into_iter()
                        .filter(|&k| k * b < owned.size)
                        .filter_map(|k| {
                            let len = (owned.size - k * b).min(b);
                            disk.read_block(&owned, k, len).map(|bytes| (k, bytes))
                        })
                        .collect::<Vec<_>>()
                })
                .await
                .unwrap_or_default();
            for (k, bytes) in found {
                self.counters.block_hits.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes_from_cache
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                have.insert(k, bytes);
            }
        }
        let size = known.as_ref().map(|m| m.size);
        let runs = missing_runs(&needed, &have, size.map(|s| s.div_ceil(b)));
        if runs.is_empty() {
            // With no metadata nothing was read from disk, so only an empty `needed` gets
            // here: the caller forwards such a read.
            return Ok(known.map(|meta| (meta, have)));
        }
        let fetches = runs.iter().map(|run| {
            let end = size.map_or(run.end * b, |s| (run.end * b).min(s));
            let options = GetOptions {
                range: Some(GetRange::Bounded(run.start * b..end)),
                ..GetOptions::default()
            };
            async move {
                let result = self.inner.get_opts(path, options).await?;
                let (meta, range) = (result.meta.clone(), result.range.clone());
                Ok::<_, object_store::Error>((meta, range, result.bytes().await?))
            }
        });
        let fetched = futures::future::try_join_all(fetches).await?;
        let meta = fetched[0].0.clone();
        let changed = fetched.iter().any(|(m, _, _)| !same_object(m, &meta))
            || known.as_ref().is_some_and(|k| !same_object(k, &meta));
        if changed {
            self.forget(path).await;
            return Ok(None);
        }
        let mut fresh = Vec::new();
        for (_, range, bytes) in fetched {
            let first = range.start / b;
            for (i, chunk) in bytes.chunks(b as usize).enumerate() {
                let k = first + i as u64;
                let start = k * b;
                // Whole: a full block, or the object's last one.
                if chunk.len() as u64 == b || start + chunk.len() as u64 == meta.size {
                    let block = bytes.slice(i * b as usize..i * b as usize + chunk.len());
                    self.counters.block_misses.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .bytes_fetched
                        .fetch_add(block.len() as u64, Ordering::Relaxed);
                    fresh.push((k, block.clone()));
                    have.insert(k, block);
                }
            }
        }
        let (owned, record) = (meta.clone(), known.is_none());
        self.blocking(move |disk| {
            if record {
                let _ = disk.write_meta(&owned);
            }
            for (k, block) in fresh {
                if disk.write_block(&owned, k, &block).is_err() {
                    break; // a full or failing disk: serve, do not cache
                }
            }
        })
        .await;
        Ok(Some((meta, have)))
    }

    /// A GET of a cacheable object whose metadata is not cached and whose range is not
    /// bounded (whole, from an offset, or a suffix): forwarded as is, its metadata and the
    /// whole blocks it covers kept.
    async fn first_read(&self, path: &Path, options: GetOptions) -> Result<GetResult> {
        let result = self.inner.get_opts(path, options).await?;
        let meta = result.meta.clone();
        let range = result.range.clone();
        if range.end - range.start > FIRST_READ_LIMIT {
            self.blocking(move |disk| disk.write_meta(&meta)).await;
            return Ok(result);
        }
        let attributes = result.attributes.clone();
        let bytes = result.bytes().await?;
        let (b, record, data) = (self.block_size, meta.clone(), bytes.clone());
        self.blocking(move |disk| {
            let _ = disk.write_meta(&record);
            let first = range.start.div_ceil(b);
            for k in first.. {
                let start = k * b;
                let end = (start + b).min(record.size);
                if start >= range.end || end > range.end {
                    break;
                }
                let slice = &data[(start - range.start) as usize..(end - range.start) as usize];
                if disk.write_block(&record, k, slice).is_err() {
                    break;
                }
            }
        })
        .await;
        Ok(answer(meta, range, bytes, attributes))
    }

    async fn cached_get(&self, path: &Path, options: GetOptions) -> Result<GetResult> {
        let owned = path.clone();
        let known = self
            .blocking(move |disk| disk.read_meta(&owned))
            .await
            .flatten();
        let requested = match (&options.range, &known) {
            (None, Some(meta)) => 0..meta.size,
            (Some(range), Some(meta)) => range.as_range(meta.size).map_err(|e| invalid(path, e))?,
            (Some(GetRange::Bounded(range)), None) => range.clone(),
            (_, None) => return self.first_read(path, options).await,
        };
        if requested.is_empty() {
            return self.inner.get_opts(path, options).await;
        }
        let b = self.block_size;
        let needed: Vec<u64> = (requested.start / b..requested.end.div_ceil(b)).collect();
        let Some((meta, blocks)) = self.blocks(path, known, needed).await? else {
            return self.inner.get_opts(path, options).await;
        };
        let range = GetRange::Bounded(requested)
            .as_range(meta.size)
            .map_err(|e| invalid(path, e))?;
        let bytes = assemble(&blocks, b, &range);
        Ok(answer(meta, range, bytes, Attributes::default()))
    }
}

fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.size == b.size
        && match (&a.e_tag, &b.e_tag) {
            (Some(x), Some(y)) => x == y,
            _ => a.last_modified == b.last_modified,
        }
}

/// Runs of adjacent blocks in `needed` not in `have`, stopping at `count` blocks if known.
fn missing_runs(
    needed: &[u64],
    have: &BTreeMap<u64, Bytes>,
    count: Option<u64>,
) -> Vec<Range<u64>> {
    let mut runs: Vec<Range<u64>> = Vec::new();
    for &k in needed {
        if have.contains_key(&k) || count.is_some_and(|n| k >= n) {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.end == k => run.end += 1,
            _ => runs.push(k..k + 1),
        }
    }
    runs
}

/// The bytes of `range` out of whole blocks: a slice when one block holds it, else a copy.
fn assemble(blocks: &BTreeMap<u64, Bytes>, b: u64, range: &Range<u64>) -> Bytes {
    let (first, last) = (range.start / b, (range.end - 1) / b);
    if first == last
        && let Some(block) = blocks.get(&first)
    {
        let start = (range.start - first * b) as usize;
        let end = (range.end - first * b) as usize;
        if end <= block.len() {
            return block.slice(start..end);
        }
    }
    let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
    for k in first..=last {
        let Some(block) = blocks.get(&k) else { break };
        let start = range.start.max(k * b) - k * b;
        let end = (range.end.min((k + 1) * b) - k * b).min(block.len() as u64);
        out.extend_from_slice(&block[start as usize..end as usize]);
    }
    out.freeze()
}

fn answer(meta: ObjectMeta, range: Range<u64>, bytes: Bytes, attributes: Attributes) -> GetResult {
    GetResult {
        payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
        meta,
        range,
        attributes,
    }
}

fn invalid(path: &Path, source: impl std::fmt::Display) -> object_store::Error {
    object_store::Error::Generic {
        store: "CacheStore",
        source: format!("invalid range for {path}: {source}").into(),
    }
}

/// True when a GET is a plain read (no HEAD, conditions or version), the only kind cached.
fn plain_read(options: &GetOptions) -> bool {
    !options.head
        && options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
        && options.version.is_none()
}

impl<T: ObjectStore> fmt::Debug for CacheStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheStore")
            .field("dir", &self.dir)
            .field("block_size", &self.block_size)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<T: ObjectStore> fmt::Display for CacheStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheStore({}, {})", self.dir.display(), self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for CacheStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.forget(location).await;
        let result = self.inner.put_opts(location, payload, opts).await;
        self.forget(location).await;
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.forget(location).await;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CacheUpload {
            inner,
            disk: Arc::clone(&self.disk),
            location: location.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if !plain_read(&options) || self.cacheable(location) == Cacheability::Never {
            return self.inner.get_opts(location, options).await;
        }
        self.revalidate(location).await?;
        self.cached_get(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if self.cacheable(location) == Cacheability::Never || ranges.is_empty() {
            return self.inner.get_ranges(location, ranges).await;
        }
        self.revalidate(location).await?;
        let owned = location.clone();
        let known = self
            .blocking(move |disk| disk.read_meta(&owned))
            .await
            .flatten();
        let b = self.block_size;
        let mut needed: Vec<u64> = ranges
            .iter()
            .filter(|r| !r.is_empty())
            .flat_map(|r| r.start / b..r.end.div_ceil(b))
            .collect();
        needed.sort_unstable();
        needed.dedup();
        if needed.is_empty() {
            return self.inner.get_ranges(location, ranges).await;
        }
        let Some((meta, blocks)) = self.blocks(location, known, needed).await? else {
            return self.inner.get_ranges(location, ranges).await;
        };
        ranges
            .iter()
            .map(|r| {
                if r.is_empty() {
                    return Ok(Bytes::new());
                }
                let range = GetRange::Bounded(r.clone())
                    .as_range(meta.size)
                    .map_err(|e| invalid(location, e))?;
                Ok(assemble(&blocks, b, &range))
            })
            .collect()
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let disk = Arc::clone(&self.disk);
        let classify = Arc::clone(&self.classify);
        self.inner
            .delete_stream(locations)
            .and_then(move |path| {
                let disk = Arc::clone(&disk);
                let cacheable = classify(&path) != Cacheability::Never;
                async move {
                    if cacheable {
                        let owned = path.clone();
                        let _ =
                            tokio::task::spawn_blocking(move || disk.remove_object(&owned)).await;
                    }
                    Ok(path)
                }
            })
            .boxed()
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
        self.forget(to).await;
        let result = self.inner.copy_opts(from, to, options).await;
        self.forget(to).await;
        result
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.forget(to).await;
        let result = self.inner.rename_opts(from, to, options).await;
        self.forget(from).await;
        self.forget(to).await;
        result
    }
}

/// A multipart upload through the cache: what was cached of its path is dropped again when
/// it completes.
#[derive(Debug)]
struct CacheUpload {
    inner: Box<dyn MultipartUpload>,
    disk: Arc<DiskCache>,
    location: Path,
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MultipartUpload for CacheUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.inner.complete().await;
        let (disk, location) = (Arc::clone(&self.disk), self.location.clone());
        let _ = tokio::task::spawn_blocking(move || disk.remove_object(&location)).await;
        result
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests;
